"""The one path from an instance to a schedule: formulate -> solve -> round -> decode ->
slot rules -> one referee check -> pick.

Modelled on cvxpy's ``Chain`` of reductions: each step has ``apply`` (forward: instance ->
problem -> LP point -> candidate vectors) and ``invert`` (back: vector -> intent ->
schedule). :meth:`Chain.run` applies the steps in order, carries every candidate back
through them in reverse, checks each schedule once with the referee
(:func:`placement.model.evaluate.evaluate`) and keeps the best by MODEL.md's score. What the
steps learn on the way (the bound, the rounding guarantee, timings, the solver's status)
is written to a :class:`Trace`, from which callers build their certificate.

The chains in use:

- rounding (``placement solve``): ``[SlotRules, Formulate, SolveLP, Round]``;
- lower bound only: ``[Formulate, SolveLP]``, applied forward only;
- greedy: ``[SlotRules, EmptyIntent]`` (the slot rules alone);
- exact referee: ``[AsPlanned, Formulate("exact"), SolveExact]``;
- online LP policy, per partition and slot: ``[Formulate("aggregated", window...), SolveLP,
  Round]`` applied forward and inverted to an intent; the slot rules then decide the slot
  for all partitions at once (the scheduler is the referee of a decision).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import numpy as np

from placement import deadline
from placement.bounds.column_bound import ColumnBound, column_bound
from placement.bounds.column_plan import column_plan
from placement.deadline import TimeLimitReached
from placement.model.evaluate import Report, evaluate
from placement.formulation import FORMULATIONS, Decoder
from placement.model.instance import Instance
from placement.model.intent import Intent
from placement.model.schedule import Schedule
from placement.slots.rules import build_schedule
from solvers.mip import solve_mip
from solvers.guarantee import Guarantee, compute_guarantee
from solvers.lp import solve_lp
from solvers.problem import Problem
from solvers.result import Result, Status
from solvers.rounding import plan_rounding, round_most_likely, round_trials

__all__ = ["AsPlanned", "Chain", "ChainResult", "ChainStop", "EmptyIntent", "Formulate", "Round", "SlotRules",
           "SolveExact", "SolveLP", "Step", "Trace"]

logger = logging.getLogger(__name__)


@dataclass
class Trace:
    """What the steps of one run learned (read by the caller's certificate)."""

    instance: Instance
    timings: dict[str, float] = field(default_factory=dict)
    problem: Problem | None = None
    decoder: Decoder | None = None
    result: Result | None = None          # the LP or MIP solver's result
    bound: float | None = None            # a proven lower bound on the optimal weighted JCT
    bound_source: str | None = None       # "lp" or "mip"
    guarantee: Guarantee | None = None    # the rounding guarantee of this solve
    exact: bool | None = None             # exact model: is it exact for this instance
    messages: list[str] = field(default_factory=list)

    def time(self, key: str, since: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - since


class ChainStop(Exception):
    """A step cannot go on (e.g. the LP relaxation failed); the message says why and
    ``trace`` holds what the steps before it learned."""

    trace: Trace


class Step(Protocol):
    """One reduction: ``apply`` forward, ``invert`` back (identity where a step has no
    work in that direction)."""

    def apply(self, data: Any, trace: Trace) -> Any:
        ...

    def invert(self, solution: Any, trace: Trace) -> Any:
        ...


class _Forward:
    """A step with nothing to undo on the way back."""

    def invert(self, solution: Any, trace: Trace) -> Any:
        return solution


class Formulate:
    """Instance -> Problem (``placement.formulation``); back: vector -> Intent."""

    def __init__(self, model: str, **options: Any):
        if model not in FORMULATIONS:
            raise ValueError(f"model must be one of {', '.join(FORMULATIONS)}, got {model!r}")
        self.model, self.options = model, options

    def apply(self, instance: Instance, trace: Trace) -> Problem:
        clock = time.perf_counter()
        trace.problem, trace.decoder = FORMULATIONS[self.model](instance, **self.options)
        if self.model == "exact":
            trace.exact = trace.decoder.exact
            trace.messages.append(trace.decoder.message)
        trace.time("formulate", clock)
        return trace.problem

    def invert(self, x: np.ndarray, trace: Trace) -> Intent:
        return trace.decoder.decode(x)


class SolveLP(_Forward):
    """Problem -> the LP relaxation's result; its value is the lower bound. Stops the chain
    unless the LP is solved to optimality."""

    def __init__(self, time_limit: float | None = None, presolve: bool = True):
        self.time_limit, self.presolve = time_limit, presolve

    def apply(self, problem: Problem, trace: Trace) -> Result:
        clock = time.perf_counter()
        trace.result = lp = solve_lp(problem, time_limit=deadline.remaining(self.time_limit), presolve=self.presolve)
        trace.time("lp", clock)
        if lp.status is not Status.OPTIMAL:
            raise ChainStop(f"LP relaxation: {lp.status.value} ({lp.message})")
        if lp.bound is not None:
            trace.bound, trace.bound_source = float(lp.bound), "lp"
        return lp


class Round(_Forward):
    """LP point -> candidate vectors: the most likely rounding, then ``trials`` random ones
    (``solvers.rounding``), with the guarantee computed for this solve when ``trials`` > 0."""

    def __init__(self, trials: int = 0, seed: int = 0):
        self.trials, self.seed = trials, seed

    def apply(self, lp: Result, trace: Trace) -> list[np.ndarray]:
        clock = time.perf_counter()
        plan = plan_rounding(trace.problem, lp.x)
        if not self.trials:
            trace.time("round", clock)
            return [round_most_likely(plan)]
        trace.guarantee = compute_guarantee(trace.problem, plan, lp.objective, trials=self.trials)
        rng = np.random.default_rng(self.seed)
        candidates = np.vstack([round_most_likely(plan), round_trials(plan, self.trials, rng)])
        trace.time("round", clock)
        return list(candidates)


class SolveExact(_Forward):
    """Problem -> its MIP solution (none at a time limit without an incumbent); the
    solver's bound is the lower bound. ``start``: a valid schedule, encoded by the exact
    model's decoder and given to the solver as its first incumbent."""

    def __init__(self, backend: str = "highs", time_limit: float | None = 60.0, threads: int = 1,
                 start: Schedule | None = None):
        self.backend, self.time_limit, self.threads, self.start = backend, time_limit, threads, start

    def apply(self, problem: Problem, trace: Trace) -> list[np.ndarray]:
        x0 = None
        if self.start is not None:
            clock = time.perf_counter()
            try:
                x0 = trace.decoder.encode(self.start)
            except ValueError as exc:
                trace.messages.append(f"MIP start not used: {exc}")
            trace.time("encode", clock)
        clock = time.perf_counter()
        trace.result = result = solve_mip(problem, backend=self.backend, start=x0,
                                            time_limit=deadline.remaining(self.time_limit), threads=self.threads)
        trace.time("solve", clock)
        trace.bound, trace.bound_source = result.bound, "mip"
        trace.messages.append(result.message)
        return [result.x] if result.status.has_solution else []


class SlotRules(_Forward):
    """Back: Intent -> a schedule that keeps every MODEL.md rule (``placement.slots.rules``)."""

    def __init__(self, fill: bool = True, follow_sizes: bool = False):
        self.fill, self.follow_sizes = fill, follow_sizes

    def apply(self, instance: Instance, trace: Trace) -> Instance:
        return instance

    def invert(self, intent: Intent, trace: Trace) -> Schedule:
        return build_schedule(trace.instance, intent, fill=self.fill, follow_sizes=self.follow_sizes)


class AsPlanned(_Forward):
    """Back: Intent -> the schedule it states, unchanged (for models whose decoder already
    gives a valid intent; the referee still checks it)."""

    def apply(self, instance: Instance, trace: Trace) -> Instance:
        return instance

    def invert(self, intent: Intent, trace: Trace) -> Schedule:
        return intent.to_schedule(trace.instance.name)


class ColumnPlan(_Forward):
    """Instance -> the column LP's plan (:mod:`placement.bounds.column_plan`) as candidates (placed on the
    machines, and sizes only), and the column bound (computed here, or the one given) as the trace's
    bound.  The plan is kept, so chains that differ only in their slot rules share it."""

    def __init__(self, bound: ColumnBound | None = None, time_limit: float | None = 10.0):
        self.bound, self.time_limit = bound, time_limit
        self._plans: list[Intent] | None = None

    def apply(self, instance: Instance, trace: Trace) -> list[Intent]:
        clock = time.perf_counter()
        if self.bound is None:
            self.bound = column_bound(instance, time_limit=deadline.remaining(self.time_limit))
        trace.time("column bound", clock)
        if self.bound is None:
            return []
        trace.bound, trace.bound_source = self.bound.bound, self.bound.source
        clock = time.perf_counter()
        if self._plans is None:
            self._plans = column_plan(instance, self.bound)
        trace.time("column plan", clock)
        return list(self._plans)


class EmptyIntent(_Forward):
    """Instance -> one candidate that intends nothing, so the slot rules alone decide."""

    def apply(self, instance: Instance, trace: Trace) -> list[Intent]:
        return [Intent(instance.horizon)]


@dataclass(frozen=True)
class ChainResult:
    """The best schedule found (None if no candidate), its referee report and the trace."""

    schedule: Schedule | None
    report: Report | None
    trace: Trace
    candidates: int     # candidates the solver produced
    checked: int        # candidates carried back and checked by the referee
    timed_out: bool = False   # the deadline stopped the back path before every candidate was checked


class Chain:
    """Steps applied forward, candidates inverted back, each schedule refereed once."""

    def __init__(self, steps: Sequence[Step], *, back_label: str = "decode_realise"):
        self.steps = list(steps)
        self.back_label = back_label

    def apply(self, instance: Instance) -> tuple[list[Any], Trace]:
        """Every step forward; returns the last step's candidates and the trace. Raises
        :class:`ChainStop` when a step cannot go on."""
        trace = Trace(instance)
        data: Any = instance
        try:
            for step in self.steps:
                deadline.check(_STAGES.get(type(step).__name__, ""))
                data = step.apply(data, trace)
        except (ChainStop, TimeLimitReached) as stop:
            stop.trace = trace
            raise
        return data, trace

    def invert(self, candidate: Any, trace: Trace) -> Any:
        """One candidate back through every step, last step first."""
        for step in reversed(self.steps):
            candidate = step.invert(candidate, trace)
        return candidate

    def run(self, instance: Instance, *, time_limit: float | None = None) -> ChainResult:
        """Apply, then invert and referee candidates in order, keeping the lowest weighted
        JCT. Under a deadline (:mod:`placement.deadline`; ``time_limit`` seconds from the
        start of ``run`` adds one) a step that meets it raises
        :class:`~placement.deadline.TimeLimitReached`; on the way back, the chain stops
        before a candidate that would not finish in time at the mean pace so far, and a
        candidate the deadline interrupts is dropped: the best schedule checked so far is
        kept (``timed_out``), and only with none does the exception propagate."""
        with deadline.limit(time_limit):
            candidates, trace = self.apply(instance)
            if deadline.current() is not None:   # named for a message, checked by the back path's own loops
                deadline.current().where = _STAGES.get(self.back_label, "checking the candidates")
            clock = time.perf_counter()
            best: tuple[Schedule, Report] | None = None
            checked = 0
            timed_out = False
            for k, candidate in enumerate(candidates):
                per_candidate = (time.perf_counter() - clock) / k if k else 0.0
                clock_now = deadline.current()
                if k > 0 and clock_now is not None and clock_now.remaining() < per_candidate:
                    logger.info("time budget spent after %d of %d candidates", k, len(candidates))
                    timed_out = True
                    break
                try:
                    schedule = self.invert(candidate, trace)
                except TimeLimitReached as stop:
                    if best is None:
                        trace.time(self.back_label, clock)
                        stop.trace = trace
                        raise
                    timed_out = True
                    break
                violations, report = evaluate(instance, schedule)
                if violations:
                    raise RuntimeError(f"the chain built an invalid schedule: {violations[0]}")
                checked += 1
                if best is None or report.objective < best[1].objective - 1e-9:
                    best = (schedule, report)
            trace.time(self.back_label, clock)
        schedule, report = best if best is not None else (None, None)
        return ChainResult(schedule, report, trace, len(candidates), checked, timed_out)


#: what the command is doing when the deadline meets it before a step (for its message)
_STAGES = {"SlotRules": "starting the solve", "AsPlanned": "starting the solve", "Formulate": "building the model", "SolveLP": "solving the LP relaxation", "Round": "rounding",
           "SolveExact": "solving the ILP", "EmptyIntent": "placing greedily", "greedy": "placing greedily",
           "decode_realise": "repairing the rounded candidates", "decode": "decoding the ILP solution"}
