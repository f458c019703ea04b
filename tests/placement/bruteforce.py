"""The optimum of a tiny instance by enumerating every valid schedule: the referee of the
exact model, so it uses nothing but the schedule types and ``placement.model.evaluate``.

Per slot and job, every assignment of (workers, ps) in 0..max_workers x 0..min_ps(max_workers)
to each machine (more PSs on one machine are never needed: lowering them to min_ps keeps the
machine, the shape and every load no larger). Three filters, each by the validator and each
safe because validity is monotone in it:

- a job's assignment alone in a slot must be valid: other jobs only add capacity and link
  load and never change this job's shape or lowest common ancestor;
- a slot's combination of jobs must be valid on its own: rules 1, 3, 4 are per slot, and a
  slot depends on the time only through which jobs have arrived (cached by that set);
- a schedule prefix must be valid: a job's completion slot depends only on slots up to it,
  so tasks after completion (rule 2) stay invalid in every extension.

Test modules load it by path (``--import-mode=importlib``), like ``builders.py``.
"""
from __future__ import annotations

from itertools import product

from placement.model.evaluate import evaluate, validate
from placement.model.instance import Instance
from placement.model.schedule import Allocation, Schedule, Slot

Assignment = tuple[Allocation, ...]


def job_options(instance: Instance, j: int) -> list[Assignment]:
    """Every non-empty assignment of job j to the machines that is valid alone (at its arrival)."""
    job = instance.jobs[j]
    machines = [m.id for m in instance.topology.machines]
    counts = list(product(range(job.max_workers + 1), range(job.min_ps(job.max_workers) + 1)))
    out = []
    for per_machine in product(counts, repeat=len(machines)):
        allocs = tuple(Allocation(job.id, h, w, s) for h, (w, s) in zip(machines, per_machine) if w or s)
        if allocs and not validate(instance, Schedule((Slot(job.arrival, allocs),))):
            out.append(allocs)
    return out


def slot_options(instance: Instance, t: int, alone: list[list[Assignment]]) -> list[Assignment]:
    """Every valid content of slot t: combinations of the arrived jobs' options (or nothing)."""
    per_job = [[()] + (alone[j] if job.arrival <= t else []) for j, job in enumerate(instance.jobs)]
    out = []
    for combo in product(*per_job):
        allocs = tuple(a for part in combo for a in part)
        if not validate(instance, Schedule((Slot(t, allocs),))):
            out.append(allocs)
    return out


def optimum(instance: Instance, limit: int = 200_000) -> tuple[float, Schedule, int]:
    """(best weighted total JCT, one schedule reaching it, number of valid schedules).

    Raises ValueError when the slots' options multiply beyond ``limit`` (not tiny)."""
    alone = [job_options(instance, j) for j in range(len(instance.jobs))]
    cache: dict[frozenset[int], list[Assignment]] = {}
    options = []
    for t in range(instance.horizon):
        arrived = frozenset(j for j, job in enumerate(instance.jobs) if job.arrival <= t)
        if arrived not in cache:
            cache[arrived] = slot_options(instance, t, alone)
        options.append(cache[arrived])
    size = 1
    for opts in options:
        size *= len(opts)
    if size > limit:
        raise ValueError(f"{size} candidate schedules: not a tiny instance")
    best: list = [float("inf"), None]
    count = 0

    def extend(prefix: list[Assignment]) -> None:
        nonlocal count
        schedule = Schedule(tuple(Slot(t, a) for t, a in enumerate(prefix)), instance.name)
        violations, report = evaluate(instance, schedule)
        if violations:
            return
        if len(prefix) == instance.horizon:
            count += 1
            if report.objective < best[0]:
                best[:] = [report.objective, schedule]
            return
        for option in options[len(prefix)]:
            extend(prefix + [option])

    extend([])
    return best[0], best[1], count
