"""The exact referee: the time-indexed ILP of MODEL.md (:mod:`placement.formulation.exact`)
solved to optimality or a time limit, through the chain
``[AsPlanned, Formulate("exact"), SolveExact]``, so its schedule passes the same referee
check as every other."""
from __future__ import annotations

from dataclasses import dataclass

from placement.chain import AsPlanned, Chain, Formulate, SolveExact
from placement.evaluate import Report
from placement.instance import Instance
from placement.schedule import Schedule
from solvers.result import Status, relative_gap

__all__ = ["ExactOutcome", "solve_exact_model"]


@dataclass(frozen=True)
class ExactOutcome:
    """One solve of the exact model.

    ``objective`` is the MODEL.md score of ``schedule`` (None without one). ``bound`` is the
    solver's best bound: a lower bound on the MODEL.md optimum both when ``exact`` (the
    model optimum is that optimum) and when not (loss-free progress only helps, so the
    relaxation's optimum is no larger)."""

    status: Status
    schedule: Schedule | None
    objective: float | None
    bound: float | None
    gap: float | None
    solver: str
    timings: dict[str, float]
    message: str
    exact: bool
    report: Report | None = None   # the referee's report of ``schedule``


def solve_exact_model(instance: Instance, *, backend: str = "highs", time_limit: float = 60.0,
                      threads: int = 1) -> ExactOutcome:
    """Formulate, solve to optimality (or the time limit) and decode to a valid schedule.

    ``backend``: highs, scip or cbc (the progress coefficients are not integral, so
    CP-SAT reports UNAVAILABLE)."""
    chain = Chain([AsPlanned(), Formulate("exact"), SolveExact(backend, time_limit, threads)], back_label="decode")
    out = chain.run(instance)
    result, trace = out.trace.result, out.trace
    objective = out.report.objective if out.report is not None else None
    no_schedule = "" if out.schedule is not None else f"no schedule ({result.status.value})"
    return ExactOutcome(status=result.status, schedule=out.schedule, objective=objective, bound=result.bound,
                        gap=relative_gap(objective, result.bound),
                        solver=result.solver + (f" ({result.solver_version})" if result.solver_version else ""),
                        timings=dict(trace.timings), message="; ".join(filter(None, (*trace.messages, no_schedule))),
                        exact=bool(trace.exact), report=out.report)
