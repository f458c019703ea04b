"""First-in, first-out: the scheduler every cluster starts with."""
from __future__ import annotations

from placement.online.baselines._common import arrival_order, place_most, settle
from placement.online.policy import TaskDict, View


class FIFO:
    """First-in, first-out, as in YARN's FIFO scheduler and the FIFO baseline of Tiresias
    (Gu et al., NSDI 2019) and Optimus (Peng et al., EuroSys 2018).

    Rules, each slot:

    1. Queue: active jobs by arrival slot, ties by id.
    2. Each job in turn gets ``max_workers`` workers if they fit in what earlier jobs
       left, else the most that fit (at least ``min_workers``), with ``min_ps`` PSs
       beside them: local first (one machine), else spread in the smallest subtree.
    3. Strict (default): a job that cannot get even ``min_workers`` blocks the queue;
       no later job starts this slot (head-of-line blocking, the classic FIFO).
       ``backfill=True``: it is skipped and later jobs may use the room (FIFO with
       backfilling, the "fit-first" variant of Tiresias' simulator).
    4. Stability: a job that ran last slot keeps its task set while it fits; it is moved
       or grown only when the new placement finishes it sooner, restart included.
    """

    def __init__(self, backfill: bool = False):
        self.backfill = backfill
        self.name = "fifo-backfill" if backfill else "fifo"

    def decide(self, view: View) -> dict[str, TaskDict]:
        res = view.residual()
        order = arrival_order(view)
        decided: dict[str, TaskDict] = {}
        for j in order:
            state = view.jobs[j]
            tasks = place_most(res, view.instance, state, state.job.max_workers)
            if tasks is not None:
                decided[j] = tasks
            elif not self.backfill:
                break
        return settle(view, decided, order)
