"""Worker/PS placement as a mixed packing-covering integer program whose LP relaxation
bounds MODEL.md's weighted total JCT from below (docs/formulation.md has the proof).

``formulate(instance)`` returns ``(Problem, Decoder)``: one apply/invert pair. On top
of the shared task variables of :mod:`placement.model_core` it adds, per job j:

- p[j,t] in [0, r_j] for each slot t >= a_j: the fraction of j's work credited to slot t,
  with the progress row  p[j,t] <= sum_{v,h} w[j,t,v,h] * speed / B_j;
- q[j] in [0, 1]: the fraction left after the window;
- the covering row  sum_t p[j,t] + q[j] >= 1 - 1e-9 (MODEL.md's completion tolerance);
- objective  sum_j w_j (Delta * sum_t (t+1) p[j,t] + K_j q[j]) + sum_j w_j Delta (D_j - a_j).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from placement.instance import Instance, Job
from placement.model_core import Core, Rows, fit_table
from placement.plan import Plan
from solvers.problem import Problem

#: The work a job must credit: MODEL.md completes a job at B_j (1 - 1e-9).
WORK = 1 - 1e-9


@dataclass(frozen=True)
class JobBound:
    """Per-job constants of the lower bound (docs/formulation.md, 'Objective')."""

    rate_cap: float   # r_j: the largest fraction of the remaining work one slot can do
    packing: float    # D_j: the slot-packing term added to the mean slot end
    overflow: float   # K_j: seconds charged per unit of work left after the window


def job_bound(instance: Instance, job: Job, remaining: float, end: int) -> JobBound:
    """r_j, D_j and K_j for ``remaining`` batches and a window ending at slot ``end``.

    r_j is the fastest a single slot can go: local on one machine h with as many workers
    (and their PSs) as h holds, at h's local rate, or spread over as many workers as the
    cluster holds at the spread rate (restart losses only slow a job down)."""
    dt = instance.slot_seconds
    machines = instance.topology.machines
    fits = fit_table(job, instance)
    local_gbps = np.array([m.local_gbps for m in machines])
    thetas = job.batch_seconds + 2 * job.gradient_mb * 0.008 / local_gbps
    ok = fits.local >= job.min_workers
    best = float((fits.local[ok] / thetas[ok]).max()) if ok.any() else 0.0
    room = min(job.max_workers, int(fits.workers.sum()))
    if len(machines) > 1 and room >= job.min_workers:
        best = max(best, room / job.batch_time(job.worker_gbps))
    rate_cap = best * dt / remaining
    full = math.floor(WORK / rate_cap) if rate_cap > 0 else 0
    packing = rate_cap * full * (full - 1) / 2 + (WORK - full * rate_cap) * full
    charge = remaining * job.batch_time(instance.best_local_gbps) / job.max_workers
    return JobBound(rate_cap, packing, end * dt + charge - full * dt)


class Progress:
    """The p/q variables, the work rows and the progress rows every placement LP shares,
    placed after the model's own ``first_col`` columns (docs/formulation.md, 'Objective')."""

    def __init__(self, instance: Instance, *, start: int, end: int | None, remaining: dict[str, float] | None,
                 first_col: int = 0):
        self.end = instance.horizon if end is None else end
        if not 0 <= start < self.end <= instance.horizon:
            raise ValueError(f"window {start}..{self.end} is not inside 0..{instance.horizon}")
        self.instance, self.start = instance, start
        left = {j: (job.work_batches if remaining is None else remaining.get(job.id, 0.0))
                for j, job in enumerate(instance.jobs)}
        self.jobs = [j for j, job in enumerate(instance.jobs) if left[j] > 0 and max(job.arrival, start) < self.end]
        if not self.jobs:
            raise ValueError("no job has work left inside the window")
        self.left = np.array([left[j] for j in self.jobs])
        self.position = {j: k for k, j in enumerate(self.jobs)}
        self.bounds = [job_bound(instance, instance.jobs[j], left[j], self.end) for j in self.jobs]
        self.first = np.array([max(instance.jobs[j].arrival, start) for j in self.jobs])
        lengths = self.end - self.first
        self.p_job = np.repeat(np.arange(len(self.jobs)), lengths)
        self.p_slot = np.concatenate([np.arange(f, self.end) for f in self.first])
        self.row_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.place(first_col)

    def place(self, first_col: int) -> None:
        """Put the p/q columns after ``first_col`` model columns."""
        n_p = len(self.p_job)
        self.p_idx = first_col + np.arange(n_p)
        self.q_idx = first_col + n_p + np.arange(len(self.jobs))
        self.n = first_col + n_p + len(self.jobs)

    def cost(self, c: np.ndarray) -> float:
        """Write the p/q costs into ``c``; returns the objective's constant offset."""
        dt = self.instance.slot_seconds
        weight = np.array([self.instance.jobs[j].weight for j in self.jobs])
        c[self.p_idx] = weight[self.p_job] * dt * (self.p_slot + 1)
        c[self.q_idx] = weight * np.array([b.overflow for b in self.bounds])
        return float(sum(self.instance.jobs[j].weight * dt * (b.packing - self.instance.jobs[j].arrival)
                         for j, b in zip(self.jobs, self.bounds)))

    def upper(self) -> np.ndarray:
        return np.concatenate([np.minimum(1.0, [self.bounds[k].rate_cap for k in self.p_job]),
                               np.ones(len(self.jobs))])

    def work_rows(self) -> tuple[sp.csr_array, np.ndarray]:
        """sum_t p[j,t] + q[j] >= 1 - 1e-9 per job: the covering rows."""
        n_q = len(self.jobs)
        rows = np.concatenate([self.p_job, np.arange(n_q)])
        cols = np.concatenate([self.p_idx, self.q_idx])
        return sp.csr_array((np.ones(len(cols)), (rows, cols)), shape=(n_q, self.n)), np.full(n_q, WORK)

    def progress_rows(self, block: Rows, w_cols: np.ndarray, w_job: np.ndarray, w_slot: np.ndarray,
                      speed: np.ndarray) -> None:
        """p[j,t] - sum speed * w / B_j <= 0 per job-slot, over worker columns ``w_cols`` of
        jobs ``w_job`` (instance indices) in slots ``w_slot`` doing ``speed`` batches each."""
        k = np.array([self.position[j] for j in w_job.tolist()], dtype=np.int64)
        rows = self.row_start[k] + w_slot - self.first[k]
        n_p = len(self.p_job)
        block.add(n_p, [(np.arange(n_p), self.p_idx, 1.0), (rows, w_cols, -speed / self.left[k])], -np.inf, 0.0)



class Decoder:
    """Inverse of ``formulate``: a vector of the Problem back to a Plan."""

    def __init__(self, core: Core, jobs: list[int], bounds: list[JobBound]):
        self.core, self.jobs, self.bounds = core, jobs, bounds

    def plan(self, x: np.ndarray) -> Plan:
        return self.core.plan(x)


def formulate(instance: Instance, *, start: int = 0, end: int | None = None,
              remaining: dict[str, float] | None = None,
              domains: dict[str, set[str]] | None = None) -> tuple[Problem, Decoder]:
    """The placement MPC-IP over slots ``start..end-1`` (default: the whole horizon).

    ``remaining`` maps job id -> batches still to do (default: all ``work_batches``); jobs
    with nothing left, or arriving after the window, are left out. ``domains`` optionally
    limits a job (by id) to the named domains (machines or switches): a smaller model for
    online use, whose value is then no longer a lower bound."""
    progress = Progress(instance, start=start, end=end, remaining=remaining)
    jobs = progress.jobs
    allowed = None if domains is None else {
        j: set(domains[instance.jobs[j].id]) for j in jobs if instance.jobs[j].id in domains}
    core = Core(instance, jobs, start, progress.end, allowed)
    progress.place(core.n)
    n = progress.n
    cost = np.zeros(n)
    offset = progress.cost(cost)
    upper = np.concatenate([core.upper, progress.upper()])
    integer = np.concatenate([np.ones(core.n, dtype=bool), np.zeros(n - core.n, dtype=bool)])
    packing, pack_names = core.packing()
    A, _, b = packing.matrix(n)
    C, d = progress.work_rows()
    general = Rows()
    core.shape_rows(general)
    w = core.w_idx
    progress.progress_rows(general, w, core.job[w], core.slot[w], core.speed[w])
    G, g_lo, g_hi = general.matrix(n)

    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=core.choice_groups(), offset=offset,
                      name=f"placement:{instance.name}", pack_names=pack_names)
    return problem, Decoder(core, jobs, progress.bounds)
