"""Our online policies as policies of the Sia paper's cluster simulator (the Sia arena).

The simulator (Jayaram Subramanya et al., SOSP 2023; the artifact's ``sia-simulator/``) is
the user's own checkout, imported from the folder they name; nothing of it is copied here.
Its ``Cluster`` decides how jobs behave from the policy's class (``isinstance`` checks), so
the adapter is a subclass of the peer's ``SiaPolicy``: jobs then behave exactly as under
``peer:sia`` (adaptive batch size, the same profiles, the same restart costs), and the
runner (:mod:`placement.integrations.sia`) plays it through the driver with ``peer:sia``'s
own flags. The call, every 60-s round: ``optimize(jobs, nodes, base_allocations)`` with
``jobs`` a name -> ``JobInfo``, ``nodes`` a GPU type -> {node index -> NodeInfo}; the answer
a name -> (GPU type, one node index per GPU, grouped by node).

Translation, every round (:meth:`SiaAdapter.optimize`):

- cluster: one machine ``<type>-<i>`` per node, ``gpu_type`` its type, its GPUs as the
  resource ``gpu``, under one switch whose links never bind (the simulator models no
  network limit beyond its per-placement speeds);
- job: an all-reduce job (docs/model.md, "Jobs without parameter servers") with
  ``min_workers`` 1, ``max_workers`` the largest of the JobInfo's ``max_replicas`` over the
  types (Sia's exploration cap, shared over types as ``--share_max_replicas`` makes Sia
  share it), the restart cost the simulator charges (its application's ``rescale_time``),
  done = the job's progress as the cluster reports it, and a speed table per GPU type
  (MODEL.md 8) in the simulator's progress units per second: entry = the goodput Sia's own
  policy computes for that (type, nodes, GPUs) (``_compute_goodputs_v2``, inherited: the
  job's fitted model on that type, or with ``--project_throughputs`` one projected from
  another type), / the application's initial batch size x the job's calibration factor
  (the simulator's own unit of progress). A job with no fitted model yet gets, as in
  Sia's policy, only one GPU, at each type's one-GPU throughput.
- what the policies may choose: Sia's configurations (:func:`configurations`: 1, 2, 4, ...
  GPUs up to a node, then whole nodes; the simulator has measured speeds for these shapes
  and fails on others). Other worker counts get ``measured_speed.UNMEASURED`` x the
  table's fastest entry, so no policy that reads speed chooses them.

What our policies are told, per information level (docs/model.md, "What the scheduler
knows"): at ``none`` (Sia's own: its JobInfo carries no length) nothing of a job's length,
only its progress and the sizes of the jobs that finished; ``oracle`` (labelled so; for
diagnosis) the work to the job's completion epoch at its target batch size. The speeds are
what the peer whose game is played reads: Sia's fitted goodputs (jobs as under
``peer:sia``), or Gavel's throughputs from the traces (jobs as under ``peer:gavel``, where
each job keeps the workload's GPU count and batch size: :meth:`SiaAdapter._rigid_job`).

Every decision passes through :class:`placement.online.scheduler.OnlineScheduler`, which
enforces MODEL.md (one GPU type per job, capacity), so the simulator, which checks
nothing, only ever receives valid allocations.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from placement.integrations.measured_speed import UNMEASURED, spread_keys
from placement.model.instance import Job
from placement.model.speed import SpeedTable, TypedSpeed
from placement.model.topology import Link, Machine, Switch, Topology
from placement.online.knowledge import tell
from placement.online.scheduler import OnlineScheduler

__all__ = ["SiaAdapter", "configurations", "make_adapter"]

GPU = "nvidia.com/gpu"
#: a machine's bus and a worker's network rate: never binding (the simulator has no network limit)
LOCAL_GBPS = 1e6
WORKER_GBPS = 1.0
LINK_GBPS = 1e9
#: the simulator's limit on a job's replicas (``get_sia_multi_job_info``: "simulator can't handle more")
MAX_REPLICAS = 64


def configurations(per_node: int, nodes: int) -> list[int]:
    """Sia's GPU counts on a type of ``nodes`` nodes of ``per_node`` GPUs (sia.py,
    ``populate_valid_configs``): the powers of two up to a node, then whole nodes."""
    small = [1 << k for k in range(per_node.bit_length()) if 1 << k <= per_node]
    return sorted(set(small) | {per_node * n for n in range(1, nodes + 1)})


class SiaAdapter:
    """Mixin answering the simulator's ``optimize`` with one of our policies (module
    docstring); :func:`make_adapter` puts it in front of the simulator's ``SiaPolicy``."""

    def _setup(self, policy: Any, *, slot_seconds: float, lookahead: int, clock: Callable[[], float],
               sim_jobs: Callable[[], Mapping[str, Any]], information: str = "none",
               estimate_error: float = 0.0, seed: int = 0) -> None:
        self.policy, self.slot_seconds, self.lookahead = policy, float(slot_seconds), lookahead
        self.information, self.estimate_error, self.seed = information, estimate_error, seed
        self._clock, self._sim_jobs = clock, sim_jobs
        #: jobs as under peer:gavel (a subclass of its GavelPolicy), else as under peer:sia
        self.rigid = hasattr(self, "predict_throughput")
        self._scheduler: OnlineScheduler | None = None
        self._shape: tuple = ()
        self._arrival: dict[str, int] = {}
        self.decision_seconds: list[float] = []

    def optimize(self, jobs: Mapping[str, Any], nodes: Mapping[str, Mapping[int, Any]],
                 base_allocations: Mapping[str, Any]) -> dict[str, tuple[str | None, list[int]]]:
        """The simulator's call: per job, its GPU type and one node index per GPU."""
        start = time.perf_counter()
        sched = self._cluster(nodes)
        t = int(round(self._clock() / self.slot_seconds))
        truth = self._sim_jobs()
        for name in set(sched.open_jobs) - set(jobs):
            sched.finish(name)  # completion is what the cluster says
            self._arrival.pop(name, None)
        while sched.last_slot is not None and sched.last_slot < t - 1:
            sched.step(sched.last_slot + 1)  # the simulator skips rounds with no active job
        open_jobs = sched.open_jobs
        for name, info in jobs.items():
            sim = truth[name]
            job = self._job(name, info, sim, t)
            if job is None:  # no type can take it (Gavel's artifact: throughput 0.1, never run)
                continue
            # what the cluster reports done, in the unit of the job's rates
            done = float(info.cur_step) if self.rigid else float(sim.progress)
            tell(sched, job, done, self.information, known=name in open_jobs,
                 estimate_error=self.estimate_error, seed=self.seed)
        placed = sched.step(t)
        out: dict[str, tuple[str | None, list[int]]] = {}
        for name, tasks in placed.items():
            used = [(self._machine[h], w) for h, (w, _) in tasks.items() if w]
            kinds = {g for (g, _), _ in used}
            if len(kinds) != 1:  # the scheduler's checks make this impossible
                raise RuntimeError(f"job {name}: workers on GPU types {sorted(kinds)}")
            out[name] = (kinds.pop(), [i for (_, i), w in sorted(used) for _ in range(w)])
        self.decision_seconds.append(time.perf_counter() - start)
        return out

    # ----- the cluster -------------------------------------------------------------------------
    def _cluster(self, nodes: Mapping[str, Mapping[int, Any]]) -> OnlineScheduler:
        shape = tuple((g, tuple(sorted((i, int(n.resources.get(GPU, 0))) for i, n in per.items())))
                      for g, per in sorted(nodes.items()))
        if self._scheduler is not None:
            if shape != self._shape:
                raise RuntimeError("the simulator changed its nodes; the adapter runs on a fixed cluster")
            return self._scheduler
        machines = tuple(Machine(f"{g}-{i}", {"gpu": float(gpus)}, LOCAL_GBPS, g)
                         for g, per in shape for i, gpus in per)
        topo = Topology(machines, (Switch("sw"),), tuple(Link(m.id, "sw", LINK_GBPS) for m in machines), "sw")
        self._shape = shape
        self._machine = {f"{g}-{i}": (g, i) for g, per in shape for i, _ in per}
        self._types = {g: (max(gpus for _, gpus in per), len(per)) for g, per in shape}
        self._scheduler = OnlineScheduler(topo, resources=("gpu",), policy=self.policy,
                                          lookahead=self.lookahead, slot_seconds=self.slot_seconds,
                                          information=self.information)
        return self._scheduler

    # ----- one job in our model --------------------------------------------------------------
    def _job(self, name: str, info: Any, sim: Any, t: int) -> Job | None:
        """The job in our model now (module docstring); None if no GPU type can take it."""
        if self.rigid:
            return self._rigid_job(name, info, sim, t)
        app = sim.reference_app
        unit = sim.calibration_factor / app.init_batch_size  # goodput -> progress units per second
        fitted = any(fn is not None for fn in info.speedup_fn.values())
        rigid = getattr(info, "category", None) == "rigid"  # Sia gives these their count or nothing
        most = max(1, min(MAX_REPLICAS, max(int(v) for v in info.max_replicas.values())))
        if not rigid:  # the largest of Sia's counts under its cap (a count it measures)
            most = max(c for per_node, nodes in self._types.values()
                       for c in configurations(per_node, nodes) if c <= most) if fitted else 1
        lo = most if rigid else 1
        tables = []
        for g, (per_node, nodes) in self._types.items():
            if fitted:
                table = self._table(info, g, per_node, nodes, lo, most, unit)
            else:
                table = self._first(info, g, most, unit)
            if table is not None:
                tables.append((g, table))
        if not tables:
            return None
        speed = TypedSpeed(tuple(sorted(tables)))
        work = float(app.get_progress(sim.completion_epoch + 1)) if sim.completion_epoch is not None else 1.0
        arrival = self._arrival.setdefault(name, t)
        return Job(id=name, arrival=arrival, work_batches=max(work, 1.0),
                   batch_seconds=1 / speed.best_per_worker(local=True), worker={"gpu": 1.0}, ps={},
                   min_workers=lo, max_workers=most, worker_gbps=WORKER_GBPS, ps_gbps=WORKER_GBPS * most,
                   restart_seconds=float(sim.max_rescale_time), speed=speed)

    def _rigid_job(self, name: str, info: Any, sim: Any, t: int) -> Job | None:
        """Jobs as under ``peer:gavel``: the workload's GPU count (``scale_factor``) and
        batch size, fixed; on each type that holds the count, the throughput Gavel's policy
        reads (its ``predict_throughput``: the traces' step time on the fewest nodes, x the
        calibration factor), the same for every placement of the count."""
        count = int(info.scale_factor)
        tables = []
        for g, (per_node, nodes) in self._types.items():
            if count <= per_node * nodes:
                rate = float(self.predict_throughput(info, g, name))
                if math.isfinite(rate) and rate > 0:
                    tables.append((g, SpeedTable(count, (rate,), ((2, (rate,)),))))
        if not tables:
            return None
        speed = TypedSpeed(tuple(sorted(tables)))
        work = float(info.total_steps)
        return Job(id=name, arrival=self._arrival.setdefault(name, t), work_batches=max(work, 1.0),
                   batch_seconds=1 / speed.best_per_worker(local=True), worker={"gpu": 1.0}, ps={},
                   min_workers=count, max_workers=count, worker_gbps=WORKER_GBPS, ps_gbps=WORKER_GBPS * count,
                   restart_seconds=float(info.rescale_time), speed=speed)

    def _first(self, info: Any, g: str, count: int, unit: float) -> SpeedTable | None:
        """A job without a fitted model: ``count`` GPUs (one, unless the job is rigid) at
        ``count`` x the type's one-GPU throughput, as Sia offers it (the simulator's
        ``cluster_throughputs``, which Sia's policy reads)."""
        rate = count * float(np.asarray(info.cluster_throughputs[g], dtype=float).reshape(-1)[0]) * unit
        if not (math.isfinite(rate) and rate > 0):
            return None
        return SpeedTable(count, (rate,), ((2, (rate,)),))

    def _table(self, info: Any, g: str, per_node: int, nodes: int, lo: int, most: int,
               unit: float) -> SpeedTable | None:
        """The job's table on type ``g`` for W = ``lo``..``most`` from Sia's goodput (module
        docstring); None when Sia has no goodput for the type."""
        allowed = set(configurations(per_node, nodes))
        keys = spread_keys(most, nodes)
        where = {}
        for w in range(lo, most + 1):
            fewest = -(-w // per_node)
            if w in allowed and fewest <= nodes:
                where[1, w] = fewest
                for m in keys:
                    where[m, w] = min(max(m, fewest), w, nodes)
        if not where:
            return None
        pairs = sorted({(n, w) for (_, w), n in where.items()})
        goodput = self._compute_goodputs_v2(info, g, np.array([n for n, _ in pairs], dtype=float),
                                            np.array([w for _, w in pairs], dtype=float))
        if goodput is None or np.ndim(goodput) == 0:
            return None
        rate = {p: float(x) * unit for p, x in zip(pairs, np.asarray(goodput, dtype=float).reshape(-1))}
        usable = [r for r in rate.values() if math.isfinite(r) and r > 0]
        if not usable:
            return None
        floor = UNMEASURED * max(usable)

        def row(m: int) -> tuple[float, ...]:
            out = []
            for w in range(lo, most + 1):
                r = rate.get((where[m, w], w)) if (m, w) in where else None
                out.append(r if r is not None and math.isfinite(r) and r > 0 else floor)
            return tuple(out)
        return SpeedTable(lo, row(1), tuple((m, row(m)) for m in keys))


def make_adapter(sia_policy_class: type, policy: Any, *, slot_seconds: float = 60, lookahead: int = 8,
                 clock: Callable[[], float], sim_jobs: Callable[[], Mapping[str, Any]],
                 information: str = "none", estimate_error: float = 0.0, seed: int = 0) -> type:
    """A subclass of the simulator's policy class ``sia_policy_class`` (its ``SiaPolicy`` or
    ``GavelPolicy``: the jobs then behave as under that peer) that answers with ``policy`` (one of ours);
    the driver builds it with its own arguments. ``clock`` gives the simulator's time (s),
    ``sim_jobs`` its jobs by name (progress, application, as the cluster reports them)."""
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        sia_policy_class.__init__(self, *args, **kwargs)
        self._setup(policy, slot_seconds=slot_seconds, lookahead=lookahead, clock=clock, sim_jobs=sim_jobs,
                    information=information, estimate_error=estimate_error, seed=seed)
    return type(f"Placement{sia_policy_class.__name__}", (SiaAdapter, sia_policy_class), {"__init__": __init__})
