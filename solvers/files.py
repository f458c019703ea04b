"""Writing a :class:`~solvers.problem.Problem` to a file other solvers read (MPS, CPLEX LP), through HiGHS."""

from __future__ import annotations

from os import PathLike

from solvers.highs_backend import highs_instance
from solvers.problem import Problem

__all__ = ["write_mps", "write_lp"]


def write_mps(problem: Problem, path: str | PathLike[str]) -> None:
    """Write the MIP (choice groups as implied rows) as MPS through HiGHS, for other solvers to read."""
    _write(problem, path, ".mps")


def write_lp(problem: Problem, path: str | PathLike[str]) -> None:
    """Write the MIP (choice groups as implied rows) in CPLEX LP format through HiGHS."""
    _write(problem, path, ".lp")


def _write(problem: Problem, path: str | PathLike[str], suffix: str) -> None:
    # HiGHS picks the format from the file extension, so insist on the right one.
    if not str(path).endswith(suffix):
        raise ValueError(f"path {str(path)!r} must end with {suffix!r}")
    h = highs_instance(problem, relax=False, names=True)
    status = h.writeModel(str(path))
    if status.name != "kOk" and status.name != "kWarning":
        raise OSError(f"HiGHS could not write {path}: {status}")
