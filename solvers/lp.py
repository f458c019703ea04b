"""LP relaxation of a :class:`~solvers.problem.Problem`: the entry point :func:`solve_lp`.

Choice groups stay in as their implied rows; only integrality is relaxed.  HiGHS runs in-process
(highs_backend.py); Glop and PDLP run in the OR-Tools worker process (mpmodel_backend.py through
isolation.py); every answer is re-checked by :func:`solvers.finish.finish`.
"""

from __future__ import annotations

from solvers.finish import CHECK_TOL, finish, lagrangian_bound
from solvers.highs_backend import solve_highs
from solvers.isolation import run_isolated
from solvers.mpmodel_backend import mpmodel_worker
from solvers.problem import Problem
from solvers.result import Result, Status

__all__ = ["solve_lp", "LP_BACKENDS"]

LP_BACKENDS = ("highs", "glop", "pdlp")

# PDLP's optimality tolerance (its default, 1e-6 relative to ||b||, leaves rows ~1e-4 short on
# mid-sized models, failing the 1e-4 re-check); 1e-7 passes it at roughly 4x PDLP's default run time.
PDLP_EPS = 1e-7


def solve_lp(problem: Problem, *, backend: str = "highs", time_limit: float | None = None,
             threads: int | None = None, presolve: bool = True) -> Result:
    """Solve the LP relaxation (integrality dropped, choice-group rows kept).

    ``presolve=False`` skips HiGHS' presolve (the other backends do not take it): the same
    optimum, reached sooner on small LPs solved over and over, such as the online windows.

    ``bound`` is the LP optimum, a valid bound on the integer optimum; for PDLP, whose solution is
    approximate, it is the Lagrangian bound of its duals.  ``duals`` are d(objective)/d(rhs) per row kind.
    """
    if backend == "highs":
        raw = solve_highs(problem, relax=True, time_limit=time_limit, threads=threads, presolve=presolve)
    elif backend in ("glop", "pdlp"):
        params = ""
        if backend == "pdlp":
            eps = f"eps_optimal_absolute: {PDLP_EPS} eps_optimal_relative: {PDLP_EPS}"
            params = f"termination_criteria {{ simple_optimality_criteria {{ {eps} }} }}"
            params += f" num_threads: {int(threads)}" if threads else ""
        raw = run_isolated(mpmodel_worker, problem, backend, True, time_limit, params, time_limit=time_limit)
        if raw.status is Status.OPTIMAL and raw.x is not None:
            # Glop's vertex is exact; PDLP's is approximate, so only weak duality gives a proven bound.
            if backend == "glop":
                raw.bound = problem.objective(raw.x)
            elif raw.row_duals is not None:
                raw.bound = lagrangian_bound(problem, raw.row_duals)
    else:
        raise ValueError(f"backend: unknown LP backend {backend!r}; choose from {LP_BACKENDS}")
    return finish(problem, raw, solver=f"{backend}-lp" if backend == "highs" else backend, relaxed=True,
                  tol=CHECK_TOL[backend])
