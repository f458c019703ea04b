"""The guarantee's per-row bounds against the exact distribution of rounding (enumerated, no sampling noise).

Small instances with every kind of unit (independent coins with sure floors, a choice group with
members, an exact-sum row) are rounded in every possible way with its exact probability; each
row's stated bound must be at least the exact tail, and equal to it where the theorem says the
lattice tail is exact (rows of independent units on an exact lattice).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from solvers.guarantee import TOL, compute_guarantee, event_rows
from solvers.problem import ChoiceGroup, Option, Problem
from solvers.rounding import plan_rounding
from solvers.rounding_plan import is_frac
from solvers.lattice import Lattice
from solvers.row_tails import MgfTable, split_rows


def _pipage_outcomes(p: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """Every outcome of ``solvers.rounding._pipage`` on one row, with its probability (same scan order)."""
    out: list[tuple[float, np.ndarray]] = []

    def walk(col: int, open_l: int, open_v: float, x: np.ndarray, prob: float) -> None:
        if col == p.size:
            if open_l >= 0:
                x = x.copy()
                x[open_l] = round(open_v)
            out.append((prob, x))
            return
        b = p[col]
        if open_l >= 0 and is_frac(np.array(b)):
            a = open_v
            alpha, beta = min(1 - a, b), min(a, 1 - b)
            up, down = beta / (alpha + beta), alpha / (alpha + beta)
            step(col, open_l, a + alpha, b - alpha, x, prob * up)
            step(col, open_l, a - beta, b + beta, x, prob * down)
        else:
            step(col, open_l, open_v, b, x, prob)

    def step(col: int, open_l: int, a: float, b: float, x: np.ndarray, prob: float) -> None:
        x = x.copy()
        if open_l >= 0 and not is_frac(np.array(a)):
            x[open_l], open_l = round(a), -1
        if is_frac(np.array(b)):
            walk(col + 1, col, b, x, prob)
        else:
            x[col] = round(b)
            walk(col + 1, open_l, a, x, prob)

    walk(0, -1, 0.0, np.zeros(p.size), 1.0)
    return out


def _outcomes(plan) -> list[tuple[float, np.ndarray]]:
    """The exact distribution of one rounding trial: independent units multiplied out."""
    units: list[list[tuple[float, dict[int, float]]]] = []
    for j in plan.free:
        fl, q = np.floor(plan.marginal[j]), plan.marginal[j] - np.floor(plan.marginal[j])
        units.append([(1 - q, {j: fl}), (q, {j: fl + 1})] if is_frac(np.array(q)) else [(1.0, {j: plan.marginal[j]})])
    for g in np.unique(plan.opt_group):
        opts = np.flatnonzero(plan.opt_group == g)
        outs = []
        for k in opts:
            if plan.opt_prob[k] <= 0:
                continue
            members = np.flatnonzero(plan.mem_opt == k)
            coins = [[(1 - (c - np.floor(c)), np.floor(c)), (c - np.floor(c), np.floor(c) + 1)] if is_frac(np.array(c))
                     else [(1.0, c)] for c in plan.mem_cond[members]]
            for combo in itertools.product(*coins):
                assign = {int(plan.opt_ind[o]): float(o == k) for o in opts}
                assign.update({int(v): 0.0 for v in plan.mem_var[np.isin(plan.mem_opt, opts)]})
                assign.update({int(plan.mem_var[i]): v for i, (_, v) in zip(members, combo)})
                outs.append((plan.opt_prob[k] * np.prod([w for w, _ in combo]), assign))
        total = sum(w for w, _ in outs)
        if not plan.group_exact[g] and total < 1:
            off = np.concatenate((plan.opt_ind[opts], plan.mem_var[np.isin(plan.mem_opt, opts)]))
            outs.append((1 - total, {int(v): 0.0 for v in off}))
        units.append([(w / total, a) for w, a in outs] if plan.group_exact[g] else outs)
    for row in plan.pip_vars:
        cols = row[row >= 0]
        units.append([(w, dict(zip(cols.tolist(), x))) for w, x in _pipage_outcomes(plan.marginal[cols])])
    out = []
    for combo in itertools.product(*units):
        x = plan.marginal.copy()
        for _, assign in combo:
            for j, v in assign.items():
                x[j] = v
        out.append((float(np.prod([w for w, _ in combo])), x))
    return out


def _instance(seed: int) -> tuple[Problem, np.ndarray]:
    """Three free integers (upper 3), an exact group of two options with one member each (upper 2), an
    exact-sum row of four binaries summing to 2; two packing and two covering rows, integer coefficients."""
    rng = np.random.default_rng(seed)
    n = 11
    x = np.zeros(n)
    x[0:3] = rng.uniform(0.2, 2.8, 3)
    y = rng.uniform(0.2, 0.8)
    x[3], x[5] = y, 1 - y
    x[4], x[6] = y * rng.uniform(0.1, 1.9), (1 - y) * rng.uniform(0.1, 1.9)
    x[7:11] = 2 * rng.dirichlet(np.ones(4))
    while x[7:11].max() > 1:
        x[7:11] = 2 * rng.dirichlet(np.ones(4))
    groups = [ChoiceGroup((Option(3, np.array([4])), Option(5, np.array([6]))), exact=True)]
    A = rng.integers(0, 4, (2, n)) * (rng.random((2, n)) < 0.7)
    C = rng.integers(0, 4, (2, n)) * (rng.random((2, n)) < 0.7)
    A[0, 7:] = 0  # row 0 of each family has no exact-sum-row coin: its lattice tail is exact
    C[0, 7:] = 0
    G = np.zeros((1, n))
    G[0, 7:] = 1.0
    prob = Problem(c=rng.integers(1, 6, n).astype(float), A=A, b=A @ x, C=C, d=C @ x, G=G, g_lo=[2.0], g_hi=[2.0],
                   upper=[3, 3, 3, 1, 2, 1, 2, 1, 1, 1, 1], groups=groups)
    return prob, x


@pytest.mark.parametrize("seed", range(6))
def test_row_bounds_dominate_the_exact_tails_and_equal_them_where_exact(seed: int) -> None:
    prob, x = _instance(seed)
    plan = plan_rounding(prob, x, scale=1.0)
    outcomes = _outcomes(plan)
    w = np.array([p for p, _ in outcomes])
    X = np.array([x for _, x in outcomes])
    assert w.sum() == pytest.approx(1.0) and np.allclose(w @ X, plan.marginal)  # the enumeration is the rounding
    for mat, upper in ((prob.A, True), (prob.C, False), (prob.c.reshape(1, -1), True)):
        units = split_rows(mat, plan)
        table, lattice = MgfTable(units, upper=upper), Lattice(units, upper=upper)
        vals = np.asarray(X @ np.asarray(mat.toarray() if hasattr(mat, "toarray") else mat).T)
        for t in np.unique(vals):
            for shift in (-0.5, 0.0, 1e-6):
                tv = np.full(units.rows, t + shift)
                exact = w @ ((vals >= tv) if upper else (vals <= tv))
                cher, lat = table.bound(tv)[0], lattice.bound(tv)
                assert np.all(cher >= exact - 1e-12) and np.all(lat >= exact - 1e-12)
                independent = ~units.has_dep
                np.testing.assert_allclose(lat[independent], exact[independent], atol=1e-12)


def test_the_stated_guarantee_holds_exactly() -> None:
    """The statement's own numbers against the exact distribution: each family's failure probability at
    its stated delta is at most the stated one."""
    for seed in range(6):
        prob, x = _instance(seed)
        plan = plan_rounding(prob, x, scale=1.0)
        g = compute_guarantee(prob, plan, prob.objective(x), trials=1)
        outcomes = _outcomes(plan)
        w = np.array([p for p, _ in outcomes])
        X = np.array([x for _, x in outcomes])
        over = (X @ prob.A.T > (1 + g.delta_pack) * prob.b + TOL * np.maximum(1, prob.b)).any(axis=1)
        under = (X @ prob.C.T < (1 - g.delta_cover) * prob.d - TOL * np.maximum(1, prob.d)).any(axis=1)
        worse = X @ prob.c + prob.offset > g.objective_threshold
        assert w @ over <= g.p_pack + 1e-12 and w @ under <= g.p_cover + 1e-12 and w @ worse <= g.p_objective + 1e-12
        ev = event_rows(prob, plan, g)
        hit = ev.sign * (X @ ev.H.T.toarray()) >= ev.sign * ev.t
        assert np.all(w @ hit <= ev.bound + 1e-12)


def test_the_sure_part_goes_to_the_threshold() -> None:
    """Ten variables integral at 1 and one at 0.5, capacity 10.5: the row is 10 or 11, each with probability
    1/2, so the smallest delta with P[> (1 + delta) b] <= 1/4 is 11/10.5 - 1 = 1/21 (a Chernoff bound that
    counted the ten sure units as random would need delta > 0.5)."""
    A = np.ones((1, 11))
    x = np.append(np.ones(10), 0.5)
    prob = Problem(c=np.ones(11), sense="max", A=A, b=[10.5], upper=np.ones(11))
    g = compute_guarantee(prob, plan_rounding(prob, x, scale=1.0), 10.5, trials=1)
    assert g.delta_pack == pytest.approx(1 / 21, abs=1e-8) and g.p_pack == 0.0
    assert g.rows_convolved == 1 and g.rows_product == 1


def test_independent_rows_are_combined_by_harris_and_others_by_the_union_bound() -> None:
    rng = np.random.default_rng(3)
    n = 30
    x = rng.uniform(0.1, 0.9, n)
    A = rng.integers(1, 4, (3, n)).astype(float)
    prob = Problem(c=np.ones(n), A=A, b=A @ x, upper=np.ones(n))
    plan = plan_rounding(prob, x, scale=1.0)
    g = compute_guarantee(prob, plan, prob.objective(x), trials=1)
    ev = event_rows(prob, plan, g)
    rows = ev.family == 0
    assert ev.product[rows].all() and g.rows_product == 3
    assert g.p_pack == pytest.approx(1 - np.prod(1 - ev.bound[rows]))
    assert g.p_pack < ev.bound[rows].sum()  # Harris' product is below the union bound
    prob2, x2 = _instance(0)
    plan2 = plan_rounding(prob2, x2, scale=1.0)
    g2 = compute_guarantee(prob2, plan2, prob2.objective(x2), trials=1)
    ev2 = event_rows(prob2, plan2, g2)
    pack = ev2.family == 0
    assert not ev2.product[pack].any()  # every row of _instance meets the group or the exact-sum row
    assert g2.p_pack == pytest.approx(min(1.0, ev2.bound[pack].sum()))
