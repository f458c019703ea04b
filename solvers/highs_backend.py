"""The HiGHS adapter (in-process): a silent ``highspy.Highs`` holding a Problem, and LP/MIP solves with it.

highspy 1.16 prints its "Running HiGHS ... Copyright" banner from C code on stdout when the first
``Highs`` of a process is constructed, before any option can be set; :func:`new_highs` swallows it
(see its docstring), and every instance here gets ``output_flag`` off before it runs.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from solvers.banner import construct_without_banner, printed_banner
from solvers.finish import RawSolution
from solvers.problem import Problem
from solvers.result import Status

__all__ = ["new_highs", "highs_instance", "solve_highs"]

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


_quiet_lock = threading.Lock()
_construction_is_quiet = False  # set once a construction printed no banner: no more capture needed


def new_highs() -> Any:
    """A ``highspy.Highs`` with ``output_flag`` off, its copyright banner kept off the terminal.

    The banner comes from C code during construction (highspy 1.16: only the first construction in a
    process prints it), so no option can prevent it.  Until one construction has printed no banner, each
    construction runs under :func:`solvers.banner.construct_without_banner`, under a lock (C's stdout
    and fd 1 are per process, so two threads must not swap them at once).  Once a construction printed no
    banner, later ones (the hot path, e.g. the online policy's thread pool) run without any capture.
    """
    global _construction_is_quiet
    highspy = _import_highspy()
    if _construction_is_quiet:
        h = highspy.Highs()
    else:
        with _quiet_lock:
            if _construction_is_quiet:
                h = highspy.Highs()
            else:
                h, printed = construct_without_banner(highspy.Highs)
                _construction_is_quiet = not printed_banner(printed)
    h.setOptionValue("output_flag", False)
    return h


def highs_instance(problem: Problem, *, relax: bool, names: bool = False) -> Any:
    """A silent ``highspy.Highs`` holding the problem, passed as CSR arrays in one call."""
    M, lo, hi = problem.all_rows()
    h = new_highs()
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
                mip_gap: float | None = None, start: np.ndarray | None = None,
                presolve: bool = True) -> RawSolution:
    """Solve with HiGHS (LP if ``relax`` else MIP); statuses come back as values, never exceptions.

    ``presolve=False``: straight to the simplex, for the many small LPs where reducing the
    model first costs more than it saves.

    ``start``: a feasible point handed to the MIP as its first incumbent (``setSolution``;
    HiGHS checks it and drops it if it is not feasible)."""
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
    if not presolve:
        h.setOptionValue("presolve", "off")
    _set_threads(h, threads)
    refused = start is not None and not relax and h.setSolution(_solution(start)).name == "kError"
    t1 = time.perf_counter()
    h.run()
    t2 = time.perf_counter()
    model_status = h.getModelStatus()
    status = _HIGHS_STATUS.get(model_status.name, Status.ERROR)
    message = h.modelStatusToString(model_status) + ("; HiGHS refused the start" if refused else "")
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


def _solution(x: np.ndarray) -> Any:
    """A ``highspy.HighsSolution`` holding the column values ``x``."""
    solution = _import_highspy().HighsSolution()
    solution.col_value = np.asarray(x, dtype=np.float64).tolist()
    solution.value_valid = True
    return solution


def _highs_feasibility(h: Any, n: int) -> Status:
    """Disambiguate "unbounded or infeasible": with a zero objective only feasibility is left."""
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.zeros(n))
    h.setOptionValue("presolve", "off")
    h.run()
    name = h.getModelStatus().name
    if name == "kOptimal":
        return Status.UNBOUNDED
    return Status.INFEASIBLE if name == "kInfeasible" else Status.ERROR
