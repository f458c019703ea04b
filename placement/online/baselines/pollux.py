"""Pollux: the power mean of the jobs' speedups over their fair share, each round."""
from __future__ import annotations

from placement.online.baselines._common import place_count, settle, workers
from placement.online.policy import TaskDict, View
from placement.online.sharing import share_counts

__all__ = ["Pollux"]


class Pollux:
    """Pollux's scheduling policy (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
    Goodput-Optimized Deep Learning", OSDI 2021, section 4.2; the peer's ``pollux.py``,
    ``Problem._evaluate``), over MODEL.md's speed. It reads no job length: it decides the
    same at every information level.

    Rules, each slot:

    1. Counts: the power-mean share (:mod:`placement.online.sharing`: Pollux's objective,
       p = -1 over the jobs' speedups relative to their fair share, a count change discounted
       by the restart it costs), exact over worker counts where Pollux searches with a
       genetic algorithm.
    2. Placement, which Pollux searches and ours does not: a job keeping its count keeps its
       machines when they fit, another goes on one machine when one holds it, else in the
       smallest subtree (:func:`place_count`, ``Residual.find``), and a count that cannot be
       placed is lowered until it can; jobs keeping their count first, then the largest.
    """

    name = "pollux"
    #: the Pollux arena offers it each job up to Pollux's own exploration cap (the JobInfo's
    #: ``max_replicas``), not our useful count under it: its objective sizes the jobs
    uses_exploration_cap = True

    def decide(self, view: View) -> dict[str, TaskDict]:
        if not view.jobs:
            return {}
        want = share_counts(view)
        order = list(want)  # arrival order, as share_counts lists the jobs
        res = view.residual()
        decided: dict[str, TaskDict] = {}
        for j in sorted(order, key=lambda j: (workers(view.jobs[j].previous) != want[j], -want[j], j)):
            state, n = view.jobs[j], want[j]
            while n >= max(1, state.job.min_workers):
                tasks = place_count(res, state, n)
                if tasks is not None:
                    decided[j] = tasks
                    break
                n -= 1
        return settle(view, decided, order)
