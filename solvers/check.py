"""Independent feasibility check of a candidate x, so no backend's word is taken on trust.

A row is violated when it misses its bound by more than ``tol * max(1, |rhs|)``
(absolute for small right-hand sides, relative for large ones); variable bounds
use the same rule.  Integrality is absolute: ``|x_i - round(x_i)| <= tol``, as
MIP solvers' own integrality tolerance is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.problem import Problem

__all__ = ["RowViolation", "violations", "is_feasible"]


@dataclass(frozen=True)
class RowViolation:
    """One violated constraint: ``lhs`` is the achieved value, ``rhs`` the bound it missed."""

    kind: str  # "pack" | "cover" | "general" | "implied" | "bound" | "integrality"
    row: int  # row index within its kind (column index for bound/integrality)
    name: str | None
    lhs: float
    rhs: float

    @property
    def amount(self) -> float:
        """How far the bound is missed (always > 0)."""
        return abs(self.lhs - self.rhs)


def _slack_tol(rhs: np.ndarray, tol: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return tol * np.maximum(1.0, np.where(np.isfinite(rhs), np.abs(rhs), 1.0))


def _collect(kind: str, lhs: np.ndarray, lo: np.ndarray, hi: np.ndarray, tol: float,
             names: tuple[str, ...] | None) -> list[RowViolation]:
    below = lhs < lo - _slack_tol(lo, tol)
    above = lhs > hi + _slack_tol(hi, tol)
    out = []
    for i in np.flatnonzero(below | above):
        rhs = lo[i] if below[i] else hi[i]
        out.append(RowViolation(kind, int(i), names[i] if names is not None else None, float(lhs[i]), float(rhs)))
    return out


def violations(problem: Problem, x: Any, tol: float = 1e-6, *, integrality: bool = True) -> list[RowViolation]:
    """Every violated row, bound and integrality condition of ``problem`` at ``x`` (empty list: feasible).

    ``integrality=False`` checks the LP relaxation instead (choice-group rows still apply).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (problem.n,):
        raise ValueError(f"x: expected shape ({problem.n},), got {x.shape}")
    if not np.isfinite(x).all():
        j = int(np.flatnonzero(~np.isfinite(x))[0])
        name = problem.var_names[j] if problem.var_names is not None else None
        return [RowViolation("bound", j, name, float(x[j]), 0.0)]
    m_a, m_c = problem.A.shape[0], problem.C.shape[0]
    R, r_lo, r_hi = problem.implied_rows()
    out = _collect("pack", problem.A @ x, np.full(m_a, -np.inf), problem.b, tol, problem.pack_names)
    out += _collect("cover", problem.C @ x, problem.d, np.full(m_c, np.inf), tol, problem.cover_names)
    out += _collect("general", problem.G @ x, problem.g_lo, problem.g_hi, tol, problem.general_names)
    out += _collect("implied", R @ x, r_lo, r_hi, tol, None)
    out += _collect("bound", x, np.zeros(problem.n), problem.upper, tol, problem.var_names)
    if not integrality:
        return out
    rounded = np.round(x)
    frac = problem.integer & (np.abs(x - rounded) > tol)
    for j in np.flatnonzero(frac):
        name = problem.var_names[j] if problem.var_names is not None else None
        out.append(RowViolation("integrality", int(j), name, float(x[j]), float(rounded[j])))
    return out


def is_feasible(problem: Problem, x: Any, tol: float = 1e-6, *, integrality: bool = True) -> bool:
    """True when :func:`violations` finds nothing."""
    return not violations(problem, x, tol, integrality=integrality)
