"""Rounding vs the exact HiGHS MIP on OR-Library instances with known optima; writes benchmarks/ORLIB.md.

Usage::

    python benchmarks/orlib.py                          # every family, every instance
    python benchmarks/orlib.py --families gap scp --time-limit 30
    python benchmarks/orlib.py --quick                  # 3 instances per family, for a smoke run
    python benchmarks/orlib.py --instances gap12-1 WEING7 --output /tmp/x.md

Both solvers run in this process, one after the other, single-threaded, timed as wall-clock
seconds around the library call (LP, rounding, repair and local search for rounding; model
build and branch-and-bound for the exact solver).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
from tqdm import tqdm

from solvers.check import is_feasible
from solvers.exact import solve_exact
from solvers.orlib import FAMILIES, Instance, load_instances
from solvers.pipeline import solve_rounding

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/work/shared/data/orlib")
FALLBACK_DATA = ROOT / "tests" / "data" / "orlib"
QUICK = 3  # instances per family in --quick mode
LARGEST = 5  # per family, the instances with the most nonzeros used for the time-ratio target


@dataclass
class Row:
    family: str
    name: str
    n: int
    nnz: int
    optimum: float | None
    lp: float | None
    rounding: float | None
    rounding_status: str
    feasible: bool
    rounding_time: float
    exact: float | None
    exact_status: str
    exact_time: float

    @property
    def gap(self) -> float | None:
        if self.rounding is None or self.optimum is None or self.optimum == 0:
            return None
        return 100.0 * abs(self.rounding - self.optimum) / abs(self.optimum)

    @property
    def ratio(self) -> float:
        return self.exact_time / self.rounding_time if self.rounding_time > 0 else float("inf")


def _machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import scipy

    return (f"`nproc` = {os.cpu_count()}, CPU: {model}, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, SciPy {scipy.__version__}, highspy {metadata.version('highspy')}")


def _run(inst: Instance, *, time_limit: float, trials: int, seed: int, derandomize: bool) -> Row:
    prob = inst.problem
    t0 = time.perf_counter()
    res = solve_rounding(prob, seed=seed, trials=trials, derandomize=derandomize)
    t1 = time.perf_counter()
    ex = solve_exact(prob, backend="highs", time_limit=time_limit, threads=1)
    t2 = time.perf_counter()
    feasible = res.status.has_solution and res.x is not None and is_feasible(prob, res.x)
    M, _, _ = prob.all_rows()
    return Row(inst.family, inst.name, prob.n, int(M.nnz), inst.optimum, res.bound,
               res.objective if feasible else None, res.status.value, feasible, t1 - t0,
               ex.objective if ex.status.has_solution else None, ex.status.value, t2 - t1)


def _fmt(v: float | None, spec: str = ".10g") -> str:
    return "—" if v is None else format(v, spec)


def _family_table(rows: list[Row]) -> list[str]:
    out = ["| family | instances | feasible after repair | mean gap % | max gap % | exact optimal | "
           "mean rounding s | mean exact s | largest: rounding s | largest: exact s | largest: exact/rounding |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for fam in FAMILIES:
        rs = [r for r in rows if r.family == fam]
        if not rs:
            continue
        gaps = [r.gap for r in rs if r.gap is not None]
        big = sorted(rs, key=lambda r: r.nnz, reverse=True)[:LARGEST]
        t_round, t_exact = sum(r.rounding_time for r in big), sum(r.exact_time for r in big)
        out.append(
            f"| {fam} | {len(rs)} | {sum(r.feasible for r in rs)}/{len(rs)} "
            f"({100.0 * sum(r.feasible for r in rs) / len(rs):.0f}%) | {_fmt(np.mean(gaps) if gaps else None, '.2f')} | "
            f"{_fmt(max(gaps) if gaps else None, '.2f')} | {sum(r.exact_status == 'optimal' for r in rs)}/{len(rs)} | "
            f"{np.mean([r.rounding_time for r in rs]):.3f} | {np.mean([r.exact_time for r in rs]):.3f} | "
            f"{t_round:.3f} | {t_exact:.3f} | {t_exact / t_round:.2f}x |")
    return out


def _instance_table(rows: list[Row]) -> list[str]:
    out = ["| family | instance | n | nnz | optimum | LP bound | rounding | gap % | feasible | exact status | "
           "exact | rounding s | exact s | exact/rounding |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.family} | {r.name} | {r.n} | {r.nnz} | {_fmt(r.optimum)} | {_fmt(r.lp, '.8g')} | "
                   f"{_fmt(r.rounding)} | {_fmt(r.gap, '.2f')} | {'yes' if r.feasible else 'NO (' + r.rounding_status + ')'} | "
                   f"{r.exact_status} | {_fmt(r.exact)} | {r.rounding_time:.3f} | {r.exact_time:.3f} | {r.ratio:.2f}x |")
    return out


def report(rows: list[Row], command: str, args: argparse.Namespace, load: tuple[float, float]) -> str:
    lines = [
        "# OR-Library: LP rounding vs exact HiGHS MIP",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {_machine()}. 1-minute load average at start / end of the run: {load[0]:.2f} / {load[1]:.2f} "
        "(a load above the core count means other processes shared the CPU and inflated both solvers' times).",
        "",
        f"Settings: rounding `solve_rounding(seed={args.seed}, trials={args.trials}, derandomize={args.derandomize})`, exact "
        f"`solve_exact(backend='highs', threads=1, time_limit={args.time_limit:g})`, GAP as {args.gap_sense}imisation "
        f"with choice groups, data from `{args.root}`. Gap % = |rounding − known optimum| / |optimum|. "
        f"\"largest\" = the {LARGEST} instances of the family with the most constraint nonzeros; their times "
        "are summed before taking the ratio (> 1 means rounding was faster).",
        "",
        "## Per family",
        "",
        *_family_table(rows),
        "",
        "## Per instance",
        "",
        *_instance_table(rows),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_DATA if DEFAULT_DATA.is_dir() else FALLBACK_DATA,
                        help="folder holding gap/ scp/ mkp/ cap/")
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--instances", nargs="+", default=None, help="only these instance names")
    parser.add_argument("--time-limit", type=float, default=60.0, help="exact solver limit per instance (s)")
    parser.add_argument("--gap-sense", choices=("min", "max"), default="min",
                        help="GAP objective sense (OR-Library publishes optima for both)")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--derandomize", action="store_true", help="one deterministic rounding instead of trials")
    parser.add_argument("--quick", action="store_true", help=f"only the first {QUICK} instances of each family")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "ORLIB.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    instances: list[Instance] = []
    for fam in args.families:
        chosen = [i for i in load_instances(args.root, fam, sense=args.gap_sense)
                  if not args.instances or i.name in args.instances]
        instances.extend(chosen[:QUICK] if args.quick else chosen)
    rows = []
    load_start = os.getloadavg()[0]
    for inst in tqdm(instances, desc="orlib", unit="inst"):
        rows.append(_run(inst, time_limit=args.time_limit, trials=args.trials, seed=args.seed,
                         derandomize=args.derandomize))
    command = "python benchmarks/orlib.py" + ("" if argv is None and len(sys.argv) == 1 else
                                              " " + shlex.join(argv if argv is not None else sys.argv[1:]))
    args.output.write_text(report(rows, command, args, (load_start, os.getloadavg()[0])))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
