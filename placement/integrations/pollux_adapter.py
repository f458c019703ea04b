"""Our online policies as policies of the Pollux paper's cluster simulator (the peer arena).

The simulator (Qiao et al., OSDI 2021; petuum/adaptdl, branch ``osdi21-artifact``, folder
``simulator/``) is the user's own checkout, imported from the folder they name; nothing of
it is copied here. A policy of that simulator is an object with
``optimize(jobs, nodes, prev_allocations, node_template) -> (allocations, desired_nodes)``,
``jobs`` mapping a name to its ``JobInfo`` and an allocation being one node index per
replica. Its ``Cluster`` decides how jobs behave from the policy's class, so the adapter
is a subclass of the peer's class of the chosen *mode*:

- ``fixed`` (``TiresiasPolicy``): each job runs its workload's GPU count and batch size;
  in our model ``min_workers = max_workers`` = that count (a gang, as Tiresias runs it);
- ``tuned`` (``OptimusPolicy``): tuned batch size, any GPU count up to the JobInfo's
  ``max_replicas``; ``max_workers`` is the most GPUs (on the fewest machines) the job
  uses at a parallel efficiency of at least 1/2 (``measured_speed.useful_count``);
- ``adaptive`` (``PolluxPolicy``): jobs pick their batch size for each allocation
  (goodput); ``max_workers`` as above (from the traces), found again when the job's
  epoch or profile changes and never lowered, up to the simulator's own limit
  (:func:`replica_limit`), not Pollux's exploration cap under it (the peer policy's
  choice, which the simulator holds no policy to: worked out once under that cap, the
  count froze at its epoch-0 value, jobs never ran on more replicas, so the cap never
  grew). The speed table itself is Pollux's fitted speedup (below).

Translation, every slot (``PolluxAdapter.optimize``):

- cluster: one machine ``n<i>`` per node with its GPUs (resource ``gpu``), under one
  switch whose links never bind (the simulator models no network limit);
- job: an all-reduce job (docs/model.md, "Jobs without parameter servers") whose work is
  the simulator's progress units (its scale-invariant iterations) to its completion
  epoch, done = the job's progress so far, restart 30 s (the simulator's re-scale time),
  and a speed table (MODEL.md 8) in progress units per second, one entry per W =
  min_workers..max_workers, local and spread over 2, 4, 8 and 16 machines (up to the
  node count), each entry measured on one placement
  (:mod:`placement.integrations.measured_speed`: W on one machine, or packed on the
  row's machines). The table is made again every slot (``OnlineScheduler.revise``),
  since the statistical efficiency changes by epoch (and in ``adaptive`` mode Pollux's
  fitted model with every profiled configuration).

Where each entry comes from (the *speed source*; ``SOURCES``, default per mode in
``DEFAULT_SOURCE``, ``--speed-source`` of the runner):

- ``traces`` (``fixed`` and ``tuned``): :func:`progress_rate` on the entry's placement,
  what the simulator would make the job do there: the batch configuration the job itself
  picks, the traces' step time, the statistical efficiency of its current epoch. The
  truth, as the simulator's Optimus+Oracle sees it (it reads the traces' step times at
  the job's fixed batch size). The Tiresias JobInfo carries no ``speedup_fn`` at all.
- ``speedup`` (``adaptive``): the JobInfo's ``speedup_fn(num_nodes, num_replicas)``, the
  speedup Pollux's own policy sees (its goodput model fitted to the job's profile so far,
  relative to its best one-GPU goodput), times ``base = progress_rate`` of one GPU: entry
  = base x speedup_fn(machines, W). Where it gives nothing usable the entry falls back to
  ``traces``: the whole table while the job has no fitted model (the simulator's
  ``Job.get_speedup_fn`` then returns the prior ``lambda n, r: r``, perfect scaling, not
  a measurement) or no one-GPU rate, and an entry whose speedup is zero or not finite.
  In ``tuned`` mode the JobInfo's ``speedup_fn`` is the same fitted model (the
  simulator's Optimus ignores it), and it assumes the batch size adapts, which a tuned
  job's does not; hence ``traces`` there unless asked (how far the two sources are
  apart: ``benchmarks/speedup_table_error.py``, docs/online.md "Peer arena").

An entry whose source has no value (a configuration the traces never measured) is
``measured_speed.UNMEASURED`` x the table's fastest entry (positive and finite, as
MODEL.md 8 requires, and too slow for any policy that reads speed to choose it; the
simulator itself fails there). When even max_workers on the fewest machines has no rate,
the job keeps its last table (or, new, is an error).

What the policies see: the remaining work and each job's speed table, from the truth in
``fixed`` and ``tuned`` modes (as the simulator's Optimus+Oracle; the peer's Tiresias
uses neither, and neither do ours, ``tiresias`` and ``fifo``), from Pollux's own fitted
speedup in ``adaptive`` mode. What is lost: a layout of W other than the entry's
(e.g. (3, 2) read as (4, 1)) and machine counts between the rows (docs/online.md, "Peer
arena").

Every decision passes through :class:`placement.online.scheduler.OnlineScheduler`, which
enforces MODEL.md, so the simulator only ever receives valid allocations.

The runner that plays a workload in the simulator with one policy is
:mod:`placement.integrations.pollux` (``python -m placement.integrations.pollux``); this
module is kept apart from it because it is the translation itself, which a cluster
manager of its own could use without the runner's command line, workload checks and
measurements.
"""
from __future__ import annotations

import copy
import math
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from placement.model.instance import Job
from placement.integrations.measured_speed import (entry_placements, packed, speed_table,
                                                   useful_count)
from placement.online.knowledge import tell
from placement.online.scheduler import OnlineScheduler
from placement.model.speed import SpeedTable
from placement.model.topology import Link, Machine, Switch, Topology

__all__ = ["DEFAULT_SOURCE", "MODES", "SOURCES", "PeerError", "PolluxAdapter", "make_adapter",
           "progress_rate", "speedup_table", "traces_table"]

#: mode -> (peer module, peer policy class) whose jobs' behaviour the mode takes.
MODES = {"fixed": ("tiresias", "TiresiasPolicy"), "tuned": ("optimus", "OptimusPolicy"),
         "adaptive": ("pollux", "PolluxPolicy")}
#: where a job's speed table comes from (module docstring).
SOURCES = ("traces", "speedup")
DEFAULT_SOURCE = {"fixed": "traces", "tuned": "traces", "adaptive": "speedup"}

GPU = "nvidia.com/gpu"
#: a machine's own bus and a worker's network rate (the stand-in PS's traffic; never binding).
LOCAL_GBPS = 1e6
WORKER_GBPS = 1.0
#: links of the one switch: never binding (the simulator models no network limit).
LINK_GBPS = 1e9
#: the simulator's re-scale time (``Job.reallocate``: 30 s on every re-allocation).
RESTART_SECONDS = 30.0
#: the simulator's own limit on a job's replicas (``get_pollux_job_info``).
MAX_REPLICAS = 64


class PeerError(Exception):
    """Something about the user's simulator checkout or workload, said in one line."""

# ----- the adapter ---------------------------------------------------------------------------
class PolluxAdapter:
    """Mixin that answers the simulator's ``optimize`` with one of our policies (module
    docstring); :func:`make_adapter` puts it in front of the peer class of the mode."""

    def _setup(self, policy: Any, mode: str, source: str, slot_seconds: float, lookahead: int,
               clock: Callable[[], float], sim_jobs: Callable[[], Mapping[str, Any]],
               information: str = "oracle", estimate_error: float = 0.0, seed: int = 0) -> None:
        self.policy = policy
        self.information, self.estimate_error, self.seed = information, estimate_error, seed
        self.mode = mode
        self.source = source
        self.slot_seconds = float(slot_seconds)
        self.lookahead = lookahead
        self._clock = clock
        self._sim_jobs = sim_jobs
        self._scheduler: OnlineScheduler | None = None
        self._nodes: tuple = ()
        self._useful: dict[str, tuple[int, int]] = {}  # job -> (JobInfo max_replicas, count)
        self._tables: dict[str, tuple[tuple, SpeedTable]] = {}  # job -> (what it read, table)
        self.decision_seconds: list[float] = []
        self.revisions = 0

    @property
    def name(self) -> str:
        return getattr(self.policy, "name", type(self.policy).__name__)

    def optimize(self, jobs: Mapping[str, Any], nodes: Mapping[Any, Any],
                 prev_allocations: Mapping[str, list], node_template: Any = None
                 ) -> tuple[dict[str, list], int]:
        """The simulator's call: one node index per replica for each job, and the node count."""
        start = time.perf_counter()
        sched = self._cluster(nodes)
        t = int(round(self._clock() / self.slot_seconds))
        truth = self._sim_jobs()
        open_jobs = sched.open_jobs
        for name in set(open_jobs) - set(jobs):
            sched.finish(name)
            self._tables.pop(name, None)
        while sched.last_slot is not None and sched.last_slot < t - 1:
            sched.step(sched.last_slot + 1)  # the simulator skips slots with no active job
        per_node = max(int(n.resources.get(GPU, 0)) for n in nodes.values())
        for name, info in jobs.items():
            job = self._job(name, info, truth[name], t, per_node, len(nodes), open_jobs.get(name))
            # below oracle the true size stays here: the scheduler plans by what it knows (docs/model.md)
            tell(sched, job, float(truth[name].progress), self.information, known=name in open_jobs,
                 estimate_error=self.estimate_error, seed=self.seed)
            self.revisions += name in open_jobs
        placed = sched.step(t)
        index = {f"n{k}": k for k in self._nodes}
        allocations = {j: [index[h] for h in sorted(tasks, key=index.get) for _ in range(tasks[h][0])]
                       for j, tasks in placed.items()}
        self.decision_seconds.append(time.perf_counter() - start)
        return allocations, len(nodes)

    def _cluster(self, nodes: Mapping[Any, Any]) -> OnlineScheduler:
        keys = tuple(sorted(nodes))
        if self._scheduler is not None and keys == self._nodes:
            return self._scheduler
        if self._scheduler is not None:
            raise PeerError("the simulator changed its node set (autoscaling); the adapter "
                            "runs on a fixed cluster: leave --max-nodes unset")
        machines = tuple(Machine(f"n{k}", {"gpu": float(nodes[k].resources.get(GPU, 0))}, LOCAL_GBPS)
                         for k in keys)
        topo = Topology(machines, (Switch("sw"),), tuple(Link(m.id, "sw", LINK_GBPS) for m in machines), "sw")
        self._nodes = keys
        self._scheduler = OnlineScheduler(topo, resources=("gpu",), policy=self.policy,
                                          lookahead=self.lookahead, slot_seconds=self.slot_seconds,
                                          information=self.information)
        return self._scheduler

    # ----- one job in our model --------------------------------------------------------------
    def _job(self, name: str, info: Any, sim_job: Any, t: int, per_node: int, nodes: int,
             known: Job | None) -> Job:
        """The job in our model now; ``known`` is its last version (None if new)."""
        app = sim_job.application
        target = sim_job.target_batch_size or app.init_batch_size
        work = float(app.get_progress(app.get_completion_epoch(target) + 1))
        if self.mode == "fixed":
            count = lo = int(info.max_replicas)
        else:
            count, lo = self._useful_count(name, info, sim_job, per_node), 1
        try:
            table = self._table(name, info, sim_job, lo, count, per_node, nodes)
        except ValueError as exc:
            if known is not None:
                return known  # no speed at this epoch: keep the last one measured
            raise PeerError(f"job {name}: the {app.name} traces give no speed at batch size "
                            f"{target}: {exc}") from None
        arrival = known.arrival if known is not None else t  # the slot it is first seen in
        return Job(id=name, arrival=arrival, work_batches=work,
                   batch_seconds=1 / table.best_per_worker(local=True),
                   worker={"gpu": 1.0}, ps={}, min_workers=lo, max_workers=count,
                   worker_gbps=WORKER_GBPS, ps_gbps=WORKER_GBPS * count,
                   restart_seconds=RESTART_SECONDS, speed=table)

    def _table(self, name: str, info: Any, sim_job: Any, lo: int, hi: int, per_node: int,
               nodes: int) -> SpeedTable:
        """The job's speed table from the adapter's source (module docstring)."""
        if self.source == "speedup":
            table = speedup_table(info.speedup_fn, sim_job, lo, hi, per_node, nodes)
            if table is not None:
                return table
        # progress_rate reads the epoch, and the job's own batch size, or without one
        # Pollux's fitted model (perf_params and grad_params) that picks it
        fitted = (sim_job.perf_params, sim_job.grad_params) if sim_job.target_batch_size is None else None
        key = (sim_job.epoch, lo, hi, nodes, fitted)
        cached = self._tables.get(name)
        if cached is None or cached[0] != key:
            cached = self._tables[name] = (key, traces_table(sim_job, lo, hi, per_node, nodes))
        return cached[1]

    def _useful_count(self, name: str, info: Any, sim_job: Any, per_node: int) -> int:
        """``useful_count`` of the job's rates on the fewest machines from the traces (as
        Optimus+Oracle reads them; module docstring), except for a policy that sizes jobs by
        its own objective as Pollux does (``uses_exploration_cap``: our ``pollux``; below ``oracle``,
        a policy that takes shares: ``lp-rounding``'s ``share_caps``), which in
        ``adaptive`` mode is offered the JobInfo's ``max_replicas`` itself; in ``tuned`` mode under the JobInfo's
        ``max_replicas``, found again when that cap changes; in ``adaptive`` mode up to the
        simulator's limit (:func:`replica_limit`), found again when the job's epoch or
        Pollux's profile of it changes (its batch adapts, so the count grows with the
        gradient noise), never below a count it was given (no job loses workers to a
        re-count)."""
        if self.mode == "adaptive" and (getattr(self.policy, "uses_exploration_cap", False) or (
                self.information != "oracle" and getattr(self.policy, "share_caps", False))):
            return offered_replicas(info)  # a policy that sizes jobs as Pollux does (pollux; lp-rounding's share)
        if self.mode == "adaptive" and self.information != "oracle":
            return self._fitted_count(name, info, sim_job, per_node)
        if self.mode == "adaptive":
            key: tuple = (replica_limit(info, sim_job), sim_job.epoch, len(sim_job.profile))
        else:
            key = (offered_replicas(info),)
        found = self._useful.get(name)
        if found is None or found[0] != key:
            rates = [progress_rate(sim_job, packed(w, per_node)) for w in range(1, key[0] + 1)]
            count = useful_count(rates) if rates[0] else 1
            if found is not None and self.mode == "adaptive":
                count = min(key[0], max(count, found[1]))  # never below a count already given
            found = self._useful[name] = (key, count)
        return found[1]


    def _fitted_count(self, name: str, info: Any, sim_job: Any, per_node: int) -> int:
        """Below ``oracle`` in ``adaptive`` mode, the GPU count from what Pollux's JobInfo
        exposes, as Pollux itself knows it: ``useful_count`` of its fitted speedup on the fewest
        machines, up to its ``max_replicas`` (its exploration cap); the cap itself before the
        speedup is fitted."""
        cap = offered_replicas(info)
        if info.speedup_fn is None or sim_job.perf_params is None:
            return cap
        key = (cap, tuple(float(x) for x in sim_job.perf_params), sim_job.epoch)  # refit as the job trains
        found = self._useful.get(name)
        if found is None or found[0] != key:
            where = [packed(w, per_node) for w in range(1, cap + 1)]
            speedup = np.asarray(info.speedup_fn(np.array([len(p) for p in where]),
                                                 np.array([sum(p) for p in where])), dtype=float).reshape(-1)
            rates = [float(s) if math.isfinite(s) and s > 0 else None for s in speedup]
            found = self._useful[name] = (key, useful_count(rates) if rates[0] else cap)
        return found[1]


def offered_replicas(info: Any) -> int:
    """The JobInfo's ``max_replicas``, at least 1 and at most ``MAX_REPLICAS``."""
    return max(1, min(int(info.max_replicas), MAX_REPLICAS))


def replica_limit(info: Any, sim_job: Any) -> int:
    """The most replicas the simulator lets an adaptive job have: its own limit
    ``min(64, max_batch_size // min_local_bsz)``, the bound of every Pollux JobInfo's
    ``max_replicas``, not Pollux's exploration cap under it (twice the most replicas the job
    has been profiled on), which is the peer policy's own choice; the simulator holds no
    policy to it. A job whose batch size the simulator fixes (``target_batch_size`` set, so
    it does not adapt) keeps the JobInfo's ``max_replicas``."""
    if sim_job.target_batch_size is not None:
        return offered_replicas(info)
    app = sim_job.application
    return max(1, min(MAX_REPLICAS, app.max_batch_size // app.min_local_bsz))


def progress_rate(sim_job: Any, placement: tuple[int, ...]) -> float | None:
    """Progress units per second the simulator would give ``sim_job`` on ``placement``
    (GPUs per node): the batch configuration the job itself picks there
    (``update_local_bsz`` on a copy), the traces' step time with its accumulation steps,
    and the statistical efficiency of its current epoch. None where the traces say nothing."""
    app = sim_job.application
    probe = copy.copy(sim_job)
    try:
        probe.update_local_bsz(placement)
        workers = sum(placement)
        batch = workers * probe.atomic_bsz * (probe.accum_steps + 1)
        step, sync = (float(x) for x in app.get_throughput(tuple(placement), probe.atomic_bsz))
        seconds = step + (step - sync) * probe.accum_steps
        grad_sqr, grad_var = app.get_grad_stats(batch, min(sim_job.epoch, app.max_epochs - 1))
    except (AssertionError, ValueError, KeyError, IndexError, ZeroDivisionError):
        return None
    scale = batch / app.init_batch_size
    gain = (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)
    rate = gain / seconds
    return rate if math.isfinite(rate) and rate > 0 else None


def traces_table(sim_job: Any, lo: int, hi: int, per_node: int, nodes: int) -> SpeedTable:
    """The job's table for W = lo..hi from :func:`progress_rate` on each entry's placement
    (the ``traces`` source). ValueError when max_workers on the fewest machines has no rate."""
    return speed_table(lambda p: progress_rate(sim_job, p), lo, hi, per_node, nodes)


def speedup_table(speedup_fn: Any, sim_job: Any, lo: int, hi: int, per_node: int,
                  nodes: int) -> SpeedTable | None:
    """The job's table from the JobInfo's ``speedup_fn`` (the ``speedup`` source): entry =
    base x speedup_fn(machines, W), base = :func:`progress_rate` of one GPU, an unusable
    speedup replaced by :func:`progress_rate` on the entry's placement. None when there is
    no fitted model (no ``speedup_fn``, or the simulator's unfitted prior: ``perf_params``
    None) or no one-GPU rate. ValueError as :func:`traces_table`."""
    if speedup_fn is None or sim_job.perf_params is None:
        return None
    base = progress_rate(sim_job, (1,))
    if not base:
        return None
    where = sorted(set(entry_placements(lo, hi, per_node, nodes).values()))
    speedup = np.asarray(speedup_fn(np.array([len(p) for p in where]),
                                    np.array([sum(p) for p in where])), dtype=float).reshape(-1)
    rates = {p: base * float(s) for p, s in zip(where, speedup)}

    def rate(p: tuple[int, ...]) -> float | None:
        r = rates[p]
        return r if math.isfinite(r) and r > 0 else progress_rate(sim_job, p)
    return speed_table(rate, lo, hi, per_node, nodes)


def make_adapter(sim: types.SimpleNamespace, policy: Any, mode: str, *, slot_seconds: float = 60,
                 lookahead: int = 8, clock: Callable[[], float],
                 sim_jobs: Callable[[], Mapping[str, Any]], source: str | None = None,
                 information: str = "oracle", estimate_error: float = 0.0, seed: int = 0) -> PolluxAdapter:
    """``policy`` (one of ours) dressed as the peer's policy class of ``mode``.

    ``clock`` gives the simulator's current time (s); ``sim_jobs`` its jobs by name (the
    cluster's truth: progress, application, batch size), as a cluster manager reports it;
    ``source`` where the speed tables come from (``SOURCES``; None: ``DEFAULT_SOURCE``);
    ``information`` what our policy is told of job lengths (``oracle``, ``estimate`` with
    ``estimate_error`` and ``seed``, or ``none``)."""
    if mode not in MODES:
        raise PeerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    source = DEFAULT_SOURCE[mode] if source is None else source
    if source not in SOURCES:
        raise PeerError(f"unknown speed source {source!r}; choose from {', '.join(SOURCES)}")
    module, cls_name = MODES[mode]
    base = getattr(getattr(sim, module), cls_name)
    cls = type(f"Placement{cls_name}", (PolluxAdapter, base), {})
    adapter = cls.__new__(cls)
    adapter._setup(policy, mode, source, slot_seconds, lookahead, clock, sim_jobs, information, estimate_error, seed)
    return adapter
