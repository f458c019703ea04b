"""Readers for J.E. Beasley's OR-Library files (GAP, SCP, MKP, CAP) into :class:`Problem` objects.

A reader module, not a solver: it exists so the engine can be checked against optima
nobody on this project computed.  Formats (whitespace-separated number streams, line
breaks meaningless) are described in the data folder's README; each reader says which
layout it expects.  Every reader checks the token count so a truncated or misread file
fails loudly instead of producing a different problem.
"""

from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal

import numpy as np
import scipy.sparse as sp

from solvers.problem import ChoiceGroup, Option, Problem

logger = logging.getLogger(__name__)

__all__ = [
    "Instance", "OrlibFormatError", "FAMILIES",
    "read_gap", "read_scp", "read_mknap1", "read_mknap2", "read_cap",
    "load_instances",
]

FAMILIES = ("gap", "scp", "mkp", "cap")


class OrlibFormatError(ValueError):
    """The file does not have the layout its reader expects (names the file and what was wrong)."""


@dataclass(frozen=True)
class Instance:
    """One OR-Library problem with its published optimum (None when the optima file has none)."""

    family: str
    name: str
    problem: Problem
    optimum: float | None


class _Tokens:
    """A cursor over a file's numbers, so each reader states its layout as a sequence of reads."""

    def __init__(self, text: str, source: str) -> None:
        try:
            self._values = np.array(text.split(), dtype=np.float64)
        except ValueError as exc:
            raise OrlibFormatError(f"{source}: non-numeric token ({exc})") from exc
        self._pos = 0
        self.source = source

    def take(self, count: int) -> np.ndarray:
        if self._pos + count > self._values.size:
            raise OrlibFormatError(
                f"{self.source}: expected {count} more numbers at position {self._pos}, "
                f"only {self._values.size - self._pos} left"
            )
        out = self._values[self._pos:self._pos + count]
        self._pos += count
        return out

    def take_int(self, count: int = 1) -> np.ndarray:
        vals = self.take(count)
        if not np.array_equal(vals, np.round(vals)):
            raise OrlibFormatError(f"{self.source}: expected integers near position {self._pos}, got {vals}")
        return vals.astype(np.int64)

    def done(self) -> None:
        if self._pos != self._values.size:
            raise OrlibFormatError(f"{self.source}: {self._values.size - self._pos} unread numbers at the end")


def _read(path: Path) -> str:
    return Path(path).read_text(encoding="ascii", errors="strict")


def _gap_problem(cost: np.ndarray, weight: np.ndarray, cap: np.ndarray, name: str,
                 sense: str, assignment: str) -> Problem:
    """x[i*n + j] = 1 iff agent i does job j; capacities are packing rows, each job is assigned exactly once."""
    m, n = cost.shape
    var = np.arange(m * n).reshape(m, n)
    A = sp.csr_array((weight.ravel(), (np.repeat(np.arange(m), n), var.ravel())), shape=(m, m * n))
    common = dict(c=cost.ravel(), sense=sense, A=A, b=cap, upper=np.ones(m * n), name=name,
                  var_names=[f"x[{i},{j}]" for i in range(m) for j in range(n)],
                  pack_names=[f"agent{i}" for i in range(m)])
    if assignment == "groups":
        empty = np.zeros(0, dtype=np.int64)
        groups = [ChoiceGroup(tuple(Option(int(var[i, j]), empty) for i in range(m)), exact=True) for j in range(n)]
        return Problem(**common, groups=groups)
    G = sp.csr_array((np.ones(m * n), (np.tile(np.arange(n), m), var.ravel())), shape=(n, m * n))
    return Problem(**common, G=G, g_lo=np.ones(n), g_hi=np.ones(n), general_names=[f"job{j}" for j in range(n)])


def read_gap(path: str | Path, *, sense: Literal["min", "max"] = "min",
             assignment: Literal["groups", "rows"] = "groups") -> list[Problem]:
    """All problems of a gapN.txt file: ``P``, then per problem ``m n``, cost (m×n), resource (m×n), capacity (m).

    ``assignment="groups"`` states "each job to exactly one agent" as exact choice groups,
    ``"rows"`` as general equality rows; the two are the same integer program.
    """
    path = Path(path)
    tok = _Tokens(_read(path), str(path))
    out = []
    for p in range(int(tok.take_int()[0])):
        m, n = (int(v) for v in tok.take_int(2))
        cost = tok.take(m * n).reshape(m, n)
        weight = tok.take(m * n).reshape(m, n)
        cap = tok.take(m)
        out.append(_gap_problem(cost, weight, cap, f"{path.stem}-{p + 1}", sense, assignment))
    tok.done()
    return out


def read_scp(path: str | Path) -> Problem:
    """A set-covering file: ``m n``, n column costs, then per row ``k`` and k column indices (1-based)."""
    path = Path(path)
    tok = _Tokens(_read(path), str(path))
    m, n = (int(v) for v in tok.take_int(2))
    cost = tok.take(n)
    rows, cols = [], []
    for i in range(m):
        k = int(tok.take_int()[0])
        idx = tok.take_int(k) - 1
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise OrlibFormatError(f"{path}: row {i} names a column outside 1..{n}")
        rows.append(np.full(k, i))
        cols.append(idx)
    tok.done()
    r, c = np.concatenate(rows), np.concatenate(cols)
    C = sp.csr_array((np.ones(r.size), (r, c)), shape=(m, n))
    return Problem(c=cost, sense="min", C=C, d=np.ones(m), upper=np.ones(n), name=path.stem)


def _mkp_problem(profit: np.ndarray, weight: np.ndarray, cap: np.ndarray, name: str) -> Problem:
    return Problem(c=profit, sense="max", A=sp.csr_array(weight), b=cap, upper=np.ones(profit.size), name=name)


def read_mknap1(path: str | Path) -> list[tuple[Problem, float]]:
    """mknap1 layout: ``K``, then per problem ``n m opt``, n profits, m rows of n weights, m capacities."""
    path = Path(path)
    tok = _Tokens(_read(path), str(path))
    out = []
    for p in range(int(tok.take_int()[0])):
        n, m = (int(v) for v in tok.take_int(2))
        opt = float(tok.take(1)[0])
        profit = tok.take(n)
        weight = tok.take(m * n).reshape(m, n)
        cap = tok.take(m)
        out.append((_mkp_problem(profit, weight, cap, f"mknap1-{p + 1}"), opt))
    tok.done()
    return out


_MKNAP2_HEADER = re.compile(r"^\s*problem\s+(\S+)\s*$", re.MULTILINE)
_SEPARATOR = re.compile(r"^\s*\++\s*$", re.MULTILINE)


def read_mknap2(path: str | Path) -> list[tuple[Problem, float]]:
    """mknap2 layout: per problem a ``problem NAME.DAT`` line between ``+++`` lines, then ``M N``,
    N profits, M capacities, M rows of N weights, the optimum; prose before the first problem is skipped."""
    path = Path(path)
    text = _read(path)
    heads = list(_MKNAP2_HEADER.finditer(text))
    if not heads:
        raise OrlibFormatError(f"{path}: no 'problem NAME' lines")
    out = []
    for k, head in enumerate(heads):
        name = head.group(1)
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[head.end():end]
        seps = list(_SEPARATOR.finditer(body))
        if not seps:
            raise OrlibFormatError(f"{path}: problem {name} lacks its '+++' line")
        data = body[seps[0].end():seps[1].start() if len(seps) > 1 else len(body)]
        tok = _Tokens(data, f"{path}:{name}")
        m, n = (int(v) for v in tok.take_int(2))
        profit = tok.take(n)
        cap = tok.take(m)
        weight = tok.take(m * n).reshape(m, n)
        opt = float(tok.take(1)[0])
        tok.done()
        out.append((_mkp_problem(profit, weight, cap, name.removesuffix(".DAT")), opt))
    return out


def read_cap(path: str | Path) -> Problem:
    """Capacitated warehouse location: ``m n``; per warehouse capacity, fixed cost; per customer demand
    and m costs of serving all of its demand from each warehouse.

    Variables: y_i (open warehouse i, binary) first, then x_ij (fraction of customer j's demand served
    by i, continuous in [0, 1]).  Rows: sum_i x_ij = 1 and the linking rows x_ij <= y_i and
    sum_j d_j x_ij <= s_i y_i, which have a negative coefficient and so are general rows: CAP is not a
    pure packing-covering program.
    """
    path = Path(path)
    tok = _Tokens(_read(path), str(path))
    m, n = (int(v) for v in tok.take_int(2))
    wh = tok.take(2 * m).reshape(m, 2)
    cap, fixed = wh[:, 0], wh[:, 1]
    cust = tok.take(n * (m + 1)).reshape(n, m + 1)
    tok.done()
    demand, serve = cust[:, 0], cust[:, 1:].T  # serve[i, j]
    nx = m * n
    x = m + np.arange(nx).reshape(m, n)  # column of x_ij
    rows_assign = sp.csr_array((np.ones(nx), (np.tile(np.arange(n), m), x.ravel())), shape=(n, m + nx))
    link_r = np.arange(nx)
    link = sp.csr_array((np.concatenate((np.ones(nx), -np.ones(nx))),
                         (np.concatenate((link_r, link_r)), np.concatenate((x.ravel(), np.repeat(np.arange(m), n))))),
                        shape=(nx, m + nx))
    cap_rows = sp.csr_array((np.concatenate((np.tile(demand, m), -cap)),
                             (np.concatenate((np.repeat(np.arange(m), n), np.arange(m))),
                              np.concatenate((x.ravel(), np.arange(m))))), shape=(m, m + nx))
    G = sp.vstack([rows_assign, link, cap_rows], format="csr")
    g_lo = np.concatenate((np.ones(n), np.full(nx + m, -np.inf)))
    g_hi = np.concatenate((np.ones(n), np.zeros(nx + m)))
    integer = np.concatenate((np.ones(m, dtype=bool), np.zeros(nx, dtype=bool)))
    return Problem(c=np.concatenate((fixed, serve.ravel())), sense="min", G=G, g_lo=g_lo, g_hi=g_hi,
                   upper=np.ones(m + nx), integer=integer, name=path.stem)


def _gap_optima(folder: Path) -> dict[tuple[str, int], dict[str, float]]:
    with open(folder / "optima.csv", newline="", encoding="ascii") as fh:
        return {(row["file"], int(row["index"])): {k: float(row[k]) for k in ("opt_min", "opt_max")}
                for row in csv.DictReader(fh)}


def _simple_optima(path: Path) -> dict[str, float]:
    out = {}
    if path.suffix == ".csv":
        with open(path, newline="", encoding="ascii") as fh:
            for row in csv.DictReader(fh):
                out[Path(row["file"]).stem] = float(row["opt"])
        return out
    for line in path.read_text(encoding="ascii").splitlines():
        parts = line.split()
        if len(parts) == 2 and not line.startswith("#"):
            out[parts[0]] = float(parts[1])
    return out


def _natural(path: Path) -> tuple[str, int]:
    match = re.match(r"(\D*)(\d*)", path.stem)
    return (match.group(1), int(match.group(2) or 0)) if match else (path.stem, 0)


def load_instances(root: str | Path, family: str, *, sense: Literal["min", "max"] = "min",
                   assignment: Literal["groups", "rows"] = "groups") -> Iterator[Instance]:
    """Every instance of one family under ``root`` (the folder holding gap/, scp/, mkp/, cap/), with its
    optimum.  ``sense`` and ``assignment`` only matter for GAP (which has optima for both senses)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    folder = Path(root) / family
    if family == "gap":
        optima = _gap_optima(folder)
        for path in sorted(folder.glob("gap*.txt"), key=_natural):
            for idx, prob in enumerate(read_gap(path, sense=sense, assignment=assignment), start=1):
                opt = optima.get((path.name, idx), {}).get(f"opt_{sense}")
                yield Instance("gap", prob.name, prob, opt)
    elif family == "scp":
        optima = _simple_optima(folder / "optima.csv")
        for path in sorted(folder.glob("scp*.txt"), key=_natural):
            yield Instance("scp", path.stem, read_scp(path), optima.get(path.stem))
    elif family == "mkp":
        for reader, fname in ((read_mknap1, "mknap1.txt"), (read_mknap2, "mknap2.txt")):
            if (folder / fname).exists():
                for prob, opt in reader(folder / fname):
                    yield Instance("mkp", prob.name, prob, opt)
    else:
        optima = _simple_optima(folder / "optima.txt")
        for path in sorted(folder.glob("cap[0-9]*.txt"), key=_natural):
            yield Instance("cap", path.stem, read_cap(path), optima.get(path.stem))
