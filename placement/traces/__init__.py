"""Job traces: the Philly log, users' own job lists, the Pollux simulator's workloads,
and instances built from them.

:func:`read_philly` derives jobs of the model from the Philly job log (rules in
:mod:`placement.traces.philly`), :func:`read_joblist` / :func:`write_joblist` read and
write the plain CSV job list (:mod:`placement.traces.joblist`),
:func:`read_pollux_workload` converts a Pollux simulator workload with its measured
traces and :func:`pollux_cluster` builds that simulator's cluster
(:mod:`placement.traces.pollux`), and :func:`instance_from_jobs` puts jobs from any of
them on a cluster.
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable

import numpy as np

from placement.model.clusters import RESOURCES
from placement.traces.first_fit import first_fit
from placement.model.instance import TOL, Instance, Job, demand_vector, demand_vectors
from placement.model.topology import Topology
from placement.traces.joblist import read_joblist, write_joblist
from placement.traces.philly import read_philly
from placement.traces.pollux import pollux_cluster, read_pollux_workload

__all__ = ["instance_from_jobs", "pollux_cluster", "read_joblist", "read_philly",
           "read_pollux_workload", "write_joblist"]

logger = logging.getLogger(__name__)


def instance_from_jobs(jobs: Iterable[Job], topology: Topology, *, slot_seconds: float,
                       horizon: int | None = None, name: str,
                       cap_workers: bool = True) -> Instance:
    """An instance of ``jobs`` on ``topology`` (resources ``gpu``, ``cpu``, ``mem``).

    ``slot_seconds`` must be the one the jobs' arrivals were counted in. With
    ``cap_workers`` a job's ``max_workers`` (and its speed table's rows) is lowered (never
    below ``min_workers``) to what the cluster holds: the sum over machines of the most
    workers that fit on the machine together with their PSs (the rule of
    :mod:`placement.traces.generate`); more could never run, and U also sets the charge of an
    unfinished job. The count is logged.

    The default horizon is generous and provably enough: one slot past the completion
    of the last job in :func:`placement.traces.first_fit.first_fit_schedule`'s schedule (first
    come, first served, each job local on one machine, backfilling), a valid schedule
    that finishes every job, so a good schedule finishes every job inside it (MODEL.md
    section 4). It needs each job's ``min_workers`` and their PSs to fit on one empty
    machine; if one does not, pass ``horizon``. Strict Instance checks apply
    (InstanceError names the job)."""
    jobs = list(jobs)
    if cap_workers:
        jobs = _cap_workers(jobs, topology)
    first_guess = max((j.arrival for j in jobs), default=0) + 1 if horizon is None else horizon
    instance = Instance(slot_seconds=slot_seconds, horizon=first_guess,
                        resources=RESOURCES, topology=topology, jobs=tuple(jobs), name=name)
    if horizon is not None:
        return instance
    cap = _capacities(topology)
    for j in jobs:
        w = j.min_workers
        need = (w * demand_vector(j.worker, RESOURCES)
                + j.min_ps(w) * demand_vector(j.ps, RESOURCES))
        if not np.all(need <= cap + TOL, axis=1).any():
            raise ValueError(f"job {j.id!r}: its min_workers ({w}) and their PSs fit on no "
                             "single machine, so the first-fit horizon cannot be derived; "
                             "pass horizon=")
    _, completion = first_fit(instance.jobs, topology, RESOURCES, slot_seconds, limit=None)
    return dataclasses.replace(instance, horizon=max(completion, default=0) + 1)


def _cap_workers(jobs: list[Job], topology: Topology) -> list[Job]:
    """``jobs`` with max_workers lowered to the cluster's room (instance_from_jobs)."""
    cap = _capacities(topology)
    out, capped = [], 0
    for j in jobs:
        a, b = demand_vectors(j, RESOURCES)
        most = np.zeros(len(cap), dtype=int)
        for w in range(1, j.max_workers + 1):
            fits = np.all(w * a + j.min_ps(w) * b <= cap + TOL, axis=1)
            if not fits.any():
                break  # W a + ceil(kappa W) b grows with W: no larger W fits either
            most = np.where(fits, w, most)
        room = max(j.min_workers, int(most.sum()))
        if room < j.max_workers:
            capped += 1
            speed = None if j.speed is None else j.speed.cut(room)  # rows cut to the new max_workers (MODEL.md 8)
            j = dataclasses.replace(j, max_workers=room, speed=speed)
        out.append(j)
    if capped:
        logger.info("lowered max_workers of %d of %d jobs to what the cluster holds",
                    capped, len(jobs))
    return out


def _capacities(topology: Topology) -> np.ndarray:
    return np.array([[m.capacity.get(r, 0) for r in RESOURCES] for m in topology.machines],
                    dtype=float)
