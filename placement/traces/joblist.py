"""A plain CSV job list, so users can bring their own traces (one row per job).

The header names the columns, in any order; :func:`write_joblist` writes exactly::

    id,arrival,work_batches,batch_seconds,gradient_mb,worker_gpu,worker_cpu,worker_mem,ps_cpu,ps_mem,min_workers,max_workers,worker_gbps,ps_gbps,weight,restart_seconds

Each column is the MODEL.md job field of that name (``arrival`` in slots: the list does
not carry ``slot_seconds``, so whoever builds the instance must use the one the list was
made for); ``worker_<r>`` and ``ps_<r>`` are the demand of resource r (GPUs, cores, GB,
as :mod:`placement.model.clusters`; a PS takes no GPU). ``gradient_mb``, ``min_workers``,
``weight`` and ``restart_seconds`` may be left out (defaults 0, 1, 1, 0); every other
column is required.

Reading is strict, with the rules of :meth:`placement.model.instance.Job.from_dict`: an
unknown, duplicate or missing column, a row with the wrong number of cells, an empty
cell, text that is not a number, NaN, infinity, a negative or zero value where MODEL.md
forbids it, a number outside its bound or a count above its limit (docs/limits.md: the
input policy of every reader), a control character in an id, a count that is not an
integer (``3.0``) or a duplicate id raise :class:`~placement.model.strict_json.InstanceError`
whose path names the file, the line and the column, e.g.
``jobs.csv:line 4:worker_gpu: must be >= 0, got -1``. Lines are the file's (the header
is line 1), so an editor jumps to them; blank lines are skipped. Given the ``cluster``
the jobs will run on, a job that can never run there (a worker or PS that fits on no
machine, min_workers the cluster cannot hold) is reported on its line too. A cell
holding an integer literal reads as an int, anything else as a float, and writing uses
``repr``: reading what was written gives equal jobs, with equal types.
"""
from __future__ import annotations

import csv
import io
import numbers
import os
import re
from collections.abc import Iterable
from pathlib import Path

from placement.model import limits
from placement.model.strict_json import InstanceError, join, open_csv, parse_int
from placement.model.instance import Instance, Job
from placement.model.topology import Topology

__all__ = ["COLUMNS", "PS_RESOURCES", "WORKER_RESOURCES", "read_joblist", "write_joblist"]

WORKER_RESOURCES = ("gpu", "cpu", "mem")
PS_RESOURCES = ("cpu", "mem")
COLUMNS = ("id", "arrival", "work_batches", "batch_seconds", "gradient_mb",
           *(f"worker_{r}" for r in WORKER_RESOURCES), *(f"ps_{r}" for r in PS_RESOURCES),
           "min_workers", "max_workers", "worker_gbps", "ps_gbps", "weight", "restart_seconds")
_OPTIONAL = ("gradient_mb", "min_workers", "weight", "restart_seconds")
#: ASCII digits only (``\d`` alone also takes other scripts' digits: '１２', '٣')
_INT = re.compile(r"[+-]?\d+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:nan|inf|infinity)",
                    re.IGNORECASE | re.ASCII)


def read_joblist(path: str | os.PathLike, cluster: Topology | None = None) -> list[Job]:
    """The jobs of a job-list CSV, in file order (format and errors: module docstring);
    with ``cluster``, also checked to fit on it."""
    name, header, reader = open_csv(path, ",".join(COLUMNS))
    _check_header(name, header)
    jobs, rows_of, lines = [], {}, []
    most = limits.value(limits.JOBS)
    end = reader.line_num
    for cells in reader:
        row, end = end + 1, reader.line_num   # a record's first line (a quoted newline spans two)
        if not any(c.strip() for c in cells):
            continue
        where = f"{name}:line {row}"
        if len(jobs) == most:
            raise InstanceError(where, f"the file lists {limits.too_many(limits.JOBS, most + 1)}")
        if len(cells) != len(header):
            raise InstanceError(where, f"{len(cells)} cells, but the header has {len(header)} "
                                "columns")
        job = _job(where, dict(zip(header, (c.strip() for c in cells))))
        if job.id in rows_of:
            raise InstanceError(f"{where}:id", f"duplicate job id {job.id!r} (first on line "
                                f"{rows_of[job.id]})")
        rows_of[job.id] = row
        jobs.append(job)
        lines.append(row)
    if cluster is not None and jobs:
        _check_cluster(name, jobs, lines, cluster)
    return jobs


def _check_cluster(name: str, jobs: list[Job], lines: list[int], cluster: Topology) -> None:
    """Every job can run on ``cluster`` (Instance's own checks); an error names the line."""
    try:
        Instance(slot_seconds=1, horizon=max(j.arrival for j in jobs) + 1,
                 resources=WORKER_RESOURCES, topology=cluster, jobs=tuple(jobs))
    except InstanceError as exc:
        found = re.fullmatch(r"jobs\[(\d+)\]\.?(.*)", exc.path)
        if found is None:
            raise InstanceError(f"{name}: on this cluster", f"{exc.path}: {exc.reason}") from None
        column = found.group(2).replace(".", "_")
        where = f"{name}:line {lines[int(found.group(1))]}" + (f":{column}" if column else "")
        raise InstanceError(where, f"{exc.reason} (on this cluster)") from None


def write_joblist(jobs: Iterable[Job], path: str | os.PathLike) -> None:
    """Write ``jobs`` with the exact header of the module docstring (atomically: temp
    file and rename). A demand of a resource the format has no column for must be 0."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for job in jobs:
        for role, vector, allowed in (("worker", job.worker, WORKER_RESOURCES),
                                      ("ps", job.ps, PS_RESOURCES)):
            extra = {r: v for r, v in vector.items() if r not in allowed and v != 0}
            if extra:
                raise ValueError(f"job {job.id!r}: the job-list format has no column for its "
                                 f"{role} demand {extra}")
        writer.writerow([job.id, *(_show(v) for v in (
            job.arrival, job.work_batches, job.batch_seconds, job.gradient_mb,
            *(job.worker.get(r, 0) for r in WORKER_RESOURCES),
            *(job.ps.get(r, 0) for r in PS_RESOURCES),
            job.min_workers, job.max_workers, job.worker_gbps, job.ps_gbps, job.weight,
            job.restart_seconds))])
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)


def _check_header(name: str, header: list[str]) -> None:
    where = f"{name}:line 1"
    for i, column in enumerate(header):
        if column not in COLUMNS:  # named as a JSON key would be: quoted unless a plain name
            raise InstanceError(f"{where}:{join('', column)}", f"unknown column (expected "
                                f"{','.join(COLUMNS)})")
        if column in header[:i]:
            raise InstanceError(f"{where}:{column}", "duplicate column")
    for column in COLUMNS:
        if column not in header and column not in _OPTIONAL:
            raise InstanceError(f"{where}:{column}", "missing column")


def _job(where: str, cells: dict[str, str]) -> Job:
    """One row as a Job, checked by Job.from_dict; its JSON paths become column names."""
    values: dict[str, object] = {}
    for column, text in cells.items():
        if column == "id":
            values[column] = text
        elif text == "":
            raise InstanceError(f"{where}:{column}", "empty cell" + (
                " (leave the column out to use its default)" if column in _OPTIONAL else ""))
        elif _INT.fullmatch(text):
            values[column] = parse_int(text)   # thousands of digits: infinite, refused below
        elif _FLOAT.fullmatch(text):
            values[column] = float(text)
        else:
            raise InstanceError(f"{where}:{column}", f"must be a number, got {text!r}")
    doc = {k: v for k, v in values.items() if not k.startswith(("worker_", "ps_"))
           or k in ("worker_gbps", "ps_gbps")}
    doc["worker"] = {r: values[f"worker_{r}"] for r in WORKER_RESOURCES}
    doc["ps"] = {r: values[f"ps_{r}"] for r in PS_RESOURCES}
    try:
        return Job.from_dict(doc, "")
    except InstanceError as exc:
        raise InstanceError(f"{where}:{exc.path.replace('.', '_')}", exc.reason) from None


def _show(v: float) -> str:
    """Ints as ints, floats by repr: the shortest text that reads back to the same value."""
    if isinstance(v, bool):
        raise ValueError(f"a job field is a boolean ({v!r}), not a number")
    return str(int(v)) if isinstance(v, numbers.Integral) else repr(float(v))
