"""OR-Library readers: layouts, optima bookkeeping, and LP values that only a correct read reproduces."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from solvers.lp import solve_lp
from solvers.orlib import (
    OrlibFormatError, load_instances, read_cap, read_gap, read_mknap1, read_mknap2, read_scp,
)
from solvers.result import Status

DATA = Path(__file__).resolve().parents[1] / "data" / "orlib"
SHARED = Path("/work/shared/data/orlib")


def _gap_csv() -> list[dict[str, str]]:
    with open(DATA / "gap" / "optima.csv", newline="") as fh:
        return [row for row in csv.DictReader(fh) if row["file"] == "gap1.txt"]


def test_gap_layout_and_both_assignment_forms() -> None:
    groups = read_gap(DATA / "gap" / "gap1.txt")
    rows = read_gap(DATA / "gap" / "gap1.txt", assignment="rows")
    assert len(groups) == len(rows) == 5
    p, q = groups[0], rows[0]
    assert (p.n, p.A.shape, len(p.groups)) == (75, (5, 75), 15)
    assert all(g.exact and len(g.options) == 5 for g in p.groups)
    assert q.G.shape == (15, 75) and np.array_equal(q.g_lo, np.ones(15)) and np.array_equal(q.g_hi, np.ones(15))
    # First numbers of the file: cost[0][0] = 17, resource[0][0] = 8, capacity[0] = 36.
    assert p.c[0] == 17 and p.A.toarray()[0, 0] == 8 and p.b[0] == 36
    assert p.c[15] == 23  # cost[1][0]: agent-major variable order x[i*n + j]


@pytest.mark.parametrize("sense", ["min", "max"])
def test_gap_lp_values_match_the_published_ones(sense: str) -> None:
    expected = [float(row[f"lp_{sense}"]) for row in _gap_csv()]
    for assignment in ("groups", "rows"):
        for prob, lp in zip(read_gap(DATA / "gap" / "gap1.txt", sense=sense, assignment=assignment), expected):
            res = solve_lp(prob)
            assert res.status is Status.OPTIMAL
            assert res.objective == pytest.approx(lp, abs=0.006)  # the csv rounds to 2 decimals


def test_load_instances_attaches_the_optimum_of_the_sense() -> None:
    mins = list(load_instances(DATA, "gap"))
    maxs = list(load_instances(DATA, "gap", sense="max"))
    assert [i.optimum for i in mins] == [float(r["opt_min"]) for r in _gap_csv()]
    assert [i.optimum for i in maxs] == [float(r["opt_max"]) for r in _gap_csv()]
    assert mins[0].name == "gap1-1" and mins[0].problem.sense == "min" and maxs[0].problem.sense == "max"


def test_scp_reader_and_lp() -> None:
    p = read_scp(DATA / "scp" / "scp41.txt")
    assert (p.n, p.C.shape, p.A.shape[0]) == (1000, (200, 1000), 0)
    assert np.all(np.diff(p.C.indptr) > 0) and np.all(p.C.data == 1)
    assert p.c[:12].tolist() == [1.0] * 12
    (inst,) = load_instances(DATA, "scp")
    assert inst.optimum == 429
    assert solve_lp(p).objective == pytest.approx(429.0)  # scp41's LP bound equals its optimum


def test_mknap1_reader_optima_and_lp() -> None:
    probs = read_mknap1(DATA / "mkp" / "mknap1.txt")
    with open(DATA / "mkp" / "optima.csv", newline="") as fh:
        table = [r for r in csv.DictReader(fh) if r["file"] == "mknap1.txt"]
    assert len(probs) == len(table) == 7
    for (prob, opt), row in zip(probs, table):
        assert prob.sense == "max" and (prob.n, prob.A.shape[0]) == (int(row["n"]), int(row["m"]))
        assert opt == pytest.approx(float(row["opt"]))
        assert solve_lp(prob).objective == pytest.approx(float(row["lp"]), abs=0.06)
    assert probs[1][0].c[0] == pytest.approx(600.1)  # problem 2 has fractional profits


MKNAP2_SAMPLE = """ Some prose with numbers 1967 and 15:B196 that must be skipped.
 +++++++++++++++++++++++++++++
 problem TINY1.DAT
 +++++++++++++++++++++++++++++
 2 3
 10 20 30
 5 6
 1 2 3
 3 2 1

 50
 +++++++++++++++++++++++++++++
 problem TINY2.DAT
 +++++++++++++++++++++++++++++
 1 2
 7 8
 4
 2 3
 15
"""


def test_mknap2_layout_on_a_sample(tmp_path: Path) -> None:
    path = tmp_path / "mknap2.txt"
    path.write_text(MKNAP2_SAMPLE)
    (p1, o1), (p2, o2) = read_mknap2(path)
    assert (p1.name, o1, p2.name, o2) == ("TINY1", 50.0, "TINY2", 15.0)
    assert p1.c.tolist() == [10, 20, 30] and p1.b.tolist() == [5, 6]
    assert p1.A.toarray().tolist() == [[1, 2, 3], [3, 2, 1]]
    assert p2.A.toarray().tolist() == [[2, 3]]


def test_truncated_or_overlong_files_fail_loudly(tmp_path: Path) -> None:
    path = tmp_path / "mknap2.txt"
    path.write_text(MKNAP2_SAMPLE.replace(" 3 2 1\n", " 3 2\n"))
    with pytest.raises(OrlibFormatError, match="TINY1"):
        read_mknap2(path)
    gap = tmp_path / "gap.txt"
    gap.write_text((DATA / "gap" / "gap1.txt").read_text() + " 7\n")
    with pytest.raises(OrlibFormatError, match="unread"):
        read_gap(gap)
    gap.write_text("1\n 2 2\n 1 2 3")
    with pytest.raises(OrlibFormatError, match="expected 4 more numbers"):
        read_gap(gap)


def test_cap_reader_is_a_general_problem_with_known_lp() -> None:
    p = read_cap(DATA / "cap" / "cap71.txt")
    m, n = 16, 50
    assert p.n == m + m * n and p.A.shape[0] == 0 and p.C.shape[0] == 0
    assert p.G.shape == (n + m * n + m, p.n)
    assert p.integer[:m].all() and not p.integer[m:].any()
    (inst,) = load_instances(DATA, "cap")
    assert inst.optimum == pytest.approx(932615.75)
    # cap71's LP relaxation already attains the published optimum (checked against HiGHS' MIP).
    assert solve_lp(p).objective == pytest.approx(932615.75, rel=1e-9)


@pytest.mark.skipif(not SHARED.is_dir(), reason="full OR-Library folder not present")
def test_every_shared_instance_reads_with_an_optimum() -> None:
    counts = {fam: 0 for fam in ("gap", "scp", "mkp", "cap")}
    for fam in counts:
        for inst in load_instances(SHARED, fam):
            assert inst.optimum is not None, inst.name
            counts[fam] += 1
    assert counts == {"gap": 60, "scp": 10, "mkp": 55, "cap": 12}


def test_unknown_family_is_rejected() -> None:
    with pytest.raises(ValueError, match="family"):
        list(load_instances(DATA, "tsp"))
