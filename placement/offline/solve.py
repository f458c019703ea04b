"""``placement.offline.solve``: one entry point for every method, one result type.

Every method runs through :class:`placement.chain.Chain`:

- ``rounding`` (default): LP relaxation of the MPC-IP -> randomized rounding trials (with
  the engine's per-solve guarantee) -> decode -> slot rules (repair to MODEL.md validity
  and re-use of freed capacity) -> referee -> the best trial by MODEL.md score;
- ``greedy``: the baseline (shortest remaining work first, local first);
- ``exact``: the referee (docs/bounds.md): the best start of rounding, greedy and the column plan,
  proven optimal by the strongest bound, else the time-indexed ILP of all of MODEL.md from that start;
- ``lp-bound``: only the lower bound.

Every schedule returned has passed the chain's referee (:func:`placement.model.evaluate.evaluate`),
once.
"""
from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from placement import deadline
from placement.chain import Chain, ChainStop, ColumnPlan, EmptyIntent, Formulate, Round, SlotRules, SolveLP
from placement.bounds.column_bound import ColumnBound, column_bound
from placement.deadline import TimeLimitReached
from placement.model.evaluate import Report
from placement.offline.ilp import solve_ilp
from placement.model.instance import Instance
from placement.model.schedule import Schedule
from solvers.guarantee import Guarantee
from solvers.result import Status

SOLVERS = ("rounding", "greedy", "exact", "lp-bound")
MODELS = ("auto", "per-machine", "aggregated", "configuration")
#: "auto" uses the per-machine model up to this many (job, slot, machine) triples
AUTO_PER_MACHINE_LIMIT = 20_000
#: a gap this small (float round-off of equal scores) proves the schedule optimal
PROVEN_GAP = 1e-9
#: the exact referee builds its ILP only up to this many (job, slot, machine) triples (memory)
EXACT_MAX_TRIPLES = 60_000
#: seconds the exact referee's start (a rounding solve, with its bounds) may take of its time limit
EXACT_START_SECONDS = 20.0
#: seconds the column bound (placement.bounds.column_bound) may take beside the LP's, within any time limit
COLUMN_BOUND_SECONDS = 10.0


class SolveError(ValueError):
    """Arguments or an instance the pipeline cannot solve; the message says why."""


@dataclass(frozen=True)
class Certificate:
    """What a solve proves: the lower bound, the gap to it, the rounding guarantee."""

    solver: str
    status: Status                  # OPTIMAL, FEASIBLE, BOUND (lp-bound), or the solver's failure
    lower_bound: float | None       # a valid lower bound on the optimal weighted JCT
    bound_source: str | None        # "lp", "mip" or which column-LP argument gave it
    gap: float | None               # (objective - lower_bound) / objective
    guarantee: Guarantee | None     # rounding only
    timings: dict[str, float]
    seed: int | None = None
    trials: int | None = None
    valid_trials: int | None = None
    model: str | None = None        # LP model used: per-machine or aggregated
    exact: bool | None = None       # exact solver: is the ILP exact for this instance
    message: str = ""

    def summary(self, verbose: bool = False) -> str:
        """The certificate as text; the rounding guarantee in three short lines, or in
        full with ``verbose``."""
        lines = [f"solver            {self.solver} ({self.status.value})"]
        if self.lower_bound is not None:
            model = f", {self.model} model" if self.model and self.bound_source == "lp" else ""
            lines.append(f"lower bound       {self.lower_bound:.6g} s ({self.bound_source}{model})")
        if self.gap is not None:
            lines.append(f"gap to bound      {self.gap:.2%}")
        if self.trials is not None:
            lines.append(f"rounding          {self.valid_trials} of {self.trials + 1} candidates realised "
                         f"({self.trials} random trials + the most likely), seed {self.seed}")
        if self.guarantee is not None:
            lines += ([f"guarantee         {self.guarantee.statement}"] if verbose
                      else _short_guarantee(self.guarantee))
        lines.append("timings           " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings.items()))
        if self.message:
            lines.append(f"note              {self.message}")
        return "\n".join(lines)


def _short_guarantee(g: Guarantee) -> list[str]:
    """What was rounded, the probability bound, what it means (``--verbose``: the full statement)."""
    objective = "" if g.objective_threshold is None else f", objective <= {g.objective_threshold:.6g}"
    return [f"guarantee         rounded the LP optimum ({g.lp_objective:.6g}): {g.rows_pack} packing and "
            f"{g.rows_cover} covering rows bounded, {g.rows_exact} choice rows kept exactly",
            f"                  P[a trial has packing <= {1 + g.delta_pack:.4g} b, covering >= "
            f"{1 - g.delta_cover:.4g} d{objective}] >= {g.p_success:.3g}; all {g.trials} trials miss <= "
            f"{g.p_all_fail:.3g}",
            "                  so some trial is near the LP before repair; repair then makes it valid "
            "(--verbose: in full)"]


@dataclass(frozen=True)
class Solution:
    """A validated schedule (None for ``lp-bound``), its MODEL.md report and the certificate."""

    schedule: Schedule | None
    report: Report | None
    certificate: Certificate

    @property
    def objective(self) -> float | None:
        return None if self.report is None else self.report.objective


def solve(instance: Instance, *, solver: str = "rounding", seed: int = 0, time_limit: float | None = None,
          trials: int = 32, bound: bool = True, exact_backend: str = "highs", model: str = "auto") -> Solution:
    """Solve ``instance`` with ``solver`` (one of SOLVERS). ``bound=False`` skips the LP
    lower bound for greedy; ``time_limit`` (seconds) caps the whole call: building the
    model, the LP, the rounding trials and their repair, the exact solver (which gets 60 s
    without it). At the limit the best schedule checked so far is returned (a note says
    so), or none with status ``TIME_LIMIT``; an enclosing :func:`placement.deadline.limit`
    that ends earlier (the command line's) wins. ``model`` picks the LP
    (docs/formulation.md): the per-machine model, the aggregated one (smaller, same kind of
    lower bound), or by size ("auto")."""
    _check_args(solver, seed, time_limit, trials)
    if model not in MODELS:
        raise SolveError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    with deadline.limit(time_limit):
        try:
            return _solve(instance, solver, seed, time_limit, trials, bound, exact_backend, model)
        except TimeLimitReached as stop:
            trace = getattr(stop, "trace", None)
            name = solver if solver != "exact" else f"exact:{exact_backend}"
            return Solution(None, None, Certificate(name, Status.TIME_LIMIT, None, None, None, None,
                                                    dict(trace.timings) if trace is not None else {},
                                                    message=f"no schedule: {stop}"))


def _solve(instance: Instance, solver: str, seed: int, time_limit: float | None, trials: int, bound: bool,
           exact_backend: str, model: str) -> Solution:
    if not instance.jobs:
        empty = Chain([SlotRules(), EmptyIntent()], back_label="greedy").run(instance)
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


def _lp_bound(instance: Instance, model: str) -> tuple[float | None, str | None, dict[str, float]]:
    """The stronger of the LP and column bounds (None if neither came), its source and the timings."""
    try:
        _, trace = Chain([Formulate(model), SolveLP()]).apply(instance)
    except ChainStop as stop:
        return None, None, stop.trace.timings
    timings = dict(trace.timings)
    return (*_strongest(instance, trace.bound, "lp" if trace.bound is not None else None, timings), timings)


def _strongest(instance: Instance, bound: float | None, source: str | None, timings: dict[str, float],
               columns: ColumnBound | None = None) -> tuple[float | None, str | None]:
    """``bound`` or the column bound (``columns``, else computed here), whichever is higher (both are
    proven), with its source."""
    if columns is None:
        clock = time.perf_counter()
        columns = column_bound(instance, time_limit=deadline.remaining(COLUMN_BOUND_SECONDS))
        timings["column bound"] = time.perf_counter() - clock
    if columns is not None and (bound is None or columns.bound > bound):
        return columns.bound, columns.source
    return bound, source


def _rounding(instance: Instance, seed: int, time_limit: float | None, trials: int, model: str,
              bound_only: bool, columns: ColumnBound | None = None) -> Solution:
    name = "lp-bound" if bound_only else "rounding"
    steps = [Formulate(model), SolveLP(time_limit)] + ([] if bound_only else [Round(trials, seed)])
    chain = Chain(steps if bound_only else [SlotRules(), *steps])
    try:
        if bound_only:
            _, trace = chain.apply(instance)
        else:
            out = chain.run(instance)
            trace = out.trace
    except ChainStop as stop:
        lp = stop.trace.result
        status = Status.TIME_LIMIT if lp is not None and lp.status is Status.TIME_LIMIT else Status.ERROR
        return Solution(None, None, Certificate(name, status, None, None, None, None, stop.trace.timings,
                                                message=str(stop), model=model))
    if trace.bound is None:
        lp = trace.result
        return Solution(None, None, Certificate(name, Status.ERROR, None, None, None, None, trace.timings,
                                                message=f"LP relaxation: {lp.status.value} ({lp.message})",
                                                model=model))
    timings = dict(trace.timings)
    try:
        bound, source = _strongest(instance, trace.bound, "lp", timings, columns)
    except TimeLimitReached:  # the LP's bound stands; the schedule in hand is not lost to the column bound
        bound, source = trace.bound, "lp"
    if bound_only:
        return Solution(None, None, Certificate("lp-bound", Status.BOUND, bound, source, None, None, timings,
                                                model=model))
    schedule = replace(out.schedule, extra={"solver": "rounding", "seed": seed})
    note = f"time limit reached: the best of the first {out.checked} candidates" if out.timed_out else ""
    return _finish(instance, schedule, out.report, "rounding", Status.FEASIBLE, bound, source, trace.guarantee,
                   timings, seed=seed, trials=trials, valid_trials=out.checked, model=model, message=note)


def _greedy(instance: Instance, with_bound: bool, model: str) -> Solution:
    # the schedule first, the (optional) bound after: a time limit then costs the bound, not the schedule
    out = Chain([SlotRules(), EmptyIntent()], back_label="greedy").run(instance)
    timings: dict[str, float] = {}
    bound, source, note = None, None, ""
    if with_bound:
        try:
            bound, source, timings = _bound_in_time(instance, model)
        except TimeLimitReached as stop:
            trace = getattr(stop, "trace", None)
            timings = dict(trace.timings) if trace is not None else {}
            note = f"no lower bound: {stop}"
    timings["greedy"] = out.trace.timings["greedy"]
    schedule = replace(out.schedule, extra={"solver": "greedy"})
    return _finish(instance, schedule, out.report, "greedy", Status.FEASIBLE, bound, source, None, timings,
                   model=model if bound is not None else None, message=note)


def _bound_in_time(instance: Instance, model: str) -> tuple[float | None, str | None, dict[str, float]]:
    """:func:`_lp_bound` under the deadline (see :func:`_in_time`)."""
    return _in_time("computing the lower bound", _lp_bound, instance, model)


def _in_time(what: str, function, *args, **kwargs):
    """``function(*args, **kwargs)`` under the current deadline, in a thread given only the time left:
    the schedule in hand is not lost to a model build or a solver call that cannot be interrupted (the
    thread is abandoned; its own deadline checks end it at its next step)."""
    clock = deadline.current()
    if clock is None:
        return function(*args, **kwargs)
    result: list = []
    context = contextvars.copy_context()
    worker = threading.Thread(target=lambda: result.append(_capture(context.run, function, *args, **kwargs)),
                              name=what, daemon=True)
    worker.start()
    worker.join(max(clock.remaining(), 0.0))
    if not result:
        raise TimeLimitReached(clock.seconds, what)
    value, error = result[0]
    if error is not None:
        raise error
    return value


def _capture(run, *args, **kwargs):
    try:
        return run(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
        return None, exc


def _exact(instance: Instance, time_limit: float | None, backend: str, model: str) -> Solution:
    """The referee: the best of rounding, greedy and the column plan as the start, the strongest bound
    at hand (LP or column LP), and the exact ILP only when the start does not already meet that bound."""
    clock = time.perf_counter()
    columns = column_bound(instance, time_limit=deadline.remaining(COLUMN_BOUND_SECONDS))
    timings = {"column bound": time.perf_counter() - clock}
    clock = time.perf_counter()
    rounding = _rounding(instance, 0, deadline.remaining(EXACT_START_SECONDS), 32, model, False, columns)
    plan = ColumnPlan(columns)
    starts = [Chain([SlotRules(), EmptyIntent()], back_label="greedy").run(instance),
              *([Chain([SlotRules(follow_sizes=follow), plan]).run(instance) for follow in (False, True)]
                if columns is not None else [])]
    found = [(s.schedule, s.report) for s in [rounding, *starts] if s.report is not None]
    schedule, report = min(found, key=lambda pair: pair[1].objective)
    bound, source = _strongest(instance, rounding.certificate.lower_bound, rounding.certificate.bound_source,
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
        stopped = (f"the ILP was not built: {triples:,} (job, slot, machine) triples, above the referee's "
                   f"{EXACT_MAX_TRIPLES:,} (its memory grows about 30 KB a triple)")
    else:
        try:
            left = deadline.remaining(60.0 if time_limit is None else None)
            # the ILP's own limit ends early enough for HiGHS to stop at a node and hand back: a solver
            # still running when the command returns would be torn down mid-call
            out = _in_time("solving the ILP", _ilp, instance, backend, schedule, left - min(max(2.0, 0.1 * left),
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
    cert = Certificate(solver, status, bound, bound_source, report.gap, guarantee, timings, **extra)
    return Solution(schedule, report, cert)
