"""Dominant Resource Fairness by progressive filling."""
from __future__ import annotations

import heapq

from placement.online.baselines._common import (arrival_order, by_workers, held_vector,
                                                place_count, settle, share, workers)
from placement.online.policy import TaskDict, View
from placement.model.progress import job_rate


class DRF:
    """Dominant Resource Fairness (Ghodsi et al., "Dominant Resource Fairness: Fair
    Allocation of Multiple Resource Types", NSDI 2011), progressive filling.

    Rules, each slot:

    1. Every active job starts with nothing. A job's dominant share is the largest, over
       the resources, of (what its workers and PSs hold) / (the cluster's total of that
       resource), divided by its ``weight`` (weighted DRF, as the paper defines it; plain
       DRF when weights are 1).
    2. Progressive filling: repeatedly, the job with the lowest dominant share (ties by
       arrival, then id) gets one more worker with its PS share, i.e. ``min_workers`` for
       a job that holds none, else W+1 workers and ``min_ps(W+1)`` PSs, the whole job
       re-placed local first, else in the smallest subtree, its own machines preferred
       (consolidated). A job that is at ``max_workers`` or whose next step does not fit
       keeps what it has and leaves the filling; it stops when no job can grow. (The
       paper's progressive filling raises every user's dominant share at the same rate
       and freezes the users whose next task no longer fits, then goes on with the
       others; its weighted variant divides the shares by the weights.)
    3. MODEL.md adaptation: in DRF every task a user gets adds to its work, but here one
       more worker that spreads a communication-heavy job over machines slows every
       worker of it (MODEL.md 4: the mini-batch time at ``worker_gbps`` instead of the
       machine's ``local_gbps``). A step that does not raise the job's throughput
       W / theta(tasks) is therefore not taken: the job keeps what it has and leaves the
       filling, as a user whose demand is met does in the paper.
    4. Stability: at each step a job whose count equals last slot's takes its previous
       task set if it fits, and the final packing keeps every job's previous task set
       when its count is unchanged (:func:`settle`).
    5. GPU types (MODEL.md 8; DRF has none): each step re-places the job's workers on one
       type it runs on, the fastest with room (the Residual's searches).
    """

    name = "drf"

    def decide(self, view: View) -> dict[str, TaskDict]:
        res = view.residual()
        totals = res.cap.sum(axis=0)
        order = arrival_order(view)
        heap = [(0.0, rank, j) for rank, j in enumerate(order)]
        count = dict.fromkeys(order, 0)
        while heap:
            _, rank, j = heapq.heappop(heap)
            state = view.jobs[j]
            job = state.job
            target = job.min_workers if count[j] == 0 else count[j] + 1
            if target > job.max_workers:
                continue
            old = res.remove(j)
            tasks = place_count(res, state, target, prefer=by_workers(old))
            if tasks is not None and old and (
                    job_rate(view.instance, job, tasks) <= job_rate(view.instance, job, old)):
                res.remove(j)  # rule 3: the step would slow the job down
                tasks = None
            if tasks is None:
                if old:
                    res.place(job, old)
                continue
            count[j] = target
            heapq.heappush(heap, (share(held_vector(res, job, tasks), totals) / job.weight, rank, j))
        decided = {j: res.held(j) for j in order if workers(res.held(j))}
        return settle(view, decided, order)
