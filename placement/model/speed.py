"""Measured speed (MODEL.md section 8): a job may give its speed as a table instead of the
linear rate of section 4, because real speedups are concave in the worker count and
depend on how many machines the job spans.

JSON (a job's optional ``"speed"`` key; docs/model.md, 'Measured speed'):

    "speed": {"local":  [r_L, ..., r_U],
              "spread": [r_L, ..., r_U]}                       # any number of machines >= 2
    "speed": {"local": [...], "spread": {"2": [...], "4": [...]}}  # by machines spanned
    "speed": {"base": 3.5, "local": [1, 1.8, ...], "spread": [...]}  # speedups over `base`

    "speed": {"by_type": {"a100": {"local": [...], "spread": [...]},
                          "t4":   {"local": [...], "spread": [...]}}}   # per GPU type (MODEL.md 8)

Each list has one entry per worker count W = min_workers .. max_workers: the mini-batches
per second of the whole job with W workers, all of its tasks on one machine (``local``)
or on several (``spread``). With ``base``, entries are speedups and the rate is
``base x entry``. ``spread`` by machines spanned: the row of the largest key not above the
machines the job spans (keys are integers >= 2 and must include 2). Entries are positive
and finite; there is no monotonicity rule (measured throughput may fall past the knee).
``by_type``: one such table per GPU type (a machine's ``gpu_type``); the job's workers may
use only the types listed (:class:`TypedSpeed`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from placement.model import limits
from placement.model.strict_json import FileFormatError, InstanceError, Fields, fail, join, number, string

__all__ = ["SpeedTable", "TypedSpeed", "read_speed"]


@dataclass(frozen=True)
class SpeedTable:
    """Rates in mini-batches per second, indexed by W - ``min_workers``."""

    min_workers: int
    local: tuple[float, ...]
    #: (machines spanned, rates): sorted by machines, the first at 2
    spread: tuple[tuple[int, tuple[float, ...]], ...]

    @property
    def max_workers(self) -> int:
        return self.min_workers + len(self.local) - 1

    #: the GPU types the table is limited to (None: any type, at the same rates)
    types = None

    def table(self, gpu_type: str | None) -> "SpeedTable":
        """The rates on ``gpu_type``: this table, whatever the type."""
        return self

    def rate(self, workers: int, machines: int, gpu_type: str | None = None) -> float:
        """Mini-batches per second with ``workers`` workers spanning ``machines`` machines
        (0 outside [min_workers, max_workers] or without workers); the same on every GPU type."""
        k = workers - self.min_workers
        if machines < 1 or not 0 <= k < len(self.local):
            return 0.0
        if machines == 1:
            return self.local[k]
        row = self.spread[0][1]
        for count, rates in self.spread:
            if count <= machines:
                row = rates
        return row[k]

    def cut(self, max_workers: int) -> "SpeedTable":
        """The table for W = min_workers..``max_workers`` only."""
        k = max_workers - self.min_workers + 1
        return SpeedTable(self.min_workers, self.local[:k], tuple((m, rates[:k]) for m, rates in self.spread))

    @property
    def fastest_local(self) -> float:
        """The fastest local rate: MODEL.md 8's rate for the unfinished charge."""
        return max(self.local)

    @property
    def fastest(self) -> float:
        """The fastest rate of the table, local or spread, at any worker count."""
        return max(self.best_rate(local=True, most_workers=self.max_workers),
                   self.best_rate(local=False, most_workers=self.max_workers))

    def best_per_worker(self, *, local: bool) -> float:
        """The largest rate per worker, local or over any spread row: what one worker can
        be credited at most in a model that is linear in the worker count."""
        rows = [self.local] if local else [rates for _, rates in self.spread]
        return max(r / (self.min_workers + k) for rates in rows for k, r in enumerate(rates))

    def best_rate(self, *, local: bool, most_workers: int) -> float:
        """The fastest rate with at most ``most_workers`` workers (0 if fewer than min_workers)."""
        upto = most_workers - self.min_workers + 1
        if upto <= 0:
            return 0.0
        rows = [self.local] if local else [rates for _, rates in self.spread]
        return max(max(rates[:upto]) for rates in rows)

    @classmethod
    def from_dict(cls, value: Any, path: str, min_workers: int, max_workers: int,
                  error: type[FileFormatError] = InstanceError) -> "SpeedTable":
        f = Fields(value, path, error, ("local", "spread"), ("base",))
        base = f.number("base", 1.0, positive=True) if f.has("base") else 1.0
        size = max_workers - min_workers + 1

        def row(v: Any, where: str) -> tuple[float, ...]:
            if not isinstance(v, list):
                fail(where, f"must be a list of {size} rates (W = {min_workers}..{max_workers})", error)
            if len(v) != size:
                fail(where, f"has {len(v)} entries; needs {size}, one per W = {min_workers}..{max_workers}", error)
            out = []
            for k, x in enumerate(v):
                rate = base * number(x, join(where, k), error, positive=True)
                if not (math.isfinite(rate) and rate > 0):
                    fail(join(where, k), f"rate {rate} is not positive and finite", error)
                reason = limits.RATE.check(rate, True)  # docs/limits.md
                if reason:
                    fail(join(where, k), f"the rate {reason}", error)
                out.append(rate)
            return tuple(out)

        local = row(value["local"], join(path, "local"))
        raw = value["spread"]
        where = join(path, "spread")
        if isinstance(raw, dict):
            spread = []
            for key, rates in raw.items():
                if not (isinstance(key, str) and key.isdigit() and int(key) >= 2):
                    fail(join(where, key), "keys are machine counts, integers >= 2", error)
                spread.append((int(key), row(rates, join(where, key))))
            spread.sort()
            if not spread or spread[0][0] != 2:
                fail(where, 'by machines spanned, the counts must include "2"', error)
        else:
            spread = [(2, row(raw, where))]
        return cls(min_workers, local, tuple(spread))

    def to_dict(self) -> dict[str, Any]:
        if len(self.spread) == 1:
            return {"local": list(self.local), "spread": list(self.spread[0][1])}
        return {"local": list(self.local), "spread": {str(c): list(r) for c, r in self.spread}}


@dataclass(frozen=True)
class TypedSpeed:
    """One :class:`SpeedTable` per GPU type (MODEL.md 8, GPU types): the job's workers run
    only on the types listed, at that type's rates. The queries that take no type (the
    fastest rate, the best rate per worker) answer for the fastest type: what a relaxation
    may credit."""

    #: (type, table), sorted by type
    by_type: tuple[tuple[str, SpeedTable], ...]

    @property
    def types(self) -> frozenset[str]:
        return frozenset(g for g, _ in self.by_type)

    @property
    def min_workers(self) -> int:
        return self.by_type[0][1].min_workers

    @property
    def max_workers(self) -> int:
        return self.by_type[0][1].max_workers

    def table(self, gpu_type: str | None) -> SpeedTable | None:
        """The table of ``gpu_type``, or None: the job may not run there."""
        return next((t for g, t in self.by_type if g == gpu_type), None)

    def cut(self, max_workers: int) -> "TypedSpeed":
        """Every type's table for W = min_workers..``max_workers`` only."""
        return TypedSpeed(tuple((g, t.cut(max_workers)) for g, t in self.by_type))

    def limited_to(self, types: "frozenset[str | None] | set[str | None]") -> "TypedSpeed | None":
        """The tables of the types in ``types`` only (None if none is left): what a job can
        use on a cluster that has only those types now."""
        kept = tuple((g, t) for g, t in self.by_type if g in types)
        return TypedSpeed(kept) if kept else None

    def rate(self, workers: int, machines: int, gpu_type: str | None = None) -> float:
        """The rate on ``gpu_type`` (0 on a type the job does not list)."""
        table = self.table(gpu_type)
        return table.rate(workers, machines) if table is not None else 0.0

    @property
    def fastest_local(self) -> float:
        return max(t.fastest_local for _, t in self.by_type)

    @property
    def fastest(self) -> float:
        return max(t.fastest for _, t in self.by_type)

    def best_per_worker(self, *, local: bool) -> float:
        return max(t.best_per_worker(local=local) for _, t in self.by_type)

    def best_rate(self, *, local: bool, most_workers: int) -> float:
        return max(t.best_rate(local=local, most_workers=most_workers) for _, t in self.by_type)

    def to_dict(self) -> dict[str, Any]:
        return {"by_type": {g: t.to_dict() for g, t in self.by_type}}


def read_speed(value: Any, path: str, min_workers: int, max_workers: int,
               error: type[FileFormatError] = InstanceError) -> SpeedTable | TypedSpeed:
    """A job's ``"speed"``: one table, or ``{"by_type": {type: table, ...}}``."""
    if isinstance(value, dict) and "by_type" in value:
        Fields(value, path, error, ("by_type",))
        where = join(path, "by_type")
        raw = value["by_type"]
        if not isinstance(raw, dict) or not raw:
            fail(where, "must map each GPU type to a speed table (at least one)", error)
        tables = []
        for g, table in raw.items():
            string(g, join(where, g), error)
            tables.append((g, SpeedTable.from_dict(table, join(where, g), min_workers, max_workers, error)))
        return TypedSpeed(tuple(sorted(tables)))
    return SpeedTable.from_dict(value, path, min_workers, max_workers, error)
