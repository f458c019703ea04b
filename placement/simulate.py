"""Trace-driven simulation: a job stream played through an :class:`OnlineScheduler`.

Slot by slot: apply the cluster events of the slot (machine failure, repair or growth, a
restart of the manager from its JSON checkpoint), submit the jobs that arrive, time
``step(t)``, let the cluster run the allocations, report each job's true progress and
finish the jobs that completed. The cluster's truth is MODEL.md section 4 computed with a
:class:`~placement.progress.ProgressTracker`; with ``progress_noise`` = p > 0 each job's
mini-batches in a slot are the model's times (1 - p u), u uniform on [0, 1) from a
generator seeded with ``seed``: the truth lags the model, as a real cluster's does.

The run stops when every job has completed, or after ``horizon`` slots (default
:func:`default_horizon`). The executed allocations form a schedule over an instance of
all jobs whose horizon is the number of slots simulated and whose cluster is every
machine that took part (removed ones included). Without noise and machine events that
schedule passes :func:`placement.evaluate.validate` (checked; a failure is a bug) and its
MODEL.md score equals the simulated truth. With noise the model thinks jobs complete
before they do, so the executed schedule may break rule 2 and its score differs from the
truth: the result keeps both, and the violations.
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from placement.evaluate import Report, Violation, evaluate
from placement.instance import COMPLETE, Instance, InstanceError, Job
from placement.online.policy import CommittingPolicy, Policy, TaskDict
from placement.online.scheduler import OnlineScheduler
from placement.progress import ProgressTracker
from placement.schedule import Allocation, Schedule
from placement.topology import Link, Machine, Topology

__all__ = ["AddMachine", "RemoveMachine", "RepairMachine", "Restart", "SimulationResult",
           "default_horizon", "parse_event", "plot_simulation", "simulate"]

logger = logging.getLogger(__name__)

#: Slots of slack per slot of the estimated work in the default horizon.
HORIZON_FACTOR = 4


# ----- cluster events ------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoveMachine:
    """Machine ``machine`` fails at the start of slot ``t``."""

    t: int
    machine: str

    def __str__(self) -> str:
        return f"{self.t}:remove:{self.machine}"


@dataclass(frozen=True)
class RepairMachine:
    """A machine removed earlier comes back at slot ``t``, as it was (same switch, link)."""

    t: int
    machine: str

    def __str__(self) -> str:
        return f"{self.t}:repair:{self.machine}"


@dataclass(frozen=True)
class AddMachine:
    """A new machine joins below switch ``parent`` with a ``gbps`` link at slot ``t``."""

    t: int
    machine: Machine
    parent: str
    gbps: float

    def __str__(self) -> str:
        return f"{self.t}:add:{self.machine.id}:{self.parent}:{self.gbps:g}"


@dataclass(frozen=True)
class Restart:
    """The cluster manager restarts at slot ``t``: the scheduler resumes from its JSON state."""

    t: int

    def __str__(self) -> str:
        return f"{self.t}:restart"


Event = Union[RemoveMachine, RepairMachine, AddMachine, Restart]
_MACHINE_EVENTS = (RemoveMachine, RepairMachine, AddMachine)


def parse_event(text: str) -> Event:
    """``T:remove:MACHINE``, ``T:repair:MACHINE`` or ``T:restart`` (the CLI's form)."""
    parts = text.split(":")
    kinds = {"remove": RemoveMachine, "repair": RepairMachine}
    if len(parts) >= 2 and parts[0].isdigit():
        t = int(parts[0])
        if len(parts) == 3 and parts[1] in kinds and parts[2]:
            return kinds[parts[1]](t, parts[2])
        if len(parts) == 2 and parts[1] == "restart":
            return Restart(t)
    raise ValueError(f"event {text!r}: expected T:remove:MACHINE, T:repair:MACHINE or T:restart "
                     "(T a slot number)")


# ----- the result ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SimulationResult:
    """What a simulation did and measured. JCTs, makespan and ``unfinished`` are the
    simulated truth; ``report`` is the MODEL.md score of the executed schedule (equal to
    the truth without progress noise)."""

    policy: str
    mode: str
    slots: int                                  # slots simulated = the schedule's horizon
    horizon: int                                # the cap the run was allowed
    jct: dict[str, float]                       # seconds per job (MODEL.md charge if unfinished)
    unfinished: tuple[str, ...]
    weighted_jct: float
    average_jct: float
    p95_jct: float
    makespan: float
    reconfigurations: int
    utilisation: dict[str, tuple[float, ...]]   # per resource, per slot: used / capacity then
    decision_seconds: tuple[float, ...]         # wall time of each step(t)
    dropped: int                                # policy decisions the scheduler refused
    progress_noise: float
    seed: int
    events: tuple[Event, ...]
    instance: Instance
    schedule: Schedule
    report: Report
    violations: tuple[Violation, ...]
    # Admission control (OASiS-like policies, which expose ``rejected`` and ``utility``):
    rejected: tuple[str, ...] | None = None     # jobs the policy rejected; None: it never rejects
    utility: dict[str, float] | None = None     # f_j(completion slot) of each admitted job that completed

    @property
    def admitted(self) -> tuple[str, ...]:
        """Jobs the policy did not reject (every job for a policy without admission control)."""
        out = set(self.rejected or ())
        return tuple(j for j in self.jct if j not in out)

    @property
    def acceptance_rate(self) -> float | None:
        """Admitted / submitted jobs; None for a policy without admission control."""
        if self.rejected is None:
            return None
        return len(self.admitted) / len(self.jct) if self.jct else 1.0

    @property
    def admitted_average_jct(self) -> float | None:
        """Mean JCT over the admitted jobs only (an admitted job still unfinished at the end
        carries MODEL.md's charge); None without admission control or with none admitted.
        ``average_jct`` is over every job, a rejected one charged the whole run."""
        if self.rejected is None or not self.admitted:
            return None
        return float(np.mean([self.jct[j] for j in self.admitted]))

    @property
    def admitted_utility(self) -> float | None:
        """The paper's objective for OASiS: sum of f_j(completion) over the admitted jobs
        that completed (the policy's own utility); None if the policy has none."""
        return None if self.utility is None else float(sum(self.utility.values()))

    @property
    def decision_time(self) -> dict[str, float]:
        """Median, 95th percentile and maximum of the per-slot decision time (seconds)."""
        d = np.array(self.decision_seconds or (0.0,))
        return {"median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
                "max": float(d.max())}

    def to_dict(self, *, schedule: bool = True) -> dict[str, Any]:
        """JSON-ready: metrics, MODEL.md report, violations and (optionally) the schedule."""
        out = {"policy": self.policy, "mode": self.mode, "instance": self.instance.name,
               "slots": self.slots, "horizon": self.horizon, "jobs": len(self.jct),
               "jct": dict(self.jct), "unfinished": list(self.unfinished),
               "weighted_jct": self.weighted_jct, "average_jct": self.average_jct,
               "p95_jct": self.p95_jct, "makespan": self.makespan,
               "reconfigurations": self.reconfigurations,
               "utilisation": {r: list(v) for r, v in self.utilisation.items()},
               "decision_time": self.decision_time,
               "decision_seconds": list(self.decision_seconds), "dropped": self.dropped,
               "progress_noise": self.progress_noise, "seed": self.seed,
               "events": [str(e) for e in self.events], "report": self.report.to_dict(),
               "violations": [v.to_dict() for v in self.violations],
               "rejected": None if self.rejected is None else list(self.rejected),
               "acceptance_rate": self.acceptance_rate,
               "admitted_average_jct": self.admitted_average_jct,
               "admitted_utility": self.admitted_utility,
               "utility": None if self.utility is None else dict(self.utility)}
        if schedule:
            out["schedule"] = self.schedule.to_dict()
        return out

    def summary(self) -> str:
        d = self.decision_time
        charged = (f", {len(self.rejected)} rejected jobs charged the whole run"
                   if self.rejected else "")
        admission = [] if self.rejected is None else [
            f"admitted          {len(self.admitted)} of {len(self.jct)} jobs "
            f"(acceptance rate {self.acceptance_rate:.3f}); their average JCT "
            f"{_g(self.admitted_average_jct)} s; total admitted utility {_g(self.admitted_utility)}"]
        return "\n".join([
            f"policy            {self.policy} ({self.mode})",
            f"jobs              {len(self.jct)} ({len(self.unfinished)} unfinished) in {self.slots} slots",
            f"average JCT       {self.average_jct:.6g} s (all jobs{charged}; p95 {self.p95_jct:.6g} s)",
            *admission,
            f"weighted JCT      {self.weighted_jct:.6g} s; MODEL.md score of the executed "
            f"schedule {self.report.objective:.6g} s",
            f"makespan          {self.makespan:.6g} s",
            f"reconfigurations  {self.reconfigurations}; dropped decisions {self.dropped}",
            f"decision time     median {d['median'] * 1e3:.3g} ms, p95 {d['p95'] * 1e3:.3g} ms, "
            f"max {d['max'] * 1e3:.3g} ms",
            f"violations        {len(self.violations)}"])


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


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
             progress_bar: bool = False, events: Iterable[Event] = ()) -> SimulationResult:
    """Play a job stream through an OnlineScheduler with ``policy`` (module docstring).

    From an Instance, ``topology``, ``slot_seconds`` and ``resources`` default to its own
    (its horizon is not used: the run goes on until every job completes or ``horizon``
    slots have passed). From a list of jobs, ``topology`` and ``slot_seconds`` are required
    and ``resources`` defaults to gpu, cpu, mem."""
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
    cap = default_horizon(jobs, topology, slot_seconds, resources) if horizon is None else horizon
    if isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    if jobs and max(j.arrival for j in jobs) >= cap:
        raise ValueError(f"horizon {cap} ends before the last arrival (slot "
                         f"{max(j.arrival for j in jobs)})")
    run = _Run(jobs, topology, resources, slot_seconds, int(cap), name, policy, lookahead, mode,
               float(progress_noise), int(seed), tuple(events))
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
                 lookahead: int, mode: str, noise: float, seed: int, events: tuple[Event, ...]):
        self.jobs = {j.id: j for j in jobs}
        if len(self.jobs) != len(jobs):
            raise ValueError("job ids must be unique")
        self.arriving: dict[int, list[Job]] = {}
        for j in sorted(jobs, key=lambda j: j.arrival):
            self.arriving.setdefault(j.arrival, []).append(j)
        self.events: dict[int, list[Event]] = {}
        for e in events:
            if not isinstance(e, (*_MACHINE_EVENTS, Restart)):
                raise ValueError(f"unknown event {e!r}: expected RemoveMachine, RepairMachine, "
                                 "AddMachine or Restart")
            self.events.setdefault(e.t, []).append(e)
        self.all_events = events
        self.resources, self.slot_seconds, self.cap, self.name = resources, slot_seconds, cap, name
        self.policy, self.noise, self.seed = policy, noise, seed
        self.rng = np.random.default_rng(seed)
        self.cluster = _Cluster(topology)
        self.sched = OnlineScheduler(topology, resources=resources, policy=policy, lookahead=lookahead,
                                     slot_seconds=slot_seconds, mode=mode)
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
                    self.sched.submit(job)
                self._slot(t)
                self.slots = t + 1
                bar.update(1)

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
        machine_events = any(isinstance(e, _MACHINE_EVENTS) for e in self.all_events)
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


# ----- plots -----------------------------------------------------------------------------------
def plot_simulation(results: Mapping[str, SimulationResult], out_dir: str | os.PathLike) -> list[Path]:
    """``jct_cdf.png`` (JCT CDF per policy) and ``utilisation.png`` (each resource over
    time per policy) in ``out_dir``; each PNG is written atomically."""
    from placement.plot import PlotUnavailable
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable('plotting needs matplotlib: pip install "placement[plot]"') from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    log = jct_axis_is_log(results)
    for label, r in results.items():
        x = np.sort(np.array(list(r.jct.values()), dtype=float))
        start = x[:1] if log else np.zeros(1)
        ax.step(np.concatenate([start, x]), np.arange(len(x) + 1) / max(len(x), 1), where="post",
                label=f"{label} (mean {r.average_jct:.4g} s)")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)" + (", log scale" if log else ""))
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("JCT distribution")
    paths = [_save(fig, out / "jct_cdf.png", plt)]
    resources = list(dict.fromkeys(r for res in results.values() for r in res.utilisation))
    fig, axes = plt.subplots(len(resources), 1, figsize=(8, 2.2 * len(resources) + 0.8),
                             sharex=True, squeeze=False)
    for ax, res in zip(axes[:, 0], resources):
        for label, r in results.items():
            series = r.utilisation.get(res, ())
            if series:
                ax.step(np.arange(len(series) + 1), list(series) + [series[-1]], where="post", label=label)
        ax.set_ylabel(f"{res} used")
        ax.set_ylim(0, 1.05)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("slot")
    fig.suptitle("utilisation over time")
    paths.append(_save(fig, out / "utilisation.png", plt))
    return paths


def jct_axis_is_log(results: Mapping[str, SimulationResult]) -> bool:
    """Whether the JCT CDF needs a log axis: the JCTs (all positive) span more than 100x, as when
    one policy starves jobs and a linear axis would squash every other curve against zero."""
    every = np.array([v for r in results.values() for v in r.jct.values()], dtype=float)
    return bool(every.size and every.min() > 0 and every.max() / every.min() > 100)


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path
