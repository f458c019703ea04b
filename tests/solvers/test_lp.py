"""LP relaxation: known primal/dual, statuses, backend agreement, verification of backend claims."""

import math

import numpy as np
import pytest

from solvers.check import is_feasible
from solvers.mip import solve_mip
from solvers.finish import CHECK_TOL, RawSolution, finish, implied_upper, lagrangian_bound
from solvers.isolation import run_isolated
from solvers.lp import LP_BACKENDS, solve_lp
from solvers.problem import ChoiceGroup, Option, Problem
from solvers.result import Status

import solvers.isolation as isolation_module


def hand_lp(sense="min"):
    """min x + 2y  s.t.  x <= 1.5 (pack), x + y >= 2 (cover); optimum x=1.5, y=0.5, value 2.5.

    Duals (d objective / d rhs): pack -1 (more room for the cheap x), cover +2 (the marginal unit is y).
    """
    sign = 1 if sense == "min" else -1
    return Problem(c=[sign * 1.0, sign * 2.0], sense=sense, A=[[1, 0]], b=[1.5], C=[[1, 1]], d=[2],
                   upper=[10, 10], integer=[False, False])


def random_mpc(seed, n=12, m_pack=4, m_cover=4):
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 5, (m_pack, n)) * (rng.random((m_pack, n)) < 0.6)
    C = rng.integers(0, 5, (m_cover, n)) * (rng.random((m_cover, n)) < 0.6)
    C[np.arange(m_cover), rng.integers(0, n, m_cover)] += 1  # no empty covering row
    upper = rng.integers(1, 4, n).astype(float)
    b = np.maximum(A @ upper * 0.6, 1.0)
    d = np.minimum(C @ upper * 0.3, C.sum(axis=1))
    return Problem(c=rng.integers(1, 10, n), A=A, b=b, C=C, d=d, upper=upper, name=f"mpc{seed}")


@pytest.mark.parametrize("backend", LP_BACKENDS)
@pytest.mark.parametrize("sense", ["min", "max"])
def test_hand_lp_primal_and_dual(backend, sense):
    r = solve_lp(hand_lp(sense), backend=backend)
    tol = 10 * CHECK_TOL[backend]
    sign = 1 if sense == "min" else -1
    assert r.status is Status.OPTIMAL and r.success
    np.testing.assert_allclose(r.x, [1.5, 0.5], atol=tol)
    assert r.objective == pytest.approx(sign * 2.5, abs=tol)
    np.testing.assert_allclose(r.duals["pack"], [sign * -1.0], atol=tol)
    np.testing.assert_allclose(r.duals["cover"], [sign * 2.0], atol=tol)
    assert r.duals["general"].size == 0 and r.duals["implied"].size == 0
    assert r.bound == pytest.approx(sign * 2.5, abs=tol)
    assert r.bound <= r.objective + 1e-9 if sense == "min" else r.bound >= r.objective - 1e-9
    assert r.solver_version and set(r.timings) == {"build", "solve"}
    assert r.details["violations"] == 0


@pytest.mark.parametrize("backend", LP_BACKENDS)
def test_infeasible(backend):
    p = Problem(c=[1, 1], A=[[1, 1]], b=[1], C=[[1, 1]], d=[2], integer=[False, False])
    r = solve_lp(p, backend=backend)
    assert r.status is Status.INFEASIBLE and r.x is None and r.objective is None and not r.success


@pytest.mark.parametrize("backend", ["highs", "glop"])
def test_unbounded(backend):
    # Glop calls this INFEASIBLE; the zero-objective re-solve corrects it to UNBOUNDED.
    p = Problem(c=[1, 1], sense="max", C=[[1, 1]], d=[1], integer=[False, False])
    r = solve_lp(p, backend=backend)
    assert r.status is Status.UNBOUNDED and r.x is None


def test_unbounded_or_infeasible_is_disambiguated():
    # HiGHS presolve answers "infeasible or unbounded" here; the re-solve settles it.
    p = Problem(c=[1, 1], sense="max", G=[[1, -1]], g_lo=[0], g_hi=[0], integer=[False, False])
    r = solve_lp(p)
    assert r.status is Status.UNBOUNDED


@pytest.mark.parametrize("seed", [1, 2])
def test_backends_agree_on_random_mpc(seed):
    p = random_mpc(seed)
    ref = solve_lp(p, backend="highs")
    assert ref.status is Status.OPTIMAL
    for backend in ("glop", "pdlp"):
        r = solve_lp(p, backend=backend)
        assert r.status is Status.OPTIMAL, r.message
        assert r.objective == pytest.approx(ref.objective, rel=1e-4)
        assert is_feasible(p, r.x, CHECK_TOL[backend], integrality=False)
        # Every reported bound is a valid lower bound (PDLP's comes from weak duality, all uppers finite).
        assert r.bound is not None and r.bound <= ref.objective + 1e-6 * abs(ref.objective)
    assert solve_lp(p, backend="glop").bound == pytest.approx(ref.objective, rel=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_highs_without_presolve_reaches_the_same_optimum(seed):
    p = random_mpc(seed)
    ref, plain = solve_lp(p), solve_lp(p, presolve=False)
    assert ref.status is Status.OPTIMAL and plain.status is Status.OPTIMAL
    assert plain.objective == pytest.approx(ref.objective, rel=1e-9)
    assert plain.bound == pytest.approx(ref.bound, rel=1e-9)
    assert is_feasible(p, plain.x, CHECK_TOL["highs"], integrality=False)


@pytest.mark.parametrize("seed", [3, 4])
def test_lp_bounds_mip_for_min(seed):
    p = random_mpc(seed)
    relax, mip = solve_lp(p), solve_mip(p, time_limit=20)
    assert relax.status is Status.OPTIMAL and mip.status is Status.OPTIMAL
    assert relax.bound <= mip.objective + 1e-9
    assert not is_feasible(p, relax.x) or relax.objective == pytest.approx(mip.objective)


def test_choice_group_rows_stay_in_the_relaxation():
    # Covering both items is cheapest with two options; the group allows one option only.
    p = Problem(c=[1, 1, 5, 0, 0, 0], C=[[1, 0, 1, 0, 0, 0], [0, 1, 1, 0, 0, 0]], d=[1, 1],
                upper=[1, 1, 1, 1, 1, 1], integer=[False, False, False, True, True, True],
                groups=[ChoiceGroup((Option(3, [0]), Option(4, [1]), Option(5, [2])))])
    free = Problem(c=p.c, C=p.C, d=p.d, upper=p.upper, integer=p.integer)
    assert solve_lp(free).objective == pytest.approx(2.0)
    r = solve_lp(p)
    assert r.status is Status.OPTIMAL and r.objective > 2.0 + 1e-6
    assert r.x[3:].sum() <= 1 + 1e-9
    assert r.duals["implied"].shape == (4,)


def test_lagrangian_bound_is_valid_for_any_duals():
    p = random_mpc(5)
    ref = solve_lp(p)
    y = np.concatenate([ref.duals[k] for k in ("pack", "cover", "general", "implied")])
    assert lagrangian_bound(p, y) == pytest.approx(ref.objective, rel=1e-7)
    rng = np.random.default_rng(0)
    for _ in range(5):
        noisy = y + rng.normal(0, 0.5, y.size)
        assert lagrangian_bound(p, noisy) <= ref.objective + 1e-9
    # Max problems: the bound is an upper bound.
    q = hand_lp("max")
    yq = np.concatenate([v for v in solve_lp(q).duals.values()])
    assert lagrangian_bound(q, yq * 0.9) >= -2.5 - 1e-9


def test_implied_upper_uses_packing_rows():
    p = Problem(c=[1, 1, 1], A=[[2, 0, 0], [1, 4, 0]], b=[3, 2])
    np.testing.assert_allclose(implied_upper(p), [1.5, 0.5, np.inf])


def test_finish_downgrades_false_claims():
    p = hand_lp()
    bad = finish(p, RawSolution(Status.OPTIMAL, np.array([0.0, 0.0]), 0.0, "v"), solver="t", relaxed=True, tol=1e-6)
    assert bad.status is Status.NUMERICAL and not bad.success
    assert "downgraded from optimal" in bad.message and "cover 0" in bad.message
    stopped_ok = finish(p, RawSolution(Status.TIME_LIMIT, np.array([1.0, 1.0]), None, "v"),
                        solver="t", relaxed=True, tol=1e-6)
    assert stopped_ok.status is Status.FEASIBLE and stopped_ok.objective == 3.0 and stopped_ok.gap is None
    stopped_bad = finish(p, RawSolution(Status.TIME_LIMIT, np.array([0.0, 0.0]), None, "v"),
                         solver="t", relaxed=True, tol=1e-6)
    assert stopped_bad.status is Status.TIME_LIMIT and stopped_bad.x is None
    claimed = finish(p, RawSolution(Status.OPTIMAL, None, None, "v"), solver="t", relaxed=True, tol=1e-6)
    assert claimed.status is Status.ERROR


def test_time_limit_never_raises():
    r = solve_lp(random_mpc(6, n=60, m_pack=20, m_cover=20), time_limit=0.0)
    assert r.status in (Status.FEASIBLE, Status.TIME_LIMIT, Status.OPTIMAL)
    assert (r.x is None) == (r.status is Status.TIME_LIMIT)


def test_thread_counts_can_change_between_solves():
    p = random_mpc(7)
    objs = {solve_lp(p, threads=t).objective for t in (1, 2, 1)}
    assert len(objs) == 1


def test_rejected_model_is_an_error_status_not_a_traceback():
    r = solve_lp(Problem(c=[1, 1], A=[[1e16, 1]], b=[1], integer=[False, False]))  # HiGHS: 1e16 is "infinite"
    assert r.status is Status.ERROR and "kError" in r.message


def test_unknown_backend():
    with pytest.raises(ValueError, match="unknown LP backend 'gurobi'"):
        solve_lp(hand_lp(), backend="gurobi")


def test_worker_reports_errors_and_recovers():
    raw = run_isolated(math.sqrt, -1.0, time_limit=None)
    assert raw.status is Status.ERROR and "ValueError" in raw.message
    isolation_module._worker.proc.kill()
    isolation_module._worker.proc.wait()
    assert solve_lp(hand_lp(), backend="glop").status is Status.OPTIMAL
