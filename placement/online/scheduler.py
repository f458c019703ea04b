"""The online scheduler: the library call a cluster manager makes every slot.

The manager submits jobs, calls ``step(t)`` once per slot and acts on the allocations it
returns, reports the progress the cluster measured, and says when jobs finish or
machines fail. The scheduler keeps that truth, hands a :class:`~placement.online.policy.View`
to the policy, and enforces MODEL.md on whatever the policy answers:

- only active jobs (submitted, arrived, not finished or cancelled) get tasks;
- shape (rule 3): min_workers <= W <= max_workers, S >= job.min_ps(W), no PS without
  workers, only known machines and non-negative integer counts; on a typed cluster a job's
  workers on one GPU type, one its speed table lists (MODEL.md 8);
- capacity and links (rules 1 and 4): decisions are packed into a fresh
  :class:`~placement.slots.residual.Residual` in the policy's dict order.

A decision that breaks a rule is dropped for that slot (the job waits) and logged; it is
never repaired, so the scheduler never reconfigures a job by itself. Rule 2's end of life
is the manager's call (``finish``): a job runs until the cluster says it is done, even if
the model thinks it should be (the cluster's truth may lag the model).

In ``mode="commit"`` a :class:`~placement.online.policy.CommittingPolicy` fixes a job's
future when it arrives; its commitment is executed unchanged (and still enforced). A job is
committed again when its commitment runs out before the manager finishes it (the truth
lagged the model), or when a machine failure breaks it; an empty commitment is a rejection
(admission control): that job never runs and stays open until the manager cancels it.

Everything the scheduler knows is in :meth:`OnlineScheduler.state` (plain JSON), so a
restarted manager resumes with :meth:`OnlineScheduler.from_state` and makes the same
decisions an uninterrupted one would (both in :mod:`placement.online.checkpoint`). Nothing
here is random.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement.model.instance import Instance, InstanceError, Job
from placement.model.progress import gpu_types
from placement.online.checkpoint import Checkpointing, JobRecord
from placement.online.commit_mode import CommitMode, is_count
from placement.online.knowledge import INFORMATION, shown_job, size_rate
from placement.online.policy import CommittingPolicy, Policy, TaskDict, View
from placement.online.sizes import LearnedSizes
from placement.model.topology import Machine, Topology

__all__ = ["Drop", "MODES", "OnlineScheduler"]

logger = logging.getLogger(__name__)

MODES = ("reoptimise", "commit")


@dataclass(frozen=True)
class Drop:
    """A policy decision the scheduler refused for slot ``t``, and why."""

    t: int
    job: str
    reason: str


class OnlineScheduler(Checkpointing, CommitMode):
    """Slot-by-slot placement of jobs that arrive over time (module docstring)."""

    def __init__(self, topology: Topology, *, resources: Iterable[str] = ("gpu", "cpu", "mem"),
                 policy: Policy | CommittingPolicy, lookahead: int = 8, slot_seconds: float,
                 mode: str = "reoptimise", information: str = "oracle"):
        """``information``: what the scheduler knows of job lengths, ``oracle``, ``estimate``
        or ``none`` (:mod:`placement.online.knowledge`; docs/model.md)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if information not in INFORMATION:
            raise ValueError(f"information must be one of {', '.join(INFORMATION)}, got {information!r}")
        hook = "commit" if mode == "commit" else "decide"
        if not callable(getattr(policy, hook, None)):
            raise ValueError(f"mode {mode!r} needs a policy with a {hook}() method; "
                             f"{type(policy).__name__} has none")
        if isinstance(lookahead, bool) or not isinstance(lookahead, (int, np.integer)) or lookahead < 1:
            raise ValueError(f"lookahead must be an integer >= 1, got {lookahead!r}")
        if not _is_number(slot_seconds) or slot_seconds <= 0:
            raise ValueError(f"slot_seconds must be a positive number, got {slot_seconds!r}")
        self.policy = policy
        self.mode = mode
        self.information = information
        self.sizes = LearnedSizes()                # the sizes of the jobs that finished (and the open ones' ratios)
        self.lookahead = int(lookahead)
        self.slot_seconds = float(slot_seconds)
        self.resources = tuple(resources)
        self._topology = self._checked(topology)
        self._jobs: dict[str, JobRecord] = {}      # submitted and still open, in submission order
        self._closed: dict[str, str] = {}       # id -> "finished" | "cancelled"
        self._unrunnable: set[str] = set()      # open jobs that fit nowhere on the current cluster
        self._revised: set[str] = set()         # jobs revised since the last step (see revise)
        self._last_t: int | None = None
        self.dropped: list[Drop] = []           # the last step's refused decisions
        self.drops_total = 0

    # ----- the cluster ---------------------------------------------------------------------
    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def last_slot(self) -> int | None:
        """The last slot stepped (None before the first step)."""
        return self._last_t

    def _checked(self, topology: Topology) -> Topology:
        """``topology`` if its machines use only the declared resources (Instance's check)."""
        try:
            Instance(self.slot_seconds, 1, self.resources, topology, ())
        except InstanceError as exc:
            raise ValueError(f"cluster: {exc}") from None
        return topology

    def _why_unrunnable(self, job: Job, topology: Topology) -> str | None:
        """Instance's fits-somewhere check of one job on ``topology`` (None: it can run)."""
        try:
            Instance(self.slot_seconds, job.arrival + 1, self.resources, topology, (on_cluster(job, topology),))
        except InstanceError as exc:
            return exc.reason if exc.path.startswith("jobs[0]") else str(exc)
        return None

    def _set_topology(self, topology: Topology) -> None:
        self._topology = topology
        was = self._unrunnable
        self._unrunnable = {j for j, e in self._jobs.items() if self._why_unrunnable(e.job, topology)}
        for j in sorted(self._unrunnable - was):
            logger.warning("job %s fits nowhere on the cluster now; it waits for a machine", j)
        for j in sorted(was - self._unrunnable):
            logger.info("job %s fits on the cluster again", j)

    def remove_machine(self, machine_id: str) -> list[str]:
        """A machine failed or left: its tasks are gone. Returns the displaced jobs, which
        the policy places again from the next step (commit mode: they are re-committed)."""
        topo = self._topology
        if machine_id not in topo.machine_index:
            raise ValueError(f"unknown machine {machine_id!r}")
        try:
            new = Topology(tuple(m for m in topo.machines if m.id != machine_id), topo.switches,
                           tuple(l for l in topo.links if machine_id not in (l.a, l.b)), topo.root)
        except InstanceError as exc:
            raise ValueError(f"cannot remove machine {machine_id!r}: {exc.reason}") from None
        displaced = []
        for job_id, e in self._jobs.items():
            if machine_id in e.previous:
                e.previous = {}
                displaced.append(job_id)
            if e.commitment and any(machine_id in tasks for tasks in e.commitment.values()):
                e.commitment = None
                logger.info("commitment of job %s used machine %s: it is committed again", job_id, machine_id)
        self._set_topology(new)
        logger.info("machine %s removed; displaced jobs: %s", machine_id, ", ".join(displaced) or "none")
        return displaced

    def add_machine(self, machine: Machine, parent_switch: str, gbps: float) -> None:
        """A machine joined (repair or growth) below ``parent_switch`` with a ``gbps`` link."""
        topo = self._topology
        if not isinstance(machine, Machine):
            raise ValueError(f"machine must be a placement Machine, got {type(machine).__name__}")
        if machine.id in topo.nodes:
            raise ValueError(f"machine id {machine.id!r} is already a node of the cluster")
        if parent_switch not in {s.id for s in topo.switches}:
            raise ValueError(f"unknown switch {parent_switch!r} (a single-machine cluster has none)")
        doc = topo.to_dict()
        doc["machines"].append(machine.to_dict())
        doc["links"].append({"a": machine.id, "b": parent_switch, "gbps": gbps})
        try:
            new = Topology.from_dict(doc)  # the file form's checks: positive finite numbers
        except InstanceError as exc:
            raise ValueError(f"cannot add machine {machine.id!r}: {exc}") from None
        self._set_topology(self._checked(new))
        logger.info("machine %s added below %s", machine.id, parent_switch)

    # ----- jobs ----------------------------------------------------------------------------
    def _open(self, job_id: str) -> JobRecord:
        if job_id in self._jobs:
            return self._jobs[job_id]
        if job_id in self._closed:
            raise ValueError(f"job {job_id!r} is no longer active (it was {self._closed[job_id]})")
        raise ValueError(f"unknown job {job_id!r} (never submitted)")

    @property
    def open_jobs(self) -> dict[str, Job]:
        """The submitted jobs not yet finished or cancelled, in submission order."""
        return {j: e.job for j, e in self._jobs.items()}

    def submit(self, job: Job, *, estimate: float | None = None, label: str | None = None) -> None:
        """Accept a job; it becomes active in slot ``job.arrival`` (not in the past).

        Parameters: ``job`` (below information ``oracle`` its ``work_batches`` is never
        read); ``estimate``, a user's estimate of its total work in batches, and ``label``, its
        class (model, user, queue), both used at information ``estimate``.
        Raises ValueError: not a Job, a duplicate id, an arrival in the past, a job that fits
        nowhere, an estimate that is not a finite number > 0, a label that is not a string.
        """
        if not isinstance(job, Job):
            raise ValueError(f"submit needs a placement Job, got {type(job).__name__}")
        if estimate is not None and (not _is_number(estimate) or estimate <= 0):
            raise ValueError(f"job {job.id!r}: estimate must be a finite number of batches > 0, got {estimate!r}")
        if label is not None and not isinstance(label, str):
            raise ValueError(f"job {job.id!r}: label must be a string, got {type(label).__name__}")
        if job.id in self._jobs or job.id in self._closed:
            raise ValueError(f"duplicate job id {job.id!r}: a job with this id was already submitted")
        nxt = 0 if self._last_t is None else self._last_t + 1
        if self._last_t is not None and job.arrival < nxt:
            raise ValueError(f"job {job.id!r}: arrival slot {job.arrival} is in the past "
                             f"(the next slot is {nxt})")
        why = self._why_unrunnable(job, self._topology)
        if why:
            raise ValueError(f"job {job.id!r} cannot run on this cluster: {why}")
        self._jobs[job.id] = JobRecord(job, estimate=None if estimate is None else float(estimate), label=label)

    def revise(self, job: Job) -> None:
        """The cluster re-measured an open job (its speed, size or shape changed).

        Parameters
        ----------
        job : the new description, with the id and arrival slot of an open job. It keeps
            its progress and history; policies see it from the next step on. A job that no
            longer fits anywhere waits, as after a machine failure.

        Raises
        ------
        ValueError : ``job`` is not a :class:`Job`, no open job has its id, or its arrival
            slot differs from the one submitted.
        """
        if not isinstance(job, Job):
            raise ValueError(f"revise needs a placement Job, got {type(job).__name__}")
        entry = self._open(job.id)
        if job.arrival != entry.job.arrival:
            raise ValueError(f"job {job.id!r}: revise cannot move its arrival slot "
                             f"({entry.job.arrival} -> {job.arrival})")
        entry.job = job
        # what it can no longer run is forgotten at the next step (the view shows it so now),
        # not here: a job revised 8 -> 4 -> 8 workers between two steps keeps its 8
        self._revised.add(job.id)
        if self._why_unrunnable(job, self._topology):
            self._unrunnable.add(job.id)
        else:
            self._unrunnable.discard(job.id)

    def report(self, job_id: str, batches_done: float) -> None:
        """What the cluster measured of a job's progress (the truth, never a forecast).

        Parameters
        ----------
        job_id : an open job's id.
        batches_done : the cumulative mini-batches it has completed, a finite number >= 0.

        Raises
        ------
        ValueError : no open job has this id, or ``batches_done`` is not a finite number >= 0.
        """
        entry = self._open(job_id)
        if not _is_number(batches_done) or batches_done < 0:
            raise ValueError(f"job {job_id!r}: batches_done must be a finite number >= 0, "
                             f"got {batches_done!r}")
        entry.done = float(batches_done)

    def finish(self, job_id: str) -> None:
        """The job completed (the cluster says so; nothing else ends a job): it leaves the
        active set, and the work it reported becomes a learned size."""
        entry = self._open(job_id)
        if entry.done > 0:  # learned in GPU-seconds at the job's best rate per GPU (placement.online.knowledge)
            rate = size_rate(entry.job, self._fastest_bus())
            self.sizes.add(entry.done / rate, label=entry.label,
                           estimate=None if entry.estimate is None else entry.estimate / rate)
        self._close(job_id, "finished")

    def cancel(self, job_id: str) -> None:
        """The job was cancelled: it leaves the active set."""
        self._close(job_id, "cancelled")

    def _close(self, job_id: str, how: str) -> None:
        self._open(job_id)
        del self._jobs[job_id]
        self._unrunnable.discard(job_id)
        self._closed[job_id] = how

    # ----- one slot --------------------------------------------------------------------------
    def step(self, t: int) -> dict[str, TaskDict]:
        """Decide slot ``t``: the policy proposes, the scheduler keeps what is valid.

        Parameters
        ----------
        t : the slot to decide, the previous step's plus one (any slot >= 0 at the first step).

        Returns
        -------
        dict : job id -> machine id -> (workers, ps) for every job that runs in slot ``t``.
            Every allocation returned keeps MODEL.md (capacity, shape, links) together with
            the others; a decision that would not is dropped and listed in ``dropped`` with
            its reason.

        Raises
        ------
        ValueError : ``t`` is not an integer >= 0 or not the previous step's plus one.
        """
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise ValueError(f"step needs a slot number >= 0, got {t!r}")
        t = int(t)
        if self._last_t is not None and t != self._last_t + 1:
            raise ValueError(f"step({t}) out of order: the previous step was {self._last_t}, "
                             f"so the next must be step({self._last_t + 1})")
        self.dropped = []
        for job_id in self._revised & self._jobs.keys():
            self._jobs[job_id].forget_what_it_cannot_run(self._topology)
        self._revised.clear()
        view = self.view(t)
        if not view.jobs:
            decisions: Mapping[str, Any] = {}
        elif self.mode == "commit":
            decisions = self._committed(view)
        else:
            decisions = self.policy.decide(view)
        placed = self._check_decisions(view, decisions)
        for job_id, e in self._jobs.items():
            if e.job.arrival > t:
                continue
            tasks = placed.get(job_id, {})
            if tasks:
                e.ran(tasks, self.slot_seconds)   # first: it compares with previous and last_ran
                e.last_ran = t
                e.attained += sum(w for w, _ in tasks.values()) * self.slot_seconds
            e.previous = dict(tasks)
            if e.commitment:  # a plan that ran out before the job finished is redone
                e.commitment = {s: v for s, v in e.commitment.items() if s > t} or None
        self._last_t = t
        return {j: dict(tasks) for j, tasks in placed.items()}

    def view(self, t: int) -> View:
        """What the policy sees in slot ``t``: the active jobs that fit on the cluster."""
        active = [e for j, e in self._jobs.items() if e.job.arrival <= t and j not in self._unrunnable]
        bus = self._fastest_bus() if self.information != "oracle" else 0.0
        if self.information == "estimate":  # the open jobs' ratios so far, censored (placement.online.sizes)
            self.sizes.censor_ratios(e.done / e.estimate for e in active if e.estimate)
        shown = [shown_job(on_cluster(e.job, self._topology), e.done, self.information, self.sizes,
                           self.slot_seconds, bus,
                           estimate=e.estimate, label=e.label,
                           paused=not e.seen_previous(e.job.id in self._revised, self._topology)) for e in active]
        instance = Instance(slot_seconds=self.slot_seconds, horizon=t + self.lookahead,
                            resources=self.resources, topology=self._topology,
                            jobs=tuple(shown), name=f"online-t{t}")
        return View(t, instance, {job.id: e.view_state(forget=job.id in self._revised, shown=job, topology=self._topology)
                                  for e, job in zip(active, shown)}, self.lookahead, self.information)

    def _fastest_bus(self) -> float:
        """The fastest local bus of the current cluster (Gbps)."""
        return max(m.local_gbps for m in self._topology.machines)

    def _drop(self, t: int, job_id: Any, reason: str) -> None:
        drop = Drop(t, str(job_id), reason)
        self.dropped.append(drop)
        self.drops_total += 1
        logger.warning("slot %d: decision for job %s dropped: %s", t, job_id, reason)

    def _check_decisions(self, view: View, decisions: Any) -> dict[str, TaskDict]:
        """The decisions that keep MODEL.md, packed in the policy's order (the rest dropped, each with its reason)."""
        if not isinstance(decisions, Mapping):
            self._drop(view.t, "*", f"the policy returned {type(decisions).__name__}, not a dict")
            return {}
        residual = view.residual()
        placed: dict[str, TaskDict] = {}
        for job_id, tasks in decisions.items():
            clean = self._shape(view, job_id, tasks)
            if isinstance(clean, str):
                self._drop(view.t, job_id, clean)
                continue
            if not clean:
                continue  # the policy lets the job wait
            job = view.jobs[job_id].job
            why = _type_error(view.instance, job, clean) if self._topology.typed else None
            if why:
                self._drop(view.t, job_id, why)
                continue
            if not residual.try_place(job, clean):
                self._drop(view.t, job_id, f"tasks {clean} do not fit what is left of the slot "
                           "(machine capacity or link bandwidth)")
                continue
            placed[job_id] = clean
        return placed

    def _shape(self, view: View, job_id: Any, tasks: Any) -> TaskDict | str:
        """``tasks`` without empty entries if the job may have them (rules 0, 2, 3), else
        the reason they are refused."""
        if not isinstance(job_id, str) or job_id not in view.jobs:
            return self._not_active(job_id, view.t)
        if not isinstance(tasks, Mapping):
            return f"tasks must map machine -> (workers, ps), got {type(tasks).__name__}"
        machines = self._topology.machine_index
        clean: TaskDict = {}
        for h, pair in tasks.items():
            if not isinstance(h, str) or h not in machines:
                return f"unknown machine {h!r}"
            if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                    or not all(is_count(x) for x in pair)):
                return f"machine {h}: {pair!r} is not a pair of integers >= 0"
            w, s = int(pair[0]), int(pair[1])
            if w or s:
                clean[h] = (w, s)
        job = view.jobs[job_id].job
        W, S = sum(w for w, _ in clean.values()), sum(s for _, s in clean.values())
        if W == 0:
            return f"{S} PS without workers" if S else {}
        return job.shape_error(W, S) or clean

    def _not_active(self, job_id: Any, t: int) -> str:
        if job_id in self._jobs:
            if job_id in self._unrunnable:
                return "the job fits nowhere on the current cluster"
            return f"the job arrives in slot {self._jobs[job_id].job.arrival}, not yet active"
        if job_id in self._closed:
            return f"the job is {self._closed[job_id]}"
        return "unknown job"


def _type_error(instance: Instance, job: Job, tasks: TaskDict) -> str | None:
    """Why the workers of ``tasks`` break MODEL.md 8's GPU-type rule, or None."""
    types = gpu_types(instance, tasks)
    names = sorted(repr(g) if g is not None else "untyped" for g in types)
    if len(types) > 1:
        return f"workers on GPU types {', '.join(names)}: one type per slot (MODEL.md 8)"
    if not job.runs_on(*types):
        return f"workers on GPU type {names[0]}, which the job's speed table does not list (MODEL.md 8)"
    return None


def _is_number(x: Any) -> bool:
    """A finite real number (not a bool)."""
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) and math.isfinite(x)


def on_cluster(job: Job, topology: Topology) -> Job:
    """``job`` with its per-type table cut to the GPU types ``topology`` has now: a type whose
    last machine left is one the job cannot use for now, not a reason to stop it running on
    its other types (unchanged when none of its types is left: it then fits nowhere)."""
    types = None if job.speed is None else job.speed.types
    if types is None or types <= set(topology.gpu_types):
        return job
    kept = job.speed.limited_to(set(topology.gpu_types))
    return job if kept is None else dataclasses.replace(job, speed=kept)
