"""The ``placement simulate`` command's arguments, its input (``--trace``), where its
LP policies' partitions run (``--executor``; docs/online.md, "Partitions on a Dask
cluster") and its ``--bound`` lines. Kept beside ``cli.py`` so that file stays small; it
parses and opens, the library decides."""
from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from placement.online.knowledge import INFORMATION

if TYPE_CHECKING:
    from placement.simulate.result import SimulationResult

DASK_HINT = 'pip install "placement[dask]"'


class ExecutorUnavailable(Exception):
    """``--executor dask`` cannot start (dask missing, scheduler unreachable, flags that do
    not go together): one line for the user."""


def add_simulate_arguments(p: argparse.ArgumentParser) -> None:
    """Every ``placement simulate`` flag."""
    p.add_argument("--trace", required=True,
                   help="a job-list CSV (shipped: instances/traces/philly-30-s3.csv, with --cluster "
                        "racks:4x8), an instance JSON, 'philly' (the full Philly log, not shipped: "
                        "--philly-path), or pollux:WORKLOAD_CSV (a Pollux simulator workload)")
    p.add_argument("--sample", type=int, default=200, help="philly: jobs to sample (default 200)")
    p.add_argument("--seed", type=int, default=0, help="sampling and progress-noise seed")
    p.add_argument("--philly-path", default=None, help="philly.csv (default: $PLACEMENT_PHILLY or ../shared)")
    p.add_argument("--time-scale", type=float, default=1.0, help="philly: compress inter-arrival gaps")
    p.add_argument("--cluster", default=None, help="racks:RxM, star:N, pai:N or an instance file (default: the instance's; "
                   "pollux: 16 machines x 4 GPUs, no network limit)")
    p.add_argument("--policy", action="append", default=None,
                   help="policy name (repeatable) or 'all'; default lp-rounding")
    p.add_argument("--slot-seconds", type=float, default=None,
                   help="slot length (default 300; 60 for pollux:, the simulator's interval)")
    p.add_argument("--pollux-traces", default=None, metavar="DIR",
                   help="pollux: the simulator's traces/ (default: traces/ beside WORKLOAD_CSV "
                        "or beside its folder, as in the simulator's checkout)")
    p.add_argument("--pollux-mode", default="fixed", choices=["fixed", "tuned"],
                   help="pollux: each job's GPUs fixed at num_replicas (Tiresias) or 1..knee "
                        "(Optimus); default fixed")
    p.add_argument("--lookahead", type=int, default=8)
    p.add_argument("--mode", default="reoptimise", choices=["reoptimise", "commit"])
    p.add_argument("--horizon", type=int, default=None, help="cap on simulated slots")
    p.add_argument("--noise", type=float, default=0.0, help="progress lag of the cluster's truth (0..1)")
    p.add_argument("--information", choices=INFORMATION, default="oracle",
                   help="what the scheduler is told of job lengths: the truth (oracle, the default), a "
                        "user's estimate, or nothing but the sizes of finished jobs (docs/model.md)")
    p.add_argument("--estimate-error", type=float, default=0.0, metavar="SIGMA",
                   help="--information estimate: users' estimates are the truth times exp(SIGMA N(0,1)), "
                        "seeded by --seed (default 0: exact estimates)")
    p.add_argument("--event", action="append", default=[], help="T:remove:M, T:repair:M or T:restart")
    p.add_argument("--out", metavar="JSON", help="write every policy's metrics here")
    p.add_argument("--bound", action="store_true",
                   help="also print lower bounds on the average JCT (no-contention floor, pooled LP: "
                        "placement.bounds.pooled_bound) and how far above them each policy ends")
    p.add_argument("--plot", metavar="DIR", help="JCT CDF and utilisation plots")
    p.add_argument("--progress", action="store_true",
                   help="show a progress bar even when stderr is not a terminal (it is on in a terminal)")
    p.add_argument("--executor", default="local", choices=["local", "processes", "dask"],
                   help="where the LP policies' partitions are solved: threads here (default), worker "
                        f"processes here (faster on many partitions), or a Dask cluster ({DASK_HINT}); "
                        "the decisions are the same")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="processes: worker processes (default: the core count)")
    p.add_argument("--scheduler", default=None, metavar="tcp://HOST:8786",
                   help="dask: a running Dask scheduler (default: start a local cluster of --dask-workers)")
    p.add_argument("--dask-workers", type=int, default=None, metavar="N",
                   help="dask without --scheduler: processes of the local cluster, one thread each "
                        "(default: the core count)")


@contextmanager
def partitions_on(args: argparse.Namespace, policies: Sequence) -> Iterator[None]:
    """With ``--executor dask``, the policies that take an executor (the LP ones) solve
    their partitions through one Dask client for the whole command: of the scheduler at
    ``--scheduler``, else of a local cluster of ``--dask-workers`` processes, closed (with
    the cluster) at the end. With ``processes``, through one
    :class:`placement.online.partition_pool.PartitionPool` of ``--workers`` processes.
    With ``local`` they keep their thread pools."""
    if args.executor != "dask" and (args.scheduler or args.dask_workers is not None):
        raise ExecutorUnavailable("--scheduler and --dask-workers need --executor dask")
    if args.executor != "processes" and args.workers is not None:
        raise ExecutorUnavailable("--workers needs --executor processes")
    if args.executor == "local":
        yield
        return
    if args.executor == "processes":
        if args.workers is not None and args.workers < 1:
            raise ExecutorUnavailable(f"--workers must be >= 1, got {args.workers}")
        from placement.online.partition_pool import PartitionPool

        with PartitionPool(args.workers) as pool, _executor_of(policies, pool):
            yield
        return
    if args.scheduler and args.dask_workers is not None:
        raise ExecutorUnavailable("--dask-workers sizes a local cluster; with --scheduler the workers "
                                  "are that cluster's")
    if args.dask_workers is not None and args.dask_workers < 1:
        raise ExecutorUnavailable(f"--dask-workers must be >= 1, got {args.dask_workers}")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ExecutorUnavailable(f"--executor dask needs dask.distributed: {DASK_HINT}") from None
    cluster = None
    try:
        if args.scheduler:
            client = Client(args.scheduler, timeout=10)
        else:
            cluster = LocalCluster(n_workers=args.dask_workers or os.cpu_count() or 1, threads_per_worker=1,
                                   processes=True, dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise ExecutorUnavailable(f"cannot reach the Dask scheduler at {args.scheduler}: {exc}") from None
    try:
        with _executor_of(policies, client):
            yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


@contextmanager
def _executor_of(policies: Sequence, executor) -> Iterator[None]:
    """The policies that take an executor (the LP ones) use ``executor`` meanwhile."""
    users = [policy for policy in policies if hasattr(policy, "executor")]
    try:
        for policy in users:
            policy.executor = executor
        yield
    finally:
        for policy in users:
            policy.executor = None


def simulation_input(args: argparse.Namespace):
    """(jobs or instance, topology or None, slot_seconds) from ``--trace``. Bad input raises
    ValueError (a FileFormatError names its file and place), a missing file FileNotFoundError."""
    from placement.model.cluster_spec import parse_cluster
    from placement.model.instance import Instance
    from placement.model.strict_json import FileFormatError
    from placement.traces import pollux_cluster, read_joblist, read_philly, read_pollux_workload

    if args.trace.startswith("pollux:"):
        # The Pollux simulator's workload: its 60-s interval and 16 x 4-GPU cluster by default.
        workload = Path(args.trace[len("pollux:"):])
        here = workload.resolve().parent
        traces = args.pollux_traces or next(
            (d for d in (here / "traces", here.parent / "traces") if d.is_dir()), here / "traces")
        slot = args.slot_seconds if args.slot_seconds is not None else 60.0
        return (read_pollux_workload(workload, traces, args.pollux_mode, slot_seconds=slot),
                pollux_cluster(), slot)
    slot = args.slot_seconds if args.slot_seconds is not None else 300.0
    if args.trace == "philly":
        return (read_philly(args.philly_path, sample=args.sample, seed=args.seed,
                            slot_seconds=slot, time_scale=args.time_scale),
                None, slot)
    if args.trace.endswith(".csv"):
        cluster = parse_cluster(args.cluster) if args.cluster else None
        return read_joblist(args.trace, cluster=cluster), None, slot
    try:
        instance = Instance.load(args.trace)
    except FileFormatError as exc:
        raise ValueError(str(exc) if exc.path == args.trace else f"{args.trace}: {exc}") from None
    return instance, instance.topology, instance.slot_seconds


def bound_lines(results: Mapping[str, SimulationResult]) -> str:
    """The average-JCT lower bounds of the runs' instance (the longest run's: a run that finished
    earlier keeps its score on it) and how far above the larger one that holds each run ends."""
    from placement.bounds.pooled_bound import MAX_CONFIGURATIONS, average_jct_bounds

    bounds = average_jct_bounds(max(results.values(), key=lambda r: r.instance.horizon).instance)
    if bounds.pooled is not None:
        pooled = f"{bounds.pooled:.6g} s"
    elif bounds.size > MAX_CONFIGURATIONS:
        pooled = f"skipped ({bounds.size:,} configurations, more than {MAX_CONFIGURATIONS:,})"
    else:
        pooled = "not solved to optimality"
    lines = [f"lower bounds on the average JCT: no-contention floor {bounds.floor:.6g} s (schedules that "
             f"finish every job), pooled LP {pooled} (every valid schedule)"]
    for name, r in results.items():
        lower = bounds.for_run(finished_all=not r.unfinished)
        unfinished = f"; {len(r.unfinished)} unfinished, so the floor does not hold" if r.unfinished else ""
        lines.append(f"  {name:<12} " + ("no bound holds" if lower is None else
                                         f"{r.average_jct / lower - 1:>8.1%} above the larger bound that holds")
                     + unfinished)
    return "\n".join(lines)
