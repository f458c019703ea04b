"""The greedy baseline: the schedule any LP-based method must beat.

Rules, slot by slot, over the jobs that have arrived and not completed:

1. Shortest remaining work first: jobs in order of remaining batches x fastest
   per-batch time / max_workers / weight (Smith's rule for the weighted objective; plain
   SRPT when weights are equal), ties by arrival and id. The order is re-evaluated each
   slot, so a short job that arrives can take capacity before a long one (preemption).
2. Stable allocations: a job that ran last slot keeps exactly its task set if it still
   fits (no restart), unless another placement finishes it in fewer slots despite the
   restart it costs; starting jobs are packed around the previous task sets and evict
   one (later in the order) only when they cannot start at all otherwise.
3. Local-first packing, PSs beside workers: a job that starts gets the placement that
   finishes it soonest among the largest local one (a machine with the largest
   local_gbps, tightest fit) and the largest spread one in the smallest subtree that holds
   it with every link respected (ties: fewer workers, then faster, then local); its
   ``min_ps`` PSs sit on the workers' machines first.
4. A job that completes this slot keeps only the workers it needs to complete it.
5. GPU types (MODEL.md 8): a job's workers sit on one type it runs on; rule 3's candidates
   are the best of each type, so a job starts on the type that finishes it soonest.

These are exactly rules c and d of :mod:`placement.slots.rules` with an empty intent, so
the baseline *is* the chain :data:`GREEDY`, ``[SlotRules, EmptyIntent]``: it shares the
same packing and the same referee check. It is built once here; ``placement solve --solver
greedy``, the empty instance and the exact solver's start all run it.
"""
from __future__ import annotations

from dataclasses import replace

from placement.chain import Chain, EmptyIntent, SlotRules
from placement.model.instance import Instance
from placement.model.schedule import Schedule

__all__ = ["GREEDY", "greedy"]

#: the greedy chain (its steps hold no state between runs, so one serves every call)
GREEDY = Chain([SlotRules(), EmptyIntent()], back_label="greedy")


def greedy(instance: Instance) -> Schedule:
    """The greedy baseline schedule (rules in the module docstring), checked by the referee."""
    schedule = GREEDY.run(instance).schedule
    return replace(schedule, extra={**schedule.extra, "solver": "greedy"})
