"""The first-fit schedule: a plain first-come-first-served schedule that is valid by
construction, the witness that a horizon is long enough.

Each slot it tries the waiting jobs that have arrived, in arrival order, skipping those
that do not fit (backfilling); a job starts with the most workers W, from max_workers
down to min_workers, that fit on one machine together with ceil(kappa W) PSs, on the
first such machine, and keeps that local placement until it completes. It is a valid
schedule (it loads no link), so the slot after the last completion is a horizon
provably enough to finish every job (MODEL.md section 4 asks benchmark horizons to be so).

Kept apart from :mod:`placement.traces.generate` because the trace readers
(:func:`placement.traces.instance_from_jobs`) derive their default horizons from it too.
"""
from __future__ import annotations

import numpy as np

from placement.model.instance import COMPLETE, TOL, Instance, Job, demand_vectors
from placement.model.schedule import Allocation, Schedule
from placement.model.topology import Topology

__all__ = ["first_fit", "first_fit_schedule"]


def first_fit_schedule(instance: Instance) -> Schedule:
    """The simple schedule the default horizon is derived from (module docstring); a
    valid schedule, so validating it proves the horizon long enough when every job
    completes in it. Slots beyond the horizon are cut off."""
    by_slot, _ = first_fit(instance.jobs, instance.topology, instance.resources,
                           instance.slot_seconds, limit=instance.horizon)
    return Schedule.from_allocations(by_slot, instance.name, solver="first-fit")


def first_fit(jobs: tuple[Job, ...], topology: Topology, resources: tuple[str, ...],
              slot_seconds: float, limit: int | None
              ) -> tuple[dict[int, list[Allocation]], list[int]]:
    """Allocations by slot and each job's completion slot (-1 if not within ``limit``).

    Terminates without a limit when every job's min_workers fit on some empty machine
    (as :func:`placement.traces.generate.generate` ensures): once the cluster drains, the first waiting job starts."""
    free = np.array([[m.capacity.get(r, 0) for r in resources] for m in topology.machines],
                    dtype=float)
    placed: dict[int, tuple[int, int, int, np.ndarray, float, int]] = {}
    done = [0.0] * len(jobs)
    completion = [-1] * len(jobs)
    waiting = sorted(range(len(jobs)), key=lambda k: (jobs[k].arrival, k))
    by_slot: dict[int, list[Allocation]] = {}
    t = 0
    while (waiting or placed) and (limit is None or t < limit):
        for k in [k for k in waiting if jobs[k].arrival <= t]:
            job = jobs[k]
            a, b = demand_vectors(job, resources)
            if not np.all(free >= job.min_workers * a + job.min_ps(job.min_workers) * b - TOL,
                          axis=1).any():
                continue  # not even min_workers fit anywhere now: wait
            typed_ok = np.array([job.runs_on(m.gpu_type) for m in topology.machines], dtype=bool)
            for w in range(job.max_workers, job.min_workers - 1, -1):
                need = w * a + job.min_ps(w) * b
                fits = np.all(free >= need - TOL, axis=1) & typed_ok
                if fits.any():
                    h = int(np.argmax(fits))
                    free[h] -= need
                    # per-worker time of W local: MODEL.md 4, or the speed table on the machine's type (MODEL.md 8)
                    theta = (job.batch_time(topology.machines[h].local_gbps) if job.speed is None
                             else w / job.speed.rate(w, 1, topology.machines[h].gpu_type))
                    placed[k] = (h, w, job.min_ps(w), need, theta, t)
                    waiting.remove(k)
                    break
        for k in sorted(placed):
            job = jobs[k]
            h, w, s, need, theta, start = placed[k]
            lost = job.restart_seconds if t == start else 0.0
            done[k] += w * max(0.0, slot_seconds - lost) / theta
            by_slot.setdefault(t, []).append(Allocation(job.id, topology.machines[h].id, w, s))
            if done[k] >= job.work_batches * COMPLETE:
                completion[k] = t
                free[h] += need
                del placed[k]
        t += 1
    return by_slot, completion
