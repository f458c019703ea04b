"""Problem construction, validation, implied rows and the feasibility checker."""

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.check import is_feasible, violations
from solvers.files import write_mps
from solvers.problem import ChoiceGroup, FlatGroups, Option, Problem, ProblemError

BASE = dict(c=[1.0, 2.0, 3.0], A=[[1, 1, 0]], b=[1.0], C=[[0, 1, 1]], d=[1.0])


def grouped(**extra):
    """Variables: x0, x1 members of option y3; x2 member of option y4."""
    kwargs = dict(c=[1, 2, 3, 0, 0], upper=[2, 1, 3, 1, 1],
                  groups=[ChoiceGroup((Option(3, np.array([0, 1])), Option(4, np.array([2]))), exact=True)])
    kwargs.update(extra)
    return kwargs


def with_(**changes):
    kwargs = dict(BASE)
    kwargs.update(changes)
    return kwargs


@pytest.mark.parametrize("kwargs, match", [
    (with_(c=[1.0, np.nan, 0.0]), r"c\[1\] is NaN"),
    (with_(c=[1.0, np.inf, 0.0]), r"c\[1\] is not finite"),
    (with_(c=[[1.0, 2.0, 3.0]]), r"c: must be 1-D"),
    (with_(sense="minimize"), r"sense: must be 'min' or 'max'"),
    (with_(offset=np.inf), r"offset: must be finite"),
    (with_(A=[[1, 1]]), r"A: has 2 columns but c has 3"),
    (with_(b=[1.0, 2.0]), r"b: expected length 1, got 2"),
    (with_(b=None), r"b: required because A has 1 rows"),
    (with_(A=[[1, -1, 0]]), r"A\[row 0, column 1\] = -1\.0 < 0: packing"),
    (with_(A=[[1, np.inf, 0]]), r"A\[row 0, column 1\] = inf is not finite"),
    (with_(A=[[1, np.nan, 0]]), r"A\[row 0, column 1\] = nan is not finite"),
    (with_(b=[-1.0]), r"b\[row 0\] = -1\.0 < 0"),
    (with_(b=[np.inf]), r"b\[0\] is not finite"),
    (with_(C=[[0, 1, -2]]), r"C\[row 0, column 2\] = -2\.0 < 0: covering"),
    (with_(d=[-0.5]), r"d\[row 0\] = -0\.5 < 0"),
    (with_(C=[[0, 0, 0]], d=[1.0]), r"C\[row 0\] is all zero but d = 1\.0 > 0"),
    (with_(G=[[1, -1, 0]]), r"G: given without g_lo or g_hi"),
    (with_(G=[[1, -1, np.inf]], g_hi=[0]), r"G\[row 0, column 2\] = inf is not finite"),
    (with_(G=[[1, -1, 0]], g_lo=[2.0], g_hi=[1.0]), r"general row 0: g_lo = 2\.0 > g_hi = 1\.0"),
    (with_(G=[[1, -1, 0]], g_lo=[np.inf]), r"g_lo\[row 0\] = inf"),
    (with_(G=[[1, -1, 0]], g_hi=[-np.inf]), r"g_hi\[row 0\] = -inf"),
    (with_(G=[[0, 0, 0]], g_lo=[1.0]), r"G\[row 0\] is all zero but 0 is outside"),
    (with_(upper=[1.0, -1.0, 1.0]), r"upper\[1\] = -1\.0 < 0"),
    (with_(upper=[1.0, np.nan, 1.0]), r"upper\[1\] is NaN"),
    (with_(integer=[True, False]), r"integer: expected shape \(3,\)"),
    (with_(integer=[0, 2, 1]), r"integer: must be a boolean mask"),
    (with_(var_names=["a", "b"]), r"var_names: expected 3 names, got 2"),
    (with_(pack_names=["p", "q"]), r"pack_names: expected 1 names, got 2"),
    (grouped(upper=[2, 1, 3, 2, 1]), r"options\[0\]: indicator 3 must be integer with upper bound 1"),
    (grouped(integer=[True, True, True, False, True]), r"indicator 3 must be integer"),
    (grouped(upper=[2, np.inf, 3, 1, 1]), r"member 1 needs a finite upper bound"),
    (grouped(groups=[ChoiceGroup((Option(3, [0]), Option(4, [0])))]), r"options\[1\]: variable 0 already appears"),
    (grouped(groups=[ChoiceGroup((Option(3, [0]),)), ChoiceGroup((Option(4, [0]),))]),
     r"groups\[1\]\.options\[0\]: variable 0 already appears"),
    (grouped(groups=[ChoiceGroup((Option(3, [0, 0]),))]), r"variable 0 already appears"),
    (grouped(groups=[ChoiceGroup((Option(3, [3]),))]), r"variable 3 already appears"),
    (grouped(groups=[ChoiceGroup((Option(7, [0]),))]), r"indicator 7 out of range"),
    (grouped(groups=[ChoiceGroup((Option(3, [9]),))]), r"member index out of range"),
    (grouped(groups=[ChoiceGroup(())]), r"groups\[0\]: has no options"),
    (grouped(groups=["not a group"]), r"groups\[0\]: expected ChoiceGroup"),
])
def test_construction_errors(kwargs, match):
    with pytest.raises(ProblemError, match=match):
        Problem(**kwargs)


def test_option_members_must_be_integers():
    with pytest.raises(ProblemError, match=r"members must be a 1-D integer array"):
        Option(0, np.array([0.5]))


def test_error_messages_use_names():
    with pytest.raises(ProblemError, match=r"A\[row 0 \('cap'\), column 1 \('y'\)\] = -1\.0"):
        Problem(c=[1, 1], A=[[1, -1]], b=[1], var_names=["x", "y"], pack_names=["cap"])
    with pytest.raises(ProblemError, match=r"C\[row 1 \('need'\)\] is all zero"):
        Problem(c=[1, 1], C=[[1, 1], [0, 0]], d=[1, 2], cover_names=["ok", "need"])


def test_dense_and_sparse_inputs_normalise_identically():
    dense = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]
    # COO with a duplicate entry (summed) and an explicit zero (eliminated), unsorted.
    coo = sp.coo_array(([3.0, 2.0, 0.0, 0.5, 0.5], ([1, 0, 0, 0, 0], [2, 2, 1, 0, 0])), shape=(2, 3))
    variants = [dense, np.array(dense), sp.csr_matrix(dense), sp.csc_array(dense), coo]
    problems = [Problem(c=[1, 1, 1], A=v, b=[4, 4]) for v in variants]
    for p in problems:
        assert isinstance(p.A, sp.csr_array)
        assert p.A.dtype == np.float64 and p.A.has_sorted_indices
        assert p.A.nnz == 3
        np.testing.assert_array_equal(p.A.indptr, [0, 2, 3])
        np.testing.assert_array_equal(p.A.indices, [0, 2, 2])
        np.testing.assert_array_equal(p.A.data, [1.0, 2.0, 3.0])


def test_defaults_and_empty_blocks():
    p = Problem(c=[1, 2])
    assert p.n == 2 and p.sense == "min" and p.offset == 0.0
    assert p.integer.dtype == bool and p.integer.all()
    assert np.isinf(p.upper).all()
    for mat in (p.A, p.C, p.G):
        assert mat.shape == (0, 2)
    M, lo, hi = p.all_rows()
    assert M.shape == (0, 2) and lo.size == hi.size == 0


def test_zero_rows_that_always_hold_are_kept():
    # Kept (not dropped) so row indices, names and duals line up with the caller's data.
    p = Problem(c=[1, 1], A=[[0, 0], [1, 1]], b=[0, 1], C=[[0, 0]], d=[0], G=[[0, 0]], g_lo=[-1], g_hi=[1])
    assert p.A.shape == (2, 2) and p.C.shape == (1, 2) and p.G.shape == (1, 2)
    assert is_feasible(p, [0, 0])


def test_read_only_after_construction():
    p = Problem(**BASE)
    with pytest.raises(AttributeError, match="read-only"):
        p.c = np.zeros(3)
    with pytest.raises(ValueError):
        p.c[0] = 5.0
    with pytest.raises(ValueError):
        p.A.data[0] = 5.0


def test_caller_arrays_are_not_aliased():
    c = np.array([1.0, 2.0, 3.0])
    p = Problem(c=c)
    c[0] = 99.0
    assert p.c[0] == 1.0


def test_implied_rows():
    p = Problem(**grouped())
    R, lo, hi = p.implied_rows()
    expected = np.array([
        [0, 0, 0, 1, 1],    # y3 + y4 == 1 (exact group)
        [1, 0, 0, -2, 0],   # x0 <= 2 * y3
        [0, 1, 0, -1, 0],   # x1 <= 1 * y3
        [0, 0, 1, 0, -3],   # x2 <= 3 * y4
    ])
    np.testing.assert_array_equal(R.toarray(), expected)
    np.testing.assert_array_equal(lo, [1, -np.inf, -np.inf, -np.inf])
    np.testing.assert_array_equal(hi, [1, 0, 0, 0])
    p2 = Problem(**grouped(groups=[ChoiceGroup((Option(3, [0]), Option(4, [])))]))
    R2, lo2, hi2 = p2.implied_rows()
    np.testing.assert_array_equal(R2.toarray(), [[0, 0, 0, 1, 1], [1, 0, 0, -2, 0]])
    assert lo2[0] == -np.inf and hi2[0] == 1  # at most one


def test_all_rows_stacks_in_order():
    p = Problem(**grouped(A=[[1, 1, 0, 0, 0]], b=[2], C=[[0, 1, 1, 0, 0]], d=[1],
                          G=[[1, -1, 0, 0, 0]], g_lo=[-1], g_hi=[1]))
    M, lo, hi = p.all_rows()
    assert M.shape == (7, 5) and isinstance(M, sp.csr_array)
    sl = p.row_slices
    assert (sl["pack"], sl["cover"], sl["general"], sl["implied"]) == (slice(0, 1), slice(1, 2), slice(2, 3), slice(3, 7))
    np.testing.assert_array_equal(lo[:3], [-np.inf, 1, -1])
    np.testing.assert_array_equal(hi[:3], [2, np.inf, 1])
    np.testing.assert_array_equal(M[[2]].toarray(), [[1, -1, 0, 0, 0]])
    R = p.implied_rows()[0]
    np.testing.assert_array_equal(M[3:].toarray(), R.toarray())
    assert len(p.row_names()) == 7 and p.row_names()[3] == "group0"


def test_objective_includes_offset():
    p = Problem(c=[1, 2], offset=10.0, sense="max")
    assert p.objective([1, 1]) == 13.0
    with pytest.raises(ProblemError, match=r"x: expected shape \(2,\)"):
        p.objective([1, 1, 1])


def test_violations_report_every_kind():
    p = Problem(c=[1, 1, 1, 0, 0], A=[[1, 1, 0, 0, 0]], b=[1], C=[[0, 0, 1, 0, 0]], d=[1],
                G=[[1, -1, 0, 0, 0]], g_lo=[0], g_hi=[0], upper=[2, 1, 3, 1, 1],
                groups=[ChoiceGroup((Option(3, [0, 1]), Option(4, [2])))],
                pack_names=["cap"], cover_names=["need"], general_names=["bal"])
    assert is_feasible(p, [0, 0, 1, 0, 1])
    x = [1.5, 0, 0, 0, 0.5]
    kinds = {(v.kind, v.row, v.name) for v in violations(p, x)}
    assert kinds == {("pack", 0, "cap"), ("cover", 0, "need"), ("general", 0, "bal"),
                     ("implied", 1, None), ("integrality", 0, None), ("integrality", 4, None)}
    pack = next(v for v in violations(p, x) if v.kind == "pack")
    assert (pack.lhs, pack.rhs, pack.amount) == (1.5, 1.0, 0.5)
    assert not any(v.kind == "integrality" for v in violations(p, x, integrality=False))
    bounds = violations(p, [3, 0, 0, 0, 0])
    assert ("bound", 0, 3.0, 2.0) in {(v.kind, v.row, v.lhs, v.rhs) for v in bounds}
    assert [v.kind for v in violations(p, [np.nan, 0, 1, 0, 1])] == ["bound"]


def test_violation_tolerance_scales_with_rhs():
    p = Problem(c=[1], A=[[1]], b=[1e6], integer=[False])
    assert is_feasible(p, [1e6 + 0.5], tol=1e-6)       # within 1e-6 * 1e6
    assert not is_feasible(p, [1e6 + 2.0], tol=1e-6)
    q = Problem(c=[1], A=[[1]], b=[0.5], integer=[False])
    assert is_feasible(q, [0.5 + 5e-7]) and not is_feasible(q, [0.5 + 2e-6])


def test_write_mps_rejects_wrong_extension(tmp_path):
    with pytest.raises(ValueError, match=r"must end with '\.mps'"):
        write_mps(Problem(**BASE), tmp_path / "model.lp")


def _same_problem(p: Problem, q: Problem) -> None:
    assert p.groups == q.groups
    for a, b in zip(p.implied_rows(), q.implied_rows()):
        np.testing.assert_array_equal(a.toarray() if sp.issparse(a) else a, b.toarray() if sp.issparse(b) else b)
    for field in ("indicator", "group", "members", "member_option", "exact"):
        np.testing.assert_array_equal(getattr(p.flat_groups, field), getattr(q.flat_groups, field))


def test_flat_groups_are_the_same_groups_as_choice_group_objects():
    """Options given out of group order (and members out of option order) come back sorted."""
    objects = Problem(**grouped(c=[1, 2, 3, 0, 0, 0, 0], upper=[2, 1, 3, 1, 1, 1, 1], groups=[
        ChoiceGroup((Option(3, [0, 1]), Option(4, [2])), exact=True), ChoiceGroup((Option(5, []), Option(6, [])))]))
    flat = FlatGroups(indicator=[5, 3, 6, 4], group=[1, 0, 1, 0], members=[2, 0, 1], member_option=[3, 1, 1],
                      exact=[True, False])
    arrays = Problem(**grouped(c=[1, 2, 3, 0, 0, 0, 0], upper=[2, 1, 3, 1, 1, 1, 1], groups=flat))
    _same_problem(objects, arrays)
    assert [g.exact for g in arrays.groups] == [True, False]
    assert not arrays.groups[0].options[0].members.flags.writeable
    np.testing.assert_array_equal(arrays.flat_groups.indicator, [3, 4, 5, 6])
    _same_problem(arrays, Problem(**grouped(c=[1, 2, 3, 0, 0, 0, 0], upper=[2, 1, 3, 1, 1, 1, 1],
                                            groups=arrays.flat_groups)))


@pytest.mark.parametrize("flat, match", [
    (FlatGroups([3, 4], [0, 2]), r"groups\[1\]: has no options"),
    (FlatGroups([3, 4], [0, 0], [0, 0], [0, 1]), r"groups\[0\]\.options\[1\]: variable 0 already appears"),
    (FlatGroups([3, 7], [0, 1]), r"groups\[1\]\.options\[0\]: indicator 7 out of range"),
    (FlatGroups([3], [0], [9], [0]), r"groups\[0\]\.options\[0\]: member index out of range"),
])
def test_flat_group_errors_name_the_option_as_objects_would(flat, match):
    with pytest.raises(ProblemError, match=match):
        Problem(**grouped(groups=flat))


@pytest.mark.parametrize("args, match", [
    (([3], [0, 1]), r"differ in length"),
    (([3], [-1]), r"negative group"),
    (([3], [0], [1], [2]), r"names no option"),
    (([3.5], [0]), r"FlatGroups.indicator: must be a 1-D integer array"),
    (([3], [1], None, None, [True]), r"FlatGroups.exact"),
])
def test_flat_groups_check_their_arrays(args, match):
    with pytest.raises(ProblemError, match=match):
        FlatGroups(*args)
