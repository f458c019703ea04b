"""The one path from an instance to a schedule: formulate -> solve -> round -> decode ->
slot rules -> one check by the referee -> pick.

Modelled on cvxpy's ``Chain`` of reductions: each step has ``apply`` (forward: instance ->
problem -> LP point -> candidate vectors), which returns its output *and its inverse data*,
and ``invert`` (back: vector -> intent -> schedule), which is handed that inverse data again
(the formulation's decoder travels this way, not through shared state). :meth:`Chain.run`
applies the steps in order, carries every candidate back through them in reverse, checks
each schedule once with the referee (:func:`placement.model.evaluate.evaluate`) and keeps
the best by MODEL.md's score. What the steps learn on the way (the bound, the rounding
guarantee, timings, the solver's status) is written to a :class:`Trace`, from which callers
build their certificate.

The chains in use:

- rounding (``placement solve``): ``[SlotRules, Formulate, SolveLP, Round]``;
- lower bound only: ``[Formulate, SolveLP]``, applied forward only;
- greedy: ``[SlotRules, EmptyIntent]``, the slot rules alone (:data:`placement.offline.greedy.GREEDY`);
- the exact ILP (:mod:`placement.offline.ilp`): ``[AsPlanned, Formulate(time-indexed), SolveExact]``;
- the column plan (:mod:`placement.bounds.column_plan`): ``[SlotRules, ColumnPlan]``;
- online LP policy, per partition and slot: ``[Formulate(configuration or aggregated, window...),
  SolveLP, Round]`` applied forward and inverted to an intent; the slot rules then decide the
  slot for all partitions at once.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from placement import deadline
from placement.deadline import TimeLimitReached
from placement.model.evaluate import Report, evaluate
from placement.model.instance import Instance
from placement.model.intent import Intent
from placement.model.schedule import Schedule
from placement.slots.rules import build_schedule
from solvers.guarantee import Guarantee, compute_guarantee
from solvers.lp import solve_lp
from solvers.mip import solve_mip
from solvers.problem import Problem
from solvers.result import Result, Status
from solvers.rounding import plan_rounding, round_most_likely, round_trials

__all__ = ["AsPlanned", "Chain", "ChainResult", "ChainStop", "EmptyIntent", "Formulate", "Forward", "ForwardOnly",
           "Posed", "Relaxed", "Round", "SlotRules", "SolveExact", "SolveLP", "Step", "Trace"]

logger = logging.getLogger(__name__)


@dataclass
class Trace:
    """What the steps of one run learned (read by the caller's certificate)."""

    instance: Instance
    timings: dict[str, float] = field(default_factory=dict)
    result: Result | None = None          # the LP or MIP solver's result
    bound: float | None = None            # a proven lower bound on the optimal weighted JCT
    bound_source: str | None = None       # "lp" or "mip"
    guarantee: Guarantee | None = None    # the rounding guarantee of this solve
    exact: bool | None = None             # time-indexed model: is it exact for this instance
    messages: list[str] = field(default_factory=list)

    def time(self, key: str, since: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - since


@dataclass(frozen=True)
class Posed:
    """A formulated problem on its way forward, with the MIP start a schedule encoded to (if any)."""

    problem: Problem
    start: np.ndarray | None = None


@dataclass(frozen=True)
class Relaxed:
    """The LP relaxation's result beside the problem it relaxes (rounding needs both)."""

    problem: Problem
    lp: Result


class ChainStop(Exception):
    """A step cannot go on (e.g. the LP relaxation failed); the message says why and
    ``trace`` holds what the steps before it learned."""

    trace: Trace


class Step(Protocol):
    """One reduction: ``apply`` forward returns ``(output, inverse data)``; ``invert`` takes a
    solution back with that inverse data (identity where a step has no work that way)."""

    def apply(self, data: Any, trace: Trace) -> tuple[Any, Any]:
        ...

    def invert(self, solution: Any, inverse: Any, trace: Trace) -> Any:
        ...


class ForwardOnly:
    """A step with nothing to undo on the way back (no inverse data)."""

    def invert(self, solution: Any, inverse: Any, trace: Trace) -> Any:
        return solution


class Formulate:
    """Instance -> Problem through ``formulate`` (a function of :mod:`placement.formulation`);
    its decoder is the inverse data, taking a vector back to an Intent. ``options`` go to
    ``formulate``; ``mip_start``: a valid schedule, encoded by the decoder as a MIP solver's first
    incumbent."""

    def __init__(self, formulate: Callable[..., tuple[Problem, Any]], *, mip_start: Schedule | None = None,
                 **options: Any):
        if not callable(formulate):
            raise ValueError(f"Formulate needs a formulate function of placement.formulation, got {formulate!r}")
        self.formulate, self.mip_start, self.options = formulate, mip_start, options

    def apply(self, instance: Instance, trace: Trace) -> tuple[Posed, Any]:
        clock = time.perf_counter()
        problem, decoder = self.formulate(instance, **self.options)
        exact = getattr(decoder, "exact", None)   # a model that can be exact says whether it is, and why
        if exact is not None:
            trace.exact = exact
            trace.messages.append(decoder.message)
        trace.time("formulate", clock)
        x0 = None
        if self.mip_start is not None:
            clock = time.perf_counter()
            try:
                x0 = decoder.encode(self.mip_start)
            except ValueError as exc:
                trace.messages.append(f"MIP start not used: {exc}")
            trace.time("encode", clock)
        return Posed(problem, x0), decoder

    def invert(self, x: np.ndarray, decoder: Any, trace: Trace) -> Intent:
        return decoder.decode(x)


class SolveLP(ForwardOnly):
    """Problem -> the LP relaxation's result; its value is the lower bound. Stops the chain
    unless the LP is solved to optimality."""

    def __init__(self, time_limit: float | None = None, presolve: bool = True):
        self.time_limit, self.presolve = time_limit, presolve

    def apply(self, posed: Posed, trace: Trace) -> tuple[Relaxed, None]:
        clock = time.perf_counter()
        trace.result = lp = solve_lp(posed.problem, time_limit=deadline.remaining(self.time_limit),
                                     presolve=self.presolve)
        trace.time("lp", clock)
        if lp.status is not Status.OPTIMAL:
            raise ChainStop(f"LP relaxation: {lp.status.value} ({lp.message})")
        if lp.bound is not None:
            trace.bound, trace.bound_source = float(lp.bound), "lp"
        return Relaxed(posed.problem, lp), None


class Round(ForwardOnly):
    """LP point -> candidate vectors: the most likely rounding, then ``trials`` random ones
    (``solvers.rounding``), with the guarantee computed for this solve when ``trials`` > 0."""

    def __init__(self, trials: int = 0, seed: int = 0):
        self.trials, self.seed = trials, seed

    def apply(self, relaxed: Relaxed, trace: Trace) -> tuple[list[np.ndarray], None]:
        clock = time.perf_counter()
        plan = plan_rounding(relaxed.problem, relaxed.lp.x)
        if not self.trials:
            trace.time("round", clock)
            return [round_most_likely(plan)], None
        trace.guarantee = compute_guarantee(relaxed.problem, plan, relaxed.lp.objective, trials=self.trials)
        rng = np.random.default_rng(self.seed)
        candidates = np.vstack([round_most_likely(plan), round_trials(plan, self.trials, rng)])
        trace.time("round", clock)
        return list(candidates), None


class SolveExact(ForwardOnly):
    """Problem -> its MIP solution (none at a time limit without an incumbent), from the
    start :class:`Formulate` encoded; the solver's bound is the lower bound."""

    def __init__(self, backend: str = "highs", time_limit: float | None = 60.0, threads: int = 1):
        self.backend, self.time_limit, self.threads = backend, time_limit, threads

    def apply(self, posed: Posed, trace: Trace) -> tuple[list[np.ndarray], None]:
        clock = time.perf_counter()
        trace.result = result = solve_mip(posed.problem, backend=self.backend, start=posed.start,
                                          time_limit=deadline.remaining(self.time_limit), threads=self.threads)
        trace.time("solve", clock)
        trace.bound, trace.bound_source = result.bound, "mip"
        trace.messages.append(result.message)
        return ([result.x] if result.status.has_solution else []), None


class SlotRules(ForwardOnly):
    """Back: Intent -> a schedule that keeps every MODEL.md rule (:mod:`placement.slots.rules`)."""

    def __init__(self, fill: bool = True, follow_sizes: bool = False):
        self.fill, self.follow_sizes = fill, follow_sizes

    def apply(self, instance: Instance, trace: Trace) -> tuple[Instance, None]:
        return instance, None

    def invert(self, intent: Intent, inverse: None, trace: Trace) -> Schedule:
        return build_schedule(trace.instance, intent, fill=self.fill, follow_sizes=self.follow_sizes)


class AsPlanned(ForwardOnly):
    """Back: Intent -> the schedule it states, unchanged (for models whose decoder already
    gives a valid intent; the referee still checks it)."""

    def apply(self, instance: Instance, trace: Trace) -> tuple[Instance, None]:
        return instance, None

    def invert(self, intent: Intent, inverse: None, trace: Trace) -> Schedule:
        return intent.to_schedule(trace.instance.name)


class EmptyIntent(ForwardOnly):
    """Instance -> one candidate that intends nothing, so the slot rules alone decide."""

    def apply(self, instance: Instance, trace: Trace) -> tuple[list[Intent], None]:
        return [Intent(instance.horizon)], None


@dataclass(frozen=True)
class Forward:
    """The steps applied forward: the last step's output, the trace, and each step's inverse data."""

    data: Any
    trace: Trace
    inverse: tuple[Any, ...]


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
    """Steps applied forward, candidates inverted back, each schedule refereed once.
    ``back_label``: the timing key of the way back (the slot rules, or a decoder alone)."""

    def __init__(self, steps: Sequence[Step], *, back_label: str = "slot rules"):
        self.steps = list(steps)
        self.back_label = back_label

    def apply(self, instance: Instance) -> Forward:
        """Every step forward. Raises :class:`ChainStop` when a step cannot go on."""
        trace = Trace(instance)
        data: Any = instance
        inverse = []
        try:
            for step in self.steps:
                deadline.check(_STAGES.get(type(step).__name__, ""))
                data, back = step.apply(data, trace)
                inverse.append(back)
        except (ChainStop, TimeLimitReached) as stop:
            stop.trace = trace
            raise
        return Forward(data, trace, tuple(inverse))

    def invert(self, candidate: Any, forward: Forward) -> Any:
        """One candidate back through every step, last step first, each with its inverse data."""
        for step, back in zip(reversed(self.steps), reversed(forward.inverse)):
            candidate = step.invert(candidate, back, forward.trace)
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
            forward = self.apply(instance)
            candidates, trace = forward.data, forward.trace
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
                    schedule = self.invert(candidate, forward)
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
        return ChainResult(schedule=schedule, report=report, trace=trace, candidates=len(candidates), checked=checked,
                           timed_out=timed_out)


#: what the command is doing when the deadline meets it before a step (for its message)
_STAGES = {"SlotRules": "starting the solve", "AsPlanned": "starting the solve", "Formulate": "building the model",
           "SolveLP": "solving the LP relaxation", "Round": "rounding",
           "SolveExact": "solving the ILP", "EmptyIntent": "placing greedily", "greedy": "placing greedily",
           "slot rules": "applying the slot rules to the candidates", "decode": "decoding the ILP solution"}
