"""A plan from the column LP (price-and-branch): one generated schedule per job, chosen by a small integer
program, placed on the machines slot by slot and handed to the slot rules as the intent.

The column LP (:mod:`placement.bounds.column_bound`) already knows, per job, whole schedules that respect the
cluster's totals slot by slot; choosing one per job as a 0/1 program over the columns generated is fast
(hundreds of columns) and gives each job its worker count, locality and running slots.  Machines are
then found slot by slot with the slot rules' own capacity search, on the configuration's GPU type (a job
keeps its machines while its configuration stays, so the plan's "no restart" holds where it can); the slot
rules (:mod:`placement.slots.rules`) keep every MODEL.md rule and re-use what the plan leaves free, and the
chain's referee scores the result.
"""

from __future__ import annotations

import time

import numpy as np

from placement import deadline
from placement.bounds.column_bound import ColumnBound, column_bound
from placement.chain import ForwardOnly, Trace
from placement.slots.residual import Residual
from placement.model.instance import Instance
from placement.model.intent import Intent, JobIntent
from placement.model.topology import Topology
from solvers.colgen import restricted_master
from solvers.mip import solve_mip

__all__ = ["ColumnPlan", "column_plan"]

#: seconds the 0/1 choice among the generated columns may take (it is a heuristic: its best so far is used)
PLAN_SECONDS = 10.0


def column_plan(instance: Instance, bound: ColumnBound) -> list[Intent]:
    """The best whole-column choice found in time as two intents: placed on the machines, and as
    sizes only (each job's worker count, the slot rules choosing where); none when there is no choice.
    Neither realisation wins everywhere: the chain keeps the better one."""
    if not bound.columns or bound.capacity is None:
        return []
    master = restricted_master(bound.columns, bound.capacity, len(instance.jobs), integer=True)
    result = solve_mip(master, time_limit=deadline.remaining(PLAN_SECONDS))
    if not result.status.has_solution:
        return []
    chosen: dict[int, tuple[int, ...]] = {}
    for q in np.flatnonzero(result.x > 0.5):
        chosen[bound.columns[q].block] = bound.columns[q].payload
    return [Intent(instance.horizon, _placed(instance, bound, chosen)),
            Intent(instance.horizon, _sizes(instance, bound, chosen))]


def _sizes(instance: Instance, bound: ColumnBound, chosen: dict[int, tuple[int, ...]]) -> list[dict[str, JobIntent]]:
    """Per slot each planned job's size, on no machine in particular (a hint the slot rules place),
    named on the first machine of its GPU type."""
    topo = instance.topology
    first_of = _first_of_type(topo)
    slots: list[dict[str, JobIntent]] = [{} for _ in range(instance.horizon)]
    for k, payload in chosen.items():
        schedules = bound.jobs[k]
        for i, c in enumerate(payload):
            if c >= 0:
                config = schedules.configs[c]
                slots[schedules.first + i][schedules.job.id] = JobIntent(
                    topo.root_id, {first_of[config.gpu_type]: (config.workers, config.ps)})
    return slots


def _placed(instance: Instance, bound: ColumnBound, chosen: dict[int, tuple[int, ...]]) -> list[dict[str, JobIntent]]:
    """Per slot, machines for the planned configurations: a job keeping its configuration keeps its
    machines when they still fit (no restart), the others go largest first where the capacity search of
    the slot rules puts them; a job nothing fits is left to the slot rules with a hint of its size."""
    topo = instance.topology
    first_of = _first_of_type(topo)
    residual = Residual(instance)
    share = 1.0 / np.maximum(instance.capacity_matrix.sum(axis=0), 1e-12)
    slots: list[dict[str, JobIntent]] = [{} for _ in range(instance.horizon)]
    before: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {}   # job -> (config, tasks) last slot
    for t in range(instance.horizon):
        residual.clear()
        plan = [(bound.jobs[k], payload[t - bound.jobs[k].first]) for k, payload in chosen.items()
                if 0 <= t - bound.jobs[k].first < len(payload) and payload[t - bound.jobs[k].first] >= 0]
        plan.sort(key=lambda p: (before.get(p[0].job.id, (-1,))[0] != p[1], -float(p[0].configs[p[1]].use @ share)))
        now: dict[str, tuple[int, dict[str, tuple[int, int]]]] = {}
        for schedules, k in plan:
            job, config = schedules.job, schedules.configs[k]
            kept = before.get(job.id)
            tasks = kept[1] if kept is not None and kept[0] == k and residual.fits(job, kept[1]) else None
            if tasks is None:
                on_type = {"gpu_type": topo.gpu_types[config.gpu_type]} if topo.typed else {}
                tasks = residual.find(job, config.workers, prefer=list(kept[1]) if kept else (), **on_type)
            if tasks is None:
                slots[t][job.id] = JobIntent(topo.root_id, {first_of[config.gpu_type]: (config.workers, config.ps)})
                continue
            residual.place(job, tasks)
            now[job.id] = (k, tasks)
            slots[t][job.id] = JobIntent(topo.lca(list(tasks)), dict(tasks))
        before = now
    return slots


def _first_of_type(topology: Topology) -> dict[int, str]:
    """Per GPU type code, its first machine (where a size-only hint names the job's type)."""
    first: dict[int, str] = {}
    for machine, k in zip(topology.machines, topology.type_code.tolist()):
        first.setdefault(k, machine.id)
    return first


class ColumnPlan(ForwardOnly):
    """The chain step: instance -> the column LP's plan as candidates (placed on the machines, and
    sizes only), and the column bound (computed here, or the one given) as the trace's bound.  The
    plan is kept, so chains that differ only in their slot rules share it."""

    def __init__(self, bound: ColumnBound | None = None, time_limit: float | None = 10.0):
        self.bound, self.time_limit = bound, time_limit
        self._plans: list[Intent] | None = None

    def apply(self, instance: Instance, trace: Trace) -> tuple[list[Intent], None]:
        clock = time.perf_counter()
        if self.bound is None:
            self.bound = column_bound(instance, time_limit=deadline.remaining(self.time_limit))
        trace.time("column bound", clock)
        if self.bound is None:
            return [], None
        trace.bound, trace.bound_source = self.bound.bound, self.bound.source
        clock = time.perf_counter()
        if self._plans is None:
            self._plans = column_plan(instance, self.bound)
        trace.time("column plan", clock)
        return list(self._plans), None
