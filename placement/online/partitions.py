"""Partitions of the LP policy (POP, Narayanan et al., SOSP 2021): many jobs on a large
cluster are split into independent, smaller window models.

*Partitions* (POP, Narayanan et al., SOSP 2021): with more than ``jobs_per_partition``
active jobs, the top-level subtrees (racks) are dealt into k groups of similar
capacity and the jobs into the same k groups (a running job stays with the rack it
runs in; the others are dealt in order of remaining processing time, so every group
gets a mix); each group is an independent, smaller window model. One partition when
the cluster is small.

GPU types (MODEL.md 8): a waiting job is dealt only among the groups where one type it runs
on holds its min_workers (else where one type holds the most of its workers), so no job is
stranded in a group without a machine it may use; on a cluster without types every group.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

from placement.formulation.domains import fit_kinds, fit_table
from placement.online.policy import View

__all__ = ["partitions"]


def partitions(view: View, jobs_per_partition: int) -> list[tuple[list[str], np.ndarray]]:
    """(job ids, machine indices) per partition: one when the jobs fit in one partition or
    the cluster has one top-level subtree (module docstring)."""
    topo = view.instance.topology
    n_machines = len(topo.machines)
    k = min(math.ceil(len(view.jobs) / jobs_per_partition), len(np.unique(_top_level(view))))
    if k <= 1:
        return [(list(view.jobs), np.arange(n_machines))]
    group_of_top, top_of_machine = _deal_racks(view, k)
    index = topo.machine_index
    buckets: list[list[str]] = [[] for _ in range(k)]
    waiting = []
    for job_id, state in view.jobs.items():
        used = [h for h, (w, s) in state.previous.items() if (w or s) and h in index]
        if used:
            buckets[group_of_top[top_of_machine[index[used[0]]]]].append(job_id)
        else:
            waiting.append(state)
    waiting.sort(key=lambda s: (s.remaining * s.job.batch_seconds / s.job.max_workers, s.job.id))
    machine_group = group_of_top[top_of_machine]
    if topo.typed:
        _deal_typed(view, waiting, buckets, machine_group)
    else:
        _deal(waiting, buckets)
    return [(buckets[g], np.flatnonzero(machine_group == g)) for g in range(k) if buckets[g]]


def _deal_typed(view: View, waiting: list, buckets: list[list[str]], machine_group: np.ndarray) -> None:
    """:func:`_deal` among each job's groups (module docstring, GPU types): the group with the
    fewest jobs, ties to the first at or after its rank (mod k)."""
    k, inst = len(buckets), view.instance
    n_types = len(inst.topology.gpu_types)
    cell = machine_group * n_types + inst.topology.type_code  # (group, type) of each machine
    most: dict[tuple, tuple] = {}  # per job shape and types: per group, the most workers one of its types holds
    for rank, state in enumerate(waiting):
        job = state.job
        kinds = fit_kinds(job, inst)
        key = (id(kinds), None if job.speed is None else job.speed.types)
        if key not in most:  # the entry keeps ``kinds`` alive, so its id is not reused meanwhile
            held = np.bincount(cell, weights=fit_table(job, inst).workers, minlength=k * n_types)
            most[key] = (kinds, held.reshape(k, n_types).max(axis=1))
        room = most[key][1]
        fit = room >= min(job.min_workers, room.max())
        g = min(np.flatnonzero(fit).tolist(), key=lambda g: (len(buckets[g]), (g - rank) % k))
        buckets[g].append(job.id)


def _deal(waiting: list, buckets: list[list[str]]) -> None:
    """Deal the waiting jobs, in order, each to the group with the fewest jobs, ties to the
    first group at or after its rank (mod k, cyclically): the smallest key (len(group),
    (g - rank) mod k). The groups of each size are kept sorted, so a job costs log k, not
    k (16,000 jobs in 128 groups: 2 million key evaluations before)."""
    k = len(buckets)
    levels: dict[int, list[int]] = {}
    for g in range(k):
        levels.setdefault(len(buckets[g]), []).append(g)
    low = min(levels)
    for rank, state in enumerate(waiting):
        while not levels.get(low):
            low += 1
        fewest = levels[low]
        i = bisect.bisect_left(fewest, rank % k)
        g = fewest.pop(i if i < len(fewest) else 0)
        buckets[g].append(state.job.id)
        bisect.insort(levels.setdefault(low + 1, []), g)


def _top_level(view: View) -> np.ndarray:
    """For each machine, the index of its top-level subtree (a child of the root)."""
    anc, depth, _ = view.instance.topology.ancestor_table
    return np.where(depth >= 1, anc[:, min(1, anc.shape[1] - 1)], np.arange(len(depth)))


def _deal_racks(view: View, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-level subtrees dealt into k groups of similar total capacity."""
    top = _top_level(view)
    tops, top_of_machine = np.unique(top, return_inverse=True)
    cap = np.array([sum(m.capacity.values()) for m in view.instance.topology.machines])
    size = np.bincount(top_of_machine, weights=cap)
    group = np.zeros(len(tops), dtype=np.int64)
    load = np.zeros(k)
    for r in np.argsort(-size, kind="stable"):
        g = int(np.argmin(load))
        group[r] = g
        load[g] += size[r]
    return group, top_of_machine
