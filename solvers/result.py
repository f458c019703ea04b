"""One result type and one status vocabulary shared by every backend, so callers never branch on solver."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Status", "Result", "relative_gap"]


class Status(enum.Enum):
    """Outcome of a solve.

    FEASIBLE: x satisfies all rows but is not proven optimal (time-out with incumbent, rounding).
    TIME_LIMIT: stopped with NO solution.
    BOUND: only a bound was asked for (a relaxation solved for its value), so no x is meant.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    NUMERICAL = "numerical"
    ERROR = "error"
    UNAVAILABLE = "unavailable"
    BOUND = "bound"

    @property
    def has_solution(self) -> bool:
        """True when a usable x comes with the status (OPTIMAL or FEASIBLE)."""
        return self in (Status.OPTIMAL, Status.FEASIBLE)


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|objective - bound| / max(|objective|, 1e-9); None when either side is missing or infinite."""
    if objective is None or bound is None or not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-9)


@dataclass(frozen=True)
class Result:
    """What a solver returns; ``objective`` is always recomputed as c.x + offset in original units."""

    status: Status
    x: np.ndarray | None
    objective: float | None
    bound: float | None
    gap: float | None
    solver: str
    solver_version: str
    timings: dict[str, float]
    message: str = ""
    seed: int | None = None
    duals: dict[str, np.ndarray] | None = None
    guarantee: object | None = None
    details: dict = field(default_factory=dict)

    @property
    def success(self) -> bool:
        """A solution is available (OPTIMAL or FEASIBLE)."""
        return self.status.has_solution
