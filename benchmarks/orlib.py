"""Rounding vs the exact HiGHS MIP on OR-Library instances with known optima; writes benchmarks/ORLIB.md.

Usage::

    python benchmarks/orlib.py                          # every family, every instance
    python benchmarks/orlib.py --families gap scp --time-limit 30
    python benchmarks/orlib.py --quick                  # 3 instances per family, for a smoke run
    python benchmarks/orlib.py --instances gap12-1 WEING7 --output /tmp/x.md
    python benchmarks/orlib.py --trials 64 8 1          # rounding configurations side by side

Every solver runs in this process, timed as wall-clock seconds around the library call (LP,
rounding, repair and local search for rounding; model build and branch-and-bound for the
exact solver, with threads=1; the rounding LP runs with HiGHS' default, whose dual simplex is
serial).  Each instance is solved by every configuration and
the exact solver in turn, ``--repeat`` times, and the median time is kept, so that load from
other processes hits every solver alike.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
from tqdm import tqdm

from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)
from solvers.check import is_feasible
from solvers.mip import solve_mip
from solvers.orlib import FAMILIES, Instance, load_instances
from solvers.pipeline import solve_rounding

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = Path("/work/shared/data/orlib")
FALLBACK_DATA = ROOT / "tests" / "data" / "orlib"
QUICK = 3  # instances per family in --quick mode
LARGEST = 5  # per family, the instances with the most nonzeros used for the time-ratio target
# The issue's targets: mean gap to the known optimum per family (%), and exact/rounding time on the largest.
GAP_TARGET = {"gap": 3.0, "scp": 8.0, "mkp": 2.0}
SPEED_TARGET = 10.0


@dataclass
class Rounding:
    """One rounding configuration's answer on one instance."""

    objective: float | None
    status: str
    feasible: bool
    time: float
    lp_time: float  # of ``time``, the LP relaxation (HiGHS build + solve)


@dataclass
class Row:
    family: str
    name: str
    n: int
    nnz: int
    optimum: float | None
    lp: float | None
    rounding: dict[int, Rounding]  # by trial count
    exact: float | None
    exact_status: str
    exact_time: float
    exact_nodes: int | None  # branch-and-bound nodes HiGHS explored (1: solved at the root LP)

    @property
    def lp_is_optimal(self) -> bool:
        """The LP relaxation's value already equals the optimum: no method can beat solving that LP."""
        return (self.lp is not None and self.optimum is not None
                and abs(self.lp - self.optimum) <= 1e-6 * max(1.0, abs(self.optimum)))

    def gap(self, trials: int) -> float | None:
        obj = self.rounding[trials].objective
        if obj is None or self.optimum is None or self.optimum == 0:
            return None
        return 100.0 * abs(obj - self.optimum) / abs(self.optimum)


def _machine() -> str:
    import scipy

    model = cpu_model()

    return (f"`nproc` = {os.cpu_count()}, CPU: {model}, Python {platform.python_version()}, "
            f"NumPy {np.__version__}, SciPy {scipy.__version__}, highspy {metadata.version('highspy')}")


def _timed(call: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = call()
    return out, time.perf_counter() - t0


def _run(inst: Instance, *, time_limit: float, trials: list[int], seed: int, derandomize: bool,
         repeat: int) -> Row:
    prob = inst.problem
    times: dict[object, list[float]] = {t: [] for t in [*trials, "exact"]}
    lp_times: dict[int, list[float]] = {t: [] for t in trials}
    results: dict[object, object] = {}
    for _ in range(repeat):  # interleaved, so a burst of outside load hits every solver alike
        for t in trials:
            results[t], dt = _timed(lambda: solve_rounding(prob, seed=seed, trials=t, derandomize=derandomize))
            times[t].append(dt)
            lp_times[t].append(results[t].timings.get("lp", 0.0))
        results["exact"], dt = _timed(lambda: solve_mip(prob, backend="highs", time_limit=time_limit, threads=1))
        times["exact"].append(dt)
    rounding = {}
    for t in trials:
        res = results[t]
        feasible = res.status.has_solution and res.x is not None and is_feasible(prob, res.x)
        rounding[t] = Rounding(res.objective if feasible else None, res.status.value, feasible,
                               statistics.median(times[t]), statistics.median(lp_times[t]))
    ex = results["exact"]
    M, _, _ = prob.all_rows()
    return Row(inst.family, inst.name, prob.n, int(M.nnz), inst.optimum, results[trials[0]].bound, rounding,
               ex.objective if ex.status.has_solution else None, ex.status.value, statistics.median(times["exact"]),
               ex.details.get("nodes"))


def _fmt(v: float | None, spec: str = ".10g") -> str:
    return "—" if v is None else format(v, spec)


def _family_table(rows: list[Row], trials: list[int], partial: bool) -> tuple[list[str], list[str]]:
    """The per-family table and one line per issue target saying whether some configuration meets it."""
    out = ["| family | rounding trials | instances | feasible after repair | mean gap % | max gap % | "
           "exact optimal | LP bound = optimum | mean rounding s | mean exact s | largest: rounding s | "
           "largest: exact s | largest: exact/rounding |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for fam in FAMILIES:
        rs = [r for r in rows if r.family == fam]
        if not rs:
            continue
        big = sorted(rs, key=lambda r: r.nnz, reverse=True)[:LARGEST]
        t_exact = sum(r.exact_time for r in big)
        meets = []
        for t in trials:
            gaps = [r.gap(t) for r in rs if r.gap(t) is not None]
            feasible = sum(r.rounding[t].feasible for r in rs)
            t_round = sum(r.rounding[t].time for r in big)
            ratio = t_exact / t_round
            out.append(
                f"| {fam} | {t} | {len(rs)} | {feasible}/{len(rs)} ({100.0 * feasible / len(rs):.0f}%) | "
                f"{_fmt(np.mean(gaps) if gaps else None, '.2f')} | {_fmt(max(gaps) if gaps else None, '.2f')} | "
                f"{sum(r.exact_status == 'optimal' for r in rs)}/{len(rs)} | "
                f"{sum(r.lp_is_optimal for r in rs)}/{len(rs)} | "
                f"{np.mean([r.rounding[t].time for r in rs]):.4f} | {np.mean([r.exact_time for r in rs]):.4f} | "
                f"{t_round:.4f} | {t_exact:.4f} | {ratio:.1f}x |")
            gap_ok = fam not in GAP_TARGET or (len(gaps) == len(rs) and np.mean(gaps) <= GAP_TARGET[fam])
            if feasible == len(rs) and gap_ok and ratio >= SPEED_TARGET:
                meets.append(t)
        target = f"mean gap <= {GAP_TARGET[fam]:g}%, " if fam in GAP_TARGET else ""
        line = (f"- {fam}: 100% feasible, {target}exact/rounding >= {SPEED_TARGET:g}x on the largest: "
                + (f"**met** with trials = {', '.join(map(str, meets))}" if meets else "**not met** by any "
                   "configuration run"))
        if not meets and all(r.lp_is_optimal and r.exact_nodes is not None and r.exact_nodes <= 1 for r in big):
            t_lp = sum(r.rounding[trials[-1]].lp_time for r in big)
            t_round = sum(r.rounding[trials[-1]].time for r in big)
            line += (f". On these instances the LP relaxation's value is the optimum and the exact solver "
                     f"explored at most 1 node; this pipeline's LP solve alone (`solve_lp`: model build, HiGHS, "
                     f"checks) takes {t_lp:.4f} s of its {t_round:.4f} s (trials = {trials[-1]}), which caps "
                     f"exact/rounding at {t_exact / t_lp:.1f}x whatever follows the LP")
        verdicts.append(line if not partial else line.replace("**met**", "met (partial run, not a verdict)")
                        .replace("**not met**", "not met (partial run, not a verdict)"))
    return out, verdicts


def _instance_table(rows: list[Row], trials: list[int]) -> list[str]:
    cols = "".join(f" rounding (trials={t}) | gap % | s |" for t in trials)
    out = [f"| family | instance | n | nnz | optimum | LP bound |{cols} exact status | exact | exact nodes | exact s |",
           "|---|---|---|---|---|---|" + "---|---|---|" * len(trials) + "---|---|---|---|"]
    for r in rows:
        cells = "".join(
            f" {_fmt(r.rounding[t].objective) if r.rounding[t].feasible else 'NO (' + r.rounding[t].status + ')'} | "
            f"{_fmt(r.gap(t), '.2f')} | {r.rounding[t].time:.4f} |" for t in trials)
        out.append(f"| {r.family} | {r.name} | {r.n} | {r.nnz} | {_fmt(r.optimum)} | {_fmt(r.lp, '.8g')} |{cells} "
                   f"{r.exact_status} | {_fmt(r.exact)} | {_fmt(r.exact_nodes, 'd')} | {r.exact_time:.4f} |")
    return out


def report(rows: list[Row], command: str, args: argparse.Namespace, load: tuple[float, float]) -> str:
    family, verdicts = _family_table(rows, args.trials, partial=bool(args.quick or args.instances))
    lines = [
        "# OR-Library: LP rounding vs exact HiGHS MIP",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {_machine()}. 1-minute load average at start / end of the run: {load[0]:.2f} / {load[1]:.2f} "
        "(a load above the core count means other processes shared the CPU and inflated both solvers' times).",
        "",
        f"Settings: rounding `solve_rounding(seed={args.seed}, trials=T, derandomize={args.derandomize})` for T in "
        f"{args.trials}, exact "
        f"`solve_mip(backend='highs', threads=1, time_limit={args.time_limit:g})`, GAP as {args.gap_sense}imisation "
        f"with choice groups, data from `{args.root}`. Gap % = |rounding − known optimum| / |optimum|. "
        f"\"largest\" = the {LARGEST} instances of the family with the most constraint nonzeros; their times "
        "are summed before taking the ratio (> 1 means rounding was faster). Times are the median of "
        f"{args.repeat} interleaved runs.",
        "",
        "## Targets",
        "",
        *verdicts,
        "",
        "## Per family",
        "",
        *family,
        "",
        "## Per instance",
        "",
        *_instance_table(rows, args.trials),
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
    parser.add_argument("--trials", type=int, nargs="+", default=[64, 1],
                        help="rounding trial counts, one configuration each (default: 64 and 1)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per solver and instance (median kept)")
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
                         derandomize=args.derandomize, repeat=args.repeat))
    command = "python benchmarks/orlib.py" + ("" if argv is None and len(sys.argv) == 1 else
                                              " " + shlex.join(argv if argv is not None else sys.argv[1:]))
    args.output.write_text(report(rows, command, args, (load_start, os.getloadavg()[0])))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
