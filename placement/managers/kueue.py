"""Kueue Topology Aware Scheduling: a node list whose labels place each node, read through
the levels of a Kueue ``Topology`` (node labels from the top down, e.g. block, rack,
hostname), as the tree those labels describe.

Mapping (docs/managers.md): each level but a last ``kubernetes.io/hostname`` is a tier of
switches, one per *domain* (a node's label values from the top down to that level: rack
``r1`` under block ``b1`` is not rack ``r1`` under ``b2``, as Kueue says); a last
``kubernetes.io/hostname`` level is the machines themselves. A domain's id is its label
value when no other domain (at any level) and no node has that value, else its parent's
id, ``/``, and the value (``b2/r1``); a top-level domain keeps its value. ResourceFlavors
are not read: give the node list of the flavor's nodes (``kubectl get nodes -l KEY=VALUE
-o json``).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from placement.managers.nodelist import NO_GPU, capacity, documents, field, read_nodes
from placement.managers.tree import Tiers, Tree, Where
from placement.model.topology import Topology

HOSTNAME = "kubernetes.io/hostname"
API_GROUP = "kueue.x-k8s.io/"
#: Kueue's own bound on a Topology's levels
MAX_LEVELS = 16


def read_kueue(nodes: str, *, levels: list[str] | None = None, topology: str | None = None,
               tiers: Tiers = Tiers()) -> Topology:
    """The tree of the node list ``nodes`` under the Topology ``levels`` (node labels, top
    down) or the levels of the Kueue Topology object in the file ``topology``: exactly one."""
    if (levels is None) == (topology is None):
        raise ValueError("kueue needs the Topology's levels: give --levels LABEL,... or --topology FILE "
                         "(one of the two)")
    if isinstance(levels, str):
        raise ValueError(f"levels: a list of node labels, got the string {levels!r}")
    if topology is not None:
        levels = topology_levels(topology)
    else:
        _check_levels(list(levels), Where("--levels"))
    listed = read_nodes(nodes)
    switch_levels = levels[:-1] if levels[-1] == HOSTNAME else list(levels)
    tree = Tree(Path(nodes).name, NO_GPU)
    domains: dict[tuple[str, ...], Where] = {}  # each domain, where it was first seen
    for node in listed:
        values = []
        for label in levels:
            value = node.labels.get(label)
            if value is None or value == "":
                node.where.fail(f"no label {label} (a level of the Topology)" if value is None
                                else f"label {label} is empty (a level of the Topology)")
            values.append(value)
        for depth in range(1, len(switch_levels) + 1):
            domains.setdefault(tuple(values[:depth]), node.where)
    ids = _domain_ids(list(domains), {node.name for node in listed})
    for domain, where in domains.items():
        tree.switch(ids[domain], where)
        if len(domain) > 1:
            tree.attach(ids[domain], ids[domain[:-1]], where, switch=True)
    for node in listed:
        tree.machine(node.name, capacity(node), node.where)
        if switch_levels:
            tree.attach(node.name, ids[tuple(node.labels[label] for label in switch_levels)], node.where)
        else:
            tree.top(node.name)
    return tree.build(tiers, Where(str(nodes)))


def topology_levels(path: str) -> list[str]:
    """The levels (node labels, top down) of the one Kueue ``Topology`` object in a YAML or
    JSON file (other objects, such as ResourceFlavors and ClusterQueues, are passed over)."""
    found = [(where, obj) for where, obj in documents(path) if obj.get("kind") == "Topology"]
    if len(found) != 1:
        names = ", ".join(str((obj.get("metadata") or {}).get("name")) for _, obj in found)
        Where(str(path)).fail("no Topology object (kind: Topology, apiVersion: kueue.x-k8s.io/...)" if not found
                              else f"{len(found)} Topology objects ({names}); keep the one to import")
    where, obj = found[0]
    version = obj.get("apiVersion")
    if not isinstance(version, str) or not version.startswith(API_GROUP):
        where.at("apiVersion").fail(f"expected {API_GROUP}v1beta1 (or v1alpha1, v1beta2), got {version!r}")
    where = Where(where.path, f"{where.place} (Topology {field(obj, 'metadata.name', where)})")
    levels = []
    for i, level in enumerate(field(obj, "spec.levels", where, list)):
        at = where.at(f"spec.levels[{i}]")
        if not isinstance(level, dict):
            at.fail("must be a mapping with nodeLabel")
        levels.append(field(level, "nodeLabel", at))
    _check_levels(levels, where.at("spec.levels"))
    return levels


def _check_levels(levels: list[str], where: Where) -> None:
    """Kueue's rules for a Topology's levels: 1 to 16 distinct labels, the hostname last."""
    if not 1 <= len(levels) <= MAX_LEVELS:
        where.fail(f"expected 1 to {MAX_LEVELS} levels (node labels, top down), got {len(levels)}")
    for i, label in enumerate(levels):
        if not isinstance(label, str) or not label or label != label.strip():
            where.fail(f"level {i + 1}: {label!r} is not a node label")
        if label in levels[:i]:
            where.fail(f"level {i + 1}: {label} is given twice")
        if label == HOSTNAME and i != len(levels) - 1:
            where.fail(f"level {i + 1}: {HOSTNAME} may only be the last (lowest) level")


def _domain_ids(domains: list[tuple[str, ...]], machines: set[str]) -> dict[tuple[str, ...], str]:
    """Each domain's id: its value when no other domain and no machine has it, else qualified
    by its parent's id (top-level domains keep their value: unique at their level)."""
    count = Counter(domain[-1] for domain in domains)
    ids: dict[tuple[str, ...], str] = {}
    for domain in sorted(domains, key=len):
        value = domain[-1]
        plain = len(domain) == 1 or (count[value] == 1 and value not in machines)
        ids[domain] = value if plain else f"{ids[domain[:-1]]}/{value}"
    return ids
