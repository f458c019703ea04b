"""The rows of a rounded LP point, each split into a sure part and random units; Chernoff bounds on them.

Why a module of its own: the guarantee (:mod:`solvers.guarantee`) states these bounds and the
derandomised rounding (:mod:`solvers.derandomize`) follows them unit by unit, so both need the
same split.  Under a :class:`RoundingPlan` the value of row r is ``X_r = sure_r + sum of units``:

* ``sure_r``: what rounding cannot change: integral and continuous variables, the floor of every
  randomly rounded integer variable (and, inside a chosen option, of its members);
* a *coin*: ``a_rj * Bernoulli(frac)`` for an integer variable rounded on its own (independent
  of everything else) or inside an exact-sum row (dependent rounding: negatively correlated);
* a *block*: one choice group with an uncertain option, a mixture over its options of the
  option's sure value plus its members' coins (independent of everything else).

Here: :class:`MgfTable`, Chernoff's bound on P[X_r >= t] (P[X_r <= t] for a lower tail) with
every unit's exact moment generating function.  :mod:`solvers.lattice` has the other bound, from
the distribution of a lattice-rounded copy of the row.  Both are theorems for this split
(docs/rounding.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.rounding_plan import RoundingPlan, is_frac

__all__ = ["Units", "MgfTable", "split_rows", "log_mgf", "log_mix", "coin_log_mgf", "slack", "sure_answer"]

U_GRID = np.logspace(-4.0, 2.0, 81)  # lambda * (row's widest unit): 1.19x apart, so <= 1% of the optimal exponent lost


def _sum(index: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """Sums of ``weights`` by ``index`` (float even when empty)."""
    return np.bincount(index, weights=weights, minlength=size).astype(np.float64, copy=False)


def slack(*scales: np.ndarray | float) -> np.ndarray | float:
    """Floating-point room, always taken in the safe direction (1e-11 of the magnitudes involved)."""
    return 1e-11 * (1.0 + sum(np.abs(s) for s in scales))


@dataclass(frozen=True)
class Units:
    """The rows of one matrix split under a plan (see the module docstring).

    Coins: ``coin_*`` (row-sorted COO; ``coin_dep`` marks exact-sum-row variables).  Blocks: one
    ``pair`` per (row, uncertain option touching it) with the option's sure value ``pair_base`` and
    probability ``pair_y``; ``pair_mix`` names its (row, group) block; ``pcoin_*`` are the member
    coins of each pair.  ``top`` is the largest value the random part can reach, ``width`` the
    largest range of one unit (0: the row is sure).
    """

    sure: np.ndarray
    top: np.ndarray
    width: np.ndarray
    coin_row: np.ndarray
    coin_var: np.ndarray
    coin_coef: np.ndarray
    coin_prob: np.ndarray
    coin_dep: np.ndarray
    pair_row: np.ndarray
    pair_opt: np.ndarray
    pair_base: np.ndarray
    pair_y: np.ndarray
    pair_mix: np.ndarray
    mix_row: np.ndarray
    mix_group: np.ndarray
    pcoin_pair: np.ndarray
    pcoin_var: np.ndarray
    pcoin_coef: np.ndarray
    pcoin_prob: np.ndarray

    @property
    def rows(self) -> int:
        return self.sure.size

    @property
    def has_block(self) -> np.ndarray:
        return np.bincount(self.mix_row, minlength=self.rows) > 0

    @property
    def has_dep(self) -> np.ndarray:
        return np.bincount(self.coin_row[self.coin_dep], minlength=self.rows) > 0


def split_rows(mat: sp.csr_array | np.ndarray, plan: RoundingPlan) -> Units:
    """Split every row of ``mat`` (non-negative entries) into its sure part, coins and blocks."""
    coo = sp.coo_array(sp.csr_array(mat))
    m, n = coo.shape
    r, j, a = coo.row.astype(np.int64), coo.col.astype(np.int64), coo.data.astype(np.float64)
    order = np.lexsort((j, r))
    r, j, a = r[order], j[order], a[order]
    uncertain = (plan.opt_prob > 0) & (plan.opt_prob < 1)
    owner = np.full(n, -1, dtype=np.int64)
    owner[plan.opt_ind[uncertain]] = np.flatnonzero(uncertain)
    in_unc = uncertain[plan.mem_opt]
    owner[plan.mem_var[in_unc]] = plan.mem_opt[in_unc]
    value = plan.marginal.copy()  # each variable's target, given its option when it has an uncertain one
    value[plan.mem_var] = plan.mem_cond
    value[plan.opt_ind[uncertain]] = 1.0
    coin = plan.integer & is_frac(value)
    base = np.where(coin, np.floor(value), value)
    prob = np.where(coin, value - base, 0.0)
    dep = np.zeros(n, dtype=bool)
    dep[plan.pip_vars[plan.pip_vars >= 0]] = True

    own = owner[j]
    plain = own < 0
    sure = _sum(r[plain], a[plain] * base[j[plain]], m)
    c = plain & coin[j]
    n_opt = plan.opt_prob.size
    keys, pair_of = np.unique(r[~plain] * n_opt + own[~plain], return_inverse=True)
    pair_row, pair_opt = keys // max(n_opt, 1), keys % max(n_opt, 1)
    pair_base = _sum(pair_of, (a * base[j])[~plain], keys.size)
    pc = coin[j][~plain]
    pcoin_pair, pcoin_var, pcoin_coef = pair_of[pc], j[~plain][pc], a[~plain][pc]
    n_groups = plan.group_exact.size
    pair_group = plan.opt_group[pair_opt]
    mkeys, pair_mix = np.unique(pair_row * max(n_groups, 1) + pair_group, return_inverse=True)
    mix_row, mix_group = mkeys // max(n_groups, 1), mkeys % max(n_groups, 1)

    pair_top = pair_base + _sum(pcoin_pair, pcoin_coef, keys.size)
    mix_top = np.zeros(mkeys.size)
    np.maximum.at(mix_top, pair_mix, pair_top)
    top = _sum(r[c], a[c], m) + _sum(mix_row, mix_top, m)
    width = np.zeros(m)
    np.maximum.at(width, r[c], a[c])
    np.maximum.at(width, mix_row, mix_top)
    return Units(sure=sure, top=top, width=width, coin_row=r[c], coin_var=j[c], coin_coef=a[c],
                 coin_prob=prob[j[c]], coin_dep=dep[j[c]], pair_row=pair_row, pair_opt=pair_opt,
                 pair_base=pair_base, pair_y=plan.opt_prob[pair_opt], pair_mix=pair_mix, mix_row=mix_row,
                 mix_group=mix_group, pcoin_pair=pcoin_pair, pcoin_var=pcoin_var, pcoin_coef=pcoin_coef,
                 pcoin_prob=prob[pcoin_var])


def log_mgf(u: Units, lam: np.ndarray) -> np.ndarray:
    """Per row, log of the product over units of E[exp(lam_r * unit)] (lam: one value per row).

    Exact for independent units; for coins of one exact-sum row it bounds the joint moment
    generating function from above (negative cylinder dependence, coefficients of one sign).
    """
    m = u.rows
    out = _sum(u.coin_row, coin_log_mgf(lam[u.coin_row] * u.coin_coef, u.coin_prob), m)
    if u.pair_row.size:
        lp = lam[u.pair_row]
        coins = coin_log_mgf(lp[u.pcoin_pair] * u.pcoin_coef, u.pcoin_prob)
        block = lp * u.pair_base + _sum(u.pcoin_pair, coins, lp.size)
        out += _sum(u.mix_row, _log_mix(u.pair_mix, u.pair_y, block, u.mix_row.size), m)
    return out


def coin_log_mgf(la: np.ndarray, q: np.ndarray) -> np.ndarray:
    """log E[exp(la * B)] = log(1 - q + q e^la) for B ~ Bernoulli(q), as a log-sum-exp (no cancellation
    when q is near 1 and la far below 0)."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(np.log1p(-q), np.log(q) + la)


def _log_mix(which: np.ndarray, y: np.ndarray, log_m: np.ndarray, size: int) -> np.ndarray:
    """Per mixture: log(sum_k y_k exp(log_m_k) + 1 - sum_k y_k), the k grouped by ``which``.

    Computed as a log-sum-exp: the textbook log1p(sum_k y_k expm1(log_m_k)) cancels to log 0 when the
    y sum to 1 and every option's moment is tiny (a lower tail far below the group's least outcome).
    """
    rest = np.maximum(1.0 - _sum(which, y, size), 0.0)
    with np.errstate(divide="ignore"):
        terms, log_rest = np.log(y) + log_m, np.log(rest)
    top = log_rest.copy()
    np.maximum.at(top, which, terms)
    top = np.where(np.isfinite(top), top, 0.0)
    total = _sum(which, np.exp(terms - top[which]), size) + np.exp(log_rest - top)
    with np.errstate(divide="ignore"):
        return top + np.log(total)


def log_mix(log_m: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`_log_mix` for a dense (rows x options) table of log moments of one group's options."""
    rows, k = log_m.shape
    which = np.repeat(np.arange(rows), k)
    return _log_mix(which, np.tile(y, rows), log_m.ravel(), rows)


def sure_answer(u: Units, t: np.ndarray, upper: bool) -> np.ndarray:
    """1 or 0 where the threshold lies outside the range [sure, sure + top] the row can take; nan inside."""
    room = slack(t, u.sure, u.top)
    out = np.full(u.rows, np.nan)
    if upper:
        out[t <= u.sure - room] = 1.0
        out[t > u.sure + u.top + room] = 0.0
    else:
        out[t < u.sure - room] = 0.0
        out[t >= u.sure + u.top + room] = 1.0
    return out


class MgfTable:
    """Chernoff's bound inf_lambda E[exp(lambda (X_r - t))] with the exact moment generating function.

    ``log E[exp(lambda X_r)]`` is tabulated once on a grid of lambda per row (scaled by the row's
    widest unit); every threshold then costs one minimum over the grid.  Any lambda of the grid
    gives a valid bound, so the grid only costs tightness (< 1% of the exponent).
    """

    def __init__(self, units: Units, *, upper: bool) -> None:
        self.units, self.upper = units, upper
        w = np.where(units.width > 0, units.width, 1.0)
        self.lam = (1.0 if upper else -1.0) * U_GRID[None, :] / w[:, None]
        self.log_m = np.column_stack([log_mgf(units, self.lam[:, k]) for k in range(U_GRID.size)]) \
            if units.rows else np.zeros((0, U_GRID.size))

    def bound(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bound per row, the lambda attaining it) at thresholds ``t``."""
        u = self.units
        expo = self.log_m + self.lam * (u.sure - t)[:, None]
        k = np.argmin(expo, axis=1) if u.rows else np.zeros(0, dtype=np.int64)
        rows = np.arange(u.rows)
        p, lam = np.minimum(1.0, np.exp(expo[rows, k])), self.lam[rows, k]
        sure = sure_answer(u, t, self.upper)
        known = ~np.isnan(sure)
        return np.where(known, sure, p), np.where(known, 0.0, lam)
