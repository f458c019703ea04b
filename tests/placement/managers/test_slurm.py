"""Slurm: the documented topology.conf examples (tree and block plugins), slurm.conf's node
lines, Slurm's block aggregation, and each malformed line as one located error."""
import pytest

from placement.managers import Tiers, TopologyFileError, read_slurm
from placement.managers.slurm import read_slurm_conf

from .conftest import DOCS

SLURM_CONF = str(DOCS / "slurm.conf")


def read(name: str, **kwargs):
    return read_slurm(str(DOCS / name), SLURM_CONF, **kwargs)


def children(t, switch: str) -> list[str]:
    return [l.a for l in t.links if l.b == switch]


def test_the_tree_plugin_example_of_the_man_page():
    t = read("slurm-tree.conf")
    assert t.root == "s3" and [s.id for s in t.switches] == ["s3", "s0", "s1", "s2"]
    assert children(t, "s3") == ["s0", "s1", "s2"]
    assert children(t, "s1") == [f"dev{i}" for i in range(6, 12)]
    assert {t.depth(m.id) for m in t.machines} == {2} and len(t.machines) == 18
    assert {(l.a[:3], l.gbps) for l in t.links} == {("dev", 25), ("s0", 100), ("s1", 100), ("s2", 100)}
    assert t.machines[0].capacity == {"gpu": 8, "cpu": 64, "mem": 500}  # RealMemory 512000 MB / 1024


def test_the_block_plugin_example_of_the_man_page():
    # BlockSizes=30,120: base blocks of at least 30 nodes, and blocks of 120 = 4 base blocks,
    # which Slurm aggregates from the four blocks in file order and names block[1-4]
    t = read("slurm-block.conf", tiers=Tiers(gbps=(50, 200)))
    assert t.root == "block[1-4]" and children(t, "block[1-4]") == ["block1", "block2", "block3", "block4"]
    assert children(t, "block3") == [f"node{i}" for i in range(65, 97)]
    assert {t.depth(m.id) for m in t.machines} == {2} and len(t.machines) == 128
    assert {l.gbps for l in t.links if l.b.startswith("block[")} == {200}
    # Gres=gpu:a100:4; CPUs from Sockets x CoresPerSocket x ThreadsPerCore = 2 x 16 x 2
    assert t.machines[0].capacity == {"gpu": 4, "cpu": 64, "mem": 500}


def test_the_topology_guides_three_level_binary_tree():
    t = read("slurm-guide-binary.conf")
    assert t.root == "s6" and children(t, "s6") == ["s4", "s5"] and children(t, "s5") == ["s2", "s3"]
    assert t.ancestors("tux5") == ["tux5", "s2", "s5", "s6"]
    assert t.machines[0].capacity == {"gpu": 4, "cpu": 32, "mem": 500}  # gpu:tesla:2,gpu:kepler:2 summed


def test_four_parallel_spines_are_one_switch_as_the_guide_says_it_may_be_written():
    spines, simple = read("slurm-guide-spines.conf"), read("slurm-guide-simple.conf")
    assert spines == simple  # LinkSpeed ignored, s5-s7 merged into s4
    assert spines.root == "s4" and children(spines, "s4") == ["s0", "s1", "s2", "s3"]


def test_slurm_conf_node_lines(write):
    path = write("slurm.conf", "\n".join([
        "ClusterName=x  # other lines are passed over",
        "PartitionName=p Nodes=a[1-2] Default=YES",
        "NodeName=DEFAULT CPUs=16 RealMemory=2048 Gres=gpu:2",
        "NodeName=a[1-2]",
        'NODENAME=b1 nodehostname=host-b1 feature="x y" gres=gpu:a100:4,gpu:v100:2,nvme:1 \\',
        "   realmemory=1048576",
        "NodeName=DEFAULT CPUs=8",
        "NodeName=c1 Gres=gpu:1K,mps:no_consume:100 Boards=2 SocketsPerBoard=2",
        "NodeName=d1 Gres=gpu:4(S:0-1) CoresPerSocket=12 ThreadsPerCore=2 CPUs=24",
        "NodeName=e1 Gres=(null) Sockets=2 CoresPerSocket=4 Procs=6",
    ]))
    nodes = read_slurm_conf(path)
    assert {name: capacity for name, (capacity, _) in nodes.items()} == {
        "a1": {"gpu": 2, "cpu": 16, "mem": 2}, "a2": {"gpu": 2, "cpu": 16, "mem": 2},
        "b1": {"gpu": 6, "cpu": 16, "mem": 1024},
        "c1": {"gpu": 1024, "cpu": 8, "mem": 2},
        "d1": {"gpu": 4, "cpu": 24, "mem": 2},
        "e1": {"gpu": 0, "cpu": 6, "mem": 2}}
    assert nodes["b1"][1].place == "line 5"


def test_a_node_with_no_cpu_or_memory_keys_has_slurms_defaults(write):
    conf = write("slurm.conf", "NodeName=n1 Gres=gpu:1\n")
    capacity, _ = read_slurm_conf(conf)["n1"]
    assert capacity == {"gpu": 1, "cpu": 1, "mem": 1 / 1024}


def test_block_aggregation_follows_slurm_including_the_tail(write):
    conf = write("slurm.conf", "NodeName=n[1-10] Gres=gpu:8 CPUs=8 RealMemory=1024\n")
    blocks = "".join(f"BlockName=b{i} Nodes=n[{2 * i - 1}-{2 * i}]\n" for i in range(1, 6))
    # default levels (1, 2, 4, 8 blocks): b5 fits no aligned pair or quad, so it joins the block of 8 directly
    t = read_slurm(write("default.conf", blocks), conf)
    assert t.root == "b[1-5]" and children(t, "b[1-5]") == ["b5", "b[1-4]"]
    assert children(t, "b[1-4]") == ["b[1-2]", "b[3-4]"] and children(t, "b[3-4]") == ["b3", "b4"]
    # BlockSizes=2,8: base blocks of 2 nodes, blocks of 4 base blocks; b5 is left alone, so a root joins both
    t = read_slurm(write("sized.conf", blocks + "BlockSizes=2,8\n"), conf)
    assert t.root == "root" and children(t, "root") == ["b5", "b[1-4]"]
    assert children(t, "b[1-4]") == ["b1", "b2", "b3", "b4"]


@pytest.mark.parametrize("topology, message", [
    ("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[3-4]\n\n# spine\nSwitchName=s2 Switches=s[0-1],s9\n",
     "line 5: switch s9 is not defined"),
    ("SwitchName=s0 Nodes=n[1-5]\n", "line 1: node n5 is not defined in slurm.conf"),
    ("SwitchName=s0 Nodes=n[1-4\n", "line 1: Nodes=n[1-4: not a hostlist expression (unbalanced brackets)"),
    ("SwitchName=s0 Nodes=n[4-1]\n", "line 1: Nodes=n[4-1]: not a hostlist expression (start > stop)"),
    ("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=n[2-3]\n",
     "line 2: node n2 is under two switches: s0 (line 1) and s1"),
    ("SwitchName=s0 Switches=s1\nSwitchName=s1 Switches=s0\nSwitchName=s2 Nodes=n1\n",
     "line 1: the switches form a cycle: s0 under s1 under s0"),
    ("SwitchName=s0 Nodes=n1 Switches=s1\n", "line 1: switch s0 has both Nodes= and Switches= (Slurm refuses it too)"),
    ("SwitchName=s0 Nodes=n1 Speed=4\n",
     "line 1: unknown key Speed= (a SwitchName line takes Switches=, Nodes=, LinkSpeed=)"),
    ("SwitchName=s0 Nodes=n1\nSwitchName=s0 Nodes=n2\n",
     "line 2: s0 is defined twice (first at line 1); names are unique among nodes and switches"),
    ("SwitchName=s0 Nodes=n1\nBlockName=b1 Nodes=n2\n", "line 2: mixes the block plugin's lines with the tree plugin's"),
    ("RingName=ring0 Nodes=n[1-4]\n", "line 1: RingName=: not a topology.conf line (expected SwitchName= for the tree "
                                      "plugin, BlockName= or BlockSizes= for the block plugin)"),
    ("SwitchName=s0 Nodes=n1 oops\n", "line 1: expected KEY=VALUE, got 'oops'"),
    ("SwitchName=s0 Nodes=\"n1\n", "line 1: cannot split into KEY=VALUE pairs: No closing quotation"),
    ("# nothing here\n\n", "no SwitchName or BlockName line"),
    ("BlockName=b1 Nodes=n[1-2]\nBlockName=b2 Nodes=n3\n",
     "line 2: block b2 has 1 nodes, fewer than the base block size 2 (without BlockSizes, the first block's size)"),
    ("BlockName=b1 Nodes=n[1-2]\nBlockSizes=2,6\n",
     "line 2: BlockSizes=2,6: 6 is not the base size 2 times a power of two (1 to 2**15)"),
    ("BlockName=b1 Nodes=n[1-2]\nBlockSizes=2,x\n",
     "line 2: BlockSizes=2,x: expected node counts > 0 separated by commas (e.g. 30,120)"),
    ("BlockName=b1\n", "line 1: block b1 has no Nodes= (Slurm refuses it too)"),
    ("SwitchName=s0 Nodes=n[1-2]\nSwitchName=s1 Nodes=cpu1\n",
     "slurm.conf: line 2: no gpu in its Gres (every machine in the tree needs GPUs)"),
])
def test_malformed_topology_conf_is_one_located_line(write, topology, message):
    conf = write("slurm.conf", "NodeName=n[1-4] Gres=gpu:8 CPUs=8\nNodeName=cpu1 CPUs=8\n")
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", topology), conf)
    expected = message if message.startswith("slurm.conf") else f"topology.conf: {message}".rstrip(": ")
    assert str(info.value).replace(str(info.value.path), info.value.path.rsplit("/", 1)[-1]) == expected


@pytest.mark.parametrize("line, message", [
    ("NodeName=n[1-2 CPUs=8", "line 1: NodeName=n[1-2: not a hostlist expression (unbalanced brackets)"),
    ("NodeName=n1 CPUs=eight", "line 1: CPUs=eight: expected a whole number >= 1"),
    ("NodeName=n1 RealMemory=0", "line 1: RealMemory=0: expected a whole number >= 1"),
    ("NodeName=n1 Gres=gpu", "line 1: Gres=gpu: 'gpu' is not NAME[:TYPE]:COUNT (e.g. gpu:8 or gpu:a100:4)"),
    ("NodeName=n1 Gres=gpu:a100:lots", "line 1: Gres=gpu:a100:lots: 'gpu:a100:lots' is not NAME[:TYPE]:COUNT "
                                       "(e.g. gpu:8 or gpu:a100:4)"),
    ("NodeName=n1 CPUs=4 cpus=8", "line 1: cpus= is given twice"),
    ("NodeName=n1\nNodeName=n[0-1]", "line 2: node n1 is defined twice (first at line 1)"),
])
def test_malformed_node_lines_are_located(write, line, message):
    path = write("slurm.conf", line + "\n")
    with pytest.raises(TopologyFileError) as info:
        read_slurm_conf(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_missing_or_binary_file_is_named(write, tmp_path):
    topology = write("topology.conf", "SwitchName=s0 Nodes=n1\n")
    with pytest.raises(TopologyFileError) as info:
        read_slurm(topology, str(tmp_path / "none.conf"))
    assert str(info.value) == f"{tmp_path / 'none.conf'}: no such file"
    (tmp_path / "bin.conf").write_bytes(b"NodeName=n1\n\xff\xfe")
    with pytest.raises(TopologyFileError) as info:
        read_slurm(topology, str(tmp_path / "bin.conf"))
    assert str(info.value) == f"{tmp_path / 'bin.conf'}: line 2: not UTF-8 text (byte 0xff)"


def test_a_few_lines_cannot_list_more_names_than_a_tree_within_the_limit_holds(write, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MAX_MACHINES", "10")
    conf = write("slurm.conf", "NodeName=n[1-10] Gres=gpu:1\n")
    # fifty parallel planes over one leaf: one list, expanded once, the planes merged
    repeated = "SwitchName=leaf Nodes=n[1-9]\n" + "".join(f"SwitchName=p{i} Switches=leaf\n" for i in range(50))
    assert len(read_slurm(write("planes.conf", repeated), conf).machines) == 9
    lines = "".join(f"SwitchName=s{i} Nodes=n[1-10],x{i}\n" for i in range(3))
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", lines), conf)
    assert str(info.value).endswith("line 2: 22 names listed, more than a tree of at most 10 machines and 10 switches "
                                    "holds (raise the limit with PLACEMENT_MAX_MACHINES or --max-machines; "
                                    "docs/limits.md)")


def test_too_many_nodes_stop_at_the_line_that_passes_the_limit(write, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MAX_MACHINES", "10")
    path = write("slurm.conf", "NodeName=a[1-8] Gres=gpu:1\nNodeName=b[1-8] Gres=gpu:1\n")
    with pytest.raises(TopologyFileError) as info:
        read_slurm_conf(path)
    assert str(info.value).endswith("line 2: 16 nodes, more than the limit 10 (raise it with PLACEMENT_MAX_MACHINES "
                                    "or --max-machines; docs/limits.md)")


def test_leaf_switches_sharing_nodes_are_a_node_under_two_switches(write):
    """Only Switches= planes merge (was: leafB silently merged into leafA)."""
    conf = write("slurm.conf", "NodeName=n[1-4] Gres=gpu:1\n")
    lines = "SwitchName=leafA Nodes=n[1-2]\nSwitchName=leafB Nodes=n[1-2]\nSwitchName=leafC Nodes=n[3-4]\n"
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", lines), conf)
    assert str(info.value).endswith("line 2: node n1 is under two switches: leafA (line 1) and leafB")


def test_a_short_line_of_many_ranges_is_refused_before_it_is_expanded(write, monkeypatch):
    """python-hostlist caps one range at 100,000 names, not a list of them: the list is expanded
    piece by piece and stops at the limit (was: 60 ranges, 877 bytes, 938 MB before the refusal)."""
    monkeypatch.setenv("PLACEMENT_MAX_MACHINES", "1000")
    conf = write("slurm.conf", "NodeName=n[1-4] Gres=gpu:1\n")
    many = ",".join(f"x{i}y[0-99999]" for i in range(60))
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", f"SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes={many}\n"), conf)
    assert "line 2: Nodes= lists more than 2000 names" in str(info.value)
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", "SwitchName=s0 Nodes=n[1-4]\n"), write("big.conf", f"NodeName={many} Gres=gpu:1\n"))
    assert "line 1: NodeName= lists more than 1000 names" in str(info.value)


def test_an_empty_block_is_refused(write):
    conf = write("slurm.conf", "NodeName=n[1-4] Gres=gpu:1\n")
    with pytest.raises(TopologyFileError) as info:
        read_slurm(write("topology.conf", "BlockName=b1 Nodes=\nBlockName=b2 Nodes=n[1-4]\n"), conf)
    assert str(info.value).endswith("line 1: block b1 lists no node (Nodes= is empty)")
