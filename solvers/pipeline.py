"""LP relaxation -> randomized (or derandomised) rounding -> repair -> local search -> best feasible point.

Why a pipeline: each stage is simple and separately testable, and the LP value is a proven bound,
so every answer comes with its gap and with the rounding guarantee computed for this instance.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from solvers.check import violations
from solvers.guarantee import compute_guarantee, event_rows
from solvers.local_search import greedy_singles, improve
from solvers.lp import solve_lp
from solvers.problem import Problem
from solvers.repair import repair
from solvers.result import Result, Status, relative_gap
from solvers.rounding import plan_rounding, round_derandomized, round_trials
from solvers.rows import row_system

logger = logging.getLogger(__name__)

__all__ = ["solve_rounding", "SOLVER_NAME"]

SOLVER_NAME = "rounding"
_VERSION = "1"
_CHECK_TOL = 1e-6
_LAST_RESORT_EFFORT = 10


def _best_possible(problem: Problem, bound: float) -> float:
    """The best objective any integer point can have: the LP bound, rounded when c and x are integral."""
    integral = bool(problem.integer.all() and np.all(problem.c == np.round(problem.c))
                    and problem.offset == round(problem.offset))
    if not integral:
        return bound
    return math.ceil(bound - 1e-6) if problem.sense == "min" else math.floor(bound + 1e-6)


def _better(problem: Problem, a: float, b: float | None) -> bool:
    return b is None or (a < b - 1e-9 if problem.sense == "min" else a > b + 1e-9)


def _remaining(deadline: float) -> float | None:
    return None if math.isinf(deadline) else max(0.0, deadline - time.perf_counter())


def _fail(problem: Problem, status: Status, message: str, seed: int, timings: dict[str, float],
          lp_version: str = "", **details: Any) -> Result:
    return Result(status=status, x=None, objective=None, bound=None, gap=None, solver=SOLVER_NAME,
                  solver_version=f"{SOLVER_NAME} {_VERSION} ({lp_version or 'no LP'})", timings=timings,
                  message=message, seed=seed, details=details)


def solve_rounding(problem: Problem, *, seed: int = 0, trials: int = 64, derandomize: bool = False,
                   lp_backend: str = "highs", time_limit: float | None = None, local_search: bool = True,
                   scale: str | float | tuple[float, float] = "width") -> Result:
    """Solve ``problem`` by LP rounding; same ``seed`` -> same x (unless ``time_limit`` cuts the trials short).

    Status FEASIBLE when the returned x passes :func:`solvers.check.violations`; otherwise ERROR
    (rounding and repair found no feasible point: the message lists the violations of the least
    violated candidate) or the LP's own status (INFEASIBLE, UNBOUNDED, TIME_LIMIT, ...).
    ``bound`` is the LP value, ``guarantee`` the :class:`solvers.guarantee.Guarantee` of this solve.
    ``time_limit`` covers the whole pipeline; trials not started by then are skipped.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    t_start = time.perf_counter()
    deadline = t_start + (time_limit if time_limit is not None else math.inf)
    timings = {"lp": 0.0, "round": 0.0, "repair": 0.0, "local_search": 0.0}

    lp = solve_lp(problem, backend=lp_backend, time_limit=time_limit)
    timings["lp"] = time.perf_counter() - t_start
    if lp.status is not Status.OPTIMAL or lp.x is None:
        status = lp.status if lp.status in (Status.INFEASIBLE, Status.UNBOUNDED, Status.TIME_LIMIT,
                                            Status.UNAVAILABLE, Status.NUMERICAL) else Status.ERROR
        timings["total"] = time.perf_counter() - t_start
        return _fail(problem, status, f"LP relaxation {lp.status.value}: {lp.message}".rstrip(": "), seed,
                     timings, lp.solver_version, lp_status=lp.status.value)

    t0 = time.perf_counter()
    plan = plan_rounding(problem, lp.x, scale=scale)
    guarantee = compute_guarantee(problem, plan, lp.objective, trials=1 if derandomize else trials)
    details: dict[str, Any] = {"trials": 1 if derandomize else trials, "derandomized": derandomize}
    if derandomize:
        x_d, phi0, phi1 = round_derandomized(problem, plan, event_rows(problem, plan, guarantee))
        X = x_d[None, :]
        details.update(estimator_start=phi0, estimator_end=phi1)
    else:
        X = round_trials(plan, trials, np.random.default_rng(seed))
    first = {row.tobytes(): i for i, row in reversed(list(enumerate(X)))}  # first trial of each distinct row
    candidates = X[np.sort(np.fromiter(first.values(), dtype=np.int64))]
    details["distinct"] = int(candidates.shape[0])
    timings["round"] = time.perf_counter() - t0

    sys = row_system(problem)
    # The LP's proven bound (for HiGHS/Glop the LP value; for PDLP the Lagrangian bound of its duals).
    bound = lp.bound if lp.bound is not None else lp.objective
    target = _best_possible(problem, bound)
    best_x, best_obj, best_info = None, None, {}
    least_bad, least_count = None, None
    feasible_trials = done = 0
    seen: set[bytes] = set()  # repaired points already improved (trials often repair to the same point)
    for i, cand in enumerate(candidates):
        if time.perf_counter() > deadline and done:
            details["stopped"] = "time limit"
            break
        done += 1
        t1 = time.perf_counter()
        x, rep = repair(problem, cand, system=sys)
        timings["repair"] += time.perf_counter() - t1
        if not rep.feasible:
            if least_count is None or len(rep.rows_violated) < least_count:
                least_bad, least_count = x, len(rep.rows_violated)
            continue
        feasible_trials += 1
        ls_report = None
        if local_search:
            t2 = time.perf_counter()
            x, _ = greedy_singles(sys, x, guide=lp.x)  # trials that coincide after this are searched once
            if x.tobytes() in seen:
                timings["local_search"] += time.perf_counter() - t2
                continue
            seen.add(x.tobytes())
            x, ls_report = improve(sys, x, guide=lp.x, time_limit=_remaining(deadline))
            timings["local_search"] += time.perf_counter() - t2
        elif x.tobytes() in seen:
            continue
        else:
            seen.add(x.tobytes())
        obj = problem.objective(x)
        if _better(problem, obj, best_obj):
            best_x, best_obj = x, obj
            best_info = {"best_trial": i, "repair": rep, "local_search": ls_report,
                         "rounded_objective": problem.objective(cand)}
        if best_obj is not None and not _better(problem, target, best_obj):
            details["stopped"] = "reached the LP bound"
            break
    if best_x is None and least_bad is not None and time.perf_counter() < deadline:
        # Last resort: the least violated point again, with a ten times longer tabu search.
        t1 = time.perf_counter()
        x, rep = repair(problem, least_bad, system=sys, effort=_LAST_RESORT_EFFORT)
        timings["repair"] += time.perf_counter() - t1
        details["last_resort"] = rep.feasible
        if rep.feasible:
            feasible_trials += 1
            best_x, best_obj = x, problem.objective(x)
            best_info = {"best_trial": None, "repair": rep, "local_search": None,
                         "rounded_objective": None}
        else:
            least_bad = x
    if local_search and best_x is not None and _better(problem, target, best_obj):
        t3 = time.perf_counter()  # polish the winner with the costlier double-swap neighbourhood
        x, ls_report = improve(sys, best_x, guide=lp.x, double_swaps=True, time_limit=_remaining(deadline))
        timings["local_search"] += time.perf_counter() - t3
        if _better(problem, problem.objective(x), best_obj):
            best_x, best_obj = x, problem.objective(x)
        best_info["polish"] = ls_report
    details.update(trials_repaired=done, feasible_trials=feasible_trials, **best_info)
    timings["total"] = time.perf_counter() - t_start
    version = f"{SOLVER_NAME} {_VERSION} (LP: {lp.solver_version})"

    if best_x is None:
        bad = violations(problem, least_bad, _CHECK_TOL) if least_bad is not None else []
        shown = "; ".join(f"{v.kind} {v.row}{f' ({v.name})' if v.name else ''}: lhs={v.lhs:.6g} rhs={v.rhs:.6g}"
                          for v in bad[:10])
        message = (f"no feasible point after repair in {done} distinct trial(s); least violated candidate breaks "
                   f"{len(bad)} constraint(s): {shown}{' ...' if len(bad) > 10 else ''}")
        return Result(status=Status.ERROR, x=least_bad, objective=None, bound=bound, gap=None,
                      solver=SOLVER_NAME, solver_version=version, timings=timings, message=message, seed=seed,
                      guarantee=guarantee, details=details)
    bad = violations(problem, best_x, _CHECK_TOL)
    if bad:  # repair claims feasibility with its own tolerance; the independent check has the last word
        return Result(status=Status.ERROR, x=best_x, objective=best_obj, bound=bound, gap=None,
                      solver=SOLVER_NAME, solver_version=version, timings=timings,
                      message=f"repaired point fails the check: {bad[0]}", seed=seed, guarantee=guarantee,
                      details=details)
    return Result(status=Status.FEASIBLE, x=best_x, objective=best_obj, bound=bound,
                  gap=relative_gap(best_obj, bound), solver=SOLVER_NAME, solver_version=version,
                  timings=timings, message="", seed=seed, guarantee=guarantee, details=details)
