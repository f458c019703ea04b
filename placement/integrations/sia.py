"""The Sia arena's runner: one peer policy on one workload in the Sia paper's simulator.

The benchmark (``benchmarks/peer_sia.py``) calls it in the simulator's own environment
(``numpy==1.23.5 pandas==1.5.3 cvxpy==1.4.4 cylp`` ...; docs/sia_arena.md):
``python -m placement.integrations.sia --simulator DIR --workload CSV --policy peer:sia
--out run.json``. It plays the workload through the simulator's own command line, the
driver script (``multi_simulator.py`` or ``multi_simulator_unaware.py``) run as
``__main__`` with ``run_experiment.sh``'s flags, so that nothing of the driver is
re-typed here; it only watches: the cluster class is subclassed to keep a handle on the
cluster, time each ``policy.optimize`` call and stop at ``--max-hours``. Nothing of the
user's checkout is copied or written (no bytecode either). Config overrides for a small
machine are set on the imported ``simulator_config`` module (:data:`CONFIG_OVERRIDES`).
Kept free of the project's heavy imports: it runs where OR-Tools cannot be installed.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import runpy
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

__all__ = ["CONFIG_OVERRIDES", "DEFAULT_JOBS_LIKE", "JOBS_LIKE", "PEER_POLICIES", "SIA_PACKAGES", "SiaError", "main", "run",
           "simulator_hash"]

#: peer policy -> (driver script, its flags), verbatim from the artifact's run_experiment.sh
#: (``--project_throughput`` is argparse's prefix of ``--project_throughputs``).
PEER_POLICIES: dict[str, tuple[str, list[str]]] = {
    "peer:sia": ("multi_simulator.py", ["--policy=sia", "--policy_p_val=-0.5", "--mip_lambda_a=0.01",
                                        "--mip_lambda_n=1.1", "--interval=60", "--project_throughput",
                                        "--share_max_replicas"]),
    "peer:gavel": ("multi_simulator.py", ["--policy=gavel", "--interval=360"]),
    "peer:pollux": ("multi_simulator_unaware.py", ["--policy=pollux", "--interval=60", "--policy_p_val=-1"]),
}
#: set on ``simulator_config`` before the driver runs: one CBC thread and no process pools
#: on a 2-core machine (the artifact's defaults are 8 CBC threads and 4 traces at once),
#: and the solver's log off (it is printed by C code, only for reading).
CONFIG_OVERRIDES: dict[str, Any] = {"sia_solver_num_threads": 1, "num_parallel_traces": 1,
                                    "num_parallel_jobs": 1, "sia_solver_verbose": False}
#: the environment the simulator needs (the shared README's pins, checked on Python 3.11).
SIA_PACKAGES = ('"numpy==1.23.5" "pandas==1.5.3" "scipy==1.11.4" "cvxpy==1.4.4" "cylp==0.93.0" '
                'autograd rich psutil "pymoo==0.4.2.1"')
SIM_FILES = ("multi_simulator.py", "multi_simulator_unaware.py", "cluster.py", "cluster_unaware.py",
             "sia.py", "gavel.py", "pollux_unaware.py", "simulator_config.py", "applications.py", "traces")
COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


class SiaError(Exception):
    """One line for the user: what is wrong and how to fix it."""


class _Cap(Exception):
    """Raised from a step once the simulated clock passes ``--max-hours``."""


def simulator_hash(folder: str | os.PathLike) -> str:
    """The simulator's code and traces (its ``.py`` and ``.csv`` files outside
    ``workloads/``): part of a run's result and of the benchmark's cache key."""
    folder = Path(folder)
    h = hashlib.sha256()
    for p in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".py", ".csv")
                    and "__pycache__" not in p.parts and "workloads" not in p.relative_to(folder).parts):
        h.update(str(p.relative_to(folder)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def check_folder(folder: Path) -> None:
    """A one-line error unless ``folder`` is the Sia simulator."""
    if not folder.is_dir():
        raise SiaError(f"{folder}: no such folder; clone the Sia artifact (github.com/siasosp23/"
                       "artifacts) and pass its sia-simulator/ folder")
    missing = [f for f in SIM_FILES if not (folder / f).exists()]
    if missing:
        raise SiaError(f"{folder}: not the Sia simulator folder (missing {', '.join(missing)})")


def _load(folder: Path) -> Any:
    """Import the simulator's packages and its config from ``folder``; the config module,
    with :data:`CONFIG_OVERRIDES` set."""
    sys.dont_write_bytecode = True  # the user's checkout is left as it was
    try:
        import numpy as np
        import pandas  # noqa: F401
        import cvxpy  # noqa: F401
        import pymoo  # noqa: F401
        import rich  # noqa: F401
        import scipy  # noqa: F401
    except ImportError as exc:
        raise SiaError(f"the Sia simulator needs {exc.name}: in its environment run "
                       f"pip install {SIA_PACKAGES}") from None
    if "CBC" not in cvxpy.installed_solvers():
        raise SiaError("cvxpy has no CBC solver (Sia's MIP uses it): pip install cylp==0.93.0")
    for alias, builtin in (("float", float), ("int", int), ("bool", bool)):  # removed in NumPy 1.24
        if alias not in np.__dict__:
            setattr(np, alias, builtin)
    path = str(folder.resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        import simulator_config
    except ImportError as exc:
        raise SiaError(f"cannot import the simulator from {folder}: {exc}") from None
    for key, value in CONFIG_OVERRIDES.items():
        setattr(simulator_config, key, value)
    return simulator_config


def read_workload(path: Path, apps: dict[str, dict[str, Any]], clusters: list[str]) -> Any:
    """The workload as the simulator reads it (a DataFrame), checked row by row first."""
    import pandas
    try:
        frame = pandas.read_csv(path)
    except FileNotFoundError:
        raise SiaError(f"{path}: no such workload file") from None
    except (OSError, UnicodeDecodeError, pandas.errors.ParserError, pandas.errors.EmptyDataError) as exc:
        raise SiaError(f"{path}: cannot read the workload: {str(exc).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise SiaError(f"{path}: missing column(s) {', '.join(missing)} (need {','.join(COLUMNS)})")
    if frame.empty:
        raise SiaError(f"{path}: no jobs")
    known = set.intersection(*(set(apps[c]) for c in clusters))
    for i, row in enumerate(frame.itertuples(), start=2):
        where = f"{path}:row {i}"
        if row.application not in known:
            raise SiaError(f"{where}:application: unknown {row.application!r} (the traces have "
                           f"{', '.join(sorted(known))})")
        for col in ("time", "num_replicas", "batch_size"):
            v = getattr(row, col)
            whole = col != "time"
            if (not isinstance(v, (int, float)) or not math.isfinite(v) or v < (1 if whole else 0)
                    or (whole and v != int(v))):
                raise SiaError(f"{where}:{col}: must be a {'whole number >= 1' if whole else 'number >= 0'}"
                               f", got {v!r}")
    if frame.name.duplicated().any():
        raise SiaError(f"{path}: duplicate job name {frame.name[frame.name.duplicated()].iloc[0]!r}")
    return frame


@contextlib.contextmanager
def _quiet() -> Any:
    """Send fd 1 to /dev/null: the driver prints a table every round and CBC prints from C."""
    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def _watch(base: type, rec: dict[str, Any], limit_s: float, tick: Callable[[Any], None]) -> type:
    """``base`` (the simulator's cluster class) that records itself in ``rec``, times its
    policy's ``optimize`` and stops after ``limit_s`` simulated seconds."""
    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            rec["cluster"] = self
            inner = self.policy.optimize

            def timed(*a: Any, **k: Any) -> Any:
                start = time.perf_counter()
                out = inner(*a, **k)
                rec["times"].append(time.perf_counter() - start)
                return out
            self.policy.optimize = timed

        def step(self, seconds: int = 60) -> None:
            super().step(seconds)
            tick(self)
            if self.current_time >= limit_s and not self.all_complete():
                raise _Cap
    Watched.__name__ = Watched.__qualname__ = base.__name__
    return Watched


def check(folder: Path, path: Path) -> Any:
    """The workload's DataFrame once the folder, the environment and every row are checked."""
    check_folder(folder)
    warnings.filterwarnings("ignore")  # the artifact's pandas/NumPy idioms warn every round
    config = _load(folder)
    with _quiet():
        import applications
        import cluster  # noqa: F401  (its imports pull in cvxpy, pymoo: fail here, not mid-run)
        import cluster_unaware  # noqa: F401
    return read_workload(path, applications.APPLICATIONS, list(config.cluster_nnodes))


def versions() -> dict[str, str]:
    """The versions of the packages the simulator's figures depend on."""
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": sys.version.split()[0]}
    for name in ("numpy", "pandas", "scipy", "cvxpy", "cylp", "pymoo"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    return out


#: how jobs behave when one of our policies plays (the peer whose jobs ours take, and the
#: simulator module and class that make them so); ``gavel`` plays Gavel's game by default
JOBS_LIKE = {"peer:sia": ("sia", "SiaPolicy"), "peer:gavel": ("gavel", "GavelPolicy")}
DEFAULT_JOBS_LIKE = {"gavel": "peer:gavel"}


def _ours(policy: str, jobs_like: str, rec: dict[str, Any], information: str, lookahead: int,
          slot_seconds: float) -> Callable[[], None]:
    """Put our ``policy`` in the simulator as the peer's policy class of ``jobs_like`` (so
    jobs behave as under that peer; :mod:`placement.integrations.sia_adapter`); returns the undo."""
    import importlib
    from placement.integrations.sia_adapter import make_adapter
    from placement.online.registry import make_policy
    try:
        ours = make_policy(policy)
    except ValueError as exc:
        raise SiaError(str(exc)) from None
    module, name = JOBS_LIKE[jobs_like]
    mod = importlib.import_module(module)
    saved = getattr(mod, name)
    setattr(mod, name, make_adapter(saved, ours, slot_seconds=slot_seconds, lookahead=lookahead,
                                    clock=lambda: rec["cluster"].current_time,
                                    sim_jobs=lambda: {j.name: j for j in rec["cluster"].jobs},
                                    information=information))

    def undo() -> None:
        setattr(mod, name, saved)
    return undo


def run(simulator: str | os.PathLike, workload: str | os.PathLike, policy: str, *,
        max_hours: float = 24 * 30, progress: bool = False, information: str = "none",
        lookahead: int = 8, jobs_like: str | None = None) -> dict[str, Any]:
    """Play ``workload`` with ``policy`` through the simulator's driver: a peer policy
    (:data:`PEER_POLICIES`) or one of ours (a name of ``placement.online.registry``, put in
    as the policy of the peer ``jobs_like`` with that peer's flags, so its jobs behave as
    under that peer: default ``peer:sia``, ``peer:gavel`` for our ``gavel``; told
    ``information`` of job lengths); the
    run's JCTs (the simulator's ``get_jcts``), its summary as ``utils/print_run_stats.py``
    computes it (p99: the sorted JCTs at ``int(0.99 n)``; makespan: last completion minus
    first submission), restarts and decision times."""
    peer = policy.startswith("peer:")
    if peer and policy not in PEER_POLICIES:
        raise SiaError(f"unknown peer policy {policy!r}; choose from {', '.join(PEER_POLICIES)}")
    if not max_hours > 0:
        raise SiaError(f"--max-hours must be > 0, got {max_hours}")
    folder, path = Path(simulator), Path(workload)
    frame = check(folder, path)
    import cluster as cluster_mod
    import cluster_unaware
    if peer:
        jobs_like = policy
    jobs_like = jobs_like or DEFAULT_JOBS_LIKE.get(policy, "peer:sia")
    if jobs_like not in JOBS_LIKE:
        raise SiaError(f"--jobs-like must be one of {', '.join(JOBS_LIKE)}, got {jobs_like!r}")
    script, flags = PEER_POLICIES[jobs_like]
    rec: dict[str, Any] = {"times": []}
    interval = float(next(f for f in flags if f.startswith("--interval=")).split("=")[1])
    undo = (lambda: None) if peer else _ours(policy, jobs_like, rec, information, lookahead, interval)
    bar = None
    if progress:
        from tqdm import tqdm  # noqa: PLC0415 (only when asked)
        bar = tqdm(total=len(frame), desc=f"{path.stem} {policy}", unit="job", file=sys.stderr, leave=False)

    def tick(c: Any) -> None:
        if bar is not None:
            bar.n = sum(j.completion_time is not None for j in c.jobs)
            bar.set_postfix_str(f"t={c.current_time / 3600:.1f}h", refresh=True)
    saved = (cluster_mod.Cluster, cluster_unaware.ClusterUnaware, sys.argv)
    cluster_mod.Cluster = _watch(saved[0], rec, max_hours * 3600, tick)
    cluster_unaware.ClusterUnaware = _watch(saved[1], rec, max_hours * 3600, tick)
    sys.argv = [str(folder / script), str(path), *flags]
    capped = False
    start = time.perf_counter()
    try:
        with _quiet():
            runpy.run_path(str(folder / script), run_name="__main__")
    except _Cap:
        capped = True
    except SiaError:
        raise
    except Exception as exc:  # noqa: BLE001 (the peer's own failure, told in one line)
        raise SiaError(f"the simulator failed on {path.name} with {policy}: "
                       f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    finally:
        cluster_mod.Cluster, cluster_unaware.ClusterUnaware, sys.argv = saved
        undo()
        if bar is not None:
            bar.close()
    wall = time.perf_counter() - start
    cl = rec["cluster"]
    jcts = {k: float(v) for k, v in cl.get_jcts().items()}
    unfinished = [j.name for j in cl.jobs if j.completion_time is None]
    ordered = sorted(jcts.values())
    ends = [j.completion_time for j in cl.jobs if j.completion_time is not None]
    times = rec["times"]
    avg = statistics.fmean(ordered) if ordered else None
    return {"workload": path.stem, "policy": policy, "driver": script, "flags": flags,
            "information": "none" if peer else information, "jobs_like": jobs_like,
            "config_overrides": CONFIG_OVERRIDES,
            "average_jct": avg, "average_jct_h": None if avg is None else avg / 3600,
            "p99_jct": ordered[int(0.99 * len(ordered))] if ordered else None,
            "makespan": (max(ends) - float(frame.time.min())) if ends else None,
            "jcts": jcts, "unfinished": unfinished, "capped_at_hours": max_hours if capped else None,
            "simulated_s": cl.current_time,
            "restarts": sum(j.num_restarts or 0 for j in cl.jobs),
            "decision_median_s": statistics.median(times) if times else None,
            "decision_p95_s": sorted(times)[max(0, math.ceil(0.95 * len(times)) - 1)] if times else None,
            "decisions": len(times), "wall_s": wall, "simulator_hash": simulator_hash(folder),
            "environment": versions()}


def main(argv: list[str] | None = None) -> int:
    """The runner's command line (run inside the simulator's environment)."""
    ap = argparse.ArgumentParser(prog="python -m placement.integrations.sia",
                                 description="Run one peer policy on one workload in the Sia simulator.")
    ap.add_argument("--simulator", required=True, help="the sia-simulator folder (your checkout)")
    ap.add_argument("--workload", required=True, help="workload CSV (" + ",".join(COLUMNS) + ")")
    ap.add_argument("--policy", help="a peer policy (" + ", ".join(PEER_POLICIES) + ") or one of ours, e.g. "
                    "lp-rounding, greedy, gavel (required unless --check)")
    ap.add_argument("--information", choices=("none", "oracle"), default="none",
                    help="what our policy is told of job lengths (default none: Sia's own)")
    ap.add_argument("--jobs-like", choices=list(JOBS_LIKE),
                    help="our policy's jobs behave as under this peer (default peer:sia; peer:gavel for gavel)")
    ap.add_argument("--out", help="JSON file for the run (also printed on stdout)")
    ap.add_argument("--max-hours", type=float, default=24 * 30, help="stop after this much simulated time")
    ap.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    ap.add_argument("--check", action="store_true", help="only check the folder, environment and workload")
    args = ap.parse_args(argv)
    if not args.check and not args.policy:
        ap.error("--policy is required (or --check)")
    try:
        if args.check:
            frame = check(Path(args.simulator), Path(args.workload))
            print(f"ok: {args.workload}: {len(frame)} jobs")
            return 0
        result = run(args.simulator, args.workload, args.policy, max_hours=args.max_hours,
                     progress=args.progress, information=args.information, jobs_like=args.jobs_like)
    except SiaError as exc:
        print(f"placement: error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(result, indent=1)
    if args.out:
        out = Path(args.out)
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
