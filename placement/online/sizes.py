"""Job sizes learned from the jobs that finished: what a scheduler that is not told a job's
length can still know about it.

A job's *size* is its total work, in a unit comparable across jobs (the scheduler uses
GPU-seconds at the job's best rate per GPU: :mod:`placement.online.knowledge`). When the cluster
reports a job finished,
its size becomes a sample (with its class label and its user's estimate, when given).
From the samples alone this module answers, for a job that has done ``a`` batches so far:

- :meth:`LearnedSizes.expected_total`: E[X | X > a], the mean size of the finished jobs
  larger than ``a`` (per class once the class has :data:`MIN_CLASS_SAMPLES` samples, else
  over every class);
- :meth:`LearnedSizes.gittins_remaining`: 1 / G(a), where G is the Gittins index of the
  empirical size distribution (Gittins 1989; Sevcik 1974's "smallest rank" rule; Tiresias,
  NSDI'19, uses its 2D form over GPU x time): G(a) = max over D > 0 of
  P(X - a <= D | X > a) / E[min(X - a, D) | X > a]. Serving the highest index first
  minimises the mean response time of a single server with unknown sizes, and for a job of
  known size r it is exactly the remaining work (G = 1 / r), so 1 / G(a) is the remaining
  work a size-based rule should plan with;
- with a user's estimate, both over the estimate times the ratios (size / estimate)
  observed on finished jobs (:meth:`LearnedSizes.possible_sizes`): the estimate, corrected.
  The open jobs count too, as ratios known only to be at least their work so far over
  their estimate (right-censored, :meth:`LearnedSizes.censor_ratios`): the ratios are
  weighted by the Kaplan-Meier estimator (Kaplan and Meier, JASA 1958), since the jobs
  whose estimate was too low are the ones still running, and the finished ones alone
  would tell a scheduler that estimates run high. The mass it leaves past the largest
  ratio seen is put at the furthest ratio observed (finished or open) plus the largest
  ratio seen (memoryless past what was observed, as the prior below);
- with a *setup*: a job that is not running must first pay its restart (MODEL.md 4: the
  first start and every resume lose ``restart_seconds``), which adds to the work it spends
  whatever its size: G(a) = max over D of P(X - a <= D | X > a) / (setup + E[min(X - a, D) | X > a]).
  So a waiting job displaces a running one only when it is better by more than the restart
  it costs, and two jobs of about equal rank stop taking turns (each turn a restart).

Where no possible size is larger than ``a``, two stated priors:

- *beyond the sizes seen* (some possible size, none larger than ``a``: a job finished, or
  the job has a user's estimate, which is its one possible size until a ratio is known): the
  tail is taken as memoryless, with mean the largest possible size (the job needs that much
  more, whatever its age; its Gittins remaining is that mean). Its rank then no longer changes as it runs,
  so jobs past every size seen keep their order (first come, first served, as in the last
  queue of Tiresias) instead of taking turns, each turn a restart and each finishing late:
  ranked by a heavy tail, equal long jobs share the cluster like processor sharing;
- *a cold start* (no possible size yet): Pareto with shape 2 above the job's doubling level:
  with ``a`` rounded down to ``floor * 2**k`` (``floor``: one slot), the job is expected to
  need that much again (mean residual life of a Pareto(2) tail) and its Gittins remaining is
  half that (its hazard rate 2 / a), i.e. least attained service first while nothing is
  known. Rounding to doubling levels, as Tiresias' queues do, keeps two jobs of about equal
  service from swapping every slot. A setup is added to that remaining work as it is (not
  the exact index of the Pareto tail with a setup, which is somewhat larger: a stated
  simplification of a prior that only speaks before any job has finished).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["LearnedSizes", "MIN_CLASS_SAMPLES", "gittins_index", "kaplan_meier"]

#: a class label's own samples are used once it has this many finished jobs
MIN_CLASS_SAMPLES = 5


class LearnedSizes:
    """The sizes of finished jobs, by class label, and their size / estimate ratios."""

    def __init__(self) -> None:
        self._all: list[float] = []
        self._by_label: dict[str, list[float]] = {}
        self._ratios: list[float] = []
        self._sorted: dict[str | None, np.ndarray] = {}     # by label (None: every job), sorted
        self._open_ratios = np.zeros(0)                # the open jobs' censored ratios, sorted
        self._ratio_law: tuple[np.ndarray, np.ndarray, tuple[float, float] | None] | None = None

    def __len__(self) -> int:
        return len(self._all)

    def add(self, size: float, *, label: str | None = None, estimate: float | None = None) -> None:
        """A finished job of ``size`` batches (> 0); its ``label`` and its user's ``estimate``, if known."""
        if not (isinstance(size, (int, float)) and math.isfinite(size) and size > 0):
            raise ValueError(f"a finished job's size must be a finite number > 0, got {size!r}")
        size = float(size)
        self._all.append(size)
        self._sorted.pop(None, None)
        if label is not None:
            self._by_label.setdefault(label, []).append(size)
            self._sorted.pop(label, None)
        if estimate is not None and estimate > 0:
            self._ratios.append(size / float(estimate))
            self._ratio_law = None

    def censor_ratios(self, ratios: Iterable[float]) -> None:
        """The open jobs' work so far over their user's estimate (those > 0): each job's
        ratio is known to be at least that (module docstring). Replaces the previous ones:
        the scheduler gives them anew every slot."""
        self._open_ratios = np.sort(np.array([float(r) for r in ratios if r > 0], dtype=float))
        self._ratio_law = None

    def sizes(self, label: str | None = None) -> np.ndarray:
        """The samples a job of ``label`` is judged by, sorted: its class's once there are
        :data:`MIN_CLASS_SAMPLES`, else every finished job's."""
        key = label if label is not None and len(self._by_label.get(label, ())) >= MIN_CLASS_SAMPLES else None
        if key not in self._sorted:
            self._sorted[key] = np.sort(np.array(self._all if key is None else self._by_label[key], dtype=float))
        return self._sorted[key]

    # ----- what a job that has done `attained` batches is expected to need ------------------
    def possible_sizes(self, attained: float, *, label: str | None = None,
                       estimate: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The sizes that a job which has done ``attained`` batches may have (sorted, all
        above ``attained``; empty where only the prior speaks) and their weights (relative
        probabilities): with a user's ``estimate``, the estimate times each observed size /
        estimate ratio, weighted by :meth:`ratio_law` (the estimate itself before any ratio is
        known); else the samples of its class (or of all jobs), equally likely."""
        if estimate is not None:
            ratios, weights, beyond = self.ratio_law()
            if not len(ratios):
                ratios, weights = np.ones(1), np.ones(1)
            sizes, weights = _above(estimate * ratios, weights, attained)
            if len(sizes) and beyond is not None:  # past every ratio seen, the prior speaks alone
                sizes, weights = np.append(sizes, estimate * beyond[0]), np.append(weights, beyond[1])
            return sizes, weights
        values = self.sizes(label)
        return _above(values, np.ones(len(values)), attained)

    def ratio_law(self) -> tuple[np.ndarray, np.ndarray, tuple[float, float] | None]:
        """The observed ratios size / estimate (sorted), their Kaplan-Meier weights with the
        open jobs' ratios counted as censored, and the (ratio, weight) of the mass left past
        the largest ratio seen, or None (module docstring); with no job open, every ratio
        equally likely. Empty before any job with an estimate finished."""
        if self._ratio_law is None:
            events, censored = np.sort(np.array(self._ratios, dtype=float)), self._open_ratios
            if not len(events) or not len(censored):
                self._ratio_law = events, np.ones(len(events)), None
            else:
                mass, left = kaplan_meier(events, censored)
                # past the largest ratio seen: memoryless beyond the furthest ratio observed, mean the largest seen
                beyond = (max(events[-1], censored[-1]) + events[-1], left) if left > 0 else None
                self._ratio_law = events, mass, beyond
        return self._ratio_law

    def expected_total(self, attained: float, floor: float, *, label: str | None = None,
                       estimate: float | None = None) -> float:
        """E[X | X > attained] over :meth:`possible_sizes`, or a prior (module docstring)
        where none is larger; with ``estimate``, the corrected estimate."""
        tail, weights = self.possible_sizes(attained, label=label, estimate=estimate)
        if len(tail):
            return float(weights @ tail / weights.sum())
        largest = self._largest(label, estimate)
        return attained + (largest if largest is not None else _level(attained, floor))

    def gittins_remaining(self, attained: float, floor: float, *, label: str | None = None,
                          estimate: float | None = None, setup: float = 0.0) -> float:
        """1 / G(attained) over :meth:`possible_sizes`: the remaining work the Gittins rule
        ranks the job by (module docstring); a prior's where no possible size is larger.
        ``setup``: the work a restart costs the job first, in the same unit (0: it is running)."""
        tail, weights = self.possible_sizes(attained, label=label, estimate=estimate)
        if len(tail):
            return 1.0 / gittins_index(tail - attained, setup, weights=weights)
        largest = self._largest(label, estimate)
        return (largest if largest is not None else _level(attained, floor) / 2) + setup

    def _largest(self, label: str | None, estimate: float | None) -> float | None:
        """The largest size seen (with ``estimate``: the estimate times the largest ratio
        seen), the mean of the memoryless tail beyond them (module docstring); None at a
        cold start."""
        if estimate is not None:
            ratios = self.ratio_law()[0]
            return float(estimate * (ratios[-1] if len(ratios) else 1.0))
        seen = self.sizes(label)
        return float(seen[-1]) if len(seen) else None

    # ----- the checkpoint ----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The samples as plain JSON (the scheduler's checkpoint keeps them)."""
        return {"sizes": list(self._all), "by_label": {k: list(v) for k, v in self._by_label.items()},
                "ratios": list(self._ratios)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> "LearnedSizes":
        out = cls()
        if state:
            out._all = [float(x) for x in state["sizes"]]
            out._by_label = {str(k): [float(x) for x in v] for k, v in state["by_label"].items()}
            out._ratios = [float(x) for x in state["ratios"]]
        return out


def gittins_index(residuals: np.ndarray | list[float], setup: float = 0.0, *,
                  weights: np.ndarray | list[float] | None = None) -> float:
    """The Gittins index of a job whose remaining work is one of ``residuals`` (all > 0),
    with probabilities proportional to ``weights`` (> 0; None: equally likely), and which
    must first spend ``setup`` (>= 0) whatever it is: max over the candidates D = r_k of
    P(R <= D) / (setup + E[min(R, D)]); the maximum over D > 0 is reached at a support
    point, since between two of them the ratio only falls."""
    r = np.asarray(residuals, dtype=float)
    w = np.ones(len(r)) if weights is None else np.asarray(weights, dtype=float)
    if not len(r) or r.min() <= 0:
        raise ValueError("residual sizes must be > 0")
    if w.shape != r.shape or not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("weights must be finite numbers > 0, one per residual")
    if not (math.isfinite(setup) and setup >= 0):
        raise ValueError(f"setup must be a finite number >= 0, got {setup!r}")
    order = np.argsort(r, kind="stable")
    r, w = r[order], w[order]
    total = w.sum()
    below = np.cumsum(w)                                   # total x P(R <= r_k)
    served = np.cumsum(w * r) + (total - below) * r        # total x E[min(R, r_k)]
    return float(np.max(below / (served + total * setup)))


def kaplan_meier(events: np.ndarray, censored: np.ndarray) -> tuple[np.ndarray, float]:
    """The Kaplan-Meier estimate of a distribution from ``events`` (observed values, sorted)
    and ``censored`` (values known only to be exceeded or reached, sorted): the probability
    of each event, and the survival left past the last one. A censored value equal to an
    event counts as still at risk there (the usual convention)."""
    at_risk = (len(events) - np.arange(len(events))) + (len(censored) - np.searchsorted(censored, events, side="left"))
    survival = np.cumprod(1.0 - 1.0 / at_risk)
    before = np.concatenate([[1.0], survival[:-1]])
    return before / at_risk, float(survival[-1])


def _above(values: np.ndarray, weights: np.ndarray, attained: float) -> tuple[np.ndarray, np.ndarray]:
    """The sorted ``values`` larger than ``attained`` (by more than float noise), with their weights."""
    first = np.searchsorted(values, attained * (1 + 1e-9) + 1e-12, side="right")
    return values[first:], weights[first:]


def _level(attained: float, floor: float) -> float:
    """The prior's expected remaining work: ``attained`` rounded down to its doubling level
    ``floor * 2**k`` (at least ``floor``), the mean residual life of a Pareto(2) tail there."""
    if floor <= 0 or not math.isfinite(floor):
        raise ValueError(f"floor must be a finite number > 0, got {floor!r}")
    if attained <= floor:
        return floor
    return floor * 2.0 ** math.floor(math.log2(attained / floor))
