"""Derandomised rounding: the method of conditional expectations with pessimistic estimators.

Replaces every coin of :mod:`solvers.rounding` by the choice that does not increase the pessimistic
estimator of :mod:`solvers.guarantee`'s bad events (Raghavan 1988; Young 1995).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from solvers.guarantee import EventRows
from solvers.problem import Problem
from solvers.rounding_plan import RoundingPlan, is_frac
from solvers.lattice import LatticeRow, convolve, option_pmf
from solvers.row_tails import coin_log_mgf, log_mix

__all__ = ["round_derandomized"]


class _Estimator:
    """Pessimistic estimator over the guarantee's events, combined as the guarantee combines them.

    Row r's term is v_r = min(E[exp(lam_r (H_r x - t_r))], lattice tail_r, Markov_r | choices so far):
    ``log_phi[r]`` is the log of its Chernoff part (each unit contributes a log moment-generating
    factor, swapped for its fixed value when the unit is decided), ``tail[r]`` the conditional tail of
    its lattice copy (inf without one), and the objective's Markov term (E[c.x | so far] - sure) /
    (threshold - sure) joins its row.  Each part is a conditional expectation that the next unit's
    outcome averages to at most its present value, so v_r is too.  Per family, Phi adds min(1, the sum
    of v_r over its union rows + 1 - prod(1 - min(1, v_r)) over its Harris rows): Harris rows see only
    single coins, whose outcomes move all their terms the same way, so by Chebyshev's sum inequality
    the product averages to at least its present value (and min(1, .) keeps averaging down).  Hence
    Phi starts at p_pack + p_cover + p_objective and the best outcome never increases it.
    """

    def __init__(self, ev: EventRows, c: np.ndarray, marginal: np.ndarray) -> None:
        self.ev = ev
        self.Hc = sp.csc_array(ev.H)
        self.log_phi = -ev.lam * ev.t
        self.tail = np.full(ev.t.size, np.inf)
        for r, row in ev.lattice.items():
            self.tail[r] = row.value(row.pmf())
        self.expect = float(c @ marginal)  # E[c.x | choices so far], for the Markov term
        self.families = [((ev.family == f) & ~ev.product, (ev.family == f) & ev.product) for f in np.unique(ev.family)]
        self.v = np.zeros(ev.t.size)  # each row's term, filled by refresh() once log_phi is complete

    def refresh(self) -> None:
        self.v = self._values(np.arange(self.v.size), self.log_phi, self.tail, self.expect)

    def column(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.Hc.indptr[j], self.Hc.indptr[j + 1]
        rows = self.Hc.indices[lo:hi]
        return rows, self.ev.lam[rows] * self.Hc.data[lo:hi]

    def _values(self, rows: np.ndarray, log_phi: np.ndarray, tails: np.ndarray, expect: float) -> np.ndarray:
        out = np.minimum(np.exp(log_phi), tails)
        if self.ev.markov is not None:
            r, sure, thr = self.ev.markov
            out = np.where(rows == r, np.minimum(out, (expect - sure) / (thr - sure)), out)
        return out

    def _phi(self, v: np.ndarray) -> float:
        """Per family min(1, union rows' sum + 1 - prod over Harris rows of (1 - min(1, v))), summed."""
        return sum(min(1.0, float(v[union].sum()) + 1.0 - float(np.prod(1.0 - np.minimum(1.0, v[harris]))))
                   for union, harris in self.families)

    def total(self) -> float:
        return self._phi(self.v)

    def _after(self, rows: np.ndarray, delta: np.ndarray, tails: np.ndarray, shift: float) -> np.ndarray:
        """Every row's term after an outcome (E[c.x] moves only with variables of the objective's row,
        so its Markov term is among ``rows`` whenever ``shift`` is not 0)."""
        v = self.v.copy()
        v[rows] = self._values(rows, self.log_phi[rows] + delta, tails, self.expect + shift)
        return v

    def best(self, rows: np.ndarray, deltas: np.ndarray, shifts: np.ndarray, tails: np.ndarray | None = None) -> int:
        """Index of the outcome (row of ``deltas``: change of log_phi on ``rows``; ``shifts``: change of
        E[c.x]; ``tails``: the lattice tails on ``rows`` after it) with the smallest estimator; ties go to
        the first outcome, so the result is deterministic."""
        tails = np.broadcast_to(self.tail[rows], deltas.shape) if tails is None else tails
        phi = [self._phi(self._after(rows, d, tl, float(s))) for d, tl, s in zip(deltas, tails, shifts)]
        return int(np.argmin(phi))

    def apply(self, rows: np.ndarray, delta: np.ndarray, shift: float, tails: np.ndarray | None = None) -> None:
        tails = self.tail[rows] if tails is None else tails
        self.v = self._after(rows, delta, tails, shift)
        np.add.at(self.log_phi, rows, delta)
        self.tail[rows] = tails
        self.expect += shift


def _group_tails(lattice: dict[int, LatticeRow], rows: np.ndarray, group: int, options: np.ndarray,
                 none: bool, tails: np.ndarray) -> np.ndarray:
    """Lattice tails on ``rows`` after the group picks each of ``options`` (then none, if allowed)."""
    out = np.broadcast_to(tails, (options.size + none, rows.size)).copy()
    for i, r in enumerate(rows):
        row = lattice.get(int(r))
        if row is None or group not in row.blocks:
            continue
        rest = row.pmf(skip_group=group)
        touching = {opt: (b, cs) for opt, b, _, cs in row.blocks[group]}
        for k, opt in enumerate(options):
            b, cs = touching.get(int(opt), (0, []))
            out[k, i] = row.value(convolve(rest, option_pmf(b, cs, 1 + b + sum(s for _, s, _ in cs))))
        if none:
            out[-1, i] = row.value(rest)
    return out


def _pick_group(lattice: dict[int, LatticeRow], rows: np.ndarray, group: int, option: int | None) -> None:
    """Record the group's choice in the lattice rows: its sure steps fixed, its members' coins left."""
    for r in rows:
        row = lattice.get(int(r))
        if row is None or group not in row.blocks:
            continue
        for opt, b, _, cs in row.blocks.pop(group):
            if opt == option:
                row.fixed += b
                row.coins.update({v: (s, q) for v, s, q in cs})


def _coin_tails(lattice: dict[int, LatticeRow], rows: np.ndarray, j: int, tails: np.ndarray) -> np.ndarray:
    """Lattice tails on ``rows`` after variable j rounds down (first row) or up."""
    out = np.vstack([tails, tails])
    for i, r in enumerate(rows):
        row = lattice.get(int(r))
        if row is None or j not in row.coins:
            continue
        rest, (s, _) = row.pmf(skip_var=j), row.coins[j]
        out[:, i] = [row.value(rest), row.value(rest, s)]
    return out


def _pair_tails(lattice: dict[int, LatticeRow], rows: np.ndarray, pair: tuple[int, int], outcomes: np.ndarray,
                tails: np.ndarray) -> np.ndarray:
    """Lattice tails on ``rows`` after a pipage step sets the pair's marginals to each row of ``outcomes``."""
    out = np.vstack([tails] * len(outcomes))
    for i, r in enumerate(rows):
        row = lattice.get(int(r))
        if row is None or not any(j in row.coins for j in pair):
            continue
        for k, values in enumerate(outcomes):
            after = replace(row, coins=dict(row.coins))
            _set_coins(after, pair, values)
            out[k, i] = after.value(after.pmf())
    return out


def _set_coins(row: LatticeRow, pair: tuple[int, int], values: np.ndarray) -> None:
    """New marginals of exact-sum-row coins: an integral one leaves the row's random part."""
    for j, p in zip(pair, values):
        if j in row.coins:
            s, _ = row.coins.pop(j)
            if is_frac(np.array(p)):
                row.coins[j] = (s, float(p))
            else:
                row.fixed += s * int(round(p))


def _pick_coin(lattice: dict[int, LatticeRow], rows: np.ndarray, j: int, up: int) -> None:
    for r in rows:
        row = lattice.get(int(r))
        if row is not None and j in row.coins:
            row.fixed += row.coins.pop(j)[0] * up


def _bern_log_mgf(lh: np.ndarray, p: np.ndarray) -> np.ndarray:
    """log E[exp(lh * x)] for x = floor(p) + Bernoulli(frac(p))."""
    fl = np.floor(p)
    return lh * fl + coin_log_mgf(lh, p - fl)


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
    lattice = {r: replace(row, coins=dict(row.coins), blocks=dict(row.blocks)) for r, row in ev.lattice.items()}
    est = _Estimator(replace(ev, lattice=lattice), c, plan.marginal)
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
        mix = log_mix(dense, plan.opt_prob[opts])
        est.log_phi[rows] += mix
        groups.append((g, opts, rows, dense, mix))
    est.refresh()
    phi_start = est.total()

    for g, opts, rows, dense, mix in groups:
        value = np.array([c[plan.opt_ind[k]] + c[plan.mem_var[plan.mem_opt == k]] @ plan.mem_cond[plan.mem_opt == k]
                          for k in opts])
        expect = float(plan.opt_prob[opts] @ value)
        possible = plan.opt_prob[opts] > 0  # an option rounding never picks is not an outcome
        deltas, shifts = (dense.T - mix)[possible], (value - expect)[possible]
        none = not plan.group_exact[g]
        if none:
            deltas, shifts = np.vstack([deltas, -mix]), np.append(shifts, -expect)
        tails = _group_tails(lattice, rows, int(g), opts[possible], none, est.tail[rows])
        k = est.best(rows, deltas, shifts, tails)
        est.apply(rows, deltas[k], float(shifts[k]), tails[k])
        chosen = int(opts[possible][k]) if k < possible.sum() else None
        _pick_group(lattice, rows, int(g), chosen)
        for opt in opts:
            members = plan.mem_var[plan.mem_opt == opt]
            x[plan.opt_ind[opt]] = float(opt == chosen)
            x[members] = plan.mem_cond[plan.mem_opt == opt] if opt == chosen else 0.0
    # Single variables: free integers and members of chosen options, each to floor or ceil.
    in_pip = np.zeros(n, dtype=bool)
    in_pip[plan.pip_vars[plan.pip_vars >= 0]] = True
    for j in np.flatnonzero(plan.integer & is_frac(x) & ~in_pip):
        rows, lhj = est.column(j)
        p, fl = x[j], math.floor(x[j])
        now = _bern_log_mgf(lhj, np.full(lhj.size, p))
        deltas = np.vstack([lhj * fl - now, lhj * (fl + 1) - now])
        tails = _coin_tails(lattice, rows, int(j), est.tail[rows])
        k = est.best(rows, deltas, c[j] * (np.array([fl, fl + 1]) - p), tails)
        est.apply(rows, deltas[k], c[j] * (fl + k - p), tails[k])
        _pick_coin(lattice, rows, int(j), k)
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
            now = np.concatenate((coin_log_mgf(la, a), coin_log_mgf(lb, b)))
            deltas = np.stack([np.concatenate((coin_log_mgf(la, o[0]), coin_log_mgf(lb, o[1]))) - now
                               for o in outcomes])
            rows, deltas = _merge(np.concatenate((ra, rb)), deltas)
            shifts = outcomes @ np.array([c[open_j], c[j]]) - (a * c[open_j] + b * c[j])
            pair = (int(open_j), int(j))
            tails = _pair_tails(lattice, rows, pair, outcomes, est.tail[rows])
            k = est.best(rows, deltas, shifts, tails)
            est.apply(rows, deltas[k], float(shifts[k]), tails[k])
            for r in rows:
                if int(r) in lattice:
                    _set_coins(lattice[int(r)], pair, outcomes[k])
            x[open_j], x[j] = outcomes[k]
            for v in (open_j, j):
                if not is_frac(x[v]):
                    x[v] = round(x[v])
            open_j = open_j if is_frac(x[open_j]) else (j if is_frac(x[j]) else -1)
        if open_j >= 0:
            x[open_j] = round(x[open_j])
    return x, phi_start, est.total()
