"""Tetris: multi-resource packing by alignment, with a shortest-remaining-work term."""
from __future__ import annotations

import numpy as np

from placement.online.baselines._common import (arrival_order, local_time, moves_pay, settle,
                                                unit_demand, workers)
from placement.online.policy import TaskDict, View
from placement.packing import TOL_FIT, Residual
from placement.progress import canonical


class Tetris:
    """Tetris (Grandl et al., "Multi-Resource Packing for Cluster Schedulers",
    SIGCOMM 2014), with a DL job's worker (and its PS share) as the task.

    Rules, each slot:

    1. No preemption (Tetris never preempts running tasks): a job that ran last slot
       keeps its task set if it still fits; jobs are re-installed in arrival order.
    2. Greedy packing: while some (job, machine) pair fits, place the best-scoring one.
       The unit of a job with no workers is its gang (``min_workers`` and their PSs, local
       on the machine, else spread with that machine preferred); of a running job, one
       more worker on that machine with the extra PS ``min_ps(W+1)`` needs (on the same
       machine, else beside the workers elsewhere).
    3. Score = alignment + epsilon x p (section 3 of the paper):
       alignment = sum_r (d_r / c_hr) (f_hr / c_hr), the dot product of the unit's demand
       d and the machine's free vector f, both normalised by the machine's capacity c,
       times (1 - remote_penalty) (the paper's remote penalty, 10% by default) when the
       unit makes its job span machines (links are not a dimension of the score; they
       are enforced by the Residual);
       p = -(remaining work) = -(remaining batches x local batch time x sum_r u_r / C_r),
       u the per-worker demand with its kappa share of a PS and C_r the largest machine
       capacity of r (remaining worker-seconds weighted by the resources they hold);
       epsilon = m x (mean alignment) / (mean |p|) over the pairs of the step, the
       paper's normalisation, with the knob m (default 1).
    4. Growth of a job that ran last slot is undone (and the job frozen for the slot)
       unless it finishes the job sooner, restart included; the freed room is packed
       again. Tetris' fairness knob is not modelled (every job may be picked).
    """

    name = "tetris"

    def __init__(self, m: float = 1.0, remote_penalty: float = 0.1):
        self.m = m
        self.remote_penalty = remote_penalty

    def decide(self, view: View) -> dict[str, TaskDict]:
        res = view.residual()
        order = arrival_order(view)
        cur: dict[str, TaskDict] = {}
        for j in order:
            prev = view.jobs[j].previous
            if workers(prev) and res.fits(view.jobs[j].job, prev):
                res.place(view.jobs[j].job, prev)
                cur[j] = dict(prev)
        kept = set(cur)
        frozen: set[str] = set()
        while True:
            self._fill(view, res, order, cur, frozen)
            undo = [j for j in kept - frozen if canonical(cur[j]) != canonical(view.jobs[j].previous)
                    and not moves_pay(view.instance, view.jobs[j], cur[j], view.jobs[j].previous)]
            if not undo:
                break
            for j in sorted(undo):  # (if others took the old room meanwhile, the growth stays)
                job, prev = view.jobs[j].job, view.jobs[j].previous
                grown = res.remove(j)
                cur[j] = dict(prev) if res.fits(job, prev) else grown
                res.place(job, cur[j])
            frozen.update(undo)
        return settle(view, cur, order)

    # ----- the greedy packing ---------------------------------------------------------------
    def _fill(self, view: View, res: Residual, order: list[str], cur: dict[str, TaskDict],
              frozen: set[str]) -> None:
        inst = view.instance
        topo = inst.topology
        biggest = res.cap.max(axis=0)
        failed: dict[tuple[str, int], list[int]] = {}  # (job, its workers) -> machines tried
        while True:
            jobs = [j for j in order if j not in frozen
                    and workers(cur.get(j)) < view.jobs[j].job.max_workers]
            if not jobs:
                return
            units, gangs, work = [], [], []
            for j in jobs:
                job = view.jobs[j].job
                alpha, beta = res.demand(job)
                w = workers(cur.get(j))
                s_now = sum(s for _, s in cur.get(j, {}).values())
                if w == 0:
                    units.append(unit_demand(res, job))
                    gangs.append(job.min_workers * alpha + job.min_ps(job.min_workers) * beta)
                else:
                    units.append(alpha + max(0, job.min_ps(w + 1) - s_now) * beta)
                    gangs.append(units[-1])
                per = unit_demand(res, job) / np.where(biggest > 0, biggest, 1.0)
                work.append(view.jobs[j].remaining * local_time(inst, job) * per.sum())
            # a gang that fits on the machine is scored whole; else one worker of it, and
            # the gang is spread with that machine preferred
            whole = self._fits(res, np.array(gangs))
            fits = whole | self._fits(res, np.array(units))
            align = np.where(whole, self._align(res, np.array(gangs)), self._align(res, np.array(units)))
            align *= np.where(self._spans(res, jobs, cur, whole), 1 - self.remote_penalty, 1.0)
            for a, j in enumerate(jobs):
                fits[a, failed.get((j, workers(cur.get(j))), [])] = False
            if not fits.any():
                return
            p = -np.array(work)
            mean_p = np.abs(p).mean()
            eps = self.m * align[fits].mean() / mean_p if mean_p > 0 else 0.0
            score = np.where(fits, align + eps * p[:, None], -np.inf)
            a, h = np.unravel_index(int(np.argmax(score)), score.shape)
            j = jobs[a]
            if not self._grow(res, view.jobs[j].job, cur, j, res.machine_ids[h], topo.root_id):
                failed.setdefault((j, workers(cur.get(j))), []).append(int(h))

    @staticmethod
    def _fits(res: Residual, demand: np.ndarray) -> np.ndarray:
        """jobs x machines: does the demand fit in what the machine has free?"""
        return (demand[:, None, :] <= res.free[None] + TOL_FIT).all(axis=2)

    @staticmethod
    def _align(res: Residual, demand: np.ndarray) -> np.ndarray:
        """jobs x machines: sum_r (d_r / c_hr) (f_hr / c_hr)."""
        cap = np.where(res.cap > 0, res.cap, 1.0)
        return np.einsum("jr,hr->jh", demand, res.free / cap ** 2)

    @staticmethod
    def _spans(res: Residual, jobs: list[str], cur: dict[str, TaskDict], whole: np.ndarray
               ) -> np.ndarray:
        """jobs x machines: would the unit make the job span machines (remote placement)?"""
        out = ~whole
        for a, j in enumerate(jobs):
            tasks = cur.get(j)
            if workers(tasks):
                out[a] = [len(tasks) > 1 or h not in tasks for h in res.machine_ids]
        return out

    @staticmethod
    def _grow(res: Residual, job, cur: dict[str, TaskDict], j: str, h: str, root: str) -> bool:
        """Add the job's unit on machine ``h``; False (nothing changed) if it does not fit."""
        old = res.remove(j)
        w = workers(old)
        if w == 0:
            tasks = res.local(job, job.min_workers, within=h) or res.find(job, job.min_workers,
                                                                          prefer=[h])
        else:
            s_now = sum(s for _, s in old.values())
            extra = max(0, job.min_ps(w + 1) - s_now)
            tasks = dict(old)
            ww, ss = tasks.get(h, (0, 0))
            tasks[h] = (ww + 1, ss + extra)
            if not res.fits(job, tasks):
                placed = {m: x for m, (x, _) in old.items() if x}
                placed[h] = placed.get(h, 0) + 1
                tasks = res.beside(job, placed, within=root)
        if tasks is None:
            if old:
                res.place(job, old)
            return False
        res.place(job, tasks)
        cur[j] = tasks
        return True
