"""The exact ILP: the time-indexed model of MODEL.md (:mod:`placement.formulation.time_indexed`)
solved to optimality or a time limit, through the chain
``[AsPlanned, Formulate(formulate_time_indexed), SolveExact]``, so its schedule passes the same
referee check as every other. Given a valid schedule as a start, it never returns a worse one."""
from __future__ import annotations

from dataclasses import dataclass

from placement.chain import AsPlanned, Chain, Formulate, SolveExact
from placement.formulation.time_indexed import formulate_time_indexed
from placement.model.evaluate import Report, evaluate
from placement.model.instance import Instance
from placement.model.schedule import Schedule
from solvers.result import Status, relative_gap

__all__ = ["IlpOutcome", "solve_ilp"]


@dataclass(frozen=True)
class IlpOutcome:
    """One solve of the exact model.

    ``objective`` is the MODEL.md score of ``schedule`` (None without one). ``bound`` is the
    solver's best bound, a lower bound on the MODEL.md optimum (the model's optimum is that
    optimum: ``exact`` is True for every instance)."""

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


def solve_ilp(instance: Instance, *, backend: str = "highs", time_limit: float = 60.0,
              threads: int = 1, start: Schedule | None = None) -> IlpOutcome:
    """Formulate, solve to optimality (or the time limit) and decode to a valid schedule.

    ``backend``: highs, scip or cbc (the progress coefficients are not integral, so
    CP-SAT reports UNAVAILABLE). ``start``: a valid schedule (e.g. the rounding's), given to
    HiGHS as its first incumbent and returned instead of the solver's schedule when the
    referee scores it lower (or the solver has none; the status is then FEASIBLE). Raises
    ValueError if ``start`` is not valid."""
    start_report = None
    if start is not None:
        wrong, start_report = evaluate(instance, start)
        if wrong:
            raise ValueError(f"start: not a valid schedule: {wrong[0]}")
    chain = Chain([AsPlanned(), Formulate(formulate_time_indexed, mip_start=start),
                   SolveExact(backend, time_limit, threads)], back_label="decode")
    out = chain.run(instance)
    result, trace = out.trace.result, out.trace
    schedule, report, status = out.schedule, out.report, result.status
    notes = [*trace.messages]
    if start_report is not None and (report is None or start_report.objective < report.objective - 1e-9):
        notes.append("the solver has no schedule; the start is kept" if report is None else
                     f"the start (score {start_report.objective:.6g}) is kept: the solver's schedule scores "
                     f"{report.objective:.6g}")
        schedule, report = start, start_report
        status = Status.FEASIBLE if not status.has_solution else status
    if schedule is None:
        notes.append(f"no schedule ({result.status.value})")
    objective = report.objective if report is not None else None
    return IlpOutcome(status=status, schedule=schedule, objective=objective, bound=result.bound,
                        gap=relative_gap(objective, result.bound),
                        solver=result.solver + (f" ({result.solver_version})" if result.solver_version else ""),
                        timings=dict(trace.timings), message="; ".join(filter(None, notes)),
                        exact=bool(trace.exact), report=report)
