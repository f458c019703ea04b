"""The read-only tables of :class:`placement.slots.residual.Residual`, kept per cluster.

A slot's decision builds several Residuals on one cluster (the slot rules, the select
step's play-outs, the candidate step), and each used to rebuild the tree's tables (12-17 ms
at 2,000 machines) and every job's demand vectors. They depend only on the topology, the
resource list and the job, so they live in :func:`placement.model.instance.cluster_cache`.
"""
from __future__ import annotations

import weakref

import numpy as np

from placement.model.instance import Instance, Job, cluster_cache, demand_vectors

__all__ = ["DEMANDS_KEPT", "STATIC_KEPT", "demand_entry", "job_types", "tree_tables"]


def tree_tables(instance: Instance) -> dict:
    """Residual's read-only tables of the tree (and of job shapes: ``_static``, demands per
    job) by attribute name, kept per cluster and resource list (module docstring)."""
    store = cluster_cache(instance.topology)
    key = ("residual", instance.resources)
    if key in store:
        return store[key]
    topo = instance.topology
    cap = instance.capacity_matrix  # read-only, shared per topology; free is a copy
    n_machines = len(topo.machines)
    anc, depth, up_link = topo.ancestor_table
    node_depth = np.array([topo.depth(n) for n in topo.nodes], dtype=np.int64)
    # up[h][i]: the i-th link on the way up from machine h (its own uplink first)
    up = [up_link[anc[h, depth[h]:0:-1]] for h in range(n_machines)]
    below: list[list[int]] = [[] for _ in topo.nodes]
    for h in range(n_machines):
        for a in anc[h, : depth[h] + 1]:
            below[a].append(h)
    link_cap = np.array([l.gbps for l in topo.links], dtype=float)
    local_gbps = np.array([m.local_gbps for m in topo.machines], dtype=float)
    for table in (link_cap, local_gbps):
        table.flags.writeable = False
    store[key] = tables = {
        "machine_ids": tuple(m.id for m in topo.machines), "cap": cap, "link_cap": link_cap,
        "local_gbps": local_gbps, "_anc": anc, "_depth": depth, "_up_link": up_link,
        "_node_index": {n: i for i, n in enumerate(topo.nodes)}, "_node_depth": node_depth, "_up": up,
        "_below": [np.array(b, dtype=np.int64) for b in below],
        # switches (and machines with children) that can hold a spread job, smallest first
        "_spread_nodes": sorted((i for i in range(len(topo.nodes)) if len(below[i]) > 1),
                                key=lambda i: (len(below[i]), -node_depth[i], i)),
        "_all": np.arange(n_machines, dtype=np.int64),
        # the same tables as Python lists, for the per-task loops of fits and the greedy fill
        "_anc_rows": anc.tolist(), "_up_rows": [u.tolist() for u in up], "_depths": depth.tolist(),
        "_scale": np.where(cap > 0, cap, 1.0),
        # GPU types (MODEL.md 8): per machine the index of its type in gpu_types
        "_typed": topo.typed, "_gpu_types": topo.gpu_types, "_type_code": topo.type_code,
        "_type_codes": topo.type_code.tolist(), "_type_index": {g: k for k, g in enumerate(topo.gpu_types)},
        "_static": {},  # tables that depend on the tree or a job shape only
        "_demands": {},  # job id -> (weak ref to the job, (alpha, beta), the same as lists, type codes): demand_entry
    }
    return tables


#: a cluster's demand cache is emptied past this many jobs (a long simulation sees many)
DEMANDS_KEPT = 50_000
#: the same for its tables per job shape (``_static``)
STATIC_KEPT = 4096


def demand_entry(job: Job, resources: tuple[str, ...], gpu_types: tuple[str | None, ...], cache: dict) -> tuple:
    """(a weak reference to job, (alpha, beta), (alpha, beta) as lists of floats, the codes
    of :func:`job_types`) for the cluster's demand cache, valid while ``job`` is the very
    object asked about (a revised job is a new one); the weak reference lets a finished job go."""
    if len(cache) >= DEMANDS_KEPT:
        cache.clear()
    alpha, beta = demand_vectors(job, resources)
    codes = tuple(gpu_types.index(g) for g in job_types(gpu_types, job))
    return weakref.ref(job), (alpha, beta), (alpha.tolist(), beta.tolist()), codes


def job_types(gpu_types: tuple[str | None, ...], job: Job) -> tuple[str | None, ...]:
    """The types of ``gpu_types`` (a cluster's) the job's workers may use (MODEL.md 8),
    fastest first by the fastest rate of the type's table (ties, and jobs with one table
    or a linear speed: the cluster's order)."""
    types = [g for g in gpu_types if job.runs_on(g)]
    if job.speed is None or job.speed.types is None:
        return tuple(types)
    return tuple(sorted(types, key=lambda g: -job.speed.table(g).fastest))
