"""LP relaxation of a :class:`~solvers.problem.Problem`, plus the HiGHS and OR-Tools adapters shared with exact.py.

Choice groups stay in as their implied rows; only integrality is relaxed.

OR-Tools runs in a separate worker process: its wheel bundles an older HiGHS
under the same SONAME (``libhighs.so.1``) as highspy, and whichever of the two
loads first makes the other fail to import (google/or-tools#5246).  HiGHS runs
in-process; OR-Tools never does.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

from solvers.check import violations
from solvers.problem import Problem
from solvers.result import Result, Status, relative_gap

logger = logging.getLogger(__name__)

__all__ = ["solve_lp", "LP_BACKENDS", "highs_instance", "lagrangian_bound"]

LP_BACKENDS = ("highs", "glop", "pdlp")

# Feasibility tolerance used to re-check each backend's x (see check.py for the scaling rule).
CHECK_TOL = {"highs": 1e-6, "glop": 1e-6, "pdlp": 1e-4, "scip": 1e-6, "cpsat": 1e-6, "cbc": 1e-6}

# PDLP's optimality tolerance (its default, 1e-6 relative to ||b||, leaves rows ~1e-4 short on
# mid-sized models, failing the 1e-4 re-check); 1e-7 passes it at roughly 4x PDLP's default run time.
PDLP_EPS = 1e-7

# Extra wall-clock seconds granted to an isolated worker beyond the solver's own time limit.
_WATCHDOG_SLACK = 60.0


@dataclass
class RawSolution:
    """What a backend reports before verification; ``status`` TIME_LIMIT means "stopped", x may be present."""

    status: Status
    x: np.ndarray | None
    bound: float | None
    version: str
    message: str = ""
    row_duals: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # backend facts, e.g. branch-and-bound nodes


# ---------------------------------------------------------------- verification

def finish(problem: Problem, raw: RawSolution, *, solver: str, relaxed: bool, tol: float) -> Result:
    """Turn a backend's raw claim into a Result, re-checking x so no backend's word is trusted.

    A "stopped" run (TIME_LIMIT) whose x passes the check becomes FEASIBLE; an OPTIMAL/FEASIBLE
    claim whose x fails becomes NUMERICAL (x kept for diagnosis), like scipy's ``_check_result``.
    """
    status, x, message = raw.status, raw.x, raw.message
    details: dict[str, Any] = {**raw.details, "check_tol": tol}
    if status not in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT):
        x = None
    if x is not None:
        x = np.clip(np.asarray(x, dtype=np.float64), 0.0, problem.upper)
        if not relaxed:
            x = np.where(problem.integer, np.round(x), x)
        bad = violations(problem, x, tol, integrality=not relaxed)
        details["violations"] = len(bad)
        if not bad:
            status = Status.FEASIBLE if status is Status.TIME_LIMIT else status
        elif status is Status.TIME_LIMIT:
            x = None
        else:
            worst = max(bad, key=lambda v: v.amount)
            note = (f"x violates {len(bad)} constraint(s) at tol {tol:g}; worst: {worst.kind} "
                    f"{worst.row}{f' ({worst.name})' if worst.name else ''} lhs={worst.lhs:.6g} rhs={worst.rhs:.6g}")
            logger.warning("%s claimed %s but %s", solver, status.value, note)
            message = "; ".join(filter(None, (message, f"downgraded from {status.value}: {note}")))
            status = Status.NUMERICAL
    if status.has_solution and x is None and problem.n:
        status, message = Status.ERROR, f"{message}; backend reported {status.value} without a solution".lstrip("; ")
    objective = problem.objective(x) if x is not None else None
    bound = raw.bound if raw.bound is not None and math.isfinite(raw.bound) else None
    duals = None
    if raw.row_duals is not None and status is Status.OPTIMAL:
        duals = {kind: raw.row_duals[sl].copy() for kind, sl in problem.row_slices.items()}
    return Result(status=status, x=x, objective=objective, bound=bound,
                  gap=relative_gap(objective, bound) if status.has_solution else None,
                  solver=solver, solver_version=raw.version, timings=raw.timings, message=message,
                  duals=duals, details=details)


def lagrangian_bound(problem: Problem, row_duals: np.ndarray) -> float | None:
    """A valid bound on the LP optimum from ANY dual vector (approximate duals give a weaker, still valid bound).

    Duals follow the d(objective)/d(rhs) convention.  Why: PDLP's objective is only approximate, but
    weak duality turns its duals into a proven bound.  None when the bound is infinite.
    """
    M, lo, hi = problem.all_rows()
    flip = -1.0 if problem.sense == "max" else 1.0
    c, y = flip * problem.c, flip * np.asarray(row_duals, dtype=np.float64)
    # For a min problem, y_i > 0 prices the lower side of row i and y_i < 0 the upper side.
    y = np.where((y > 0) & ~np.isfinite(lo), 0.0, y)
    y = np.where((y < 0) & ~np.isfinite(hi), 0.0, y)
    rhs_part = float(np.sum(np.where(y > 0, y * np.where(np.isfinite(lo), lo, 0.0),
                                     y * np.where(np.isfinite(hi), hi, 0.0))))
    reduced = c - M.T @ y
    neg = reduced < 0
    upper = implied_upper(problem)
    if np.any(neg & ~np.isfinite(upper)):
        return None
    col_part = float(np.sum(reduced[neg] * upper[neg]))
    return flip * (rhs_part + col_part) + problem.offset


def implied_upper(problem: Problem) -> np.ndarray:
    """upper_j tightened by the packing rows (x_j <= b_i / A_ij, valid because A, x >= 0)."""
    upper = problem.upper.copy()
    A = problem.A
    rows = np.repeat(np.arange(A.shape[0]), np.diff(A.indptr))
    np.minimum.at(upper, A.indices, problem.b[rows] / A.data)
    return upper


# ---------------------------------------------------------------- HiGHS (in-process)

# One table from HiGHS model status to ours; TIME_LIMIT here means "stopped early" (finish() promotes it
# to FEASIBLE when an incumbent passes the check).  Unknown names fall back to ERROR.
_HIGHS_STATUS = {
    "kOptimal": Status.OPTIMAL,
    "kModelEmpty": Status.OPTIMAL,
    "kInfeasible": Status.INFEASIBLE,
    "kUnbounded": Status.UNBOUNDED,
    "kUnboundedOrInfeasible": None,  # resolved by a zero-objective feasibility re-solve
    "kTimeLimit": Status.TIME_LIMIT,
    "kIterationLimit": Status.TIME_LIMIT,
    "kSolutionLimit": Status.TIME_LIMIT,
    "kObjectiveBound": Status.TIME_LIMIT,
    "kObjectiveTarget": Status.TIME_LIMIT,
    "kInterrupt": Status.TIME_LIMIT,
    "kHighsInterrupt": Status.TIME_LIMIT,
    "kPresolveError": Status.NUMERICAL,
    "kSolveError": Status.NUMERICAL,
    "kPostsolveError": Status.NUMERICAL,
    "kMemoryLimit": Status.ERROR,
    "kModelError": Status.ERROR,
    "kLoadError": Status.ERROR,
    "kNotset": Status.ERROR,
    "kUnknown": Status.ERROR,
}

_scheduler_threads: int | None = None  # thread count HiGHS' global scheduler was last started with
_scheduler_lock = threading.Lock()


def _import_highspy() -> Any:
    import highspy  # lazy: optional at import time of this package

    return highspy


def highs_instance(problem: Problem, *, relax: bool, names: bool = False) -> Any:
    """A silent ``highspy.Highs`` holding the problem, passed as CSR arrays in one call."""
    highspy = _import_highspy()
    M, lo, hi = problem.all_rows()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    integrality = np.zeros(problem.n, dtype=np.int32) if relax else problem.integer.astype(np.int32)
    status = h.passModel(
        problem.n, M.shape[0], M.nnz, 2, -1 if problem.sense == "max" else 1, problem.offset,
        problem.c, np.zeros(problem.n), problem.upper, lo, hi,
        M.indptr.astype(np.int32), M.indices.astype(np.int32), M.data, integrality,
    )
    if status.name == "kError":
        raise RuntimeError(f"HiGHS rejected the model of {problem.name!r} (passModel returned kError)")
    if names:
        _pass_names(h, [*problem.var_names] if problem.var_names else None, problem.n, "x", h.passColName)
        _pass_names(h, problem.row_names(), M.shape[0], "r", h.passRowName)
    return h


def _pass_names(h: Any, names: list[str] | None, size: int, prefix: str, setter: Callable[[int, str], Any]) -> None:
    # MPS needs unique, blank-free names; fall back to generated ones rather than write a broken file.
    if names is None or len(set(names)) != size or any(not s or any(ch.isspace() for ch in s) for s in names):
        names = [f"{prefix}{i}" for i in range(size)]
    for i, s in enumerate(names):
        setter(i, s)


def _set_threads(h: Any, threads: int | None) -> None:
    # HiGHS' scheduler is global and fixed once started; a different count needs an explicit reset.
    global _scheduler_threads
    if threads is None:
        return
    with _scheduler_lock:
        if _scheduler_threads != threads:
            type(h).resetGlobalScheduler(True)
            _scheduler_threads = threads
    h.setOptionValue("threads", int(threads))


def solve_highs(problem: Problem, *, relax: bool, time_limit: float | None, threads: int | None,
                mip_gap: float | None = None) -> RawSolution:
    """Solve with HiGHS (LP if ``relax`` else MIP); statuses come back as values, never exceptions."""
    try:
        _import_highspy()
    except ImportError as exc:
        return RawSolution(Status.UNAVAILABLE, None, None, "", f"highspy not importable: {exc}")
    t0 = time.perf_counter()
    try:
        h = highs_instance(problem, relax=relax)
    except RuntimeError as exc:  # e.g. coefficients beyond HiGHS' 1e15 "infinite" threshold
        return RawSolution(Status.ERROR, None, None, "HiGHS", str(exc))
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if mip_gap is not None and not relax:
        h.setOptionValue("mip_rel_gap", float(mip_gap))
    _set_threads(h, threads)
    t1 = time.perf_counter()
    h.run()
    t2 = time.perf_counter()
    model_status = h.getModelStatus()
    status = _HIGHS_STATUS.get(model_status.name, Status.ERROR)
    message = h.modelStatusToString(model_status)
    if model_status.name == "kUnboundedOrInfeasible":
        status = _highs_feasibility(h, problem.n)
        message += f"; zero-objective re-solve says {status.value}"
    info = h.getInfo()
    x = row_duals = bound = None
    details = {} if relax else {"nodes": int(info.mip_node_count)}
    if info.primal_solution_status == 2:  # kSolutionStatusFeasible
        solution = h.getSolution()
        x = np.asarray(solution.col_value, dtype=np.float64)
        if relax and solution.dual_valid:
            row_duals = np.asarray(solution.row_dual, dtype=np.float64)
    if relax:
        bound = info.objective_function_value if status is Status.OPTIMAL else None
    elif info.mip_node_count >= 0:
        bound = info.mip_dual_bound
    if model_status.name == "kModelEmpty":
        x, bound = np.zeros(problem.n), problem.offset
    return RawSolution(status, x, bound, f"HiGHS {h.version()}", message, row_duals,
                       {"build": t1 - t0, "solve": t2 - t1}, details)


def _highs_feasibility(h: Any, n: int) -> Status:
    """Disambiguate "unbounded or infeasible": with a zero objective only feasibility is left."""
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.zeros(n))
    h.setOptionValue("presolve", "off")
    h.run()
    name = h.getModelStatus().name
    if name == "kOptimal":
        return Status.UNBOUNDED
    return Status.INFEASIBLE if name == "kInfeasible" else Status.ERROR


# ---------------------------------------------------------------- isolated worker process

class _Worker:
    """A persistent child interpreter that runs module-level functions sent over a pipe.

    A plain ``python -c`` child (not multiprocessing) so callers' scripts are never re-imported,
    and the protocol uses its own pipes so solver chatter on stdout cannot corrupt it.
    """

    def __init__(self) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import solvers.lp as m; m._serve_fds()", str(down_r), str(up_w)],
            pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
        )
        os.close(down_r)
        os.close(up_w)
        self.send = Connection(down_w, readable=False)
        self.recv = Connection(up_r, writable=False)

    def stop(self) -> None:
        self.send.close()
        self.recv.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


def _serve_fds() -> None:
    """Child side of :class:`_Worker`: answer requests until the parent closes the pipe."""
    inbox = Connection(int(sys.argv[1]), writable=False)
    outbox = Connection(int(sys.argv[2]), readable=False)
    while True:
        try:
            fn, args = inbox.recv()
        except EOFError:
            return
        try:
            outbox.send((True, fn(*args)))
        except Exception as exc:  # report, keep serving
            outbox.send((False, f"{type(exc).__name__}: {exc}"))


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def run_isolated(fn: Callable[..., RawSolution], *args: Any, time_limit: float | None) -> RawSolution:
    """Run ``fn(*args)`` in the OR-Tools worker process (started on first use, reused afterwards).

    A crash or a run exceeding ``time_limit`` + a grace period kills the worker and returns ERROR/TIME_LIMIT.
    """
    global _worker
    with _worker_lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
        worker = _worker
        timeout = None if time_limit is None else time_limit + _WATCHDOG_SLACK
        try:
            worker.send.send((fn, args))
            if not worker.recv.poll(timeout):
                worker.stop()
                _worker = None
                return RawSolution(Status.TIME_LIMIT, None, None, "", "worker exceeded the time limit; killed")
            ok, value = worker.recv.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            worker.stop()
            _worker = None
            return RawSolution(Status.ERROR, None, None, "", f"solver worker died: {exc!r}")
    if not ok:
        return RawSolution(Status.ERROR, None, None, "", f"solver raised {value}")
    return value


# ---------------------------------------------------------------- OR-Tools MPModel (glop, pdlp, scip)

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


# ---------------------------------------------------------------- public entry point

def solve_lp(problem: Problem, *, backend: str = "highs", time_limit: float | None = None,
             threads: int | None = None) -> Result:
    """Solve the LP relaxation (integrality dropped, choice-group rows kept).

    ``bound`` is the LP optimum, a valid bound on the integer optimum; for PDLP, whose solution is
    approximate, it is the Lagrangian bound of its duals.  ``duals`` are d(objective)/d(rhs) per row kind.
    """
    if backend == "highs":
        raw = solve_highs(problem, relax=True, time_limit=time_limit, threads=threads)
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
