"""``placement import-topology``: the shipped cluster described three ways gives one topology,
its skeleton drives generate and simulate, and every bad input is one located line with exit
code 2 and nothing written."""
import json
import re
import sys

import pytest

from placement.cli import main
from placement.managers import Tiers, import_topology
from placement.model.cluster_spec import parse_cluster
from placement.model.instance import Instance

from .conftest import ROOT, SHIPPED, node

SLURM = ["slurm", str(SHIPPED / "slurm" / "topology.conf"), "--nodes", str(SHIPPED / "slurm" / "slurm.conf")]
KUEUE = ["kueue", str(SHIPPED / "kueue" / "nodes.json"), "--topology", str(SHIPPED / "kueue" / "topology.yaml")]
VOLCANO = ["volcano", str(SHIPPED / "volcano" / "hypernodes.yaml"), "--nodes", str(SHIPPED / "volcano" / "nodes.json")]
TRACE = str(ROOT / "instances" / "traces" / "philly-30-s3.csv")


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_shipped_cluster_is_one_topology_in_three_formats():
    tiers = Tiers(gbps=(25, 100), local_gbps=400)
    slurm = import_topology("slurm", SLURM[1], nodes=SLURM[3], tiers=tiers, name="c")
    kueue = import_topology("kueue", KUEUE[1], kueue_topology=KUEUE[3], tiers=tiers, name="c")
    volcano = import_topology("volcano", VOLCANO[1], nodes=VOLCANO[3], tiers=tiers, name="c")
    assert slurm.topology == kueue.topology == volcano.topology
    assert slurm.to_dict() == kueue.to_dict() == volcano.to_dict()
    t = slurm.topology
    assert [s.id for s in t.switches] == ["root", "block1", "rack1", "rack2", "block2", "rack3", "rack4"]
    assert [m.id for m in t.machines] == [f"gpu{i:02d}" for i in range(1, 17)]  # login01 is outside the tree
    assert {m.id: m.capacity for m in t.machines}["gpu09"] == {"gpu": 8, "cpu": 96, "mem": 1024}
    assert t.ancestors("gpu09") == ["gpu09", "rack3", "block2", "root"]
    assert {(l.a[:4], l.gbps) for l in t.links} == {("gpu0", 25), ("gpu1", 25), ("rack", 100), ("bloc", 100)}


def test_the_command_writes_a_skeleton_that_generate_and_simulate_read(capsys, tmp_path):
    out = tmp_path / "cluster.json"
    code, stdout, err = run(capsys, "import-topology", *SLURM, "--gbps", "10,40,160", "--out", out)
    assert code == 0 and err == ""
    assert stdout == f"wrote {out}: 16 machines, 7 switches, depth 3, 128 GPUs\n"
    skeleton = Instance.load(out)
    assert skeleton.name == "topology" and skeleton.jobs == () and skeleton.horizon == 1
    assert {l.gbps for l in skeleton.topology.links if l.b == "root"} == {160}
    assert parse_cluster(str(out)) == skeleton.topology
    code, stdout, err = run(capsys, "generate", "--jobs", "4", "--cluster", out, "--seed", "2",
                            "--out", tmp_path / "jobs.json")
    assert code == 0 and Instance.load(tmp_path / "jobs.json").topology == skeleton.topology
    code, stdout, err = run(capsys, "simulate", "--trace", TRACE, "--cluster", out, "--policy", "greedy")
    assert code == 0 and "violations        0" in stdout


def test_without_out_the_skeleton_goes_to_stdout_under_its_name(capsys):
    code, stdout, err = run(capsys, "import-topology", *KUEUE, "--name", "tas", "--local-gbps", "900")
    doc = json.loads(stdout)
    assert code == 0 and doc["name"] == "tas" and doc["jobs"] == []
    assert {m["local_gbps"] for m in doc["topology"]["machines"]} == {900}


def test_kueue_levels_on_the_command_line_match_the_topology_file(capsys, tmp_path):
    levels = "cloud.provider.com/topology-block,cloud.provider.com/topology-rack,kubernetes.io/hostname"
    run(capsys, "import-topology", *KUEUE, "--out", tmp_path / "a.json")
    run(capsys, "import-topology", *KUEUE[:2], "--levels", levels, "--out", tmp_path / "b.json")
    assert json.loads((tmp_path / "a.json").read_text())["topology"] == json.loads(
        (tmp_path / "b.json").read_text())["topology"]


def bad_files(write, node_list):
    """(argv, the error after 'placement: error: ') for each class of bad input."""
    conf = write("slurm.conf", "NodeName=n[1-4] Gres=gpu:8 CPUs=8\nNodeName=cpu1 CPUs=8\n")
    cases = iter(range(100))
    topo = lambda text: write(f"case{next(cases)}/topology.conf", text)  # noqa: E731
    nodes = node_list([node("n1", {"rack": "r1"}), node("n2", {})])
    cpu_node = node_list([node("n1", {"rack": "r1"}, gpu=None)], "cpu.json")
    bad_memory = node_list([node("n1", {"rack": "r1"}, memory="lots")], "mem.json")
    hyper = lambda text: write(f"case{next(cases)}/hypernodes.yaml", text)  # noqa: E731
    two = ("apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: %s}\nspec:\n  tier: 1\n"
           "  members: [{type: Node, selector: {exactMatch: {name: n1}}}]\n")
    return [
        (["slurm", topo("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n2\n"), "--nodes", conf],
         "topology.conf: line 2: node n2 is under two switches: s0 (line 1) and s1"),
        (["slurm", topo("SwitchName=s0 Nodes=n1\nSwitchName=s1 Switches=s[0,9]\n"), "--nodes", conf],
         "topology.conf: line 2: switch s9 is not defined"),
        (["slurm", topo("SwitchName=s0 Switches=s1\nSwitchName=s1 Switches=s0\nSwitchName=s2 Nodes=n1\n"), "--nodes",
          conf], "topology.conf: line 1: the switches form a cycle: s0 under s1 under s0"),
        (["slurm", topo("# leaves\nSwitchName=s0 Nodes=n[1-2,\n"), "--nodes", conf],
         "topology.conf: line 2: Nodes=n[1-2,: not a hostlist expression (unbalanced brackets)"),
        (["slurm", topo("SwitchName=s0 Nodes=n1,cpu1\n"), "--nodes", conf],
         "slurm.conf: line 2: no gpu in its Gres (every machine in the tree needs GPUs)"),
        (["slurm", topo("SwitchName=s0 Nodes=n1\n")], "slurm needs slurm.conf for the nodes' GPUs, CPUs and memory: "
                                                      "--nodes slurm.conf"),
        (["slurm", topo("SwitchName=s0 Nodes=n1\n"), "--nodes", conf, "--levels", "rack"],
         "--levels and --topology are for kueue, not slurm"),
        (["kueue", nodes, "--levels", "rack"], "nodes.json: items[1] (node n2): no label rack (a level of the Topology)"),
        (["kueue", cpu_node, "--levels", "rack"],
         "cpu.json: items[0] (node n1): no nvidia.com/gpu in status.allocatable (every machine in the tree needs GPUs)"),
        (["kueue", bad_memory, "--levels", "rack"], "mem.json: items[0] (node n1): status.allocatable['memory']: "
                                                    "'lots' is not a Kubernetes quantity (Invalid number format: lots)"),
        (["kueue", nodes, "--topology", write("t.yaml", "kind: Topology\nspec: [levels\n")],
         "t.yaml: line 3 column 1: not valid YAML: expected ',' or ']', but got '<stream end>'"),
        (["kueue", nodes], "kueue needs the Topology's levels: give --levels LABEL,... or --topology FILE (one of the "
                           "two)"),
        (["kueue", nodes, "--levels", "rack", "--topology", write("t2.yaml", "kind: Topology\n")],
         "kueue needs the Topology's levels: give --levels LABEL,... or --topology FILE (one of the two)"),
        (["kueue", nodes, "--levels", "rack", "--nodes", conf], "kueue reads the node list given as FILE; --nodes is "
                                                                "not used"),
        (["volcano", hyper(two % "s0" + "---\n" + two % "s1"), "--nodes", nodes],
         "hypernodes.yaml: document 2 (HyperNode s1): spec.members[0]: selector.exactMatch: node n1 is under two "
         "HyperNodes: s0 (document 1 (HyperNode s0): spec.members[0]: selector.exactMatch) and s1"),
        (["volcano", hyper(two % "s0")], "volcano needs the node list for the nodes' capacities and labels: --nodes "
                                         "nodes.json (kubectl get nodes -o json)"),
        (["volcano", hyper("kind: HyperNode\n  bad: indent\n"), "--nodes", nodes],
         "hypernodes.yaml: line 2 column 6: not valid YAML: mapping values are not allowed here"),
        (["volcano", "missing.yaml", "--nodes", nodes], "missing.yaml: no such file"),
        (["slurm", topo("SwitchName=s0 Nodes=n1\n"), "--nodes", conf, "--gbps", "25,0"],
         "--gbps: link speed 2 must be a number > 0 (Gbps), got 0.0"),
        (["slurm", topo("SwitchName=s0 Nodes=n1\n"), "--nodes", conf, "--gbps", "fast"],
         "--gbps: expected link speeds in Gbps separated by commas, got 'fast'"),
    ]


def test_every_bad_input_is_one_located_line_exit_2_and_nothing_written(capsys, tmp_path, write, node_list):
    out = tmp_path / "cluster.json"
    for argv, message in bad_files(write, node_list):
        code, stdout, err = run(capsys, "import-topology", *argv, "--out", out)
        shown = re.sub(r"case\d+/", "", err.replace(str(tmp_path) + "/", ""))
        assert (code, stdout, shown) == (2, "", f"placement: error: {message}\n"), argv
        assert not out.exists()


@pytest.mark.parametrize("argv", [SLURM, KUEUE, VOLCANO])
def test_each_shipped_description_imports_alone(capsys, tmp_path, argv):
    code, stdout, err = run(capsys, "import-topology", *argv, "--out", tmp_path / "c.json")
    assert code == 0 and stdout.endswith(": 16 machines, 7 switches, depth 3, 128 GPUs\n")


def test_a_missing_extra_is_one_line_naming_it(capsys, tmp_path, monkeypatch):
    """Installed without [managers]: the kubernetes client is imported when a quantity is read
    (was: a ModuleNotFoundError traceback)."""
    monkeypatch.setitem(sys.modules, "kubernetes.utils.quantity", None)
    out = tmp_path / "c.json"
    code, _, err = run(capsys, "import-topology", *KUEUE, "--out", out)
    assert code == 2 and err == ("placement: error: placement import-topology needs the [managers] extra "
                                 "(kubernetes.utils.quantity is not installed): pip install \"placement[managers]\"\n")
    assert not out.exists()
