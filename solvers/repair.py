"""Repair a rounded point into a feasible one, generically in terms of the Problem's rows and columns.

Why this order: after rounding, packing rows may be overloaded and covering rows short.  Overloads
are removed first by the moves with the least objective harm per unit of overload removed (harm
counts the coverage a decrement destroys, priced at the cheapest way to restore it that fits); then short
rows are completed greedily by the best cost per unit of shortfall, using only moves that keep
every upper side (packing rows, group rows, general rows' upper bounds) intact, so a second option
of a choice group is never switched on.  When that greedy is stuck (every completion overloads
something), a short tabu search on cost + lam * violation over single moves, pairs of moves and
choice-option switches takes over.

All rows are handled as ``lo <= M x <= hi`` (``Problem.all_rows``), so general rows are repaired
too, as far as these moves can; :class:`RepairReport` lists what is left.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from solvers.problem import Problem
from solvers.rows import RowSystem, column_entries, evaluate_deltas, evaluate_moves, move_effects, row_system

logger = logging.getLogger(__name__)

__all__ = ["RepairReport", "repair"]


@dataclass(frozen=True)
class RepairReport:
    """What repair changed: variable decrements/increments (in units), rows it fixed, rows still violated."""

    decrements: int
    increments: int
    rows_fixed: int
    rows_violated: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def feasible(self) -> bool:
        return not self.rows_violated


def _clean_prices(sys: RowSystem, x: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per row, the cheapest cost of raising it by one normalised unit with a +1 that keeps every upper
    side intact right now; rows with no such move get a prohibitive price.

    Why: removing an overloaded unit whose row can then only be completed by overloading something
    else is what sends greedy repair into a dead end (a job no agent has room for)."""
    cols = np.flatnonzero(sys.integer & (x + 1 <= sys.upper + 1e-12))
    owner, rows, vals = column_entries(sys.Mc, cols)
    breaks = np.bincount(owner, weights=r[rows] + vals > sys.hi[rows] + sys.tol_hi[rows], minlength=cols.size)
    use = (breaks[owner] == 0) & (vals > 0)
    price = np.full(sys.hi.size, np.inf)
    np.minimum.at(price, rows[use], np.maximum(sys.cost[cols[owner[use]]], 0.0) * sys.norm[rows[use]] / vals[use])
    big = 4.0 * float(np.max(sys.price, initial=0.0)) + float(np.max(np.abs(sys.cost), initial=0.0)) + 1.0
    return np.where(np.isfinite(price), price, big)


def _violated(sys: RowSystem, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return r > sys.hi + sys.tol_hi, r < sys.lo - sys.tol_lo


def _candidate_moves(sys: RowSystem, x: np.ndarray, r: np.ndarray, rows: np.ndarray, upward: bool
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Moves on the columns of ``rows`` that push those rows' activity down (``upward`` False) or up.

    Integer variables move by 1; continuous ones by what their worst row needs, within bounds.
    """
    row_pos, cols, vals = column_entries(sys.M, rows)
    if cols.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    need = np.where(upward, sys.lo[rows] - r[rows], r[rows] - sys.hi[rows])[row_pos]
    direction = np.sign(vals) * (1.0 if upward else -1.0)
    amount = np.abs(need / vals)
    room = np.where(direction > 0, sys.upper[cols] - x[cols], x[cols])
    step = np.where(sys.integer[cols], 1.0, np.minimum(room, amount))
    ok = (room >= step - 1e-12) & (step > 0)
    key = cols * 2 + (direction > 0)
    key, first = np.unique(key[ok], return_index=True)
    # For continuous variables keep the largest step any of their rows asks for.
    big = np.zeros(key.size)
    np.maximum.at(big, np.searchsorted(key, cols[ok] * 2 + (direction[ok] > 0)), step[ok])
    return key // 2, np.where(key % 2 == 1, big, -big)


def _score(gain: np.ndarray, harm: np.ndarray) -> np.ndarray:
    """Lower is better: harm per unit gained; a profitable move (harm < 0) is better the more it gains."""
    return np.where(harm >= 0, harm / gain, harm * gain)


class _State:
    """x, its row activity and move counters, updated one column at a time."""

    def __init__(self, sys: RowSystem, x: np.ndarray) -> None:
        self.sys = sys
        self.x = x
        self.r = sys.M @ x
        self.dec = self.inc = self.moves = 0

    def apply(self, j: int, step: float) -> None:
        sys = self.sys
        self.x[j] = round(self.x[j] + step) if sys.integer[j] else self.x[j] + step
        lo, hi = sys.Mc.indptr[j], sys.Mc.indptr[j + 1]
        self.r[sys.Mc.indices[lo:hi]] += step * sys.Mc.data[lo:hi]
        self.moves += 1
        units = int(round(abs(step))) if sys.integer[j] else 1
        if step < 0:
            self.dec += units
        else:
            self.inc += units


def _greedy(st: _State, budget: int) -> None:
    """Remove overloads (least harm per unit of overload), then complete short rows with moves that keep
    every upper side intact (best cost per unit of shortfall); stop when stuck or out of moves."""
    sys = st.sys
    while st.moves < budget:
        over, under = _violated(sys, st.r)
        if over.any():
            cols, steps = _candidate_moves(sys, st.x, st.r, np.flatnonzero(over), upward=False)
            if cols.size:
                d_hi, _, d_lo_priced = evaluate_moves(sys, st.r, cols, steps, _clean_prices(sys, st.x, st.r))
                gain, harm = -d_hi, sys.cost[cols] * steps + d_lo_priced
                ok = gain > 1e-12
                if ok.any():
                    k = np.flatnonzero(ok)[np.argmin(_score(gain[ok], harm[ok]))]
                    st.apply(int(cols[k]), float(steps[k]))
                    continue
            return
        if not under.any():
            return
        cols, steps = _candidate_moves(sys, st.x, st.r, np.flatnonzero(under), upward=True)
        if cols.size == 0:
            return
        d_hi, d_lo, _ = evaluate_moves(sys, st.r, cols, steps)
        gain = -d_lo
        clean = (d_hi <= 1e-12) & (gain > 1e-12)
        if not clean.any():
            return
        k = np.flatnonzero(clean)[np.argmin(_score(gain[clean], sys.cost[cols[clean]] * steps[clean]))]
        st.apply(int(cols[k]), float(steps[k]))


def _violation(sys: RowSystem, r: np.ndarray) -> float:
    return float(np.sum((np.maximum(r - sys.hi - sys.tol_hi, 0) + np.maximum(sys.lo - r - sys.tol_lo, 0)) / sys.norm))


def _switch_moves(sys: RowSystem, x: np.ndarray, bad: np.ndarray) -> tuple[sp.csc_array, np.ndarray, np.ndarray]:
    """Composite moves on choice groups near violated rows: clear an active option that has members
    (indicator and members to 0), alone or followed by switching another option's indicator on.

    Returns (deltas n x K, indicator switched off, indicator switched on or -1).
    """
    # Options without members switch by a pair of single moves, which the search already tries.
    with_members = np.diff(sys.opt_vars.indptr) > 1
    if not with_members.any():
        return sp.csc_array((x.size, 0)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    near = np.zeros(x.size)
    near[column_entries(sys.M, bad)[1]] = 1.0
    touches = (sys.opt_vars.T @ near) > 0
    groups = np.unique(sys.opt_group[touches])
    active = np.flatnonzero((x[sys.opt_ind] >= 0.5) & np.isin(sys.opt_group, groups) & with_members)
    rows, cols, vals, off, on = [], [], [], [], []
    for a in active:
        lo, hi = sys.opt_vars.indptr[a], sys.opt_vars.indptr[a + 1]
        members = sys.opt_vars.indices[lo:hi]
        clear = -x[members]
        for o in np.concatenate(([-1], np.flatnonzero(sys.opt_group == sys.opt_group[a]))):
            if o == a:
                continue
            k = len(off)
            rows.append(members)
            vals.append(clear)
            if o >= 0:
                rows.append(np.array([sys.opt_ind[o]]))
                vals.append(np.ones(1))
            cols.append(np.full(members.size + (o >= 0), k))
            off.append(sys.opt_ind[a])
            on.append(sys.opt_ind[o] if o >= 0 else -1)
    if not off:
        return sp.csc_array((x.size, 0)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    D = sp.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(x.size, len(off)))
    return D, np.array(off), np.array(on)


def _tabu_search(st: _State, budget: int, max_stall: int) -> None:
    """Tabu search on cost + lam * (normalised violation) over single moves and pairs of +-1 moves
    (the first on a column of a violated row, the second on any column); keeps the least violated point.

    Why: when greedy completion is stuck (every completion overloads something), moving a unit from
    an overloaded row to one with room, or passing through a slightly worse point, is often all that
    is missing.  The best move is taken even when it is worse (undoing it is tabu for a few steps),
    and lam grows at each local minimum so feasibility eventually dominates cost.
    """
    sys = st.sys
    n = sys.cost.size
    lam = max(float(np.max(np.abs(sys.cost), initial=0.0)), 1.0)
    tenure = int(min(7, 1 + n // 2))
    taboo = 1e6 * (lam + 1.0)  # added to tabu moves: taken only when nothing else moves (aspiration by default)
    tabu = np.zeros((n, 2), dtype=np.int64)  # step until which moving column j down (0) / up (1) is tabu
    best_v, best_x = _violation(sys, st.r), st.x.copy()
    stall = step = 0
    while st.moves < budget and stall < max_stall:
        over, under = _violated(sys, st.r)
        bad = np.flatnonzero(over | under)
        if bad.size == 0:
            return
        step += 1
        v_now = _violation(sys, st.r)
        best: tuple[float, tuple[tuple[int, float], ...]] = (np.inf, ())
        cols, steps = (np.concatenate(a) for a in zip(
            _candidate_moves(sys, st.x, st.r, np.flatnonzero(over), upward=False),
            _candidate_moves(sys, st.x, st.r, np.flatnonzero(under), upward=True)))
        if cols.size:
            d_hi, d_lo, _ = evaluate_moves(sys, st.r, cols, steps)
            ok = (tabu[cols, (steps > 0).astype(int)] < step) | (v_now + d_hi + d_lo < best_v - 1e-12)
            delta = sys.cost[cols] * steps + lam * (d_hi + d_lo) + np.where(ok, 0.0, taboo)
            k = int(np.argmin(delta))
            if delta[k] < best[0]:
                best = (float(delta[k]), ((int(cols[k]), float(steps[k])),))
        D, off, on = _switch_moves(sys, st.x, bad)
        if off.size:
            d_hi, d_lo, _ = evaluate_deltas(sys, st.r, D)
            ok = (tabu[off, 1] < step) | (v_now + d_hi + d_lo < best_v - 1e-12)
            delta = sys.cost @ D + lam * (d_hi + d_lo) + np.where(ok, 0.0, taboo)
            k = int(np.argmin(delta))
            if delta[k] < best[0]:
                col = D[:, [k]]
                best = (float(delta[k]), tuple((int(j), float(v)) for j, v in zip(col.indices, col.data)))
        if best[0] >= 0:  # no improving single move: try pairs whose first move helps a violated row
            pair = _best_pair(st, cols, steps, bad, tabu, step, lam, taboo, best_v)
            if pair is not None and pair[0] < best[0]:
                best = pair
        if not best[1]:  # nothing moves at all (every column at a bound it would have to leave)
            break
        for j, s in best[1]:
            st.apply(j, s)
            tabu[j, int(s < 0)] = step + tenure  # forbid undoing it for a while
        if best[0] >= 0:
            lam *= 2.0
            taboo = 1e6 * (lam + 1.0)
        v = _violation(sys, st.r)
        if v < best_v - 1e-12:
            best_v, best_x, stall = v, st.x.copy(), 0
        else:
            stall += 1
    if _violation(sys, st.r) > best_v:
        st.x[:] = best_x
        st.r = sys.M @ st.x


_PAIR_BLOCK = 2_000_000  # dense (first moves x rows) entries evaluated at once in the pair search


def _best_pair(st: _State, cols: np.ndarray, steps: np.ndarray, bad: np.ndarray, tabu: np.ndarray, step: int,
               lam: float, taboo: float, best_v: float) -> tuple[float, tuple[tuple[int, float], ...]] | None:
    """The tabu search's best pair of +-1 moves: a first one from ``cols`` (integer columns of violated
    rows, moved by the sign of ``steps``), a second on a column touching a violated row or a row of the
    first.  Every pair is scored at once (in blocks of first moves): cost change + lam * violation
    change + tabu penalties, as for single moves; ties go to the earliest (first, direction, column)."""
    sys = st.sys
    keep = sys.integer[cols]
    js, sjs = cols[keep], np.sign(steps[keep])
    if js.size == 0:
        return None
    pens = np.where(tabu[js, (sjs > 0).astype(int)] < step, 0.0, taboo)
    near_bad = np.unique(column_entries(sys.M, bad)[1])
    v_now = _violation(sys, st.r)
    n, m = sys.cost.size, sys.hi.size
    best: tuple[float, tuple[tuple[int, float], ...]] | None = None
    block = max(1, _PAIR_BLOCK // max(m, 1))
    for start in range(0, js.size, block):
        j, sj, pen = js[start:start + block], sjs[start:start + block], pens[start:start + block]
        f_count = j.size
        # Activity and violation after each first move.
        owner, rows, vals = column_entries(sys.Mc, j)
        R1 = np.repeat(st.r[None, :], f_count, axis=0)
        R1[owner, rows] += sj[owner] * vals
        v1 = (np.maximum(R1 - sys.hi - sys.tol_hi, 0) + np.maximum(sys.lo - R1 - sys.tol_lo, 0)) @ (1.0 / sys.norm)
        # Second-move columns per first: near a violated row or sharing a row with it (sorted, as union1d).
        row_first, ks, _ = column_entries(sys.M, rows)
        f_of = np.concatenate((owner[row_first], np.repeat(np.arange(f_count), near_bad.size)))
        k_of = np.concatenate((ks, np.tile(near_bad, f_count)))
        key = np.unique(f_of * n + k_of)
        f_of, k_of = key // n, key % n
        ok = sys.integer[k_of] & (k_of != j[f_of])
        f_of, k_of = f_of[ok], k_of[ok]
        # Both directions of the second move, ordered (first, direction, column) as the scan was.
        sk = np.repeat([-1.0, 1.0], f_of.size)
        order = np.argsort(np.concatenate((2 * f_of, 2 * f_of + 1)), kind="stable")  # k is sorted per first
        f_of, k_of, sk = np.concatenate((f_of, f_of))[order], np.concatenate((k_of, k_of))[order], sk[order]
        if f_of.size == 0:
            continue
        owner2, rows2, vals2 = column_entries(sys.Mc, k_of)
        d_hi, d_lo, _ = move_effects(sys, st.r, owner2, rows2, sk[owner2] * vals2, k_of.size,
                                     old=R1[f_of[owner2], rows2])
        fits = (st.x[k_of] + sk >= 0) & (st.x[k_of] + sk <= sys.upper[k_of] + 1e-12)
        allowed = (tabu[k_of, (sk > 0).astype(int)] < step) | (v1[f_of] + d_hi + d_lo < best_v - 1e-12)
        delta = np.where(fits, sj[f_of] * sys.cost[j[f_of]] + sk * sys.cost[k_of]
                         + lam * (v1[f_of] - v_now + d_hi + d_lo) + pen[f_of] + np.where(allowed, 0.0, taboo),
                         np.inf)
        q = int(np.argmin(delta))
        if best is None or delta[q] < best[0]:
            best = (float(delta[q]), ((int(j[f_of[q]]), float(sj[f_of[q]])), (int(k_of[q]), float(sk[q]))))
    return best


def repair(problem: Problem, x: np.ndarray, *, system: RowSystem | None = None,
           max_moves: int | None = None, effort: int = 1) -> tuple[np.ndarray, RepairReport]:
    """Return a repaired copy of ``x`` and what changed.  Integer entries are rounded and all entries
    clipped to their bounds first; the result is feasible when ``report.rows_violated`` is empty.
    ``effort`` multiplies how long the tabu search may go without progress (and the move budget)."""
    sys = system if system is not None else row_system(problem)
    x = np.clip(np.where(sys.integer, np.round(x), x), 0.0, sys.upper)
    st = _State(sys, x)
    over, under = _violated(sys, st.r)
    bad_before = over | under
    budget = max_moves if max_moves is not None else effort * (20 * problem.n + 100)
    _greedy(st, budget)
    over, under = _violated(sys, st.r)
    escalated = bool((over | under).any())
    if escalated:
        _tabu_search(st, budget, max_stall=effort * (20 + int(2 * np.sqrt(problem.n))))
        _greedy(st, budget)
        over, under = _violated(sys, st.r)
    left = np.flatnonzero(over | under)
    notes = tuple(filter(None, ("move budget exhausted" if st.moves >= budget and left.size else "",
                                "tabu search used" if escalated else "")))
    report = RepairReport(decrements=st.dec, increments=st.inc,
                          rows_fixed=int(np.count_nonzero(bad_before & ~(over | under))),
                          rows_violated=tuple(sys.names[i] for i in left), notes=notes)
    return st.x, report
