"""Stated rounding deltas against the deltas 20,000 trials need (issue 17); writes benchmarks/GUARANTEE.md.

Usage: python benchmarks/guarantee_tightness.py [--trials 20000] [--seed 0] [--out benchmarks/GUARANTEE.md]

Each placement instance (instances/examples, instances/bench/small) is turned into its rounding
problem exactly as ``placement solve --solver rounding`` does (model chosen by size, Formulate ->
SolveLP -> Round: ``plan_rounding`` with the width scale, ``compute_guarantee`` with 32 trials);
the OR-Library instances shipped with the tests and seeded random mixed problems go through
``solve_rounding``'s path (``solve_lp``, ``plan_rounding``, ``compute_guarantee``).  The stated packing delta (covering delta) at the stated
probability p is compared with the delta the trials need at that same p: the smallest delta whose
empirical tail is not significantly above p (one-sided binomial test at 1e-6, so sampling noise
can only make the observed delta smaller and the ratio larger).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from scipy import stats
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine import cpu_model  # noqa: E402  benchmarks/machine.py (scripts run from this folder)
from placement.chain import Chain, Formulate, Round, SolveLP  # noqa: E402
from placement.formulation import FORMULATIONS  # noqa: E402
from placement.model.instance import Instance  # noqa: E402
from placement.offline.solve import AUTO_PER_MACHINE_LIMIT  # noqa: E402
from solvers.guarantee import TOL, Guarantee, compute_guarantee  # noqa: E402
from solvers.lp import solve_lp  # noqa: E402
from solvers.orlib import read_gap, read_mknap1, read_scp  # noqa: E402
from solvers.problem import Problem  # noqa: E402
from solvers.rounding import plan_rounding, round_trials  # noqa: E402

ALPHA = 1e-6
CHUNK = 2000  # trials rounded at once (memory: CHUNK x n)
DEFAULT_TRIALS = 32  # `placement solve`'s default --trials


@dataclass
class Case:
    """One rounding problem as its solver builds it."""

    suite: str
    name: str
    problem: Problem
    x: np.ndarray
    guarantee: Guarantee


def placement_case(path: Path, suite: str) -> Case:
    """The rounding problem of ``placement solve --solver rounding`` (placement.offline.solve._solve + chain.Round)."""
    instance = Instance.load(path)
    triples = sum(instance.horizon - j.arrival for j in instance.jobs) * len(instance.topology.machines)
    model = "per-machine" if triples <= AUTO_PER_MACHINE_LIMIT else "aggregated"
    forward = Chain([Formulate(FORMULATIONS[model]), SolveLP()]).apply(instance)
    relaxed, trace = forward.data, forward.trace
    Round(DEFAULT_TRIALS).apply(relaxed, trace)  # the Round step computes the guarantee the certificate reports
    return Case(suite, path.stem, relaxed.problem, relaxed.lp.x, trace.guarantee)


def engine_case(suite: str, name: str, problem: Problem) -> Case:
    """The rounding problem of ``solvers.pipeline.solve_rounding`` (default scale, one trial)."""
    lp = solve_lp(problem)
    plan = plan_rounding(problem, lp.x)
    return Case(suite, name, problem, lp.x, compute_guarantee(problem, plan, lp.objective, trials=1))


def random_mixed(seed: int, exact_sum: bool) -> Problem:
    """Binary variables, 4 packing and 4 covering rows of random density-1/2 coefficients in [0.2, 1], the
    right-hand sides met exactly at a random fractional point (so the LP is feasible and its optimum
    fractional); with ``exact_sum``, 8 of the variables also sum to 3 (an exact-sum row: dependent rounding)."""
    rng = np.random.default_rng(seed)
    n = 60
    x = rng.uniform(0.05, 0.95, n)
    G, lo = np.zeros((0, n)), np.zeros(0)
    if exact_sum:
        x[:8] = 3 * rng.dirichlet(np.ones(8))
        while x[:8].max() > 1:
            x[:8] = 3 * rng.dirichlet(np.ones(8))
        G, lo = np.zeros((1, n)), np.array([3.0])
        G[0, :8] = 1.0
    A = rng.uniform(0.2, 1.0, (4, n)) * (rng.random((4, n)) < 0.5)
    C = rng.uniform(0.2, 1.0, (4, n)) * (rng.random((4, n)) < 0.5)
    return Problem(c=rng.uniform(1, 10, n), A=A, b=A @ x, C=C, d=C @ x, G=G, g_lo=lo, g_hi=lo, upper=np.ones(n))


def cases() -> list[tuple[str, Callable[[], Case]]]:
    """(label, builder) of every instance, built lazily under the progress bar."""
    out: list[tuple[str, Callable[[], Case]]] = []
    for suite, folder in (("examples", ROOT / "instances" / "examples"),
                          ("small", ROOT / "instances" / "bench" / "small")):
        for path in sorted(folder.glob("*.json")):
            if not path.name.endswith((".valid.json", ".invalid.json")):
                out.append((path.stem, lambda p=path, s=suite: placement_case(p, s)))
    data, orlib = ROOT / "tests" / "data" / "orlib", "OR-Library (tests/data)"
    for k, prob in enumerate(read_gap(data / "gap" / "gap1.txt")):
        out.append((f"gap1-{k}", lambda p=prob, k=k: engine_case(orlib, f"gap1-{k}", p)))
    for k, (prob, _) in enumerate(read_mknap1(data / "mkp" / "mknap1.txt")):
        out.append((f"mknap1-{k}", lambda p=prob, k=k: engine_case(orlib, f"mknap1-{k}", p)))
    out.append(("scp41", lambda: engine_case(orlib, "scp41", read_scp(data / "scp" / "scp41.txt"))))
    for seed in range(4):
        for exact in (False, True):
            name = f"mixed-{seed}" + ("+exact-sum" if exact else "")
            out.append((name, lambda s=seed, e=exact, n=name: engine_case("random", n, random_mixed(s, e))))
    return out


def deviations(case: Case, trials: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per trial: the largest packing overshoot (A_r x - tol_r) / b_r - 1 and covering shortfall
    1 - (C_r x + tol_r) / d_r over the rows (a row with b = 0 that rounding fills counts as +inf):
    a trial has the stated event at delta exactly when its deviation is >= delta."""
    p = case.problem
    plan = plan_rounding(p, case.x)  # as Round and solve_rounding plan it (deterministic)
    rng = np.random.default_rng(seed)
    over, short = [], []
    for start in range(0, trials, CHUNK):
        X = round_trials(plan, min(CHUNK, trials - start), rng)
        over.append(_worst(np.asarray(p.A @ X.T).T, p.b, upper=True))
        short.append(_worst(np.asarray(p.C @ X.T).T, p.d, upper=False))
    return np.concatenate(over), np.concatenate(short)


def _worst(vals: np.ndarray, rhs: np.ndarray, *, upper: bool) -> np.ndarray:
    tol = TOL * np.maximum(1.0, rhs)
    pos = rhs > 0
    scale = np.where(pos, rhs, 1.0)
    if upper:
        dev = np.where(pos, (vals - tol) / scale - 1.0, np.where(vals >= tol, np.inf, -np.inf))
    else:
        dev = np.where(pos, 1.0 - (vals + tol) / scale, -np.inf)
    return dev.max(axis=1) if dev.shape[1] else np.full(vals.shape[0], -np.inf)


def observed_delta(dev: np.ndarray, p: float) -> float:
    """Smallest delta >= 0 whose empirical tail #{dev >= delta} is not significantly above p."""
    n = dev.size
    k = np.arange(n + 1)
    allowed = int(k[stats.binom.sf(k - 1, n, min(p, 1.0)) >= ALPHA].max())  # most hits p still explains
    ordered = np.sort(dev)[::-1]
    return 0.0 if allowed >= n else max(0.0, float(ordered[allowed]))


def measure(case: Case, trials: int, seed: int) -> dict:
    g = case.guarantee
    over, short = deviations(case, trials, seed)
    out = {"suite": case.suite, "name": case.name, "rows": f"{g.rows_pack}+{g.rows_cover}", "p_success": g.p_success}
    for side, dev, delta, p in (("pack", over, g.delta_pack, g.p_pack), ("cover", short, g.delta_cover, g.p_cover)):
        hits = int(np.count_nonzero(dev >= delta))
        obs, quantile = observed_delta(dev, p), plain_quantile(dev, p)
        out[side] = dict(delta=delta, p=p, tail=hits / dev.size, observed=obs, quantile=quantile,
                         refuted=bool(hits and stats.binom.sf(hits - 1, dev.size, min(p, 1.0)) < ALPHA),
                         ratio=_ratio(delta, obs), ratio_q=_ratio(delta, quantile))
    return out


def plain_quantile(dev: np.ndarray, p: float) -> float:
    """Smallest delta >= 0 with #{dev >= delta} <= p * trials: the empirical quantile, noise and all."""
    ordered = np.sort(dev)[::-1]
    k = int(np.floor(p * dev.size))
    return 0.0 if k >= dev.size else max(0.0, float(ordered[k]))


def _ratio(stated: float, observed: float) -> float:
    """stated / observed, with the two measured alike: both carry the same -1e-9 LP tolerance, so a ratio
    within 1e-6 of a round number is that number."""
    if stated <= 1e-6:
        return 1.0 if observed <= 1e-6 else stated / observed
    return np.inf if observed <= 1e-6 else round(stated / observed, 6)


def _fmt_ratio(r: float) -> str:
    return "inf" if not np.isfinite(r) else f"{r:.2f}"


def report(results: list[dict], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# Rounding guarantee: stated vs observed deltas",
        "",
        f"Command: `python benchmarks/guarantee_tightness.py --trials {args.trials} --seed {args.seed}`",
        f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}; {seconds:.0f} s in all.",
        "",
        "Each instance is rounded as its solver does (placement: `placement solve --solver rounding`'s model, LP "
        "and `Round` step; OR-Library and random: `solve_rounding`'s `solve_lp` and `plan_rounding`), and the "
        "guarantee is the one that solve states.  *stated δ* is its packing overshoot (covering shortfall) at its "
        f"stated probability *p*; *tail* is the fraction of {args.trials:,} trials with that event (*refuted* would "
        "mark one significantly above p).  *observed δ* is the smallest δ whose trial frequency is not significantly "
        "above p (one-sided binomial test at 1e-6: sampling noise can only lower it); *quantile* is the plain "
        "empirical quantile (smallest δ with frequency <= p), which where the bound is exact at an atom of the "
        "distribution falls on either side of it by noise.  *ratio* = stated / observed, *ratio q* = stated / "
        "quantile (1 when both are 0, inf when only the stated one is).  Target: ratio <= 2.",
        "",
        "| suite | instance | rows p+c | δ pack | p pack | tail | observed δ | quantile | ratio | ratio q | "
        "δ cover | p cover | tail | observed δ | quantile | ratio | ratio q | P[trial meets all] >= |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cells = [r["suite"], r["name"], r["rows"]]
        for side in ("pack", "cover"):
            d = r[side]
            cells += [f"{d['delta']:.4g}", f"{d['p']:.3g}", f"{d['tail']:.3g}" + (" (refuted)" if d["refuted"] else ""),
                      f"{d['observed']:.4g}", f"{d['quantile']:.4g}", _fmt_ratio(d["ratio"]), _fmt_ratio(d["ratio_q"])]
        lines.append("| " + " | ".join(cells + [f"{r['p_success']:.3g}"]) + " |")
    lines += ["", "## Summary", ""]
    for suite in dict.fromkeys(r["suite"] for r in results):
        rows = [r for r in results if r["suite"] == suite]
        for side in ("pack", "cover"):
            ratios = [r[side]["ratio"] for r in rows]
            worst = max(rows, key=lambda r: r[side]["ratio"])
            live = [r[side]["ratio"] for r in rows if r[side]["delta"] > 1e-6 or r[side]["observed"] > 1e-6]
            lines.append(
                f"- {suite}, {'packing' if side == 'pack' else 'covering'}: ratio <= 2 on "
                f"{sum(x <= 2 for x in ratios)}/{len(rows)}, median {statistics.median(ratios):.2f}, max "
                f"{_fmt_ratio(max(ratios))} ({worst['name']}); {len(live)} with a positive stated or observed δ"
                + (f" (median {statistics.median(live):.2f})" if live else "")
                + f"; ratio q max {_fmt_ratio(max(r[side]['ratio_q'] for r in rows))}, min "
                f"{min(r[side]['ratio_q'] for r in rows):.2f}; refuted: {sum(r[side]['refuted'] for r in rows)}.")
    worst = max((r[side]["ratio"], r["name"], side) for r in results for side in ("pack", "cover"))
    missed = sum(r[side]["ratio"] > 2 for r in results for side in ("pack", "cover"))
    sure = [r for r in results if r["suite"] in ("examples", "small") and r["cover"]["p"] == 0
            and r["cover"]["observed"] == 0]
    lines += [
        "",
        f"Target (ratio <= 2): {f'missed on {missed} instance sides' if missed else 'met on every instance'}; "
        f"the largest ratio is "
        f"{_fmt_ratio(worst[0])} ({worst[1]}, {'packing' if worst[2] == 'pack' else 'covering'}).",
        "",
        "Reading it: a ratio of 1 means the stated δ is the one the trials need at that probability (the rows'"
        " lattice tails are exact and the union/Harris combination loses little); above 1 the combination or the"
        " stop-loss bound of rows with exact-sum coins costs the difference.  A *ratio q* below 1 is noise, not a"
        " refutation: where the stated probability is exact at an atom of the distribution, the plain quantile"
        " lands on the next atom about half the time (the *tail* column shows the frequency at the stated δ"
        f" stays within sampling error).  On {len(sure)} of the "
        f"{sum(r['suite'] in ('examples', 'small') for r in results)} placement instances the covering rows are"
        " sure after rounding (stated and observed δ cover 0): the covering side is exercised by the random"
        " problems.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).with_name("GUARANTEE.md")))
    args = ap.parse_args()
    start = time.perf_counter()
    results = []
    with tqdm(cases(), desc="instances", unit="inst") as bar:
        for label, build in bar:
            bar.set_postfix_str(label)
            results.append(measure(build(), args.trials, args.seed))
    text = report(results, args, time.perf_counter() - start)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
