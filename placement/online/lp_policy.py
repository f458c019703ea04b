"""The project's own online policy: re-solve the placement LP over a look-ahead window
every slot, round it, and apply the slot rules to the first slot.

Per slot t, one straight path:
0. *Shares* (below ``oracle``; ``share_caps``): each elastic job whose speedup bends
   (:func:`~placement.online.sharing.bends`: the exponent of its rates fitted as W ** p
   below :data:`~placement.online.sharing.LINEAR_BEND`) may have at most the worker count
   Pollux's objective gives it (:mod:`placement.online.sharing`: the power mean, p = -1, of
   the jobs' speedups over their fair share, restarts discounted; on a cluster of several
   GPU types, Sia's: each job one (type, count) under Sia's objective, each type its own
   capacity), so the window, which orders by sizes it does not know, shares the cluster as
   that objective does where no size tells the jobs apart and a wider job wastes workers;
   jobs whose speedup is linear are left to the window (running the shortest first is then
   optimal). The view the later steps see has those caps, never below the workers a job
   runs on (the window may still shrink it, weighing the restart), and the type left to the
   window. With several partitions (step 1) each takes its share on its own machines
   (docs/online.md, "Shares").
1. *Partitions* (:mod:`placement.online.partitions`, POP): more than ``jobs_per_partition``
   active jobs are split, with the racks, into independent groups.
2. *Candidate domains* (:mod:`placement.online.candidates`): the few domains per job the
   window model may use (current domain, roomiest machines and subtrees).
3. *Window chain* per partition (:class:`placement.chain.Chain`, run in a thread pool, or
   on any executor such as a Dask cluster: :func:`solve_partition`):
   the configuration model (:mod:`placement.formulation.configuration`: per job-slot one
   choice of worker count and domain, each at its own rate, so the LP sizes the jobs;
   ``model="aggregated"`` is the older one-count-per-domain model) over slots
   t..t+window-1 (in time buckets of 1, 1, 2, 4, ... slots: ``buckets="geometric"``,
   the default; slot t is a bucket of its own) with each job's remaining work as
   reported by the cluster, restricted to those domains, the work left after the window
   also paying the queueing charge
   (:mod:`placement.online.queue_charge`), and a running job's other worker counts and
   types paying its restart, spread over how long it keeps a configuration
   (:func:`running_configurations`); its LP; the most likely rounding (the
   deterministic member of the rounding family of ``solvers.rounding``; one trial is what
   a per-slot decision affords); decoded to the partition's intent.
4. *Slot rules* (:func:`placement.slots.rules.decide_slot`) decide slot t from the intents
   of all partitions at once: each intent normalised and fitted in its domain, kept
   unchanged when a change would not finish the job sooner despite its restart cost,
   trimmed when the job completes, and the capacity left filled shortest remaining work
   first.
5. *Select* (up to ``select_limit`` active jobs): the decision of step 4 and the one the
   slot rules make alone are each played forward over the window with the slot rules
   (the LP's intent for the later slots, or none), progress by MODEL.md, and the one
   whose window cost is lower is taken — each job's weighted completion time if it
   completes in the window, else the window's end plus its remaining work at full local
   speed (MODEL.md's unfinished charge) plus the queueing charge. This is how the offline
   chain picks among rounding trials, done per slot.

GPU types (MODEL.md 8): the window's configurations carry their workers' type, so the LP
chooses each job's type (docs/formulation.md, 'GPU types'); step 2 offers every type a job
runs on, step 1 strands no job in a partition without one, and the intents decoded keep each
gang on one type.

The scheduler (:class:`placement.online.scheduler.OnlineScheduler`) checks each decision
against MODEL.md before it is applied. ``last_timings`` holds the seconds of each step of the last decision
(``formulate`` and ``lp`` summed over partitions; ``candidates`` the time spent finding
candidate domains and building the chains, partition by partition, each partition's
chain started as soon as it is built; ``solve`` the wall time from the last partition's
start to the last result, including any transfer to and from the executor).

Partitions elsewhere (``executor=``): each partition's whole job, the chain forward and
its first candidate inverted, is :func:`solve_partition`, a top-level function of
picklable arguments — the cluster (the view's instance without its jobs), the partition's
jobs and its chain (the window model's inputs) — returning a small
:class:`PartitionPlan`, never the problem or the decoder. Results are taken in partition
order, so the decision does not depend on which partition finishes first, nor on where
each ran (docs/online.md, "Partitions on a Dask cluster").
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement.chain import Chain, ChainStop, Formulate, Round, SolveLP, Trace
from placement.executors import InProcess
from placement.formulation.aggregated import formulate_aggregated
from placement.formulation.configuration import BUCKETS, formulate_configuration
from placement.model.instance import Instance, Job
from placement.model.progress import gpu_types
from placement.model.intent import JobIntent
from placement.online.candidates import candidate_domains_each
from placement.online.partitions import partitions
from placement.online.policy import TaskDict, View
from placement.online.queue_charge import leftover, queue_delay, queue_extra
from placement.online.sharing import capped_view, shares
from placement.slots.rules import decide_slot

#: the window models the policy can use, by name (module docstring, step 3)
WINDOW_MODELS = {"aggregated": formulate_aggregated, "configuration": formulate_configuration}

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionPlan:
    """What one partition's window chain sends back to the deciding process: only what
    :meth:`LPRoundingPolicy.decide` reads, so a remote run returns kilobytes."""

    slots: list[dict[str, JobIntent]]   # the partition's intent for slots start..end-1
    timings: dict[str, float]           # the trace's formulate and lp seconds
    objective: float | None             # the window LP's value; None when the chain stopped
    stop: str | None                    # why the chain stopped (a failed LP), else None


def solve_partition(chain: Chain, cluster: Instance, jobs: tuple[Job, ...], start: int, end: int) -> PartitionPlan:
    """One partition's whole job wherever it runs (a thread here, a Dask worker there):
    the window chain forward on ``cluster`` holding only the partition's jobs, then its
    first candidate back to an intent, which needs the decoder the chain just built (its
    inverse data, which never leaves the worker), so both happen in the same place. A failed
    LP is returned, not raised, so the other partitions still decide."""
    try:
        forward = chain.apply(dataclasses.replace(cluster, jobs=jobs))
    except ChainStop as stop:
        return PartitionPlan(slots=[], timings=_seconds(stop.trace), objective=None, stop=str(stop))
    intent = chain.invert(forward.data[0], forward)
    return PartitionPlan(slots=intent.slots[start:end], timings=_seconds(forward.trace),
                         objective=forward.trace.result.objective, stop=None)


def _seconds(trace: Trace) -> dict[str, float]:
    return {key: trace.timings.get(key, 0.0) for key in ("formulate", "lp")}



class LPRoundingPolicy:
    """Window LP + rounding + slot rules, re-optimised every slot (module docstring)."""

    name = "lp-rounding"

    def __init__(self, *, window: int = 4, local_candidates: int = 3, spread_candidates: int = 2,
                 jobs_per_partition: int = 125, time_limit: float | None = 5.0, threads: int | None = None,
                 select_limit: int = 500, queue_charge: bool = True, model: str = "configuration",
                 buckets: str = "geometric", executor: Any = None, share_caps: bool = True):
        """``share_caps``: below ``oracle``, may each elastic job whose speedup bends have at
        most its power-mean share of workers (:mod:`placement.online.sharing`; module
        docstring, step 0)? False: the window alone (``lp-no-share``).
        ``executor``: where the partitions' window chains run. None: a pool of ``threads``
        threads in this process; else a :class:`placement.online.partition_pool.PartitionPool`
        (worker processes on this machine), a ``concurrent.futures.Executor`` (``submit``)
        or a ``dask.distributed.Client``, which the caller opens and closes. Decisions are
        the same wherever the chains run."""
        if window < 1 or local_candidates < 0 or spread_candidates < 0 or jobs_per_partition < 1:
            raise ValueError("window and jobs_per_partition must be >= 1, candidate counts >= 0")
        if model not in WINDOW_MODELS:
            raise ValueError(f"model must be one of {', '.join(WINDOW_MODELS)}, got {model!r}")
        if buckets not in BUCKETS:
            raise ValueError(f"buckets must be one of {', '.join(BUCKETS)}, got {buckets!r}")
        self.model = model
        #: the configuration model's time buckets (formulate_configuration)
        self.buckets = buckets
        #: the configuration model's worker counts are the LP's decision (slot_rules, follow_sizes)
        self.follow_sizes = model == "configuration"
        self.window, self.local_k, self.spread_k = window, local_candidates, spread_candidates
        self.jobs_per_partition, self.time_limit = jobs_per_partition, time_limit
        self.threads = max(1, threads if threads is not None else min(2, os.cpu_count() or 1))
        self.select_limit = select_limit
        self.queue_charge = queue_charge
        self.executor = executor
        self.share_caps = share_caps
        self.last_timings: dict[str, float] = {}
        #: sum of the window LP values of the last decision (None if a partition's LP failed)
        self.last_lp_value: float | None = None

    def decide(self, view: View) -> dict[str, TaskDict]:
        clock = time.perf_counter()
        # step 1 before step 0: the caps are taken on the partitions the windows then solve
        parts = partitions(view, self.jobs_per_partition) if view.jobs else []
        timings = {"candidates": time.perf_counter() - clock, "formulate": 0.0, "lp": 0.0}
        if self._shares(view):
            clock = time.perf_counter()
            view = capped_view(view, shares(view, parts))
            timings["share"] = time.perf_counter() - clock
        inst, t = view.instance, view.t
        plans: dict[int, dict] = {}
        self.last_lp_value = 0.0
        end = t + 1
        if view.jobs:
            clock = time.perf_counter()
            end = min(inst.horizon, t + max(1, min(self.window, view.lookahead)))
            each = candidate_domains_each(view, parts, local_k=self.local_k, spread_k=self.spread_k)
            # step 5 plays the whole window forward; without it only slot t's intent is read
            read = end if len(view.jobs) <= self.select_limit else t + 1
            timings["candidates"] += time.perf_counter() - clock
            with self._runner(dataclasses.replace(inst, jobs=()), len(parts), t) as submit:
                handles = []
                for jobs, machines in parts:  # each partition's chain starts as soon as it is built
                    clock = time.perf_counter()
                    domains, later = next(each)
                    chain = self._window_chain(view, jobs, machines, domains, later, end, read)
                    # the partition's jobs in the instance's order: the same model, column for column
                    members = tuple(inst.jobs[i] for i in sorted(inst.job_index[j] for j in jobs))
                    timings["candidates"] += time.perf_counter() - clock
                    handles.append(submit(chain, members, read))
                clock = time.perf_counter()
                runs = [handle.result() for handle in handles]  # in partition order, never completion order
            timings["solve"] = time.perf_counter() - clock
            for run in runs:
                for key in ("formulate", "lp"):
                    timings[key] += run.timings[key]
                if run.stop is not None:
                    self.last_lp_value = None
                    logger.warning("slot %d: window %s; these jobs follow the slot rules alone", t, run.stop)
                    continue
                if self.last_lp_value is not None:
                    self.last_lp_value += run.objective
                for slot, intents in zip(range(t, end), run.slots):
                    plans.setdefault(slot, {}).update(intents)
        clock = time.perf_counter()
        placed = decide_slot(inst, view.tracker(), t, plans.get(t, {}), fill=True, follow_sizes=self.follow_sizes,
                             trim=view.lengths_known)
        timings["slot rules"] = time.perf_counter() - clock
        if plans and len(view.jobs) <= self.select_limit and end > t + 1:
            clock = time.perf_counter()
            alone = decide_slot(inst, view.tracker(), t, {}, fill=True, trim=view.lengths_known)
            if alone != placed and self._window_cost(view, alone, {}, end) < self._window_cost(view, placed, plans, end):
                placed = alone
            timings["select"] = time.perf_counter() - clock
        timings["partitions"] = len(parts)
        self.last_timings = timings
        return placed

    def _shares(self, view: View) -> bool:
        """Does step 0 cap this decision's bent jobs at their shares?"""
        return self.share_caps and not view.lengths_known and bool(view.jobs)

    @contextmanager
    def _runner(self, cluster: Instance, count: int, start: int) -> Iterator[Callable]:
        """``submit(chain, jobs, end)``: the partition's :func:`solve_partition` started where
        ``executor`` says, returning something with ``result()``. A PartitionPool or a Dask
        client gets the cluster once per decision (shared, scattered), not per partition."""
        if hasattr(self.executor, "submit_partition"):  # a PartitionPool
            pool = self.executor
            pool.share(cluster)
            yield lambda chain, jobs, end: pool.submit_partition(solve_partition, chain, jobs, start, end)
        elif _is_dask_client(self.executor):
            client = self.executor
            shared = client.scatter(cluster, hash=False)
            yield lambda chain, jobs, end: client.submit(solve_partition, chain, shared, jobs, start, end, pure=False)
        elif self.executor is not None:
            yield lambda chain, jobs, end: self.executor.submit(solve_partition, chain, cluster, jobs, start, end)
        elif self.threads == 1 or count == 1:
            here = InProcess()
            yield lambda chain, jobs, end: here.submit(solve_partition, chain, cluster, jobs, start, end)
        else:
            with ThreadPoolExecutor(self.threads) as threads:
                yield lambda chain, jobs, end: threads.submit(solve_partition, chain, cluster, jobs, start, end)

    def _window_cost(self, view: View, first: dict[str, TaskDict], plans: dict[int, dict], end: int) -> float:
        """Weighted completion times over the window if slot t takes ``first`` and the
        later slots follow ``plans`` through the slot rules (module docstring, step 5)."""
        inst, dt = view.instance, view.instance.slot_seconds
        tracker = view.tracker()
        tracker.advance(view.t, first)
        for slot in range(view.t + 1, end):
            tracker.advance(slot, decide_slot(inst, tracker, slot, plans.get(slot, {}), fill=True,
                                              follow_sizes=self.follow_sizes, trim=view.lengths_known))
        cost = 0.0
        left: list[Job] = []
        for job_id, state in view.jobs.items():
            job = state.job
            if job_id in tracker.completed:
                cost += job.weight * (tracker.completed[job_id] + 1) * dt
            else:
                left.append(job)
        if not left:
            return cost
        own, load = leftover(inst, left, [tracker.remaining(job) for job in left])
        weight = np.array([job.weight for job in left], dtype=float)
        after = queue_delay(load, weight) if self.queue_charge else 0.0
        return cost + float((weight * (end * dt + own + after)).sum())

    def _window_chain(self, view: View, jobs: list[str], machines: np.ndarray, domains: dict[str, set[str]],
                      later: dict[str, set[str]], end: int, read: int) -> Chain:
        """The chain of one partition's window (module docstring, steps 3 and 4): the
        window model restricted to the candidate domains, its LP (without presolve: a
        small LP, solved every slot), the most likely rounding; inverted, it gives the
        partition's intent for slots t..read-1."""
        inst = view.instance
        remaining = {j: view.jobs[j].remaining for j in jobs}
        extra = None
        if self.queue_charge:
            members = [view.jobs[j].job for j in jobs if remaining[j] > 0]
            own, load = leftover(inst, members, [remaining[job.id] for job in members], machines)
            extra = dict(zip((job.id for job in members),
                             queue_extra(load, np.array([job.weight for job in members], dtype=float))))
        options = ({"counts": "powers", "buckets": self.buckets, "decode_until": read,
                    "running": running_configurations(view, jobs)}
                   if self.model == "configuration" else {})
        window = Formulate(WINDOW_MODELS[self.model], start=view.t, end=end, remaining=remaining,
                           domains={j: domains[j] for j in jobs}, later_domains={j: later[j] for j in jobs},
                           overflow_extra=extra, **options)
        return Chain([window, SolveLP(self.time_limit, presolve=False), Round()])


def running_configurations(view: View, jobs: list[str]) -> dict[str, tuple[int, str | None, float]]:
    """Per job of ``jobs`` that ran last slot, its worker count and GPU type then and how long
    it keeps a configuration (its :attr:`~placement.online.policy.JobState.hold_seconds`, at
    least a slot): what the window model resizes only at a restart's cost
    (:func:`placement.formulation.configuration.restart_discount`)."""
    inst = view.instance
    out = {}
    for j in jobs:
        state = view.jobs[j]
        workers = sum(w for w, _ in state.previous.values())
        if workers and all(h in inst.topology.machine_index for h in state.previous):
            kinds = gpu_types(inst, state.previous)   # one: the scheduler refuses mixed gangs
            if len(kinds) == 1:
                out[j] = (workers, kinds.pop(), max(state.hold_seconds, inst.slot_seconds))
    return out


def _is_dask_client(executor: Any) -> bool:
    """A ``dask.distributed.Client``: its ``submit`` needs ``pure=False`` (else it hashes
    the arguments, and equal ones share a task) and it can scatter and gather."""
    return all(hasattr(executor, name) for name in ("scatter", "gather", "submit"))


class LPAggregatedPolicy(LPRoundingPolicy):
    """The ablation of the window model: the same policy on the aggregated model
    (``model="aggregated"``: one worker count per domain at a rate linear in it), whose LP
    orders and places jobs but cannot size them under concave speedups."""

    name = "lp-aggregated"

    def __init__(self, **options):
        super().__init__(model="aggregated", **options)


class LPNoSharePolicy(LPRoundingPolicy):
    """``lp-rounding`` with ``share_caps=False``: the window alone at every information
    level, as before the share was the default; the ablation that shows what it earns."""

    name = "lp-no-share"

    def __init__(self, **options):
        super().__init__(share_caps=False, **options)
