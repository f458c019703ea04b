"""The progress block every LP-bound model shares (docs/formulation.md, 'Objective'): per
job j, p[j,t] in [0, r_j] for each slot t >= a_j (the fraction of j's work credited to
slot t) and q[j] in [0, 1] (the fraction left after the window), the covering row
sum_t p[j,t] + q[j] >= 1 - 1e-9, the progress rows tying p to the workers, and the
objective terms whose sum bounds the weighted JCT from below.

*Time buckets* (``buckets``, for per-slot decisions): the window's slots grouped into
consecutive buckets, one p per job and bucket, so a model has one set of columns per
bucket instead of per slot. A bucket of L slots does at most L r_j of the work, its
columns' rates count L slots, and its progress is charged at the bucket's mean slot end
(progress spread evenly over it); with buckets of one slot (the default) this is the
per-slot block above. Coarser far buckets (:func:`geometric_buckets`, as in the
interval-indexed LPs of Hall, Schulz, Shmoys and Wein, Math. Oper. Res. 1997) keep the
near slots exact and the look-ahead cheap; the model is then a planning model, not a
bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from placement.formulation.domains import FitTable, fit_kinds, machine_classes
from placement.formulation.rows import Rows
from placement.model.instance import COMPLETE, MB_TO_GB, Instance, Job


@dataclass(frozen=True)
class JobBound:
    """Per-job constants of the lower bound (docs/formulation.md, 'Objective')."""

    rate_cap: float   # r_j: the largest fraction of the remaining work one slot can do
    packing: float    # D_j: the slot-packing term added to the mean slot end
    overflow: float   # K_j: seconds charged per unit of work left after the window


def job_bound(instance: Instance, job: Job, remaining: float, end: int, kinds: FitTable | None = None) -> JobBound:
    """r_j, D_j and K_j for ``remaining`` batches and a window ending at slot ``end``.

    r_j is the fastest a single slot can go: local on one machine h with as many workers
    (and their PSs) as h holds, at h's local rate, or spread over as many workers as the
    cluster holds at the spread rate (restart losses only slow a job down). With a speed
    table (MODEL.md 8): its fastest entry among the worker counts that fit. ``kinds``: the
    job's :func:`fit_kinds`, if known. Over the machines' distinct (kind, local_gbps) pairs,
    which give the same maxima and sums as the machines."""
    dt = instance.slot_seconds
    machines = instance.topology.machines
    fits = fit_kinds(job, instance) if kinds is None else kinds
    of_class, gbps, per_kind = machine_classes(instance)
    thetas = job.batch_seconds + 2 * job.gradient_mb * MB_TO_GB / gbps
    local = fits.local[of_class]
    ok = local >= job.min_workers
    room = min(job.max_workers, int(fits.workers @ per_kind))
    if job.speed is not None:
        best = job.speed.best_rate(local=True, most_workers=int(fits.local.max()))
        if len(machines) > 1:
            best = max(best, job.speed.best_rate(local=False, most_workers=room))
    else:
        best = float((local[ok] / thetas[ok]).max()) if ok.any() else 0.0
        if len(machines) > 1 and room >= job.min_workers:
            best = max(best, room / job.batch_time(job.worker_gbps))
    rate_cap = best * dt / remaining
    full = math.floor(COMPLETE / rate_cap) if rate_cap > 0 else 0
    packing = rate_cap * full * (full - 1) / 2 + (COMPLETE - full * rate_cap) * full
    charge = instance.unfinished_seconds(job, remaining)
    return JobBound(rate_cap, packing, end * dt + charge - full * dt)


def geometric_buckets(slots: int) -> list[int]:
    """Bucket lengths 1, 1, 2, 4, ... covering ``slots`` slots (the last one cut short)."""
    lengths: list[int] = []
    while sum(lengths) < slots:
        lengths.append(min(max(1, sum(lengths)), slots - sum(lengths)))
    return lengths


class ProgressBlock:
    """The p/q variables, the work rows and the progress rows every placement LP shares,
    placed after the model's own ``first_col`` columns (docs/formulation.md, 'Objective').
    ``buckets``: the lengths of the time buckets (module docstring), summing to the
    window's slots; None: one bucket per slot."""

    def __init__(self, instance: Instance, *, start: int, end: int | None, remaining: dict[str, float] | None,
                 first_col: int = 0, buckets: list[int] | None = None):
        self.end = instance.horizon if end is None else end
        if not 0 <= start < self.end <= instance.horizon:
            raise ValueError(f"window {start}..{self.end} is not inside 0..{instance.horizon}")
        lengths = np.ones(self.end - start, dtype=np.int64) if buckets is None else np.asarray(buckets, dtype=np.int64)
        if lengths.sum() != self.end - start or (lengths < 1).any():
            raise ValueError(f"buckets {list(lengths)} do not cover the window's {self.end - start} slots")
        #: per bucket its first slot and the slot after it; per window slot its bucket
        self.bucket_end = start + np.cumsum(lengths)
        self.bucket_start = self.bucket_end - lengths
        self.bucket_of_slot = np.repeat(np.arange(len(lengths)), lengths)
        self.instance, self.start = instance, start
        left = {j: (job.work_batches if remaining is None else remaining.get(job.id, 0.0))
                for j, job in enumerate(instance.jobs)}
        self.jobs = [j for j, job in enumerate(instance.jobs) if left[j] > 0 and max(job.arrival, start) < self.end]
        if not self.jobs:
            raise ValueError("no job has work left inside the window")
        self.left = np.array([left[j] for j in self.jobs])
        self.position = {j: k for k, j in enumerate(self.jobs)}
        self._position = np.full(len(instance.jobs), -1, dtype=np.int64)
        self._position[self.jobs] = np.arange(len(self.jobs))
        #: per job (by position) its :func:`fit_kinds`
        self.fit_kinds = [fit_kinds(instance.jobs[j], instance) for j in self.jobs]
        self.bounds = [job_bound(instance, instance.jobs[j], left[j], self.end, kinds)
                       for j, kinds in zip(self.jobs, self.fit_kinds)]
        self.first = np.array([max(instance.jobs[j].arrival, start) for j in self.jobs])
        #: per job its first bucket; per p its job, first slot, slots and bucket
        self.first_bucket = self.bucket_of_slot[self.first - start]
        count = len(lengths) - self.first_bucket
        self.p_job = np.repeat(np.arange(len(self.jobs)), count)
        self.p_bucket = np.concatenate([np.arange(b, len(lengths)) for b in self.first_bucket])
        self.p_slot = np.maximum(self.bucket_start[self.p_bucket], self.first[self.p_job])
        self.p_len = self.bucket_end[self.p_bucket] - self.p_slot
        self.p_count = count
        self.row_start = np.concatenate([[0], np.cumsum(count)[:-1]])
        self.place(first_col)

    def positions(self, jobs: np.ndarray) -> np.ndarray:
        """The positions in :attr:`jobs` of instance job indices ``jobs`` (each one of them)."""
        return self._position[np.asarray(jobs, dtype=np.int64)]

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
        c[self.p_idx] = weight[self.p_job] * dt * (self.p_slot + (self.p_len + 1) / 2)
        c[self.q_idx] = weight * np.array([b.overflow for b in self.bounds])
        return float(sum(self.instance.jobs[j].weight * dt * (b.packing - self.instance.jobs[j].arrival)
                         for j, b in zip(self.jobs, self.bounds)))

    def upper(self) -> np.ndarray:
        rate_cap = np.array([b.rate_cap for b in self.bounds], dtype=float)
        return np.concatenate([np.minimum(1.0, rate_cap[self.p_job] * self.p_len), np.ones(len(self.jobs))])

    def work_rows(self) -> tuple[sp.csr_array, np.ndarray]:
        """sum_t p[j,t] + q[j] >= 1 - 1e-9 per job: the covering rows."""
        n_q = len(self.jobs)
        rows = np.concatenate([self.p_job, np.arange(n_q)])
        cols = np.concatenate([self.p_idx, self.q_idx])
        return sp.csr_array((np.ones(len(cols)), (rows, cols)), shape=(n_q, self.n)), np.full(n_q, COMPLETE)

    def progress_rows(self, block: Rows, w_cols: np.ndarray, w_job: np.ndarray, w_slot: np.ndarray,
                      speed: np.ndarray) -> None:
        """p[j,b] - sum L speed * w / B_j <= 0 per job-bucket, over worker columns ``w_cols``
        of jobs ``w_job`` (instance indices) in slots ``w_slot`` (any slot of their bucket)
        doing ``speed`` batches a slot, over the L slots of the job's bucket."""
        k = self.positions(w_job)
        rows = self.row_start[k] + self.bucket_of_slot[np.asarray(w_slot) - self.start] - self.first_bucket[k]
        n_p = len(self.p_job)
        block.add(n_p, [(np.arange(n_p), self.p_idx, 1.0), (rows, w_cols, -speed * self.p_len[rows] / self.left[k])],
                  -np.inf, 0.0)
