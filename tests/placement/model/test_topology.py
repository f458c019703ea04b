"""Tree queries and cluster builders."""
import networkx as nx
import pytest

from placement.model.clusters import RESOURCES, pai, pai_machines, racks, star


def test_racks_shape_and_queries():
    t = racks(3, 4, machine_gbps=10, rack_gbps=40)
    assert len(t.machines) == 12 and len(t.switches) == 4 and len(t.links) == 15
    assert t.root_id == "spine"
    assert t.parent("r1m2") == "tor1" and t.parent("spine") is None
    assert t.ancestors("r1m2") == ["r1m2", "tor1", "spine"]
    assert t.lca(["r1m2"]) == "r1m2"
    assert t.lca(["r1m2", "r1m0"]) == "tor1"
    assert t.lca(["r1m2", "r2m0", "r1m1"]) == "spine"
    up = t.path_links("r1m2", "spine")
    assert [(t.links[i].a, t.links[i].b) for i in up] == [("r1m2", "tor1"), ("tor1", "spine")]
    assert t.path_links("r1m2", "r1m2") == []
    with pytest.raises(ValueError):
        t.path_links("r1m2", "tor0")
    assert t.below("tor2") == ["r2m0", "r2m1", "r2m2", "r2m3"]
    g = t.graph()
    assert nx.is_tree(g) and g.graph["root"] == "spine"
    assert g.edges["tor0", "spine"]["gbps"] == 40 and g.nodes["r0m0"]["kind"] == "machine"


def test_ancestor_table_matches_queries():
    t = racks(2, 2)
    anc, depth, up = t.ancestor_table
    for h, m in enumerate(t.machines):
        chain = [t.nodes[a] for a in anc[h, : depth[h] + 1]]
        assert chain == list(reversed(t.ancestors(m.id)))
        assert t.links[up[anc[h, depth[h]]]].a == m.id  # machine's own uplink


def test_star():
    t = star(5, link_gbps=10)
    assert t.lca(["m0", "m4"]) == "sw" and len(t.links) == 5
    with pytest.raises(ValueError, match="n must be a positive integer"):
        star(0)


def test_pai_all_and_sampled():
    rows = pai_machines()
    assert len(rows) == 1897 and sum(r["gpu"] for r in rows) == 6742
    full = pai()
    assert len(full.machines) == 1897
    t = pai(64)
    gpus = [m.capacity["gpu"] for m in t.machines]
    assert len(gpus) == 64
    # proportional: P100 798/1897 of 64 = 26.9 -> 27, T4 16.8 -> 17
    kinds = {r["id"]: r["type"] for r in rows}
    counts = {}
    for m in t.machines:
        counts[kinds[m.id]] = counts.get(kinds[m.id], 0) + 1
    assert counts["P100"] == 27 and counts["T4"] == 17 and sum(counts.values()) == 64
    assert set(t.machines[0].capacity) == set(RESOURCES)
    assert all(len([l for l in t.links if l.b == s.id]) <= 16 for s in t.switches if s.id != "spine")
    assert pai(64) == t  # no randomness
    assert all(m.capacity["gpu"] > 0 for m in pai(50, gpu_only=True).machines)
    with pytest.raises(ValueError, match="more than the 1897"):
        pai(5000)
