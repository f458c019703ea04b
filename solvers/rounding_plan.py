"""The :class:`RoundingPlan` (everything rounding and its guarantee need) and the snapping of LP noise.

Its own module so that rounding.py, derandomize.py and guarantee.py all import it without
importing each other back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["RoundingPlan", "SNAP", "snap", "is_frac"]

SNAP = 1e-9  # marginals this close to an integer are that integer (LP noise)


@dataclass(frozen=True)
class RoundingPlan:
    """Everything rounding needs, computed once per (problem, LP solution, scaling).

    ``marginal`` is E[x_j] for every trial.  ``free`` are the independently rounded integer variables.
    Choice options are flattened: ``opt_ind`` (indicator), ``opt_group``, ``opt_prob`` (y_k, normalised
    so an exact group sums to 1), members ``mem_var``/``mem_opt``/``mem_cond`` (target given the option).
    ``pip_vars`` holds the exact-sum rows, padded with -1.  ``unit_range`` and ``block`` describe the
    independent units for the guarantee: a single variable's random range, and for each uncertain
    option the most it can put into a row.
    """

    marginal: np.ndarray
    free: np.ndarray
    integer: np.ndarray
    opt_ind: np.ndarray
    opt_group: np.ndarray
    opt_prob: np.ndarray
    group_exact: np.ndarray
    mem_var: np.ndarray
    mem_opt: np.ndarray
    mem_cond: np.ndarray
    pip_vars: np.ndarray
    unit_range: np.ndarray
    block: sp.csc_array
    scale_pack: float
    scale_cover: float
    width_pack: float | None
    width_cover: float | None
    exact_rows: int
    exact_general_rows: int


def snap(p: np.ndarray) -> np.ndarray:
    r = np.round(p)
    return np.where(np.abs(p - r) < SNAP, r, p)


def is_frac(p: np.ndarray) -> np.ndarray:
    return np.abs(p - np.round(p)) >= SNAP
