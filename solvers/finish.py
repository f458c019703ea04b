"""Turning a backend's raw claim into a verified :class:`~solvers.result.Result`, and bounds from duals.

Every backend adapter (highs_backend.py, mpmodel_backend.py, exact.py) returns a :class:`RawSolution`;
:func:`finish` re-checks its x with :mod:`solvers.check`, so no backend's word is trusted.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.check import violations
from solvers.problem import Problem
from solvers.result import Result, Status, relative_gap

logger = logging.getLogger(__name__)

__all__ = ["CHECK_TOL", "RawSolution", "finish", "lagrangian_bound", "implied_upper"]

# Feasibility tolerance used to re-check each backend's x (see check.py for the scaling rule).
CHECK_TOL = {"highs": 1e-6, "glop": 1e-6, "pdlp": 1e-4, "scip": 1e-6, "cpsat": 1e-6, "cbc": 1e-6}


@dataclass
class RawSolution:
    """What a backend reports before verification; ``status`` TIME_LIMIT means "stopped", x may be present."""

    status: Status
    x: np.ndarray | None
    bound: float | None
    version: str
    message: str = ""
    row_duals: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # backend facts, e.g. branch-and-bound nodes


def finish(problem: Problem, raw: RawSolution, *, solver: str, relaxed: bool, tol: float) -> Result:
    """Turn a backend's raw claim into a Result, re-checking x so no backend's word is trusted.

    A "stopped" run (TIME_LIMIT) whose x passes the check becomes FEASIBLE; an OPTIMAL/FEASIBLE
    claim whose x fails becomes NUMERICAL (x kept for diagnosis), like scipy's ``_check_result``.
    """
    status, x, message = raw.status, raw.x, raw.message
    details: dict[str, Any] = {**raw.details, "check_tol": tol}
    if status not in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT):
        x = None
    if x is not None:
        x = np.clip(np.asarray(x, dtype=np.float64), 0.0, problem.upper)
        if not relaxed:
            x = np.where(problem.integer, np.round(x), x)
        bad = violations(problem, x, tol, integrality=not relaxed)
        details["violations"] = len(bad)
        if not bad:
            status = Status.FEASIBLE if status is Status.TIME_LIMIT else status
        elif status is Status.TIME_LIMIT:
            x = None
        else:
            worst = max(bad, key=lambda v: v.amount)
            note = (f"x violates {len(bad)} constraint(s) at tol {tol:g}; worst: {worst.kind} "
                    f"{worst.row}{f' ({worst.name})' if worst.name else ''} lhs={worst.lhs:.6g} rhs={worst.rhs:.6g}")
            logger.warning("%s claimed %s but %s", solver, status.value, note)
            message = "; ".join(filter(None, (message, f"downgraded from {status.value}: {note}")))
            status = Status.NUMERICAL
    if status.has_solution and x is None and problem.n:
        status, message = Status.ERROR, f"{message}; backend reported {status.value} without a solution".lstrip("; ")
    objective = problem.objective(x) if x is not None else None
    bound = raw.bound if raw.bound is not None and math.isfinite(raw.bound) else None
    duals = None
    if raw.row_duals is not None and status is Status.OPTIMAL:
        duals = {kind: raw.row_duals[sl].copy() for kind, sl in problem.row_slices.items()}
    return Result(status=status, x=x, objective=objective, bound=bound,
                  gap=relative_gap(objective, bound) if status.has_solution else None,
                  solver=solver, solver_version=raw.version, timings=raw.timings, message=message,
                  duals=duals, details=details)


def lagrangian_bound(problem: Problem, row_duals: np.ndarray) -> float | None:
    """A valid bound on the LP optimum from ANY dual vector (approximate duals give a weaker, still valid bound).

    Duals follow the d(objective)/d(rhs) convention.  Why: PDLP's objective is only approximate, but
    weak duality turns its duals into a proven bound.  None when the bound is infinite.
    """
    M, lo, hi = problem.all_rows()
    flip = -1.0 if problem.sense == "max" else 1.0
    c, y = flip * problem.c, flip * np.asarray(row_duals, dtype=np.float64)
    # For a min problem, y_i > 0 prices the lower side of row i and y_i < 0 the upper side.
    y = np.where((y > 0) & ~np.isfinite(lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(hi), 0.0, y)
    rhs_part = float(np.sum(np.where(y > 0, y * np.where(np.isfinite(lo), lo, 0.0),
                                     y * np.where(np.isfinite(hi), hi, 0.0))))
    reduced = c - M.T @ y
    neg = reduced < 0
    upper = implied_upper(problem)
    if np.any(neg & ~np.isfinite(upper)):
        return None
    col_part = float(np.sum(reduced[neg] * upper[neg]))
    return flip * (rhs_part + col_part) + problem.offset


def implied_upper(problem: Problem) -> np.ndarray:
    """upper_j tightened by the packing rows (x_j <= b_i / A_ij, valid because A, x >= 0)."""
    upper = problem.upper.copy()
    A = problem.A
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    np.minimum.at(upper, A.indices, problem.b[rows] / A.data)
    return upper
