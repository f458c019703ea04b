"""Speed-up of ``placement batch`` with more worker processes, for docs/batch.md.

Usage: python benchmarks/batch_speedup.py [--instances 24] [--jobs 40] [--cluster racks:4x4]
       [--workers 1 2] [--solver rounding] [--dask] [--repeat 1] [--out BATCH_SPEEDUP.md]

The defaults are CPU-bound instances (about 2.5 s each with the rounding solver on one
core), so the figure is about the pool, not about starting it.

Generates the instances (seeds 0..N-1) into a temporary directory, solves the same batch
once per configuration and repetition (round-robin, so a change in the machine's load
hits every configuration alike; a fresh CSV each time, so nothing is resumed), checks that
every run wrote the same objectives, and prints one Markdown table row per configuration
with its median wall time. The wall time includes starting the pool, as a user sees it.
"cores used" is the CPU time of this process and its (finished) children over the wall
time: when it does not grow with the workers, the machine had no spare core to give.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from placement.batch.run import run_batch
from placement.traces.generate import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--cluster", default="racks:4x4")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--solver", default="rounding")
    parser.add_argument("--dask", action="store_true", help="also run a Dask LocalCluster of the largest count")
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (median reported)")
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args()
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    load = os.getloadavg()  # other processes on the machine shrink any speed-up: report them
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "instances"
        folder.mkdir()
        for seed in range(args.instances):
            generate(jobs=args.jobs, cluster=args.cluster, seed=seed).save(folder / f"i{seed:03d}.json")
        runs = [("local", w) for w in args.workers] + ([("dask", max(args.workers))] if args.dask else [])
        say(f"Command: `python benchmarks/batch_speedup.py {' '.join(sys.argv[1:])}`\n")
        say(f"{args.instances} instances (jobs={args.jobs}, cluster={args.cluster}), solver {args.solver}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}\n")
        walls: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
        cores: dict[tuple[str, int], list[float]] = {run: [] for run in runs}
        objectives = None
        for k in range(args.repeat):
            for executor, workers in runs:
                cpu = _cpu_seconds()
                summary = run_batch([str(folder / "*.json")], solver=args.solver, executor=executor, workers=workers,
                                    out_csv=Path(tmp) / f"{executor}{workers}-{k}.csv", progress=False)
                found = {Path(r["instance"]).name: r["objective"] for r in summary.rows}
                if summary.solved != args.instances or objectives not in (None, found):
                    raise SystemExit(f"{executor} with {workers} workers: {summary.failures[:3]} or other objectives")
                objectives = found
                walls[executor, workers].append(summary.wall_seconds)
                cores[executor, workers].append((_cpu_seconds() - cpu) / summary.wall_seconds)
        base = statistics.median(walls[runs[0]])
        say(f"| executor | workers | wall (s), median of {args.repeat} | all runs (s) | speed-up | cores used |")
        say("|---|---:|---:|---|---:|---:|")
        for run, times in walls.items():
            wall = statistics.median(times)
            say(f"| {run[0]} | {run[1]} | {wall:.1f} | {', '.join(f'{t:.1f}' for t in times)} "
                f"| {base / wall:.2f}x | {statistics.median(cores[run]):.2f} |")
        say(f"\nLoad average (1 min) before {load[0]:.1f}, after {os.getloadavg()[0]:.1f}.")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("# Batch speed-up\n\n" + "\n".join(lines) + "\n")


def _cpu_seconds() -> float:
    """User + system CPU of this process and of every child that has exited."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


if __name__ == "__main__":
    main()
