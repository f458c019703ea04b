"""``placement.offline.solve``: one entry point for every method, one result type.

Every method runs through :class:`placement.chain.Chain`:

- ``rounding`` (default): LP relaxation of the MPC-IP -> randomized rounding trials (with
  the engine's per-solve guarantee) -> decode -> slot rules (to MODEL.md validity, re-using
  freed capacity) -> referee -> the best trial by MODEL.md score;
- ``greedy``: the baseline (:data:`placement.offline.greedy.GREEDY`: shortest remaining work
  first, local first);
- ``exact``: the best start of rounding, greedy and the column plan, proven optimal by the
  strongest bound (:mod:`placement.bounds.strongest`), else the time-indexed ILP of all of
  MODEL.md from that start (:mod:`placement.offline.ilp`; docs/bounds.md);
- ``lp-bound``: only the lower bound.

Every schedule returned has passed the referee (:func:`placement.model.evaluate.evaluate`),
once, in the chain.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from placement import deadline
from placement.bounds.column_bound import ColumnBound, column_bound
from placement.bounds.column_plan import ColumnPlan
from placement.bounds.strongest import COLUMN_BOUND_SECONDS, lp_bound, strongest
from placement.chain import Chain, ChainStop, Formulate, Round, SlotRules, SolveLP
from placement.deadline import TimeLimitReached
from placement.formulation import FORMULATIONS
from placement.model.evaluate import Report
from placement.model.instance import Instance
from placement.model.schedule import Schedule
from placement.offline.certificate import Certificate, Solution
from placement.offline.greedy import GREEDY
from placement.offline.ilp import solve_ilp
from solvers.guarantee import Guarantee
from solvers.result import Status

__all__ = ["Certificate", "MODELS", "SOLVERS", "Solution", "SolveError", "solve"]

SOLVERS = ("rounding", "greedy", "exact", "lp-bound")
MODELS = ("auto", "per-machine", "aggregated", "configuration")
#: "auto" uses the per-machine model up to this many (job, slot, machine) triples
AUTO_PER_MACHINE_LIMIT = 20_000
#: a gap this small (float round-off of equal scores) proves the schedule optimal
PROVEN_GAP = 1e-9
#: the exact solver builds its ILP only up to this many (job, slot, machine) triples (memory)
EXACT_MAX_TRIPLES = 60_000
#: seconds the exact solver's start (a rounding solve, with its bounds) may take of its time limit
EXACT_START_SECONDS = 20.0


class SolveError(ValueError):
    """Arguments or an instance the pipeline cannot solve; the message says why."""


def solve(instance: Instance, *, solver: str = "rounding", seed: int = 0, time_limit: float | None = None,
          trials: int = 32, bound: bool = True, exact_backend: str = "highs", model: str = "auto") -> Solution:
    """Place the jobs of ``instance`` and certify the result.

    Parameters
    ----------
    instance : the cluster, horizon and jobs (:class:`placement.model.instance.Instance`).
    solver : one of :data:`SOLVERS`: ``rounding`` (LP relaxation, randomized rounding, slot
        rules), ``greedy``, ``exact`` (proven optimal when the time allows) or ``lp-bound``.
    seed : the rounding trials' seed (same seed, same schedule).
    time_limit : seconds for the whole call (model, LP, trials, slot rules, ILP); the exact
        solver gets 60 s without one. An enclosing :func:`placement.deadline.limit` that ends
        earlier (the command line's) wins.
    trials : random rounding trials beside the most likely rounding.
    bound : ``False`` skips the lower bound for ``greedy``.
    exact_backend : the ILP solver for ``exact``: highs, scip or cbc.
    model : the LP (docs/formulation.md): ``per-machine``, ``aggregated`` (smaller, the same
        kind of lower bound), ``configuration``, or ``auto`` (by size).

    Returns
    -------
    Solution : the schedule (None for ``lp-bound``, or when the time ran out before any was
        checked: status ``TIME_LIMIT`` and a note), the referee's report and the
        :class:`Certificate`. Every schedule returned has passed the validator.

    Raises
    ------
    SolveError : an unknown solver or model, a negative seed, a non-positive time limit or trial count.
    """
    _check_args(solver, seed, time_limit, trials)
    if model not in MODELS:
        raise SolveError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    with deadline.limit(time_limit):
        try:
            return _solve(instance, solver, seed, time_limit, trials, bound, exact_backend, model)
        except TimeLimitReached as stop:
            trace = getattr(stop, "trace", None)
            name = solver if solver != "exact" else f"exact:{exact_backend}"
            return _no_schedule(Certificate(name, Status.TIME_LIMIT,
                                            timings=dict(trace.timings) if trace is not None else {},
                                            message=f"no schedule: {stop}"))


def _solve(instance: Instance, solver: str, seed: int, time_limit: float | None, trials: int, bound: bool,
           exact_backend: str, model: str) -> Solution:
    if not instance.jobs:
        empty = GREEDY.run(instance)
        return _finish(instance, empty.schedule, empty.report, solver, Status.OPTIMAL, 0.0, "lp", None, {},
                       message="no jobs")
    if model == "auto":
        triples = sum(instance.horizon - j.arrival for j in instance.jobs) * len(instance.topology.machines)
        model = "per-machine" if triples <= AUTO_PER_MACHINE_LIMIT else "aggregated"
    if solver == "greedy":
        return _greedy(instance, bound, model)
    if solver == "exact":
        return _exact(instance, time_limit, exact_backend, model)
    return _rounding(instance, seed, time_limit, trials, model, bound_only=solver == "lp-bound")


def _check_args(solver: str, seed: Any, time_limit: Any, trials: Any) -> None:
    if solver not in SOLVERS:
        raise SolveError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SolveError(f"seed must be a non-negative integer, got {seed!r}")
    if time_limit is not None and not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise SolveError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if not isinstance(trials, (int, np.integer)) or trials < 1:
        raise SolveError(f"trials must be a positive integer, got {trials!r}")


def _rounding(instance: Instance, seed: int, time_limit: float | None, trials: int, model: str,
              bound_only: bool, columns: ColumnBound | None = None) -> Solution:
    name = "lp-bound" if bound_only else "rounding"
    steps = [Formulate(FORMULATIONS[model]), SolveLP(time_limit)] + ([] if bound_only else [Round(trials, seed)])
    chain = Chain(steps if bound_only else [SlotRules(), *steps])
    try:
        if bound_only:
            trace = chain.apply(instance).trace
        else:
            out = chain.run(instance)
            trace = out.trace
    except ChainStop as stop:
        lp = stop.trace.result
        status = Status.TIME_LIMIT if lp is not None and lp.status is Status.TIME_LIMIT else Status.ERROR
        return _no_schedule(Certificate(name, status, timings=stop.trace.timings, message=str(stop), model=model))
    if trace.bound is None:
        lp = trace.result
        return _no_schedule(Certificate(name, Status.ERROR, timings=trace.timings,
                                        message=f"LP relaxation: {lp.status.value} ({lp.message})", model=model))
    timings = dict(trace.timings)
    try:
        bound, source = strongest(instance, trace.bound, "lp", timings, columns)
    except TimeLimitReached:  # the LP's bound stands; the schedule in hand is not lost to the column bound
        bound, source = trace.bound, "lp"
    if bound_only:
        return _no_schedule(Certificate("lp-bound", Status.BOUND, lower_bound=bound, bound_source=source,
                                        timings=timings, model=model))
    schedule = replace(out.schedule, extra={"solver": "rounding", "seed": seed})
    note = f"time limit reached: the best of the first {out.checked} candidates" if out.timed_out else ""
    return _finish(instance, schedule, out.report, "rounding", Status.FEASIBLE, bound, source, trace.guarantee,
                   timings, seed=seed, trials=trials, valid_trials=out.checked, model=model, message=note)


def _greedy(instance: Instance, with_bound: bool, model: str) -> Solution:
    # the schedule first, the (optional) bound after: a time limit then costs the bound, not the schedule
    out = GREEDY.run(instance)
    timings: dict[str, float] = {}
    bound, source, note = None, None, ""
    if with_bound:
        try:
            bound, source, timings = deadline.in_time("computing the lower bound", lp_bound, instance,
                                                      FORMULATIONS[model])
        except TimeLimitReached as stop:
            trace = getattr(stop, "trace", None)
            timings = dict(trace.timings) if trace is not None else {}
            note = f"no lower bound: {stop}"
    timings["greedy"] = out.trace.timings["greedy"]
    schedule = replace(out.schedule, extra={"solver": "greedy"})
    return _finish(instance, schedule, out.report, "greedy", Status.FEASIBLE, bound, source, None, timings,
                   model=model if bound is not None else None, message=note)


def _exact(instance: Instance, time_limit: float | None, backend: str, model: str) -> Solution:
    """The exact solver: the best of rounding, greedy and the column plan as the start, the strongest bound
    at hand (LP or column LP), and the exact ILP only when the start does not already meet that bound."""
    clock = time.perf_counter()
    columns = column_bound(instance, time_limit=deadline.remaining(COLUMN_BOUND_SECONDS))
    timings = {"column bound": time.perf_counter() - clock}
    clock = time.perf_counter()
    rounding = _rounding(instance, 0, deadline.remaining(EXACT_START_SECONDS), 32, model, False, columns)
    plan = ColumnPlan(columns)
    starts = [GREEDY.run(instance),
              *([Chain([SlotRules(follow_sizes=follow), plan]).run(instance) for follow in (False, True)]
                if columns is not None else [])]
    found = [(s.schedule, s.report) for s in [rounding, *starts] if s.report is not None]
    schedule, report = min(found, key=lambda pair: pair[1].objective)
    bound, source = strongest(instance, rounding.certificate.lower_bound, rounding.certificate.bound_source,
                               timings, columns) if columns is not None else (
        rounding.certificate.lower_bound, rounding.certificate.bound_source)
    timings["start"] = time.perf_counter() - clock
    if bound is not None and report.objective <= bound * (1 + PROVEN_GAP):
        return _finish(instance, replace(schedule, extra={"solver": "exact"}), report, "exact", Status.OPTIMAL,
                       bound, source, None, timings, exact=True,
                       message=f"the start meets the {source} bound: optimal without the ILP")
    triples = sum(instance.horizon - j.arrival for j in instance.jobs) * len(instance.topology.machines)
    stopped = ""
    if triples > EXACT_MAX_TRIPLES:
        stopped = (f"the ILP was not built: {triples:,} (job, slot, machine) triples, above the exact solver's "
                   f"{EXACT_MAX_TRIPLES:,} (its memory grows about 30 KB a triple)")
    else:
        try:
            left = deadline.remaining(60.0 if time_limit is None else None)
            # the ILP's own limit ends early enough for HiGHS to stop at a node and hand back: a solver
            # still running when the command returns would be torn down mid-call
            out = deadline.in_time("solving the ILP", _ilp, instance, backend, schedule, left - min(max(2.0, 0.1 * left),
                                                                                          0.5 * left))
        except TimeLimitReached as stop:
            stopped = f"the ILP did not finish: {stop}"
    if stopped:
        return _finish(instance, replace(schedule, extra={"solver": "exact"}), report, "exact", Status.FEASIBLE,
                       bound, source, None, timings, exact=True, message=f"{stopped}; the start is returned")
    timings.update(out.timings)
    if out.bound is not None and (bound is None or out.bound > bound):
        bound, source = out.bound, "mip"
    name = f"exact:{out.solver}"
    status = Status.OPTIMAL if out.status is Status.OPTIMAL and out.exact else Status.FEASIBLE
    return _finish(instance, replace(out.schedule, extra={"solver": name}), out.report, name, status, bound,
                   source, None, timings, exact=out.exact, message=out.message)


def _ilp(instance: Instance, backend: str, start: Schedule, seconds: float):
    """The exact ILP from ``start`` under a deadline of its own ``seconds`` (build and solve)."""
    with deadline.limit(seconds):
        return solve_ilp(instance, backend=backend, start=start, time_limit=seconds)


def _finish(instance: Instance, schedule: Schedule, report: Report, solver: str, status: Status,
            bound: float | None, bound_source: str | None, guarantee: Guarantee | None,
            timings: dict[str, float], **extra) -> Solution:
    """Attach the bound to the referee's report of the chosen schedule: the only way a
    schedule leaves the pipeline (the chain's referee has checked it once)."""
    report = report if bound is None else report.with_bound(bound)
    if status is Status.FEASIBLE and report.gap is not None and report.gap <= PROVEN_GAP:
        status = Status.OPTIMAL  # the schedule meets a proven lower bound: nothing scores less
        extra["message"] = "; ".join(filter(None, (extra.get("message", ""), f"optimal: it meets the {bound_source} bound")))
    schedule = replace(schedule, instance=instance.name,
                       extra={**schedule.extra, "objective": report.objective,
                              **({"lower_bound": bound} if bound is not None else {})})
    cert = Certificate(solver, status, lower_bound=bound, bound_source=bound_source, gap=report.gap,
                       guarantee=guarantee, timings=timings, **extra)
    return Solution(schedule=schedule, report=report, certificate=cert)


def _no_schedule(certificate: Certificate) -> Solution:
    """A solve that ends without a schedule (lp-bound, a failed LP, the time limit): only its certificate."""
    return Solution(schedule=None, report=None, certificate=certificate)
