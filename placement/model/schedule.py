"""Per-slot allocations (MODEL.md section 2): the JSON file, CSV export and a text table.

A schedule keeps its slots exactly as written, duplicates and all: whether it is *valid*
is the validator's verdict (rule 0), while a file that is not even *well-formed* raises
:class:`ScheduleError` here.
"""
from __future__ import annotations

import csv
import io
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.model.strict_json import Fields, ScheduleError, join, read_json, write_json

__all__ = ["Allocation", "Schedule", "ScheduleError", "Slot"]


@dataclass(frozen=True)
class Allocation:
    """``workers`` workers and ``ps`` parameter servers of ``job`` on ``machine``."""

    job: str
    machine: str
    workers: int
    ps: int

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "machine": self.machine, "workers": self.workers, "ps": self.ps}


@dataclass(frozen=True)
class Slot:
    t: int
    allocations: tuple[Allocation, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """Slots as listed (a slot that is not listed is empty); ``extra`` keeps the other
    top-level keys of the file (solver, objective, bound, timings, metrics)."""

    slots: tuple[Slot, ...]
    instance: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_allocations(cls, by_slot: Mapping[int, Iterable[Allocation]],
                         instance: str | None = None, **extra: Any) -> "Schedule":
        """Build from ``{t: allocations}``; empty slots are left out, slots sorted by t."""
        slots = tuple(Slot(t, tuple(a)) for t, a in sorted(by_slot.items()))
        return cls(tuple(s for s in slots if s.allocations), instance, dict(extra))

    # ----- file form ---------------------------------------------------------------------
    @classmethod
    def from_dict(cls, value: Any) -> "Schedule":
        if not isinstance(value, Mapping):
            raise ScheduleError("document", "must be a JSON object with a `slots` list")
        if "slots" not in value:
            raise ScheduleError("slots", "missing required key")
        raw_slots = value["slots"]
        if not isinstance(raw_slots, list):
            raise ScheduleError("slots", "must be a JSON array")
        instance = value.get("instance")
        if instance is not None and not isinstance(instance, str):
            raise ScheduleError("instance", f"must be a string, got {instance!r}")
        slots = []
        for i, raw in enumerate(raw_slots):
            sf = Fields(raw, join("slots", i), ScheduleError, ("t", "allocations"))
            allocs = []
            for k, a in enumerate(sf.array("allocations")):
                af = Fields(a, join(join(sf.path, "allocations"), k), ScheduleError,
                            ("job", "machine", "workers", "ps"))
                allocs.append(Allocation(af.string("job"), af.string("machine"),
                                         af.integer("workers", minimum=0),
                                         af.integer("ps", minimum=0)))
            slots.append(Slot(sf.integer("t"), tuple(allocs)))
        extra = {k: v for k, v in value.items() if k not in ("slots", "instance")}
        return cls(tuple(slots), instance, extra)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.instance is not None:
            out["instance"] = self.instance
        out.update(self.extra)
        out["slots"] = [{"t": s.t, "allocations": [a.to_dict() for a in s.allocations]}
                        for s in self.slots]
        return out

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Schedule":
        return cls.from_dict(read_json(path, ScheduleError))

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.to_dict())

    # ----- views -------------------------------------------------------------------------
    def rows(self) -> Iterable[tuple[int, Allocation]]:
        """Every (t, allocation) in file order."""
        for s in self.slots:
            for a in s.allocations:
                yield s.t, a

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """CSV with columns ``t,job,machine,workers,ps``; written to ``path`` if given."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["t", "job", "machine", "workers", "ps"])
        for t, a in self.rows():
            writer.writerow([t, a.job, a.machine, a.workers, a.ps])
        text = buf.getvalue()
        if path is not None:
            tmp = Path(path).with_name(f".{Path(path).name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
        return text

    def table(self, jobs: Iterable[str] | None = None, horizon: int | None = None,
              max_slots: int = 24, legend: bool = False) -> str:
        """Jobs x slots grid: ``W/S`` workers/PSs, ``*`` when spread over several machines,
        ``.`` when idle. Long horizons are cut at ``max_slots`` columns; ``legend`` adds a
        line under the grid saying what the symbols mean."""
        cells: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
        for t, a in self.rows():
            if a.workers or a.ps:
                c = cells[a.job, t]
                c[0] += a.workers
                c[1] += a.ps
                c[2] += 1
        job_ids = list(jobs) if jobs is not None else sorted({j for j, _ in cells})
        last = horizon if horizon is not None else 1 + max((t for _, t in cells), default=-1)
        shown = min(last, max_slots)
        text = {key: f"{w}/{s}{'*' if n > 1 else ''}" for key, (w, s, n) in cells.items()}
        width = max([len(v) for v in text.values()] + [len(str(max(shown - 1, 0))), 1])
        name_w = max([len(j) for j in job_ids] + [3])
        lines = ["job".ljust(name_w) + " " + " ".join(str(t).rjust(width) for t in range(shown))]
        for j in job_ids:
            lines.append(j.ljust(name_w) + " " + " ".join(
                text.get((j, t), ".").rjust(width) for t in range(shown)))
        if last > shown:
            lines.append(f"... {last - shown} more slots not shown")
        if legend:
            lines.append("W/S = workers/PSs of the job in that slot, * = spread over machines, . = not running")
        return "\n".join(lines)
