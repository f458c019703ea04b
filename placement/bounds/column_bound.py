"""The column bound: a proven lower bound on the MODEL.md optimum from a column LP over whole-job schedules.

Each job chooses one schedule (:mod:`placement.formulation.job_schedules`: a configuration per slot, its
completion slot and exact weighted JCT); per slot the chosen schedules share the cluster's total of each
resource and its total machine-uplink bandwidth.  Because a column carries the job's integral completion
slot and its restart losses, this relaxation is far stronger than the time-indexed LP's fractional
completions; what it gives up is where on the cluster things sit.  Column generation
(:func:`solvers.colgen.column_generation`) prices with the per-job DP; every round's Lagrangian value is
a proven bound, so a time limit weakens the bound and never invalidates it.

The score lattice: when every weight is a multiple of some g (exactly, as a fraction), a schedule that
finishes all jobs scores a multiple of q = g * Delta.  Charging an unfinished job only (T - a) Delta
(never more than MODEL.md's charge) makes every schedule's cost a multiple of q, so that relaxation's
optimum is at least its Lagrangian bound rounded UP to the next multiple of q, and so is MODEL.md's.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from placement.formulation.job_schedules import JobSchedules
from placement.model.instance import Instance
from solvers.colgen import Column, MasterFailed, Pricing, PricingStopped, column_generation

__all__ = ["ColumnBound", "column_bound", "score_lattice"]

# Rounding up to the lattice is done from the bound less this relative margin, far above the float
# round-off of summing the duals (about 1e-13 relative), so a bound a hair above a lattice point by
# round-off is never rounded past it.
LATTICE_MARGIN = 1e-7


@dataclass(frozen=True)
class ColumnBound:
    """``bound``: proven lower bound on the optimal weighted JCT; ``source`` says which argument gave
    it; ``lp_value``: the last master LP (not a bound); ``converged``: no column priced out."""

    bound: float
    source: str
    lp_value: float
    lagrangian: float
    rounds: int
    converged: bool
    seconds: float
    columns: tuple[Column, ...] = ()       # every column generated (payload: config index per slot)
    capacity: np.ndarray | None = None     # the shared rows' right-hand sides
    jobs: tuple[JobSchedules, ...] = ()    # per job its configurations, in instance order


def score_lattice(instance: Instance) -> float:
    """q such that every schedule finishing all jobs scores a multiple of q (0 when there is none)."""
    weights = [Fraction(j.weight) for j in instance.jobs]
    if not weights:
        return 0.0
    num = math.gcd(*(w.numerator for w in weights))
    den = math.lcm(*(w.denominator for w in weights))
    return float(Fraction(num, den) * Fraction(instance.slot_seconds))


def column_bound(instance: Instance, *, time_limit: float | None = 30.0) -> ColumnBound | None:
    """The column LP's proven bound within about ``time_limit`` seconds (module docstring); None when
    not even the first pricing round (every job once) fits in it, or when the LP solver refuses the
    master (numbers at the far ends of their bounds, docs/limits.md: the other bounds still stand)."""
    clock = time.perf_counter()
    stop_at = np.inf if time_limit is None else clock + time_limit
    T, R = instance.horizon, len(instance.resources)
    jobs = [JobSchedules(instance, job) for job in instance.jobs]
    usage = [js.usage() for js in jobs]
    uplinks = _uplink_total(instance)
    if not np.isfinite(uplinks):
        for u in usage:
            u[:, R] = 0.0  # no valid uplink row
        uplinks = 0.0
    b = np.tile(_shared(instance, uplinks), T)
    width = len(b) // T   # shared rows per slot
    best_lattice = [-np.inf]  # the best Lagrangian value of the lattice-cost relaxation over the rounds

    def column(k: int, slots: tuple[int, ...], cost: float) -> Column:
        first = jobs[k].first
        rows, vals = [], []
        for i, c in enumerate(slots):
            if c >= 0:
                nz = np.flatnonzero(usage[k][c])
                rows.append((first + i) * width + nz)
                vals.append(usage[k][c][nz])
        return Column(k, cost, np.concatenate(rows) if rows else np.zeros(0, np.int64),
                      np.concatenate(vals) if vals else np.zeros(0), slots)

    def price(pi: np.ndarray) -> Pricing:
        per_slot = -pi.reshape(T, width)
        least, lattice, cols = np.zeros(len(jobs)), np.zeros(len(jobs)), []
        for k, js in enumerate(jobs):
            if time.perf_counter() > stop_at:
                raise PricingStopped
            priced = js.price(per_slot @ usage[k].T if len(usage[k]) else np.zeros((T, 0)))
            least[k], lattice[k] = priced.least, priced.least_lattice
            cols.append(column(k, priced.slots, priced.cost))
        best_lattice[0] = max(best_lattice[0], float(np.sum(lattice) + pi @ b))
        return Pricing(least, cols)

    initial = [column(k, (-1,) * (T - js.first), js.idle_cost) for k, js in enumerate(jobs)]
    try:
        result = column_generation(b, len(jobs), price, initial, time_limit=time_limit)
    except (PricingStopped, MasterFailed):
        return None
    bound, source = result.bound, "column LP (Lagrangian)"
    q = score_lattice(instance)
    if q > 0 and np.isfinite(best_lattice[0]):
        lagrangian = best_lattice[0]
        rounded = math.ceil((lagrangian - LATTICE_MARGIN * max(1.0, abs(lagrangian))) / q) * q
        if rounded > bound:
            bound, source = rounded, "column LP rounded up to the score lattice"
    return ColumnBound(bound=bound, source=source, lp_value=result.lp_value, lagrangian=result.bound,
                       rounds=result.rounds, converged=result.converged, seconds=time.perf_counter() - clock,
                       columns=tuple(result.columns), capacity=b, jobs=tuple(jobs))


def _shared(instance: Instance, uplinks: float) -> np.ndarray:
    """One slot's shared rows' right-hand sides (:meth:`JobSchedules.usage`'s columns): the cluster's
    total of each resource, the machines' uplinks, then on a cluster with GPU types each type's total."""
    cap = instance.capacity_matrix
    parts = [cap.sum(axis=0), [uplinks]]
    if instance.topology.typed:
        code = instance.topology.type_code
        parts.append(np.array([cap[code == k].sum(axis=0) for k in range(len(instance.topology.gpu_types))]).ravel())
    return np.concatenate(parts)


def _uplink_total(instance: Instance) -> float:
    """The summed bandwidth of the links from machines to their parents (0 on a one-machine cluster);
    infinite when a machine has machines below it (a spread job's lowest common ancestor may then be a
    machine, whose own tasks reserve nothing, so the row would not be valid)."""
    topo = instance.topology
    if any(len(topo.below(m.id)) > 1 for m in topo.machines):
        return np.inf
    total = 0.0
    for m in topo.machines:
        parent = topo.parent(m.id)
        if parent is not None:
            total += sum(topo.links[i].gbps for i in topo.path_links(m.id, parent))
    return total
