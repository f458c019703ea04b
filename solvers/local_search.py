"""Short local improvement of a feasible point, generic in the Problem's rows and columns.

Why: rounding plus greedy repair leaves easy gains (redundant covers, knapsack room, better
assignments).  Three move kinds, each kept only if every row stays satisfied and the objective
strictly improves:

* single: decrease or increase one integer variable by 1 (drops redundant columns for min,
  adds profitable ones that still fit for max);
* swap: decrease one variable and increase another (a 1-swap; with a choice group's rows this is
  "move to another option", with assignment rows "reassign");
* double swap: two swaps applied together, where the first overloads upper sides that the second
  relieves (exchanging two items between two capacity rows, as in GAP's swap neighbourhood).

Every candidate set is evaluated with sparse column slices in one vectorised pass.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from solvers.rows import RowSystem, column_entries, evaluate_moves

logger = logging.getLogger(__name__)

__all__ = ["LocalSearchReport", "improve", "greedy_singles"]

_EPS = 1e-9
# Work caps per pass, so a pass costs O(_MAX_OUTS * nnz) however large the support (deterministic,
# unlike a time budget): swaps try the 256 costliest support columns, double swaps the 64 costliest.
_MAX_OUTS = 256


@dataclass(frozen=True)
class LocalSearchReport:
    """Improving moves made per kind, the objective change (minimisation form), and passes run."""

    singles: int
    swaps: int
    double_swaps: int
    improvement: float
    passes: int


def _feasible_adds(sys: RowSystem, r: np.ndarray, x: np.ndarray, budget: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Integer columns k whose +1 makes activity ``r`` satisfy every row, costing less than ``budget``;
    returns (columns, their cost).  Rows already violated in ``r`` must all be repaired by k."""
    hi_bad = r > sys.hi + sys.tol_hi
    lo_bad = r < sys.lo - sys.tol_lo
    bad = np.flatnonzero(hi_bad | lo_bad)
    if bad.size:  # k must touch every violated row, so the first one's columns are the only candidates
        cand = sys.M.indices[sys.M.indptr[bad[0]]:sys.M.indptr[bad[0] + 1]]
    else:
        cand = np.arange(sys.cost.size)
    cand = cand[sys.integer[cand] & (x[cand] + 1 <= sys.upper[cand] + _EPS) & (sys.cost[cand] < budget - _EPS)]
    if cand.size == 0:
        return cand, np.zeros(0)
    owner, rows, vals = column_entries(sys.Mc, cand)
    new = r[rows] + vals
    ok_row = (new <= sys.hi[rows] + sys.tol_hi[rows]) & (new >= sys.lo[rows] - sys.tol_lo[rows])
    broken = np.bincount(owner, weights=~ok_row, minlength=cand.size)
    fixed = np.bincount(owner, weights=ok_row & (hi_bad | lo_bad)[rows], minlength=cand.size)
    good = (broken == 0) & (fixed == bad.size)
    return cand[good], sys.cost[cand[good]]


def _column(sys: RowSystem, j: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = sys.Mc.indptr[j], sys.Mc.indptr[j + 1]
    return sys.Mc.indices[lo:hi], sys.Mc.data[lo:hi]


def _singles(sys: RowSystem, x: np.ndarray, r: np.ndarray, guide: np.ndarray | None) -> int:
    """Apply improving feasible +-1 moves until none is left.

    Drops (cost > 0) go costliest first.  Adds (cost < 0, e.g. profit when maximising) go in LP order
    (largest ``guide`` value first), then by profit per unit of the remaining room they use, the
    classical efficiency of greedy knapsack filling.  Each round takes the longest prefix of that
    order that fits together, which is what one-at-a-time greedy would take, in one vectorised step.
    """
    made = 0
    while True:
        cols = np.flatnonzero(sys.integer & (((sys.cost > _EPS) & (x >= 1)) | ((sys.cost < -_EPS) & (x + 1 <= sys.upper))))
        if cols.size == 0:
            return made
        steps = np.where(sys.cost[cols] > 0, -1.0, 1.0)
        ok = _still_ok(sys, r, cols, steps)
        if not ok.any():
            return made
        cols, steps = cols[ok], steps[ok]
        gain = sys.cost[cols] * steps
        adds = steps > 0
        if adds.any():
            cols, steps, gain = cols[adds], steps[adds], gain[adds]
            owner, rows, vals = column_entries(sys.Mc, cols)
            room = np.maximum(sys.hi[rows] - r[rows], sys.tol_hi[rows])
            use = np.bincount(owner, weights=np.where(np.isfinite(room) & (vals > 0), vals / room, 0.0),
                              minlength=cols.size)
            efficiency = -gain / np.maximum(use, _EPS)
            lp = guide[cols] if guide is not None else np.zeros(cols.size)
            order = np.lexsort((-efficiency, -lp))
        else:
            order = np.argsort(gain, kind="stable")
        cols, steps = cols[order], steps[order]
        take = _joint_prefix(sys, r, cols, steps)
        owner, rows, vals = column_entries(sys.Mc, cols[:take])
        np.add.at(r, rows, steps[owner] * vals)
        x[cols[:take]] += steps[:take]
        made += take


def _joint_prefix(sys: RowSystem, r: np.ndarray, cols: np.ndarray, steps: np.ndarray) -> int:
    """Length of the longest prefix of the ordered moves (distinct columns, each feasible alone)
    whose joint application keeps every row within its bounds (at least 1)."""
    owner, rows, vals = column_entries(sys.Mc, cols)
    if rows.size == 0:  # columns in no row never conflict
        return cols.size
    order = np.lexsort((owner, rows))  # by row, then by position in the move order
    rows, owner, change = rows[order], owner[order], (steps[owner] * vals)[order]
    csum = np.cumsum(change)
    start = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    before = np.repeat(csum[start] - change[start], np.diff(np.r_[start, rows.size]))
    new = r[rows] + csum - before
    bad = (new > sys.hi[rows] + sys.tol_hi[rows]) | (new < sys.lo[rows] - sys.tol_lo[rows])
    return max(1, int(owner[bad].min())) if bad.any() else cols.size


def _still_ok(sys: RowSystem, r: np.ndarray, cols: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Moves after which every touched row is within its bounds (x is feasible before)."""
    owner, rows, vals = column_entries(sys.Mc, cols)
    new = r[rows] + steps[owner] * vals
    bad = (new > sys.hi[rows] + sys.tol_hi[rows]) | (new < sys.lo[rows] - sys.tol_lo[rows])
    return np.bincount(owner, weights=bad, minlength=cols.size) == 0


def _swaps(sys: RowSystem, x: np.ndarray, r: np.ndarray) -> int:
    """One pass of improving 1-swaps: for each support column j (the ``_MAX_OUTS`` costliest) the best k."""
    made = 0
    support = np.flatnonzero(sys.integer & (x >= 1))
    for j in support[np.argsort(-sys.cost[support], kind="stable")][:_MAX_OUTS]:
        if x[j] < 1:
            continue
        rows, vals = _column(sys, j)
        r[rows] -= vals
        x[j] -= 1
        cand, cost = _feasible_adds(sys, r, x, sys.cost[j])
        cand_ok = cand != j
        if cand_ok.any():
            k = int(cand[cand_ok][np.argmin(cost[cand_ok])])
            rk, vk = _column(sys, k)
            r[rk] += vk
            x[k] += 1
            made += 1
        else:
            r[rows] += vals
            x[j] += 1
    return made


def _double_swaps(sys: RowSystem, x: np.ndarray, r: np.ndarray, deadline: float, width: int = 4) -> int:
    """Improving pairs of swaps (j->k, l->m) where j->k alone overloads only upper sides.

    For a support column j (the ``_MAX_OUTS // 4`` costliest), k must be cheaper than j and restore
    every lower side j's removal broke (the ``width`` cheapest such k are tried); the rows k overloads
    name the support columns l that can relieve them (the ``width`` costliest per k).  Every (k, l)
    pair of one j is then completed at once (:func:`_best_double`) and the most improving (k, l, m)
    or (k, l) is applied.
    """
    made = 0
    if not np.isfinite(sys.hi).any():  # k must overload an upper side, and there is none (e.g. set cover)
        return made
    support = np.flatnonzero(sys.integer & (x >= 1))
    for j in support[np.argsort(-sys.cost[support], kind="stable")][:_MAX_OUTS // 4]:
        if time.perf_counter() > deadline:
            break
        if x[j] < 1:
            continue
        rj, vj = _column(sys, j)
        r[rj] -= vj
        x[j] -= 1
        move = _best_double(sys, x, r, int(j), width)
        if move is None:
            r[rj] += vj
            x[j] += 1
            continue
        for col, step in move:
            rc, vc = _column(sys, col)
            r[rc] += step * vc
            x[col] += step
        made += 1
    return made


def _best_double(sys: RowSystem, x: np.ndarray, r: np.ndarray, j: int, width: int
                 ) -> tuple[tuple[int, float], ...] | None:
    """With j already removed from (x, r): the most improving completion (k+, l-, m+) or (k+, l-),
    as ((column, step), ...), or None when no completion lowers the cost.

    m must bring every row the pair leaves violated back within bounds without breaking another,
    so its candidates are the columns of the first such row (as in :func:`_feasible_adds`); after
    a pair that leaves no row violated, every profitable add is a candidate."""
    lo_bad = r < sys.lo - sys.tol_lo
    lost = float(np.sum((sys.lo - r - sys.tol_lo)[lo_bad] / sys.norm[lo_bad]))  # as evaluate_moves counts it
    if lo_bad.any():  # k must restore every broken lower side, so it is a column of the first
        cand = sys.M.indices[sys.M.indptr[np.argmax(lo_bad)]:sys.M.indptr[np.argmax(lo_bad) + 1]]
    else:
        cand = np.arange(x.size)
    # A restriction of the neighbourhood, for speed: only an improving first half (k cheaper than j).
    # An exchange of two units between two capacity rows (GAP) that improves overall improves in one
    # half and is found from that half's j; composite moves whose halves both fail to improve alone
    # are not searched (the measured trade-off on OR-Library GAP is in docs/rounding.md).
    cand = cand[sys.integer[cand] & (x[cand] + 1 <= sys.upper[cand] + _EPS) & (cand != j)
                & (sys.cost[cand] < sys.cost[j] - _EPS)]
    if cand.size == 0:
        return None
    d_hi, d_lo, _ = evaluate_moves(sys, r, cand, np.ones(cand.size))
    ks = cand[(d_hi > 0) & (d_lo <= -lost + 1e-9)]
    ks = ks[np.argsort(sys.cost[ks], kind="stable")][:width]
    # The rows overloaded after k+ name the l that can relieve them.
    owner, rows, vals = column_entries(sys.Mc, ks)
    over = r[rows] + vals > sys.hi[rows] + sys.tol_hi[rows]
    kpos, over_rows = owner[over], rows[over]
    already = np.flatnonzero(r > sys.hi + sys.tol_hi)  # (rows j's removal overloaded, if any)
    if already.size:
        kpos = np.concatenate((kpos, np.repeat(np.arange(ks.size), already.size)))
        over_rows = np.concatenate((over_rows, np.tile(already, ks.size)))
    row_pos, ls, _ = column_entries(sys.M, over_rows)
    kpos = kpos[row_pos]
    keep = (x[ls] >= 1) & sys.integer[ls] & (ls != ks[kpos])
    key = np.unique(kpos[keep] * x.size + ls[keep])
    kpos, ls = key // x.size, key % x.size
    order = np.lexsort((-sys.cost[ls], kpos))  # per k, costliest l first
    kpos, ls = kpos[order], ls[order]
    rank = np.arange(kpos.size) - np.searchsorted(kpos, kpos)
    pk_a, pl_a = ks[kpos[rank < width]], ls[rank < width]
    if pk_a.size == 0:
        return None
    # Activity after k+ and l- for every pair at once (dense: pairs x rows, both small here).
    R = np.repeat(r[None, :], pk_a.size, axis=0)
    for cols, sign in ((pk_a, 1.0), (pl_a, -1.0)):
        owner, rows, vals = column_entries(sys.Mc, cols)
        np.add.at(R, (owner, rows), sign * vals)
    bad = (R > sys.hi + sys.tol_hi) | (R < sys.lo - sys.tol_lo)
    base = sys.cost[pk_a] - sys.cost[pl_a] - sys.cost[j]  # cost change of j-, k+, l- (before any m)
    nbad = bad.sum(axis=1)
    best_change, best = -_EPS, None
    done = nbad == 0  # feasible without an m: a candidate move as it is
    if done.any():
        p = int(np.flatnonzero(done)[np.argmin(base[done])])
        if base[p] < best_change:
            best_change, best = float(base[p]), ((pk_a[p], 1.0), (pl_a[p], -1.0))
    # m: for a pair that leaves rows violated, a column of the first of them (it must repair them
    # all); for a feasible pair, any profitable add (only those can lower the cost further).
    pairs_m, ms_m = [], []
    need = np.flatnonzero(~done)
    if need.size:
        first = np.argmax(bad[need], axis=1)
        owner_p, ms, _ = column_entries(sys.M, first)
        pairs_m.append(need[owner_p])
        ms_m.append(ms)
    profitable = np.flatnonzero(sys.integer & (sys.cost < -_EPS))
    if done.any() and profitable.size:
        pairs_m.append(np.repeat(np.flatnonzero(done), profitable.size))
        ms_m.append(np.tile(profitable, int(done.sum())))
    if pairs_m:
        pair, ms = np.concatenate(pairs_m), np.concatenate(ms_m)
        x_m = x[ms] + (ms == pk_a[pair]) - (ms == pl_a[pair])  # m's value after the pair's k+ and l-
        ok = (sys.integer[ms] & (x_m + 1 <= sys.upper[ms] + _EPS) & (ms != pl_a[pair]) & (ms != j)
              & (base[pair] + sys.cost[ms] < best_change))
        pair, ms = pair[ok], ms[ok]
        if ms.size:
            owner, rows, vals = column_entries(sys.Mc, ms)
            new = R[pair[owner], rows] + vals
            ok_row = (new <= sys.hi[rows] + sys.tol_hi[rows]) & (new >= sys.lo[rows] - sys.tol_lo[rows])
            broken = np.bincount(owner, weights=~ok_row, minlength=ms.size)
            fixed = np.bincount(owner, weights=ok_row & bad[pair[owner], rows], minlength=ms.size)
            good = np.flatnonzero((broken == 0) & (fixed == nbad[pair]))
            if good.size:
                g = int(good[np.argmin(base[pair[good]] + sys.cost[ms[good]])])
                p = int(pair[g])
                best = ((pk_a[p], 1.0), (pl_a[p], -1.0), (int(ms[g]), 1.0))
    return None if best is None else tuple((int(c), s) for c, s in best)


def greedy_singles(sys: RowSystem, x: np.ndarray, guide: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Only the single-variable moves of :func:`improve` (drops for min, LP-ordered fill for max): cheap,
    and after it many different trials coincide, so callers can skip the full search for repeats."""
    x = x.copy()
    return x, _singles(sys, x, sys.M @ x, guide)


def improve(sys: RowSystem, x: np.ndarray, *, guide: np.ndarray | None = None, max_passes: int = 50,
            double_swaps: bool = False, time_limit: float | None = None) -> tuple[np.ndarray, LocalSearchReport]:
    """Local search from a feasible ``x`` (returns a copy): singles and swaps until none improves, then
    (``double_swaps``) pairs of swaps, repeated; stops at a local optimum, after ``max_passes`` passes or
    at ``time_limit`` seconds.  ``guide`` (the LP solution) orders the additions."""
    x = x.copy()
    r = sys.M @ x
    start_cost = float(sys.cost @ x)
    deadline = time.perf_counter() + (time_limit if time_limit is not None else float("inf"))
    singles = swaps = doubles = passes = 0
    while passes < max_passes and time.perf_counter() < deadline:
        passes += 1
        singles += _singles(sys, x, r, guide)
        s = _swaps(sys, x, r)
        swaps += s
        if s:
            continue
        d = _double_swaps(sys, x, r, deadline) if double_swaps else 0
        doubles += d
        if not d:
            break
    singles += _singles(sys, x, r, guide)
    return x, LocalSearchReport(singles, swaps, doubles, start_cost - float(sys.cost @ x), passes)
