"""The strongest proven lower bound at hand: the LP relaxation's or the column LP's
(:mod:`placement.bounds.column_bound`), whichever is higher. Both are lower bounds on the optimal
weighted JCT (docs/bounds.md), so the higher one is the certificate's; this is the one place that
picks it."""
from __future__ import annotations

import time
from typing import Any, Callable

from placement import deadline
from placement.bounds.column_bound import ColumnBound, column_bound
from placement.chain import Chain, ChainStop, Formulate, SolveLP
from placement.model.instance import Instance

__all__ = ["COLUMN_BOUND_SECONDS", "lp_bound", "strongest"]

#: seconds the column bound may take beside the LP's, within any time limit
COLUMN_BOUND_SECONDS = 10.0


def strongest(instance: Instance, bound: float | None, source: str | None, timings: dict[str, float],
              columns: ColumnBound | None = None) -> tuple[float | None, str | None]:
    """``bound`` (with its ``source``) or the column bound (``columns``, else computed here and timed
    into ``timings``), whichever is higher, with its source."""
    if columns is None:
        clock = time.perf_counter()
        columns = column_bound(instance, time_limit=deadline.remaining(COLUMN_BOUND_SECONDS))
        timings["column bound"] = time.perf_counter() - clock
    if columns is not None and (bound is None or columns.bound > bound):
        return columns.bound, columns.source
    return bound, source


def lp_bound(instance: Instance, formulate: Callable[..., tuple[Any, Any]]
             ) -> tuple[float | None, str | None, dict[str, float]]:
    """The stronger of the LP relaxation of the model ``formulate`` builds (one of
    :data:`placement.formulation.FORMULATIONS`) and the column bound: (bound, its source, the
    timings); (None, None, timings) when neither came."""
    try:
        trace = Chain([Formulate(formulate), SolveLP()]).apply(instance).trace
    except ChainStop as stop:
        return None, None, stop.trace.timings
    timings = dict(trace.timings)
    return (*strongest(instance, trace.bound, "lp" if trace.bound is not None else None, timings), timings)
