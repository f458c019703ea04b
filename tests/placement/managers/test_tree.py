"""The shared tree builder: tiers, the root, the order, dropped parts, and its located errors."""
import pytest

from placement.managers import Tiers, TopologyFileError, skeleton
from placement.managers.tree import Tree, Where, natural

CAP = {"gpu": 8, "cpu": 64, "mem": 512}


def tree_of(parents: dict[str, str], machines: list[str], switches: list[str], **kwargs) -> Tree:
    """A tree from {child: parent}; a child named in ``switches`` is attached as a switch."""
    tree = Tree("nodes.conf", "no GPUs", **kwargs)
    for i, m in enumerate(machines):
        tree.machine(m, dict(CAP), Where("nodes.conf", f"line {i + 1}"))
    for i, s in enumerate(switches):
        tree.switch(s, Where("topo.conf", f"line {i + 1}"))
    for i, (child, parent) in enumerate(parents.items()):
        tree.attach(child, parent, Where("topo.conf", f"line {10 + i}"), switch=child in switches)
    return tree


def fails(build) -> TopologyFileError:
    with pytest.raises(TopologyFileError) as info:
        build()
    return info.value


def test_links_take_their_speed_from_the_height_below_them():
    tree = tree_of({"m1": "leaf", "m2": "mid", "leaf": "mid", "mid": "top"}, ["m1", "m2"], ["leaf", "mid", "top"])
    t = tree.build(Tiers(gbps=(10, 40, 90), local_gbps=300), Where("topo.conf"))
    speeds = {(l.a, l.b): l.gbps for l in t.links}
    # m2 sits on mid directly: a machine's uplink is tier 0 wherever it hangs
    assert speeds == {("m1", "leaf"): 10, ("m2", "mid"): 10, ("leaf", "mid"): 40, ("mid", "top"): 90}
    assert t.root == "top" and [m.local_gbps for m in t.machines] == [300, 300]


def test_the_last_speed_repeats_above_and_several_tops_get_a_root():
    tree = tree_of({"m1": "a", "m2": "b", "a": "a2", "b": "b2"}, ["m1", "m2"], ["a", "a2", "b", "b2"])
    t = tree.build(Tiers(gbps=(25,)), Where("topo.conf"))
    assert t.root == "root" and {l.gbps for l in t.links} == {25}
    assert [(l.a, l.b) for l in t.links if l.b == "root"] == [("a2", "root"), ("b2", "root")]
    assert t.depth("m1") == 3


def test_the_added_root_never_collides_with_a_name():
    tree = tree_of({"root": "s1", "root~1": "s2"}, ["root", "root~1"], ["s1", "s2"])
    t = tree.build(Tiers(), Where("topo.conf"))
    assert t.root == "root~2" and t.parent("s1") == "root~2" and t.parent("root") == "s1"


def test_order_is_depth_first_in_natural_order_whatever_the_input_order():
    parents = {"n10": "s2", "n2": "s10", "n1": "s2", "s10": "top", "s2": "top"}
    t = tree_of(parents, ["n10", "n2", "n1"], ["top", "s10", "s2"]).build(Tiers(), Where("t"))
    assert [m.id for m in t.machines] == ["n1", "n10", "n2"]
    assert [s.id for s in t.switches] == ["top", "s2", "s10"]
    assert sorted(["a10", "a9", "b1", "a09"], key=natural) == ["a09", "a9", "a10", "b1"]


def test_switches_without_machines_and_nodes_outside_the_tree_are_dropped():
    # empty switches below and above, and a machine no switch takes (it needs no GPUs, being left out)
    tree = tree_of({"m1": "leaf", "empty": "leaf2", "leaf2": "top", "leaf": "top"}, ["m1"], ["leaf", "leaf2",
                                                                                             "empty", "top", "alone"])
    tree.machine("login", {"gpu": 0, "cpu": 4, "mem": 8}, Where("nodes.conf", "line 9"))
    t = tree.build(Tiers(gbps=(1, 2, 3)), Where("t"))
    assert [s.id for s in t.switches] == ["top", "leaf"] and [m.id for m in t.machines] == ["m1"]
    # heights after dropping: leaf is height 1, so its uplink is tier 1 (the empty chain would have made top 3)
    assert {(l.a, l.gbps) for l in t.links} == {("m1", 1), ("leaf", 2)}


def test_machines_with_no_switch_go_under_the_root():
    tree = Tree("nodes.json", "no GPUs")
    for m in ("b", "a"):
        tree.machine(m, dict(CAP), Where("nodes.json", m))
        tree.top(m)
    t = tree.build(Tiers(), Where("nodes.json"))
    assert t.root == "root" and [m.id for m in t.machines] == ["a", "b"] and t.depth("a") == 1


@pytest.mark.parametrize("parents, switches, message", [
    ({"m1": "s1", "s1": "s2", "s2": "s1"}, ["s1", "s2"], "topo.conf: line 12: the switches form a cycle: s1 under s2 "
                                                          "under s1"),
    ({"m1": "s9"}, ["s1"], "topo.conf: line 10: switch s9 is not defined"),
    ({"m1": "s1", "s8": "s1"}, ["s1", "s8"], "topo.conf: line 11: switch s8 is not defined"),
    ({"m1": "s1", "m7": "s1"}, ["s1"], "topo.conf: line 11: node m7 is not defined in nodes.conf"),
    ({"m1": "m1"}, ["s1"], "topo.conf: line 10: switch m1 is not defined (it is a node)"),
])
def test_names_and_cycles_are_checked_where_they_are_stated(parents, switches, message):
    tree = tree_of({}, ["m1"], [s for s in switches if s != "s8"])
    for i, (child, parent) in enumerate(parents.items()):
        tree.attach(child, parent, Where("topo.conf", f"line {10 + i}"), switch=child.startswith("s"))
    assert str(fails(lambda: tree.build(Tiers(), Where("topo.conf")))) == message


def test_a_second_parent_a_second_definition_and_no_gpus_are_located():
    tree = tree_of({"m1": "s1"}, ["m1"], ["s1", "s2"])
    err = fails(lambda: tree.attach("m1", "s2", Where("topo.conf", "line 5")))
    assert str(err) == "topo.conf: line 5: node m1 is under two switches: s1 (line 10) and s2"
    assert (err.path, err.place) == ("topo.conf", "line 5")
    err = fails(lambda: tree.switch("m1", Where("topo.conf", "line 6")))
    assert str(err) == ("topo.conf: line 6: m1 is defined twice (first at nodes.conf line 1); names are unique "
                        "among nodes and switches")
    tree.machine("m2", {"gpu": 0, "cpu": 1, "mem": 1}, Where("nodes.conf", "line 2"))
    tree.attach("m2", "s1", Where("topo.conf", "line 7"))
    assert str(fails(lambda: tree.build(Tiers(), Where("topo.conf")))) == "nodes.conf: line 2: no GPUs"


def test_capacities_names_and_sizes_follow_the_input_policy(monkeypatch):
    tree = Tree("n", "no GPUs")
    assert "cpu must be <= 1e+09" in str(fails(lambda: tree.machine("m", {"gpu": 1, "cpu": 2e9, "mem": 1},
                                                                      Where("n", "line 1"))))
    assert "name must not contain control characters" in str(fails(lambda: tree.switch("a\nb", Where("t", "x"))))
    monkeypatch.setenv("PLACEMENT_MAX_MACHINES", "2")
    tree = tree_of({"m1": "s", "m2": "s", "m3": "s"}, ["m1", "m2", "m3"], ["s"])
    assert str(fails(lambda: tree.build(Tiers(), Where("topo.conf")))) == (
        "topo.conf: 3 machines, more than the limit 2 (raise it with PLACEMENT_MAX_MACHINES or --max-machines; "
        "docs/limits.md)")
    tree = tree_of({"m1": "t", "m2": "t", "t": "s"}, ["m1", "m2"], ["s", "t"])  # 2 machines, 2 switches, 3 links
    assert str(fails(lambda: tree.build(Tiers(), Where("topo.conf")))).startswith("topo.conf: 3 links, more than")
    tree = tree_of({"m1": "s", "m2": "t"}, ["m1", "m2"], ["s", "t"])  # 2 switches and the root
    assert str(fails(lambda: tree.build(Tiers(), Where("topo.conf")))).startswith("topo.conf: 3 switches, more than")
    assert str(fails(lambda: Tree("n", "x").build(Tiers(), Where("topo.conf")))) == (
        "topo.conf: no node is under a switch: the tree holds no machine")


@pytest.mark.parametrize("kwargs, message", [
    ({"gbps": ()}, "--gbps: give at least one link speed (Gbps)"),
    ({"gbps": (25, -1)}, "--gbps: link speed 2 must be a number > 0 (Gbps), got -1"),
    ({"gbps": (float("nan"),)}, "--gbps: link speed 1 must be a number > 0 (Gbps), got nan"),
    ({"gbps": (2e6,)}, "--gbps: link speed 1 must be <= 1e+06 Gbps (the bound in docs/limits.md), got 2000000.0"),
    ({"local_gbps": float("inf")}, "--local-gbps must be a number > 0 (Gbps), got inf"),
    ({"local_gbps": True}, "--local-gbps must be a number > 0 (Gbps), got True"),
    ({"gbps": "25"}, "--gbps: expected link speeds in Gbps, got '25'"),
])
def test_tiers_are_positive_finite_speeds_within_the_bounds(kwargs, message):
    with pytest.raises(ValueError) as info:
        Tiers(**kwargs)
    assert str(info.value) == message


def test_the_skeleton_is_an_instance_without_jobs():
    t = tree_of({"m1": "s"}, ["m1"], ["s"]).build(Tiers(gbps=[10.0, 20.0]), Where("t"))
    inst = skeleton(t, "mine")
    assert (inst.name, inst.horizon, inst.slot_seconds, inst.resources, inst.jobs) == (
        "mine", 1, 300, ("gpu", "cpu", "mem"), ())
    assert inst.topology.links[0].gbps == 10 and isinstance(inst.topology.links[0].gbps, int)
    with pytest.raises(ValueError):
        skeleton(t, "bad\nname")
