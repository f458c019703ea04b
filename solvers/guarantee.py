"""The probabilistic guarantee of one rounding solve, computed from the instance and its LP optimum.

Why per solve: the classical theorems (Raghavan & Thompson 1987, Srinivasan 1999/2001) give bounds in
terms of the instance's width; evaluating sharper forms of them on the actual rows tells the caller
what a single trial is worth, instead of quoting an asymptotic O(log m).  docs/rounding.md states the
theorem and its assumptions.

Each row is split into what rounding cannot change (moved to the threshold) and random units
(:mod:`solvers.row_tails`); its tail is bounded by the smaller of Chernoff's bound with the units'
exact moment generating functions and the exact tail of a lattice-rounded copy.  Rows whose units
are all independently rounded variables are combined by Harris' inequality (events of one family
are monotone the same way, so P[all hold] >= the product), the others by the union bound.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from solvers.problem import Problem
from solvers.rounding_plan import RoundingPlan
from solvers.lattice import Lattice, LatticeRow
from solvers.row_tails import MgfTable, Units, split_rows

logger = logging.getLogger(__name__)

__all__ = ["Guarantee", "EventRows", "chernoff", "compute_guarantee", "event_rows", "width_scale", "TOL"]

_BISECT_STEPS = 50
_MIN_SCALE = 2.0 ** -40  # a packing scale below this rounds every scaled variable to 0: counted as none
TOL = 1e-9  # LP noise: a row exceeds (1 + delta) b only by more than TOL * max(1, b) (likewise below d)


def chernoff(mu: np.ndarray | float, t: np.ndarray | float, *, upper: bool) -> np.ndarray:
    """Chernoff bound on P[X >= t] (``upper``) or P[X <= t] for a sum of independent [0,1] units with mean mu.

    1 where the threshold is on the mean's side of the tail asked for (no information), with the
    exact limits at mu = 0 (X = 0 surely) and, for the lower tail, t = 0 (exp(-mu)).
    """
    mu = np.asarray(mu, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    mu, t = np.broadcast_arrays(mu, t)
    out = np.ones(mu.shape)
    pos = mu > 0
    tail = pos & (t > 0) & ((t > mu) if upper else (t < mu))
    with np.errstate(divide="ignore", invalid="ignore"):
        expo = t - mu - t * np.log(np.where(tail, t / np.where(pos, mu, 1.0), 1.0))
    out[tail] = np.minimum(1.0, np.exp(expo[tail]))
    if upper:
        out[~pos & (t > 0)] = 0.0  # a non-negative sum with mean 0 is 0 surely
    else:
        out[pos & (t == 0)] = np.exp(-mu[pos & (t == 0)])
        out[t < 0] = 0.0
    return out


@functools.lru_cache(maxsize=4096)
def width_scale(width: float, rows: int, target: float, *, cover: bool) -> float:
    """The Raghavan–Thompson / Srinivasan scale factor for an instance of width ``width``.

    Packing: the largest s <= 1 such that a worst-case row (mean s*B, capacity B) exceeds its
    capacity with probability <= target/rows.  Covering: the smallest s >= 1 such that a worst-case
    row (mean s*D, demand D) falls to D or below with probability <= target/rows.
    When no packing scale of at least 2^-40 meets the budget (a width far below 1: a row whose
    capacity is a small fraction of one unit), 1.0, never 0: rounding is then unscaled, its
    computed guarantee says how little it promises, and repair restores validity.
    Kept per argument (a pure function of them): an online slot's partitions share a few widths.
    """
    if rows == 0 or not math.isfinite(width) or width <= 0:
        return 1.0
    per_row = target / rows

    def fails(s: float) -> bool:
        return float(chernoff(s * width, width, upper=not cover)) > per_row

    if not fails(1.0):
        return 1.0
    lo, hi = (1.0, 2.0) if cover else (0.0, 1.0)
    if cover:
        while fails(hi):
            lo, hi = hi, 2 * hi
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if fails(mid) == cover:
            lo = mid
        else:
            hi = mid
    return hi if cover else (lo if lo >= _MIN_SCALE else 1.0)


@dataclass(frozen=True)
class Guarantee:
    """What one rounding trial is guaranteed to achieve before repair.

    ``p_pack``: P[some packing row > (1 + delta_pack) b]; ``p_cover``: P[some covering row
    < (1 - delta_cover) d]; ``p_objective``: P[objective worse than ``objective_threshold``];
    ``p_success`` >= 1 - their sum is the chance a single trial meets all three, and
    ``p_all_fail`` = (1 - p_success) ** trials bounds the chance that no trial does.
    ``rows_convolved``: rows whose exact lattice tail was computed; ``rows_product``: rows combined
    by Harris' inequality instead of the union bound.
    """

    scale_pack: float
    scale_cover: float
    width_pack: float | None
    width_cover: float | None
    delta_pack: float
    delta_cover: float
    p_pack: float
    p_cover: float
    epsilon: float | None
    objective_method: str
    objective_threshold: float | None
    objective_factor: float | None
    p_objective: float
    p_success: float
    trials: int
    p_all_fail: float
    lp_objective: float
    rows_pack: int
    rows_cover: int
    rows_exact: int
    rows_unguarded: int
    rows_convolved: int
    rows_product: int
    statement: str


@dataclass(frozen=True)
class EventRows:
    """The bad events, for the Monte-Carlo check and the derandomiser's pessimistic estimator.

    Event r happens when ``sign[r] * (H[r] @ x) >= sign[r] * t[r]`` (sign +1: upper tail, -1: lower
    tail); ``bound[r]`` is its stated probability, ``lam[r]`` the Chernoff exponent attaining the
    Chernoff part (0: none), ``lattice`` the lattice copies of the rows that have one (by event
    index), ``markov`` the objective's (event index, sure part, threshold) when Markov applies.
    ``family`` is 0 packing, 1 covering, 2 objective; ``product`` marks the rows combined by Harris'
    inequality (the others by the union bound).
    """

    H: sp.csr_array
    t: np.ndarray
    lam: np.ndarray
    sign: np.ndarray
    family: np.ndarray
    bound: np.ndarray
    product: np.ndarray
    lattice: dict[int, LatticeRow]
    markov: tuple[int, float, float] | None


class _Rows:
    """One family of rows with its two tail bounds; the threshold of row r is a function of delta."""

    def __init__(self, mat: sp.csr_array, rhs: np.ndarray, plan: RoundingPlan, *, upper: bool) -> None:
        self.mat, self.rhs, self.upper = mat, rhs, upper
        self.units: Units = split_rows(mat, plan)
        self.table = MgfTable(self.units, upper=upper)
        self.lattice = Lattice(self.units, upper=upper)
        self.product = ~self.units.has_block & ~self.units.has_dep  # only independent coins: Harris applies

    def thresholds(self, delta: float) -> np.ndarray:
        tol = TOL * np.maximum(1.0, self.rhs)
        return (1 + delta) * self.rhs + tol if self.upper else (1 - delta) * self.rhs - tol

    def bounds(self, delta: float) -> np.ndarray:
        t = self.thresholds(delta)
        return np.minimum(self.table.bound(t)[0], self.lattice.bound(t))

    def total(self, delta: float) -> float:
        b = self.bounds(delta)
        return min(1.0, 1.0 - float(np.prod(1.0 - b[self.product])) + float(b[~self.product].sum()))


def _smallest(total, target: float, cap: float) -> tuple[float, float]:
    """Smallest delta in [0, cap] with total(delta) <= target for a non-increasing total, and its value
    (at ``cap`` when none fits).  The budget is met up to 1e-9 of it: an exact tail equal to the target
    at an atom of the distribution must not depend on the last bits of a convolution."""
    budget = target * (1 + 1e-9)
    if total(0.0) <= budget:
        return 0.0, total(0.0)
    if total(cap) > budget:
        return cap, total(cap)
    lo, hi = 0.0, min(cap, 1.0)
    while total(hi) > budget:
        lo, hi = hi, min(cap, 2 * hi)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if total(mid) > budget:
            lo = mid
        else:
            hi = mid
    return hi, total(hi)


class _Objective:
    """The objective c.x (c >= 0) as one more row: Chernoff, the lattice tail and (minimisation) Markov."""

    def __init__(self, problem: Problem, plan: RoundingPlan) -> None:
        self.up = problem.sense == "min"
        self.mean = float(problem.c @ plan.marginal)
        self.rows = _Rows(sp.csr_array(problem.c.reshape(1, -1)), np.zeros(1), plan, upper=self.up)
        self.sure = float(self.rows.units.sure[0])

    def threshold(self, eps: float) -> float:
        return self.mean * (1 + eps if self.up else 1 - eps)

    def bounds(self, eps: float) -> dict[str, float]:
        t = np.array([self.threshold(eps)])
        out = {"chernoff": float(self.rows.table.bound(t)[0][0]), "convolution": float(self.rows.lattice.bound(t)[0])}
        if self.up and t[0] > self.sure:  # Markov on the random part Y = c.x - sure >= 0
            out["markov"] = min(1.0, (self.mean - self.sure) / (t[0] - self.sure))
        return out

    def solve(self, target: float) -> tuple[str, float, float]:
        """(method, epsilon, probability bound)."""
        eps, p = _smallest(lambda e: min(self.bounds(e).values()), target, 1e12 if self.up else 1.0 - 1e-6)
        found = self.bounds(eps)
        return min(found, key=found.get), eps, p


def _objective(problem: Problem, plan: RoundingPlan, target: float) -> tuple[str, float | None, float | None, float]:
    """(method, epsilon, threshold on c.x, probability bound); only for c >= 0 (cost/profit)."""
    c = problem.c
    mean = float(c @ plan.marginal)
    if (c < 0).any() or mean <= 0:
        return "none", None, None, 0.0
    obj = _Objective(problem, plan)
    if obj.rows.units.width[0] == 0:
        return "exact", 0.0, mean, 0.0
    method, eps, p = obj.solve(target)
    return method, eps, obj.threshold(eps), p


def compute_guarantee(problem: Problem, plan: RoundingPlan, lp_objective: float, *, trials: int,
                      targets: tuple[float, float, float] = (0.25, 0.25, 0.25)) -> Guarantee:
    """Evaluate the bounds for this instance, LP solution and scaling.

    ``targets`` are the failure budgets for packing, covering and objective: each delta/epsilon is the
    smallest one whose bound fits its budget (or the bound actually reached if none does).
    """
    pk = _Rows(problem.A, problem.b, plan, upper=True)
    cv = _Rows(problem.C, problem.d, plan, upper=False)
    delta_p, p_p = _smallest(pk.total, targets[0], 1e12)
    delta_c, p_c = _smallest(cv.total, targets[1], 1.0 - 1e-6)
    method, eps, thr, p_o = _objective(problem, plan, targets[2])
    p_success = max(0.0, 1.0 - p_p - p_c - p_o)
    lp_cx = lp_objective - problem.offset
    g = Guarantee(
        scale_pack=plan.scale_pack, scale_cover=plan.scale_cover,
        width_pack=plan.width_pack, width_cover=plan.width_cover,
        delta_pack=delta_p, delta_cover=delta_c, p_pack=p_p, p_cover=p_c,
        epsilon=eps, objective_method=method,
        objective_threshold=thr + problem.offset if thr is not None else None,
        objective_factor=thr / lp_cx if thr is not None and lp_cx > 0 else None,
        p_objective=p_o, p_success=p_success, trials=int(trials),
        p_all_fail=(1.0 - p_success) ** int(trials), lp_objective=float(lp_objective),
        rows_pack=problem.A.shape[0], rows_cover=problem.C.shape[0],
        rows_exact=plan.exact_rows, rows_unguarded=problem.G.shape[0] - plan.exact_general_rows,
        rows_convolved=len(pk.lattice.rows) + len(cv.lattice.rows),
        rows_product=int(pk.product.sum() + cv.product.sum()), statement="",
    )
    return replace(g, statement=_statement(problem, g))


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _statement(problem: Problem, g: Guarantee) -> str:
    sense = "at most" if problem.sense == "min" else "at least"
    obj = ("no objective bound (c has negative entries)" if g.objective_method == "none" else
           f"the objective is {sense} {_fmt(g.objective_threshold)} "
           f"({_fmt(g.objective_factor)} x the LP's c.x, epsilon = {_fmt(g.epsilon)}, "
           f"{g.objective_method} bound) except with probability <= {_fmt(g.p_objective)}")
    return (
        f"Rounding the LP optimum (value {g.lp_objective:.6g}) with packing-only variables scaled by "
        f"{g.scale_pack:.4g} (packing width B = {_fmt(g.width_pack)}) and covering-only variables by "
        f"{g.scale_cover:.4g} (covering width D = {_fmt(g.width_cover)}), marginals kept by dependent rounding "
        f"on {g.rows_exact} choice-group/exact-sum rows (which hold surely): some of the {g.rows_pack} packing "
        f"rows exceeds (1 + {g.delta_pack:.4g}) b with probability <= {_fmt(g.p_pack)}, some of the "
        f"{g.rows_cover} covering rows falls below (1 - {g.delta_cover:.4g}) d with probability <= "
        f"{_fmt(g.p_cover)} (per row the smaller of two bounds on its random part: Chernoff bounds with exact "
        f"moments, and the tail of its lattice copy -- exact, or stop-loss with exact-sum-row coins -- "
        f"{g.rows_convolved} rows convolved; {g.rows_product} rows of independent "
        f"coins combined by Harris' inequality, the rest by the union bound), and {obj}. So one trial meets "
        f"all of these with probability >= {g.p_success:.4g}, and all {g.trials} trials miss with probability "
        f"<= {g.p_all_fail:.3g}. {g.rows_unguarded} general rows carry no probabilistic guarantee; repair "
        f"handles them and every row that rounding left violated."
    )


def event_rows(problem: Problem, plan: RoundingPlan, g: Guarantee) -> EventRows:
    """The guarantee's bad events that can happen (stated bound > 0), in matrix form (see :class:`EventRows`)."""
    parts: list[tuple] = []
    markov = None
    families = [(_Rows(problem.A, problem.b, plan, upper=True), g.delta_pack, 0),
                (_Rows(problem.C, problem.d, plan, upper=False), g.delta_cover, 1)]
    obj = None
    if g.objective_method in ("chernoff", "convolution", "markov"):
        obj = _Objective(problem, plan)
        families.append((obj.rows, g.epsilon, 2))
    offset = 0
    for rows, delta, fam in families:
        t = rows.thresholds(delta) if fam < 2 else np.array([obj.threshold(delta)])
        cher, lam = rows.table.bound(t)
        bound = np.minimum(cher, rows.lattice.bound(t))
        if fam == 2 and obj.up and t[0] > obj.sure:
            bound = np.minimum(bound, (obj.mean - obj.sure) / (t[0] - obj.sure))
            markov = (offset, obj.sure, float(t[0]))
        keep = np.flatnonzero(bound > 0)
        lattice = {offset + i: _copy(rows.lattice.rows[int(r)], float(rows.lattice.level(np.array([r]), t[r:r + 1])[0]))
                   for i, r in enumerate(keep) if int(r) in rows.lattice.rows}
        if markov is not None and fam == 2 and not keep.size:
            markov = None
        product = rows.product[keep] if fam < 2 else np.zeros(keep.size, dtype=bool)
        parts.append((sp.csr_array(rows.mat[keep]), t[keep], lam[keep], bound[keep], 1.0 if rows.upper else -1.0,
                      fam, lattice, product))
        offset += keep.size
    H = sp.csr_array(sp.vstack([p[0] for p in parts], format="csr"))
    return EventRows(
        H=H, t=np.concatenate([p[1] for p in parts]), lam=np.concatenate([p[2] for p in parts]),
        sign=np.concatenate([np.full(p[1].size, p[4]) for p in parts]),
        family=np.concatenate([np.full(p[1].size, p[5], dtype=np.int8) for p in parts]),
        bound=np.concatenate([p[3] for p in parts]), product=np.concatenate([p[7] for p in parts]),
        lattice={k: v for p in parts for k, v in p[6].items()}, markov=markov)


def _copy(row: LatticeRow, level: float) -> LatticeRow:
    """A lattice row at one threshold that the derandomiser may consume (its unit lists copied)."""
    return replace(row, coins=dict(row.coins), blocks={g: list(opts) for g, opts in row.blocks.items()}, level=level)
