"""A plan from the column LP (price-and-branch): one generated schedule per job, chosen by a small integer
program, handed to the slot rules as the intent.

The column LP (:mod:`placement.column_bound`) already knows, per job, whole schedules that respect the
cluster's totals slot by slot; choosing one per job as a 0/1 program over the columns generated is fast
(hundreds of columns) and gives each job its worker count, locality and running slots.  Where those
tasks go on the machines is left to the slot rules (:mod:`placement.slot_rules`), which keep every
MODEL.md rule and re-use what the plan leaves free; the chain's referee scores the result.
"""

from __future__ import annotations

import numpy as np

from placement import deadline
from placement.column_bound import ColumnBound
from placement.instance import Instance
from placement.intent import Intent, JobIntent
from solvers.colgen import restricted_master
from solvers.exact import solve_exact

__all__ = ["column_plan"]

#: seconds the 0/1 choice among the generated columns may take (it is a heuristic: its best so far is used)
PLAN_SECONDS = 10.0


def column_plan(instance: Instance, bound: ColumnBound) -> Intent | None:
    """The intent of the best whole-column choice found in time (None when there is none)."""
    if not bound.columns or bound.capacity is None:
        return None
    master = restricted_master(bound.columns, bound.capacity, len(instance.jobs), integer=True)
    result = solve_exact(master, time_limit=deadline.remaining(PLAN_SECONDS))
    if not result.status.has_solution:
        return None
    root = instance.topology.root_id
    anywhere = instance.topology.machines[0].id  # a hint only: the slot rules find the place
    slots: list[dict[str, JobIntent]] = [{} for _ in range(instance.horizon)]
    for q in np.flatnonzero(result.x > 0.5):
        column = bound.columns[q]
        schedules = bound.jobs[column.block]
        for i, k in enumerate(column.payload):
            if k >= 0:
                config = schedules.configs[k]
                slots[schedules.first + i][schedules.job.id] = JobIntent(root, {anywhere: (config.workers, config.ps)})
    return Intent(instance.horizon, slots)
