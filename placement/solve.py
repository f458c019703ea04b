"""``placement.solve``: one entry point for every method, one result type.

- ``rounding`` (default): LP relaxation of the MPC-IP -> randomized rounding trials (with
  the engine's per-solve guarantee) -> decode -> realise (repair to MODEL.md validity and
  re-use of freed capacity) -> the best trial by MODEL.md score;
- ``greedy``: the baseline (shortest remaining work first, local first);
- ``exact``: the time-indexed ILP (exact when no job has restart time; else a relaxation);
- ``lp-bound``: only the lower bound.

Every schedule returned has passed :func:`placement.evaluate.validate`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from placement.aggregate import formulate_aggregated
from placement.evaluate import Report, evaluate
from placement.formulation import formulate
from placement.instance import Instance
from placement.schedule import Schedule
from solvers.guarantee import Guarantee, compute_guarantee
from solvers.lp import solve_lp
from solvers.result import Status
from solvers.rounding import plan_rounding, round_most_likely, round_trials

logger = logging.getLogger(__name__)

SOLVERS = ("rounding", "greedy", "exact", "lp-bound")
MODELS = ("auto", "per-machine", "aggregated")
#: "auto" uses the per-machine model up to this many (job, slot, machine) triples
AUTO_PER_MACHINE_LIMIT = 20_000


class SolveError(ValueError):
    """Arguments or an instance the pipeline cannot solve; the message says why."""


@dataclass(frozen=True)
class Certificate:
    """What a solve proves: the lower bound, the gap to it, the rounding guarantee."""

    solver: str
    status: str                     # optimal | feasible | bound | time_limit | error
    lower_bound: float | None       # a valid lower bound on the optimal weighted JCT
    bound_source: str | None        # "lp" or "mip"
    gap: float | None               # (objective - lower_bound) / objective
    guarantee: Guarantee | None     # rounding only
    timings: dict[str, float]
    seed: int | None = None
    trials: int | None = None
    valid_trials: int | None = None
    model: str | None = None        # LP model used: per-machine or aggregated
    exact: bool | None = None       # exact solver: is the ILP exact for this instance
    message: str = ""

    def summary(self) -> str:
        lines = [f"solver            {self.solver} ({self.status})"]
        if self.lower_bound is not None:
            model = f", {self.model} model" if self.model else ""
            lines.append(f"lower bound       {self.lower_bound:.6g} s ({self.bound_source}{model})")
        if self.gap is not None:
            lines.append(f"gap to bound      {self.gap:.2%}")
        if self.trials is not None:
            lines.append(f"rounding          {self.valid_trials} of {self.trials + 1} candidates realised "
                         f"({self.trials} random trials + the most likely), seed {self.seed}")
        if self.guarantee is not None:
            lines.append(f"guarantee         {self.guarantee.statement}")
        lines.append("timings           " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings.items()))
        if self.message:
            lines.append(f"note              {self.message}")
        return "\n".join(lines)


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
    lower bound for greedy; ``time_limit`` (seconds) caps the LP, the rounding trials and
    the exact solver. ``model`` picks the LP (docs/formulation.md): the per-machine model,
    the aggregated one (smaller, same kind of lower bound), or by size ("auto")."""
    _check_args(solver, seed, time_limit, trials)
    if model not in MODELS:
        raise SolveError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    if not instance.jobs:
        return _finish(instance, Schedule((), instance.name), solver, "optimal", 0.0, "lp", None, {},
                       message="no jobs")
    if model == "auto":
        triples = sum(instance.horizon - j.arrival for j in instance.jobs) * len(instance.topology.machines)
        model = "per-machine" if triples <= AUTO_PER_MACHINE_LIMIT else "aggregated"
    if solver == "greedy":
        return _greedy(instance, bound, model)
    if solver == "exact":
        return _exact(instance, time_limit, exact_backend)
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


def lp_bound(instance: Instance, time_limit: float | None = None, model: str = "per-machine"
             ) -> tuple[float | None, Any, Any, dict]:
    """The LP lower bound, the formulation and the LP result (None bound if the LP failed)."""
    t0 = time.perf_counter()
    problem, decoder = (formulate if model == "per-machine" else formulate_aggregated)(instance)
    t1 = time.perf_counter()
    lp = solve_lp(problem, time_limit=time_limit)
    timings = {"formulate": t1 - t0, "lp": time.perf_counter() - t1}
    if lp.status is not Status.OPTIMAL or lp.bound is None:
        return None, (problem, decoder), lp, timings
    return float(lp.bound), (problem, decoder), lp, timings


def _rounding(instance: Instance, seed: int, time_limit: float | None, trials: int, model: str,
              bound_only: bool) -> Solution:
    start = time.perf_counter()
    bound, (problem, decoder), lp, timings = lp_bound(instance, time_limit, model)
    if bound is None:
        cert = Certificate("lp-bound" if bound_only else "rounding", "error", None, None, None, None, timings,
                           message=f"LP relaxation: {lp.status.value} ({lp.message})", model=model)
        return Solution(None, None, cert)
    if bound_only:
        return Solution(None, None, Certificate("lp-bound", "bound", bound, "lp", None, None, timings, model=model))
    from placement.realise import realise
    t0 = time.perf_counter()
    plan = plan_rounding(problem, lp.x)
    guarantee = compute_guarantee(problem, plan, lp.objective, trials=trials)
    rng = np.random.default_rng(seed)
    candidates = np.vstack([round_most_likely(plan), round_trials(plan, trials, rng)])
    timings["round"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    best: tuple[float, Schedule] | None = None
    valid = 0
    for k, x in enumerate(candidates):
        # stop before a candidate that would not finish inside the budget (mean time so far);
        # the first candidate always runs, so there is always a schedule
        per_candidate = (time.perf_counter() - t0) / k if k else 0.0
        if time_limit is not None and k > 0 and time.perf_counter() - start + per_candidate > time_limit:
            logger.info("time budget spent after %d of %d candidates", k, len(candidates))
            break
        schedule = realise(instance, decoder.plan(x))
        violations, report = evaluate(instance, schedule)
        if violations:
            raise RuntimeError(f"realise returned an invalid schedule: {violations[0]}")
        valid += 1
        if best is None or report.objective < best[0] - 1e-9:
            best = (report.objective, schedule)
    timings["decode_realise"] = time.perf_counter() - t0
    schedule = replace(best[1], extra={"solver": "rounding", "seed": seed})
    return _finish(instance, schedule, "rounding", "feasible", bound, "lp", guarantee, timings,
                   seed=seed, trials=trials, valid_trials=valid, model=model)


def _greedy(instance: Instance, with_bound: bool, model: str) -> Solution:
    from placement.greedy import greedy

    timings: dict[str, float] = {}
    bound = None
    if with_bound:
        bound, _, _, timings = lp_bound(instance, model=model)
    t0 = time.perf_counter()
    schedule = greedy(instance)
    timings["greedy"] = time.perf_counter() - t0
    schedule = replace(schedule, extra={"solver": "greedy"})
    return _finish(instance, schedule, "greedy", "feasible", bound, "lp" if bound is not None else None,
                   None, timings, model=model if bound is not None else None)


def _exact(instance: Instance, time_limit: float | None, backend: str) -> Solution:
    from placement.exact_model import solve_exact_model

    out = solve_exact_model(instance, backend=backend, time_limit=60.0 if time_limit is None else time_limit)
    if out.schedule is None:
        cert = Certificate(f"exact:{out.solver}", out.status.value, out.bound, "mip", None, None,
                           dict(out.timings), exact=out.exact, message=out.message)
        return Solution(None, None, cert)
    status = "optimal" if out.status is Status.OPTIMAL and out.exact else "feasible"
    schedule = replace(out.schedule, extra={"solver": f"exact:{out.solver}"})
    return _finish(instance, schedule, f"exact:{out.solver}", status, out.bound, "mip", None,
                   dict(out.timings), exact=out.exact, message=out.message)


def _finish(instance: Instance, schedule: Schedule, solver: str, status: str, bound: float | None,
            bound_source: str | None, guarantee: Guarantee | None, timings: dict[str, float], **extra) -> Solution:
    """Validate, score, attach the bound: the only way a schedule leaves the pipeline."""
    violations, report = evaluate(instance, schedule)
    if violations:
        raise RuntimeError(f"{solver} produced an invalid schedule: {violations[0]}")
    if bound is not None:
        report = report.with_bound(bound)
    schedule = replace(schedule, instance=instance.name,
                       extra={**schedule.extra, "objective": report.objective,
                              **({"lower_bound": bound} if bound is not None else {})})
    cert = Certificate(solver, status, bound, bound_source, report.gap, guarantee, timings, **extra)
    return Solution(schedule, report, cert)
