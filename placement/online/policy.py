"""The contract between the online scheduler and a policy.

The scheduler owns the truth (submitted jobs, reported progress, machines); each slot it
hands a policy a read-only :class:`View` and gets back intended tasks per job. The
scheduler, not the policy, enforces MODEL.md: a decision that breaks a rule is cut back
(the job waits that slot) and logged, so a buggy policy can never emit an invalid
allocation.

Two modes (``OnlineScheduler(mode=...)``):
- ``"reoptimise"`` (default): every slot, ``decide(view)`` returns the tasks of each job
  for slot ``view.t``;
- ``"commit"`` (OASiS style): when a job arrives, ``commit(view, job_id, reserved)``
  returns its tasks for every future slot, given what earlier commitments hold
  (``reserved(t)`` is a :class:`placement.slots.residual.Residual` of slot t, already charged
  with them); the plan is then executed unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, runtime_checkable

from placement.model.instance import COMPLETE, Instance, Job
from placement.slots.residual import Residual
from placement.model.progress import ProgressTracker, TaskDict



@dataclass(frozen=True)
class JobState:
    """What the scheduler knows about one active job."""

    job: Job                 # ``arrival`` is the slot the job was submitted in
    done: float              # batches done so far (as reported by the cluster)
    attained: float          # worker-seconds served so far (for least-attained-service policies)
    previous: TaskDict       # tasks in the previous slot ({} if it did not run then, or a revise made them unrunnable)
    last_ran: int | None     # last slot in which it had workers
    changes: int = 0         # reconfigurations since its first start (a resume counts: MODEL.md 4)
    useful: float = 0.0      # seconds it ran, less what those changes lost

    @property
    def hold_seconds(self) -> float:
        """How long the job has kept a configuration on average: its useful seconds per
        configuration so far (0 before it ran; Sia's reallocation factor, SOSP'23, reads the
        age since submission over the restarts instead)."""
        return self.useful / (self.changes + 1)

    @property
    def remaining(self) -> float:
        return max(0.0, self.job.work_batches - self.done)


@dataclass(frozen=True)
class View:
    """Slot ``t`` as a policy sees it.

    ``instance`` holds the current cluster and every active job, with horizon
    ``t + lookahead``, so the library's tools (``Residual``, ``formulate``,
    ``ProgressTracker``) work on it directly. ``jobs`` maps id -> state for the same jobs.
    ``information`` is what the scheduler knows of job lengths
    (:mod:`placement.online.knowledge`): below ``oracle`` each job's ``work_batches`` is the
    size it is planned by, not its truth.
    """

    t: int
    instance: Instance
    jobs: dict[str, JobState]
    lookahead: int
    information: str = "oracle"

    @property
    def lengths_known(self) -> bool:
        """Are the jobs' ``work_batches`` their true sizes (information ``oracle``)?"""
        return self.information == "oracle"

    def residual(self) -> Residual:
        """An empty slot of the current cluster to pack decisions into."""
        return Residual(self.instance)

    def tracker(self) -> ProgressTracker:
        """Progress as the scheduler knows it (reported batches, last slot's task sets);
        a job reported complete but not yet finished counts as done."""
        done = {j: s.done for j, s in self.jobs.items()}
        last = {j: dict(s.previous) for j, s in self.jobs.items() if s.previous}
        completed = {j: self.t - 1 for j, s in self.jobs.items()
                     if s.done >= s.job.work_batches * COMPLETE}
        return ProgressTracker(self.instance, done=done, last=last, completed=completed)


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy; ``name`` is how reports and the CLI call it."""

    name: str

    def decide(self, view: View) -> dict[str, TaskDict]:
        """Tasks per job for slot ``view.t`` (jobs left out wait)."""
        ...


@runtime_checkable
class CommittingPolicy(Protocol):
    """A policy that can also fix a job's whole future at its arrival."""

    name: str

    def commit(self, view: View, job_id: str, reserved: Callable[[int], Residual]) -> dict[int, TaskDict]:
        """Tasks of ``job_id`` per future slot t >= view.t."""
        ...
