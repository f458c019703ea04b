"""Rounding vs the exact ILP vs greedy on the benchmark suites, side by side in one run.

Usage: python benchmarks/vs_ilp.py [--suites small medium] [--time-limit 60] [--trials 32]
       [--limit N] [--out benchmarks/VS_ILP.md]

For every instance of instances/bench/<suite>/: the LP lower bound, the rounding pipeline
(seed 0), the greedy baseline and the exact time-indexed ILP (HiGHS, --time-limit per
instance, 1 thread), each scored by placement.evaluate. Writes a markdown report with the
targets of issue 5 checked, and a JSON file of every row beside it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from placement.instance import Instance
from placement.solve import solve

ROOT = Path(__file__).resolve().parents[1]


def run_one(path: Path, time_limit: float, trials: int, budget: float) -> dict:
    inst = Instance.load(path)
    row: dict = {"instance": path.stem, "jobs": len(inst.jobs), "machines": len(inst.topology.machines),
                 "slots": inst.horizon}
    for solver in ("rounding", "greedy", "exact"):
        start = time.perf_counter()
        limit = {"exact": time_limit, "rounding": budget}.get(solver)
        sol = solve(inst, solver=solver, seed=0, trials=trials, time_limit=limit, bound=solver == "rounding")
        row[f"{solver}_seconds"] = time.perf_counter() - start
        row[f"{solver}_objective"] = sol.objective
        row[f"{solver}_status"] = sol.certificate.status.value
        if solver == "rounding":
            row["lp_bound"] = sol.certificate.lower_bound
            row["rounding_timings"] = sol.certificate.timings
            row["rounding_model"] = sol.certificate.model
            row["rounding_realised"] = sol.certificate.valid_trials
        if solver == "exact":
            row["exact_bound"] = sol.certificate.lower_bound
            row["exact_is_exact"] = sol.certificate.exact
    return row


def ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def report(rows: dict[str, list[dict]], args: argparse.Namespace, wall: float) -> str:
    from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)

    cpu = cpu_model()
    out = ["# Rounding vs exact ILP vs greedy", "",
           f"Command: `python benchmarks/vs_ilp.py {' '.join(sys.argv[1:])}`".replace("  ", " "),
           f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; "
           f"run took {wall / 60:.1f} min.", "",
           "Objective: MODEL.md weighted total JCT (seconds), lower is better; every schedule scored by "
           "`placement.evaluate`. Exact: HiGHS MIP on the time-indexed model, "
           f"{args.time_limit:g} s limit, 1 thread. Rounding: LP relaxation (model chosen by size) + up to "
           f"{args.trials} trials (+1 most-likely) + realise, seed 0, with a budget of {args.budget:g} s "
           "(trials stop when it is spent; the LP is always finished).", ""]
    for suite, rs in rows.items():
        out += [f"## Suite `{suite}` ({len(rs)} instances)", "",
                "| instance | jobs | machines | slots | LP bound | exact (status) | rounding | greedy | "
                "rounding / exact | greedy / exact | exact s | rounding s |",
                "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in rs:
            re_, ge = ratio(r["rounding_objective"], r["exact_objective"]), ratio(r["greedy_objective"], r["exact_objective"])
            exact = f"{r['exact_objective']:.6g} ({r['exact_status']})" if r["exact_objective"] is not None else r["exact_status"]
            out.append(f"| {r['instance']} | {r['jobs']} | {r['machines']} | {r['slots']} | {r['lp_bound']:.6g} | "
                       f"{exact} | {r['rounding_objective']:.6g} | {r['greedy_objective']:.6g} | "
                       f"{'' if re_ is None else f'{re_:.4f}'} | {'' if ge is None else f'{ge:.4f}'} | "
                       f"{r['exact_seconds']:.2f} | {r['rounding_seconds']:.3f} |")
        out += ["", *summary(suite, rs, args.time_limit), ""]
    return "\n".join(out) + "\n"


def summary(suite: str, rs: list[dict], limit: float) -> list[str]:
    optimal = [r for r in rs if r["exact_status"] == "optimal"]
    lines = [f"Exact solved to proven optimality: {len(optimal)} of {len(rs)}."]
    if optimal:
        rr = [r["rounding_objective"] / r["exact_objective"] for r in optimal]
        gr = [r["greedy_objective"] / r["exact_objective"] for r in optimal]
        lines.append(f"On those, rounding / optimum: median {statistics.median(rr):.4f}, max {max(rr):.4f} "
                     f"(target median <= 1.05, max <= 1.20); greedy / optimum: median {statistics.median(gr):.4f}, "
                     f"max {max(gr):.4f}.")
    rg = [r["rounding_objective"] / r["greedy_objective"] for r in rs]
    lines.append(f"Rounding / greedy: median {statistics.median(rg):.4f} (target <= 1), "
                 f"worse than greedy on {sum(x > 1 + 1e-9 for x in rg)} of {len(rs)}.")
    lb = [r["rounding_objective"] / r["lp_bound"] for r in rs if r["lp_bound"]]
    lines.append(f"Rounding / LP bound: median {statistics.median(lb):.4f}, max {max(lb):.4f}.")
    inc = [r for r in rs if r["exact_objective"] is not None]
    not_worse = sum(r["rounding_objective"] <= r["exact_objective"] * (1 + 1e-9) for r in inc)
    speed = [limit / r["rounding_seconds"] for r in rs]
    lines.append(f"Rounding no worse than the exact incumbent: {not_worse} of {len(inc)} with an incumbent "
                 f"({len(rs) - len(inc)} without); exact time limit / rounding wall time: "
                 f"min {min(speed):.1f}x, median {statistics.median(speed):.1f}x (target >= 20x on medium).")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", default=["small", "medium"])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--budget", type=float, default=None,
                    help="rounding time budget in seconds (default: time limit / 20)")
    ap.add_argument("--limit", type=int, default=None, help="at most N instances per suite (a quick look)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "VS_ILP.md"))
    args = ap.parse_args()
    args.budget = args.time_limit / 20 if args.budget is None else args.budget
    start = time.perf_counter()
    rows: dict[str, list[dict]] = {}
    for suite in args.suites:
        paths = sorted((ROOT / "instances" / "bench" / suite).glob("*.json"))
        paths = [p for p in paths if p.name != "manifest.json"][: args.limit]
        rows[suite] = [run_one(p, args.time_limit, args.trials, args.budget)
                       for p in tqdm(paths, desc=suite, unit="instance")]
    text = report(rows, args, time.perf_counter() - start)
    out = Path(args.out)
    out.write_text(text)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    print(text)
    import report as full_report  # benchmarks/report.py: REPORT.md and results.json from every output
    full_report.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
