"""Where a job may run in one slot: its domains (a machine: local; a switch: spread below
it) and, per machine, how many of its workers and PSs fit (shared by every model).

What depends only on the cluster (the domains, the subtrees, the fit tables per job shape,
the machines' local rates) is computed once per topology and shared, read-only, by every
instance on it (:func:`placement.model.instance.cluster_cache`): an online decision builds one
model per partition on the same cluster.

GPU types (MODEL.md 8): a job's workers may use only the machines of the types it runs on
(:func:`worker_types`); :func:`fit_table` holds no worker elsewhere. PSs fit anywhere."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.model.instance import TOL, Instance, Job, cluster_cache
from placement.model.topology import Topology

#: fit tables kept per topology (distinct job shapes); beyond this the cache starts over
FIT_CACHE = 4096


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def worker_types(job: Job, topology: Topology) -> np.ndarray:
    """Per GPU type code (:attr:`Topology.gpu_types`), may the job's workers use it (MODEL.md 8:
    a per-type table lists the types it runs on; every other job runs on every type)?"""
    return np.array([job.runs_on(g) for g in topology.gpu_types], dtype=bool)


def local_gbps(topology: Topology) -> np.ndarray:
    """Each machine's ``local_gbps`` (read-only, once per topology)."""
    store = cluster_cache(topology)
    if "local_gbps" not in store:
        store["local_gbps"] = _frozen(np.array([m.local_gbps for m in topology.machines], dtype=float))
    return store["local_gbps"]


class Domains:
    """Every machine (local), and every switch with >= 2 populated children (spread below
    it; a switch with one populated child would only add link load to that child's)."""

    def __init__(self, instance: Instance):
        topo = instance.topology
        self.nodes = topo.nodes
        index = {n: i for i, n in enumerate(self.nodes)}
        children: dict[str, set[str]] = {}
        for m in topo.machines:
            chain = topo.ancestors(m.id)
            for child, parent in zip(chain, chain[1:]):
                children.setdefault(parent, set()).add(child)
        spread = [n for n in self.nodes[len(topo.machines):] if len(children.get(n, ())) >= 2]
        self.node = np.array([index[m.id] for m in topo.machines] + [index[n] for n in spread], dtype=np.int64)
        self.machines = [[topo.machine_index[m.id]] for m in topo.machines] + \
                        [[topo.machine_index[h] for h in topo.below(n)] for n in spread]
        self.is_local = np.arange(len(self.node)) < len(topo.machines)
        #: for spread domains, the machines under each populated child (for exact LCA rows)
        self.children = [[] for _ in topo.machines] + [
            [[topo.machine_index[h] for h in topo.below(c)] for c in sorted(children[n])] for n in spread]
        _frozen(self.node), _frozen(self.is_local)
        #: node id -> its domain (switches that are no domain left out)
        self.of_node = {self.nodes[v]: d for d, v in enumerate(self.node.tolist())}
        #: ``machines`` as read-only arrays
        self.member_arrays = [_frozen(np.array(m, dtype=np.int64)) for m in self.machines]

    def allowed(self, names: set[str] | None) -> np.ndarray:
        """The domains among node ids ``names`` (None: every domain), in domain order."""
        if names is None:
            return np.arange(len(self.node))
        return np.array(sorted(self.of_node[v] for v in names if v in self.of_node), dtype=np.int64)

    @classmethod
    def of(cls, instance: Instance) -> "Domains":
        """The instance's domains, built once per topology and shared (read-only)."""
        store = cluster_cache(instance.topology)
        if "domains" not in store:
            store["domains"] = cls(instance)
        return store["domains"]


@dataclass(frozen=True)
class Subtrees:
    """What the per-domain models (aggregated, configuration) need of the tree: per node its
    subtree's total capacity (``capacity[node, resource]``), per domain the nodes it lies
    below, itself included (``up[domain, level]``, -1 padded), and per spread domain the
    summed uplink capacity of its populated children (``child_uplink[domain]``). GPU types:
    per node and type code the capacity of the subtree's machines of that type
    (``type_capacity[node, type, resource]``), and which nodes' subtrees hold two types or
    more (``mixed[node]``: elsewhere the one type's capacity is the subtree's)."""

    capacity: np.ndarray
    up: np.ndarray
    child_uplink: np.ndarray
    type_capacity: np.ndarray
    mixed: np.ndarray

    def rhs(self, slots: int) -> np.ndarray:
        """Right-hand sides of the subtree-capacity rows (slot, node, resource), the uplink
        rows (slot, domain), and on a cluster with mixed subtrees the per-type rows (slot,
        node, type, resource), over ``slots`` slots, as the per-domain models key them."""
        parts = [np.tile(self.capacity.reshape(-1), slots), np.tile(self.child_uplink, slots)]
        if self.mixed.any():
            parts.append(np.tile(self.type_capacity.reshape(-1), slots))
        return np.concatenate(parts)


def subtrees(instance: Instance, doms: Domains) -> Subtrees:
    """The instance's :class:`Subtrees` (``doms``: its domains), once per topology and resources."""
    store = cluster_cache(instance.topology)
    key = ("subtrees", instance.resources)
    if key not in store:
        tree = _subtrees(instance, doms)
        store[key] = Subtrees(*(_frozen(getattr(tree, f)) for f in
                                ("capacity", "up", "child_uplink", "type_capacity", "mixed")))
    return store[key]


def _subtrees(instance: Instance, doms: Domains) -> Subtrees:
    topo = instance.topology
    nodes = topo.nodes
    node_index = {n: i for i, n in enumerate(nodes)}
    cap = instance.capacity_matrix
    anc, depth, up_link = topo.ancestor_table
    node_depth = np.array([topo.depth(n) for n in nodes])
    code = topo.type_code
    type_cap = np.zeros((len(nodes), len(topo.gpu_types), len(instance.resources)))
    present = np.zeros((len(nodes), len(topo.gpu_types)), dtype=bool)
    for h in range(len(topo.machines)):
        type_cap[anc[h, : depth[h] + 1], code[h]] += cap[h]
        present[anc[h, : depth[h] + 1], code[h]] = True
    sub_cap = type_cap.sum(axis=1)
    mixed = present.sum(axis=1) >= 2
    dom_up = [[node_index[a] for a in topo.ancestors(nodes[doms.node[d]])] for d in range(len(doms.node))]
    up = np.full((len(doms.node), max(len(a) for a in dom_up)), -1, dtype=np.int64)
    for d, chain in enumerate(dom_up):
        up[d, : len(chain)] = chain
    child_uplink = np.zeros(len(doms.node))
    for d, members in enumerate(doms.machines):
        if not doms.is_local[d]:
            kids = {int(anc[h, node_depth[doms.node[d]] + 1]) for h in members}
            child_uplink[d] = sum(topo.links[up_link[c]].gbps for c in kids)
    return Subtrees(sub_cap, up, child_uplink, type_cap, mixed)


@dataclass(frozen=True)
class FitTable:
    """Per machine, for one job: workers that fit alone (at most U), PSs that fit alone (at
    most min_ps(U)), and the most workers that fit *with their PSs* (a local placement)."""

    workers: np.ndarray
    ps: np.ndarray
    local: np.ndarray


def fit_table(job: Job, instance: Instance) -> FitTable:
    """Vectorised over machines, computed once per distinct machine capacity (real
    clusters have a handful of machine types) and job shape (kept per topology); no
    worker on a machine of a GPU type the job does not run on (module docstring)."""
    table, which = fit_kinds(job, instance), instance.machine_kinds[1]
    workers, local = table.workers[which], table.local[which]
    if job.speed is not None and job.speed.types is not None:
        allowed = worker_types(job, instance.topology)[instance.topology.type_code]
        workers, local = np.where(allowed, workers, 0), np.where(allowed, local, 0)
    return FitTable(workers, table.ps[which], local)


def fit_kinds(job: Job, instance: Instance) -> FitTable:
    """:func:`fit_table` per machine kind (``instance.machine_kinds``), read-only: kept per
    topology and job shape."""
    kinds, _ = instance.machine_kinds
    res = instance.resources
    key = (res, tuple(job.worker.get(r, 0) for r in res), tuple(job.ps.get(r, 0) for r in res), job.max_workers,
           job.worker_gbps, job.ps_gbps)
    tables = cluster_cache(instance.topology).setdefault("fit", {})
    table = tables.get(key)
    if table is None:
        if len(tables) >= FIT_CACHE:
            tables.clear()
        table = _fit_kinds(job, kinds, res)
        table = tables[key] = FitTable(_frozen(table.workers), _frozen(table.ps), _frozen(table.local))
    return table


def machine_classes(instance: Instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (machine kind, local_gbps) pairs: each one's kind and local_gbps, and
    per kind its number of machines (read-only, once per topology and resources)."""
    store = cluster_cache(instance.topology)
    key = ("classes", instance.resources)
    if key not in store:
        kinds, which = instance.machine_kinds
        pairs = np.unique(np.column_stack([which.astype(float), local_gbps(instance.topology)]), axis=0)
        store[key] = (_frozen(pairs[:, 0].astype(np.int64)), _frozen(pairs[:, 1].copy()),
                      _frozen(np.bincount(which, minlength=len(kinds))))
    return store[key]


def _fit_kinds(job: Job, cap: np.ndarray, resources: tuple[str, ...]) -> FitTable:
    alpha = np.array([job.worker.get(r, 0) for r in resources], dtype=float)
    beta = np.array([job.ps.get(r, 0) for r in resources], dtype=float)

    def alone(demand: np.ndarray, most: int) -> np.ndarray:
        need = demand > 0
        if not need.any():
            return np.full(len(cap), most, dtype=np.int64)
        per = np.floor(np.minimum((cap[:, need] + TOL) / demand[need], 1e9)).min(axis=1)
        return np.minimum(per, most).astype(np.int64)

    ws = np.arange(1, job.max_workers + 1)
    need = ws[:, None] * alpha + np.array([job.min_ps(int(w)) for w in ws])[:, None] * beta
    ok = (need[None, :, :] <= cap[:, None, :] + TOL).all(axis=2)
    return FitTable(alone(alpha, job.max_workers), alone(beta, job.min_ps(job.max_workers)),
                    ok.sum(axis=1).astype(np.int64))
