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
    end = instance.horizon if end is None else end
    if not 0 <= start < end <= instance.horizon:
        raise ValueError(f"window {start}..{end} is not inside 0..{instance.horizon}")
    dt = instance.slot_seconds
    left = {j: (job.work_batches if remaining is None else remaining.get(job.id, 0.0))
            for j, job in enumerate(instance.jobs)}
    jobs = [j for j, job in enumerate(instance.jobs) if left[j] > 0 and max(job.arrival, start) < end]
    if not jobs:
        raise ValueError("no job has work left inside the window")
    allowed = None if domains is None else {
        j: set(domains[instance.jobs[j].id]) for j in jobs if instance.jobs[j].id in domains}
    core = Core(instance, jobs, start, end, allowed)
    bounds = [job_bound(instance, instance.jobs[j], left[j], end) for j in jobs]

    # progress variables after the core: p[j,t] per job-slot, then q[j] per job
    slot_list = [np.arange(max(instance.jobs[j].arrival, start), end) for j in jobs]
    p_job = np.concatenate([np.full(len(s), k) for k, s in enumerate(slot_list)])
    p_slot = np.concatenate(slot_list)
    n_p, n_q = len(p_job), len(jobs)
    p_idx = core.n + np.arange(n_p)
    q_idx = core.n + n_p + np.arange(n_q)
    n = core.n + n_p + n_q
    weight = np.array([instance.jobs[j].weight for j in jobs])

    cost = np.zeros(n)
    cost[p_idx] = weight[p_job] * dt * (p_slot + 1)
    cost[q_idx] = weight * np.array([b.overflow for b in bounds])
    offset = float(sum(instance.jobs[j].weight * dt * (b.packing - instance.jobs[j].arrival)
                       for j, b in zip(jobs, bounds)))
    upper = np.concatenate([core.upper, np.minimum(1.0, [bounds[k].rate_cap for k in p_job]), np.ones(n_q)])
    integer = np.concatenate([np.ones(core.n, dtype=bool), np.zeros(n_p + n_q, dtype=bool)])

    packing, pack_names = core.packing()
    A, _, b = packing.matrix(n)

    C = sp.csr_array((np.ones(n_p + n_q), (np.concatenate([p_job, np.arange(n_q)]),
                                           np.concatenate([p_idx, q_idx]))), shape=(n_q, n))

    general = Rows()
    core.shape_rows(general)
    # progress: p[j,t] - sum_{v,h} w * speed / B_j <= 0, rows in p order
    pos = {j: k for k, j in enumerate(jobs)}
    first = np.array([max(instance.jobs[j].arrival, start) for j in jobs])
    row_start = np.concatenate([[0], np.cumsum([len(s) for s in slot_list])[:-1]])
    w = core.w_idx
    k_of_w = np.array([pos[j] for j in core.job[w]], dtype=np.int64)
    w_row = row_start[k_of_w] + core.slot[w] - first[k_of_w]
    left_of_w = np.array([left[j] for j in jobs])[k_of_w]
    general.add(n_p, [(np.arange(n_p), p_idx, 1.0), (w_row, w, -core.speed[w] / left_of_w)], -np.inf, 0.0)
    G, g_lo, g_hi = general.matrix(n)

    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=np.full(n_q, WORK), G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=core.choice_groups(), offset=offset,
                      name=f"placement:{instance.name}", pack_names=pack_names)
    return problem, Decoder(core, jobs, bounds)
