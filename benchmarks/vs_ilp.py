"""Rounding vs greedy vs the exact referee, against the proven bounds, on the benchmark suites in one run.

Usage: python benchmarks/vs_ilp.py [--suites small medium busy large] [--time-limit 600]
       [--suite-limit large=1200] [--workers 2] [--executor local|dask] [--scheduler ADDRESS]
       [--limit N] [--out benchmarks/VS_ILP.md]

For every instance of instances/bench/<suite>/, each scored by placement.model.evaluate:
- the time-indexed LP bound (the model `placement solve` picks by size) and the column bound
  (placement.bounds.column_bound: whole-job schedules, every round a proven Lagrangian bound);
- rounding (seed 0; its certificate's bound is the stronger of the two) and greedy;
- the exact referee (`placement solve --solver exact`): the best of rounding, greedy and the column
  plan as its start, the ILP only when the start does not meet the bound; its status, incumbent,
  proven bound and gap.
Instances run side by side on a local process pool (--workers) or a Dask cluster (--executor dask:
a LocalCluster of --workers processes, or the scheduler at --scheduler). Writes a markdown report
with the issue's targets checked, a JSON file of every row, and a plot of rounding / bound against size.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_LIMITS = {"small": 60.0}  # seconds for the exact referee; other suites: --time-limit


def run_one(path: str, time_limit: float, trials: int) -> dict:
    """Every method on one instance (runs in a worker process)."""
    from placement.chain import Chain, ChainStop, Formulate, SolveLP
    from placement.formulation import FORMULATIONS
    from placement.bounds.column_bound import column_bound
    from placement.model.instance import Instance
    from placement.offline.solve import AUTO_PER_MACHINE_LIMIT, solve

    inst = Instance.load(path)
    row: dict = {"instance": Path(path).stem, "jobs": len(inst.jobs), "machines": len(inst.topology.machines),
                 "slots": inst.horizon, "time_limit": time_limit}
    triples = sum(inst.horizon - j.arrival for j in inst.jobs) * len(inst.topology.machines)
    model = "per-machine" if triples <= AUTO_PER_MACHINE_LIMIT else "aggregated"
    start = time.perf_counter()
    try:
        row["lp_bound"] = Chain([Formulate(FORMULATIONS[model]), SolveLP()]).apply(inst).trace.bound
    except ChainStop:
        row["lp_bound"] = None
    row["lp_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    cb = column_bound(inst, time_limit=60.0)
    row["column_seconds"] = time.perf_counter() - start
    row["column_bound"] = None if cb is None else cb.bound
    row["column_source"] = None if cb is None else cb.source
    for solver in ("rounding", "greedy", "exact"):
        start = time.perf_counter()
        sol = solve(inst, solver=solver, seed=0, trials=trials, bound=solver != "greedy",
                    time_limit=time_limit if solver == "exact" else None)
        row[f"{solver}_seconds"] = time.perf_counter() - start
        row[f"{solver}_objective"] = sol.objective
        row[f"{solver}_status"] = sol.certificate.status.value
        row[f"{solver}_bound"] = sol.certificate.lower_bound
        row[f"{solver}_bound_source"] = sol.certificate.bound_source
        row[f"{solver}_timings"] = sol.certificate.timings
        if solver == "exact":
            row["exact_message"] = sol.certificate.message
            row["exact_is_exact"] = sol.certificate.exact
    return row


def gap(objective: float | None, bound: float | None) -> float | None:
    return None if objective is None or bound is None or objective <= 0 else (objective - bound) / objective


def fmt(x: float | None, spec: str = ".6g") -> str:
    return "" if x is None else format(x, spec)


def report(rows: dict[str, list[dict]], args: argparse.Namespace, wall: float, load: tuple) -> str:
    from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)

    out = ["# Rounding vs greedy vs the exact referee, against proven bounds", "",
           f"Command: `python benchmarks/vs_ilp.py {' '.join(sys.argv[1:])}`".replace("  ", " "),
           f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
           f"{args.workers} instances at a time ({args.executor}); run took {wall / 60:.1f} min; "
           f"load average at the start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}.", "",
           "Objective: MODEL.md weighted total JCT (seconds), lower is better; every schedule scored by "
           "`placement.model.evaluate`. LP bound: the time-indexed LP relaxation. Column bound: "
           "`placement.bounds.column_bound` (60 s cap). Rounding: seed 0, 32 trials, its certificate's bound the "
           "stronger of the two. Exact: `placement solve --solver exact` — start = best of rounding, greedy "
           "and the column plan; the HiGHS ILP (1 thread, from that start) only when the start does not meet "
           "the bound; its bound is the best of the column bound and the ILP's. Gap = (objective - bound) / "
           "objective.", ""]
    for suite, rs in rows.items():
        out += [f"## Suite `{suite}` ({len(rs)} instances, exact limit {rs[0]['time_limit']:g} s)" if rs else
                f"## Suite `{suite}` (no instances)", "",
                "| instance | jobs | machines | slots | LP bound | column bound | rounding | greedy | exact (status) "
                "| exact bound | exact gap | rounding gap | rounding / exact | column s | rounding s | exact s |",
                "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            best = max(filter(None, (r["column_bound"], r["lp_bound"], r["exact_bound"])), default=None)
            ratio = (r["rounding_objective"] / r["exact_objective"]
                     if r["exact_objective"] and r["rounding_objective"] else None)
            out.append(f"| {r['instance']} | {r['jobs']} | {r['machines']} | {r['slots']} | {fmt(r['lp_bound'])} | "
                       f"{fmt(r['column_bound'])} | {fmt(r['rounding_objective'])} | {fmt(r['greedy_objective'])} | "
                       f"{fmt(r['exact_objective'])} ({r['exact_status']}) | {fmt(r['exact_bound'])} | "
                       f"{fmt(gap(r['exact_objective'], r['exact_bound']), '.2%')} | "
                       f"{fmt(gap(r['rounding_objective'], best), '.2%')} | {fmt(ratio, '.4f')} | "
                       f"{r['column_seconds']:.2f} | {r['rounding_seconds']:.2f} | {r['exact_seconds']:.1f} |")
        out += ["", *summary(rs), ""]
    out += ["![rounding over the best proven bound, against size](vs_ilp_gap.png)", ""]
    return "\n".join(out) + "\n"


def summary(rs: list[dict]) -> list[str]:
    if not rs:
        return []
    proven = [r for r in rs if r["exact_objective"] is not None and r["exact_bound"] is not None
              and gap(r["exact_objective"], r["exact_bound"]) <= 0.01]
    optimal = [r for r in rs if r["exact_status"] == "optimal"]
    fast = [r for r in proven if r["exact_seconds"] <= 600]
    lines = [f"Exact proven optimal on {len(optimal)} of {len(rs)}; within 1% on {len(proven)} of {len(rs)} "
             f"({len(fast)} within 10 min; target >= 10 of 12 on medium)."]
    on = [r["rounding_objective"] / r["exact_objective"] for r in optimal]
    if on:
        lines.append(f"Rounding / proven optimum: median {statistics.median(on):.4f}, max {max(on):.4f} "
                     "(target median <= 1.02, max <= 1.10).")
    lp = [g for r in rs if (g := gap(r["rounding_objective"], r["lp_bound"])) is not None]
    col = [g for r in rs if (g := gap(r["rounding_objective"], r["rounding_bound"])) is not None]
    if lp and col:
        lines.append(f"Certificate gap of rounding (its printed bound): median {statistics.median(col):.2%}, "
                     f"max {max(col):.2%} (target median <= 5% on medium); with the LP bound alone it would be "
                     f"median {statistics.median(lp):.2%}.")
    rg = [r["rounding_objective"] / r["greedy_objective"] for r in rs]
    lines.append(f"Rounding / greedy: median {statistics.median(rg):.4f}, worse than greedy on "
                 f"{sum(x > 1 + 1e-9 for x in rg)} of {len(rs)}.")
    speed = [r["exact_seconds"] / r["rounding_seconds"] for r in proven]
    if speed:
        lines.append(f"Exact referee time / rounding time where exact proved 1%: median {statistics.median(speed):.1f}x "
                     f"(rounding includes its column bound; the referee includes rounding as its start).")
    return lines


def plot(rows: dict[str, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for suite, rs in rows.items():
        pts = [(r["jobs"] * r["machines"], r["rounding_objective"] / b) for r in rs
               if (b := max(filter(None, (r["column_bound"], r["lp_bound"], r["exact_bound"])), default=None))]
        old = [(r["jobs"] * r["machines"], r["rounding_objective"] / r["lp_bound"]) for r in rs if r["lp_bound"]]
        if pts:
            line = ax.scatter(*zip(*pts), s=18, label=f"{suite}: best proven bound")
            ax.scatter(*zip(*old), s=18, marker="x", color=line.get_facecolor()[0], alpha=0.5,
                       label=f"{suite}: LP bound only")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("jobs x machines")
    ax.set_ylabel("rounding objective / lower bound")
    ax.set_title("How far rounding can be from the optimum, by size")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_all(jobs: list[tuple[str, str, float]], args: argparse.Namespace) -> dict[str, list[dict]]:
    """Every (suite, path, limit) on the pool or the Dask cluster, with a progress bar."""
    results: dict[str, dict[str, dict]] = {}
    bar = tqdm(total=len(jobs), unit="instance")
    if args.executor == "dask":
        from dask.distributed import Client, LocalCluster, as_completed as dask_completed

        cluster = None if args.scheduler else LocalCluster(n_workers=args.workers, threads_per_worker=1,
                                                           processes=True)
        with Client(args.scheduler or cluster) as client:
            futures = {client.submit(run_one, p, lim, args.trials, pure=False): (s, p) for s, p, lim in jobs}
            for fut in dask_completed(futures):
                suite, p = futures[fut]
                results.setdefault(suite, {})[p] = fut.result()
                bar.update()
        if cluster is not None:
            cluster.close()
    else:
        with ProcessPoolExecutor(args.workers) as pool:
            futures = {pool.submit(run_one, p, lim, args.trials): (s, p) for s, p, lim in jobs}
            for fut in as_completed(futures):
                suite, p = futures[fut]
                results.setdefault(suite, {})[p] = fut.result()
                bar.update()
    bar.close()
    return {suite: [results[suite][p] for s, p, _ in jobs if s == suite] for suite in dict.fromkeys(s for s, _, _ in jobs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", default=["small", "medium", "busy", "large"])
    ap.add_argument("--time-limit", type=float, default=600.0, help="exact referee limit per instance (s)")
    ap.add_argument("--suite-limit", nargs="*", default=[], metavar="SUITE=SECONDS",
                    help="a suite's own exact limit (default: small=60, others --time-limit)")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2, help="instances solved at a time")
    ap.add_argument("--executor", choices=("local", "dask"), default="local")
    ap.add_argument("--scheduler", default=None, help="a Dask scheduler address (with --executor dask)")
    ap.add_argument("--limit", type=int, default=None, help="at most N instances per suite (a quick look)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "VS_ILP.md"))
    args = ap.parse_args()
    limits = {**DEFAULT_LIMITS, **{k: float(v) for k, v in (s.split("=", 1) for s in args.suite_limit)}}
    jobs = []
    for suite in args.suites:
        paths = sorted(p for p in (ROOT / "instances" / "bench" / suite).glob("*.json"))[: args.limit]
        jobs += [(suite, str(p), limits.get(suite, args.time_limit)) for p in paths]
    load = os.getloadavg()
    start = time.perf_counter()
    rows = run_all(jobs, args)
    out = Path(args.out)
    out.write_text(report(rows, args, time.perf_counter() - start, load))
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    plot(rows, out.with_name("vs_ilp_gap.png"))
    print(out.read_text())
    import report as full_report  # benchmarks/report.py: REPORT.md and results.json from every output
    full_report.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
