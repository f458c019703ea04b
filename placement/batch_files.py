"""The batch CSV and the schedule files beside it (placement.batch's storage).

One flushed line per instance, so an interrupted run leaves every finished row readable;
rewrites (the header check at start, the sorted file at the end) go through a temp file
and a rename, so the CSV is never half-written.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
import re
from pathlib import Path
from typing import Any

#: A solver's stage timings (Certificate.timings keys) -> the CSV column that holds them.
STAGES = {"formulate": "time_formulate", "lp": "time_lp", "round": "time_round",
          "decode_realise": "time_realise", "decode": "time_realise", "greedy": "time_greedy",
          "solve": "time_exact"}
TIME_COLUMNS = ("time_load", "time_formulate", "time_lp", "time_round", "time_realise", "time_greedy",
                "time_exact", "time_other", "time_solve", "time_validate", "time_total")
COLUMNS = ("instance", "name", "solver", "status", "objective", "lower_bound", "gap", "unfinished",
           "valid", "seed", "trials", "time_limit", *TIME_COLUMNS, "schedule", "error")

Row = dict[str, Any]


class BatchError(ValueError):
    """Arguments the batch cannot start with (no file matches, bad option, foreign CSV)."""


def read_kept(out_csv: Path, retry_failed: bool) -> list[Row]:
    """The rows of an earlier run worth keeping: complete ones (an interrupted write may
    leave a partial last line), the last per (instance, solver), failed ones only if
    ``retry_failed`` is off."""
    if not out_csv.exists():
        return []
    with out_csv.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames is None:
            return []
        if tuple(reader.fieldnames) != COLUMNS:
            raise BatchError(f"{out_csv} exists but is not a batch CSV (its columns differ); "
                             "choose another --out")
        rows = {(r["instance"], r["solver"]): r for r in reader if None not in r.values()}
    return [r for r in rows.values() if not (retry_failed and r["error"])]


def _format(value: Any, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4f}" if column in TIME_COLUMNS else repr(value)
    return str(value)


def _line(row: Row) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([_format(row[c], c) for c in COLUMNS])
    return buf.getvalue()


class CsvWriter:
    """Owns the CSV and the schedule file names of one run."""

    def __init__(self, out_csv: Path, kept: list[Row]):
        self.out_csv = out_csv
        self.rows = list(kept)
        self.schedules = out_csv.parent / "schedules"
        # schedule file -> the instance it belongs to, so two instances never share one
        self.claimed = {r["schedule"]: r["instance"] for r in kept if r["schedule"]}
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        self._rewrite()
        self.file = out_csv.open("a", newline="", encoding="utf-8")

    def add(self, row: Row) -> Row:
        self.file.write(_line(row))
        self.file.flush()
        self.rows.append({c: _format(row[c], c) for c in COLUMNS})
        return row

    def schedule_path(self, path: str, name: str, solver: str) -> Path:
        """``schedules/<name>.<solver>.json``; a name another instance already holds gets
        a short hash of the instance path."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
        target = self.schedules / f"{stem}.{solver}.json"
        key = os.path.relpath(target, self.out_csv.parent)
        if self.claimed.setdefault(key, path) != path:
            target = self.schedules / f"{stem}-{hashlib.sha1(path.encode()).hexdigest()[:8]}.{solver}.json"
        self.schedules.mkdir(parents=True, exist_ok=True)
        return target

    def close(self) -> None:
        self.file.close()

    def sort(self) -> None:
        """Rewrite sorted by (instance, solver): the same batch gives the same file whatever
        the order in which workers finished."""
        self.rows.sort(key=lambda r: (r["instance"], r["solver"]))
        self._rewrite()

    def _rewrite(self) -> None:
        tmp = self.out_csv.with_name(f".{self.out_csv.name}.tmp")
        tmp.write_text(_line(dict(zip(COLUMNS, COLUMNS))) + "".join(_line(r) for r in self.rows),
                       encoding="utf-8")
        os.replace(tmp, self.out_csv)


