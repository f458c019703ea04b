"""The measured traces of one application of the Pollux simulator, read with the
simulator's semantics: iteration time of a placement at a batch size, and the iterations
to completion.

The Pollux paper's (OSDI'21) cluster simulator (artifact ``pollux-simulator``, Apache
2.0) keeps measured data of six applications, one folder each under ``traces/``. This
module reads a folder with its own code (NumPy and SciPy, no pandas). Kept apart from
:mod:`placement.traces.pollux`, which turns workload rows into jobs, because this is the
simulator's own model of an application (checked against its code by
``benchmarks/check_pollux_traces.py``), with nothing of ours in it.

Trace folder of one application (:class:`PolluxApplication`)
    ``placements.csv`` (``placement,local_bsz,step_time,sync_time``; a placement is the
    GPUs per node as digits, ``1122``), ``scalability.csv``
    (``num_nodes,num_replicas,local_bsz,step_time,sync_time``) and
    ``validation-<batch size>.csv`` (one row per epoch; only ``iteration``, the
    iterations done by the end of that epoch, is read). Other columns are ignored.

Iteration time of a placement at global batch size B (the simulator's
``Job.update_local_bsz`` with a target batch size, and ``Application.get_throughput``)
    W = GPUs of the placement; local_bsz = ceil(B / W); accumulation steps
    a = ceil(local_bsz / max_local_bsz) - 1, at least 1 when W = 1 and B exceeds the
    initial batch size; atomic batch size = ceil(local_bsz / (a + 1)), capped at
    floor(max_batch_size / (W (a + 1))). Step and sync time at the atomic batch size:
    when the placement (zeros dropped, turned to its lexicographically smallest rotation)
    has rows in ``placements.csv``, linear interpolation over their ``local_bsz``;
    otherwise linear interpolation (:class:`scipy.interpolate.LinearNDInterpolator`) over
    (num_nodes capped at 16, num_replicas, local_bsz) of the per-configuration means of
    ``placements.csv`` followed by the rows of ``scalability.csv``. A batch size outside
    a placement's measured range, or a configuration outside the convex hull, has no
    value (the simulator fails there too): :class:`ValueError`. Iteration time =
    step + a x (step - sync); the rate is its inverse (iterations per second).

Work (``Application.get_iteration`` at ``get_completion_epoch``)
    No application sets a target metric, so a job completes at epoch
    ``max_epochs - 1`` (0-based): work = the ``iteration`` column of that row,
    interpolated linearly in B between the two measured batch sizes around it (B must
    lie between the smallest and largest measured batch size). One iteration of the
    whole job is one mini-batch of our model.

Application settings (:data:`APPLICATIONS`)
    The numbers the simulator sets in code rather than data are copied into one table,
    citing ``applications.py`` (``APPLICATIONS``) and ``simulator.py``
    (``get_optimus_job_info``) of the artifact: ``max_epochs`` (bert 2, cifar10 100,
    ncf 10, imagenet 90, deepspeech2 80, yolov3 50), yolov3's ``max_local_bsz`` 8 and
    ncf's single replica under Optimus. Unset values take the simulator's defaults:
    initial batch size = the smallest validated one, max batch size = the largest,
    min / max local batch size = min / max of ``placements.csv``'s ``local_bsz``.

Errors
    A missing or unreadable file, a missing column, a row with the wrong number of
    cells or a bad number raise :class:`~placement.model.strict_json.InstanceError` whose
    path names the file, the row (its line number; the header is row 1) and the column.
    :func:`read_csv_rows`, :func:`parse_number` and :func:`parse_count` do the same for
    :mod:`placement.traces.pollux`'s workload files.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from scipy.interpolate import LinearNDInterpolator

from placement.integrations.measured_speed import packed, useful_count
from placement.model.strict_json import InstanceError, open_csv

__all__ = ["APPLICATIONS", "GPUS_PER_NODE", "MAX_NODES", "MAX_REPLICAS", "AppSettings",
           "PolluxApplication", "parse_count", "parse_number", "read_csv_rows"]

#: GPUs per node of the simulator's cluster and of its measured placements.
GPUS_PER_NODE = 4
#: Most replicas of a job (the simulator: "simulator can't handle more").
MAX_REPLICAS = 64
#: The interpolation over (num_nodes, ...) caps num_nodes here (``get_throughput``).
MAX_NODES = 16

_PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
_SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
_VALIDATION = re.compile(r"validation-(\d+)\.csv")
_INT = re.compile(r"[+-]?\d+", re.ASCII)   # not other scripts' digits ("１２")


@dataclass(frozen=True)
class AppSettings:
    """What the simulator sets in code for one application (None: its default)."""

    max_epochs: int
    max_local_bsz: int | None = None
    init_batch_size: int | None = None
    max_batch_size: int | None = None
    min_local_bsz: int | None = None
    #: Most replicas the simulator's Optimus gives the job (None: no extra cap).
    optimus_max_replicas: int | None = None


#: The simulator's settings per application: ``applications.py`` of the artifact
#: (``APPLICATIONS = {"bert": Application(..., max_epochs=2), ...}``, yolov3 with
#: ``max_local_bsz=8``; no ``target_metric`` anywhere, so every job runs max_epochs) and
#: ``simulator.py`` (``get_optimus_job_info``: ``if name == "ncf": max_replicas = 1``).
APPLICATIONS: dict[str, AppSettings] = {
    "bert": AppSettings(max_epochs=2),
    "cifar10": AppSettings(max_epochs=100),
    "ncf": AppSettings(max_epochs=10, optimus_max_replicas=1),
    "imagenet": AppSettings(max_epochs=90),
    "deepspeech2": AppSettings(max_epochs=80),
    "yolov3": AppSettings(max_epochs=50, max_local_bsz=8),
}


# ----- CSV reading ---------------------------------------------------------------------------
def read_csv_rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """(line number, {column: cell}) of every non-blank row; ``columns`` must be present."""
    name, header, reader = open_csv(path, ",".join(columns))
    for i, column in enumerate(header):
        if column in header[:i]:
            raise InstanceError(f"{name}:row 1:{column}", "duplicate column")
    for column in columns:
        if column not in header:
            raise InstanceError(f"{name}:row 1:{column}", f"missing column (expected "
                                f"{','.join(columns)})")
    rows = []
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise InstanceError(f"{name}:row {reader.line_num}", f"{len(cells)} cells, but the "
                                f"header has {len(header)} columns")
        rows.append((reader.line_num, dict(zip(header, (c.strip() for c in cells)))))
    return rows


def parse_number(where: str, text: str, *, positive: bool = False) -> float:
    """``text`` as a finite number >= 0 (> 0 if ``positive``), else InstanceError at ``where``."""
    try:
        v = float(text)
    except ValueError:
        raise InstanceError(where, f"must be a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise InstanceError(where, f"must be a {'positive' if positive else 'non-negative'} "
                            f"finite number, got {text!r}")
    return v


def parse_count(where: str, text: str) -> int:
    """``text`` as an integer >= 1, else InstanceError at ``where``."""
    if not _INT.fullmatch(text) or len(text) > 18 or int(text) < 1:   # 5000 digits: past int()'s limit
        shown = text if len(text) <= 40 else f"{text[:40]}...({len(text)} characters)"
        raise InstanceError(where, f"must be a positive integer, got {shown!r}")
    return int(text)


def _placement(where: str, text: str) -> tuple[int, ...]:
    if not text.isdigit() or not text.isascii() or set(text) == {"0"}:
        raise InstanceError(where, f"must be the GPUs per node as digits (e.g. 1122), got {text!r}")
    return _normalise(tuple(int(c) for c in text))


def _normalise(placement) -> tuple[int, ...]:
    """Zeros dropped, then the lexicographically smallest rotation (``get_throughput``)."""
    p = tuple(int(g) for g in placement if g)
    return min(p[i:] + p[:i] for i in range(len(p))) if p else p


# ----- one application -----------------------------------------------------------------------
class PolluxApplication:
    """One application's trace folder read with the simulator's semantics (module docstring).

    ``settings`` defaults to the :data:`APPLICATIONS` entry of the folder's name."""

    def __init__(self, trace_dir: str | os.PathLike, settings: AppSettings | None = None,
                 name: str | None = None):
        trace_dir = Path(trace_dir)
        self.name = name or trace_dir.name
        if settings is None:
            if self.name not in APPLICATIONS:
                raise InstanceError(str(trace_dir), f"unknown application {self.name!r} (known: "
                                    f"{', '.join(APPLICATIONS)})")
            settings = APPLICATIONS[self.name]
        self.settings = settings
        self.trace_dir = trace_dir
        self._read_placements(trace_dir / "placements.csv")
        self._read_scalability(trace_dir / "scalability.csv")
        self._read_validation(trace_dir)
        s = settings
        self.init_batch_size = s.init_batch_size or min(self.validation)
        self.max_batch_size = s.max_batch_size or max(self.validation)
        self.min_local_bsz = s.min_local_bsz or int(min(self._local_bsz_all))
        self.max_local_bsz = s.max_local_bsz or int(max(self._local_bsz_all))
        self.max_epochs = s.max_epochs
        #: 0-based epoch whose end completes a job (no target metric: the last one).
        self.completion_epoch = self.max_epochs - 1
        for bsz, (path, iterations) in self.validation.items():
            if len(iterations) <= self.completion_epoch:
                raise InstanceError(str(path), f"{len(iterations)} epochs, but {self.name} runs "
                                    f"{self.max_epochs} (max_epochs)")

    # reading
    def _read_placements(self, path: Path) -> None:
        by_placement: dict[tuple[int, ...], list[tuple[float, float, float]]] = {}
        keys, values = [], []
        for row, cells in read_csv_rows(path, _PLACEMENT_COLUMNS):
            where = f"{path}:row {row}"
            p = _placement(f"{where}:placement", cells["placement"])
            bsz = parse_number(f"{where}:local_bsz", cells["local_bsz"], positive=True)
            step = parse_number(f"{where}:step_time", cells["step_time"], positive=True)
            sync = parse_number(f"{where}:sync_time", cells["sync_time"])
            by_placement.setdefault(p, []).append((bsz, step, sync))
            keys.append((len(p), sum(p), bsz))
            values.append((step, sync))
        if not keys:
            raise InstanceError(str(path), "no rows")
        self._exact = {}
        for p, rows in by_placement.items():
            a = np.array(sorted(rows))
            if len(a) < 2 or np.any(np.diff(a[:, 0]) <= 0):
                raise InstanceError(str(path), f"placement {''.join(map(str, p))} needs at least two "
                                    "rows with distinct local_bsz")
            self._exact[p] = a
        self._local_bsz_all = [k[2] for k in keys]
        # Per-configuration means, in sorted key order (pandas' groupby(...).mean()).
        uniq, inverse = np.unique(np.array(keys), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        sums = np.zeros((len(uniq), 2))
        np.add.at(sums, inverse, np.array(values))
        self._means = (uniq, sums / np.bincount(inverse)[:, None])

    def _read_scalability(self, path: Path) -> None:
        keys, values = [], []
        for row, cells in read_csv_rows(path, _SCALABILITY_COLUMNS):
            where = f"{path}:row {row}"
            keys.append((parse_count(f"{where}:num_nodes", cells["num_nodes"]),
                         parse_count(f"{where}:num_replicas", cells["num_replicas"]),
                         parse_number(f"{where}:local_bsz", cells["local_bsz"], positive=True)))
            values.append((parse_number(f"{where}:step_time", cells["step_time"], positive=True),
                           parse_number(f"{where}:sync_time", cells["sync_time"])))
        self._scalability = (np.array(keys, dtype=float).reshape(-1, 3),
                             np.array(values, dtype=float).reshape(-1, 2))

    def _read_validation(self, trace_dir: Path) -> None:
        try:
            names = sorted(p.name for p in trace_dir.iterdir())
        except FileNotFoundError:
            raise InstanceError(str(trace_dir), "no such folder") from None
        except OSError as exc:
            raise InstanceError(str(trace_dir), f"cannot read: {exc}") from None
        self.validation: dict[int, tuple[Path, np.ndarray]] = {}
        for n in names:
            m = _VALIDATION.fullmatch(n)
            if not m or int(m.group(1)) < 1:
                continue
            path = trace_dir / n
            its = [parse_number(f"{path}:row {row}:iteration", cells["iteration"], positive=True)
                   for row, cells in read_csv_rows(path, ("iteration",))]
            self.validation[int(m.group(1))] = (path, np.array(its))
        if not self.validation:
            raise InstanceError(str(trace_dir / "validation-<batch size>.csv"), "no such file")
        self.validation = dict(sorted(self.validation.items()))

    @cached_property
    def _interpolator(self) -> LinearNDInterpolator:
        (k1, v1), (k2, v2) = self._means, self._scalability
        return LinearNDInterpolator(np.vstack([k1, k2]), np.vstack([v1, v2]))

    # semantics
    def step_sync(self, placement, local_bsz: float) -> tuple[float, float]:
        """(step_time, sync_time) of one atomic step at ``local_bsz`` on ``placement``
        (GPUs per node): ``Application.get_throughput``. ValueError where nothing was measured."""
        p = _normalise(placement)
        if not p:
            raise ValueError("an empty placement has no throughput")
        exact = self._exact.get(p)
        if exact is not None:
            x = exact[:, 0]
            if not x[0] <= local_bsz <= x[-1]:
                raise ValueError(f"{self.name}: local batch size {local_bsz:g} is outside the "
                                 f"{x[0]:g}..{x[-1]:g} measured on placement {p}")
            return (float(np.interp(local_bsz, x, exact[:, 1])),
                    float(np.interp(local_bsz, x, exact[:, 2])))
        point = [min(len(p), MAX_NODES), sum(p), local_bsz]
        step, sync = self._interpolator([point])[0]
        if not (math.isfinite(step) and math.isfinite(sync)):
            raise ValueError(f"{self.name}: (num_nodes, num_replicas, local_bsz) = "
                             f"({point[0]}, {point[1]}, {local_bsz:g}) lies outside the measured "
                             "configurations")
        return float(step), float(sync)

    def batch_config(self, num_replicas: int, batch_size: int) -> tuple[int, int]:
        """(atomic_bsz, accum_steps) of ``batch_size`` on ``num_replicas`` GPUs
        (``Job.update_local_bsz`` with a target batch size)."""
        local_bsz = math.ceil(batch_size / num_replicas - 1e-8)
        accum = math.ceil(local_bsz / self.max_local_bsz - 1e-8) - 1
        if num_replicas == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local_bsz / (accum + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (num_replicas * (accum + 1))))
        return atomic, accum

    def iteration_time(self, placement, batch_size: int) -> float:
        """Seconds per iteration of the whole job at global ``batch_size`` on ``placement``."""
        atomic, accum = self.batch_config(sum(_normalise(placement)), batch_size)
        step, sync = self.step_sync(placement, atomic)
        return step + accum * (step - sync)

    def rate(self, placement, batch_size: int) -> float:
        """Iterations per second of the whole job (1 / :meth:`iteration_time`)."""
        return 1.0 / self.iteration_time(placement, batch_size)

    def iterations(self, batch_size: float, epoch: int) -> float:
        """Iterations done by the end of 0-based ``epoch`` at ``batch_size``
        (``Application.get_iteration``: linear between the measured batch sizes)."""
        sizes = list(self.validation)
        if not sizes[0] <= batch_size <= sizes[-1]:
            raise ValueError(f"{self.name}: batch size {batch_size:g} is outside the measured "
                             f"{sizes[0]}..{sizes[-1]}")
        lower = max(b for b in sizes if b <= batch_size)
        upper = min(b for b in sizes if b >= batch_size)
        lo, hi = self.validation[lower][1][epoch], self.validation[upper][1][epoch]
        if lower == upper:
            return float(lo)
        return float(((batch_size - lower) * hi + (upper - batch_size) * lo) / (upper - lower))

    def total_iterations(self, batch_size: float) -> float:
        """Iterations to complete at ``batch_size`` (the end of the completion epoch)."""
        return self.iterations(batch_size, self.completion_epoch)

    def useful_count(self, batch_size: int, gpus_per_node: int = GPUS_PER_NODE,
                     max_replicas: int = MAX_REPLICAS) -> int:
        """:func:`~placement.integrations.measured_speed.useful_count` of the packed rates of
        1..min(batch_size // min_local_bsz, max_replicas, the application's Optimus cap)."""
        top = min(batch_size // self.min_local_bsz, max_replicas)
        if self.settings.optimus_max_replicas is not None:
            top = min(top, self.settings.optimus_max_replicas)
        top = max(1, top)
        return useful_count([self.rate(packed(c, gpus_per_node), batch_size) for c in range(1, top + 1)])

