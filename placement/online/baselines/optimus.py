"""Optimus: marginal-gain resource allocation and fewest-machines placement."""
from __future__ import annotations

import heapq

import numpy as np

from placement.model.instance import TOL_FIT, Job
from placement.online.baselines._common import (arrival_order, by_workers, keep_previous,
                                                settle, share, workers)
from placement.online.policy import JobState, TaskDict, View
from placement.slots.residual import Residual
from placement.model.progress import job_rate


class Optimus:
    """Optimus (Peng et al., "Optimus: An Efficient Dynamic Resource Scheduler for Deep
    Learning Clusters", EuroSys 2018), with MODEL.md's speed in place of Optimus' fitted
    speed model.

    Rules, each slot:

    1. Start: every active job, in arrival order, gets ``min_workers`` workers and their
       ``min_ps`` PSs if they fit (Optimus starts each job with its smallest
       configuration); a job that does not fit waits.
    2. Marginal gain: repeatedly, the job with the largest
       (T(W) - T(W+1)) / d gets one more worker, where T(W) = remaining batches x
       theta(W) / W is its remaining time at W workers (MODEL.md 4: W workers do
       W x slot / theta batches a slot), theta(W) the per-batch time when one machine
       of the cluster could hold W workers and their PSs (local_gbps) and at
       worker_gbps otherwise, and d the dominant share (of the cluster's totals) of the
       added worker plus the PS it needs when ``min_ps(W+1) > min_ps(W)`` (PSs are
       added exactly when kappa makes them the bottleneck; in MODEL.md a PS beyond
       ``min_ps`` adds no speed). Gains <= 0 (e.g. spreading loses more than a worker
       adds) end that job's growth, as does ``max_workers``, a step that does not fit,
       or one whose placement (rule 3) runs the job slower than before: the gain assumed
       one machine could hold it, but the placement found may have to spread, which in
       MODEL.md can cost more than the worker adds (without this check a job could stay
       spread and slow for good: the makespan anomaly of our Philly runs).
    3. Placement (Optimus' principle): the fewest machines with an even split. For k = 1, 2, ...
       the job's W workers and S PSs are divided as evenly as possible over the k
       machines with the most room for its workers (its own machines first among
       equals); the first k that fits (capacity and links) is used. If none does, local
       first, else the smallest subtree (``Residual.find``).
    4. Stability: a job whose count equals last slot's keeps its task set if it fits
       (:func:`settle`); Optimus otherwise re-allocates every slot.
    5. GPU types (MODEL.md 8; Optimus has none): T(W) is the fastest of the job's types, and
       rule 3 places the workers on one type, the fewest machines of each type, the fastest.
    """

    name = "optimus"

    def decide(self, view: View) -> dict[str, TaskDict]:
        res = view.residual()
        totals = res.cap.sum(axis=0)
        order = arrival_order(view)
        count: dict[str, int] = {}
        for j in order:
            if self._place(res, view.jobs[j], view.jobs[j].job.min_workers) is not None:
                count[j] = view.jobs[j].job.min_workers
        heap = []
        for rank, j in enumerate(order):
            if j in count:
                self._push(heap, res, view.jobs[j], count[j], totals, rank)
        while heap:
            _, rank, j = heapq.heappop(heap)
            state = view.jobs[j]
            old = res.remove(j)
            new = self._place(res, state, count[j] + 1, by_workers(old))
            if new is not None and not self._faster(view, state, old, new):
                res.remove(j)  # the step spreads the job into a slowdown: not taken
                new = None
            if new is None:
                res.place(state.job, old)
                continue
            count[j] += 1
            self._push(heap, res, state, count[j], totals, rank)
        decided = {j: res.held(j) for j in order if workers(res.held(j))}
        return settle(view, decided, order)

    @staticmethod
    def _faster(view: View, state: JobState, old: TaskDict, new: TaskDict) -> bool:
        """Does the placement found for one more worker run the job faster than ``old``?
        The gain of rule 2 assumes the best class; the placement may have to spread."""
        inst, job = view.instance, state.job
        return job_rate(inst, job, new) > job_rate(inst, job, old)

    # ----- marginal gain -------------------------------------------------------------------
    def _push(self, heap: list, res: Residual, state: JobState, w: int, totals: np.ndarray,
              rank: int) -> None:
        gain = self.gain(res, state, w, totals)
        if gain > 0:
            heapq.heappush(heap, (-gain, rank, state.job.id))

    def gain(self, res: Residual, state: JobState, w: int, totals: np.ndarray) -> float:
        """Reduction of the remaining time per unit of dominant share of one more worker."""
        job = state.job
        if w >= job.max_workers:
            return 0.0
        alpha, beta = res.demand(job)
        added = alpha + (job.min_ps(w + 1) - job.min_ps(w)) * beta
        drop = self.remaining_time(res, state, w) - self.remaining_time(res, state, w + 1)
        return drop / max(share(added, totals), 1e-12)

    @staticmethod
    def remaining_time(res: Residual, state: JobState, w: int) -> float:
        """T(W) = remaining x theta(W) / W (seconds), on the fastest of the job's GPU types."""
        job = state.job
        alpha, beta = res.demand(job)
        need = w * alpha + job.min_ps(w) * beta
        fit = (need <= res.cap + TOL_FIT).all(axis=1)
        times = []
        for g in res.job_types(job):
            holds = fit & res.may_hold_workers(job, g)
            if job.speed is not None:  # the table's rate, local if one machine could hold it (MODEL.md 8)
                times.append(state.remaining / job.speed.rate(w, 1 if holds.any() else 2, g))
            else:
                gbps = res.local_gbps[holds].max() if holds.any() else job.worker_gbps
                times.append(state.remaining * job.batch_time(gbps) / w)
        return min(times)

    # ----- placement -----------------------------------------------------------------------
    @staticmethod
    def _place(res: Residual, state: JobState, w: int, prefer: list[str] | None = None
               ) -> TaskDict | None:
        """Place ``w`` workers on the fewest machines, evenly (rule 3); None if impossible."""
        job = state.job
        kept = keep_previous(res, state, w)
        if kept is not None:
            return kept
        prefer = prefer or by_workers(state.previous)
        tasks = Optimus._even(res, job, w, prefer)
        if tasks is None:
            tasks = res.find(job, w, prefer=prefer)
        if tasks is not None:
            res.place(job, tasks)
        return tasks

    @staticmethod
    def _even(res: Residual, job: Job, w: int, prefer: list[str]) -> TaskDict | None:
        """Rule 3's even split on the fewest machines of each GPU type; the fastest found."""
        s = job.min_ps(w)
        room = res.worker_room(job)
        pref = set(prefer)
        found = []
        for g in res.job_types(job):
            ranked = sorted(np.flatnonzero(res.may_hold_workers(job, g)).tolist(),
                            key=lambda h: (-room[h], res.machine_ids[h] not in pref, h))
            for k in range(1, min(w, len(ranked)) + 1):
                hs = ranked[:k]
                if room[hs].sum() < w:
                    continue
                tasks = {res.machine_ids[h]: (w // k + (i < w % k), s // k + (i < s % k))
                         for i, h in enumerate(hs)}
                tasks = {h: ws for h, ws in tasks.items() if ws[0] or ws[1]}
                if res.fits(job, tasks):
                    found.append(tasks)
                    break
        return max(found, key=lambda tasks: job_rate(res.instance, job, tasks), default=None)
