"""The simulation loop: a job stream played through an :class:`OnlineScheduler`.

Slot by slot: apply the cluster events of the slot (machine failure, repair or growth, a
restart of the manager from its JSON checkpoint), submit the jobs that arrive, time
``step(t)``, let the cluster run the allocations, report each job's true progress and
finish the jobs that completed. The cluster's truth is MODEL.md section 4 computed with a
:class:`~placement.model.progress.ProgressTracker`; with ``progress_noise`` = p > 0 each job's
mini-batches in a slot are the model's times (1 - p u), u uniform on [0, 1) from a
generator seeded with ``seed``: the truth lags the model, as a real cluster's does.

The run stops when every job has completed, or after ``horizon`` slots (default
:func:`default_horizon`, cut at ``PLACEMENT_MAX_HORIZON``: docs/limits.md; a larger
``horizon`` or ``lookahead`` is refused). The executed allocations form a schedule over
an instance of all jobs whose horizon is the number of slots simulated and whose cluster
is every machine that took part (removed ones included). Without noise and machine events that
schedule passes :func:`placement.model.evaluate.validate` (checked; a failure is a bug) and its
MODEL.md score equals the simulated truth. With noise the model thinks jobs complete
before they do, so the executed schedule may break rule 2 and its score differs from the
truth: the result keeps both, and the violations.
"""
from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping

import numpy as np

from placement.model import limits
from placement.model.evaluate import evaluate
from placement.model.instance import COMPLETE, Instance, InstanceError, Job
from placement.online.policy import CommittingPolicy, Policy, TaskDict
from placement.online.knowledge import INFORMATION, submitted, user_estimate
from placement.online.scheduler import OnlineScheduler
from placement.model.progress import ProgressTracker
from placement.model.schedule import Allocation, Schedule
from placement.simulate.events import (MACHINE_EVENTS, AddMachine, Event, RemoveMachine,
                                       RepairMachine, Restart)
from placement.simulate.result import SimulationResult
from placement.model.topology import Link, Machine, Topology

__all__ = ["HORIZON_FACTOR", "default_horizon", "simulate"]

logger = logging.getLogger(__name__)

#: Slots of slack per slot of the estimated work in the default horizon.
HORIZON_FACTOR = 4


# ----- the horizon ------------------------------------------------------------------------------
def default_horizon(jobs: Iterable[Job], topology: Topology, slot_seconds: float,
                    resources: Iterable[str]) -> int:
    """A generous cap: last arrival + HORIZON_FACTOR x (the slots the whole cluster needs
    for all the work, on its busiest resource, + the longest job alone at max_workers),
    every job at its slowest per-batch time."""
    jobs = list(jobs)
    if not jobs:
        return 1
    resources = tuple(resources)
    cap = np.array([[m.capacity.get(r, 0) for r in resources] for m in topology.machines],
                   dtype=float).sum(axis=0)
    slowest_gbps = min([m.local_gbps for m in topology.machines])
    demand = np.zeros(len(resources))
    longest = 0
    for j in jobs:
        if j.speed is not None:  # per-worker time of the slower class at full size, slowest type (MODEL.md 8)
            types = sorted(j.speed.types) if j.speed.types is not None else [None]
            theta = j.max_workers / min(j.speed.rate(j.max_workers, m, g) for g in types for m in (1, 2))
        else:
            theta = max(j.batch_time(slowest_gbps), j.batch_time(j.worker_gbps))
        seconds = j.work_batches * theta  # worker-seconds
        per_worker = np.array([j.worker.get(r, 0) + j.ps.get(r, 0) * j.min_ps(j.max_workers) / j.max_workers
                               for r in resources])
        demand += seconds * per_worker
        longest = max(longest, math.ceil(seconds / j.max_workers / slot_seconds) + 1)
    busy = max((d / c for d, c in zip(demand, cap) if c > 0), default=0.0)
    return max(j.arrival for j in jobs) + HORIZON_FACTOR * (math.ceil(busy / slot_seconds) + longest) + 1


# ----- the run ---------------------------------------------------------------------------------
def simulate(instance_or_jobs: Instance | Iterable[Job], *, topology: Topology | None = None,
             policy: Policy | CommittingPolicy, lookahead: int = 8, mode: str = "reoptimise",
             slot_seconds: float | None = None, resources: Iterable[str] | None = None,
             horizon: int | None = None, progress_noise: float = 0.0, seed: int = 0,
             progress_bar: bool = False, events: Iterable[Event] = (), information: str = "oracle",
             estimate_error: float = 0.0) -> SimulationResult:
    """Play a job stream through an OnlineScheduler with ``policy`` (module docstring).

    From an Instance, ``topology``, ``slot_seconds`` and ``resources`` default to its own
    (its horizon is not used: the run goes on until every job completes or ``horizon``
    slots have passed). From a list of jobs, ``topology`` and ``slot_seconds`` are required
    and ``resources`` defaults to gpu, cpu, mem. ``information``: what the scheduler is told
    of job lengths (:mod:`placement.online.knowledge`); below ``oracle`` it is submitted each
    job without its true size, and at ``estimate`` with a user's estimate, the true size
    times exp(``estimate_error`` x N(0, 1)) drawn from a generator seeded with ``seed``."""
    if information not in INFORMATION:
        raise ValueError(f"information must be one of {', '.join(INFORMATION)}, got {information!r}")
    if not (isinstance(estimate_error, (int, float)) and math.isfinite(estimate_error) and estimate_error >= 0):
        raise ValueError(f"estimate_error must be a finite number >= 0, got {estimate_error!r}")
    if isinstance(instance_or_jobs, Instance):
        inst = instance_or_jobs
        jobs = list(inst.jobs)
        topology = topology or inst.topology
        slot_seconds = slot_seconds if slot_seconds is not None else inst.slot_seconds
        resources = tuple(resources) if resources is not None else inst.resources
        name = inst.name
    else:
        jobs = list(instance_or_jobs)
        if topology is None or slot_seconds is None:
            raise ValueError("simulating a list of jobs needs topology= and slot_seconds=")
        resources = tuple(resources) if resources is not None else ("gpu", "cpu", "mem")
        name = "simulation"
    if not (isinstance(progress_noise, (int, float)) and 0 <= progress_noise < 1):
        raise ValueError(f"progress_noise must be in [0, 1), got {progress_noise!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not (isinstance(slot_seconds, (int, float)) and math.isfinite(slot_seconds) and slot_seconds > 0):
        raise ValueError(f"slot_seconds must be a finite number > 0, got {slot_seconds!r}")
    reason = limits.SLOT.check(slot_seconds, True)
    if reason:
        raise ValueError(f"slot_seconds {reason}")
    most = limits.value(limits.HORIZON)
    if horizon is None:
        cap = min(default_horizon(jobs, topology, slot_seconds, resources), most)
    else:
        cap = horizon
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    for what, n in (("horizon", cap), ("lookahead", lookahead)):
        if isinstance(n, (int, np.integer)) and n > most:
            raise ValueError(f"{what}: {limits.too_many(limits.HORIZON, int(n))}")
    if jobs and max(j.arrival for j in jobs) >= cap:
        raise ValueError(f"horizon {cap} ends before the last arrival (slot "
                         f"{max(j.arrival for j in jobs)})")
    run = _Run(jobs, topology, resources, slot_seconds, int(cap), name, policy, lookahead, mode,
               float(progress_noise), int(seed), tuple(events), information, float(estimate_error))
    run.run(progress_bar)
    return run.result()


class _Cluster:
    """Every machine that ever took part (removed ones stay), for the executed schedule's
    instance, and the definitions needed to repair a removed machine."""

    def __init__(self, topology: Topology):
        self.machines = {m.id: m for m in topology.machines}
        self.switches = topology.switches
        self.links = {frozenset((l.a, l.b)): l for l in topology.links}
        self.root = topology.root
        self.uplink = {m: l for l in topology.links for m in (l.a, l.b) if m in self.machines}

    def add(self, machine: Machine, parent: str, gbps: float) -> None:
        old = self.uplink.pop(machine.id, None)
        if old is not None:
            self.links.pop(frozenset((old.a, old.b)), None)
        link = Link(machine.id, parent, gbps)
        self.machines[machine.id] = machine
        self.links[frozenset((link.a, link.b))] = link
        self.uplink[machine.id] = link

    def topology(self) -> Topology:
        return Topology(tuple(self.machines.values()), self.switches, tuple(self.links.values()),
                        self.root)


class _Run:
    """One simulation's state, advanced slot by slot."""

    def __init__(self, jobs: list[Job], topology: Topology, resources: tuple[str, ...],
                 slot_seconds: float, cap: int, name: str, policy: Policy | CommittingPolicy,
                 lookahead: int, mode: str, noise: float, seed: int, events: tuple[Event, ...],
                 information: str = "oracle", estimate_error: float = 0.0):
        self.jobs = {j.id: j for j in jobs}
        if len(self.jobs) != len(jobs):
            raise ValueError("job ids must be unique")
        self.arriving: dict[int, list[Job]] = {}
        for j in sorted(jobs, key=lambda j: j.arrival):
            self.arriving.setdefault(j.arrival, []).append(j)
        self.events: dict[int, list[Event]] = {}
        for e in events:
            if not isinstance(e, (*MACHINE_EVENTS, Restart)):
                raise ValueError(f"unknown event {e!r}: expected RemoveMachine, RepairMachine, "
                                 "AddMachine or Restart")
            self.events.setdefault(e.t, []).append(e)
        self.all_events = events
        self.resources, self.slot_seconds, self.cap, self.name = resources, slot_seconds, cap, name
        self.policy, self.noise, self.seed = policy, noise, seed
        self.rng = np.random.default_rng(seed)
        self.cluster = _Cluster(topology)
        self.sched = OnlineScheduler(topology, resources=resources, policy=policy, lookahead=lookahead,
                                     slot_seconds=slot_seconds, mode=mode, information=information)
        self.estimate_error = estimate_error
        self.estimates = ({j.id: user_estimate(j.work_batches, j.id, estimate_error, seed) for j in jobs}
                          if information == "estimate" else {})
        self.model = ProgressTracker(self._instance(cap))   # MODEL.md progress of the executed tasks
        self.truth: dict[str, float] = {}
        self.completion: dict[str, int] = {}
        self.allocations: dict[int, dict[str, TaskDict]] = {}
        self.decision: list[float] = []
        self.util: list[np.ndarray] = []
        self.slots = 0

    def _instance(self, horizon: int) -> Instance:
        try:
            return Instance(self.slot_seconds, max(horizon, 1), self.resources, self.cluster.topology(),
                            tuple(self.jobs.values()), name=self.name)
        except InstanceError as exc:
            raise ValueError(f"the job stream does not fit the cluster: {exc}") from None

    def run(self, progress_bar: bool) -> None:
        from tqdm import tqdm

        with tqdm(total=self.cap, disable=not progress_bar, unit="slot",
                  desc=getattr(self.policy, "name", "simulate")) as bar:
            for t in range(self.cap):
                if len(self.completion) == len(self.jobs):
                    break
                self._apply_events(t)
                for job in self.arriving.get(t, ()):
                    self._submit(job)
                self._slot(t)
                self.slots = t + 1
                bar.update(1)

    def _submit(self, job: Job) -> None:
        """Submit ``job`` with what the scheduler may know: below ``oracle`` its true size stays
        here (the job is submitted with its estimate, or 1 batch, in its place)."""
        if self.sched.information == "oracle":
            self.sched.submit(job)
            return
        estimate = self.estimates.get(job.id)
        self.sched.submit(submitted(job, estimate), estimate=estimate)

    def _apply_events(self, t: int) -> None:
        for e in self.events.get(t, ()):
            logger.info("slot %d: event %s", t, e)
            if isinstance(e, RemoveMachine):
                self.sched.remove_machine(e.machine)
            elif isinstance(e, RepairMachine):
                if e.machine in self.sched.topology.machine_index or e.machine not in self.cluster.machines:
                    raise ValueError(f"event {e}: {e.machine!r} is not a removed machine")
                link = self.cluster.uplink[e.machine]
                parent = link.b if link.a == e.machine else link.a
                self.sched.add_machine(self.cluster.machines[e.machine], parent, link.gbps)
            elif isinstance(e, AddMachine):
                self.sched.add_machine(e.machine, e.parent, e.gbps)
                self.cluster.add(e.machine, e.parent, e.gbps)
                self.model.instance = self._instance(self.cap)
            else:
                state = json.loads(json.dumps(self.sched.state()))
                self.sched = OnlineScheduler.from_state(state, self.policy)

    def _slot(self, t: int) -> None:
        start = time.perf_counter()
        placed = self.sched.step(t)
        self.decision.append(time.perf_counter() - start)
        self.allocations[t] = placed
        self._record_use(placed)
        for job_id, tasks in placed.items():
            done = self.model.would_do(self.jobs[job_id], tasks)
            if self.noise:
                done *= 1.0 - self.noise * self.rng.random()
            self.truth[job_id] = self.truth.get(job_id, 0.0) + done
        self.model.advance(t, placed)
        for job_id in placed:
            self.sched.report(job_id, self.truth[job_id])
            if self.truth[job_id] >= self.jobs[job_id].work_batches * COMPLETE:
                self.completion[job_id] = t
                self.sched.finish(job_id)

    def _record_use(self, placed: Mapping[str, TaskDict]) -> None:
        """Used / current capacity of each resource in this slot."""
        res = self.resources
        used = np.zeros(len(res))
        for job_id, tasks in placed.items():
            job = self.jobs[job_id]
            alpha = np.array([job.worker.get(r, 0) for r in res])
            beta = np.array([job.ps.get(r, 0) for r in res])
            for w, s in tasks.values():
                used += w * alpha + s * beta
        cap = np.array([[m.capacity.get(r, 0) for r in res] for m in self.sched.topology.machines],
                       dtype=float).sum(axis=0)
        self.util.append(np.divide(used, cap, out=np.zeros(len(res)), where=cap > 0))

    def result(self) -> SimulationResult:
        instance = self._instance(self.slots)
        schedule = Schedule.from_allocations(
            {t: [Allocation(j, h, w, s) for j, tasks in sorted(placed.items())
                 for h, (w, s) in sorted(tasks.items())] for t, placed in self.allocations.items()},
            instance=instance.name, solver=f"online:{getattr(self.policy, 'name', '?')}")
        violations, report = evaluate(instance, schedule)
        machine_events = any(isinstance(e, MACHINE_EVENTS) for e in self.all_events)
        if violations and not self.noise and not machine_events:
            raise RuntimeError(f"the simulation executed an invalid schedule ({len(violations)} "
                               f"violations); first: {violations[0]}")
        jct = {j: self._jct(instance, job) for j, job in self.jobs.items()}
        values = np.array(list(jct.values()) or [0.0])
        rejected, utility = self._admission()
        return SimulationResult(
            policy=getattr(self.policy, "name", type(self.policy).__name__), mode=self.sched.mode,
            slots=instance.horizon, horizon=self.cap, jct=jct,
            unfinished=tuple(j for j in self.jobs if j not in self.completion),
            weighted_jct=float(sum(self.jobs[j].weight * v for j, v in jct.items())),
            average_jct=float(values.mean()), p95_jct=float(np.percentile(values, 95)),
            makespan=max((self.jobs[j].arrival * self.slot_seconds + v for j, v in jct.items()),
                         default=0.0),
            reconfigurations=report.reconfigurations,
            utilisation={r: tuple(float(u[k]) for u in self.util) for k, r in enumerate(self.resources)},
            decision_seconds=tuple(self.decision), dropped=self.sched.drops_total,
            progress_noise=self.noise, seed=self.seed, events=tuple(self.all_events),
            information=self.sched.information, estimate_error=self.estimate_error,
            instance=instance, schedule=schedule, report=report, violations=tuple(violations),
            rejected=rejected, utility=utility)

    def _admission(self) -> tuple[tuple[str, ...] | None, dict[str, float] | None]:
        """What a policy with admission control reports: the jobs it rejected (its
        ``rejected`` attribute) and f_j(completion slot) of each admitted job that
        completed (its ``utility(job_id, slot)``); None for a policy without them."""
        out = getattr(self.policy, "rejected", None)
        rejected = None if out is None else tuple(j for j in self.jobs if j in out)
        utility_of = getattr(self.policy, "utility", None)
        if not callable(utility_of):
            return rejected, None
        utility = {}
        for j, slot in self.completion.items():
            u = utility_of(j, slot)
            if u is not None and j not in (rejected or ()):
                utility[j] = float(u)
        return rejected, utility

    def _jct(self, instance: Instance, job: Job) -> float:
        """MODEL.md section 4 on the truth: completion, or the charge for an unfinished job."""
        dt = self.slot_seconds
        if job.id in self.completion:
            return (self.completion[job.id] + 1) * dt - job.arrival * dt
        remaining = max(0.0, job.work_batches - self.truth.get(job.id, 0.0))
        return (instance.horizon - job.arrival) * dt + instance.unfinished_seconds(job, remaining)

