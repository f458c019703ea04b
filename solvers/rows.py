"""A Problem as rows ``lo <= M x <= hi`` with what repair and local search need, and the effect of moves on them.

:class:`RowSystem` is built once per solve (:func:`row_system`); :func:`evaluate_moves` and
:func:`evaluate_deltas` give, in one vectorised pass, how single-column and composite moves change
each row's normalised violation.  Shared by :mod:`solvers.repair` and :mod:`solvers.local_search`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.problem import Problem

__all__ = ["RowSystem", "row_system", "column_entries", "move_effects", "evaluate_moves", "evaluate_deltas"]

_TOL = 1e-9  # relative slack repair aims for, well inside check.py's 1e-6


@dataclass(frozen=True)
class RowSystem:
    """The problem as lo <= M x <= hi with everything repair and local search need per row/column.

    ``cost`` is the objective in minimisation form; ``norm`` scales each row's violation to units
    of its largest coefficient; ``price`` is the cheapest cost of raising a row by one such unit.
    """

    M: sp.csr_array
    Mc: sp.csc_array
    lo: np.ndarray
    hi: np.ndarray
    tol_lo: np.ndarray
    tol_hi: np.ndarray
    norm: np.ndarray
    price: np.ndarray
    upper: np.ndarray
    integer: np.ndarray
    cost: np.ndarray
    names: tuple[str, ...]
    opt_ind: np.ndarray  # indicator of each choice option
    opt_group: np.ndarray  # its group
    opt_vars: sp.csc_array  # n x options: 1 on the indicator and the members of each option


def row_system(problem: Problem) -> RowSystem:
    """Build the :class:`RowSystem` of ``problem`` (once per solve; shared by all trials)."""
    M, lo, hi = problem.all_rows()
    M = sp.csr_array(M)
    Mc = sp.csc_array(M)
    Mc.sort_indices()
    absmax = abs(M).max(axis=1).toarray().ravel() if M.shape[0] else np.zeros(0)
    norm = np.where(absmax > 0, absmax, 1.0)
    cost = problem.c if problem.sense == "min" else -problem.c
    rows_of = np.repeat(np.arange(M.shape[0]), np.diff(M.indptr))
    pos = M.data > 0
    unit_cost = np.maximum(cost[M.indices[pos]], 0.0) * norm[rows_of[pos]] / M.data[pos]
    price = np.full(M.shape[0], np.inf)
    np.minimum.at(price, rows_of[pos], unit_cost)
    price = np.where(np.isfinite(price), price, 0.0)
    with np.errstate(invalid="ignore"):
        tol_lo = _TOL * np.maximum(1.0, np.where(np.isfinite(lo), np.abs(lo), 1.0))
        tol_hi = _TOL * np.maximum(1.0, np.where(np.isfinite(hi), np.abs(hi), 1.0))
    flat = problem.flat_groups  # options by group, members by option: no Python object per option
    n_opt = flat.indicator.size
    # each option's indicator, then its members, option by option
    owner = np.concatenate([np.arange(n_opt), flat.member_option])
    rank = np.concatenate([np.zeros(n_opt, dtype=np.int64), np.ones(flat.members.size, dtype=np.int64)])
    order = np.lexsort((np.arange(owner.size), rank, owner))
    var = np.concatenate([flat.indicator, flat.members])[order]
    opt_vars = sp.csc_array((np.ones(var.size), (var, owner[order])), shape=(problem.n, n_opt))
    return RowSystem(M, Mc, lo, hi, tol_lo, tol_hi, norm, price, problem.upper, problem.integer,
                     np.asarray(cost, dtype=np.float64), tuple(problem.row_names()),
                     flat.indicator.copy(), flat.group.copy(), opt_vars)


def column_entries(Mc: sp.csc_array | sp.csr_array, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flattened nonzeros of the given columns of a CSC matrix (rows of a CSR one):
    (owner position in ``cols``, row index, value).  Index arithmetic only, no sparse slicing."""
    starts = Mc.indptr[cols]
    lens = Mc.indptr[cols + 1] - starts
    ends = np.cumsum(lens)
    owner = np.repeat(np.arange(cols.size), lens)
    flat = np.arange(ends[-1] if ends.size else 0) + (starts - ends + lens)[owner]
    return owner, Mc.indices[flat], Mc.data[flat]


def move_effects(sys: RowSystem, r: np.ndarray, owner: np.ndarray, rows: np.ndarray, change: np.ndarray,
                 count: int, price: np.ndarray | None = None, old: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per move (``owner``), the change of normalised upper and lower violation (and the priced one)
    when its entries ``change`` row ``rows`` from activity ``old`` (default ``r[rows]``)."""
    old = r[rows] if old is None else old
    new = old + change
    hi, lo, nrm = sys.hi[rows], sys.lo[rows], sys.norm[rows]
    d_hi = (np.maximum(new - hi - sys.tol_hi[rows], 0) - np.maximum(old - hi - sys.tol_hi[rows], 0)) / nrm
    d_lo = (np.maximum(lo - new - sys.tol_lo[rows], 0) - np.maximum(lo - old - sys.tol_lo[rows], 0)) / nrm
    return (np.bincount(owner, weights=d_hi, minlength=count), np.bincount(owner, weights=d_lo, minlength=count),
            np.bincount(owner, weights=d_lo * (sys.price if price is None else price)[rows], minlength=count))


def evaluate_moves(sys: RowSystem, r: np.ndarray, cols: np.ndarray, steps: np.ndarray,
                   price: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Effect of each move ``x[cols[k]] += steps[k]`` on the activity ``r``: changes of the normalised
    upper violation, of the normalised lower violation, and of the lower violation priced per row
    (``price``, default the static ``sys.price``)."""
    owner, rows, vals = column_entries(sys.Mc, cols)
    return move_effects(sys, r, owner, rows, steps[owner] * vals, cols.size, price)


def evaluate_deltas(sys: RowSystem, r: np.ndarray, D: sp.csc_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like :func:`evaluate_moves` for composite moves: column k of ``D`` (n x K) is added to x."""
    R = sp.csc_array(sys.M @ D)
    owner = np.repeat(np.arange(R.shape[1]), np.diff(R.indptr))
    return move_effects(sys, r, owner, R.indices, R.data, R.shape[1])
