"""The slot rules: turn an intent (what a solver intends per slot and job) into a schedule
that keeps every MODEL.md rule, slot by slot.

An intent may break rules: too many workers, wrong or unknown domains and machines, tasks
for jobs that have not arrived or have finished, more than the cluster holds. The
slot rules trust only the referee's rules: they keep a :class:`ProgressTracker`, so they
never place a task before a job's arrival or after its completion, and build each slot in
a :class:`Residual` that applies rules 1 and 4 exactly. The chain's referee
(:class:`placement.chain.Chain`) checks every schedule built here before it leaves the
library (a violation raises RuntimeError: a bug, never an expected outcome).

Rules, per slot t, over the jobs that have arrived and not completed:

a. **Planned jobs first**, in weighted shortest-remaining-processing-time order: key
   ``remaining batches x fastest per-batch time / max_workers / weight`` (plain SRPT when
   weights are equal; the weight makes it Smith's rule, since the objective is weighted
   JCT), ties by arrival and id. The planned placement is normalised: workers on unknown
   machines or outside the planned domain are dropped, the planned total W is clamped to
   [min_workers, max_workers] (counts are trimmed from the machines with the fewest
   workers, added to the one with the most), an unknown domain becomes the LCA of the
   planned machines. The planned PSs are kept if the workers needed no change and they
   number exactly ``job.min_ps(W)``; otherwise ``min_ps(W)`` PSs are placed beside the
   workers (each worker machine its share first, then the worker machines, then elsewhere
   in the domain). No workers means "idle". If it does not fit what is left: the most
   workers (<= W) that fit inside the planned domain (local first, then its smallest
   subtree), else anywhere; else the job waits. The plans that fit as planned are placed
   first (in that order), the others after them (in that order): a plan that does not fit
   would otherwise take, as its fallback, the room later plans were made for. A job whose
   previous task set still fits is decided in the first pass (rule b may keep that set
   before later plans take it). With ``follow_sizes``, a plan over several machines may
   move to one machine (below) in the second pass. Before all this, machines the plan
   only renames are exchanged in it (:mod:`placement.slots.relabel`): no restart for a name.
b. **Stability.** A reconfiguration costs restart_seconds of the slot (MODEL.md 4). If
   the job ran last slot, its previous task set still fits and the new set would not
   finish the job's remaining work in fewer slots (estimate: the new rate kept to the end,
   the restart charged now), the previous task set is kept unchanged.
c. **Trim.** A job that completes this slot keeps only the fewest workers (and their
   PSs) that still complete it this slot, restart included if the trimmed set differs
   from last slot's; workers go first from the machines holding the fewest, PSs from
   machines without workers. The capacity it frees is used by later jobs of the slot.
d. **Fill** (``fill=True``): with what is left, over all active jobs in the same order:
   a running job is grown (the best placement of up to max_workers anywhere, its own
   machines preferred) when that finishes it in fewer slots despite the restart; a job
   not running resumes its previous task set if it fits (no restart), unless a new
   placement finishes it in fewer slots; otherwise it starts with the placement that
   finishes it soonest (then fewest workers, then fastest, local before spread).
   Before this pass, the previous task sets of jobs not yet placed are reserved in the
   same order, so a starting job is packed around them (no gratuitous migration); it
   evicts later jobs' reservations only if it cannot start otherwise (they then look for
   room in their own turn). Capacity freed by completions and trims is re-used this way.
e. **Keep machines.** Last, the same in the decision (:func:`~placement.slots.relabel.keep_machines`).

With ``follow_sizes`` (the LP policy on the configuration model, whose intent's worker
counts are the LP's decision): rule b keeps the previous task set only when the intent
keeps the job's worker count, and in rule d the jobs the intent placed are grown only
after every other job has been kept or started (so the capacity the LP left for others is
theirs first, and what nobody takes is still used; a job the intent resized first goes
back to its previous task set, no restart, when that still fits and finishes it in fewer
slots); and after rules a and b, tasks over several machines give way to the job's
previous task set (at most as many workers, no restart), else the largest one-machine
placement in the plan's domain, else in the cluster (at most as many workers), when that
finishes the job in no more slots (the estimate of rule b, restart counted against the
tasks kept): the LP's rates are continuous, blind to the slot a job completes in, so it
may spread or move a job where that slot does not need it (and its POP partition may hold
no one-machine room that the rest of the cluster has), and one machine leaves the others'
room to the jobs after it.

Candidate placements come from :class:`placement.slots.residual.Residual`: local (a machine
with the largest local_gbps, tightest fit) or spread in the smallest subtree that holds
the workers with their links respected, PSs beside the workers.

GPU types (MODEL.md 8): candidates keep a job's workers on one type it runs on, the best of
each type competing by rule d's key (the type that finishes the job soonest wins); a plan
keeps the type holding most of its workers (ties: the faster rate; on no type it runs on,
it does not fit) before rule a's normalisation; rules b and d reuse tasks that ``fits``.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from placement import deadline
from placement.model.instance import COMPLETE, Instance, Job
from placement.slots.relabel import keep_machines, relabel
from placement.slots.residual import Residual
from placement.model.intent import JobIntent, Intent
from placement.model.progress import ProgressTracker, TaskDict, canonical, job_rate, slot_batches
from placement.model.schedule import Allocation, Schedule

__all__ = ["build_schedule", "decide_slot"]

logger = logging.getLogger(__name__)


def build_schedule(instance: Instance, intent: Intent, *, fill: bool = True, follow_sizes: bool = False) -> Schedule:
    """The schedule that follows ``intent`` as far as the rules allow (module docstring);
    valid by construction, and checked by the chain's referee."""
    tracker = ProgressTracker(instance)
    residual = Residual(instance)
    by_slot: dict[int, list[Allocation]] = {}
    for t in range(instance.horizon):
        if len(tracker.completed) == len(instance.jobs):
            break
        deadline.check()
        intended = intent.slots[t] if t < len(intent.slots) else {}
        residual.clear()
        placed = decide_slot(instance, tracker, t, intended, fill=fill, residual=residual, follow_sizes=follow_sizes)
        tracker.advance(t, placed)
        by_slot[t] = [Allocation(j, h, w, s) for j in sorted(placed)
                      for h, (w, s) in sorted(placed[j].items())]
    return Schedule.from_allocations(by_slot, instance=instance.name)


def decide_slot(instance: Instance, tracker: ProgressTracker, t: int,
                intended: Mapping[str, JobIntent] | None = None, *, fill: bool = True,
                residual: Residual | None = None, follow_sizes: bool = False, trim: bool = True
                ) -> dict[str, TaskDict]:
    """The tasks of every job in slot ``t`` by rules a-e (module docstring), given the
    progress so far; what online policies call each slot. ``residual`` must be empty.
    ``trim=False``: no rule c, for sizes not known (never cut to a size only expected)."""
    residual = Residual(instance) if residual is None else residual
    return _SlotBuilder(instance, tracker, residual, t, follow_sizes, trim).build(intended or {}, fill)


_LATER = object()  # rule a: the plan does not fit as planned; placed after the plans that do


def workers_of(tasks: Mapping[str, tuple[int, int]]) -> int:
    return sum(w for w, _ in tasks.values())


def shrink(job: Job, tasks: Mapping[str, tuple[int, int]], workers: int) -> TaskDict:
    """``tasks`` cut down to ``workers`` workers and ``job.min_ps(workers)`` PSs: workers go
    from the machines holding the fewest, PSs first from machines left without workers."""
    w = _take({h: tw for h, (tw, _) in tasks.items()}, sum(tw for tw, _ in tasks.values()) - workers,
              key=lambda h, c: (c[h], h))
    s = {h: ts for h, (_, ts) in tasks.items()}
    s = _take(s, sum(s.values()) - job.min_ps(workers), key=lambda h, c: (w[h] > 0, c[h], h))
    return {h: (w[h], s[h]) for h in tasks if w[h] or s[h]}


def _take(counts: dict[str, int], amount: int, key) -> dict[str, int]:
    """``counts`` less ``amount`` units, taken machine by machine in ``key`` order."""
    out = dict(counts)
    for h in sorted(out, key=lambda h: key(h, out)):
        if amount <= 0:
            break
        d = min(amount, out[h])
        out[h] -= d
        amount -= d
    return out


def _count(x: Any) -> int:
    """A planned count as a non-negative int (garbage such as NaN or -3 counts as 0)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0
    return int(v) if math.isfinite(v) and v > 0 else 0


def _resize(counts: dict[str, int], workers: int) -> dict[str, int]:
    """Planned workers per machine brought to ``workers`` in total: trimmed from the
    machines with the fewest, added to the one with the most."""
    drop = sum(counts.values()) - workers
    out = _take(counts, drop, key=lambda h, c: (c[h], h))
    if drop < 0:
        top = max(out, key=lambda h: (out[h], h))
        out[top] -= drop
    return {h: w for h, w in out.items() if w}


class _SlotBuilder:
    """The decisions of one slot (rules a-d of the module docstring)."""

    def __init__(self, instance: Instance, tracker: ProgressTracker, residual: Residual, t: int,
                 follow_sizes: bool = False, trim: bool = True):
        self.inst, self.tracker, self.residual, self.t = instance, tracker, residual, t
        self.follow_sizes, self.trim = follow_sizes, trim
        self.placed: dict[str, TaskDict] = {}

    def build(self, intended: Mapping[str, JobIntent], fill: bool) -> dict[str, TaskDict]:
        active = [j for j in self.inst.jobs if j.arrival <= self.t and not self.tracker.is_done(j)]
        active.sort(key=self._priority)
        intended = relabel(self.inst, self.tracker.last, intended, [j.id for j in active])
        for job_id in intended:
            if job_id not in self.inst.job_index:
                logger.debug("slot %d: intent names unknown job %r; ignored", self.t, job_id)
        later: set[str] = set()
        moves: dict[str, tuple[TaskDict, str]] = {}
        for job in active:  # plans that fit as planned, in order; the others after them
            if job.id in intended:
                tasks, move = self._from_intent(job, intended[job.id], defer=True)
                if tasks is _LATER:
                    later.add(job.id)
                elif tasks:
                    self._commit(job, tasks)
                    if move is not None:
                        moves[job.id] = (tasks, move)
        for job in active:  # in order again: the plans that did not fit, and the moves
            if job.id in later:
                tasks, _ = self._from_intent(job, intended[job.id])
                if tasks:
                    self._commit(job, tasks)
            elif job.id in moves:
                tasks, domain = moves[job.id]
                self.residual.remove(job.id)
                del self.placed[job.id]
                self._commit(job, self._local_if_as_soon(job, tasks, domain))
        if fill:
            self._fill(active)
        return keep_machines(self.inst, self.tracker.last, self.placed)

    # ----- estimates -----------------------------------------------------------------------
    def _priority(self, job: Job) -> tuple[float, int, str]:
        if job.speed is not None:  # its fastest rate, local or spread (MODEL.md 8)
            fastest = job.speed.fastest
            return self.tracker.remaining(job) / fastest / job.weight, job.arrival, job.id
        fastest = job.batch_time(max(self.inst.best_local_gbps, job.worker_gbps))
        return self.tracker.remaining(job) * fastest / job.max_workers / job.weight, job.arrival, job.id

    def _completes(self, job: Job, tasks: Mapping[str, tuple[int, int]]) -> bool:
        """Would ``tasks`` complete the job in this slot (the tracker's own test)?"""
        done = self.tracker.done.get(job.id, 0.0) + self.tracker.would_do(job, tasks)
        return done >= job.work_batches * COMPLETE

    def _slots_to_finish(self, job: Job, tasks: Mapping[str, tuple[int, int]]) -> float:
        """Slots until completion if ``tasks`` ran from now on (restart charged now)."""
        w = workers_of(tasks)
        if w == 0:
            return math.inf
        left = (job.work_batches * COMPLETE - self.tracker.done.get(job.id, 0.0)
                - self.tracker.would_do(job, tasks))
        if left <= 0:
            return 1
        per_slot = slot_batches(self.inst, job, tasks, tasks)  # a slot without restart
        return 1 + math.ceil(left / per_slot) if per_slot > 0 else math.inf

    def _gains(self, job: Job, current: Mapping[str, tuple[int, int]],
               new: Mapping[str, tuple[int, int]]) -> bool:
        return self._slots_to_finish(job, new) < self._slots_to_finish(job, current)

    def _best(self, job: Job, cap: int, within: str | None, prefer: Iterable[str]) -> TaskDict | None:
        """The candidate that finishes soonest, then with fewest workers, then fastest,
        local before spread."""
        prefer = list(prefer)
        res, first = self.residual, prefer[0] if prefer else None
        cands = [(c, k) for g in res.job_types(job)  # the best of each GPU type (one when untyped)
                 for k, c in enumerate((res.best_local(job, cap, within=within, prefer=first, gpu_type=g),
                                        res.best_spread(job, cap, within=within, prefer=prefer, gpu_type=g))) if c]
        if not cands:
            return None

        def key(item: tuple[TaskDict, int]) -> tuple[float, int, float, int]:
            tasks, kind = item
            rate = job_rate(self.inst, job, tasks)
            return (self._slots_to_finish(job, tasks), workers_of(tasks), -rate, kind)
        return min(cands, key=key)[0]

    def _previous(self, job: Job) -> TaskDict | None:
        """The job's tasks of last slot (none when a revise made them too large or small:
        ``OnlineScheduler.revise`` forgets them)."""
        return self.tracker.last.get(job.id) or None

    # ----- rule a: the intent ----------------------------------------------------------------
    def _from_intent(self, job: Job, placement: JobIntent, defer: bool = False) -> tuple[Any, str | None]:
        """Rules a and b for one planned job: its tasks, or ``_LATER`` when ``defer`` and
        the plan does not fit as planned (unless the job's previous tasks fit: rule b then
        decides now, before later plans can take them); and, when ``defer``, the domain of
        a spread plan that may still move to one machine (done in the second pass)."""
        prev = self._previous(job)
        defer = defer and not (prev and self.residual.fits(job, prev))
        tasks, domain = self._planned_tasks(job, placement, defer)
        if tasks is _LATER:
            return _LATER, None
        if prev and canonical(prev) != canonical(tasks or {}) and self.residual.fits(job, prev):
            # rule b': with follow_sizes, an intent that resizes the job is the decision
            resized = self.follow_sizes and tasks is not None and workers_of(tasks) != workers_of(prev)
            if not resized and (tasks is None or not self._gains(job, prev, tasks)):
                tasks = dict(prev)  # rule b: no gain worth a restart
        if self.follow_sizes and domain is not None and tasks and sum(1 for w, s in tasks.values() if w or s) > 1:
            if defer:
                return tasks, domain  # placed now; it may move to one machine after the other plans
            tasks = self._local_if_as_soon(job, tasks, domain)
        return tasks, None

    def _planned_tasks(self, job: Job, placement: JobIntent, defer: bool = False) -> tuple[Any, str | None]:
        """The intent's tasks, fitted (module docstring, rule a), and its domain."""
        index = self.inst.topology.machine_index
        raw = getattr(placement, "tasks", None)
        counts: dict[str, int] = {}
        ps_counts: dict[str, int] = {}
        if isinstance(raw, Mapping):
            for h, pair in raw.items():
                if h in index and isinstance(pair, (tuple, list)) and len(pair) == 2:
                    if (w := _count(pair[0])) > 0:
                        counts[h] = w
                    if (s := _count(pair[1])) > 0:
                        ps_counts[h] = s
        planned = sum(counts.values())
        if planned == 0:
            return None, None  # the plan keeps this job idle
        machines = list(counts)
        if self.inst.topology.typed:
            counts = self._one_type(job, counts)
            planned = sum(counts.values()) or planned
        workers = min(max(planned, job.min_workers), job.max_workers)
        domain = getattr(placement, "domain", None)
        if not self.residual.is_node(domain):
            domain = self.inst.topology.lca(counts or machines)
        inside = set(self.residual.machines_below(domain))
        kept = {h: w for h, w in counts.items() if h in inside}
        layout = _resize(kept, workers) if kept else {}
        ps = {h: n for h, n in ps_counts.items() if h in inside} if layout == counts else {}
        tasks = None
        if layout and sum(ps.values()) == job.min_ps(workers):  # the plan's own PSs, when right
            as_planned = {h: (layout.get(h, 0), ps.get(h, 0)) for h in {*layout, *ps}
                          if layout.get(h, 0) or ps.get(h, 0)}
            tasks = as_planned if self.residual.fits(job, as_planned) else None
        if tasks is None and layout:
            tasks = self.residual.beside(job, layout, within=domain)
        if tasks is None and defer:
            return _LATER, domain
        if tasks is None:
            tasks = self._best(job, workers, domain, layout)
        if tasks is None:
            tasks = self._best(job, workers, None, layout)
        return tasks, domain

    def _one_type(self, job: Job, counts: dict[str, int]) -> dict[str, int]:
        """Planned workers on the type (one the job runs on) holding most; ties: the faster rate."""
        machines, index = self.inst.topology.machines, self.inst.topology.machine_index
        by_type: dict[str | None, dict[str, int]] = {}
        for h, w in counts.items():
            if job.runs_on(g := machines[index[h]].gpu_type):
                by_type.setdefault(g, {})[h] = w
        return max(by_type.values(), default={}, key=lambda c: (
            sum(c.values()), job_rate(self.inst, job, {h: (w, 0) for h, w in c.items()})))

    def _local_if_as_soon(self, job: Job, tasks: TaskDict, domain: str) -> TaskDict:
        """Rules a and b with ``follow_sizes``: tasks over several machines give way to the
        previous task set, else one machine of the plan's domain, else of the cluster, that
        finishes the job in no more slots, restarts counted (module docstring)."""
        soon, most = self._slots_to_finish(job, tasks), workers_of(tasks)
        prev = self._previous(job)
        if prev and workers_of(prev) <= most and self.residual.fits(job, prev) and \
                self._slots_to_finish(job, prev) <= soon:
            return dict(prev)
        for within in (domain, None):
            local = self.residual.best_local(job, most, within=within)
            if local is not None and self._slots_to_finish(job, local) <= soon:
                return local
        return tasks

    # ----- rule c: trim; placing ---------------------------------------------------------
    def _trim(self, job: Job, tasks: TaskDict) -> TaskDict:
        w = workers_of(tasks)
        if not self.trim or w <= job.min_workers or not self._completes(job, tasks):
            return tasks
        lo, hi = job.min_workers, w
        while lo < hi:  # fewest workers that still complete this slot
            mid = (lo + hi) // 2
            if self._completes(job, shrink(job, tasks, mid)):
                hi = mid
            else:
                lo = mid + 1
        return shrink(job, tasks, hi) if hi < w else tasks

    def _commit(self, job: Job, tasks: TaskDict) -> None:
        tasks = self._trim(job, tasks)
        self.residual.place(job, tasks)
        self.placed[job.id] = tasks

    # ----- rule d: fill ------------------------------------------------------------------
    def _fill(self, active: list[Job]) -> None:
        """Previous task sets are reserved first (in order), so that a job starting now is
        packed around them; it evicts lower-priority reservations only if it cannot start
        otherwise. Then each job in order keeps or grows its tasks, or starts."""
        reserved: dict[str, TaskDict] = {}
        for job in active:
            prev = self._previous(job)
            if job.id not in self.placed and prev and self.residual.try_place(job, prev):
                reserved[job.id] = dict(prev)
        sized = set(self.placed) if self.follow_sizes else set()
        for k, job in enumerate(active):
            if job.id in reserved:
                kept = reserved.pop(job.id)
                if self._stays(job, kept):
                    self.placed[job.id] = kept
                else:
                    self.residual.remove(job.id)
                    self._settle(job, kept)
            elif job.id in sized:
                continue  # sized by the intent: grown only with what is left at the end
            elif job.id in self.placed:
                if not self._stays(job, self.placed[job.id]):
                    self.residual.remove(job.id)
                    self._settle(job, self.placed.pop(job.id))
            else:
                self._start(job, reserved, active[k + 1:])
        for job in active:
            if job.id in sized and not self._stays(job, self.placed[job.id], back=True):
                self.residual.remove(job.id)
                self._settle(job, self.placed.pop(job.id), back=True)

    def _stays(self, job: Job, held: TaskDict, back: bool = False) -> bool:
        """Would :meth:`_settle` commit ``held`` (placed at the moment) unchanged? Then it
        stays placed: the answer without taking it out and placing it again."""
        if workers_of(held) < job.max_workers or self._trim(job, held) is not held:
            return False
        prev = self._previous(job) if back else None
        return not (prev and self._gains(job, held, prev))

    def _settle(self, job: Job, current: TaskDict, back: bool = False) -> None:
        """Keep ``current`` (not placed at the moment) or grow it if that finishes sooner;
        with ``back``, first go back to the previous task set (no restart) if it fits and
        finishes sooner."""
        prev = self._previous(job) if back else None
        if prev and self.residual.fits(job, prev) and self._gains(job, current, prev):
            current = dict(prev)
        if workers_of(current) < job.max_workers:
            grown = self._best(job, job.max_workers, None, current)
            if grown and self._gains(job, current, grown):
                current = grown
        self._commit(job, current)

    def _start(self, job: Job, reserved: dict[str, TaskDict], later: list[Job]) -> None:
        """Start (or move) a job that holds nothing; evict later jobs' reservations only if
        it cannot start otherwise (they then look for room in their own turn)."""
        prev = self._previous(job) or {}
        tasks = self._best(job, job.max_workers, None, prev)
        lower = [j for j in later if j.id in reserved] if tasks is None and reserved else []
        if lower:
            state = self.residual.snapshot()
            for j in lower:
                self.residual.remove(j.id)
            tasks = self._best(job, job.max_workers, None, prev)
            if tasks is None:
                self.residual.restore(state)
                return
            self._commit(job, tasks)
            for j in lower:  # re-reserve those that still fit, in order
                if not self.residual.try_place(j, reserved[j.id]):
                    del reserved[j.id]
            return
        if tasks is not None:
            self._commit(job, tasks)
