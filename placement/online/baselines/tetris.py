"""Tetris: multi-resource packing by alignment, with a shortest-remaining-work term."""
from __future__ import annotations

import numpy as np

from placement.model.instance import TOL_FIT, Instance, Job
from placement.online.baselines._common import (arrival_order, local_time, moves_pay, settle,
                                                unit_demand, workers)
from placement.online.policy import TaskDict, View
from placement.slots.residual import Residual
from placement.model.progress import canonical, job_rate


class Tetris:
    """Tetris (Grandl et al., "Multi-Resource Packing for Cluster Schedulers",
    SIGCOMM 2014), with a DL job's worker (and its PS share) as the task.

    Rules, each slot:

    1. No preemption (Tetris never preempts running tasks): a job that ran last slot
       keeps its task set if it still fits; jobs are re-installed in arrival order.
    2. Greedy packing, machine by machine (Tetris schedules a machine when it has free
       resources; at a slot's start all have): for each machine in cluster order, the
       best-scoring unit that fits on it is placed, again and again, until none fits;
       then the next machine. The unit of a job with no workers is its gang
       (``min_workers`` and their PSs, local on the machine if they fit there, else
       spread with that machine preferred, scored as one worker); of a running job, one
       more worker on the machine with the extra PS ``min_ps(W+1)`` needs (on the same
       machine, else beside the workers elsewhere).
    3. Score = alignment + epsilon x p:
       alignment = sum_r (d_r / c_hr) (f_hr / c_hr), the dot product of the unit's demand
       d and the machine's free vector f, both normalised by the machine's capacity c,
       times (1 - remote_penalty) when the unit makes its job span machines (Tetris'
       penalty for placements that give up locality; 10% by default here). Links are
       not a dimension of the score; the Residual enforces them;
       p = -(remaining work) = -(remaining batches x local batch time x sum_r u_r / C_r),
       u the per-worker demand with its kappa share of a PS and C_r the largest machine
       capacity of r (remaining worker-seconds weighted by the resources they hold);
       epsilon = m x (mean alignment) / (mean |p|) over the units that fit (the paper's
       normalisation of the two terms), with the knob m (default 1).
    4. MODEL.md adaptation (a DL job's tasks are not independent): a worker that would
       lower its job's throughput W / theta (spreading a communication-heavy job) is not
       added, and the growth of a job that ran last slot is undone (the job frozen for
       the slot) unless it finishes the job sooner, restart included; the freed room is
       packed again. Tetris' fairness knob is not modelled (every job may be picked).
    5. GPU types (MODEL.md 8; Tetris has none): a machine takes units only of jobs that run
       on its type and hold no workers on another; a gang starts on that machine's type.
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
        """Rule 2: machine by machine, the best-scoring unit that fits until none does."""
        topo = view.instance.topology
        root = topo.root_id
        rows: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
        for h, machine in enumerate(res.machine_ids):
            tried: set[tuple[str, int]] = set()  # (job, its workers) that failed here
            while True:
                jobs = [j for j in order if j not in frozen
                        and workers(cur.get(j)) < view.jobs[j].job.max_workers
                        and (j, workers(cur.get(j))) not in tried
                        and (not topo.typed or self._on_type(view, j, cur.get(j), topo.machines[h].gpu_type))]
                for j in jobs:
                    if j not in rows:
                        rows[j] = self._row(view, res, j, cur.get(j))
                if not jobs:
                    break
                units = np.array([rows[j][0] for j in jobs])
                gangs = np.array([rows[j][1] for j in jobs])
                free = res.free[h]
                whole = (gangs <= free + TOL_FIT).all(axis=1)
                fits = whole | (units <= free + TOL_FIT).all(axis=1)
                if not fits.any():
                    break
                cap = np.where(res.cap[h] > 0, res.cap[h], 1.0)
                align = np.where(whole, gangs @ (free / cap ** 2), units @ (free / cap ** 2))
                spans = [not whole[a] if not workers(cur.get(j))
                         else len(cur[j]) > 1 or machine not in cur[j] for a, j in enumerate(jobs)]
                align = align * np.where(spans, 1 - self.remote_penalty, 1.0)
                p = -np.array([rows[j][2] for j in jobs])
                mean_p = np.abs(p[fits]).mean()
                eps = self.m * align[fits].mean() / mean_p if mean_p > 0 else 0.0
                a = int(np.argmax(np.where(fits, align + eps * p, -np.inf)))
                j = jobs[a]
                if self._grow(res, view.instance, view.jobs[j].job, cur, j, machine, root):
                    del rows[j]
                else:
                    tried.add((j, workers(cur.get(j))))

    @staticmethod
    def _on_type(view: View, j: str, tasks: TaskDict | None, gpu_type: str | None) -> bool:
        """Rule 5: may job ``j`` holding ``tasks`` add a unit on a machine of ``gpu_type``?"""
        topo = view.instance.topology
        return view.jobs[j].job.runs_on(gpu_type) and all(
            topo.machines[topo.machine_index[m]].gpu_type == gpu_type for m, (w, _) in (tasks or {}).items() if w)

    def _row(self, view: View, res: Residual, j: str, tasks: TaskDict | None
             ) -> tuple[np.ndarray, np.ndarray, float]:
        """(unit, gang, remaining work) of job ``j`` holding ``tasks`` (rules 2 and 3)."""
        job = view.jobs[j].job
        alpha, beta = res.demand(job)
        w = workers(tasks)
        if w == 0:
            unit = unit_demand(res, job)
            gang = job.min_workers * alpha + job.min_ps(job.min_workers) * beta
        else:
            held_ps = sum(s for _, s in tasks.values())
            unit = gang = alpha + max(0, job.min_ps(w + 1) - held_ps) * beta
        biggest = res.cap.max(axis=0)
        per = unit_demand(res, job) / np.where(biggest > 0, biggest, 1.0)
        return unit, gang, view.jobs[j].remaining * local_time(view.instance, job) * per.sum()

    @staticmethod
    def _grow(res: Residual, instance: Instance, job: Job, cur: dict[str, TaskDict], j: str,
              h: str, root: str) -> bool:
        """Add the job's unit on machine ``h``; False (nothing changed) if it does not fit
        or would lower the job's throughput (rule 4)."""
        old = res.remove(j)
        w = workers(old)
        if w == 0:  # on machine h's GPU type (rule 5)
            g = instance.topology.machines[instance.topology.machine_index[h]].gpu_type
            tasks = res.local(job, job.min_workers, within=h, gpu_type=g) or res.find(
                job, job.min_workers, prefer=[h], gpu_type=g)
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
            if tasks is not None and job_rate(instance, job, tasks) <= job_rate(instance, job, old):
                tasks = None
        if tasks is None:
            if old:
                res.place(job, old)
            return False
        res.place(job, tasks)
        cur[j] = tasks
        return True
