"""Exact ILP solves of a :class:`~solvers.problem.Problem`: the referee the rounding is measured against.

Backends: HiGHS MIP (in-process, highs_backend.py), CP-SAT and SCIP (OR-Tools, in the isolated worker
of isolation.py), CBC through PuLP.  Every incumbent is re-checked by :func:`solvers.finish.finish`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

from solvers.finish import CHECK_TOL, RawSolution, finish
from solvers.highs_backend import solve_highs
from solvers.isolation import run_isolated
from solvers.mpmodel_backend import mpmodel_worker
from solvers.problem import Problem
from solvers.result import Result, Status

__all__ = ["solve_mip", "EXACT_BACKENDS", "CPSAT_MAX_SCALE_EXP", "integer_scales", "CpsatModel", "cpsat_model"]

EXACT_BACKENDS = ("highs", "cpsat", "scip", "cbc")

# CP-SAT rows/objective are scaled by 10**k, k = 0..CPSAT_MAX_SCALE_EXP, to make coefficients integral.
CPSAT_MAX_SCALE_EXP = 6
_INTEGRAL_TOL = 1e-9


def integer_scales(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the smallest 10**k (k <= CPSAT_MAX_SCALE_EXP) making all its values integral; 0 if none.

    Integral means ``|v*s - round(v*s)| <= 1e-9 * max(1, |v*s|)``.
    """
    scales = np.zeros(n_groups)
    for k in range(CPSAT_MAX_SCALE_EXP + 1):
        v = values * 10.0**k
        off = np.abs(v - np.round(v)) > _INTEGRAL_TOL * np.maximum(1.0, np.abs(v))
        ok = np.bincount(groups, weights=off, minlength=n_groups) == 0
        scales = np.where((scales == 0) & ok, 10.0**k, scales)
    return scales


@dataclass
class CpsatModel:
    """The problem in integers, ready for CP-SAT: rows lo <= M x <= hi with int64 data."""

    upper: np.ndarray  # int64
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray  # int64
    lo: np.ndarray  # float64 holding integers, -inf where unbounded
    hi: np.ndarray  # float64 holding integers, +inf where unbounded
    cost: np.ndarray  # int64
    cost_scale: float
    maximize: bool
    row_scales: np.ndarray


def cpsat_model(problem: Problem) -> CpsatModel | str:
    """Scale the problem to integers for CP-SAT, or say (as a string) why it cannot be done.

    Row bounds need no scaling of their own: with integer x and integer coefficients the row
    activity is an integer, so ``ceil(lo * s)`` / ``floor(hi * s)`` are exact.
    """
    if not problem.integer.all():
        return f"CP-SAT needs all-integer variables; {int((~problem.integer).sum())} are continuous"
    if not np.isfinite(problem.upper).all():
        j = int(np.flatnonzero(~np.isfinite(problem.upper))[0])
        return f"CP-SAT needs finite upper bounds; variable {j} has none"
    M, lo, hi = problem.all_rows()
    m = M.shape[0]
    rows = np.repeat(np.arange(m), np.diff(M.indptr))
    row_scales = integer_scales(M.data, rows, m)
    if (row_scales == 0).any():
        i = int(np.flatnonzero(row_scales == 0)[0])
        names = problem.row_names()
        return (f"row {i} ({names[i]}) has coefficients that are not integral after scaling by "
                f"10**{CPSAT_MAX_SCALE_EXP}; CP-SAT needs integer coefficients")
    data = M.data * row_scales[rows]
    if data.size and np.abs(data).max() > 2.0**53:
        i = int(rows[np.argmax(np.abs(data))])
        return f"row {i} ({problem.row_names()[i]}): scaled coefficients exceed 2**53, beyond exact int64 conversion"
    cost_scale = integer_scales(problem.c, np.zeros(problem.n, dtype=np.int64), 1)[0] if problem.n else 1.0
    if cost_scale == 0:
        return f"objective coefficients are not integral after scaling by 10**{CPSAT_MAX_SCALE_EXP}"
    lo_s, hi_s = lo * row_scales, hi * row_scales
    with np.errstate(invalid="ignore"):
        lo_i = np.ceil(lo_s - _INTEGRAL_TOL * np.maximum(1, np.abs(lo_s)))
        hi_i = np.floor(hi_s + _INTEGRAL_TOL * np.maximum(1, np.abs(hi_s)))
    return CpsatModel(
        upper=np.floor(problem.upper + _INTEGRAL_TOL).astype(np.int64),
        indptr=M.indptr.astype(np.int64), indices=M.indices.astype(np.int64),
        data=np.round(data).astype(np.int64),
        lo=lo_i, hi=hi_i,
        cost=np.round(problem.c * cost_scale).astype(np.int64), cost_scale=float(cost_scale),
        maximize=problem.sense == "max", row_scales=row_scales,
    )


_CPSAT_STATUS = {
    "OPTIMAL": Status.OPTIMAL,
    "FEASIBLE": Status.TIME_LIMIT,  # stopped with an incumbent; finish() promotes it after the check
    "INFEASIBLE": Status.INFEASIBLE,
    "UNKNOWN": Status.TIME_LIMIT,
    "MODEL_INVALID": Status.ERROR,
}


def cpsat_worker(model: CpsatModel, time_limit: float | None, threads: int | None, mip_gap: float) -> RawSolution:
    """Build and solve the CP-SAT model (runs in the OR-Tools worker process).

    CP-SAT's Python API has no array entry point, so one IntVar per variable is unavoidable here.
    """
    import ortools
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    cp = cp_model.CpModel()
    xs = [cp.new_int_var(0, int(u), "") for u in model.upper]
    for i in range(len(model.lo)):
        a, b = model.indptr[i], model.indptr[i + 1]
        expr = cp_model.LinearExpr.weighted_sum([xs[j] for j in model.indices[a:b]], model.data[a:b].tolist())
        lo, hi = model.lo[i], model.hi[i]
        cp.add_linear_constraint(expr, int(lo) if math.isfinite(lo) else cp_model.INT_MIN,
                                 int(hi) if math.isfinite(hi) else cp_model.INT_MAX)
    objective = cp_model.LinearExpr.weighted_sum(xs, model.cost.tolist())
    if model.maximize:
        cp.maximize(objective)
    else:
        cp.minimize(objective)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = int(threads) if threads else 1
    solver.parameters.relative_gap_limit = float(mip_gap)
    solver.parameters.log_search_progress = False
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = float(time_limit)
    t1 = time.perf_counter()
    code = solver.solve(cp)
    t2 = time.perf_counter()
    name = solver.status_name(code)
    status = _CPSAT_STATUS.get(name, Status.ERROR)
    x = bound = None
    if name in ("OPTIMAL", "FEASIBLE"):
        x = np.asarray(solver.response_proto.solution, dtype=np.float64)
        bound = solver.best_objective_bound / model.cost_scale
    return RawSolution(status, x, bound, f"OR-Tools {ortools.__version__} CP-SAT", name, None,
                       {"build": t1 - t0, "solve": t2 - t1})


_PULP_STATUS = {  # PuLP sol_status codes (-1/-2 coincide with its status codes)
    1: Status.OPTIMAL,
    2: Status.TIME_LIMIT,  # integer feasible, not proven optimal
    0: Status.TIME_LIMIT,  # no solution found
    -1: Status.INFEASIBLE,
    -2: Status.UNBOUNDED,
}


def solve_cbc(problem: Problem, *, time_limit: float | None, threads: int | None, mip_gap: float) -> RawSolution:
    """CBC via PuLP.  PuLP is variable-by-variable by design; acceptable for a referee."""
    try:
        import pulp
    except ImportError as exc:
        return RawSolution(Status.UNAVAILABLE, None, None, "", f"pulp not importable: {exc}")
    with warnings.catch_warnings():
        # PuLP 3.3 deprecates its bundled CBC in favour of `pulp[cbc]` + COIN_CMD (removal in PuLP 4.0);
        # the bundled binary is what we rely on until then (see docs/solvers.md).
        warnings.filterwarnings("ignore", message="PULP_CBC_CMD is deprecated", category=DeprecationWarning)
        cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=mip_gap if mip_gap > 0 else None,
                                threads=threads)
    version = f"PuLP {pulp.__version__} bundled CBC"
    if not cmd.available():
        return RawSolution(Status.UNAVAILABLE, None, None, version, "PuLP's bundled CBC binary is not available")
    t0 = time.perf_counter()
    prob = pulp.LpProblem(problem.name.replace(" ", "_") or "problem",
                          pulp.LpMaximize if problem.sense == "max" else pulp.LpMinimize)
    xs = [prob.add_variable(f"x{j}", lowBound=0, upBound=float(u) if math.isfinite(u) else None,
                            cat="Integer" if integral else "Continuous")
          for j, (u, integral) in enumerate(zip(problem.upper.tolist(), problem.integer.tolist()))]
    prob += pulp.LpAffineExpression(list(zip(xs, problem.c.tolist())), constant=problem.offset)
    M, lo, hi = problem.all_rows()
    for i in range(M.shape[0]):
        a, b = M.indptr[i], M.indptr[i + 1]
        if a == b:  # all-zero rows are satisfied (Problem validation guarantees it)
            continue
        expr = pulp.LpAffineExpression([(xs[j], v) for j, v in zip(M.indices[a:b], M.data[a:b].tolist())])
        if lo[i] == hi[i]:
            prob += expr == float(lo[i])
            continue
        if math.isfinite(lo[i]):
            prob += expr >= float(lo[i])
        if math.isfinite(hi[i]):
            prob += expr <= float(hi[i])
    t1 = time.perf_counter()
    prob.solve(cmd)
    t2 = time.perf_counter()
    # PuLP can say "Infeasible" in status while sol_status says merely "no solution found".
    code = prob.status if prob.status in (-1, -2) else prob.sol_status
    status = _PULP_STATUS.get(code, Status.ERROR)
    x = None
    if prob.sol_status in (1, 2):
        x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs], dtype=np.float64)
    # PuLP exposes no CBC dual bound; a proven optimum (zero gap) is its own bound.
    bound = float(problem.c @ x + problem.offset) if status is Status.OPTIMAL and mip_gap == 0 and x is not None else None
    return RawSolution(status, x, bound, version, pulp.LpStatus.get(prob.status, str(prob.status)), None,
                       {"build": t1 - t0, "solve": t2 - t1})


def solve_mip(problem: Problem, *, backend: str = "highs", time_limit: float | None = 60.0,
                threads: int | None = 1, mip_gap: float = 0.0, start: np.ndarray | None = None) -> Result:
    """Solve the ILP exactly (to ``mip_gap``) with one backend; a missing backend gives UNAVAILABLE.

    OPTIMAL means proven within ``mip_gap``; FEASIBLE is a verified incumbent at the time limit;
    TIME_LIMIT means no incumbent.  ``bound`` is the backend's proven dual bound when it reports one.
    ``start``: a feasible point given to HiGHS as its first incumbent (the other backends are not
    given it, and the message says so).
    """
    if start is not None and np.shape(start) != (problem.n,):
        raise ValueError(f"start: expected shape ({problem.n},), got {np.shape(start)}")
    if backend == "highs":
        raw = solve_highs(problem, relax=False, time_limit=time_limit, threads=threads, mip_gap=mip_gap, start=start)
    elif backend == "cpsat":
        model = cpsat_model(problem)
        if isinstance(model, str):
            raw = RawSolution(Status.UNAVAILABLE, None, None, "", model)
        else:
            raw = run_isolated(cpsat_worker, model, time_limit, threads, mip_gap, time_limit=time_limit)
            if raw.bound is not None:
                raw.bound += problem.offset
    elif backend == "scip":
        params = f"limits/gap = {mip_gap!r}" if mip_gap > 0 else ""
        raw = run_isolated(mpmodel_worker, problem, "scip", False, time_limit, params, time_limit=time_limit)
    elif backend == "cbc":
        raw = solve_cbc(problem, time_limit=time_limit, threads=threads, mip_gap=mip_gap)
    else:
        raise ValueError(f"backend: unknown exact backend {backend!r}; choose from {EXACT_BACKENDS}")
    if start is not None and backend != "highs":
        raw.message = "; ".join(filter(None, (raw.message, f"the start is not passed to {backend}")))
    solver = "highs-mip" if backend == "highs" else backend
    return finish(problem, raw, solver=solver, relaxed=False, tol=CHECK_TOL[backend])
