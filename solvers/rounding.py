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
:func:`round_derandomized` replaces every coin by the choice that does not increase the
pessimistic estimator of :mod:`solvers.guarantee` (method of conditional expectations).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.guarantee import EventRows, width_scale
from solvers.problem import Problem

logger = logging.getLogger(__name__)

__all__ = ["RoundingPlan", "plan_rounding", "round_most_likely", "round_trials", "round_derandomized",
           "instance_widths"]

_SNAP = 1e-9  # marginals this close to an integer are that integer (LP noise)


@dataclass(frozen=True)
class RoundingPlan:
    """Everything rounding needs, computed once per (problem, LP solution, scaling).

    ``marginal`` is E[x_j] for every trial.  ``free`` are the independently rounded integer variables.
    Choice options are flattened: ``opt_ind`` (indicator), ``opt_group``, ``opt_prob`` (y_k, normalised
    so an exact group sums to 1), members ``mem_var``/``mem_opt``/``mem_cond`` (target given the option).
    ``pip_vars`` holds the exact-sum rows, padded with -1.  ``unit_range`` and ``block`` describe the
    independent units for the guarantee: a single variable's random range, and for each uncertain
    option the most it can put into a row.
    """

    marginal: np.ndarray
    free: np.ndarray
    integer: np.ndarray
    opt_ind: np.ndarray
    opt_group: np.ndarray
    opt_prob: np.ndarray
    group_exact: np.ndarray
    mem_var: np.ndarray
    mem_opt: np.ndarray
    mem_cond: np.ndarray
    pip_vars: np.ndarray
    unit_range: np.ndarray
    block: sp.csc_array
    scale_pack: float
    scale_cover: float
    width_pack: float | None
    width_cover: float | None
    exact_rows: int
    exact_general_rows: int


def _snap(p: np.ndarray) -> np.ndarray:
    r = np.round(p)
    return np.where(np.abs(p - r) < _SNAP, r, p)


def _is_frac(p: np.ndarray) -> np.ndarray:
    return np.abs(p - np.round(p)) >= _SNAP


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
    x = np.clip(np.asarray(x_lp, dtype=np.float64), 0.0, problem.upper)
    integer = problem.integer

    opt_ind, opt_group, mem_var, mem_opt = [], [], [], []
    for g, group in enumerate(problem.groups):
        for opt in group.options:
            mem_var.append(opt.members)
            mem_opt.append(np.full(opt.members.size, len(opt_ind), dtype=np.int64))
            opt_ind.append(opt.indicator)
            opt_group.append(g)
    opt_ind = np.asarray(opt_ind, dtype=np.int64)
    opt_group = np.asarray(opt_group, dtype=np.int64)
    mem_var = np.concatenate(mem_var) if mem_var else np.zeros(0, dtype=np.int64)
    mem_opt = np.concatenate(mem_opt) if mem_opt else np.zeros(0, dtype=np.int64)
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
    marginal = np.minimum(factor * x, problem.upper)
    marginal = np.where(integer, _snap(marginal), marginal)

    # Choice groups: option probabilities and conditional member targets.
    n_groups = len(problem.groups)
    group_exact = np.array([grp.exact for grp in problem.groups], dtype=bool)
    opt_prob = x[opt_ind].copy()
    total = np.bincount(opt_group, weights=opt_prob, minlength=n_groups)
    norm = np.where(group_exact, total, np.maximum(total, 1.0))
    opt_prob = np.where(norm[opt_group] > 0, opt_prob / np.where(norm > 0, norm, 1.0)[opt_group], 0.0)
    opt_prob = _snap(opt_prob)
    y = opt_prob[mem_opt]
    mem_cond = np.where(y > 0, np.minimum(x[mem_var] / np.where(y > 0, y, 1.0), problem.upper[mem_var]), 0.0)
    mem_cond = np.where(integer[mem_var], _snap(mem_cond), mem_cond)
    marginal[opt_ind] = opt_prob
    marginal[mem_var] = y * mem_cond

    free = np.flatnonzero(plain & integer)
    unit_range = np.zeros(n)
    unit_range[free] = _is_frac(marginal[free])
    unit_range[in_pip] = _is_frac(marginal[in_pip])
    sure = y == 1.0
    unit_range[mem_var[sure]] = integer[mem_var[sure]] & _is_frac(mem_cond[sure])
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
        both = has_open & _is_frac(b)
        alpha = np.minimum(1.0 - a, b)
        beta = np.minimum(a, 1.0 - b)
        up = rng.random((trials, n_rows)) * (alpha + beta) < beta
        a = np.where(both, np.where(up, a + alpha, a - beta), a)
        b = np.where(both, np.where(up, b - alpha, b + beta), b)
        a_done = has_open & ~_is_frac(a)
        out[t_idx[a_done], r_idx[a_done], open_l[a_done]] = np.round(a[a_done])
        b_frac = _is_frac(b)
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


class _Estimator:
    """Pessimistic estimator Phi = sum_r E[exp(lam_r (H_r x - t_r)) | choices so far] (+ Markov term).

    ``log_phi[r]`` is the log of row r's term; each unit (variable, group, pipage pair) contributes a
    log moment-generating factor that is swapped for its fixed value when the unit is decided.
    """

    def __init__(self, ev: EventRows, c: np.ndarray, marginal: np.ndarray) -> None:
        self.ev = ev
        self.Hc = sp.csc_array(ev.H)
        self.log_phi = -ev.lam * ev.t
        self.c = c
        self.markov = ev.markov_threshold
        self.expect = float(c @ marginal)  # E[c.x | choices so far], for the Markov term

    def column(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.Hc.indptr[j], self.Hc.indptr[j + 1]
        rows = self.Hc.indices[lo:hi]
        return rows, self.ev.lam[rows] * self.Hc.data[lo:hi]

    def total(self) -> float:
        out = float(np.exp(self.log_phi).sum())
        return out + (self.expect / self.markov if self.markov else 0.0)

    def best(self, rows: np.ndarray, deltas: np.ndarray, shifts: np.ndarray) -> int:
        """Index of the outcome (row of ``deltas``: change of log_phi on ``rows``; ``shifts``: change of
        E[c.x]) with the smallest estimator; ties go to the first outcome, so the result is deterministic."""
        base = self.log_phi[rows]
        phi = np.exp(base + deltas).sum(axis=1) - np.exp(base).sum()
        if self.markov:
            phi = phi + shifts / self.markov
        return int(np.argmin(phi))

    def apply(self, rows: np.ndarray, delta: np.ndarray, shift: float) -> None:
        np.add.at(self.log_phi, rows, delta)
        self.expect += shift


def _bern_log_mgf(lh: np.ndarray, p: np.ndarray) -> np.ndarray:
    """log E[exp(lh * x)] for x = floor(p) + Bernoulli(frac(p))."""
    fl = np.floor(p)
    return lh * fl + np.log1p((p - fl) * np.expm1(lh))


def _merge(rows: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the columns of ``deltas`` that refer to the same row (a row can meet two variables of one unit)."""
    uniq, inv = np.unique(rows, return_inverse=True)
    out = np.zeros((deltas.shape[0], uniq.size))
    for k in range(deltas.shape[0]):
        out[k] = np.bincount(inv, weights=deltas[k], minlength=uniq.size)
    return uniq, out


def round_derandomized(problem: Problem, plan: RoundingPlan, ev: EventRows) -> tuple[np.ndarray, float, float]:
    """One deterministic rounding by the method of conditional expectations (Raghavan 1988, Young 1995).

    Decides groups, then single variables, then exact-sum rows, each time taking the outcome with the
    smallest pessimistic estimator; the estimator never increases, so when it starts below 1 the result
    avoids every bad event of the guarantee.  Returns (x, estimator at start, estimator at end).
    """
    n, c = problem.n, problem.c
    x = plan.marginal.copy()
    est = _Estimator(ev, c, plan.marginal)
    H = sp.csr_array(ev.H)
    rows_of = np.repeat(np.arange(H.shape[0]), np.diff(H.indptr))
    lh = ev.lam[rows_of] * H.data
    uncertain = (plan.opt_prob > 0) & (plan.opt_prob < 1)
    in_block = np.zeros(n, dtype=bool)
    in_block[plan.opt_ind[uncertain]] = True
    in_block[plan.mem_var[uncertain[plan.mem_opt]]] = True
    cond = plan.marginal.copy()  # each variable's target once its option (if any) is chosen
    cond[plan.mem_var] = plan.mem_cond
    cond[plan.opt_ind] = np.where(uncertain, 1.0, plan.opt_prob)
    random_var = plan.integer & _is_frac(cond)
    term = np.where(random_var[H.indices], _bern_log_mgf(lh, cond[H.indices]), lh * cond[H.indices])
    est.log_phi += np.bincount(rows_of, weights=np.where(in_block[H.indices], 0.0, term), minlength=H.shape[0])
    # Block log moment of each uncertain option; a group contributes log of the mixture over its options.
    owner = np.full(n, -1)
    owner[plan.opt_ind] = np.arange(plan.opt_ind.size)
    owner[plan.mem_var] = plan.mem_opt
    blk = in_block[H.indices]
    B = sp.csc_array((term[blk], (rows_of[blk], owner[H.indices[blk]])), shape=(H.shape[0], plan.opt_ind.size))
    groups = []
    for g in np.unique(plan.opt_group[uncertain]):
        opts = np.flatnonzero(plan.opt_group == g)
        sub = B[:, opts]
        rows = np.unique(sub.indices)
        dense = sub.toarray()[rows]
        mix = np.log1p(np.expm1(dense) @ plan.opt_prob[opts])
        est.log_phi[rows] += mix
        groups.append((g, opts, rows, dense, mix))
    phi_start = est.total()

    for g, opts, rows, dense, mix in groups:
        value = np.array([c[plan.opt_ind[k]] + c[plan.mem_var[plan.mem_opt == k]] @ plan.mem_cond[plan.mem_opt == k]
                          for k in opts])
        expect = float(plan.opt_prob[opts] @ value)
        deltas, shifts = dense.T - mix, value - expect
        if not plan.group_exact[g]:
            deltas, shifts = np.vstack([deltas, -mix]), np.append(shifts, -expect)
        k = est.best(rows, deltas, shifts)
        est.apply(rows, deltas[k], float(shifts[k]))
        for i, opt in enumerate(opts):
            members = plan.mem_var[plan.mem_opt == opt]
            x[plan.opt_ind[opt]] = float(i == k)
            x[members] = plan.mem_cond[plan.mem_opt == opt] if i == k else 0.0
    # Single variables: free integers and members of chosen options, each to floor or ceil.
    in_pip = np.zeros(n, dtype=bool)
    in_pip[plan.pip_vars[plan.pip_vars >= 0]] = True
    for j in np.flatnonzero(plan.integer & _is_frac(x) & ~in_pip):
        rows, lhj = est.column(j)
        p, fl = x[j], math.floor(x[j])
        now = _bern_log_mgf(lhj, np.full(lhj.size, p))
        deltas = np.vstack([lhj * fl - now, lhj * (fl + 1) - now])
        k = est.best(rows, deltas, c[j] * (np.array([fl, fl + 1]) - p))
        est.apply(rows, deltas[k], c[j] * (fl + k - p))
        x[j] = fl + k
    # Exact-sum rows: derandomised pipage steps (each row term is concave along a step, so the better
    # endpoint never increases the estimator).
    for row in plan.pip_vars:
        open_j = -1
        for j in row[row >= 0]:
            if not _is_frac(x[j]):
                x[j] = round(x[j])
                continue
            if open_j < 0:
                open_j = j
                continue
            a, b = x[open_j], x[j]
            alpha, beta = min(1 - a, b), min(a, 1 - b)
            outcomes = np.array([[a + alpha, b - alpha], [a - beta, b + beta]])
            ra, la = est.column(open_j)
            rb, lb = est.column(j)
            now = np.concatenate((np.log1p(a * np.expm1(la)), np.log1p(b * np.expm1(lb))))
            deltas = np.stack([np.concatenate((np.log1p(o[0] * np.expm1(la)), np.log1p(o[1] * np.expm1(lb)))) - now
                               for o in outcomes])
            rows, deltas = _merge(np.concatenate((ra, rb)), deltas)
            shifts = outcomes @ np.array([c[open_j], c[j]]) - (a * c[open_j] + b * c[j])
            k = est.best(rows, deltas, shifts)
            est.apply(rows, deltas[k], float(shifts[k]))
            x[open_j], x[j] = outcomes[k]
            for v in (open_j, j):
                if not _is_frac(x[v]):
                    x[v] = round(x[v])
            open_j = open_j if _is_frac(x[open_j]) else (j if _is_frac(x[j]) else -1)
        if open_j >= 0:
            x[open_j] = round(x[open_j])
    return x, phi_start, est.total()
