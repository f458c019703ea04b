"""The state behind ``placement serve``: one :class:`OnlineScheduler`, the lock that lets
one request at a time change it, and the checkpoint written before any answer.

Every change runs under the lock, in this order: the checks that map to a client error
(:class:`Rejected`: nothing has changed yet), the scheduler call, the new document
written to ``--state`` (:mod:`placement.serve.state_file`), then the document published
for readers. If the call or the write fails, the scheduler is rebuilt from the last
published document, so memory and file stay as they were, and the error goes on (a
ValueError from the scheduler becomes a 4xx, anything else a 500).

Reads never take the lock: they get the last published document, which is never changed
once published (the next change publishes a new one), so a read sees the state between
two changes, never one half made.

Knows no web framework: the HTTP layer (:mod:`placement.serve.app`) parses requests into
the arguments here and renders the dicts returned.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from placement.model import clusters, limits
from placement.model.cluster_spec import parse_cluster
from placement.model.instance import Instance, Job
from placement.model.strict_json import FileFormatError
from placement.model.topology import Machine, Topology
from placement.online.knowledge import INFORMATION
from placement.online.registry import make_policy
from placement.online.scheduler import OnlineScheduler
from placement.serve.errors import Rejected
from placement.serve.state_file import StateFile, check_document, make_document

__all__ = ["DEFAULT_SLOT_SECONDS", "Service", "Stepped"]

DEFAULT_SLOT_SECONDS = 300.0


class Stepped(NamedTuple):
    """A step's answer and where its time went (seconds in ``OnlineScheduler.step``, and
    in writing the checkpoint; both 0 for a replayed step)."""

    body: dict[str, Any]
    decide_seconds: float
    checkpoint_seconds: float


class Service:
    """The scheduler of one ``placement serve`` (module docstring); build it with :meth:`open`."""

    def __init__(self, scheduler: OnlineScheduler, store: StateFile, spec: str, topology: Mapping[str, Any],
                 policy: str, last_step: Mapping[str, Any] | None = None):
        self._scheduler = scheduler
        self._store = store
        self._spec, self._topology, self._policy = spec, topology, policy
        self._lock = threading.Lock()
        self._document = make_document(spec, topology, policy, last_step, scheduler.state())

    @classmethod
    def open(cls, *, cluster: str, state: str | Path, policy: str = "lp-rounding", information: str = "oracle",
             lookahead: int = 8, slot_seconds: float | None = None) -> "Service":
        """The service of one command line: a new state in the file ``state`` (written at
        once), or the one it holds, resumed. ValueError, one line naming the flag or file,
        for anything that cannot start: the cluster, the policy, the numbers, a state file
        that does not parse, belongs to another command line or is in use."""
        topology, resources, file_slot = _cluster(cluster)
        slot = float(slot_seconds if slot_seconds is not None else file_slot or DEFAULT_SLOT_SECONDS)
        _check_flags(policy, information, lookahead, slot)
        store = StateFile(state).open()
        try:
            document = store.read()
            if document is None:
                scheduler = OnlineScheduler(topology, resources=resources, policy=make_policy(policy),
                                            lookahead=lookahead, slot_seconds=slot, information=information)
                service = cls(scheduler, store, cluster, topology.to_dict(), policy)
                try:
                    store.write(service.document)
                except OSError as exc:
                    raise ValueError(f"{store.where}: cannot write: {exc.strerror or exc}") from None
                return service
            check_document(document, store.where, topology=topology, policy=policy, information=information,
                           lookahead=lookahead, slot_seconds=slot)
            try:
                scheduler = OnlineScheduler.from_state(document["scheduler"], make_policy(policy))
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                raise ValueError(f"{store.where}: malformed scheduler state: {exc}") from None
            cluster_doc = document["cluster"]
            return cls(scheduler, store, cluster_doc["spec"], cluster_doc["topology"], policy,
                       document["last_step"])
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Release the state file (its lock)."""
        self._store.close()

    # ----- reads ---------------------------------------------------------------------------
    @property
    def document(self) -> dict[str, Any]:
        """The last published checkpoint document: never changed, replaced by the next change."""
        return self._document

    @property
    def information(self) -> str:
        return self._scheduler.information

    @property
    def state_path(self) -> Path:
        return self._store.path

    # ----- changes -------------------------------------------------------------------------
    def submit(self, job: Job, *, estimate: float | None = None, label: str | None = None,
               arrival_given: bool = True) -> dict[str, Any]:
        """Accept ``job`` (arriving in the next slot unless ``arrival_given``)."""
        with self._lock:
            open_jobs = self._scheduler.open_jobs
            most = limits.value(limits.JOBS)
            if len(open_jobs) >= most:
                raise Rejected(409, f"the scheduler holds {len(open_jobs)} open jobs, the limit "
                               f"({limits.JOBS.env}, {limits.DOC}); finish or cancel some first", "job")
            if job.id in open_jobs or job.id in self._closed():
                raise Rejected(409, f"duplicate job id {job.id!r}: a job with this id was already submitted",
                               "job.id")
            nxt = self._next_slot()
            if not arrival_given:
                job = dataclasses.replace(job, arrival=nxt)
            elif self._scheduler.last_slot is not None and job.arrival < nxt:
                raise Rejected(409, f"arrival slot {job.arrival} is in the past (the next slot is {nxt})",
                               "job.arrival")
            self._commit(lambda s: s.submit(job, estimate=estimate, label=label), field="job")
        return {"job": job.id, "status": "open", "arrival": job.arrival}

    def revise(self, job: Job, *, arrival_given: bool = True) -> dict[str, Any]:
        """Replace an open job's description (new speed, size or shape); it keeps its progress."""
        with self._lock:
            submitted = self._open_job(job.id)
            if not arrival_given:
                job = dataclasses.replace(job, arrival=submitted.arrival)
            elif job.arrival != submitted.arrival:
                raise Rejected(409, f"a revise cannot move the arrival slot ({submitted.arrival} -> "
                               f"{job.arrival})", "job.arrival")
            self._commit(lambda s: s.revise(job), field="job")
        return {"job": job.id, "status": "open", "arrival": job.arrival}

    def report(self, job_id: str, *, done: float | None = None, finished: bool = False) -> dict[str, Any]:
        """The cluster's measure of a job's progress (``done`` batches in all), and/or its end."""
        if done is None and not finished:
            raise Rejected(422, "give done (the batches completed so far), finished: true, or both", "done")

        def apply(s: OnlineScheduler) -> None:
            if done is not None:
                s.report(job_id, done)
            if finished:
                s.finish(job_id)
        with self._lock:
            self._open_job(job_id)
            self._commit(apply, field="done")
        out: dict[str, Any] = {"job": job_id, "status": "finished" if finished else "open"}
        if done is not None:
            out["done"] = done
        return out

    def cancel(self, job_id: str) -> dict[str, Any]:
        with self._lock:
            self._open_job(job_id)
            self._commit(lambda s: s.cancel(job_id))
        return {"job": job_id, "status": "cancelled"}

    def remove_machine(self, machine_id: str) -> dict[str, Any]:
        """A machine failed or left; the jobs it ran are placed again from the next step."""
        displaced: list[str] = []
        with self._lock:
            if machine_id not in self._scheduler.topology.machine_index:
                raise Rejected(404, f"unknown machine {machine_id!r}", "machine")
            self._commit(lambda s: displaced.extend(s.remove_machine(machine_id)), status=409, field="machine")
        return {"machine": machine_id, "status": "removed", "displaced": displaced}

    def add_machine(self, machine: Machine, parent_switch: str, gbps: float) -> dict[str, Any]:
        """A machine joined below ``parent_switch`` through a ``gbps`` link."""
        with self._lock:
            topology = self._scheduler.topology
            if machine.id in topology.nodes:
                raise Rejected(409, f"machine id {machine.id!r} is already a node of the cluster", "machine.id")
            if parent_switch not in {s.id for s in topology.switches}:
                raise Rejected(422, f"unknown switch {parent_switch!r} (GET /cluster lists them)", "parent_switch")
            self._commit(lambda s: s.add_machine(machine, parent_switch, gbps), field="machine")
        return {"machine": machine.id, "status": "added", "parent_switch": parent_switch, "gbps": gbps}

    def step(self, t: int | None = None) -> Stepped:
        """Decide slot ``t`` (default: the next). The last slot asked again is answered as it
        was (a retry after a lost answer); any other slot but the next is refused."""
        with self._lock:
            last, nxt = self._scheduler.last_slot, self._next_slot()
            t = nxt if t is None else t
            done = self._document["last_step"]
            if last is not None and t == last and done is not None and done["t"] == t:
                return Stepped({**done, "replayed": True}, 0.0, 0.0)
            if last is not None and t != nxt:
                raise Rejected(409, f"slot {t} is not the next slot: the last step was {last}, so the next "
                               f"is {nxt} (or {last} again, answered as before)", "t")
            horizon = limits.value(limits.HORIZON)
            if not 0 <= t < horizon:
                raise Rejected(422, f"slot {t} is outside the horizon limit 0..{horizon - 1} (raise it with "
                               f"{limits.HORIZON.env} or {limits.HORIZON.flag}; {limits.DOC})", "t")
            record: dict[str, Any] = {}

            def decide(s: OnlineScheduler) -> None:
                start = time.perf_counter()
                placed = s.step(t)
                record["seconds"] = time.perf_counter() - start
                record["step"] = {"t": t, "allocations": {j: {h: [w, p] for h, (w, p) in tasks.items()}
                                                          for j, tasks in placed.items()},
                                  "dropped": [{"job": d.job, "reason": d.reason} for d in s.dropped]}
            written = self._commit(decide, last_step=lambda: record["step"])
        return Stepped({**record["step"], "replayed": False}, record["seconds"], written)

    # ----- the machinery -------------------------------------------------------------------
    def _commit(self, apply: Callable[[OnlineScheduler], Any], *, status: int = 422, field: str | None = None,
                last_step: Callable[[], Mapping[str, Any]] | None = None) -> float:
        """Apply one change and checkpoint it (module docstring); the seconds the write took.
        Called with the lock held. A ValueError from the scheduler is refused with ``status``
        and ``field``; whatever fails, the scheduler is first rebuilt as it was."""
        try:
            apply(self._scheduler)
            step = self._document["last_step"] if last_step is None else last_step()
            document = make_document(self._spec, self._topology, self._policy, step, self._scheduler.state())
            start = time.perf_counter()
            self._store.write(document)
            written = time.perf_counter() - start
        except BaseException as exc:
            self._scheduler = OnlineScheduler.from_state(self._document["scheduler"], make_policy(self._policy))
            if isinstance(exc, ValueError):
                raise Rejected(status, str(exc), field) from None
            raise
        self._document = document
        return written

    def _closed(self) -> Mapping[str, str]:
        return self._document["scheduler"]["closed"]

    def _next_slot(self) -> int:
        last = self._scheduler.last_slot
        return 0 if last is None else last + 1

    def _open_job(self, job_id: str) -> Job:
        """The open job ``job_id``: 404 if it was never submitted, 409 if it has ended."""
        job = self._scheduler.open_jobs.get(job_id)
        if job is not None:
            return job
        how = self._closed().get(job_id)
        if how is not None:
            raise Rejected(409, f"job {job_id!r} is no longer open (it was {how})", "job")
        raise Rejected(404, f"unknown job {job_id!r} (never submitted)", "job")


def _cluster(spec: str) -> tuple[Topology, tuple[str, ...], float | None]:
    """The topology ``--cluster`` names, its resources and, for an instance file, its slot length."""
    topology = parse_cluster(spec)
    kind, colon, _ = spec.strip().split(",")[0].partition(":")
    if colon and kind in ("star", "racks", "pai"):
        return topology, clusters.RESOURCES, None
    try:
        instance = Instance.load(spec)
    except FileFormatError as exc:  # parse_cluster read it: only a file changed meanwhile
        raise ValueError(f"--cluster {spec}: {exc}") from None
    return topology, instance.resources, instance.slot_seconds


def _check_flags(policy: str, information: str, lookahead: int, slot_seconds: float) -> None:
    """The numbers and names of the command line, each refused naming its flag."""
    try:
        make_policy(policy)
    except ValueError as exc:
        raise ValueError(f"--policy: {exc}") from None
    if information not in INFORMATION:
        raise ValueError(f"--information: must be one of {', '.join(INFORMATION)}, got {information!r}")
    if isinstance(lookahead, bool) or not isinstance(lookahead, int) or lookahead < 1:
        raise ValueError(f"--lookahead: must be an integer >= 1, got {lookahead!r}")
    if not (math.isfinite(slot_seconds) and slot_seconds > 0):
        raise ValueError(f"--slot-seconds: must be a positive number of seconds, got {slot_seconds!r}")
    reason = limits.SLOT.check(slot_seconds, positive=True)
    if reason:
        raise ValueError(f"--slot-seconds: {reason}")
