"""The online scheduler's checkpoint: everything it knows as plain JSON, and back.

:meth:`~Checkpointing.state` writes the document (format :data:`STATE_FORMAT`) and
:meth:`~Checkpointing.from_state` reads it, so a restarted cluster manager resumes where it
stopped and makes the decisions an uninterrupted one would.
:class:`~placement.online.scheduler.OnlineScheduler` has both methods from
:class:`Checkpointing`; :class:`JobRecord`, its record of each open job, lives here because
it is exactly what the document keeps per job.

Kept apart from :mod:`placement.online.scheduler` because the document is a contract with
whatever stores it, while the slot logic there never reads or writes it.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from placement.model.instance import Job
from placement.model.progress import changed, working_seconds
from placement.online.policy import CommittingPolicy, JobState, Policy, TaskDict
from placement.online.sizes import LearnedSizes
from placement.model.topology import Topology

__all__ = ["STATE_FORMAT", "Checkpointing", "JobRecord"]

logger = logging.getLogger(__name__)

STATE_FORMAT = "placement-online-state/1"

_Self = TypeVar("_Self", bound="Checkpointing")


@dataclass
class JobRecord:
    """The scheduler's record of one submitted job (mutable: it changes every slot), and
    what its checkpoint keeps per job."""

    job: Job
    done: float = 0.0
    attained: float = 0.0
    previous: TaskDict = field(default_factory=dict)
    last_ran: int | None = None
    commitment: dict[int, TaskDict] | None = None  # commit mode; None: (re)commit due
    estimate: float | None = None   # a user's estimate of its total work (information "estimate")
    label: str | None = None        # its class, for the sizes learned per class
    changes: int = 0                # reconfigurations since its first start (a resume counts)
    useful: float = 0.0             # seconds it ran, less the restarts of those changes

    def view_state(self, forget: bool = False, shown: Job | None = None,
                   topology: Topology | None = None) -> JobState:
        """What a policy sees of the job (``shown``: the job as the information level shows
        it, default the job itself); ``forget``: without previous tasks the job can no longer
        run on ``topology`` (a revise pending, :meth:`forget_what_it_cannot_run` at the next step)."""
        return JobState(self.job if shown is None else shown, self.done, self.attained,
                        self.seen_previous(forget, topology), self.last_ran, self.changes, self.useful)

    def ran(self, tasks: TaskDict, slot_seconds: float) -> None:
        """Count slot's ``tasks`` (non-empty) in :attr:`changes` and :attr:`useful` (MODEL.md 4:
        a change loses the restart, at most the slot)."""
        change = self.last_ran is not None and changed(tasks, self.previous)
        self.changes += change
        self.useful += working_seconds(slot_seconds, self.job, change)

    def seen_previous(self, forget: bool = False, topology: Topology | None = None) -> TaskDict:
        """The previous tasks a policy sees (:meth:`view_state`): none when ``forget`` and the
        job can no longer run them; a job without them pays a restart to run."""
        return {} if forget and self._previous_stale(topology) else dict(self.previous)

    def _previous_stale(self, topology: Topology | None) -> bool:
        """The job's worker range, PS need or GPU types no longer hold its previous tasks."""
        return bool(self.previous) and not _runs(self.job, self.previous, topology)

    def forget_what_it_cannot_run(self, topology: Topology | None = None) -> None:
        """After a revise (at the next step) or resuming an older checkpoint: the previous
        tasks when the job's worker range, PS need or GPU types (on ``topology``) no longer
        hold them, and a commitment holding such a set (commit mode then commits the job
        again); every policy then places it afresh instead of keeping a set the scheduler
        would drop. ``last_ran`` stays: it did run then."""
        if self._previous_stale(topology):
            self.previous = {}
        if self.commitment and not all(_runs(self.job, v, topology) for v in self.commitment.values() if v):
            self.commitment = None


def _runs(job: Job, tasks: Mapping, topology: Topology | None = None) -> bool:
    """Whether ``job`` may run ``tasks`` by its worker range and PS need and, on a typed
    ``topology``, its workers' one GPU type (MODEL.md 8; machines no longer there are not
    judged here); True for a set too malformed to count (the scheduler refuses it, with its
    reason, when its slot comes)."""
    try:
        workers = sum(int(w) for w, _ in tasks.values())
        ps = sum(int(s) for _, s in tasks.values())
    except (TypeError, ValueError, AttributeError):
        return True
    if job.shape_error(workers, ps) is not None:
        return False
    if topology is None or not topology.typed:
        return True
    index, machines = topology.machine_index, topology.machines
    types = {machines[index[h]].gpu_type for h, (w, _) in tasks.items() if h in index and int(w)}
    return len(types) <= 1 and all(job.runs_on(g) for g in types)


class Checkpointing:
    """The checkpoint methods of :class:`~placement.online.scheduler.OnlineScheduler`
    (module docstring); they read and set the scheduler's own fields, declared here."""

    policy: Policy | CommittingPolicy
    mode: str
    lookahead: int
    slot_seconds: float
    resources: tuple[str, ...]
    drops_total: int
    _topology: Topology
    _jobs: dict[str, JobRecord]
    _closed: dict[str, str]
    _unrunnable: set[str]
    _revised: set[str]
    _last_t: int | None
    information: str
    sizes: LearnedSizes

    def state(self) -> dict[str, Any]:
        """Everything needed to resume (plain JSON types); a policy with ``state()`` adds its own."""
        get = getattr(self.policy, "state", None)
        return {
            "format": STATE_FORMAT,
            "policy": getattr(self.policy, "name", type(self.policy).__name__),
            "policy_state": get() if callable(get) else None,
            "mode": self.mode, "lookahead": self.lookahead, "slot_seconds": self.slot_seconds,
            "information": self.information, "sizes": self.sizes.state(),
            "resources": list(self.resources), "topology": self._topology.to_dict(),
            "last_slot": self._last_t, "drops_total": self.drops_total,
            "closed": dict(self._closed),
            "revised": sorted(self._revised),  # revised since the last step: forgotten at the next
            "jobs": [{"job": e.job.to_dict(), "done": e.done, "attained": e.attained,
                      "previous": _tasks_out(e.previous), "last_ran": e.last_ran,
                      "commitment": None if e.commitment is None else
                      {str(s): _tasks_out(v) for s, v in e.commitment.items()},
                      "estimate": e.estimate, "label": e.label, "changes": e.changes, "useful": e.useful}
                     for e in self._jobs.values()],
        }

    @classmethod
    def from_state(cls: type[_Self], state: Mapping[str, Any],
                   policy: Policy | CommittingPolicy) -> _Self:
        """A scheduler that continues exactly where the one that wrote ``state`` stopped."""
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not an online scheduler state (expected format {STATE_FORMAT!r})")
        try:
            sched = cls(Topology.from_dict(state["topology"]), resources=state["resources"],
                        policy=policy, lookahead=state["lookahead"],
                        slot_seconds=state["slot_seconds"], mode=state["mode"],
                        information=state.get("information", "oracle"))  # older states: oracle
            sched.sizes = LearnedSizes.from_state(state.get("sizes"))
            name = getattr(policy, "name", None)
            if name != state["policy"]:
                logger.warning("resuming a state written with policy %r using policy %r",
                               state["policy"], name)
            load = getattr(policy, "load_state", None)
            if state["policy_state"] is not None and callable(load):
                load(state["policy_state"])
            # a revise not yet followed by a step is forgotten at the next step, as if no
            # checkpoint had been taken; every other job's set is checked now (a state written
            # by an older release, whose revise forgot at once, has no "revised")
            sched._revised = {str(j) for j in state.get("revised") or ()}
            hosts = set(sched._topology.machine_index)
            for i, raw in enumerate(state["jobs"]):
                job = Job.from_dict(raw["job"], f"jobs[{i}].job")
                if job.id in sched._jobs:
                    raise ValueError(f"jobs[{i}]: job {job.id!r} is listed twice")
                sched._jobs[job.id] = JobRecord(
                    job, _amount(raw["done"], f"jobs[{i}].done"), _amount(raw["attained"], f"jobs[{i}].attained"),
                    _tasks_in(raw["previous"], hosts, f"jobs[{i}].previous"),
                    _slot(raw["last_ran"], f"jobs[{i}].last_ran"), None if raw["commitment"] is None else
                    {int(s): _tasks_in(v, hosts, f"jobs[{i}].commitment") for s, v in raw["commitment"].items()},
                    None if raw.get("estimate") is None else _amount(raw["estimate"], f"jobs[{i}].estimate"),
                    None if raw.get("label") is None else str(raw["label"]),
                    _count(raw.get("changes", 0), f"jobs[{i}].changes"),   # older states: none
                    _amount(raw.get("useful", 0.0), f"jobs[{i}].useful"))
                if job.id not in sched._revised:
                    sched._jobs[job.id].forget_what_it_cannot_run(sched._topology)
            sched._closed = {str(k): str(v) for k, v in state["closed"].items()}
            sched._last_t = _slot(state["last_slot"], "last_slot")
            sched.drops_total = int(state["drops_total"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed online scheduler state: {exc!r}") from None
        sched._unrunnable = {j for j, e in sched._jobs.items()
                             if sched._why_unrunnable(e.job, sched._topology)}
        return sched


def _tasks_out(tasks: TaskDict) -> list[list[Any]]:
    return [[h, int(w), int(s)] for h, (w, s) in tasks.items()]


def _tasks_in(rows: Iterable[list[Any]], hosts: set[str], where: str) -> TaskDict:
    """Task rows ``[machine, workers, ps]`` on machines of the cluster, counts >= 0."""
    tasks = {str(h): (int(w), int(s)) for h, w, s in rows}
    for h, (w, s) in tasks.items():
        if h not in hosts or w < 0 or s < 0:
            raise ValueError(f"{where}: {h!r} is not a machine of the cluster"
                             if h not in hosts else f"{where}: negative count")
    return tasks


def _amount(value: Any, where: str) -> float:
    """A finite number >= 0 (a hand-edited state must not feed the scheduler what its API refuses)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: expected a finite number >= 0, got {value!r}")
    return float(value)


def _is_count(value: Any) -> bool:
    """An integer >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(value: Any, where: str) -> int:
    """An integer >= 0."""
    if not _is_count(value):
        raise ValueError(f"{where}: expected an integer >= 0, got {value!r}")
    return value


def _slot(value: Any, where: str) -> int | None:
    """A slot index (an integer >= 0) or None."""
    if value is not None and not _is_count(value):
        raise ValueError(f"{where}: expected a slot (an integer >= 0) or null, "
                         f"got {value!r}")
    return value
