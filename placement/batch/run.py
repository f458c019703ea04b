"""Solve many instance files into one CSV, on this machine or on a Dask cluster.

The client (this process) globs, loads and re-validates; workers only solve. An instance
travels to its worker as a loaded :class:`Instance` and comes back as a plain dict, so Dask
workers on other machines need the project installed but not the instance files, and all
output (the CSV, the schedules) is written by the client alone.

The CSV is appended one flushed line per instance, so an interrupted run leaves every
finished row readable, and re-running resumes: a row counts as *done* for its
``(instance, solver)`` unless it carries an error and ``retry_failed`` is set. A completed
run rewrites the CSV sorted by instance and solver (temp file + rename).
"""
from __future__ import annotations

import glob
import logging
import math
import os
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from placement.batch.files import (COLUMNS, STAGES, TIME_COLUMNS, BatchError, CsvWriter, ResultsFileError,
                                   ResultsLock, Row, read_kept)
from placement.model.evaluate import validate
from placement.executors import EXECUTORS, ExecutorError, executor as make_executor
from placement.model.strict_json import FileFormatError
from placement.model.instance import Instance
from placement.outputs import OutputError, check_outputs, json_text, write_text
from placement.model.schedule import Schedule
from placement.offline.solve import SOLVERS, solve
from solvers.result import Status

logger = logging.getLogger(__name__)

__all__ = ["BatchError", "BatchSummary", "COLUMNS", "EXECUTORS", "Options", "ResultsFileError", "TIME_COLUMNS",
           "expand", "run_batch", "solve_instance"]


@dataclass(frozen=True)
class Options:
    """What every instance of a batch is solved with (picklable, sent to each worker)."""

    solver: str
    seed: int = 0
    time_limit: float | None = None
    trials: int = 32


@dataclass(frozen=True)
class BatchSummary:
    """What a run did: its new rows, and the instances it skipped as already done."""

    out_csv: Path
    total: int
    rows: tuple[Row, ...]
    skipped: int
    skipped_failed: int          # skipped rows that carry an error (kept without --retry-failed)
    wall_seconds: float
    repaired: tuple[tuple[int, str], ...] = ()   # (line, reason) of the bad rows --repair-results dropped
    missing_schedules: int = 0   # done rows whose schedule file was gone: solved again

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(instance, error) of every instance this run failed on."""
        return [(r["instance"], r["error"]) for r in self.rows if r["error"]]

    @property
    def solved(self) -> int:
        return sum(1 for r in self.rows if not r["error"])

    @property
    def failed(self) -> int:
        return len(self.rows) - self.solved

    @property
    def mean_gap(self) -> float | None:
        gaps = [r["gap"] for r in self.rows if r["gap"] is not None and not r["error"]]
        return sum(gaps) / len(gaps) if gaps else None

    @property
    def all_solved(self) -> bool:
        return self.failed == 0 and self.skipped_failed == 0


# ----- the worker ------------------------------------------------------------------------
def solve_instance(path: str, instance: Instance, options: Options) -> dict[str, Any]:
    """Solve one instance and return a plain dict. Never raises: one instance's failure
    must not stop a pool or a Dask worker, so errors come back as data."""
    t0 = time.perf_counter()
    try:
        solution = solve(instance, solver=options.solver, seed=options.seed,
                         time_limit=options.time_limit, trials=options.trials)
    except Exception as exc:  # noqa: BLE001 - recorded in the CSV, traceback logged by the client
        return {"path": path, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                "time_solve": time.perf_counter() - t0}
    cert = solution.certificate
    failed = solution.schedule is None and cert.status is not Status.BOUND
    return {"path": path, "status": cert.status.value, "objective": solution.objective,
            "lower_bound": cert.lower_bound, "gap": cert.gap,
            "unfinished": None if solution.report is None else solution.report.unfinished,
            "timings": dict(cert.timings),
            "schedule": None if solution.schedule is None else solution.schedule.to_dict(),
            "error": f"{cert.status.value}: {cert.message or 'no schedule'}" if failed else "",
            "time_solve": time.perf_counter() - t0}


# ----- the driver ------------------------------------------------------------------------
def run_batch(paths: Sequence[str], *, solver: str, out_csv: str | os.PathLike, executor: str = "local",
              address: str | None = None, workers: int = 1, time_limit: float | None = None, seed: int = 0,
              trials: int = 32, progress: bool = True, retry_failed: bool = False,
              repair_results: bool = False) -> BatchSummary:
    """Solve every file matched by the globs ``paths`` with ``solver``; one CSV row each.

    ``executor="local"`` uses ``workers`` processes (1: in this process); ``"dask"``
    connects to the scheduler at ``address`` or starts a LocalCluster of ``workers``.
    One run at a time per ``out_csv`` (:class:`ResultsLock`); an existing CSV with bad rows
    raises :class:`ResultsFileError` unless ``repair_results`` (then they are dropped and
    their instances solved again)."""
    options = Options(solver, seed, time_limit, trials)
    _check(options, executor, address, workers)
    files = expand(paths)
    out_csv = Path(out_csv)
    schedules = out_csv.parent / "schedules"
    try:
        check_outputs({"--out": out_csv}, files)
    except OutputError as exc:
        raise BatchError(str(exc)) from None
    if schedules.exists() and not schedules.is_dir():
        raise BatchError(f"{schedules} is a file; the schedules go to that folder beside --out")
    with ResultsLock(out_csv):
        return _run_locked(files, out_csv, options, executor, address, workers, progress, retry_failed,
                           repair_results)


def _run_locked(files: list[str], out_csv: Path, options: Options, executor: str, address: str | None,
                workers: int, progress: bool, retry_failed: bool, repair_results: bool) -> BatchSummary:
    solver = options.solver
    found = read_kept(out_csv, retry_failed, SOLVERS, repair_results)
    for line, reason in found.bad:
        logger.warning("%s: line %d dropped (%s)", out_csv, line, reason)
    kept = found.rows
    done = {r["instance"]: r for r in kept if r["solver"] == solver}
    todo = [f for f in files if f not in done]
    skipped = [done[f] for f in files if f in done]
    logger.info("%d instances: %d to solve, %d already in %s", len(files), len(todo), len(skipped), out_csv)
    start = time.perf_counter()
    writer = CsvWriter(out_csv, kept)
    rows: list[Row] = []
    try:
        with make_executor(executor, address, workers) as (pool, slots), \
                tqdm(total=len(todo), disable=not progress, unit="inst", desc=f"batch {solver}") as bar:
            for row in _run(pool, slots, _largest_first(todo) if slots > 1 else todo, options, writer):
                if row["error"]:
                    logger.info("%s: %s", row["instance"], row["error"])
                rows.append(row)
                bar.update()
                bar.set_postfix(failed=sum(1 for r in rows if r["error"]), refresh=False)
    except ExecutorError as exc:
        raise BatchError(str(exc)) from None
    finally:
        writer.close()
    writer.sort()
    return BatchSummary(out_csv, len(files), tuple(rows), len(skipped),
                        sum(1 for r in skipped if r["error"]), time.perf_counter() - start,
                        tuple(found.bad), len(found.missing))


def _largest_first(files: list[str]) -> list[str]:
    """Files in decreasing size, the longest-processing-time-first order of list scheduling:
    with several workers the batch then ends on small instances instead of leaving one
    worker alone on a large one (file size stands in for the solve time; the CSV is
    sorted at the end, so the order is not visible in the results)."""
    return sorted(files, key=lambda f: -_size(f))


def _size(path: str) -> int:
    """The file's size in bytes; 0 when it cannot be read (it sorts last)."""
    try:
        return os.path.getsize(path)
    except OSError:  # reported as the row's error when the file is loaded
        return 0


def expand(patterns: Iterable[str]) -> list[str]:
    """Absolute paths of the files the globs match, deduplicated and sorted; a pattern that
    matches nothing is an error, so a typo never silently shrinks a batch."""
    found: set[str] = set()
    empty = []
    for pattern in patterns:
        hits = [p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p)]
        if not hits:
            empty.append(pattern)
        found.update(str(Path(p).resolve()) for p in hits)
    if empty:
        raise BatchError(f"no file matches {', '.join(map(repr, empty))}")
    return sorted(found)


def _check(options: Options, executor: str, address: str | None, workers: int) -> None:
    if options.solver not in SOLVERS:
        raise BatchError(f"solver must be one of {', '.join(SOLVERS)}, got {options.solver!r}")
    if isinstance(options.seed, bool) or not isinstance(options.seed, int) or options.seed < 0:
        raise BatchError(f"seed must be a non-negative integer, got {options.seed!r}")
    if isinstance(options.trials, bool) or not isinstance(options.trials, int) or options.trials < 1:
        raise BatchError(f"trials must be a positive integer, got {options.trials!r}")
    if options.time_limit is not None and not (isinstance(options.time_limit, (int, float))
                                               and math.isfinite(options.time_limit) and options.time_limit > 0):
        raise BatchError(f"time limit must be a positive number of seconds, got {options.time_limit!r}")
    if executor not in EXECUTORS:
        raise BatchError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address is not None and executor != "dask":
        raise BatchError("an address is for the dask executor: add --executor dask")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise BatchError(f"workers must be a positive integer, got {workers!r}")


def _run(pool: Executor, slots: int, todo: list[str], options: Options, writer: CsvWriter) -> Iterator[Row]:
    """Keep at most ``slots`` instances in flight (so a huge batch is never all in memory)
    and turn each result into a written, re-validated CSV row as it arrives."""
    pending: dict[Future, tuple[str, Instance, float]] = {}
    queue = iter(todo)
    while True:
        for path in queue:
            t0 = time.perf_counter()
            try:
                instance = Instance.load(path)
            except Exception as exc:  # noqa: BLE001 - a bad file is a row, not the end of the batch
                error = str(exc) if isinstance(exc, FileFormatError) else f"{type(exc).__name__}: {exc}"
                yield writer.add(_blank_row(path, Path(path).stem, options, error, time.perf_counter() - t0))
                continue
            pending[_submit(pool, path, instance, options)] = (path, instance, time.perf_counter() - t0)
            if len(pending) >= slots:
                break
        if not pending:
            return
        finished, _ = wait(pending, return_when=FIRST_COMPLETED)
        for future in finished:
            path, instance, load = pending.pop(future)
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker process or a lost Dask task
                result = {"path": path, "error": f"executor: {type(exc).__name__}: {exc}", "time_solve": 0.0}
            yield writer.add(_row(result, instance, options, load, writer))


def _submit(pool: Executor, path: str, instance: Instance, options: Options) -> Future:
    """Submit, turning a refusal (a broken pool) into a failed future like any other."""
    try:
        return pool.submit(solve_instance, path, instance, options)
    except Exception as exc:  # noqa: BLE001
        future: Future = Future()
        future.set_exception(exc)
        return future


def _row(result: dict[str, Any], instance: Instance, options: Options, load: float, writer: CsvWriter) -> Row:
    """The CSV row of one result: write the schedule beside the CSV and validate the file
    as written, so ``valid`` vouches for what is on disk, not for an object in memory."""
    path = result["path"]
    row = _blank_row(path, instance.name, options, result["error"], load)
    row["time_solve"] = result["time_solve"]
    if "traceback" in result:
        logger.debug("%s:\n%s", path, result["traceback"])
    if "status" in result:
        row.update({k: result[k] for k in ("status", "objective", "lower_bound", "gap", "unfinished")})
        for stage, seconds in result["timings"].items():
            column = STAGES.get(stage, "time_other")
            row[column] = (row[column] or 0.0) + seconds
    if result.get("schedule") is not None:
        t0 = time.perf_counter()
        target = writer.schedule_path(path, instance.name, options.solver)
        write_text(target, json_text(Schedule.from_dict(result["schedule"]).to_dict()))
        violations = validate(instance, Schedule.load(target))
        row["valid"] = not violations
        row["schedule"] = os.path.relpath(target, writer.out_csv.parent)
        if violations and not row["error"]:
            row["error"] = f"re-validation: {violations[0]}"
        row["time_validate"] = time.perf_counter() - t0
    row["time_total"] = sum(row[c] or 0.0 for c in ("time_load", "time_solve", "time_validate"))
    return row


def _blank_row(path: str, name: str, options: Options, error: str, load: float) -> Row:
    """A row with what is known before solving; ``status`` stays ``error`` unless a result fills it."""
    row: Row = dict.fromkeys(COLUMNS)
    row.update(instance=path, name=name, solver=options.solver, status="error", seed=options.seed,
               trials=options.trials, time_limit=options.time_limit, time_load=load, time_total=load,
               schedule="", error=error)
    return row
