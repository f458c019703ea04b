"""The second tail bound of a row: the distribution of a copy of it on a lattice, by convolution.

Why: Chernoff's bound (:mod:`solvers.row_tails`) is 2-7x above the true tail at the probabilities
a guarantee states (0.05-0.25); the copy's distribution is the true one up to rounding each unit
value onto the lattice, so its tail is (nearly) exact for rows of independent units, and its
stop-loss bound within ~2.5x for rows with exact-sum-row coins.  docs/rounding.md has the theorem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.row_tails import Units, slack, sure_answer

__all__ = ["Lattice", "LatticeRow", "tail", "stop_loss", "convolve", "option_pmf"]

LATTICE_STEPS = 1024      # lattice steps across a row's random range (when its values share no coarser lattice)
EXACT_STEPS = 4096        # the most steps a lattice the values sit on exactly may take
WORK = 4e7                # multiply-adds the convolutions of one family of rows may spend


@dataclass
class LatticeRow:
    """One row's random part on the lattice ``step * Z``: value ``steps`` with probability ``prob``.

    ``coins`` maps a variable to (steps, prob); ``blocks`` maps a group to its options touching the
    row, each (option, sure steps, y, [(variable, steps, prob), ...]).  ``level`` is the threshold in
    steps above the row's sure part, ``dependent`` says the row has exact-sum-row coins (then only
    the stop-loss bound holds).  Mutable: the derandomiser removes units as it decides them and adds
    their steps to ``fixed``.
    """

    row: int
    step: float
    up: bool
    dependent: bool
    coins: dict[int, tuple[int, float]]
    blocks: dict[int, list[tuple[int, int, float, list[tuple[int, int, float]]]]]
    fixed: int = 0
    level: float = 0.0

    def size(self) -> int:
        """One more than the largest number of steps the remaining units can add."""
        return 1 + sum(s for s, _ in self.coins.values()) + sum(
            max((b + sum(s for _, s, _ in cs) for _, b, _, cs in opts), default=0) for opts in self.blocks.values())

    def block_pmf(self, group: int) -> np.ndarray:
        """Distribution of one block's steps (its options' mixture; no option chosen: 0 steps)."""
        opts = self.blocks[group]
        out = np.zeros(1 + max(b + sum(s for _, s, _ in cs) for _, b, _, cs in opts))
        out[0] = max(0.0, 1.0 - sum(y for _, _, y, _ in opts))
        for _, b, y, cs in opts:
            out += y * option_pmf(b, cs, out.size)
        return out

    def pmf(self, *, skip_group: int | None = None, skip_var: int | None = None) -> np.ndarray:
        """Distribution of the remaining units' steps (all but the one named; independent copies of
        exact-sum-row coins), by convolution."""
        out = np.zeros(self.size())
        out[0] = 1.0
        for var, (s, q) in self.coins.items():
            if var != skip_var:
                add_coin(out, s, q)
        for g in self.blocks:
            if g != skip_group:
                out = convolve(out, self.block_pmf(g))
        return out

    def value(self, pmf: np.ndarray, extra: int = 0) -> float:
        """The bound on the bad event once the remaining units (distribution ``pmf``) and ``extra``
        more steps are added to ``fixed``: the exact tail, or the stop-loss bound for a dependent row."""
        z = self.level - self.fixed - extra
        return stop_loss(pmf, z, self.up) if self.dependent else tail(pmf, z, self.up)


def option_pmf(base: int, coins: list[tuple[int, int, float]], size: int) -> np.ndarray:
    """Steps of one option: its sure steps plus its member coins, on an array of ``size``."""
    out = np.zeros(size)
    out[base] = 1.0
    for _, s, q in coins:
        add_coin(out, s, q)
    return out


def add_coin(pmf: np.ndarray, steps: int, prob: float) -> None:
    """In place: the distribution of (value + steps * Bernoulli(prob)); the array must have room."""
    if steps and prob:
        moved = prob * pmf[:pmf.size - steps]
        pmf *= 1.0 - prob
        pmf[steps:] += moved


def convolve(pmf: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Distribution of the sum: one shifted copy of ``pmf`` per outcome of ``unit`` (few outcomes)."""
    out = np.zeros(pmf.size + unit.size - 1)
    for s in np.flatnonzero(unit):
        out[s:s + pmf.size] += unit[s] * pmf
    return out


def tail(pmf: np.ndarray, z: float, up: bool) -> float:
    """P[I >= z] (``up``) or P[I <= z] for I distributed as ``pmf`` on 0..size-1."""
    k = math.ceil(z) if up else math.floor(z)
    if up:
        return 1.0 if k <= 0 else float(pmf[k:].sum()) if k < pmf.size else 0.0
    return 0.0 if k < 0 else float(pmf[:k + 1].sum()) if k < pmf.size else 1.0


def _stop_loss_transform(pmf: np.ndarray, up: bool) -> np.ndarray:
    """E[(I - j)+] (``up``) or E[(j - I)+] for j = 0..size-1."""
    if up:
        ge = np.cumsum(pmf[::-1])[::-1]  # P[I >= k]
        return np.append(np.cumsum(ge[:0:-1])[::-1], 0.0)  # sum over k > j of P[I >= k]
    le = np.cumsum(pmf)  # P[I <= k]
    return np.concatenate(([0.0], np.cumsum(le[:-1])))  # sum over k < j of P[I <= k]


def _stop_loss_min(loss: np.ndarray, z: float, up: bool) -> float:
    """min over lattice points u of E[(I - u)+] / (z - u) for u < z (up), or E[(u - I)+] / (u - z) for u > z."""
    j = np.arange(loss.size)
    ok = j < z if up else j > z
    if not ok.any():
        return 1.0  # up: z <= 0, I >= z surely; down: z at or beyond the top, I <= z surely
    return min(1.0, float(np.min(loss[ok] / np.abs(z - j[ok]))))


def stop_loss(pmf: np.ndarray, z: float, up: bool) -> float:
    """Bound on P[S >= z] (``up``) or P[S <= z] for any S below I in the convex order (Shao 2000):
    (x - u)+ / (z - u) is convex and at least the indicator, so E of it under I bounds the tail of S."""
    return _stop_loss_min(_stop_loss_transform(pmf, up), z, up)


def _lattice_step(values: np.ndarray, top: float) -> tuple[float, bool]:
    """(step, exact): a lattice every value sits on (their gcd when they are integers, else their
    smallest) when it has at most EXACT_STEPS steps across ``top``; else top / LATTICE_STEPS, not exact."""
    values = values[values > 0]
    if not values.size:
        return 1.0, True
    candidates = [float(values.min())]
    ints = np.round(values)
    if np.all(np.abs(values - ints) <= 1e-12 * values) and ints.max() < 2 ** 52:
        candidates.insert(0, float(np.gcd.reduce(ints.astype(np.int64))))
    for h in candidates:
        k = values / h
        if top / h <= EXACT_STEPS and np.all(np.abs(k - np.round(k)) <= 1e-12 * k):
            return h, True
    return top / LATTICE_STEPS, False


def _steps(values: np.ndarray, h: float, exact: bool, up: bool) -> np.ndarray:
    """Values in lattice steps: exact, or rounded up (upper tails) / down (lower tails)."""
    k = values / h
    return (np.round(k) if exact else np.ceil(k) if up else np.floor(k)).astype(np.int64)


class Lattice:
    """Bounds from the lattice copies of the random rows it can afford (within ``work``).

    Every unit value v becomes ceil(v/h) steps for an upper tail (floor for a lower one) -- exactly
    v/h when the values share the lattice -- so the copy is >= the row (<= for a lower tail) in every
    outcome.  Its units taken independently have the convolution of their distributions.  A row
    without exact-sum-row coins has independent units: the copy's tail bounds the row's.  A row with
    them has negatively associated units (Dubhashi, Jonasson & Ranjan 2007), so it is below the
    independent copy in the convex order (Shao 2000): the copy's stop-loss bound holds.
    """

    def __init__(self, units: Units, *, upper: bool, work: float = WORK) -> None:
        self.units, self.upper = units, upper
        self.rows: dict[int, LatticeRow] = {}
        tables: list[np.ndarray] = []
        dep = units.has_dep
        c_ptr = np.searchsorted(units.coin_row, np.arange(units.rows + 1))
        p_ptr = np.searchsorted(units.pair_row, np.arange(units.rows + 1))
        pc_order = np.argsort(units.pcoin_pair, kind="stable")
        pc_ptr = np.searchsorted(units.pcoin_pair[pc_order], np.arange(units.pair_row.size + 1))
        spent = 0.0
        for r in np.flatnonzero(units.top > 0):  # a sure row's bound is exact already (sure_answer)
            r = int(r)
            coins = slice(c_ptr[r], c_ptr[r + 1])
            pairs = range(p_ptr[r], p_ptr[r + 1])
            pcs = [pc_order[pc_ptr[p]:pc_ptr[p + 1]] for p in pairs]
            values = np.concatenate([units.coin_coef[coins], units.pair_base[p_ptr[r]:p_ptr[r + 1]]]
                                    + [units.pcoin_coef[i] for i in pcs])
            top = float(units.top[r])
            h, exact = _lattice_step(values, top)
            cost = (top / h + values.size + 1) * (values.size + 1)
            if spent + cost > work:
                continue
            spent += cost
            row = LatticeRow(r, h, upper, bool(dep[r]), {}, {})
            coin_steps = _steps(units.coin_coef[coins], h, exact, upper)
            for var, st, q in zip(units.coin_var[coins], coin_steps, units.coin_prob[coins]):
                row.coins[int(var)] = (int(st), float(q))
            base_steps = _steps(units.pair_base[p_ptr[r]:p_ptr[r + 1]], h, exact, upper)
            for p, pc, base in zip(pairs, pcs, base_steps):
                member = [(int(v), int(st), float(q)) for v, st, q in
                          zip(units.pcoin_var[pc], _steps(units.pcoin_coef[pc], h, exact, upper), units.pcoin_prob[pc])]
                row.blocks.setdefault(int(units.mix_group[units.pair_mix[p]]), []).append(
                    (int(units.pair_opt[p]), int(base), float(units.pair_y[p]), member))
            pmf = row.pmf()
            self.rows[r] = row
            tables.append(_stop_loss_transform(pmf, upper) if row.dependent else
                          np.cumsum(pmf[::-1])[::-1] if upper else np.cumsum(pmf))
        self._ids = np.fromiter(self.rows, dtype=np.int64, count=len(self.rows))
        self._dep = np.array([row.dependent for row in self.rows.values()], dtype=bool)
        self._step = np.ones(units.rows)
        self._step[self._ids] = [row.step for row in self.rows.values()]
        self._tables = tables
        self._len = np.array([tb.size for tb in tables], dtype=np.int64)
        self._off = np.concatenate(([0], np.cumsum(self._len)[:-1])).astype(np.int64)
        self._cum = np.concatenate(tables) if tables else np.zeros(0)

    def level(self, rows: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Threshold t in lattice steps above each row's sure part, moved by the floating-point slack
        in the direction that can only raise the bound."""
        u = self.units
        room = slack(t, u.sure[rows], u.top[rows])
        shift = t - u.sure[rows] - room if self.upper else t - u.sure[rows] + room
        return shift / self._step[rows]

    def bound(self, t: np.ndarray) -> np.ndarray:
        """Per row: the lattice copy's tail at ``t`` (stop-loss bound for dependent rows; 1 for rows not
        convolved)."""
        out = np.ones(self.units.rows)
        if self._ids.size:
            z = self.level(self._ids, t[self._ids])
            zc = np.clip(z, -1.0, self._len)   # past the table either way (3e19 steps overflowed int64)
            k = np.ceil(zc).astype(np.int64) if self.upper else np.floor(zc).astype(np.int64)
            inside = (k >= 0) & (k < self._len)
            val = self._cum[self._off + np.where(inside, k, 0)]
            if self.upper:
                val = np.where(k <= 0, 1.0, np.where(k >= self._len, 0.0, val))
            else:
                val = np.where(k < 0, 0.0, np.where(k >= self._len, 1.0, val))
            for i in np.flatnonzero(self._dep):
                val[i] = _stop_loss_min(self._tables[i], float(z[i]), self.upper)
            out[self._ids] = val
        return np.minimum(out, np.nan_to_num(sure_answer(self.units, t, self.upper), nan=1.0))
