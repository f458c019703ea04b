"""Volcano: the documented HyperNode examples, the three selectors as Volcano applies them,
and each rule Volcano states as one located error."""
import json

import pytest

from placement.managers import Tiers, TopologyFileError, read_volcano

from .conftest import DOCS, node


def hypernode(name: str, tier, members: list[dict]) -> dict:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "members": members}}


def exact(kind: str, name: str) -> dict:
    return {"type": kind, "selector": {"exactMatch": {"name": name}}}


def as_yaml(*objects: dict) -> str:
    """Several documents (JSON is YAML), as ``kubectl get hypernodes -o yaml`` would not write them."""
    return "\n---\n".join(json.dumps(o) for o in objects)


def test_the_documented_tree_of_hypernodes(node_list):
    nodes = node_list([node(f"node-{i}") for i in range(8)])
    t = read_volcano(str(DOCS / "volcano-tree.yaml"), nodes, Tiers(gbps=(10, 20, 30)))
    assert t.root == "s6" and [s.id for s in t.switches] == ["s6", "s4", "s0", "s1", "s5", "s2", "s3"]
    assert t.ancestors("node-5") == ["node-5", "s2", "s5", "s6"]
    assert {(l.a, l.gbps) for l in t.links if l.a.startswith("s")} == {
        ("s0", 20), ("s1", 20), ("s2", 20), ("s3", 20), ("s4", 30), ("s5", 30)}
    assert {l.gbps for l in t.links if l.a.startswith("node")} == {10}


def test_the_documented_label_example_needs_its_rack_2(node_list, write):
    nodes = node_list([node("a", {"topology-rack": "rack-1"}), node("b", {"topology-rack": "rack-1"}),
                       node("c", {"topology-rack": "rack-2"}), node("d", {"topology-rack": "rack-9"})])
    page = (DOCS / "volcano-labels.yaml").read_text()
    with pytest.raises(TopologyFileError) as info:
        read_volcano(write("page.yaml", page), nodes)
    assert str(info.value).endswith("page.yaml: document 2 (HyperNode zone-a): spec.members[1]: selector.exactMatch: "
                                    "HyperNode rack-2 is not defined")
    rack_2 = hypernode("rack-2", 1, [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {
        "topology-rack": "rack-2"}}}}])
    t = read_volcano(write("full.yaml", page + "---\n" + json.dumps(rack_2)), nodes)
    assert t.root == "zone-a" and [m.id for m in t.machines] == ["a", "b", "c"]  # d is in no HyperNode: left out
    assert t.parent("a") == "rack-1" and t.parent("c") == "rack-2"


def test_regex_matches_anywhere_in_the_name_as_volcano_does(node_list, write):
    nodes = node_list([node(n) for n in ("gpu-1", "gpu-10", "xgpu-1", "cpu-1")])
    loose = hypernode("loose", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-1"}}}])
    t = read_volcano(write("h.yaml", as_yaml(loose)), nodes)
    assert [m.id for m in t.machines] == ["gpu-1", "gpu-10", "xgpu-1"]
    anchored = hypernode("anchored", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-1$"}}}])
    assert [m.id for m in read_volcano(write("a.yaml", as_yaml(anchored)), nodes).machines] == ["gpu-1"]


def test_a_pattern_that_backtracks_in_pythons_re_runs_in_linear_time(node_list, write):
    """RE2, as Go's regexp (was Python's re: this pattern over a 40-letter name never ended)."""
    nodes = node_list([node("a" * 40), node("a" * 39 + "b")])
    h = hypernode("s0", 1, [{"type": "Node", "selector": {"regexMatch": {"pattern": "^(a+)+b$"}}}])
    assert [m.id for m in read_volcano(write("h.yaml", as_yaml(h)), nodes).machines] == ["a" * 39 + "b"]


def test_label_selectors_with_expressions_and_an_empty_one(node_list, write):
    nodes = node_list([node("a", {"rack": "r1", "gpu": "h100"}), node("b", {"rack": "r2", "gpu": "h100"}),
                       node("c", {"rack": "r3"}), node("d", {"rack": "r1", "spare": "yes"})])
    rules = {"matchLabels": {"gpu": "h100"}, "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                                                                  {"key": "spare", "operator": "DoesNotExist"}]}
    others = {"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["r2"]},
                                   {"key": "gpu", "operator": "Exists"}]}
    found = hypernode("found", 1, [{"type": "Node", "selector": {"labelMatch": rules}}])
    empty = hypernode("empty", 1, [{"type": "Node", "selector": {"labelMatch": {}}}])
    t = read_volcano(write("h.yaml", as_yaml(found, empty)), nodes)
    assert t.root == "found" and [m.id for m in t.machines] == ["a", "b"]  # "empty" selects nothing: dropped
    t = read_volcano(write("o.json", {"kind": "HyperNodeList", "items": [
        hypernode("o", "1", [{"type": "Node", "selector": {"labelMatch": others}}])]}), nodes)
    assert [m.id for m in t.machines] == ["a"]  # NotIn also takes nodes without the key; Exists then needs gpu


def member(selector: dict, kind: str = "Node") -> dict:
    return {"type": kind, "selector": selector}


@pytest.mark.parametrize("objects, message", [
    ([hypernode("s0", 1, [exact("Node", "n1")]), hypernode("s1", 1, [exact("Node", "n1")])],
     "document 2 (HyperNode s1): spec.members[0]: selector.exactMatch: node n1 is under two HyperNodes: s0 (document 1 "
     "(HyperNode s0): spec.members[0]: selector.exactMatch) and s1"),
    ([hypernode("s0", 1, [exact("Node", "n1")]), hypernode("top", 1, [exact("HyperNode", "s0")])],
     "document 2 (HyperNode top): spec.members[0]: selector.exactMatch: HyperNode s0 has tier 1, not below this "
     "HyperNode's tier 1"),
    ([hypernode("s0", 1, [exact("Node", "n1"), exact("HyperNode", "s1")]), hypernode("s1", 0, [exact("Node", "n2")])],
     "document 1 (HyperNode s0): spec.members: has both Node and HyperNode members (a HyperNode holds one kind)"),
    ([hypernode("s0", 2, [member({"regexMatch": {"pattern": "s"}}, "HyperNode")])],
     "document 1 (HyperNode s0): spec.members[0]: selector.regexMatch: a HyperNode member is chosen by exactMatch "
     "only (Volcano)"),
    ([hypernode("s0", 1, [member({"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n"}})])],
     "document 1 (HyperNode s0): spec.members[0]: selector: give exactly one of exactMatch, regexMatch, labelMatch, "
     "got 2"),
    ([hypernode("s0", 1, [exact("Node", "n9")])],
     "document 1 (HyperNode s0): spec.members[0]: selector.exactMatch: node n9 is not defined in nodes.json"),
    ([hypernode("a", 2, [exact("HyperNode", "b")]), hypernode("b", 3, [exact("HyperNode", "a")])],
     "document 1 (HyperNode a): spec.members[0]: selector.exactMatch: HyperNode b has tier 3, not below this "
     "HyperNode's tier 2"),
    ([hypernode("s0", 1, [exact("Node", "n1")]), hypernode("a", 2, [exact("HyperNode", "s0")]),
      hypernode("b", 2, [exact("HyperNode", "s0")])],
     "document 3 (HyperNode b): spec.members[0]: selector.exactMatch: HyperNode s0 is under two HyperNodes: a "
     "(document 2 (HyperNode a): spec.members[0]: selector.exactMatch) and b"),
    ([hypernode("s0", 1, [member({"regexMatch": {"pattern": "n[1"}})])],
     "document 1 (HyperNode s0): spec.members[0]: selector.regexMatch: pattern: not an RE2 regular expression "
     "(Volcano's Go syntax): missing ]: [1"),
    ([hypernode("s0", 1, [member({"regexMatch": {"pattern": "gpu(?=1)"}})])],   # Go refuses lookarounds
     "document 1 (HyperNode s0): spec.members[0]: selector.regexMatch: pattern: not an RE2 regular expression "
     "(Volcano's Go syntax): invalid perl operator: (?="),
    ([hypernode("s0", 1, [])], "document 1 (HyperNode s0): spec.members: must list at least one member"),
    ([hypernode("s0", -1, [exact("Node", "n1")])], "document 1 (HyperNode s0): spec.tier: must be >= 0, got -1"),
    ([hypernode("s0", "one", [exact("Node", "n1")])],
     "document 1 (HyperNode s0): spec.tier: must be a whole number >= 0, got 'one'"),
    ([hypernode("s0", 1, [{"type": "Rack", "selector": {}}])],
     "document 1 (HyperNode s0): spec.members[0]: type: expected Node or HyperNode, got 'Rack'"),
    ([hypernode("s0", 1, [member({"labelMatch": {"matchExpressions": [{"key": "k", "operator": "In"}]}})])],
     "document 1 (HyperNode s0): spec.members[0]: selector.labelMatch: matchExpressions[0]: values: In takes a list "
     "of strings"),
    ([hypernode("s0", 1, [member({"labelMatch": {"matchExpressions": [{"key": "k", "operator": "Gt"}]}})])],
     "document 1 (HyperNode s0): spec.members[0]: selector.labelMatch: matchExpressions[0]: operator: expected one of "
     "In, NotIn, Exists, DoesNotExist, got 'Gt'"),
    ([{**hypernode("s0", 1, [exact("Node", "n1")]), "kind": "Node"}], "document 1: kind 'Node', expected HyperNode"),
    ([{**hypernode("s0", 1, [exact("Node", "n1")]), "apiVersion": "v1"}],
     "document 1: apiVersion: expected topology.volcano.sh/v1alpha1, got 'v1'"),
    ([hypernode("n1", 1, [exact("Node", "n1")])],
     "items[0] (node n1): n1 is defined twice (first at hypernodes.yaml document 1 (HyperNode n1)); names are unique "
     "among nodes and HyperNodes"),
])
def test_volcanos_rules_are_located_errors(write, node_list, objects, message):
    path = write("hypernodes.yaml", as_yaml(*objects) if len(objects) > 1 else "---\n" + as_yaml(*objects))
    nodes = node_list([node("n1"), node("n2")])
    with pytest.raises(TopologyFileError) as info:
        read_volcano(path, nodes)
    shown = str(info.value).replace(str(path), "hypernodes.yaml").replace(nodes, "nodes.json")
    expected = message if message.startswith("items[") else f"hypernodes.yaml: {message}"
    assert shown == (f"nodes.json: {expected}" if message.startswith("items[") else expected)
