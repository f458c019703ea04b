"""What the scheduler knows of a job's length, and so what its policies are shown.

Three information levels (docs/model.md, "What the scheduler knows"):

- ``oracle``: each job's ``work_batches`` is its true size (the simulator's truth handed
  over, as a clairvoyant peer such as Optimus+Oracle is);
- ``estimate``: the cluster passes a user's estimate of the size at submission (epochs or
  a time limit, turned into batches), corrected by the size / estimate ratios of the jobs
  that finished (:mod:`placement.online.sizes`);
- ``none``: nothing but what the job has done and the sizes of finished jobs, without
  class labels (as Tiresias and Pollux know).

Below ``oracle`` the scheduler never reads a submitted job's ``work_batches``: the job a
policy sees carries instead ``done + r``, where ``r`` is the remaining work the Gittins
rule ranks it by (:meth:`~placement.online.sizes.LearnedSizes.gittins_remaining`, which is
the true remaining work when the size is known), so every policy plans and orders by it
unchanged. Completion is only ever what the cluster reports (``finish``); a job that runs
past its estimate keeps running, since ``r`` is always > 0.

Sizes are learned and compared in *seconds at the job's fastest rate* (its work divided by
the fastest rate its speed allows), not in batches: batches of different models differ by
orders of magnitude, while a job's length in time at full speed is comparable across jobs
(as Tiresias' GPU-time is).
"""
from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np

from placement.model.instance import Job
from placement.online.sizes import LearnedSizes

__all__ = ["INFORMATION", "fastest_rate", "information_label", "shown_job", "submitted", "user_estimate"]

#: the information levels, most to least
INFORMATION = ("oracle", "estimate", "none")


def shown_job(job: Job, done: float, level: str, sizes: LearnedSizes, slot_seconds: float, local_gbps: float,
              *, estimate: float | None = None, label: str | None = None) -> Job:
    """``job`` as a policy sees it at information ``level``: unchanged at ``oracle``, else
    with ``work_batches`` = ``done`` + the Gittins remaining work of what is known (in
    seconds at its fastest rate, :func:`fastest_rate`; the prior's unit is one slot)."""
    if level == "oracle":
        return job
    if level == "none":
        estimate = label = None
    rate = fastest_rate(job, local_gbps)
    remaining = sizes.gittins_remaining(done / rate, slot_seconds, label=label,
                                        estimate=None if estimate is None else estimate / rate)
    return dataclasses.replace(job, work_batches=done + remaining * rate)


def fastest_rate(job: Job, local_gbps: float) -> float:
    """Batches per second of ``job`` at its fastest: its speed table's best entry, or all its
    workers on one machine whose local bus runs at ``local_gbps`` (the cluster's fastest)."""
    if job.speed is not None:
        return job.speed.fastest
    return job.rate(job.max_workers, 1, local_gbps)


def submitted(job: Job, estimate: float | None) -> Job:
    """``job`` as a cluster below ``oracle`` submits it: its true size stays with the cluster,
    the estimate (or 1 batch) stands in its place (the scheduler never reads it there)."""
    return dataclasses.replace(job, work_batches=estimate or 1.0)


def user_estimate(work: float, job_id: str, sigma: float, seed: int) -> float:
    """A user's estimate of a job of ``work`` batches: the truth times exp(``sigma`` N(0,1)),
    drawn from a generator seeded by ``seed`` and the job's id (the same job, the same
    estimate, whatever else is drawn); exact when ``sigma`` is 0."""
    if not sigma:
        return float(work)
    rng = np.random.default_rng([seed, zlib.crc32(job_id.encode())])
    return float(work * math.exp(sigma * rng.standard_normal()))


def information_label(level: str, estimate_error: float = 0.0) -> str:
    """How reports name an information level: ``estimate`` with its error's sigma."""
    return f"estimate (sigma {estimate_error:g})" if level == "estimate" else level
