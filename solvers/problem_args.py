"""ProblemError and the checked conversions of :class:`~solvers.problem.Problem`'s arguments.

Each converter names the argument (and row/column, with the caller's names when given) in its
:class:`ProblemError`, so a bad input is reported where it came from.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["ProblemError", "check_names", "label", "check_vector", "check_matrix", "first_entry", "freeze",
           "freeze_csr"]


class ProblemError(ValueError):
    """Invalid problem data; the message names the argument/row/column and the reason."""


def check_names(arg: str, names: Sequence[str] | None, size: int) -> tuple[str, ...] | None:
    if names is None:
        return None
    names = tuple(str(s) for s in names)
    if len(names) != size:
        raise ProblemError(f"{arg}: expected {size} names, got {len(names)}")
    return names


def label(names: tuple[str, ...] | None, i: int) -> str:
    return f"{i} ({names[i]!r})" if names is not None else str(i)


def check_vector(arg: str, value: Any, size: int | None, *, default: float | None = None) -> np.ndarray:
    if value is None:
        if default is None:
            raise ProblemError(f"{arg}: required")
        value = np.full(size, default)
    try:
        arr = np.array(value, dtype=np.float64).reshape(-1) if np.ndim(value) else None
    except (TypeError, ValueError) as exc:
        raise ProblemError(f"{arg}: not convertible to a float vector ({exc})") from exc
    if arr is None:
        raise ProblemError(f"{arg}: must be a 1-D vector, got a scalar")
    if np.ndim(value) != 1:
        raise ProblemError(f"{arg}: must be 1-D, got shape {np.shape(value)}")
    if size is not None and arr.size != size:
        raise ProblemError(f"{arg}: expected length {size}, got {arr.size}")
    if np.isnan(arr).any():
        raise ProblemError(f"{arg}[{int(np.flatnonzero(np.isnan(arr))[0])}] is NaN")
    return arr


def check_matrix(arg: str, value: Any, n: int) -> sp.csr_array:
    if value is None:
        return sp.csr_array((0, n), dtype=np.float64)
    try:
        if sp.issparse(value):
            mat = sp.csr_array(value, dtype=np.float64)
        else:
            dense = np.asarray(value, dtype=np.float64)
            if dense.ndim != 2:
                raise ProblemError(f"{arg}: must be 2-D, got shape {dense.shape}")
            mat = sp.csr_array(dense)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ProblemError):
            raise
        raise ProblemError(f"{arg}: not convertible to a float matrix ({exc})") from exc
    if mat.shape[1] != n:
        raise ProblemError(f"{arg}: has {mat.shape[1]} columns but c has {n} entries")
    mat = mat.copy()
    mat.sum_duplicates()
    mat.eliminate_zeros()
    mat.sort_indices()
    return mat


def first_entry(mat: sp.csr_array, mask: np.ndarray) -> tuple[int, int, float]:
    k = int(np.flatnonzero(mask)[0])
    row = int(np.searchsorted(mat.indptr, k, side="right") - 1)
    return row, int(mat.indices[k]), float(mat.data[k])


def freeze(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def freeze_csr(mat: sp.csr_array) -> sp.csr_array:
    for part in (mat.data, mat.indices, mat.indptr):
        part.flags.writeable = False
    return mat
