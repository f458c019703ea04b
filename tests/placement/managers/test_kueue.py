"""Kueue: the documented node table and Topology objects, domain ids, level rules, and each
malformed node list or Topology file as one located error."""
import pytest

from placement.managers import Tiers, TopologyFileError, read_kueue
from placement.managers.kueue import topology_levels

from .conftest import DOCS, node

BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"


def docs_nodes(node_list):
    """The node table of Kueue's Topology Aware Scheduling page (rack-1 is in both blocks),
    https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/ (node-1 to node-4)."""
    table = [("node-1", "block-1", "rack-1"), ("node-2", "block-1", "rack-2"),
             ("node-3", "block-2", "rack-1"), ("node-4", "block-2", "rack-3")]
    return node_list([node(name, {BLOCK: block, RACK: rack}) for name, block, rack in table])


def test_the_documented_node_table_under_the_documented_topology(node_list):
    t = read_kueue(docs_nodes(node_list), topology=str(DOCS / "kueue-queues.yaml"))
    # the two racks named rack-1 are two domains: qualified by their block; unique rack names are kept
    assert [s.id for s in t.switches] == ["root", "block-1", "block-1/rack-1", "rack-2", "block-2",
                                          "block-2/rack-1", "rack-3"]
    assert t.ancestors("node-1") == ["node-1", "block-1/rack-1", "block-1", "root"]
    assert t.ancestors("node-3") == ["node-3", "block-2/rack-1", "block-2", "root"]
    assert t.parent("node-4") == "rack-3" and t.parent("rack-3") == "block-2"
    assert {(l.a, l.gbps) for l in t.links if l.b == "root"} == {("block-1", 100), ("block-2", 100)}
    assert t.machines[0].capacity == {"gpu": 8, "cpu": 64, "mem": 512}


def test_a_last_hostname_level_is_the_machines_themselves(node_list):
    path = docs_nodes(node_list)
    with_host = read_kueue(path, levels=[BLOCK, RACK, HOST])
    assert read_kueue(path, levels=[BLOCK, RACK]) == with_host
    assert read_kueue(path, topology=str(DOCS / "kueue-queues.yaml")) == with_host
    only_hosts = read_kueue(path, levels=[HOST], tiers=Tiers(gbps=(40,)))
    assert only_hosts.root == "root" and {l.b for l in only_hosts.links} == {"root"}
    assert {l.gbps for l in only_hosts.links} == {40}


def test_the_four_level_topology_of_the_concept_page(node_list):
    levels = topology_levels(str(DOCS / "kueue-topology.yaml"))
    assert levels == ["topology.kubernetes.io/zone", BLOCK, RACK, HOST]
    zone = "topology.kubernetes.io/zone"
    path = node_list([node("a", {zone: "z1", BLOCK: "b1", RACK: "r1"}), node("b", {zone: "z1", BLOCK: "b1", RACK: "r2"}),
                      node("c", {zone: "z2", BLOCK: "b1", RACK: "r1"})])
    t = read_kueue(path, levels=levels, tiers=Tiers(gbps=(1, 2, 3)))
    assert t.ancestors("c") == ["c", "z2/b1/r1", "z2/b1", "z2", "root"]
    assert t.ancestors("b") == ["b", "r2", "z1/b1", "z1", "root"]
    assert {(l.a, l.gbps) for l in t.links if not l.a.startswith(("a", "b", "c"))} == {
        ("z1", 3), ("z2", 3), ("z1/b1", 3), ("z2/b1", 3), ("z1/b1/r1", 2), ("r2", 2), ("z2/b1/r1", 2)}


def test_a_value_shared_across_levels_or_with_a_node_is_qualified(node_list):
    path = node_list([node("n1", {BLOCK: "x", RACK: "x"}), node("x2", {BLOCK: "y", RACK: "n1"})])
    t = read_kueue(path, levels=[BLOCK, RACK])
    assert t.ancestors("n1") == ["n1", "x/x", "x", "root"] and t.ancestors("x2") == ["x2", "y/n1", "y", "root"]


def test_json_and_yaml_node_lists_of_every_shape_are_read(write):
    yaml_list = "\n---\n".join(f"kind: Node\nmetadata:\n  name: n{i}\n  labels: {{{RACK}: r}}\n"
                               f"status:\n  allocatable: {{nvidia.com/gpu: 4, cpu: 95500m, memory: 1056Gi}}"
                               for i in (1, 2))
    t = read_kueue(write("nodes.yaml", yaml_list), levels=[RACK])
    assert [m.capacity for m in t.machines] == [{"gpu": 4, "cpu": 95.5, "mem": 1056}] * 2
    plain = write("list.json", {"kind": "List", "items": [node("n1", {RACK: "r"})]})
    assert [m.id for m in read_kueue(plain, levels=[RACK]).machines] == ["n1"]


@pytest.mark.parametrize("items, message", [
    ([node("n1", {RACK: "r"}), node("n2", {})], "items[1] (node n2): no label cloud.provider.com/topology-rack "
                                                 "(a level of the Topology)"),
    ([node("n1", {RACK: ""})], "items[0] (node n1): label cloud.provider.com/topology-rack is empty (a level of the "
                               "Topology)"),
    ([node("n1", {RACK: "r"}, memory="12Qi")], "items[0] (node n1): status.allocatable['memory']: '12Qi' is not a "
                                               "Kubernetes quantity (Invalid number format: 12Qi)"),
    ([node("n1", {RACK: "r"}, cpu="-4")], "items[0] (node n1): status.allocatable['cpu']: '-4' is not a finite "
                                          "quantity >= 0"),
    ([node("n1", {RACK: "r"}, gpu=None)], "items[0] (node n1): no nvidia.com/gpu in status.allocatable (every machine "
                                          "in the tree needs GPUs)"),
    ([node("n1", {RACK: "r"}, gpu="0")], "items[0] (node n1): no nvidia.com/gpu in status.allocatable (every machine "
                                         "in the tree needs GPUs)"),
    ([node("n1", {RACK: "r"}), node("n1", {RACK: "r"})], "items[1] (node n1): node n1 is listed twice (first at "
                                                         "items[0] (node n1))"),
    ([{"kind": "Pod", "metadata": {"name": "p"}}], "items[0]: kind 'Pod', expected Node (a node list: kubectl get "
                                                   "nodes -o json)"),
    ([{"kind": "Node", "metadata": {}}], "items[0]: metadata.name: missing"),
    ([{"kind": "Node", "metadata": {"name": 7}}], "items[0]: metadata.name: must be a non-empty string, got a number"),
    ([{"kind": "Node", "metadata": {"name": "n", "labels": {RACK: 3}}}],
     "items[0] (node n): metadata.labels['cloud.provider.com/topology-rack']: must be a string, got a number"),
    (["n1"], "items[0]: expected an object (a mapping of keys), got a string"),
])
def test_bad_nodes_are_named_by_item(node_list, items, message):
    path = node_list(items)
    with pytest.raises(TopologyFileError) as info:
        read_kueue(path, levels=[RACK, HOST])
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("text, message", [
    ('{"kind": "NodeList", "items": [}', "not valid JSON: Expecting value at line 1 column 32"),
    ("kind: NodeList\nitems: [a, b\n", "line 3 column 1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ("a: &x [1]\nb: *x\n", "line 2 column 4: not valid YAML: aliases (*name) are not supported"),
    ('{"kind": "NodeList", "items": {}}', "items: must be a list"),
    ('{"kind": "NodeList", "items": [], "kind": "List"}', "kind: the key 'kind' appears twice in one object"),
    ("kind: NodeList\nitems: []\n", "no nodes (expected a node list: kubectl get nodes -o json)"),
    ("", "no nodes (expected a node list: kubectl get nodes -o json)"),
])
def test_unreadable_node_lists_are_located(write, text, message):
    path = write("nodes.txt", text)
    with pytest.raises(TopologyFileError) as info:
        read_kueue(path, levels=[RACK])
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("text, message", [
    ("kind: ResourceFlavor\n", "no Topology object (kind: Topology, apiVersion: kueue.x-k8s.io/...)"),
    ("kind: Topology\nmetadata: {name: a}\n---\nkind: Topology\nmetadata: {name: b}\n",
     "2 Topology objects (a, b); keep the one to import"),
    ("apiVersion: v1\nkind: Topology\n", "document 1: apiVersion: expected kueue.x-k8s.io/v1beta1 (or v1alpha1, "
                                         "v1beta2), got 'v1'"),
    ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: t}\nspec: {levels: []}\n",
     "document 1 (Topology t): spec.levels: expected 1 to 16 levels (node labels, top down), got 0"),
    (f"apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {{name: t}}\nspec:\n  levels:\n"
     f"  - nodeLabel: {HOST}\n  - nodeLabel: {RACK}\n",
     f"document 1 (Topology t): spec.levels: level 1: {HOST} may only be the last (lowest) level"),
    ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\nmetadata: {name: t}\nspec:\n  levels:\n  - label: x\n",
     "document 1 (Topology t): spec.levels[0]: nodeLabel: missing"),
])
def test_bad_topology_objects_are_located(write, node_list, text, message):
    path = write("topology.yaml", text)
    with pytest.raises(TopologyFileError) as info:
        read_kueue(node_list([node("n1", {RACK: "r"})]), topology=path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("kwargs, message", [
    ({}, "kueue needs the Topology's levels: give --levels LABEL,... or --topology FILE (one of the two)"),
    ({"levels": [RACK], "topology": "t.yaml"}, "kueue needs the Topology's levels: give --levels LABEL,... or "
                                               "--topology FILE (one of the two)"),
    ({"levels": [RACK, RACK]}, "--levels: level 2: cloud.provider.com/topology-rack is given twice"),
    ({"levels": [f"l{i}" for i in range(17)]}, "--levels: expected 1 to 16 levels (node labels, top down), got 17"),
    ({"levels": [" x"]}, "--levels: level 1: ' x' is not a node label"),
])
def test_the_levels_are_given_once_and_follow_kueues_rules(node_list, kwargs, message):
    with pytest.raises(ValueError) as info:
        read_kueue(node_list([node("n1", {RACK: "r"})]), **kwargs)
    assert str(info.value) == message
