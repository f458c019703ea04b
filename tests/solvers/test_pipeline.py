"""solve_rounding end to end: bounds against the exact referee, statuses, determinism, the guarantee."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from solvers.check import is_feasible
from solvers.mip import solve_mip
from solvers.guarantee import Guarantee
from solvers.orlib import read_gap, read_mknap1, read_scp
from solvers.pipeline import solve_rounding
from solvers.problem import Problem
from solvers.result import Status

DATA = Path(__file__).resolve().parents[1] / "data" / "orlib"


def _cases() -> list[Problem]:
    """Every GAP and SCP problem shipped in tests/data (GAP problem 4 with equality rows instead of groups)."""
    gaps = read_gap(DATA / "gap" / "gap1.txt")
    rows = read_gap(DATA / "gap" / "gap1.txt", assignment="rows")
    return [gaps[0], gaps[1], gaps[2], rows[3], gaps[4], read_scp(DATA / "scp" / "scp41.txt")]


@pytest.mark.parametrize("prob", _cases(), ids=lambda p: p.name)
def test_lp_value_le_exact_optimum_le_rounded_objective(prob: Problem) -> None:
    res = solve_rounding(prob, seed=0, trials=32)
    exact = solve_mip(prob, backend="highs", time_limit=60)
    assert exact.status is Status.OPTIMAL
    assert res.status is Status.FEASIBLE and is_feasible(prob, res.x)
    assert res.bound <= exact.objective + 1e-6 <= res.objective + 2e-6
    assert res.gap == pytest.approx(abs(res.objective - res.bound) / abs(res.objective))
    assert res.solver == "rounding" and set(res.timings) >= {"lp", "round", "repair", "local_search", "total"}
    assert isinstance(res.guarantee, Guarantee) and res.guarantee.lp_objective == pytest.approx(res.bound)


def test_maximisation_rounded_le_optimum_le_lp() -> None:
    for prob, opt in read_mknap1(DATA / "mkp" / "mknap1.txt")[:4]:
        res = solve_rounding(prob, seed=1, trials=16)
        assert res.status is Status.FEASIBLE and is_feasible(prob, res.x)
        assert res.objective <= opt + 1e-6 <= res.bound + 2e-6


def test_same_seed_same_x_and_seed_is_recorded() -> None:
    prob = read_gap(DATA / "gap" / "gap1.txt")[3]
    a, b = solve_rounding(prob, seed=7, trials=16), solve_rounding(prob, seed=7, trials=16)
    assert np.array_equal(a.x, b.x) and a.objective == b.objective and a.seed == 7
    assert a.details["distinct"] == b.details["distinct"]


def test_derandomized_mode_is_deterministic_and_reports_its_estimator() -> None:
    prob = read_gap(DATA / "gap" / "gap1.txt")[0]
    a = solve_rounding(prob, derandomize=True)
    b = solve_rounding(prob, derandomize=True, seed=99)
    assert a.status is Status.FEASIBLE and np.array_equal(a.x, b.x)
    g = a.guarantee
    assert a.details["trials"] == 1 and g.trials == 1
    assert a.details["estimator_end"] <= a.details["estimator_start"] <= g.p_pack + g.p_cover + g.p_objective + 1e-9


def test_guarantee_is_computed_for_this_solve() -> None:
    prob = read_gap(DATA / "gap" / "gap1.txt")[0]
    res = solve_rounding(prob, trials=8)
    g = res.guarantee
    assert g.rows_pack == 5 and g.rows_exact == 15 and g.rows_cover == 0
    assert g.p_success == pytest.approx(max(0.0, 1 - g.p_pack - g.p_cover - g.p_objective))
    assert g.p_all_fail == pytest.approx((1 - g.p_success) ** 8)
    assert g.objective_threshold == pytest.approx(g.objective_factor * res.bound)
    assert f"{res.bound:.6g}" in g.statement and f"{g.delta_pack:.4g}" in g.statement
    assert g.scale_pack == 1.0  # every GAP variable sits in a choice group: nothing is scaled


def test_infeasible_lp_gives_infeasible_status() -> None:
    prob = Problem(c=[1.0, 1.0], A=[[1, 1]], b=[1.0], C=[[1, 1]], d=[3.0], upper=[5, 5])
    res = solve_rounding(prob)
    assert res.status is Status.INFEASIBLE and res.x is None and "LP relaxation" in res.message


def test_unbounded_lp_gives_unbounded_status() -> None:
    prob = Problem(c=[1.0, 1.0], sense="max", C=[[1, 1]], d=[1.0])
    res = solve_rounding(prob)
    assert res.status is Status.UNBOUNDED and res.x is None


def test_integer_infeasible_problem_gives_error_with_violations() -> None:
    prob = Problem(c=[1.0, 1.0], G=[[1, 1], [1, -1]], g_lo=[1, 0], g_hi=[1, 0], upper=[1, 1])
    res = solve_rounding(prob, trials=4)
    assert res.status is Status.ERROR and res.objective is None and res.bound == pytest.approx(1.0)
    assert "general" in res.message and "least violated candidate" in res.message
    assert res.details["last_resort"] is False  # the longer repair was tried and could not help either


def test_zero_time_limit_still_tries_one_candidate_and_bad_trials_are_rejected() -> None:
    prob = read_gap(DATA / "gap" / "gap1.txt")[2]
    res = solve_rounding(prob, time_limit=0.0, trials=8)
    assert res.status in (Status.FEASIBLE, Status.TIME_LIMIT, Status.ERROR)
    if res.status is Status.FEASIBLE:
        assert is_feasible(prob, res.x)
    with pytest.raises(ValueError, match="trials"):
        solve_rounding(prob, trials=0)


def test_other_lp_backends_give_the_same_bound() -> None:
    prob = read_gap(DATA / "gap" / "gap1.txt")[0]
    ref = solve_rounding(prob, trials=4)
    for backend in ("glop", "pdlp"):
        res = solve_rounding(prob, trials=4, lp_backend=backend)
        assert res.status is Status.FEASIBLE and is_feasible(prob, res.x)
        assert res.bound == pytest.approx(ref.bound, rel=1e-4) and res.bound <= res.objective
