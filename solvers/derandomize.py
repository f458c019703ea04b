"""Derandomised rounding: the method of conditional expectations with pessimistic estimators.

Replaces every coin of :mod:`solvers.rounding` by the choice that does not increase the pessimistic
estimator of :mod:`solvers.guarantee`'s bad events (Raghavan 1988; Young 1995).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from solvers.guarantee import EventRows
from solvers.problem import Problem
from solvers.rounding_plan import RoundingPlan, is_frac

__all__ = ["round_derandomized"]


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
    random_var = plan.integer & is_frac(cond)
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
    for j in np.flatnonzero(plan.integer & is_frac(x) & ~in_pip):
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
            if not is_frac(x[j]):
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
                if not is_frac(x[v]):
                    x[v] = round(x[v])
            open_j = open_j if is_frac(x[open_j]) else (j if is_frac(x[j]) else -1)
        if open_j >= 0:
            x[open_j] = round(x[open_j])
    return x, phi_start, est.total()
