"""Column generation against the LP over every column listed, and the bound at every round."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from solvers.colgen import Column, Pricing, column_generation
from solvers.lp import solve_lp
from solvers.problem import Problem
import scipy.sparse as sp


def instance(seed: int):
    """3 blocks, each choosing a 0/1 usage pattern over 4 shared rows; cost falls with usage."""
    rng = np.random.default_rng(seed)
    patterns = [np.array(p) for p in itertools.product([0, 1], repeat=4)]
    costs = [rng.uniform(5, 10, len(patterns)) - 2 * np.array([p.sum() for p in patterns]) for _ in range(3)]
    b = rng.uniform(0.5, 2.0, 4)
    return patterns, costs, b


def full_lp(patterns, costs, b) -> float:
    cols = [(k, q) for k in range(3) for q in range(len(patterns))]
    A = np.array([patterns[q] for _, q in cols], dtype=float).T
    C = np.array([[1.0 if k == blk else 0.0 for blk, _ in cols] for k in range(3)])
    return solve_lp(Problem(c=[costs[k][q] for k, q in cols], A=A, b=b, C=C, d=np.ones(3),
                            upper=np.ones(len(cols)))).objective


@pytest.mark.parametrize("seed", range(6))
def test_converges_to_the_full_lp_and_every_round_bounds_it(seed):
    patterns, costs, b = instance(seed)
    bounds = []

    def price(pi):
        least, cols = np.zeros(3), []
        for k in range(3):
            rc = [costs[k][q] - pi @ patterns[q] for q in range(len(patterns))]
            q = int(np.argmin(rc))
            least[k] = rc[q]
            rows = np.flatnonzero(patterns[q])
            cols.append(Column(k, costs[k][q], rows, np.ones(len(rows)), q))
        bounds.append(least.sum() + pi @ b)
        return Pricing(least, cols)

    zero = int(np.flatnonzero([p.sum() == 0 for p in patterns])[0])
    initial = [Column(k, costs[k][zero], np.zeros(0, np.int64), np.zeros(0), zero) for k in range(3)]
    out = column_generation(b, 3, price, initial)
    want = full_lp(patterns, costs, b)
    assert out.converged
    assert out.lp_value == pytest.approx(want, rel=1e-7)
    assert out.bound == pytest.approx(want, rel=1e-6)
    assert all(v <= want + 1e-7 for v in bounds)
    assert len(bounds) > 1  # it needed more than the first round


def test_every_block_needs_a_start_column():
    with pytest.raises(ValueError, match="every block"):
        column_generation(np.ones(2), 2, lambda pi: Pricing(np.zeros(2), []),
                          [Column(0, 1.0, np.zeros(0, np.int64), np.zeros(0))])
