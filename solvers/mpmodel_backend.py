"""The OR-Tools MPModel adapter (Glop, PDLP, SCIP): runs inside the isolated worker (see isolation.py)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers.finish import RawSolution
from solvers.problem import Problem
from solvers.result import Status

__all__ = ["mpmodel_worker"]

_MB_STATUS = {
    "OPTIMAL": Status.OPTIMAL,
    "FEASIBLE": Status.TIME_LIMIT,  # stopped with an incumbent; finish() promotes it after the check
    "INFEASIBLE": Status.INFEASIBLE,
    "UNBOUNDED": Status.UNBOUNDED,
    "ABNORMAL": Status.NUMERICAL,
    "NOT_SOLVED": Status.TIME_LIMIT,
    "CANCELLED_BY_USER": Status.TIME_LIMIT,
    "MODEL_INVALID": Status.ERROR,
    "INVALID_SOLVER_PARAMETERS": Status.ERROR,
    "INCOMPATIBLE_OPTIONS": Status.ERROR,
    "SOLVER_TYPE_UNAVAILABLE": Status.UNAVAILABLE,
}


def _mb_model(problem: Problem, relax: bool, cost: np.ndarray) -> Any:
    from ortools.linear_solver.python import model_builder_helper as mbh

    M, lo, hi = problem.all_rows()
    model = mbh.ModelBuilderHelper()
    model.fill_model_from_sparse_data(np.zeros(problem.n), np.array(problem.upper), cost, lo, hi, sp.csr_matrix(M))
    model.set_objective_offset(problem.offset)
    model.set_maximize(problem.sense == "max")
    if not relax:
        for j in np.flatnonzero(problem.integer):  # the helper has no array setter for integrality
            model.set_var_integrality(int(j), True)
    return model


def _mb_solver(solver_name: str, time_limit: float | None, params: str) -> Any:
    from ortools.linear_solver.python import model_builder_helper as mbh

    solver = mbh.ModelSolverHelper(solver_name)
    solver.enable_output(False)
    if time_limit is not None:
        solver.set_time_limit_in_seconds(float(time_limit))
    if params:
        solver.set_solver_specific_parameters(params)
    return solver


def mpmodel_worker(problem: Problem, solver_name: str, relax: bool, time_limit: float | None,
                   params: str) -> RawSolution:
    """Build the model from CSR arrays and solve it with an OR-Tools MPSolver backend (runs in the worker).

    MPSolver backends report some unbounded models as INFEASIBLE (e.g. Glop without rows), so an
    INFEASIBLE answer is confirmed by a zero-objective re-solve; a feasible point there means UNBOUNDED.
    """
    import ortools
    from ortools.linear_solver import pywraplp

    t0 = time.perf_counter()
    probe = pywraplp.Solver.CreateSolver(solver_name.upper())
    if probe is None:
        return RawSolution(Status.UNAVAILABLE, None, None, f"OR-Tools {ortools.__version__}",
                           f"OR-Tools was built without {solver_name}")
    version = f"OR-Tools {ortools.__version__}: {probe.SolverVersion()}"
    model = _mb_model(problem, relax, np.array(problem.c))
    solver = _mb_solver(solver_name, time_limit, params)
    t1 = time.perf_counter()
    solver.solve(model)
    t2 = time.perf_counter()
    status = _MB_STATUS.get(solver.status().name, Status.ERROR)
    message = solver.status_string() or solver.status().name
    x = row_duals = bound = None
    if solver.has_solution():
        x = np.asarray(solver.variable_values(), dtype=np.float64)
        if relax:
            row_duals = np.asarray(solver.dual_values(), dtype=np.float64)
        else:
            bound = float(solver.best_objective_bound())
    elif status is Status.INFEASIBLE:
        check = _mb_solver(solver_name, time_limit, params)
        check.solve(_mb_model(problem, relax, np.zeros(problem.n)))
        if check.has_solution():
            status, message = Status.UNBOUNDED, f"{message}; zero-objective re-solve found a feasible point"
    return RawSolution(status, x, bound, version, message, row_duals, {"build": t1 - t0, "solve": t2 - t1})
