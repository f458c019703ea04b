"""The batch CSV and the schedule files beside it (placement.batch.run's storage).

One flushed line per instance, so an interrupted run leaves every finished row readable;
rewrites (the header check at start, the sorted file at the end) go through a temp file
and a rename, so the CSV is never half-written. Reading it back checks every row
(:func:`read_kept`), and :class:`ResultsLock` keeps a second batch off the same file.
"""
from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placement.outputs import write_text
from placement.model.schedule import Schedule
from solvers.result import Status

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None  # type: ignore[assignment]

#: A solver's stage timings (Certificate.timings keys) -> the CSV column that holds them.
STAGES = {"formulate": "time_formulate", "lp": "time_lp", "round": "time_round",
          "slot rules": "time_slot_rules", "decode": "time_slot_rules", "greedy": "time_greedy",
          "solve": "time_exact"}
TIME_COLUMNS = ("time_load", "time_formulate", "time_lp", "time_round", "time_slot_rules", "time_greedy",
                "time_exact", "time_other", "time_solve", "time_validate", "time_total")
COLUMNS = ("instance", "name", "solver", "status", "objective", "lower_bound", "gap", "unfinished",
           "valid", "seed", "trials", "time_limit", *TIME_COLUMNS, "schedule", "error")

#: the header of earlier versions (the slot rules' time was ``time_realise``), read as this one
_EARLIER_COLUMNS = tuple("time_realise" if c == "time_slot_rules" else c for c in COLUMNS)

Row = dict[str, Any]


class BatchError(ValueError):
    """Arguments the batch cannot start with (no file matches, bad option, foreign CSV)."""


class ResultsFileError(BatchError):
    """A results CSV with rows the batch cannot trust; ``problems`` are (line, reason)."""

    def __init__(self, out_csv: Path, problems: list[tuple[int, str]]):
        self.problems = problems
        shown = "; ".join(f"line {line}: {reason}" for line, reason in problems[:3])
        more = f"; and {len(problems) - 3} more bad row(s)" if len(problems) > 3 else ""
        super().__init__(f"{out_csv}: {shown}{more}. Fix or delete those rows, or rerun with "
                         "--repair-results to drop them and solve their instances again")


@dataclass
class Kept:
    """What an earlier run left: the rows worth keeping, and what was dropped and why."""

    rows: list[Row] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)      # (line, reason), dropped by --repair-results
    missing: list[str] = field(default_factory=list)              # instances whose schedule file is gone


def read_kept(out_csv: Path, retry_failed: bool, solvers: tuple[str, ...], repair: bool = False) -> Kept:
    """The rows of an earlier run worth keeping: complete and well-formed ones (an
    interrupted write may leave a partial last line, which is dropped), the last per
    (instance, solver), failed ones only if ``retry_failed`` is off, solved ones only if
    their schedule file is still there. A row that is not a batch row (bytes that are not
    UTF-8, a NUL, a wrong field count, a solver not in ``solvers``, an unknown status, a
    number that is not one) raises :class:`ResultsFileError` naming its line, unless ``repair``: then it is
    dropped and reported in ``bad``. A file whose header is not the batch header is
    someone else's: :class:`BatchError` either way."""
    if not out_csv.exists():
        return Kept()
    if out_csv.is_dir():
        raise BatchError(f"{out_csv} is a directory; --out takes a CSV file name")
    try:
        data = out_csv.read_bytes()
    except OSError as exc:
        raise BatchError(f"{out_csv}: cannot read: {exc}") from None
    if not data:
        return Kept()
    data = data.removeprefix(b"\xef\xbb\xbf")    # a BOM: the file went through a spreadsheet
    lines = _Lines(data.decode("utf-8", errors="surrogateescape"))
    header = _next_record(lines, csv.reader(lines))
    if header is None or tuple(header[1]) not in (COLUMNS, _EARLIER_COLUMNS):
        raise BatchError(f"{out_csv}: line 1: exists but is not a batch CSV (its header differs); "
                         "choose another --out")
    kept, rows = Kept(), {}
    reader = csv.reader(lines)
    while True:
        record = _next_record(lines, reader)
        if record is None:
            break
        line, fields = record
        if isinstance(fields, str):              # a csv.Error: start afresh on the next line
            kept.bad.append((line, fields))
            reader = csv.reader(lines)
            continue
        if not fields:
            continue
        if lines.done and not lines.text.endswith(("\n", "\r")) and len(fields) != len(COLUMNS):
            break                                # a write cut mid-way: solved again
        reason = _row_problem(fields, solvers)
        if reason:
            kept.bad.append((line, reason))
            continue
        row = dict(zip(COLUMNS, fields))
        rows[row["instance"], row["solver"]] = row
    if kept.bad and not repair:
        raise ResultsFileError(out_csv, kept.bad)
    for row in rows.values():
        if retry_failed and row["error"]:
            continue
        if row["schedule"] and not _readable_schedule(out_csv.parent / row["schedule"]):
            kept.missing.append(row["instance"])
            continue
        kept.rows.append(row)
    return kept


def _readable_schedule(path: Path) -> bool:
    """The row's schedule file is there and reads as a schedule; otherwise (gone, truncated,
    overwritten with garbage) its instance is solved again rather than trusted."""
    try:
        Schedule.load(path)
    except (OSError, ValueError):
        return False
    return True


class _Lines:
    """The physical lines of a text, counted as a CSV reader takes them."""

    def __init__(self, text: str):
        self.text = text
        self._lines = io.StringIO(text, newline="").readlines()
        self.count = 0

    @property
    def done(self) -> bool:
        return self.count >= len(self._lines)

    def __iter__(self) -> "_Lines":
        return self

    def __next__(self) -> str:
        if self.done:
            raise StopIteration
        self.count += 1
        return self._lines[self.count - 1]


def _next_record(lines: _Lines, reader: Any) -> tuple[int, list[str] | str] | None:
    """(first line, fields) of the next record, (line, reason) for one that is not CSV, None at the end."""
    first = lines.count + 1
    try:
        return first, next(reader)
    except StopIteration:
        return None
    except csv.Error as exc:
        return first, f"not CSV: {exc}"


_STATUSES = {s.value for s in Status}
_NUMBERS = ("objective", "lower_bound", "gap", "time_limit", *TIME_COLUMNS)


def _row_problem(fields: list[str], solvers: tuple[str, ...]) -> str:
    """Why ``fields`` is not a row a batch wrote ('' when it is one)."""
    if len(fields) != len(COLUMNS):
        return f"{len(fields)} fields, a batch row has {len(COLUMNS)}"
    row = dict(zip(COLUMNS, fields))
    for column, value in row.items():
        if "\0" in value:
            return f"{column}: a NUL byte"
        if any("\udc80" <= ch <= "\udcff" for ch in value):
            return f"{column}: bytes that are not UTF-8 text"
    if not os.path.isabs(row["instance"]):
        return f"instance: not an absolute path: {_short(row['instance'])}"
    if row["solver"] not in solvers:
        return f"solver: unknown {_short(row['solver'])} (one of {', '.join(solvers)})"
    if row["status"] not in _STATUSES:
        return f"status: unknown {_short(row['status'])}"
    for column in _NUMBERS:
        if row[column] and not _finite(row[column]):
            return f"{column}: not a number: {_short(row[column])}"
    for column in ("unfinished", "seed", "trials"):
        if row[column] and not (row[column].isascii() and row[column].isdigit()):
            return f"{column}: not a whole number: {_short(row[column])}"
    if row["valid"] not in ("", "true", "false"):
        return f"valid: {_short(row['valid'])} (true, false or empty)"
    if row["status"] == Status.ERROR.value and not row["error"]:
        return "status error without an error message"
    if not row["error"] and row["status"] in ("optimal", "feasible") and not (row["schedule"] and row["objective"]):
        return f"status {row['status']} without a schedule and its objective"
    return ""


def _finite(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _short(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


class ResultsLock:
    """One batch at a time on a results CSV: an exclusive ``flock`` on ``.<name>.lock``
    beside it, holding the owner's pid. The kernel releases the lock when its process dies
    however it dies, so the lock of a dead batch is taken over by the next one."""

    def __init__(self, out_csv: Path):
        self.out_csv = out_csv
        self.path = out_csv.with_name(f".{out_csv.name}.lock")
        self.fd: int | None = None

    def __enter__(self) -> "ResultsLock":
        if fcntl is None:        # no flock on this platform: unlocked, as before
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:   # a folder in its place, a read-only file system
                raise BatchError(f"{self.path}: cannot take the lock of {self.out_csv}: "
                                 f"{exc.strerror or exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise BatchError(f"{self.out_csv} is in use by another batch (pid {holder}; lock {self.path}); "
                                 "wait for it to finish, or use another --out") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:             # not a file its last holder unlinked while we opened it
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except OSError:
            pass
        os.close(self.fd)        # releases the lock
        self.fd = None


def _format(value: Any, column: str = "") -> str:
    if isinstance(value, str):       # no NUL, nothing that is not UTF-8: a row the next run can read back
        return value.replace("\0", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")
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
        write_text(self.out_csv, _line(dict(zip(COLUMNS, COLUMNS))) + "".join(_line(r) for r in self.rows))


