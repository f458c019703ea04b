"""Column generation for a block-structured LP, with a proven Lagrangian bound at every round.

The problem: blocks k = 1..K, each choosing one column from a set too large to list (e.g. one job's
whole schedule); column q of block k costs c_q and uses a_q >= 0 of shared capacities b:

    min  sum_q c_q lam_q   s.t.  sum_q a_q lam_q <= b,   sum_{q in block k} lam_q = 1,   lam >= 0.

A restricted master holds the columns found so far; the caller's pricing oracle, given packing duals
pi <= 0, returns for every block the least reduced cost  min_q (c_q - pi.a_q)  over ALL of the block's
columns, or any number below it (e.g. the least over a relaxed superset: the bound below stays a lower
bound), and candidate columns; a candidate enters the master when its own reduced cost is negative.  For ANY pi <= 0, weak Lagrangian duality gives

    L(pi) = sum_k min_q (c_q - pi.a_q) + pi.b  <=  the LP optimum  <=  the integer optimum,

so the bound is proven at every round, not only at convergence, and a time limit costs strength, never
validity.  (Convexity rows are written as sum lam >= 1: with non-negative costs and packing rows a master
optimum never takes more, and every block must offer a column of zero usage so the master is feasible.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from solvers.lp import solve_lp
from solvers.problem import Problem

__all__ = ["Column", "MasterFailed", "Pricing", "PricingStopped", "ColumnGenResult", "column_generation",
           "restricted_master"]


class PricingStopped(Exception):
    """Raised by a pricing oracle that ran out of time part-way: the rounds before it still count."""


class MasterFailed(RuntimeError):
    """The LP solver gave no optimum of the restricted master (HiGHS refuses coefficients past its
    thresholds, which legal extreme inputs reach: docs/limits.md)."""


@dataclass(frozen=True)
class Column:
    """One column of a block: its cost, its use of the shared rows (sparse) and what it stands for."""

    block: int
    cost: float
    rows: np.ndarray
    values: np.ndarray
    payload: Any = None


@dataclass(frozen=True)
class Pricing:
    """The oracle's answer for one pi: per block the least reduced cost, and columns attaining it."""

    least: np.ndarray
    columns: Sequence[Column]


@dataclass
class ColumnGenResult:
    """``bound``: the best proven Lagrangian bound seen; ``lp_value``: the last restricted master's
    optimum (an upper bound on the full LP); ``pi``: the duals that gave ``bound``; ``weights``: the
    last master's lam, one per column."""

    bound: float
    lp_value: float
    pi: np.ndarray
    columns: list[Column]
    weights: np.ndarray
    rounds: int
    converged: bool
    timings: dict[str, float] = field(default_factory=dict)


def column_generation(b: np.ndarray, n_blocks: int, price: Callable[[np.ndarray], Pricing],
                      initial: Sequence[Column], *, time_limit: float | None = None,
                      rel_gap: float = 1e-6, max_rounds: int = 500) -> ColumnGenResult:
    """Alternate master LP and pricing until no column prices out, the bound meets the master within
    ``rel_gap``, or ``time_limit`` seconds pass; every round's pricing is also a bound (module docstring).

    ``initial`` must give every block a column (a zero-usage one keeps the master feasible).  An oracle
    may raise :class:`PricingStopped`: the best bound so far is returned (re-raised in the first round)."""
    b = np.asarray(b, dtype=np.float64)
    columns: list[Column] = list(initial)
    if {c.block for c in columns} != set(range(n_blocks)):
        raise ValueError("column_generation: every block needs an initial column")
    start = time.perf_counter()
    best, best_pi = -np.inf, np.zeros(len(b))
    timings = {"master": 0.0, "pricing": 0.0}
    lp_value, weights, converged, rounds = np.inf, np.zeros(0), False, 0
    seen = {_key(c) for c in columns}
    while rounds < max_rounds:
        rounds += 1
        clock = time.perf_counter()
        result = solve_lp(restricted_master(columns, b, n_blocks))
        timings["master"] += time.perf_counter() - clock
        if not result.success or result.duals is None:
            raise MasterFailed(f"column_generation: the restricted master failed ({result.status.value}: "
                               f"{result.message})")
        lp_value, weights = float(result.objective), result.x
        pi = np.minimum(result.duals["pack"], 0.0)  # a packing dual of a min problem is <= 0
        mu = result.duals["cover"]
        clock = time.perf_counter()
        try:
            priced = price(pi)
        except PricingStopped:
            if best == -np.inf:
                raise
            break
        finally:
            timings["pricing"] += time.perf_counter() - clock
        bound = float(np.sum(priced.least) + pi @ b)
        if bound > best:
            best, best_pi = bound, pi
        tol = rel_gap * max(1.0, abs(lp_value))
        fresh = [c for c in priced.columns
                 if c.cost - pi[c.rows] @ c.values - mu[c.block] < -1e-9 * max(1.0, abs(lp_value))
                 and _key(c) not in seen]
        if lp_value - best <= tol or not fresh:
            converged = True
            break
        seen.update(_key(c) for c in fresh)
        columns += fresh
        if time_limit is not None and time.perf_counter() - start >= time_limit:
            break
    timings["total"] = time.perf_counter() - start
    return ColumnGenResult(bound=best, lp_value=lp_value, pi=best_pi, columns=columns, weights=weights,
                           rounds=rounds, converged=converged, timings=timings)


def _key(c: Column) -> tuple:
    return (c.block, round(c.cost, 9), c.rows.tobytes(), np.round(c.values, 12).tobytes())


def restricted_master(columns: Sequence[Column], b: np.ndarray, n_blocks: int, *, integer: bool = False) -> Problem:
    """The master over ``columns``: packing rows b, one convexity (covering) row per block; with
    ``integer``, one whole column per block (price-and-branch: a heuristic over the columns found)."""
    n = len(columns)
    lengths = np.array([len(c.rows) for c in columns], dtype=np.int64)
    rows = np.concatenate([c.rows for c in columns]) if n else np.zeros(0, np.int64)
    vals = np.concatenate([c.values for c in columns]) if n else np.zeros(0)
    cols = np.repeat(np.arange(n), lengths)
    A = sp.csr_array((vals, (rows, cols)), shape=(len(b), n))
    blocks = np.array([c.block for c in columns], dtype=np.int64)
    C = sp.csr_array((np.ones(n), (blocks, np.arange(n))), shape=(n_blocks, n))
    return Problem(c=np.array([c.cost for c in columns]), sense="min", A=A, b=b, C=C, d=np.ones(n_blocks),
                   upper=np.ones(n), integer=np.full(n, integer), name="column-master")
