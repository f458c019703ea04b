"""Randomized rounding of an LP optimum: scaling, independent and dependent rounding, many trials at once.

Why these pieces (Raghavan & Thompson 1987; Srinivasan 1999/2001; Gandhi et al. 2006):

* integer variables that appear only in packing rows are scaled down, those only in covering rows
  scaled up, by factors chosen from the instance's width, so that each row's Chernoff bound is small;
* every other integer variable is rounded independently to floor(p) + Bernoulli(frac(p)), which keeps
  E[x_j] = p_j;
* a choice group picks option k with probability y_k and rounds the option's members conditionally
  on x_i / y_k (marginals kept, never two options on);
* an exact-sum row (a general row with g_lo = g_hi over 0/1 variables with equal coefficients) is
  rounded by Srinivasan's dependent (pipage) rounding, which keeps every marginal and the sum.

Trials are rows of a ``trials x n`` matrix, all drawn from one ``numpy.random.Generator``.
:func:`round_derandomized` (in :mod:`solvers.derandomize`, re-exported here) replaces every coin by the
choice that does not increase the pessimistic estimator of :mod:`solvers.guarantee` (method of conditional
expectations).  :class:`RoundingPlan` lives in :mod:`solvers.rounding_plan` and is re-exported here too.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import scipy.sparse as sp

from solvers.derandomize import round_derandomized
from solvers.guarantee import width_scale
from solvers.problem import Problem
from solvers.rounding_plan import SNAP, RoundingPlan, is_frac, snap

logger = logging.getLogger(__name__)

__all__ = ["RoundingPlan", "plan_rounding", "round_most_likely", "round_trials", "round_derandomized",
           "instance_widths"]


def instance_widths(problem: Problem) -> tuple[float | None, float | None]:
    """(B, D): min over rows of b_i / max_j a_ij and d_i / max_j c_ij (rows with rhs > 0); None if no such row."""
    out = []
    for mat, rhs in ((problem.A, problem.b), (problem.C, problem.d)):
        rows = (rhs > 0) & (np.diff(mat.indptr) > 0)
        if not rows.any():
            out.append(None)
            continue
        rowmax = mat.max(axis=1).toarray().ravel()
        out.append(float(np.min(rhs[rows] / rowmax[rows])))
    return out[0], out[1]


def _exact_sum_rows(problem: Problem, taken: np.ndarray) -> list[np.ndarray]:
    """General equality rows over 0/1 integer variables with equal coefficients and an integral sum,
    pairwise disjoint and disjoint from choice groups (first come, first served)."""
    G, lo, hi = problem.G, problem.g_lo, problem.g_hi
    binary = problem.integer & (problem.upper == 1.0)
    used = taken.copy()
    rows = []
    for r in np.flatnonzero((lo == hi) & (np.diff(G.indptr) > 1)):
        cols = G.indices[G.indptr[r]:G.indptr[r + 1]]
        vals = G.data[G.indptr[r]:G.indptr[r + 1]]
        k = lo[r] / vals[0]
        if (vals[0] > 0 and np.all(vals == vals[0]) and abs(k - round(k)) < 1e-9 and binary[cols].all()
                and not used[cols].any()):
            used[cols] = True
            rows.append(cols)
    return rows


def plan_rounding(problem: Problem, x_lp: np.ndarray, *, scale: str | float | tuple[float, float] = "width",
                  targets: tuple[float, float] = (0.25, 0.25)) -> RoundingPlan:
    """Prepare rounding of ``x_lp``.

    ``scale="width"`` picks the packing/covering scale factors from the width (see
    :func:`solvers.guarantee.width_scale`, failure budgets ``targets``); a number or a
    ``(pack, cover)`` pair fixes them.  Only variables in packing rows but no covering row (and
    vice versa) are scaled; continuous and structured variables (groups, exact-sum rows) never are.
    """
    n = problem.n
    integer = problem.integer
    # An integer variable can never exceed floor(upper): rounding 2.4 up under upper = 2.5 would break its bound.
    upper = np.where(integer, np.floor(problem.upper + SNAP), problem.upper)
    x = np.clip(np.asarray(x_lp, dtype=np.float64), 0.0, upper)

    flat = problem.flat_groups  # options by group, members by option
    opt_ind, opt_group, mem_var, mem_opt = (a.copy() for a in (flat.indicator, flat.group, flat.members,
                                                                flat.member_option))
    in_group = np.zeros(n, dtype=bool)
    in_group[opt_ind] = True
    in_group[mem_var] = True

    pip_rows = _exact_sum_rows(problem, in_group)
    in_pip = np.zeros(n, dtype=bool)
    width = max((r.size for r in pip_rows), default=0)
    pip_vars = np.full((len(pip_rows), width), -1, dtype=np.int64)
    for i, cols in enumerate(pip_rows):
        pip_vars[i, :cols.size] = cols
        in_pip[cols] = True

    # Scaling: only plain variables that sit on one side (packing-only / covering-only).
    width_pack, width_cover = instance_widths(problem)
    if scale == "width":
        s_pack = width_scale(width_pack or math.inf, int(np.count_nonzero(problem.b > 0)), targets[0], cover=False)
        s_cover = width_scale(width_cover or math.inf, int(np.count_nonzero(problem.d > 0)), targets[1], cover=True)
    elif isinstance(scale, tuple):
        s_pack, s_cover = (float(v) for v in scale)
    else:
        s_pack = s_cover = float(scale)
    if not (0 < s_pack <= 1 <= s_cover):
        raise ValueError(f"scale: need 0 < packing scale <= 1 <= covering scale, got {s_pack}, {s_cover}")
    plain = ~in_group & ~in_pip
    in_a = np.diff(problem.A.tocsc().indptr) > 0
    in_c = np.diff(problem.C.tocsc().indptr) > 0
    # Continuous variables are never scaled: nothing is rounded there, so scaling would only cost.
    pack_only, cover_only = plain & integer & in_a & ~in_c, plain & integer & in_c & ~in_a
    s_pack = s_pack if pack_only.any() else 1.0  # report the scaling actually applied
    s_cover = s_cover if cover_only.any() else 1.0
    factor = np.ones(n)
    factor[pack_only] = s_pack
    factor[cover_only] = s_cover
    marginal = np.minimum(factor * x, upper)
    marginal = np.where(integer, snap(marginal), marginal)

    # Choice groups: option probabilities and conditional member targets.
    n_groups = flat.exact.size
    group_exact = flat.exact.copy()
    opt_prob = x[opt_ind].copy()
    total = np.bincount(opt_group, weights=opt_prob, minlength=n_groups)
    norm = np.where(group_exact, total, np.maximum(total, 1.0))
    opt_prob = np.where(norm[opt_group] > 0, opt_prob / np.where(norm > 0, norm, 1.0)[opt_group], 0.0)
    opt_prob = snap(opt_prob)
    y = opt_prob[mem_opt]
    mem_cond = np.where(y > 0, np.minimum(x[mem_var] / np.where(y > 0, y, 1.0), upper[mem_var]), 0.0)
    mem_cond = np.where(integer[mem_var], snap(mem_cond), mem_cond)
    marginal[opt_ind] = opt_prob
    marginal[mem_var] = y * mem_cond

    free = np.flatnonzero(plain & integer)
    unit_range = np.zeros(n)
    unit_range[free] = is_frac(marginal[free])
    unit_range[in_pip] = is_frac(marginal[in_pip])
    sure = y == 1.0
    unit_range[mem_var[sure]] = integer[mem_var[sure]] & is_frac(mem_cond[sure])
    uncertain = np.flatnonzero((opt_prob > 0) & (opt_prob < 1))
    col_of = np.full(opt_ind.size, -1)
    col_of[uncertain] = np.arange(uncertain.size)
    mem_in = col_of[mem_opt] >= 0
    block = sp.csc_array(
        (np.concatenate((np.ones(uncertain.size), np.where(integer[mem_var], np.ceil(mem_cond), mem_cond)[mem_in])),
         (np.concatenate((opt_ind[uncertain], mem_var[mem_in])), np.concatenate((np.arange(uncertain.size),
                                                                                  col_of[mem_opt][mem_in])))),
        shape=(n, uncertain.size))
    return RoundingPlan(
        marginal=marginal, free=free, integer=integer.copy(), opt_ind=opt_ind, opt_group=opt_group,
        opt_prob=opt_prob, group_exact=group_exact, mem_var=mem_var, mem_opt=mem_opt, mem_cond=mem_cond,
        pip_vars=pip_vars, unit_range=unit_range, block=block, scale_pack=s_pack, scale_cover=s_cover,
        width_pack=width_pack, width_cover=width_cover, exact_rows=n_groups + len(pip_rows),
        exact_general_rows=len(pip_rows))


def _bernoulli_round(p: np.ndarray, integer: np.ndarray, u: np.ndarray) -> np.ndarray:
    """floor(p) + [u < frac(p)] for integer entries, p itself for continuous ones (broadcast over trials)."""
    fl = np.floor(p)
    return np.where(integer, fl + (u < p - fl), p)


def _pipage(p: np.ndarray, trials: int, rng: np.random.Generator) -> np.ndarray:
    """Srinivasan's dependent rounding of each row of ``p`` (rows x L, padded with 0), all trials at once.

    Scans each row keeping one open fractional entry; pairing it with the next fractional entry moves
    probability mass so one of the two becomes integral, up with probability beta/(alpha+beta), which
    keeps both marginals and the row sum.
    """
    n_rows, length = p.shape
    out = np.zeros((trials, n_rows, length))
    t_idx, r_idx = np.indices((trials, n_rows))
    open_l = np.full((trials, n_rows), -1)
    open_v = np.zeros((trials, n_rows))
    for col in range(length):
        a = open_v
        b = np.broadcast_to(p[:, col], (trials, n_rows)).copy()
        has_open = open_l >= 0
        both = has_open & is_frac(b)
        alpha = np.minimum(1.0 - a, b)
        beta = np.minimum(a, 1.0 - b)
        up = rng.random((trials, n_rows)) * (alpha + beta) < beta
        a = np.where(both, np.where(up, a + alpha, a - beta), a)
        b = np.where(both, np.where(up, b - alpha, b + beta), b)
        a_done = has_open & ~is_frac(a)
        out[t_idx[a_done], r_idx[a_done], open_l[a_done]] = np.round(a[a_done])
        b_frac = is_frac(b)
        out[:, :, col] = np.where(b_frac, 0.0, np.round(b))
        open_l = np.where(b_frac, col, np.where(a_done, -1, open_l))
        open_v = np.where(b_frac, b, np.where(a_done, 0.0, a))
    left = open_l >= 0  # only LP noise can leave a fractional entry at the end of an integral-sum row
    out[t_idx[left], r_idx[left], open_l[left]] = np.round(open_v[left])
    return out


def round_most_likely(plan: RoundingPlan) -> np.ndarray:
    """The deterministic member of the rounding family: in each choice group the option of
    largest LP weight, its members rounded to the nearest integer of their conditional
    values (x_i / y_k); other integer variables rounded to nearest, continuous ones kept.
    A cheap first candidate before (or instead of) random trials."""
    x = np.where(plan.integer, np.rint(plan.marginal), plan.marginal)
    if plan.opt_ind.size:
        order = np.lexsort((-plan.opt_prob, plan.opt_group))
        first = np.ones(len(order), dtype=bool)
        first[1:] = plan.opt_group[order][1:] != plan.opt_group[order][:-1]
        chosen = np.zeros(len(plan.opt_prob), dtype=bool)
        chosen[order[first]] = plan.opt_prob[order[first]] > 0
        x[plan.opt_ind] = chosen
        x[plan.mem_var] = np.where(chosen[plan.mem_opt], np.rint(plan.mem_cond), 0.0)
    return x


def round_trials(plan: RoundingPlan, trials: int, rng: np.random.Generator) -> np.ndarray:
    """``trials`` independent roundings as a (trials, n) matrix; every column keeps its marginal."""
    X = np.tile(plan.marginal, (trials, 1))
    if plan.free.size:
        X[:, plan.free] = _bernoulli_round(plan.marginal[plan.free], True, rng.random((trials, plan.free.size)))
    if plan.opt_ind.size:
        n_groups = plan.group_exact.size
        cum_hi = np.zeros_like(plan.opt_prob)
        order = np.argsort(plan.opt_group, kind="stable")
        csum = np.cumsum(plan.opt_prob[order])
        start = np.searchsorted(plan.opt_group[order], np.arange(n_groups))
        cum_hi[order] = csum - np.concatenate(([0.0], csum))[start][plan.opt_group[order]]
        cum_lo = cum_hi - plan.opt_prob
        last = order[np.searchsorted(plan.opt_group[order], np.arange(n_groups), side="right") - 1]
        # An exact group always picks an option, whatever the LP noise in its sum.
        reach = np.where(plan.group_exact, cum_hi[last], 1.0)
        u = (rng.random((trials, n_groups)) * reach)[:, plan.opt_group]
        chosen = (u >= cum_lo) & (u < cum_hi) & (plan.opt_prob > 0)
        X[:, plan.opt_ind] = chosen
        if plan.mem_var.size:
            vals = _bernoulli_round(plan.mem_cond, plan.integer[plan.mem_var],
                                    rng.random((trials, plan.mem_var.size)))
            X[:, plan.mem_var] = chosen[:, plan.mem_opt] * vals
    if plan.pip_vars.size:
        valid = plan.pip_vars >= 0
        p = np.where(valid, plan.marginal[np.maximum(plan.pip_vars, 0)], 0.0)
        X[:, plan.pip_vars[valid]] = _pipage(p, trials, rng)[:, valid]
    return X
