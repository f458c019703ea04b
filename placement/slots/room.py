"""How many tasks of one demand fit by capacity alone, machine by machine: the array
arithmetic shared by :class:`placement.slots.residual.Residual` and the formulation's slot room,
kept in one place so both count exactly alike (the same float operations)."""
from __future__ import annotations

import numpy as np

from placement.model.instance import TOL_FIT

__all__ = ["most_rows", "room_each", "room_rows"]


_MANY = 10**9  # room of a job whose worker needs none of a machine's resources


def room_rows(alpha: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Per row of ``free``: tasks of demand ``alpha`` (a worker's or a PS's) it takes by capacity alone."""
    need = alpha > 0
    if not need.any():
        return np.full(len(free), _MANY, dtype=np.int64)
    per = np.floor((np.maximum(free[:, need], 0) + TOL_FIT) / alpha[need])
    return np.minimum(per.min(axis=1), _MANY).astype(np.int64)


def room_each(alpha: np.ndarray, free: np.ndarray) -> np.ndarray:
    """:func:`room_rows` with a demand per row: ``alpha[k]`` against ``free[k]``."""
    need = alpha > 0
    per = np.floor((np.maximum(free, 0) + TOL_FIT) / np.where(need, alpha, 1.0))
    return np.minimum(np.where(need, per, np.inf).min(axis=1, initial=np.inf), _MANY).astype(np.int64)


def most_rows(need: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Per row of ``free``: how many of the demands ``need[r, k]`` (k = 0, 1, ..., growing in
    k for every resource r) fit, the first ones: the count k with need[:, k'] <= free + TOL_FIT
    for every k' < k (the per-resource counts of such entries, at their least)."""
    room = free + TOL_FIT
    most = np.full(len(free), need.shape[1], dtype=np.int64)
    for r in range(len(need)):
        np.minimum(most, np.searchsorted(need[r], room[:, r], side="right"), out=most)
    return most
