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
policy sees carries instead ``done + r``, where ``r`` is what is known of its remaining work
(below, "Scale": the expected remaining work at ``estimate``, the remaining work the Gittins
rule ranks it by at ``none``; each the true remaining work when the size is known), so every
policy plans and orders by it unchanged. Completion is only ever what the cluster reports
(``finish``); a job that runs past its estimate keeps running, since ``r`` is always > 0. A
job that did not run last slot is ranked with its restart first (the index's *setup*,
:mod:`placement.online.sizes`): its ``restart_seconds`` at its fastest rate, which it loses
when it starts.

Sizes are learned and compared in *GPU-seconds at the job's best rate per GPU* (its work
divided by the fastest rate one of its workers reaches, :func:`size_rate`), not in
batches: batches of different models differ by orders of magnitude, while service in
GPUs x time is comparable across jobs (Tiresias' 2D attained service, NSDI'19 section 3.1).
It is also stable while a job's table grows (an elastic job whose GPU cap doubles as it is
profiled, as in the Sia arena): its time at full speed would shrink with every doubling,
making a job look older than the finished ones, its work per GPU does not.

Scale: what ``r`` is and how it is shown. At ``none`` only other jobs' sizes speak: ``r`` is
the Gittins remaining work (:meth:`~placement.online.sizes.LearnedSizes.gittins_remaining`),
shown as that many seconds at the job's *fastest* rate, so that every policy ranks by
remaining GPU-seconds (the 2D rank of Tiresias: a wide job holds more of the cluster per
second) and, the work being no smaller than its widest placement does in that time, sizes
the job to use it. At ``estimate`` the job's own size speaks: ``r`` is its expected
remaining work over the corrected estimate
(:meth:`~placement.online.sizes.LearnedSizes.expected_total`), shown as the job's own work
(GPU-seconds at its best rate per GPU), so that exact estimates leave every policy deciding
as at ``oracle`` (up to the restart a paused job is ranked with). Why each level keeps its
scale, as measured in the Pollux arena: docs/online.md, "Users' estimates".
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from typing import Any

import numpy as np

from placement.model.instance import Job
from placement.online.sizes import LearnedSizes

__all__ = ["INFORMATION", "fastest_rate", "size_rate", "tell", "information_label", "shown_job", "submitted", "user_estimate"]

#: the information levels, most to least
INFORMATION = ("oracle", "estimate", "none")


def shown_job(job: Job, done: float, level: str, sizes: LearnedSizes, slot_seconds: float, local_gbps: float,
              *, estimate: float | None = None, label: str | None = None, paused: bool = False) -> Job:
    """``job`` as a policy sees it at information ``level``: unchanged at ``oracle``, else
    with ``work_batches`` = ``done`` + what is known of its remaining work, learned in
    GPU-seconds at its best rate per GPU (:func:`size_rate`; the prior's unit is one slot):
    at ``estimate`` its expected remaining work, shown at that rate (its own work); at
    ``none`` its Gittins remaining work, shown as that many seconds at its fastest rate (the
    2D rank; module docstring, "Scale"). ``paused``: the job did not run last slot, so its
    restart comes first (module docstring)."""
    if level == "oracle":
        return job
    rate = size_rate(job, local_gbps)
    fastest = fastest_rate(job, local_gbps)
    setup = job.restart_seconds * fastest / rate if paused else 0.0
    attained = done / rate
    if level == "estimate":
        expected = sizes.expected_total(attained, slot_seconds, label=label,
                                        estimate=None if estimate is None else estimate / rate)
        return dataclasses.replace(job, work_batches=done + (expected - attained + setup) * rate)
    remaining = sizes.gittins_remaining(attained, slot_seconds, setup=setup)  # no label, no estimate
    return dataclasses.replace(job, work_batches=done + remaining * fastest)


def fastest_rate(job: Job, local_gbps: float) -> float:
    """Batches per second of ``job`` at its fastest: its speed table's best entry, or all its
    workers on one machine whose local bus runs at ``local_gbps`` (the cluster's fastest)."""
    if job.speed is not None:
        return job.speed.fastest
    return job.rate(job.max_workers, 1, local_gbps)


def size_rate(job: Job, local_gbps: float) -> float:
    """Batches per second of one of ``job``'s workers at its best: the best rate per worker of
    its speed table (any type, local or spread), or one worker's rate on a machine whose local
    bus runs at ``local_gbps`` (the cluster's fastest). Sizes are learned in seconds at it."""
    if job.speed is not None:
        return max(job.speed.best_per_worker(local=True), job.speed.best_per_worker(local=False))
    return job.rate(job.max_workers, 1, local_gbps) / job.max_workers


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


def tell(scheduler: Any, job: Job, done: float, level: str, *, known: bool, estimate_error: float = 0.0,
         seed: int = 0) -> None:
    """Submit ``job`` to ``scheduler`` (an ``OnlineScheduler``; revise it if ``known``, i.e.
    already open) and report ``done`` batches, as a cluster at information ``level`` does: the
    truth only at ``oracle`` (``done`` kept below it: only the cluster ends a job); below,
    the job without its size, at ``estimate`` with a user's estimate of it (:func:`user_estimate`).
    The adapters of other people's simulators share it."""
    if level == "oracle":
        done = min(done, job.work_batches * (1 - 1e-6))
        (scheduler.revise if known else scheduler.submit)(job)
    elif known:
        scheduler.revise(submitted(job, None))
    else:
        estimate = user_estimate(job.work_batches, job.id, estimate_error, seed) if level == "estimate" else None
        scheduler.submit(submitted(job, estimate), estimate=estimate)
    scheduler.report(job.id, done)
