"""Rounding: marginals, exact sums, the computed guarantee against Monte-Carlo, and derandomisation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from solvers.guarantee import TOL, chernoff, compute_guarantee, event_rows, width_scale
from solvers.lp import solve_lp
from solvers.orlib import read_gap, read_mknap1
from solvers.pipeline import solve_rounding
from solvers.problem import ChoiceGroup, FlatGroups, Option, Problem
from solvers.result import Status
from solvers.rounding import plan_rounding, round_derandomized, round_most_likely, round_trials

N_MC = 20_000  # Monte-Carlo trials per check
# A check "fails" only if the observed count is implausible under the claim: P[Binomial(N, p) >= k] < 1e-6.
# If the claim holds, this happens with probability < 1e-6 per check, so it is a real refutation,
# not noise (and the seeded generator makes every run identical anyway).
ALPHA = 1e-6
DATA = Path(__file__).resolve().parents[1] / "data" / "orlib"


def _not_refuted(hits: int, trials: int, p_claim: float) -> bool:
    return hits == 0 or stats.binom.sf(hits - 1, trials, min(p_claim, 1.0)) >= ALPHA


def _mixed(seed: int, n: int = 60, m_pack: int = 4, m_cover: int = 4, density: float = 0.5) -> tuple[Problem, np.ndarray]:
    """Binary variables, packing rows nearly tight and covering rows just met at a fractional point."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.05, 0.95, n)
    A = rng.uniform(0.2, 1.0, (m_pack, n)) * (rng.random((m_pack, n)) < density)
    C = rng.uniform(0.2, 1.0, (m_cover, n)) * (rng.random((m_cover, n)) < density)
    prob = Problem(c=rng.uniform(1, 10, n), A=A, b=A @ x, C=C, d=C @ x, upper=np.ones(n))
    return prob, x


def _structured(seed: int) -> tuple[Problem, np.ndarray]:
    """Exact choice groups (with members), an exact-sum row, free variables, and packing/covering rows over all."""
    rng = np.random.default_rng(seed)
    n_groups, k = 6, 3
    ind = np.arange(n_groups * k)
    members = n_groups * k + np.arange(n_groups * k * 2).reshape(n_groups * k, 2)
    pip = members.max() + 1 + np.arange(8)
    free = pip.max() + 1 + np.arange(10)
    n = free.max() + 1
    x = np.zeros(n)
    y = rng.dirichlet(np.ones(k), n_groups).ravel()
    x[ind] = y
    x[members] = y[:, None] * rng.uniform(0, 1, (n_groups * k, 2))
    x[pip] = 3 * rng.dirichlet(np.ones(8))
    while x[pip].max() > 1:  # an exact-sum row needs marginals in [0, 1] summing to 3
        x[pip] = 3 * rng.dirichlet(np.ones(8))
    x[free] = rng.uniform(0, 1, free.size)
    groups = [ChoiceGroup(tuple(Option(int(ind[g * k + o]), members[g * k + o]) for o in range(k)), exact=True)
              for g in range(n_groups)]
    A = rng.uniform(0.2, 1.0, (3, n)) * (rng.random((3, n)) < 0.6)
    C = rng.uniform(0.2, 1.0, (3, n)) * (rng.random((3, n)) < 0.6)
    G = np.zeros((1, n))
    G[0, pip] = 1.0
    prob = Problem(c=rng.uniform(1, 10, n), A=A, b=A @ x, C=C, d=C @ x, G=G, g_lo=[3.0], g_hi=[3.0],
                   upper=np.ones(n), groups=groups)
    return prob, x


def test_chernoff_dominates_exact_binomial_tails() -> None:
    for n, p in ((50, 0.1), (200, 0.3), (30, 0.5)):
        mu = n * p
        for t in range(int(mu) + 1, n + 1, 3):
            assert stats.binom.sf(t - 1, n, p) <= chernoff(mu, t, upper=True) + 1e-15
        for t in range(0, int(np.ceil(mu))):
            assert stats.binom.cdf(t, n, p) <= chernoff(mu, t, upper=False) + 1e-15
    assert chernoff(3.0, 2.0 * 3.0, upper=True) == pytest.approx(np.exp(3.0 - 3.0 * 2 * np.log(2)))
    assert chernoff(0.0, 1.0, upper=True) == 0.0 and chernoff(2.0, 0.0, upper=False) == pytest.approx(np.exp(-2.0))
    assert chernoff(2.0, 2.0, upper=True) == 1.0 == chernoff(2.0, 2.0, upper=False)  # no information at the mean


def test_chernoff_answers_only_the_tail_it_is_asked_for() -> None:
    # Below the mean the upper tail is not small (P[Bin(200, .5) >= 90] = 0.92): the bound must say 1, not
    # the lower tail's exp(-...) -- and above the mean, likewise for the lower tail.
    assert chernoff(100.0, 90.0, upper=True) == 1.0 and stats.binom.sf(89, 200, 0.5) > 0.9
    assert chernoff(100.0, 110.0, upper=False) == 1.0
    assert chernoff(100.0, 90.0, upper=False) < 0.7 and chernoff(100.0, 110.0, upper=True) < 0.7
    assert chernoff(2.0, -1.0, upper=False) == 0.0  # a non-negative sum is never below a negative threshold
    np.testing.assert_array_equal(chernoff(np.array([5.0, 5.0]), np.array([3.0, 7.0]), upper=True) == 1.0,
                                  [True, False])


@pytest.mark.parametrize("width,rows", [(1.0, 5), (4.0, 30), (50.0, 100)])
def test_width_scale_is_the_largest_scale_meeting_the_budget(width: float, rows: int) -> None:
    s = width_scale(width, rows, 0.25, cover=False)
    assert 0 < s <= 1 and rows * chernoff(s * width, width, upper=True) <= 0.25 + 1e-12
    if s < 1:
        assert rows * chernoff(min(1.0, s * 1.01) * width, width, upper=True) > 0.25
    c = width_scale(width, rows, 0.25, cover=True)
    assert c >= 1 and rows * chernoff(c * width, width, upper=False) <= 0.25 + 1e-12
    if c > 1:
        assert rows * chernoff(c * 0.99 * width, width, upper=False) > 0.25


@pytest.mark.parametrize("width", [0.3, 0.05, 1e-3, 1e-9])
def test_width_scale_is_never_zero(width: float) -> None:
    assert width_scale(width, 1, 0.25, cover=False) > 0


def test_small_capacity_rounds_unscaled_instead_of_raising() -> None:
    # The example: capacity 0.05 of a row whose largest coefficient is 1.
    prob = Problem(c=[1, 1, 1], sense="max", A=[[1, .01, .01]], b=[0.05], upper=[1, 1, 1])
    res = solve_rounding(prob)
    assert res.status is Status.FEASIBLE and res.guarantee.scale_pack > 0


def test_integer_variable_never_rounds_above_the_floor_of_its_upper_bound() -> None:
    # x0 free (upper 2.5), x1 indicator and x2 its member (upper 2.5, conditional target 2.5), and a packing
    # row x0 <= 2.5 that the statement must not call broken: rounding 2.5 up to 3 would break both.
    groups = [ChoiceGroup((Option(1, np.array([2])),))]
    prob = Problem(c=[1.0, 0.0, 1.0], sense="max", A=[[1.0, 0, 0], [0, 0, 1.0]], b=[2.5, 2.5],
                   upper=[2.5, 1, 2.5], groups=groups)
    for x_lp in (np.array([2.5, 0.5, 1.25]), np.array([2.3, 1.0, 2.4])):
        plan = plan_rounding(prob, x_lp, scale=1.0)
        X = round_trials(plan, 2000, np.random.default_rng(0))
        assert X[:, 0].max() <= 2 and X[:, 2].max() <= 2
        g = compute_guarantee(prob, plan, prob.objective(x_lp), trials=1)
        assert g.p_pack == 0.0 and g.delta_pack == 0.0  # both rows hold in every trial, as stated
        x_d, _, _ = round_derandomized(prob, plan, event_rows(prob, plan, g))
        assert x_d[0] <= 2 and x_d[2] <= 2 and round_most_likely(plan)[[0, 2]].max() <= 2


def test_independent_rounding_keeps_marginals_and_scales_one_sided_variables() -> None:
    rng = np.random.default_rng(1)
    n = 40
    x = rng.uniform(0, 3, n)
    A = sp.random_array((3, 20), density=0.8, rng=rng) + 0.0
    A = sp.hstack([A, sp.csr_array((3, 20))])
    C = sp.hstack([sp.csr_array((2, 20)), sp.random_array((2, 20), density=0.8, rng=rng)])
    prob = Problem(c=np.ones(n), A=A, b=A @ x + 1, C=C, d=C @ x, upper=np.full(n, 3.0))
    plan = plan_rounding(prob, x, scale=(0.5, 1.5))
    in_a, in_c = np.diff(prob.A.tocsc().indptr) > 0, np.diff(prob.C.tocsc().indptr) > 0
    factor = np.where(in_a, 0.5, np.where(in_c, 1.5, 1.0))  # a variable in no row keeps its value
    expected = np.minimum(factor * x, 3.0)
    np.testing.assert_allclose(plan.marginal, expected)
    X = round_trials(plan, N_MC, np.random.default_rng(0))
    assert np.all(X == np.round(X)) and np.all((X >= np.floor(expected)) & (X <= np.ceil(expected)))
    se = np.sqrt(np.maximum((expected - np.floor(expected)) * (np.ceil(expected) - expected), 1e-12) / N_MC)
    assert np.all(np.abs(X.mean(axis=0) - expected) <= 5 * se + 1e-12)


def test_dependent_rounding_keeps_marginals_sums_and_groups() -> None:
    prob, x = _structured(3)
    plan = plan_rounding(prob, x, scale=1.0)
    X = round_trials(plan, N_MC, np.random.default_rng(5))
    # Every trial: exactly one option per group, members only under the chosen option, row sum exactly 3.
    R, lo, hi = prob.implied_rows()
    act = (R @ X.T).T
    assert np.all(act <= hi + 1e-9) and np.all(act >= lo - 1e-9)
    assert np.all((prob.G @ X.T) == 3.0)
    assert np.all(X == np.round(X))
    se = np.sqrt(np.maximum(plan.marginal * (1 - plan.marginal), 1e-12) / N_MC)
    np.testing.assert_allclose(plan.marginal, x, atol=1e-9)
    assert np.all(np.abs(X.mean(axis=0) - x) <= 5 * se + 1e-12)


def _cover(seed: int, n: int = 40, m: int = 5) -> tuple[Problem, np.ndarray]:
    """Binary variables, integer covering coefficients, every row just met at a fractional point."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.1, 0.9, n)
    C = rng.integers(1, 4, (m, n)) * (rng.random((m, n)) < 0.4)
    return Problem(c=rng.uniform(1, 5, n), C=C, d=C @ x, upper=np.ones(n)), x


def _one_sided(side: str) -> tuple[Problem, np.ndarray]:
    """Packing-only or covering-only, so the width scale is applied (down for packing, up for covering)."""
    rng = np.random.default_rng(21)
    n, m = 80, 12
    x = rng.uniform(0.05, 0.6, n)
    M = rng.uniform(0.2, 1.0, (m, n)) * (rng.random((m, n)) < 0.3)
    kw = dict(A=M, b=M @ x) if side == "pack" else dict(C=M, d=M @ x)
    return Problem(c=rng.uniform(1, 5, n), upper=np.ones(n), **kw), x


def _lp(problem: Problem) -> np.ndarray:
    return solve_lp(problem).x


def _case(name: str) -> tuple[Problem, np.ndarray, str | float]:
    """(problem, LP point, scale) of each Monte-Carlo case: random mixed, structured, covering, one-sided,
    and OR-Library GAP (choice groups) and MKP (width-scaled) instances."""
    kind, _, arg = name.partition("-")
    if kind == "gap":
        prob = read_gap(DATA / "gap" / "gap1.txt")[int(arg)]
        return prob, _lp(prob), "width"
    if kind == "mkp":
        prob = read_mknap1(DATA / "mkp" / "mknap1.txt")[int(arg)][0]
        return prob, _lp(prob), "width"
    if kind == "onesided":
        return (*_one_sided(arg), "width")
    maker = {"mixed": _mixed, "structured": _structured, "cover": _cover}[kind]
    return (*maker(int(arg)), 1.0)


def _claims(prob: Problem, plan, g, ev) -> list[tuple[str, float, int, bool]]:
    """Every probability the guarantee states, with the Monte-Carlo count of its event in N_MC trials:
    (what, claim, hits, tight).  ``tight`` marks claims computed from exact tails (rows of independent
    units, lattice values exact or rounded, union/Harris over them): those a 2x optimistic claim must fail.
    Rows with exact-sum-row coins get the stop-loss bound, sound but up to ~2.5x above the truth."""
    X = round_trials(plan, N_MC, np.random.default_rng(11))
    hit = ev.sign * np.asarray((ev.H @ X.T).T) >= ev.sign * ev.t
    exact = np.array([r in ev.lattice and not ev.lattice[r].dependent for r in range(ev.t.size)], dtype=bool)
    if g.objective_method == "markov":
        exact[ev.family == 2] = False
    out = [(f"row {r} (family {ev.family[r]})", float(ev.bound[r]), int(hit[:, r].sum()), bool(exact[r]))
           for r in range(ev.t.size)]
    for fam, claim in ((0, g.p_pack), (1, g.p_cover), (2, g.p_objective)):
        rows = ev.family == fam
        out.append((f"family {fam}", claim, int(hit[:, rows].any(axis=1).sum()), bool(exact[rows].all())))
    return out


def _refuted(hits: int, claim: float) -> bool:
    return not _not_refuted(hits, N_MC, claim)


CASES = ["mixed-0", "mixed-7", "cover-3", "structured-2", "gap-0", "gap-1", "gap-2", "mkp-4", "mkp-6",
         "onesided-pack", "onesided-cover"]


@pytest.mark.parametrize("name", CASES)
def test_stated_probabilities_hold_and_are_tight(name: str) -> None:
    """No stated probability is refuted by 20,000 trials; every exact one in [0.05, 0.5] is within 2x of
    the truth (half of it is refuted), so a bound 2x too optimistic would fail here."""
    prob, x, scale = _case(name)
    plan = plan_rounding(prob, x, scale=scale)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=1)
    ev = event_rows(prob, plan, g)
    claims = _claims(prob, plan, g, ev)
    assert not [c for c in claims if _refuted(c[2], c[1])]
    band = [c for c in claims if c[3] and 0.05 <= c[1] <= 0.5]
    assert all(_refuted(hits, claim / 2) for _, claim, hits, _ in band), band
    if not name.startswith(("structured", "onesided")):  # these two check soundness only (see _claims)
        assert band, "no tight claim in [0.05, 0.5]: the check would have no power on this case"
    # The events are exactly the documented thresholds on the unnormalised rows.
    X = round_trials(plan, 200, np.random.default_rng(11))
    over = (prob.A @ X.T >= (1 + g.delta_pack) * prob.b[:, None] + TOL * np.maximum(1, prob.b)[:, None]).any(axis=0)
    hit = ev.sign * np.asarray((ev.H @ X.T).T) >= ev.sign * ev.t
    assert np.array_equal(over, hit[:, ev.family == 0].any(axis=1))


@pytest.mark.parametrize("name", ["mixed-0", "cover-3", "gap-1", "mkp-4"])
def test_a_guarantee_twice_too_optimistic_is_rejected(name: str) -> None:
    """The same Monte-Carlo check, given every stated probability halved, refutes some of them: it has power."""
    prob, x, scale = _case(name)
    plan = plan_rounding(prob, x, scale=scale)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=1)
    ev = event_rows(prob, plan, g)
    half = replace(g, p_pack=g.p_pack / 2, p_cover=g.p_cover / 2, p_objective=g.p_objective / 2)
    refuted = [c for c in _claims(prob, plan, half, replace(ev, bound=ev.bound / 2)) if _refuted(c[2], c[1])]
    assert any(c[0].startswith("family") for c in refuted)


def test_objective_bound_is_not_refuted() -> None:
    prob, x = _mixed(4)
    plan = plan_rounding(prob, x, scale=1.0)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=1, targets=(0.25, 0.25, 0.05))
    X = round_trials(plan, N_MC, np.random.default_rng(2))
    worse = (X @ prob.c + prob.offset) >= g.objective_threshold
    assert g.objective_method in ("chernoff", "convolution", "markov") and g.p_objective <= 0.05 + 1e-9
    assert _not_refuted(int(worse.sum()), N_MC, g.p_objective)
    assert g.p_success == pytest.approx(max(0.0, 1 - g.p_pack - g.p_cover - g.p_objective))


@pytest.mark.parametrize("maker,seed", [(_mixed, 0), (_mixed, 9), (_structured, 4), (_structured, 8)])
def test_derandomized_rounding_is_deterministic_and_meets_its_guarantee(maker, seed: int) -> None:
    prob, x = maker(seed)
    plan = plan_rounding(prob, x, scale=1.0)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=1)
    ev = event_rows(prob, plan, g)
    x1, phi0, phi1 = round_derandomized(prob, plan, ev)
    x2, _, _ = round_derandomized(prob, plan, ev)
    assert np.array_equal(x1, x2)
    assert phi0 == pytest.approx(g.p_pack + g.p_cover + g.p_objective)  # the estimator starts at the stated bound
    assert phi1 <= phi0 + 1e-9 and phi0 < 1
    assert np.all(x1 == np.round(x1))
    assert np.all(prob.A @ x1 < (1 + g.delta_pack) * prob.b)
    assert np.all(prob.C @ x1 > (1 - g.delta_cover) * prob.d)
    assert prob.objective(x1) < g.objective_threshold
    R, lo, hi = prob.implied_rows()
    assert np.all(R @ x1 <= hi + 1e-9) and np.all(R @ x1 >= lo - 1e-9)
    if prob.G.shape[0]:
        assert np.all(prob.G @ x1 == 3.0)


def test_same_seed_same_trials() -> None:
    prob, x = _structured(1)
    plan = plan_rounding(prob, x)
    a = round_trials(plan, 50, np.random.default_rng(42))
    b = round_trials(plan, 50, np.random.default_rng(42))
    c = round_trials(plan, 50, np.random.default_rng(43))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_width_scaling_statement_reports_the_instance_numbers() -> None:
    prob, x = _mixed(5)
    plan = plan_rounding(prob, x)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=64)
    assert g.width_pack == pytest.approx(float(np.min(prob.b / prob.A.max(axis=1).toarray().ravel())))
    assert g.p_all_fail == pytest.approx((1 - g.p_success) ** 64)
    for number in (f"{g.delta_pack:.4g}", f"{g.p_pack:.4g}", "64 trials"):
        assert number in g.statement


def test_most_likely_rounding_picks_the_heaviest_option_and_rounds_its_members():
    # one group: options y0 (members x2, x3) and y1 (member x4); x5 free integer
    groups = [ChoiceGroup((Option(0, np.array([2, 3])), Option(1, np.array([4]))))]
    problem = Problem(c=np.ones(6), upper=[1, 1, 4, 4, 4, 9], groups=groups)
    x_lp = np.array([0.7, 0.3, 1.4, 0.35, 0.9, 2.6])   # conditional on y0: 2.0 and 0.5
    x = round_most_likely(plan_rounding(problem, x_lp, scale=1.0))
    assert x[0] == 1 and x[1] == 0 and x[4] == 0          # heaviest option on, the other off
    assert x[2] == 2 and x[3] in (0, 1)                   # members at their rounded conditional value
    assert x[5] == 3                                      # a free integer rounded to nearest
    assert np.array_equal(x, round_most_likely(plan_rounding(problem, x_lp, scale=1.0)))


def test_the_plan_is_the_same_whether_groups_come_as_objects_or_arrays():
    prob, x = _structured(3)
    flat = prob.flat_groups
    start = np.searchsorted(flat.group, flat.group)  # options interleaved: first of every group, second, ...
    shuffled = np.lexsort((flat.group, np.arange(flat.group.size) - start))
    back = np.empty_like(shuffled)
    back[shuffled] = np.arange(shuffled.size)
    arrays = Problem(c=prob.c, A=prob.A, b=prob.b, C=prob.C, d=prob.d, G=prob.G, g_lo=prob.g_lo, g_hi=prob.g_hi,
                     upper=prob.upper, groups=FlatGroups(flat.indicator[shuffled], flat.group[shuffled], flat.members,
                                                         back[flat.member_option], flat.exact))
    assert arrays.groups == prob.groups
    one, two = plan_rounding(prob, x), plan_rounding(arrays, x)
    for name in one.__dataclass_fields__:
        a, b = getattr(one, name), getattr(two, name)
        if sp.issparse(a):
            assert (a != b).nnz == 0
        else:
            np.testing.assert_array_equal(a, b)
