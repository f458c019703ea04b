"""MODEL.md section 4, one slot at a time: the progress a job makes with given tasks.

The validator computes the same quantities vectorised over a whole schedule; this module
is for code that builds a schedule slot by slot (decoders, greedy, online scheduler) and
must know when a job completes, so that it never places tasks after completion.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from placement.model.instance import COMPLETE, Instance, Job

#: machine id -> (workers, ps); entries with 0/0 are not tasks.
Tasks = Mapping[str, tuple[int, int]]
#: the same, as a dict a policy or the slot rules return
TaskDict = dict[str, tuple[int, int]]


def canonical(tasks: Tasks) -> frozenset[tuple[str, int, int]]:
    """The (machine, workers, ps) set MODEL.md compares to detect reconfiguration."""
    return frozenset((h, w, s) for h, (w, s) in tasks.items() if w or s)


def batch_time(instance: Instance, job: Job, tasks: Tasks) -> float:
    """Seconds per mini-batch of a linear-speed job (MODEL.md 4): local_gbps of the machine
    if every task is on one machine, else the job's worker_gbps."""
    used = [h for h, (w, s) in tasks.items() if w or s]
    if len(used) == 1:
        machine = instance.topology.machines[instance.topology.machine_index[used[0]]]
        return job.batch_time(machine.local_gbps)
    return job.batch_time(job.worker_gbps)


def gpu_types(instance: Instance, tasks: Tasks) -> set[str | None]:
    """The GPU types of the machines holding workers in ``tasks`` (MODEL.md 8: one, when valid)."""
    machines, index = instance.topology.machines, instance.topology.machine_index
    return {machines[index[h]].gpu_type for h, (w, _) in tasks.items() if w}


def job_rate(instance: Instance, job: Job, tasks: Tasks) -> float:
    """Mini-batches per second of the whole job with ``tasks`` (MODEL.md 4, or its speed
    table, MODEL.md 8: the workers' GPU type's, the slowest if they mix types, which the
    rules forbid); 0 without workers."""
    workers = sum(w for w, _ in tasks.values())
    if workers == 0:
        return 0.0
    if job.speed is not None:
        machines = sum(1 for w, s in tasks.values() if w or s)
        if job.speed.types is None:
            return job.speed.rate(workers, machines)
        return min(job.speed.rate(workers, machines, g) for g in gpu_types(instance, tasks))
    return workers / batch_time(instance, job, tasks)


def per_worker_seconds(instance: Instance, job: Job, tasks: Tasks) -> float:
    """Seconds per mini-batch per worker: theta of MODEL.md 4, or W / rate of the speed
    table (MODEL.md 8), for rules written in terms of theta."""
    if job.speed is not None:
        workers = sum(w for w, _ in tasks.values())
        rate = job_rate(instance, job, tasks)
        return workers / rate if rate > 0 else float("inf")
    return batch_time(instance, job, tasks)


def changed(tasks: Tasks, previous: Tasks | None) -> bool:
    """MODEL.md 4: a task set other than the previous slot's (None: it did not run) restarts."""
    return previous is None or canonical(tasks) != canonical(previous)


def working_seconds(slot_seconds: float, job: Job, restarted: bool) -> float:
    """The seconds of a slot the job works: the slot less its restart, if it restarted."""
    return max(0.0, slot_seconds - (job.restart_seconds if restarted else 0.0))


def slot_batches(instance: Instance, job: Job, tasks: Tasks, previous: Tasks | None) -> float:
    """Mini-batches done in one slot, with the restart loss if the task set changed."""
    workers = sum(w for w, _ in tasks.values())
    if workers == 0:
        return 0.0
    seconds = working_seconds(instance.slot_seconds, job, changed(tasks, previous))
    if job.speed is not None:
        return job_rate(instance, job, tasks) * seconds
    return workers * seconds / batch_time(instance, job, tasks)


@dataclass
class ProgressTracker:
    """Batches done and last task set of every job, advanced slot by slot."""

    instance: Instance
    done: dict[str, float] = field(default_factory=dict)
    last: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    completed: dict[str, int] = field(default_factory=dict)

    def remaining(self, job: Job) -> float:
        return max(0.0, job.work_batches - self.done.get(job.id, 0.0))

    def is_done(self, job: Job) -> bool:
        return job.id in self.completed

    def would_do(self, job: Job, tasks: Tasks) -> float:
        """Batches the job would do this slot with ``tasks`` (previous slot's set as of now)."""
        return slot_batches(self.instance, job, tasks, self.last.get(job.id))

    def advance(self, t: int, placed: Mapping[str, Tasks]) -> None:
        """Record slot ``t``: ``placed`` maps job id -> tasks (absent jobs ran nothing)."""
        jobs = self.instance.jobs
        index = self.instance.job_index
        for job_id, tasks in placed.items():
            job = jobs[index[job_id]]
            self.done[job_id] = self.done.get(job_id, 0.0) + self.would_do(job, tasks)
            if self.done[job_id] >= job.work_batches * COMPLETE and job_id not in self.completed:
                self.completed[job_id] = t
        self.last = {j: dict(tasks) for j, tasks in placed.items() if canonical(tasks)}
