"""Partitions of the LP policy (POP, Narayanan et al., SOSP 2021): many jobs on a large
cluster are split into independent, smaller window models.

*Partitions* (POP, Narayanan et al., SOSP 2021): with more than ``jobs_per_partition``
active jobs, the top-level subtrees (racks) are dealt into k groups of similar
capacity and the jobs into the same k groups (a running job stays with the rack it
runs in; the others are dealt in order of remaining processing time, so every group
gets a mix); each group is an independent, smaller window model. One partition when
the cluster is small.
"""
from __future__ import annotations

import bisect
import math

import numpy as np

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
    _deal(waiting, buckets)
    machine_group = group_of_top[top_of_machine]
    return [(buckets[g], np.flatnonzero(machine_group == g)) for g in range(k) if buckets[g]]


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
