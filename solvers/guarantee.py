"""The probabilistic guarantee of one rounding solve, computed from the instance and its LP optimum.

Why per solve: the classical theorems (Raghavan & Thompson 1987, Srinivasan 1999/2001) give bounds
in terms of the instance's width and the LP solution; evaluating them on the actual numbers tells the
caller what a single trial is worth, instead of quoting an asymptotic O(log m).  docs/rounding.md
states the theorem and its assumptions.

Every row ``r`` is a sum of independent (or negatively correlated, for dependent rounding) random
"units", each in ``[0, w_r]``; dividing by ``w_r`` puts them in ``[0, 1]``, and with
``mu = E[X_r] / w_r`` the Chernoff bound for a threshold ``t`` (also divided by ``w_r``) is

    P[X >= t] <= exp(t - mu - t ln(t / mu))   for t > mu   (upper tail, packing rows)
    P[X <= t] <= exp(t - mu - t ln(t / mu))   for t < mu   (lower tail, covering rows)

The same exponential moments drive the pessimistic estimator used by the derandomised mode.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp

from solvers.problem import Problem
from solvers.rounding_plan import RoundingPlan

logger = logging.getLogger(__name__)

__all__ = ["Guarantee", "EventRows", "chernoff", "compute_guarantee", "event_rows", "width_scale"]

_BISECT_STEPS = 40


def chernoff(mu: np.ndarray | float, t: np.ndarray | float) -> np.ndarray:
    """Chernoff bound on P[X >= t] (t > mu) or P[X <= t] (t < mu) for a sum of [0,1] units with mean mu.

    Returns 1 where the threshold is on the wrong side of the mean (no information), and the exact
    limits at mu = 0 (X = 0 surely) and t = 0 (exp(-mu)).
    """
    mu = np.asarray(mu, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    mu, t = np.broadcast_arrays(mu, t)
    out = np.ones(mu.shape)
    pos_mu = mu > 0
    tail = pos_mu & (t > 0) & (t != mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        expo = t - mu - t * np.log(np.where(tail, t / np.where(pos_mu, mu, 1.0), 1.0))
    out[tail] = np.minimum(1.0, np.exp(expo[tail]))
    out[pos_mu & (t == 0)] = np.exp(-mu[pos_mu & (t == 0)])
    out[~pos_mu & (t > 0)] = 0.0  # a non-negative sum with mean 0 is 0 surely
    return out


def width_scale(width: float, rows: int, target: float, *, cover: bool) -> float:
    """The Raghavan–Thompson / Srinivasan scale factor for an instance of width ``width``.

    Packing: the largest s <= 1 such that a worst-case row (mean s*B, capacity B) exceeds its
    capacity with probability <= target/rows.  Covering: the smallest s >= 1 such that a worst-case
    row (mean s*D, demand D) falls to D or below with probability <= target/rows.
    When no packing scale > 0 meets the budget (a width far below 1: a row whose capacity
    is a small fraction of one unit), 1.0: rounding is then unscaled, its computed
    guarantee says how little it promises, and repair restores validity.
    """
    if rows == 0 or not math.isfinite(width) or width <= 0:
        return 1.0
    per_row = target / rows

    def fails(s: float) -> bool:
        return float(chernoff(s * width, width)) > per_row

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
    return hi if cover else (lo if lo > 0 else 1.0)


@dataclass(frozen=True)
class Guarantee:
    """What one rounding trial is guaranteed to achieve before repair (all bounds are union bounds).

    ``p_pack``: P[some packing row > (1 + delta_pack) b]; ``p_cover``: P[some covering row
    < (1 - delta_cover) d]; ``p_objective``: P[objective worse than ``objective_threshold``];
    ``p_success`` >= 1 - their sum is the chance a single trial meets all three, and
    ``p_all_fail`` = (1 - p_success) ** trials bounds the chance that no trial does.
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
    statement: str


@dataclass(frozen=True)
class EventRows:
    """The bad events as rows of one matrix, for the Monte-Carlo check and the pessimistic estimator.

    Event r happens when ``sign[r] * (H[r] @ x) >= sign[r] * t[r]`` (sign +1: upper tail, -1: lower tail).
    Rows are scaled by 1/w_r, so every unit lies in [0, 1] and ``lam`` is the Chernoff exponent.
    ``family`` is 0 packing, 1 covering, 2 objective (only when its bound is a Chernoff one).
    """

    H: sp.csr_array
    t: np.ndarray
    lam: np.ndarray
    sign: np.ndarray
    family: np.ndarray
    markov_threshold: float | None  # objective as a linear (Markov) term c.x / threshold, if used


def _unit_width(mat: sp.csr_array, plan: RoundingPlan) -> np.ndarray:
    """Per row, the largest range any one random unit has (0 for a row that rounding cannot change)."""
    if mat.shape[0] == 0:
        return np.zeros(0)
    absm = abs(mat)
    single = (absm @ sp.diags_array(plan.unit_range)).max(axis=1).toarray().ravel()
    if plan.block.shape[1]:
        blocks = (absm @ plan.block).max(axis=1).toarray().ravel()
        single = np.maximum(single, blocks)
    return single


def _smallest_delta(mu: np.ndarray, base: np.ndarray, target: float, *, cover: bool,
                    cap: float) -> tuple[float, float]:
    """Smallest delta in [0, cap] whose union bound sum_r chernoff(mu_r, (1 +/- delta) base_r) is <= target,
    with the bound it reaches (at ``cap`` when no delta fits the target)."""
    sign = -1.0 if cover else 1.0

    def total(delta: float) -> float:
        return min(1.0, float(chernoff(mu, (1 + sign * delta) * base).sum()))

    if mu.size == 0:
        return 0.0, 0.0
    if total(0.0) <= target:
        return 0.0, total(0.0)
    if total(cap) > target:
        return cap, total(cap)
    lo, hi = 0.0, min(cap, 1.0)
    while total(hi) > target:
        lo, hi = hi, min(cap, 2 * hi)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if total(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi, total(hi)


@dataclass(frozen=True)
class _Family:
    """The random rows of one family after normalisation; deterministic rows are settled exactly."""

    H: sp.csr_array
    mu: np.ndarray
    base: np.ndarray
    sure_fail: bool  # a row rounding cannot move is already violated


def _family(mat: sp.csr_array, rhs: np.ndarray, plan: RoundingPlan, *, cover: bool) -> _Family:
    w = _unit_width(mat, plan)
    mean = mat @ plan.marginal
    # A row is random when some unit can move it and its event is possible: packing rows with mean 0
    # are 0 surely (non-negative units), covering rows with d = 0 cannot fall below it.
    random = (w > 0) & ((rhs > 0) if cover else (mean > 0))
    tol = 1e-9 * np.maximum(1.0, np.abs(rhs))
    fixed_bad = ~random & ((mean < rhs - tol) if cover else (mean > rhs + tol))
    keep = np.flatnonzero(random)
    wk = w[keep]
    H = sp.csr_array(sp.diags_array(1.0 / wk) @ mat[keep]) if keep.size else sp.csr_array((0, mat.shape[1]))
    return _Family(H, mean[keep] / wk, rhs[keep] / wk, bool(fixed_bad.any()))


def _objective(problem: Problem, plan: RoundingPlan, target: float) -> tuple[str, float | None, float | None, float, float]:
    """(method, epsilon, threshold on c.x, probability bound, unit width) for the objective.

    Only for c >= 0 (the usual cost/profit case); Markov (min only) and Chernoff are both valid
    and the one giving the smaller epsilon is used.
    """
    c = problem.c
    mean = float(c @ plan.marginal)
    if (c < 0).any() or mean <= 0:
        return "none", None, None, 0.0, 0.0
    w = float(_unit_width(sp.csr_array(c.reshape(1, -1)), plan)[0])
    if w == 0:
        return "exact", 0.0, mean, 0.0, 0.0
    up = problem.sense == "min"
    mu = np.array([mean / w])
    cap = 1e12 if up else 1.0 - 1e-6
    eps, p = _smallest_delta(mu, mu, target, cover=not up, cap=cap)
    best = ("chernoff", eps, mean * (1 + eps if up else 1 - eps), p, w) if p <= target else None
    if up:
        m_eps = 1.0 / target - 1.0  # Markov: P[c.x >= (1 + eps) E[c.x]] <= 1 / (1 + eps)
        if best is None or m_eps < best[1]:
            best = ("markov", m_eps, mean * (1 + m_eps), 1.0 / (1 + m_eps), w)
    return best if best is not None else ("chernoff", eps, mean * (1 - eps), p, w)


def compute_guarantee(problem: Problem, plan: RoundingPlan, lp_objective: float, *, trials: int,
                      targets: tuple[float, float, float] = (0.25, 0.25, 0.25)) -> Guarantee:
    """Evaluate the union bounds for this instance, LP solution and scaling.

    ``targets`` are the failure budgets for packing, covering and objective: each delta/epsilon is the
    smallest one whose bound fits its budget (or the bound actually reached if none does).
    """
    pk = _family(problem.A, problem.b, plan, cover=False)
    cv = _family(problem.C, problem.d, plan, cover=True)
    delta_p, p_p = _smallest_delta(pk.mu, pk.base, targets[0], cover=False, cap=1e12)
    delta_c, p_c = _smallest_delta(cv.mu, cv.base, targets[1], cover=True, cap=1.0 - 1e-6)
    p_p = 1.0 if pk.sure_fail else p_p
    p_c = 1.0 if cv.sure_fail else p_c
    method, eps, thr, p_o, _ = _objective(problem, plan, targets[2])
    p_success = max(0.0, 1.0 - p_p - p_c - p_o)
    lp_cx = lp_objective - problem.offset
    factor = thr / lp_cx if thr is not None and lp_cx > 0 else None
    threshold = thr + problem.offset if thr is not None else None
    g = Guarantee(
        scale_pack=plan.scale_pack, scale_cover=plan.scale_cover,
        width_pack=plan.width_pack, width_cover=plan.width_cover,
        delta_pack=delta_p, delta_cover=delta_c, p_pack=p_p, p_cover=p_c,
        epsilon=eps, objective_method=method, objective_threshold=threshold, objective_factor=factor,
        p_objective=p_o, p_success=p_success, trials=int(trials),
        p_all_fail=(1.0 - p_success) ** int(trials), lp_objective=float(lp_objective),
        rows_pack=problem.A.shape[0], rows_cover=problem.C.shape[0],
        rows_exact=plan.exact_rows, rows_unguarded=problem.G.shape[0] - plan.exact_general_rows,
        statement="",
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
        f"{_fmt(g.p_cover)} (Chernoff bounds, union over rows), and {obj}. So one trial meets all of these "
        f"with probability >= {g.p_success:.4g}, and all {g.trials} trials miss with probability <= "
        f"{g.p_all_fail:.3g}. {g.rows_unguarded} general rows carry no probabilistic guarantee; repair "
        f"handles them and every row that rounding left violated."
    )


def event_rows(problem: Problem, plan: RoundingPlan, g: Guarantee) -> EventRows:
    """The guarantee's bad events in matrix form (see :class:`EventRows`)."""
    pk = _family(problem.A, problem.b, plan, cover=False)
    cv = _family(problem.C, problem.d, plan, cover=True)
    parts = [(pk.H, pk.mu, pk.base * (1 + g.delta_pack), 1.0, 0),
             (cv.H, cv.mu, cv.base * (1 - g.delta_cover), -1.0, 1)]
    markov = None
    if g.objective_method == "chernoff" and g.objective_threshold is not None:
        c_thr = g.objective_threshold - problem.offset
        w = float(_unit_width(sp.csr_array(problem.c.reshape(1, -1)), plan)[0])
        row = sp.csr_array(problem.c.reshape(1, -1) / w)
        parts.append((row, np.array([row @ plan.marginal]).ravel(), np.array([c_thr / w]),
                      1.0 if problem.sense == "min" else -1.0, 2))
    elif g.objective_method == "markov":
        markov = g.objective_threshold - problem.offset
    H = sp.csr_array(sp.vstack([p[0] for p in parts], format="csr"))
    mu = np.concatenate([p[1] for p in parts])
    t = np.concatenate([p[2] for p in parts])
    sign = np.concatenate([np.full(p[1].size, p[3]) for p in parts])
    family = np.concatenate([np.full(p[1].size, p[4], dtype=np.int8) for p in parts])
    with np.errstate(divide="ignore"):
        lam = np.where((t > 0) & (mu > 0) & (sign * (t - mu) > 0), np.log(np.maximum(t, 1e-300) / np.maximum(mu, 1e-300)), 0.0)
    return EventRows(H, t, lam, sign, family, markov)
