"""A measured speed written as a speed table (MODEL.md 8): the rule the peer arena's
adapter and the Pollux workload converter share.

A measurement gives the whole job's rate on a *placement* (GPUs per node, e.g. (4, 4, 1));
a :class:`~placement.model.speed.SpeedTable` wants one rate per worker count W = min_workers ..
max_workers, local and spread by the number of machines spanned. :func:`speed_table`
measures every entry at one placement (:func:`entry_placements`), each distinct
placement once:

- **local**, W: W workers on one machine. A W that no machine holds (more than
  ``per_node``) can never run local; its entry is the rate on the fewest machines, so the
  row's fastest entry (the unfinished charge of MODEL.md 8) is a rate the job reaches.
- **spread**, one row per key m of :func:`spread_keys` (2, 4, 8, 16, up to the cluster's
  nodes and the job's max_workers; 2 always, as MODEL.md 8 requires): W workers on
  m' = max(m, the fewest machines that hold W) machines, at most W (W workers span at most
  W machines; a job spans more only with its stand-in PS away from the workers, which the
  measured system does not have, so such an entry is the rate of W on W machines).
  :func:`packed` lays them out, as full as possible in order: (4, 1) for 5 on two
  machines. A job spanning m .. (next key - 1) machines reads row m, so between keys the
  entry is the rate on m machines (or the fewest that hold W), not on those spanned
  (on the Pollux traces 0.90-1.07x of it, 5th-95th percentile:
  ``benchmarks/linear_speed_error.py``).
- **unmeasured**: an entry whose placement the measurement has no value for (None, zero,
  not finite: a configuration the traces never measured, where the Pollux simulator
  itself fails) gets :data:`UNMEASURED` x the table's fastest entry. MODEL.md 8 needs
  every entry positive and finite, and so slow a rate steers every policy that reads
  speed away from the placement. Lowering max_workers instead would also drop the
  measured counts above a hole. The entry of max_workers on the fewest machines must be
  measured (:class:`ValueError` otherwise): without it the job has no usable speed at
  the count it is sized for.

:func:`useful_count` is how far an elastic job is worth growing (the adapter's and the
converter's max_workers).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from placement.model.speed import SpeedTable

__all__ = ["MIN_EFFICIENCY", "SPREAD_KEYS", "UNMEASURED", "entry_placements", "packed",
           "speed_table", "spread_keys", "useful_count"]

#: The least parallel efficiency (speed over one worker's, per worker) at which an elastic
#: job is given more workers: 1/2, the lowest the Pollux artifact's workload generator
#: accepts for a job's GPU count (``Application.get_configurations``, ``lo_util=0.5``).
MIN_EFFICIENCY = 0.5
#: Machine counts of the spread rows (those above the cluster or the job are left out).
SPREAD_KEYS = (2, 4, 8, 16)
#: An unmeasured entry's rate, as a fraction of the table's fastest entry.
UNMEASURED = 1e-6

Placement = tuple[int, ...]


def packed(count: int, per_node: int, machines: int | None = None) -> Placement:
    """``count`` workers on ``machines`` machines of ``per_node`` GPUs (default the fewest
    that hold them), each as full as possible in order while leaving one worker for every
    machine after it: (4, 4, 1) for 9 on 4, (4, 1) for 5 on two, (2, 1, 1) for 4 on three."""
    if count < 1 or per_node < 1:
        raise ValueError(f"count and per_node must be >= 1, got {count}, {per_node}")
    fewest = -(-count // per_node)
    m = fewest if machines is None else machines
    if not fewest <= m <= count:
        raise ValueError(f"{count} workers fit on {fewest}..{count} machines of {per_node}, not {m}")
    out, left = [], count
    for i in range(m):
        take = min(per_node, left - (m - i - 1))
        out.append(take)
        left -= take
    return tuple(out)


def spread_keys(max_workers: int, nodes: int | None = None) -> tuple[int, ...]:
    """The machine counts of a table's spread rows: 2, and each of :data:`SPREAD_KEYS`
    that ``max_workers`` workers and the cluster's ``nodes`` (None: no limit) can reach."""
    return (2,) + tuple(k for k in SPREAD_KEYS[1:]
                        if k <= max_workers and (nodes is None or k <= nodes))


def entry_placements(min_workers: int, max_workers: int, per_node: int,
                     nodes: int | None = None) -> dict[tuple[int, int], Placement]:
    """Where each entry is measured: ``(1, W)`` for the local row, ``(m, W)`` for the spread
    row of m machines (module docstring)."""
    if not 1 <= min_workers <= max_workers:
        raise ValueError(f"need 1 <= min_workers <= max_workers, got {min_workers}, {max_workers}")
    out = {}
    for w in range(min_workers, max_workers + 1):
        fewest = -(-w // per_node)
        out[1, w] = packed(w, per_node)
        for m in spread_keys(max_workers, nodes):
            out[m, w] = packed(w, per_node, min(max(m, fewest), w))
    return out


def speed_table(rate: Callable[[Placement], float | None], min_workers: int, max_workers: int,
                per_node: int, nodes: int | None = None) -> SpeedTable:
    """The table of the job whose whole rate on a placement is ``rate(placement)`` (None
    where nothing was measured), for W = min_workers..max_workers on machines of
    ``per_node`` GPUs (module docstring). ValueError if max_workers on the fewest machines
    has no rate."""
    where = entry_placements(min_workers, max_workers, per_node, nodes)
    seen: dict[Placement, float | None] = {}
    for p in where.values():
        if p not in seen:
            r = rate(p)
            seen[p] = float(r) if r is not None and math.isfinite(r) and r > 0 else None
    need = packed(max_workers, per_node)
    if seen[need] is None:
        raise ValueError(f"no measured rate for {max_workers} workers on {need}")
    floor = UNMEASURED * max(r for r in seen.values() if r is not None)
    counts = range(min_workers, max_workers + 1)

    def row(m: int) -> tuple[float, ...]:
        return tuple(seen[where[m, w]] or floor for w in counts)

    return SpeedTable(min_workers, row(1),
                      tuple((m, row(m)) for m in spread_keys(max_workers, nodes)))


def useful_count(rates: Sequence[float | None], min_efficiency: float = MIN_EFFICIENCY) -> int:
    """The most workers worth giving an elastic job: the largest count c whose rate is at
    least ``min_efficiency`` x c x the one-worker rate (``rates[i]`` is the rate of i + 1
    workers; None or 0 where nothing was measured). Past it each added worker buys too
    little."""
    rates = list(rates)
    if not rates or not rates[0]:
        raise ValueError("the one-worker rate is needed")
    one = rates[0]
    return max(c for c, r in enumerate(rates, start=1) if r and r >= min_efficiency * c * one)

