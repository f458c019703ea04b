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
  uses at a parallel efficiency of at least 1/2 (``linear_speed.useful_count``);
- ``adaptive`` (``PolluxPolicy``): jobs pick their batch size for each allocation
  (goodput); ``max_workers`` as above, under the JobInfo's ``max_replicas`` (Pollux's
  own exploration limit, which grows as the job is profiled).

Translation, every slot (``PolluxAdapter.optimize``):

- cluster: one machine ``n<i>`` per node with its GPUs (resource ``gpu``), under one
  switch whose links never bind (the simulator models no network limit);
- job: an all-reduce job (docs/model.md, "Jobs without parameter servers") whose work is
  the simulator's progress units (its scale-invariant iterations) to its completion
  epoch, done = the job's progress so far, restart 30 s (the simulator's re-scale time),
  and a speed written in MODEL.md's linear rate from two measured points
  (:mod:`placement.integrations.linear_speed`: the job's count on one machine, and spread:
  a gang on the fewest machines, an elastic job at the first count that must spread). A point's rate is what the simulator would make the job do there:
  the batch size and accumulation steps the job itself would pick, the traces' step
  time and the statistical efficiency of its current epoch. The speed is re-measured
  every slot (``OnlineScheduler.revise``), since the efficiency changes by epoch.

What the policies see: the remaining work and the true speed of each job, as the
simulator's Optimus+Oracle sees them (the peer's Optimus reads the application's traces
for its step times and remaining iterations); the peer's Tiresias uses neither (it is
non-clairvoyant) and neither do ours (``tiresias``, ``fifo``). Pollux sees only the
speedup function it has fitted so far. What is lost in the translation: the speed at
counts other than the two points (concave in truth, linear here) and the difference
between spreading over two machines or sixteen (docs/online.md, "Peer arena").

Every decision passes through :class:`placement.online.scheduler.OnlineScheduler`, which
enforces MODEL.md, so the simulator only ever receives valid allocations.

The module is also the runner the benchmark calls in the simulator's environment:
``python -m placement.integrations.pollux --simulator DIR --workload CSV --mode fixed
--policy greedy --out run.json`` (``--help`` for the rest).
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import os
import statistics
import sys
import time
import types
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from placement.instance import Job
from placement.integrations.linear_speed import (linear_speed, packed, reference_placements,
                                                 useful_count)
from placement.online.registry import POLICIES
from placement.online.scheduler import OnlineScheduler
from placement.topology import Link, Machine, Switch, Topology

__all__ = ["MODES", "PEER_POLICIES", "PeerError", "PolluxAdapter", "load_simulator",
           "make_adapter", "run"]

#: mode -> (peer module, peer policy class) whose jobs' behaviour the mode takes.
MODES = {"fixed": ("tiresias", "TiresiasPolicy"), "tuned": ("optimus", "OptimusPolicy"),
         "adaptive": ("pollux", "PolluxPolicy")}
#: the peer's own policies, by the name the benchmark gives them, and their mode.
PEER_POLICIES = {"peer:tiresias": "fixed", "peer:optimus": "tuned", "peer:pollux": "adaptive"}
#: constructor options our policies take in the arena: the constants of the peer's own
#: implementation of the same policy, so that only the code differs (the Pollux artifact's
#: tiresias.py: ``_queue_threshold = 3600 * 16`` GPU-seconds, ``_solve_starvation = 0``).
ARENA_OPTIONS: dict[str, dict[str, Any]] = {
    "tiresias": {"thresholds": (3600.0 * 16,), "promote_knob": None}}
#: what the peer needs beside our package, for the messages that say how to install it.
PEER_PACKAGES = '"numpy<2" "pandas<2" scipy "pymoo==0.4.2.1"'

GPU = "nvidia.com/gpu"
#: a machine's own bus and a worker's network rate; only their ratio matters (linear_speed).
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


# ----- the user's checkout -------------------------------------------------------------------
def load_simulator(directory: str | os.PathLike) -> types.SimpleNamespace:
    """The simulator's modules (``simulator``, ``tiresias``, ``optimus``, ``pollux``,
    ``applications``) from the user's checkout ``directory``.

    Its modules import each other by bare name, so the folder goes first on ``sys.path``;
    it uses the NumPy aliases ``np.float``/``np.int`` that NumPy 1.24 removed, so they are
    set (to the built-ins they stood for) when missing."""
    folder = Path(directory)
    if not folder.is_dir():
        raise PeerError(f"{folder}: no such folder; clone the simulator (petuum/adaptdl, "
                        "branch osdi21-artifact, folder simulator/) and pass that folder")
    missing = [f for f in ("simulator.py", "applications.py", "tiresias.py", "optimus.py",
                           "pollux.py", "traces") if not (folder / f).exists()]
    if missing:
        raise PeerError(f"{folder}: not the Pollux simulator folder (missing {', '.join(missing)})")
    try:
        import numpy as np
        import pandas  # noqa: F401  (the simulator's own dependency, checked up front)
        import pymoo  # noqa: F401
    except ImportError as exc:
        raise PeerError(f"the Pollux simulator needs {exc.name}: in its environment run "
                        f"pip install {PEER_PACKAGES}") from None
    if int(np.__version__.split(".")[0]) >= 2 or int(pandas.__version__.split(".")[0]) >= 2:
        raise PeerError(f"the Pollux simulator needs numpy<2 and pandas<2 (found numpy "
                        f"{np.__version__}, pandas {pandas.__version__}): pip install {PEER_PACKAGES}")
    for alias, builtin in (("float", float), ("int", int)):
        if alias not in np.__dict__:
            setattr(np, alias, builtin)
    path = str(folder.resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            mods = {name: __import__(name) for name in
                    ("applications", "simulator", "tiresias", "optimus", "pollux")}
    except ImportError as exc:
        raise PeerError(f"cannot import the simulator from {folder}: {exc}; its environment "
                        f"needs pip install {PEER_PACKAGES}") from None
    return types.SimpleNamespace(**mods)


# ----- the adapter ---------------------------------------------------------------------------
class PolluxAdapter:
    """Mixin that answers the simulator's ``optimize`` with one of our policies (module
    docstring); :func:`make_adapter` puts it in front of the peer class of the mode."""

    def _setup(self, policy: Any, mode: str, slot_seconds: float, lookahead: int,
               clock: Callable[[], float], sim_jobs: Callable[[], Mapping[str, Any]]) -> None:
        self.policy = policy
        self.mode = mode
        self.slot_seconds = float(slot_seconds)
        self.lookahead = lookahead
        self._clock = clock
        self._sim_jobs = sim_jobs
        self._scheduler: OnlineScheduler | None = None
        self._nodes: tuple = ()
        self._useful: dict[str, tuple[int, int]] = {}  # job -> (JobInfo max_replicas, count)
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
        while sched.last_slot is not None and sched.last_slot < t - 1:
            sched.step(sched.last_slot + 1)  # the simulator skips slots with no active job
        per_node = max(int(n.resources.get(GPU, 0)) for n in nodes.values())
        for name, info in jobs.items():
            job = self._job(name, info, truth[name], t, per_node, open_jobs.get(name))
            if name in open_jobs:
                sched.revise(job)
                self.revisions += 1
            else:
                sched.submit(job)
            sched.report(name, min(truth[name].progress, job.work_batches * (1 - 1e-6)))
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
                                          lookahead=self.lookahead, slot_seconds=self.slot_seconds)
        return self._scheduler

    # ----- one job in our model --------------------------------------------------------------
    def _job(self, name: str, info: Any, sim_job: Any, t: int, per_node: int,
             known: Job | None) -> Job:
        """The job in our model now; ``known`` is its last version (None if new)."""
        app = sim_job.application
        target = sim_job.target_batch_size or app.init_batch_size
        work = float(app.get_progress(app.get_completion_epoch(target) + 1))
        if self.mode == "fixed":
            count = lo = int(info.max_replicas)
        else:
            count, lo = self._useful_count(name, info, sim_job, per_node), 1
        local_pl, spread_pl = reference_placements(count, per_node, elastic=self.mode != "fixed")
        local_rate = progress_rate(sim_job, local_pl)
        spread_rate = progress_rate(sim_job, spread_pl) if spread_pl else None
        if not local_rate or (spread_pl and not spread_rate):
            if known is not None:
                return known  # no speed at this epoch: keep the last one measured
            raise PeerError(f"job {name}: the {app.name} traces give no speed at batch size "
                            f"{target} on {local_pl} or {spread_pl}")
        speed = linear_speed(local_rate, sum(local_pl), spread_rate,
                             sum(spread_pl) if spread_pl else None,
                             local_gbps=LOCAL_GBPS, worker_gbps=WORKER_GBPS)
        arrival = known.arrival if known is not None else t  # the slot it is first seen in
        return Job(id=name, arrival=arrival, work_batches=work,
                   batch_seconds=speed.batch_seconds, gradient_mb=speed.gradient_mb,
                   worker={"gpu": 1.0}, ps={}, min_workers=lo, max_workers=count,
                   worker_gbps=WORKER_GBPS, ps_gbps=WORKER_GBPS * count,
                   restart_seconds=RESTART_SECONDS)

    def _useful_count(self, name: str, info: Any, sim_job: Any, per_node: int) -> int:
        """``useful_count`` of the job's rates on the fewest machines, under the JobInfo's
        ``max_replicas``; found again when that cap changes."""
        cap = max(1, min(int(info.max_replicas), MAX_REPLICAS))
        found = self._useful.get(name)
        if found is None or found[0] != cap:
            rates = [progress_rate(sim_job, packed(w, per_node)) for w in range(1, cap + 1)]
            found = self._useful[name] = (cap, useful_count(rates) if rates[0] else 1)
        return found[1]


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


def make_adapter(sim: types.SimpleNamespace, policy: Any, mode: str, *, slot_seconds: float = 60,
                 lookahead: int = 8, clock: Callable[[], float],
                 sim_jobs: Callable[[], Mapping[str, Any]]) -> PolluxAdapter:
    """``policy`` (one of ours) dressed as the peer's policy class of ``mode``.

    ``clock`` gives the simulator's current time (s); ``sim_jobs`` its jobs by name (the
    cluster's truth: progress, application, batch size), as a cluster manager reports it."""
    if mode not in MODES:
        raise PeerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    module, cls_name = MODES[mode]
    base = getattr(getattr(sim, module), cls_name)
    cls = type(f"Placement{cls_name}", (PolluxAdapter, base), {})
    adapter = cls.__new__(cls)
    adapter._setup(policy, mode, slot_seconds, lookahead, clock, sim_jobs)
    return adapter


# ----- one run -------------------------------------------------------------------------------
def read_workload(path: str | os.PathLike) -> Any:
    """The workload as the simulator reads it (a DataFrame), checked first: one line per
    problem, naming the file and the row."""
    import pandas
    path = Path(path)
    try:
        frame = pandas.read_csv(path)
    except FileNotFoundError:
        raise PeerError(f"{path}: no such workload file") from None
    except (OSError, UnicodeDecodeError, pandas.errors.ParserError, pandas.errors.EmptyDataError) as exc:
        raise PeerError(f"{path}: cannot read the workload: {str(exc).splitlines()[0]}") from None
    need = ("name", "time", "application", "num_replicas", "batch_size")
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise PeerError(f"{path}: missing column(s) {', '.join(missing)} (need {','.join(need)})")
    return frame


def _check_rows(frame: Any, path: Path, apps: Mapping[str, Any], gpus: int) -> None:
    for i, row in enumerate(frame.itertuples(), start=2):
        where = f"{path}:row {i}"
        if row.application not in apps:
            raise PeerError(f"{where}:application: unknown {row.application!r} "
                            f"(the traces have {', '.join(sorted(apps))})")
        for col in ("time", "num_replicas", "batch_size"):
            v = getattr(row, col)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (
                    col != "time" and (v < 1 or v != int(v))):
                raise PeerError(f"{where}:{col}: must be a {'number >= 0' if col == 'time' else 'whole number >= 1'}, got {v!r}")
        app = apps[row.application]
        lo, hi = min(app.validation), max(app.validation)
        if not lo <= row.batch_size <= hi:
            raise PeerError(f"{where}:batch_size: {row.batch_size} is outside the measured "
                            f"{lo}..{hi} of {row.application}")
        if row.num_replicas > gpus:
            raise PeerError(f"{where}:num_replicas: {row.num_replicas} GPUs, more than the "
                            f"cluster's {gpus}")
    if frame.name.duplicated().any():
        raise PeerError(f"{path}: duplicate job name {frame.name[frame.name.duplicated()].iloc[0]!r}")


def run(simulator: str | os.PathLike, workload: str | os.PathLike, mode: str, policy: str, *,
        nodes: int = 16, gpus: int = 4, interval: int = 60, lookahead: int = 8,
        max_hours: float = 24 * 30, progress: bool = False) -> dict[str, Any]:
    """Play ``workload`` in the simulator with ``policy`` (ours by registry name, or
    ``peer:tiresias|optimus|pollux``) in ``mode``; the run's JCTs and decision times."""
    if mode not in MODES:
        raise PeerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if policy in PEER_POLICIES and PEER_POLICIES[policy] != mode:
        raise PeerError(f"{policy} runs only in mode {PEER_POLICIES[policy]} (its own jobs' behaviour)")
    warnings.filterwarnings("ignore", category=FutureWarning)  # the peer's pandas idioms
    sim = load_simulator(simulator)
    frame = read_workload(workload)
    if min(nodes, gpus, interval, lookahead) < 1:
        raise PeerError(f"nodes, gpus, interval and lookahead must be >= 1, got {nodes}, {gpus}, "
                        f"{interval}, {lookahead}")
    _check_rows(frame, Path(workload), sim.applications.APPLICATIONS, nodes * gpus)
    holder: dict[str, Any] = {}
    clock = lambda: holder["cluster"].current_time  # noqa: E731
    times: list[float] = []
    if policy in PEER_POLICIES:
        peer = {"peer:tiresias": lambda: sim.tiresias.TiresiasPolicy(clock),
                "peer:optimus": sim.optimus.OptimusPolicy,
                "peer:pollux": sim.pollux.PolluxPolicy}[policy]()
        inner = peer.optimize

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            out = inner(*args, **kwargs)
            times.append(time.perf_counter() - start)
            return out
        peer.optimize = timed
        agent: Any = peer
    else:
        if policy not in POLICIES:
            raise PeerError(f"unknown policy {policy!r}; choose from "
                            f"{', '.join([*POLICIES, *PEER_POLICIES])}")
        ours = POLICIES[policy](**ARENA_OPTIONS.get(policy, {}))
        agent = make_adapter(sim, ours, mode, slot_seconds=interval, lookahead=lookahead, clock=clock,
                             sim_jobs=lambda: {j.name: j for j in holder["cluster"].jobs})
        times = agent.decision_seconds
    cluster = sim.simulator.Cluster(frame, agent, nodes, num_gpus=gpus)
    holder["cluster"] = cluster
    bar = _bar(len(cluster.jobs), f"{Path(workload).stem} {mode} {policy}", progress)
    start = time.perf_counter()
    done = 0
    counts: dict[str, set[int]] = {}
    while not cluster.all_complete() and cluster.current_time < max_hours * 3600:
        with contextlib.redirect_stdout(io.StringIO()):
            cluster.step(interval)
        for name, alloc in cluster.allocations.items():
            counts.setdefault(name, set()).add(len(alloc))
        now = sum(j.completion_time is not None for j in cluster.jobs)
        if bar is not None:
            bar.update(now - done)
        done = now
    if bar is not None:
        bar.close()
    wall = time.perf_counter() - start
    jcts = {j.name: float(j.completion_time - j.submission_time) for j in cluster.jobs
            if j.completion_time is not None}
    unfinished = [j.name for j in cluster.jobs if j.completion_time is None]
    return {"workload": Path(workload).stem, "mode": mode, "policy": policy,
            "average_jct": statistics.fmean(jcts.values()) if jcts else None,
            "jcts": jcts, "unfinished": unfinished,
            "makespan": max((j.completion_time for j in cluster.jobs if j.completion_time is not None), default=None),
            "decision_median_s": statistics.median(times) if times else None,
            "decision_p95_s": _p95(times), "decisions": len(times), "wall_s": wall,
            "restarts": sum((j.num_restarts or 0) for j in cluster.jobs),
            "replica_counts": {j: sorted(c) for j, c in counts.items()},
            "drops": getattr(getattr(agent, "_scheduler", None), "drops_total", 0)}


def _p95(xs: list[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(math.ceil(0.95 * len(s))) - 1)]


def _bar(total: int, desc: str, on: bool) -> Any:
    if not on:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="job", file=sys.stderr, leave=False)


def main(argv: list[str] | None = None) -> int:
    """The runner's command line (run inside the simulator's environment)."""
    ap = argparse.ArgumentParser(prog="python -m placement.integrations.pollux",
                                 description="Run one policy on one workload in the Pollux simulator.")
    ap.add_argument("--simulator", required=True, help="the simulator folder (user's checkout)")
    ap.add_argument("--workload", required=True, help="workload CSV (name,time,application,num_replicas,batch_size)")
    ap.add_argument("--mode", required=True, choices=list(MODES))
    ap.add_argument("--policy", required=True, help="one of ours by registry name, or peer:tiresias|optimus|pollux")
    ap.add_argument("--out", required=True, help="JSON file for the run")
    ap.add_argument("--interval", type=int, default=60)
    ap.add_argument("--lookahead", type=int, default=8)
    ap.add_argument("--max-hours", type=float, default=24 * 30)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        result = run(args.simulator, args.workload, args.mode, args.policy, interval=args.interval,
                     lookahead=args.lookahead, max_hours=args.max_hours, progress=args.progress)
    except PeerError as exc:
        print(f"placement: error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
