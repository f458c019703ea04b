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

from placement.model.instance import Job
from placement.model.topology import Topology
from placement.online.sizes import LearnedSizes

__all__ = ["INFORMATION", "fastest_rate", "shown_job"]

#: the information levels, most to least
INFORMATION = ("oracle", "estimate", "none")


def shown_job(job: Job, done: float, level: str, sizes: LearnedSizes, slot_seconds: float, topology: Topology,
              *, estimate: float | None = None, label: str | None = None) -> Job:
    """``job`` as a policy sees it at information ``level``: unchanged at ``oracle``, else
    with ``work_batches`` = ``done`` + the Gittins remaining work of what is known (in
    seconds at its fastest rate on ``topology``; the prior's unit is one slot)."""
    if level == "oracle":
        return job
    if level == "none":
        estimate = label = None
    rate = fastest_rate(job, topology)
    remaining = sizes.gittins_remaining(done / rate, slot_seconds, label=label,
                                        estimate=None if estimate is None else estimate / rate)
    return dataclasses.replace(job, work_batches=done + remaining * rate)


def fastest_rate(job: Job, topology: Topology) -> float:
    """Batches per second of ``job`` at its fastest: its speed table's best entry, or all its
    workers on the machine with the fastest local bus."""
    if job.speed is not None:
        return job.speed.fastest
    return job.rate(job.max_workers, 1, max(m.local_gbps for m in topology.machines))
