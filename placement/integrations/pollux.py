"""The peer arena's runner: one policy on one workload in the Pollux paper's simulator.

The benchmark (``benchmarks/peer_pollux.py``) calls it in the simulator's environment:
``python -m placement.integrations.pollux --simulator DIR --workload CSV --mode fixed
--policy greedy --out run.json`` (``--help`` for the rest). It imports the simulator from
the user's checkout (:func:`load_simulator`; nothing of it is copied here), checks the
workload row by row, plays it with one of our policies dressed as the peer's policy
class (:mod:`placement.integrations.pollux_adapter`, which says what the translation
keeps and loses) or with one of the peer's own policies, and writes the run's JCTs and
decision times as JSON. Kept apart from the adapter because it measures the peer's own
policies too, and its code is part of the key of every cached peer run.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import sys
import time
import types
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from placement.integrations.pollux_adapter import DEFAULT_SOURCE, MODES, SOURCES, PeerError, make_adapter
from placement.online.knowledge import INFORMATION
from placement.online.registry import POLICIES

__all__ = ["ARENA_OPTIONS", "PEER_PACKAGES", "PEER_POLICIES", "load_simulator", "main",
           "read_workload", "run"]

#: the peer's own policies, by the name the benchmark gives them, and their mode.
PEER_POLICIES = {"peer:tiresias": "fixed", "peer:optimus": "tuned", "peer:pollux": "adaptive"}
#: what each peer knows of a job's length (its paper): Tiresias and Pollux only what a job
#: has attained; Optimus+Oracle its true remaining work. Our policies run at the peer's
#: information in the arena's default plan.
PEER_INFORMATION = {"peer:tiresias": "none", "peer:optimus": "oracle", "peer:pollux": "none"}
#: constructor options our policies take in the arena: the constants of the peer's own
#: implementation of the same policy, so that only the code differs (the Pollux artifact's
#: tiresias.py: ``_queue_threshold = 3600 * 16`` GPU-seconds, ``_solve_starvation = 0``).
ARENA_OPTIONS: dict[str, dict[str, Any]] = {
    "tiresias": {"thresholds": (3600.0 * 16,), "promote_knob": None}}
#: what the peer needs beside our package, for the messages that say how to install it.
PEER_PACKAGES = '"numpy<2" "pandas<2" scipy "pymoo==0.4.2.1"'


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
        max_hours: float = 24 * 30, progress: bool = False,
        speed_source: str | None = None, information: str = "oracle", estimate_error: float = 0.0,
        seed: int = 0) -> dict[str, Any]:
    """Play ``workload`` in the simulator with ``policy`` (ours by registry name, or
    ``peer:tiresias|optimus|pollux``) in ``mode``; the run's JCTs and decision times.
    ``speed_source``: where our policies' speed tables come from (the adapter's
    ``SOURCES``; None: the mode's ``DEFAULT_SOURCE``). ``information``: what our policies
    are told of job lengths (``oracle``, ``estimate`` with users' estimates the truth times
    exp(``estimate_error`` N(0,1)) seeded by ``seed``, or ``none``); a peer reads what it reads."""
    if mode not in MODES:
        raise PeerError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if policy in PEER_POLICIES and PEER_POLICIES[policy] != mode:
        raise PeerError(f"{policy} runs only in mode {PEER_POLICIES[policy]} (its own jobs' behaviour)")
    if policy in PEER_POLICIES and speed_source is not None:
        raise PeerError(f"--speed-source is for our policies; {policy} reads what it reads")
    if policy in PEER_POLICIES and information != "oracle":
        raise PeerError(f"--information is for our policies; {policy} knows what its paper says it knows")
    if speed_source is not None and speed_source not in SOURCES:
        raise PeerError(f"unknown speed source {speed_source!r}; choose from {', '.join(SOURCES)}")
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
        speed_source = speed_source or DEFAULT_SOURCE[mode]
        agent = make_adapter(sim, ours, mode, slot_seconds=interval, lookahead=lookahead, clock=clock,
                             sim_jobs=lambda: {j.name: j for j in holder["cluster"].jobs},
                             source=speed_source, information=information, estimate_error=estimate_error,
                             seed=seed)
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
            "speed_source": speed_source, "information": information if policy not in PEER_POLICIES
            else PEER_INFORMATION[policy], "estimate_error": estimate_error,
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
    ap.add_argument("--speed-source", choices=list(SOURCES), default=None,
                    help="where our policies' speed tables come from: the traces (progress rate "
                         "on each placement) or the JobInfo's speedup_fn; default "
                         + ", ".join(f"{m}: {s}" for m, s in DEFAULT_SOURCE.items()))
    ap.add_argument("--information", choices=INFORMATION, default="oracle",
                    help="what our policy is told of job lengths (docs/model.md); default oracle")
    ap.add_argument("--estimate-error", type=float, default=0.0, metavar="SIGMA",
                    help="--information estimate: the truth times exp(SIGMA N(0,1)), seeded by --seed")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        result = run(args.simulator, args.workload, args.mode, args.policy, interval=args.interval,
                     lookahead=args.lookahead, max_hours=args.max_hours, progress=args.progress,
                     speed_source=args.speed_source, information=args.information,
                     estimate_error=args.estimate_error, seed=args.seed)
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
