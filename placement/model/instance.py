"""What an instance is (MODEL.md section 1): a cluster tree, a slotted horizon and the jobs.

Loading is strict: unknown keys, missing keys, wrong types, NaN or negative numbers,
undeclared resources and jobs that fit nowhere raise one exception type,
:class:`InstanceError`, whose message names the JSON path and the reason.
"""
from __future__ import annotations

import math
import os
import weakref
from dataclasses import dataclass, replace
from functools import cached_property
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from placement.model import limits
from placement.model.strict_json import Fields, InstanceError, fail, join, read_json, string, vector, write_json
from placement.model.speed import SpeedTable, TypedSpeed, read_speed
from placement.model.topology import Link, Machine, Switch, Topology

__all__ = ["Instance", "InstanceError", "Job", "Link", "Machine", "Switch", "Topology", "demand_matrix", "demand_vector",
           "demand_vectors"]

#: Absolute tolerance of every comparison in MODEL.md.
TOL = 1e-9
#: Slack allowed when comparing a demand to what is free (placement.slots.residual): inside TOL.
TOL_FIT = TOL / 2
#: Megabytes to gigabits (MB * 8 / 1000).
MB_TO_GB = 0.008
#: MODEL.md's completion test: a job completes once its batches reach work_batches x COMPLETE.
COMPLETE = 1 - TOL

_CLUSTER: dict[int, tuple[weakref.ref, dict]] = {}


def cluster_cache(topology: Topology) -> dict:
    """A dict for values that depend only on ``topology`` (and on what their key says),
    kept while the topology lives: the instances built on one cluster (an online decision
    makes one per partition) compute them once."""
    key = id(topology)
    entry = _CLUSTER.get(key)
    if entry is not None and entry[0]() is topology:
        return entry[1]

    def drop(ref: weakref.ref, key: int = key) -> None:
        if _CLUSTER.get(key, (None,))[0] is ref:
            _CLUSTER.pop(key, None)

    store: dict = {}
    _CLUSTER[key] = (weakref.ref(topology, drop), store)
    return store


_JOB_REQUIRED = ("id", "arrival", "work_batches", "batch_seconds", "worker", "ps", "max_workers",
                 "worker_gbps", "ps_gbps")
_JOB_OPTIONAL = ("gradient_mb", "min_workers", "weight", "restart_seconds", "speed")


@dataclass(frozen=True)
class Job:
    """A data-parallel training job with workers and parameter servers (PS)."""

    id: str
    arrival: int
    work_batches: float
    batch_seconds: float
    worker: dict[str, float]
    ps: dict[str, float]
    max_workers: int
    worker_gbps: float
    ps_gbps: float
    gradient_mb: float = 0
    min_workers: int = 1
    weight: float = 1
    restart_seconds: float = 0
    #: measured speed (MODEL.md 8), one table or one per GPU type; None: the linear rate of MODEL.md 4
    speed: SpeedTable | TypedSpeed | None = None

    def runs_on(self, gpu_type: str | None) -> bool:
        """May the job's workers use machines of ``gpu_type`` (a per-type table lists only
        the types it may use; every other job runs on any type)?"""
        types = None if self.speed is None else self.speed.types
        return types is None or gpu_type in types

    @property
    def kappa(self) -> float:
        """PS per worker needed to carry the workers' traffic (worker_gbps / ps_gbps)."""
        return self.worker_gbps / self.ps_gbps

    def min_ps(self, workers: int) -> int:
        """The fewest PSs that carry ``workers`` workers: max(1, ceil(kappa * W)) for W > 0.

        Computed against the validator's own test (S * ps_gbps >= W * worker_gbps - 1e-9),
        so a count from here is never rejected for float round-off."""
        if workers <= 0:
            return 0
        need = workers * self.worker_gbps - TOL
        s = max(1, math.ceil(need / self.ps_gbps))
        while s > 1 and (s - 1) * self.ps_gbps >= need:
            s -= 1
        while s * self.ps_gbps < need:
            s += 1
        return s

    def shape_error(self, workers: int, ps: int) -> str | None:
        """Why ``workers`` workers with ``ps`` PSs in all may not run this job (MODEL.md 3, the
        worker range and the PS count), or None: the online scheduler's check of a policy's
        tasks and its checkpoint's check of a job's running tasks share it."""
        if not self.min_workers <= workers <= self.max_workers:
            return (f"{workers} workers outside min_workers..max_workers = "
                    f"{self.min_workers}..{self.max_workers}")
        if ps < self.min_ps(workers):
            return f"{ps} PS for {workers} workers, needs at least {self.min_ps(workers)}"
        return None

    def batch_time(self, gbps: float) -> float:
        """Seconds per mini-batch when the gradient exchange runs at ``gbps`` (MODEL.md 4)."""
        return self.batch_seconds + 2 * self.gradient_mb * MB_TO_GB / gbps

    def rate(self, workers: int, machines: int, local_gbps: float, gpu_type: str | None = None) -> float:
        """Mini-batches per second of the whole job with ``workers`` workers on GPUs of
        ``gpu_type`` whose tasks span ``machines`` machines (``local_gbps``: that machine's,
        when it is one): the speed table's entry (MODEL.md 8) or W / theta (MODEL.md 4)."""
        if workers <= 0:
            return 0.0
        if self.speed is not None:
            return self.speed.rate(workers, machines, gpu_type)
        return workers / self.batch_time(local_gbps if machines == 1 else self.worker_gbps)

    @classmethod
    def from_dict(cls, value: Any, path: str) -> "Job":
        f = Fields(value, path, InstanceError, _JOB_REQUIRED, _JOB_OPTIONAL)
        job = cls(
            id=f.string("id"),
            arrival=f.integer("arrival", minimum=0),
            work_batches=f.number("work_batches", positive=True),
            batch_seconds=f.number("batch_seconds", positive=True),
            worker=vector(value["worker"], join(path, "worker"), InstanceError),
            ps=vector(value["ps"], join(path, "ps"), InstanceError),
            max_workers=f.integer("max_workers", minimum=1),
            worker_gbps=f.number("worker_gbps", positive=True),
            ps_gbps=f.number("ps_gbps", positive=True),
            gradient_mb=f.number("gradient_mb", 0),
            min_workers=f.integer("min_workers", 1, minimum=1),
            weight=f.number("weight", 1, positive=True),
            restart_seconds=f.number("restart_seconds", 0),
        )
        if job.min_workers > job.max_workers:
            fail(join(path, "min_workers"), f"min_workers {job.min_workers} > max_workers "
                 f"{job.max_workers}", InstanceError)
        if job.min_ps(job.max_workers) > limits.value(limits.WORKERS):  # a PS count is a count too
            fail(join(path, "ps_gbps"), f"max_workers {job.max_workers} need "
                 f"{limits.too_many(limits.WORKERS, job.min_ps(job.max_workers), 'PSs')}", InstanceError)
        if f.has("speed"):
            job = replace(job, speed=read_speed(value["speed"], join(path, "speed"),
                                                job.min_workers, job.max_workers))
        return job

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "arrival": self.arrival, "work_batches": self.work_batches,
                "batch_seconds": self.batch_seconds, "gradient_mb": self.gradient_mb,
                "worker": dict(self.worker), "ps": dict(self.ps),
                "min_workers": self.min_workers, "max_workers": self.max_workers,
                "worker_gbps": self.worker_gbps, "ps_gbps": self.ps_gbps,
                "weight": self.weight, "restart_seconds": self.restart_seconds,
                **({"speed": self.speed.to_dict()} if self.speed is not None else {})}


def demand_vector(demand: Mapping[str, float], resources: Sequence[str]) -> np.ndarray:
    """One worker's or PS's ``demand`` (a job's ``worker`` or ``ps``) as floats over ``resources``,
    0 where absent. With :func:`demand_vectors` and :func:`demand_matrix`, the one home of a
    job's demand as numbers."""
    return np.array([demand.get(r, 0) for r in resources], dtype=float)


def demand_vectors(job: Job, resources: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta): one worker's and one PS's demand as float vectors over ``resources``."""
    return demand_vector(job.worker, resources), demand_vector(job.ps, resources)


def demand_matrix(jobs: Sequence[Job], resources: Sequence[str], role: str) -> np.ndarray:
    """One row per job: its ``role`` ("worker" or "ps") demand over ``resources``, as floats."""
    return np.array([[getattr(job, role).get(r, 0) for r in resources] for job in jobs],
                    dtype=float).reshape(len(jobs), len(resources))


@dataclass(frozen=True)
class Instance:
    """One placement problem: ``horizon`` slots of ``slot_seconds`` on ``topology``."""

    slot_seconds: float
    horizon: int
    resources: tuple[str, ...]
    topology: Topology
    jobs: tuple[Job, ...]
    name: str = "instance"

    def __post_init__(self) -> None:
        object.__setattr__(self, "resources", tuple(self.resources))
        object.__setattr__(self, "jobs", tuple(self.jobs))
        self._check()

    # ----- checks that span several parts of the document -------------------------------
    def _check(self) -> None:
        if self.slot_seconds <= 0 or not math.isfinite(self.slot_seconds):
            fail("slot_seconds", f"must be > 0, got {self.slot_seconds}", InstanceError)
        if self.horizon < 1:
            fail("horizon", f"must be >= 1, got {self.horizon}", InstanceError)
        if not self.resources:
            fail("resources", "must name at least one resource", InstanceError)
        for i, r in enumerate(self.resources):
            if not isinstance(r, str) or not r:
                fail(join("resources", i), f"must be a non-empty string, got {r!r}", InstanceError)
            if r in self.resources[:i]:
                fail(join("resources", i), f"duplicate resource {r!r}", InstanceError)
        declared = set(self.resources)
        checked = cluster_cache(self.topology).setdefault("names checked", set())
        if self.resources not in checked:  # once per cluster: an online decision builds many instances on it
            for i, m in enumerate(self.topology.machines):
                self._check_names(m.capacity, f"topology.machines[{i}].capacity", declared)
            checked.add(self.resources)
        fits = self._fit_all()
        seen: set[str] = set()
        for i, job in enumerate(self.jobs):
            where = join("jobs", i)
            if job.id in seen:
                fail(join(where, "id"), f"duplicate job id {job.id!r}", InstanceError)
            seen.add(job.id)
            if job.arrival >= self.horizon:
                fail(join(where, "arrival"), f"arrival slot {job.arrival} is not inside the "
                     f"horizon 0..{self.horizon - 1}", InstanceError)
            self._check_names(job.worker, join(where, "worker"), declared)
            self._check_names(job.ps, join(where, "ps"), declared)
            if job.speed is not None and (job.speed.min_workers, job.speed.max_workers) != (
                    job.min_workers, job.max_workers):
                fail(join(where, "speed"), f"the table covers W = {job.speed.min_workers}.."
                     f"{job.speed.max_workers}, the job {job.min_workers}..{job.max_workers}", InstanceError)
            typed = job.speed is not None and job.speed.types is not None
            if typed:
                self._check_type_names(job, join(where, "speed"))
            if not fits[i]:
                self._check_fits(job, where)

    @staticmethod
    def _check_names(vector_: dict[str, float], where: str, declared: set[str]) -> None:
        for r in vector_:
            if r not in declared:
                fail(join(where, r), f"resource {r!r} is not declared in `resources`",
                     InstanceError)

    def _fit_all(self) -> np.ndarray:
        """Per job, whether :meth:`_check_fits` passes it, over all jobs at once (in blocks
        of jobs, so that jobs x machine types x resources stays small)."""
        ok = np.zeros(len(self.jobs), dtype=bool)
        step = max(1, 2**20 // max(1, len(self.machine_kinds[0]) * len(self.resources)))
        for a in range(0, len(self.jobs), step):
            block = self.jobs[a:a + step]
            worker_fits, ps_fits, room = self._fits(block)
            ok[a:a + step] = worker_fits & ps_fits & (room >= [job.min_workers for job in block])
        return ok

    def _fits(self, jobs: Sequence[Job]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per job: does one worker fit some machine of a GPU type it runs on, does one PS fit
        any machine, and how many workers the machines of its roomiest such type hold (a job's
        workers use one type, MODEL.md 8; untyped clusters: one class, the whole cluster);
        capped at 10**9, which also guards capacity / tiny demand against overflow. Vectorised
        over the distinct machine shapes, so many jobs on a big cluster stay cheap."""
        alpha = demand_matrix(jobs, self.resources, "worker")
        beta = demand_matrix(jobs, self.resources, "ps")
        kinds, which = self.machine_kinds
        topo = self.topology
        counts = np.zeros((len(kinds), len(topo.gpu_types)))  # machines per (shape, GPU type)
        np.add.at(counts, (which, topo.type_code), 1)
        runs_on = self._runs_on(jobs)  # jobs x GPU types
        a, b, many = alpha[:, None, :], beta[:, None, :], 10**9
        worker_fits = (((a <= kinds + 1e-9).all(axis=2) @ (counts > 0)) > 0)
        worker_fits = (worker_fits & runs_on).any(axis=1)
        ps_fits = (b <= kinds + 1e-9).all(axis=2).any(axis=1)
        with np.errstate(divide="ignore", over="ignore"):  # capped at `many` right after
            per = np.where(a > 0, np.floor(np.minimum((kinds + 1e-9) / np.where(a > 0, a, 1), many)), many)
        room = np.where(runs_on, per.min(axis=2) @ counts, 0)  # whole numbers: exact in any order
        return worker_fits, ps_fits, np.minimum(room.max(axis=1), many)

    def _runs_on(self, jobs: Sequence[Job]) -> np.ndarray:
        """Per job and GPU type of the cluster (``topology.gpu_types``), may its workers run
        there: every type, unless its speed table is given per type (then the types listed)."""
        types = self.topology.gpu_types
        out = np.ones((len(jobs), len(types)), dtype=bool)
        for i, job in enumerate(jobs):
            if job.speed is not None and job.speed.types is not None:
                out[i] = [g in job.speed.types for g in types]
        return out

    def _check_fits(self, job: Job, where: str) -> None:
        """A job whose worker or PS fits on no machine, or whose min_workers exceed what
        the whole cluster can hold, can never run: reject it up front. A job with a
        table per GPU type is judged on its types' machines."""
        fits = self._fits((job,))
        if job.speed is not None and job.speed.types is not None:
            fail(join(where, "speed"), f"the job cannot run on any of its GPU types ({', '.join(sorted(job.speed.types))}): "
                 f"a worker or a PS fits no machine, or min_workers {job.min_workers} exceed what the "
                 f"machines of each type hold", InstanceError)
        for role, demand, fit in (("worker", job.worker, fits[0][0]), ("ps", job.ps, fits[1][0])):
            if not fit:
                worst = max(demand, key=lambda r: demand[r]) if demand else "?"
                fail(join(where, role), f"one {role} (demand {demand}) exceeds the capacity of "
                     f"every machine (largest {worst!r}: "
                     f"{max(m.capacity.get(worst, 0) for m in self.topology.machines)})",
                     InstanceError)
        room = int(fits[2][0])
        if room < job.min_workers:
            holder = "the machines of one GPU type hold" if self.topology.typed else "the whole cluster holds"
            fail(join(where, "min_workers"), f"{holder} at most {room} workers "
                 f"of this job, fewer than min_workers {job.min_workers}", InstanceError)

    def _check_type_names(self, job: Job, where: str) -> None:
        """A per-type table names only types some machine has."""
        present = set(self.topology.gpu_types)
        for g in sorted(job.speed.types - present):
            have = ", ".join(sorted(repr(x) for x in present if x is not None)) or "none"
            fail(join(join(where, "by_type"), g), f"no machine has GPU type {g!r} (types: {have})",
                 InstanceError)

    # ----- file form ---------------------------------------------------------------------
    @classmethod
    def from_dict(cls, value: Any, name: str | None = None) -> "Instance":
        """Build from a parsed JSON document; ``name`` is used when the document has none."""
        f = Fields(value, "", InstanceError,
                   ("slot_seconds", "horizon", "resources", "topology", "jobs"), ("name",))
        resources = f.array("resources")
        for i, r in enumerate(resources):
            string(r, join("resources", i), InstanceError)
        return cls(
            slot_seconds=f.number("slot_seconds", positive=True),
            horizon=f.integer("horizon", minimum=1),
            resources=tuple(resources),
            topology=Topology.from_dict(value["topology"]),
            jobs=tuple(Job.from_dict(j, join("jobs", i)) for i, j in enumerate(f.array("jobs"))),
            name=f.string("name") if f.has("name") else (name or "instance"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "slot_seconds": self.slot_seconds, "horizon": self.horizon,
                "resources": list(self.resources), "topology": self.topology.to_dict(),
                "jobs": [j.to_dict() for j in self.jobs]}

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Instance":
        """Read an instance file; the name defaults to the file's stem."""
        return cls.from_dict(read_json(path, InstanceError), name=Path(path).stem)

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    # ----- convenience -------------------------------------------------------------------
    @cached_property
    def job_index(self) -> dict[str, int]:
        return {j.id: i for i, j in enumerate(self.jobs)}

    @cached_property
    def capacity_matrix(self) -> np.ndarray:
        """Capacity per machine (rows, topology order) and resource (columns); read-only,
        shared by the instances on the same topology (:func:`cluster_cache`)."""
        store = cluster_cache(self.topology)
        key = ("capacity", self.resources)
        if key not in store:
            cap = np.array([[m.capacity.get(r, 0) for r in self.resources] for m in self.topology.machines],
                           dtype=float)
            cap.flags.writeable = False
            store[key] = cap
        return store[key]

    @cached_property
    def machine_kinds(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct capacity rows and, per machine, which one it has (read-only, shared
        as :attr:`capacity_matrix`)."""
        store = cluster_cache(self.topology)
        key = ("kinds", self.resources)
        if key not in store:
            kinds, which = np.unique(self.capacity_matrix, axis=0, return_inverse=True)
            which = which.reshape(-1)
            kinds.flags.writeable = which.flags.writeable = False
            store[key] = kinds, which
        return store[key]

    @cached_property
    def best_local_gbps(self) -> float:
        """The largest ``local_gbps``: the rate MODEL.md uses to charge unfinished jobs."""
        return max(m.local_gbps for m in self.topology.machines)

    def unfinished_seconds(self, job: Job, remaining: float) -> float:
        """MODEL.md's charge beyond the horizon for ``remaining`` batches of an unfinished
        job: the time they take at max_workers on the fastest machine (with a speed table,
        at its fastest local rate, MODEL.md 8)."""
        if job.speed is not None:  # per GPU type: the fastest type's (MODEL.md 8)
            return remaining / job.speed.fastest_local
        return remaining * job.batch_time(self.best_local_gbps) / job.max_workers
