"""Exact ILP backends: known optima, agreement, CP-SAT scaling, time limits, choice groups, MPS/LP export."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solvers.check import is_feasible
from solvers.mip import EXACT_BACKENDS, cpsat_model, solve_mip
from solvers.files import write_lp, write_mps
from solvers.highs_backend import new_highs
from solvers.lp import solve_lp
from solvers.problem import ChoiceGroup, Option, Problem
from solvers.result import Status


def solve_or_skip(problem, backend, **kwargs):
    r = solve_mip(problem, backend=backend, **kwargs)
    if r.status is Status.UNAVAILABLE:
        pytest.skip(f"{backend}: {r.message}")
    return r


def knapsack():
    """max 10a + 13b + 19c + 31d, weights 11 15 20 35 <= 47: unique optimum {a, b, c} = 42."""
    return Problem(c=[10, 13, 19, 31], sense="max", A=[[11, 15, 20, 35]], b=[47], upper=[1, 1, 1, 1]), 42.0, [1, 1, 1, 0]


def set_cover():
    """Universe 0..4; S0+S2 (cost 5) is the unique cheapest cover."""
    sets = [{0, 1, 2}, {2, 3}, {3, 4}, {0, 4}, {1, 3, 4}, {0, 1, 2, 3, 4}]
    C = np.array([[int(e in s) for s in sets] for e in range(5)])
    return Problem(c=[3, 2, 2, 2, 3, 6], C=C, d=np.ones(5), upper=np.ones(6)), 5.0, [1, 0, 1, 0, 0, 0]


def assignment():
    """3x3 assignment; each worker's jobs form an exact choice group, each job is covered once.

    Unique optimum 10: worker0->job1, worker1->job2, worker2->job0.
    """
    cost = np.array([[4, 2, 8], [5, 3, 6], [2, 1, 6]])
    groups = [ChoiceGroup(tuple(Option(3 * i + j, np.array([], dtype=int)) for j in range(3)), exact=True)
              for i in range(3)]
    C = np.array([[int(k % 3 == j) for k in range(9)] for j in range(3)])
    expected = np.zeros(9)
    expected[[1, 5, 6]] = 1
    return Problem(c=cost.ravel(), C=C, d=np.ones(3), upper=np.ones(9), groups=groups), 10.0, expected


@pytest.mark.parametrize("backend", EXACT_BACKENDS)
@pytest.mark.parametrize("make", [knapsack, set_cover, assignment])
def test_known_optimum_every_backend(make, backend):
    problem, optimum, x = make()
    r = solve_or_skip(problem, backend)
    assert r.status is Status.OPTIMAL, r.message
    assert r.objective == pytest.approx(optimum)
    np.testing.assert_array_equal(r.x, x)
    assert r.bound == pytest.approx(optimum) and r.gap == pytest.approx(0.0, abs=1e-9)
    assert r.solver == ("highs-mip" if backend == "highs" else backend)
    assert r.solver_version and "solve" in r.timings


def test_cpsat_scales_decimal_coefficients():
    p = Problem(c=[1.5, 0.25, 1], A=[[0.25, 0.5, 1.5], [0.25, 0, 0]], b=[2.75, 0.6], C=[[1, 1, 1]], d=[2],
                upper=[3, 3, 3])
    model = cpsat_model(p)
    np.testing.assert_array_equal(model.row_scales, [100, 100, 1])
    assert model.cost_scale == 100
    np.testing.assert_array_equal(model.data[:3], [25, 50, 150])
    assert model.hi[1] == 60  # 0.25 x0 <= 0.6  ->  25 x0 <= 60
    ref = solve_mip(p)
    r = solve_or_skip(p, "cpsat")
    assert r.status is Status.OPTIMAL and ref.status is Status.OPTIMAL
    assert r.objective == pytest.approx(ref.objective) == pytest.approx(0.5)
    assert r.bound == pytest.approx(0.5)


def test_cpsat_row_bound_rounding_is_exact():
    p = Problem(c=[1], sense="max", A=[[0.25]], b=[0.6], upper=[5])  # x <= 2.4  ->  x <= 2
    r = solve_or_skip(p, "cpsat")
    assert r.status is Status.OPTIMAL and r.x.tolist() == [2.0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(c=[1, 1], A=[[1 / 3, 1]], b=[1], upper=[1, 1], pack_names=["cap"]),
     r"row 0 \(cap\) has coefficients that are not integral after scaling by 10\*\*6"),
    (dict(c=[1 / 3, 1], A=[[1, 1]], b=[1], upper=[1, 1]), r"objective coefficients are not integral"),
    (dict(c=[1, 1], A=[[1, 1]], b=[1], upper=[1, 1], integer=[True, False]), r"all-integer variables; 1 are continuous"),
    (dict(c=[1, 1], A=[[1, 1]], b=[1], upper=[1, np.inf]), r"finite upper bounds; variable 1"),
    (dict(c=[1, 1], A=[[1e17, 1]], b=[1e17], upper=[1, 1]), r"row 0 \(pack0\): scaled coefficients exceed 2\*\*53"),
])
def test_cpsat_unavailable_with_reason(kwargs, match):
    r = solve_mip(Problem(**kwargs), backend="cpsat")
    assert r.status is Status.UNAVAILABLE and r.x is None
    assert re.search(match, r.message), r.message


def hard_instance():
    rng = np.random.default_rng(0)
    n, m = 150, 15
    A = rng.integers(1, 1000, (m, n))
    return Problem(c=rng.integers(1, 1000, n), sense="max", A=A, b=A.sum(axis=1) * 0.3, upper=np.ones(n))


@pytest.mark.parametrize("backend", EXACT_BACKENDS)
def test_tiny_time_limit_gives_incumbent_or_time_limit(backend):
    p = hard_instance()
    r = solve_or_skip(p, backend, time_limit=0.01)
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT), r.message
    if r.status is Status.FEASIBLE:
        assert is_feasible(p, r.x) and r.objective == pytest.approx(p.objective(r.x))
        if r.bound is not None:
            assert r.bound >= r.objective - 1e-6 and r.gap >= 0
    else:
        assert r.x is None and r.objective is None


@pytest.mark.parametrize("backend", EXACT_BACKENDS)
def test_choice_groups_respected(backend):
    # Profits 5 (x0 in option y3) and 4 (x1, x2 in option y4); at most one option may be used.
    p = Problem(c=[5, 4, 4, 0, 0], sense="max", A=[[1, 1, 1, 0, 0]], b=[10], upper=[2, 1, 1, 1, 1],
                groups=[ChoiceGroup((Option(3, [0]), Option(4, [1, 2])))])
    r = solve_or_skip(p, backend)
    assert r.status is Status.OPTIMAL
    assert r.objective == pytest.approx(10.0)
    np.testing.assert_array_equal(r.x, [2, 0, 0, 1, 0])


@pytest.mark.parametrize("backend", EXACT_BACKENDS)
def test_infeasible(backend):
    p = Problem(c=[1, 1, 0, 0], C=[[1, 1, 0, 0]], d=[2], upper=[1, 1, 1, 1],
                groups=[ChoiceGroup((Option(2, [0]), Option(3, [1])))])  # needs both options
    r = solve_or_skip(p, backend)
    assert r.status is Status.INFEASIBLE and r.x is None


def test_mixed_integer_with_continuous_variables():
    p = Problem(c=[1, 1], C=[[2, 1]], d=[3.5], upper=[5, 5], integer=[True, False])
    for backend in ("highs", "scip", "cbc"):
        r = solve_or_skip(p, backend)
        assert r.status is Status.OPTIMAL and r.objective == pytest.approx(2.0)  # x0=2 beats x0=1, x1=1.5
        assert is_feasible(p, r.x)


def test_highs_reports_its_branch_and_bound_nodes():
    # Integral LP (a single covering row with unit costs): HiGHS needs no branching (0 nodes when
    # presolve solves it, 1 when the root LP does).
    easy = solve_mip(Problem(c=[1, 1], C=[[1, 1]], d=[1], upper=[1, 1]), backend="highs")
    assert easy.status is Status.OPTIMAL and easy.details["nodes"] in (0, 1)
    assert solve_lp(Problem(c=[1, 1], C=[[1, 1]], d=[1], upper=[1, 1])).details.get("nodes") is None


def test_mps_and_lp_round_trip(tmp_path):
    problem, optimum, _ = assignment()
    named = Problem(c=problem.c, C=problem.C, d=problem.d, upper=problem.upper, groups=problem.groups,
                    var_names=[f"w{i}_j{j}" for i in range(3) for j in range(3)], cover_names=["j0", "j1", "j2"])
    for path in (tmp_path / "m.mps", tmp_path / "m.lp"):
        (write_mps if path.suffix == ".mps" else write_lp)(named, path)
        assert "w0_j1" in path.read_text()
        h = new_highs()
        assert h.readModel(str(path)).name == "kOk"
        h.run()
        assert h.getModelStatus().name == "kOptimal"
        assert h.getInfo().objective_function_value == pytest.approx(optimum)
        assert h.getNumCol() == 9 and h.getNumRow() == 3 + 3  # covers + one row per group


def test_invalid_backend_and_mip_gap():
    with pytest.raises(ValueError, match="unknown exact backend"):
        solve_mip(knapsack()[0], backend="gurobi")
    r = solve_mip(hard_instance(), mip_gap=0.5, time_limit=10)
    assert r.status is Status.OPTIMAL and r.gap <= 0.5 + 1e-9


def test_highs_takes_the_start_as_its_first_incumbent():
    # stopped before any search, HiGHS still holds the start: a greedy packing of hard_instance()
    p = hard_instance()
    A, b = p.A.toarray(), p.b
    x0 = np.zeros(p.n)
    for i in np.argsort(-p.c):
        if (A @ x0 + A[:, i] <= b).all():
            x0[i] = 1
    assert is_feasible(p, x0)
    cold = solve_mip(p, time_limit=0.0)
    warm = solve_mip(p, time_limit=0.0, start=x0)
    assert cold.x is None and warm.status is Status.FEASIBLE
    np.testing.assert_array_equal(warm.x, x0)


def test_start_checks_its_shape_and_other_backends_say_they_ignore_it():
    problem, optimum, x = knapsack()
    with pytest.raises(ValueError, match=r"start: expected shape \(4,\)"):
        solve_mip(problem, start=np.zeros(3))
    r = solve_or_skip(problem, "cbc", start=np.array(x, dtype=float))
    assert r.status is Status.OPTIMAL and "the start is not passed to cbc" in r.message


@st.composite
def small_mpc(draw):
    """Random small MPC-IPs with half-integral data, optionally a choice group and a general row."""
    n = draw(st.integers(2, 6))
    coef = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0, 3.0])

    def matrix(m):
        rows = draw(st.lists(st.lists(coef, min_size=n, max_size=n), min_size=m, max_size=m))
        return np.array(rows, dtype=float).reshape(m, n)

    def halves(m, hi):
        return np.array(draw(st.lists(st.integers(0, hi), min_size=m, max_size=m)), dtype=float) / 2

    A, C = matrix(draw(st.integers(0, 3))), matrix(draw(st.integers(0, 3)))
    C[:, 0] += 1.0  # no empty covering row
    upper = np.array(draw(st.lists(st.integers(1, 3), min_size=n, max_size=n)), dtype=float)
    kwargs = dict(c=halves(n, 9) / 2, A=A, b=halves(A.shape[0], 8), C=C, d=halves(C.shape[0], 8), upper=upper,
                  sense=draw(st.sampled_from(["min", "max"])))
    if draw(st.booleans()):  # general row  x0 - x1 in [-1, 1]
        kwargs.update(G=np.eye(1, n) - np.eye(1, n, 1), g_lo=[-1.0], g_hi=[1.0])
    if draw(st.booleans()):  # two new indicators choosing between {x0} and {x1}
        for key in ("A", "C", "G"):
            if key in kwargs:
                kwargs[key] = np.hstack([kwargs[key], np.zeros((kwargs[key].shape[0], 2))])
        kwargs.update(c=np.append(kwargs["c"], [0.5, 0.0]), upper=np.append(upper, [1, 1]),
                      groups=[ChoiceGroup((Option(n, [0]), Option(n + 1, [1])), exact=draw(st.booleans()))])
    return Problem(**kwargs)


# the same 25 examples every run (derandomize): random draws can hit the bundled CBC's wrong
# optimum (test_bundled_cbc_misses_this_optimum pins it), which would fail CI by chance
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True,
          derandomize=True)
@given(small_mpc())
def test_property_lp_bound_and_backend_agreement(problem):
    ref = solve_mip(problem, backend="highs")
    assert ref.status in (Status.OPTIMAL, Status.INFEASIBLE)
    if ref.status is Status.OPTIMAL:
        relax = solve_lp(problem).bound
        assert relax <= ref.objective + 1e-7 if problem.sense == "min" else relax >= ref.objective - 1e-7
    for backend in ("cpsat", "scip", "cbc"):
        r = solve_mip(problem, backend=backend)
        if r.status is Status.UNAVAILABLE:
            continue
        assert r.status is ref.status, (backend, r.message)
        if ref.status is Status.OPTIMAL:  # the message names the backend and the data, to reproduce a rare miss
            assert r.objective == pytest.approx(ref.objective, abs=1e-6), (backend, r.message, _data(problem))
            assert is_feasible(problem, r.x)


def _data(problem) -> dict:
    """A small problem's arrays, for an assertion message."""
    def dense(m):
        return m.toarray().tolist() if hasattr(m, "toarray") else np.asarray(m).tolist()
    return {"sense": problem.sense, "c": problem.c.tolist(), "A": dense(problem.A), "b": problem.b.tolist(),
            "C": dense(problem.C), "d": problem.d.tolist(), "upper": problem.upper.tolist()}


@pytest.mark.xfail(strict=True, reason="PuLP's bundled CBC answers 0.5 as OPTIMAL here (docs/solvers.md, Known limits)")
def test_bundled_cbc_misses_this_optimum():
    problem = Problem(c=[0.0, 0.25, 0.0, 0.5], A=[[0.5, 0.0, 1.0, 0.0]], b=[0.5], C=[[1.0, 1.0, 0.5, 1.0]], d=[1.5],
                      upper=[1, 1, 1, 1])
    assert solve_mip(problem, backend="highs").objective == pytest.approx(0.25)
    r = solve_or_skip(problem, "cbc")
    assert r.status is Status.OPTIMAL and r.objective == pytest.approx(0.25)
