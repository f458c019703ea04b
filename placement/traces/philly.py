"""Jobs of the placement model from the Microsoft Philly job log.

The log (``timestamp, duration, num_gpus, gpu_time, cluster`` per job; see
``shared/data/traces/philly/README.md``) gives when a job was submitted, how long it
ran and on how many GPUs, but no model, batch size or worker/PS split. This docstring
is the documented derivation of every other field; the constants are module attributes,
and one :class:`numpy.random.Generator` seeded with ``seed`` makes every random choice,
so the same file and arguments always give the same jobs (with the same NumPy version).

Rows
    Only ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, naive local time), ``duration`` (s) and
    ``num_gpus`` are read; ``gpu_time`` equals duration x num_gpus in the published
    extract and ``cluster`` (the virtual cluster) is not used. Rows with duration <= 0 or
    num_gpus <= 0 are dropped (the count is logged); an unreadable value is an error
    naming the line. The rest are ordered by submission time (ties in file order).

Sampling (``sample``, ``start``)
    A *contiguous window* of ``sample`` consecutive submissions, beginning at a seeded
    uniform position (``Generator.integers``), or at the first submission at or after
    ``start`` when given; without ``sample`` every row (from ``start``) is taken.
    Contiguous rather than uniform: it keeps the trace's real arrival process (bursts of
    hyper-parameter sweeps, quiet nights), while 200 jobs drawn uniformly from 3.5
    months would arrive days apart and never compete for the cluster.

Arrivals
    arrival = floor(``time_scale`` x (timestamp - first timestamp of the window) /
    ``slot_seconds``). ``time_scale`` < 1 compresses the gaps (0.1: ten times the
    arrival rate); durations are not scaled.

Model profile
    Philly jobs used GPUs, so only the GPU models of ``placement/data/dl2_models.csv``
    (worker_gpu_slots > 0: six of eight) are used. They are ordered by model size (MB)
    and split into as many consecutive groups as there are GPU-time buckets
    (:data:`GPU_TIME_EDGES`: under 10 GPU-minutes, up to 2 GPU-hours, more; about 39 %,
    47 % and 14 % of Philly's jobs), so a job's GPU time (duration x num_gpus) picks a
    group: resnext-110 or wlm, seq2seq or inception-bn, resnet-50 or vgg-16; within the
    group the model is seeded uniform. The assumption is only that larger models train
    longer; the uniform choice keeps every sample a mix of models.

Per-profile fields (the rules of :mod:`placement.traces.generate`, reused from there)
    ``batch_seconds`` and ``gradient_mb`` (= model size) from the profile; worker and PS
    demands (1 GPU, the profile's cores, memory from the model size);
    ``worker_gbps`` from the measured inter-node rate; ``ps_gbps`` = m x worker_gbps
    with m seeded uniform in ``PS_GBPS_MULTIPLES`` (1, 2, 4); ``restart_seconds`` seeded
    uniform integer in ``RESTART_SECONDS`` (10..60); ``weight`` 1.

Workers and work
    ``max_workers`` U = num_gpus (each worker takes one GPU), capped at ``max_gpus`` when
    given; :func:`placement.traces.instance_from_jobs` further caps it at what the
    cluster can hold. ``min_workers`` = 1 (the model lets a job shrink; Philly's gang
    scheduling did not, but forcing U would make wide jobs wait for a whole free block).
    ``work_batches`` = ceil(duration x num_gpus / theta), theta being one worker's
    mini-batch time (MODEL.md section 4) at the rate the job had in Philly: local at
    :data:`REFERENCE_LOCAL_GBPS` (400, the ``local_gbps`` of :mod:`placement.model.clusters`'
    star and racks) when num_gpus <= :data:`LOCAL_GPUS` (8, Philly's largest servers),
    else spread at ``worker_gbps``. So num_gpus workers placed that way take the trace's
    duration (plus a restart and the rounding up to whole slots and batches); fewer
    workers (a cap, or a busy cluster) take proportionally longer, a local placement of
    a wider job is faster and a spread placement of a narrower one slower.

Job ids are ``p<line>``, the row's line number in the CSV file (header = line 1), so
every job can be traced back to its row; the list is in arrival order.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from placement.model.strict_json import FileFormatError, open_csv
from placement.traces.generate import PS_GBPS_MULTIPLES, RESTART_SECONDS, Profile, load_profiles
from placement.model.instance import Job

__all__ = ["GPU_TIME_EDGES", "LOCAL_GPUS", "REFERENCE_LOCAL_GBPS", "ENV_VAR", "default_path",
           "gpu_profiles", "read_philly", "reference_batch_time"]

logger = logging.getLogger(__name__)

#: GPU-time bucket edges in GPU-seconds (10 GPU-minutes, 2 GPU-hours).
GPU_TIME_EDGES = (600.0, 7200.0)
#: Jobs of at most this many GPUs ran inside one Philly server (local); wider ones spread.
LOCAL_GPUS = 8
#: The in-machine bandwidth (Gbps) of the local reference rate.
REFERENCE_LOCAL_GBPS = 400.0
#: Environment variable naming the Philly CSV when ``path`` is not given.
ENV_VAR = "PLACEMENT_PHILLY"
#: The shared data copy, beside the repository (``<repo>/../shared/data/...``).
_SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "traces" / "philly" / "philly.csv"
_COLUMNS = ("timestamp", "duration", "num_gpus")


@dataclass(frozen=True)
class _Row:
    line: int
    submitted: datetime
    duration: float
    gpus: int


def default_path() -> Path:
    """The trace file used when ``path`` is None: ``$PLACEMENT_PHILLY`` if set, else the
    shared data copy beside the repository. Raises FileNotFoundError saying where to put
    the file (it is not packaged: 3.4 MB, and the tests carry only its first rows)."""
    env = os.environ.get(ENV_VAR)
    if env:
        if not Path(env).is_file():
            raise FileNotFoundError(f"{ENV_VAR}={env!r} is not a file; point it at the "
                                    "Philly per-job CSV (philly.csv)")
        return Path(env)
    if _SHARED.is_file():
        return _SHARED
    raise FileNotFoundError(
        f"the Philly trace was not found at {_SHARED}; pass path=, set {ENV_VAR}=/path/to/"
        "philly.csv, or put the file there. It is the per-job extract of msr-fiddle/"
        "philly-traces made for the Pollux simulator: petuum/adaptdl, branch "
        "osdi21-artifact, simulator/traces/philly.csv")


def gpu_profiles() -> list[list[Profile]]:
    """The GPU models by model size, split into one group per GPU-time bucket."""
    ranked = sorted((p for p in load_profiles() if p.worker_gpu_slots > 0),
                    key=lambda p: (p.model_mb, p.model))
    groups = [list(g) for g in np.array_split(np.array(ranked, dtype=object),
                                              len(GPU_TIME_EDGES) + 1)]
    if not all(groups):
        raise ValueError(f"{len(ranked)} GPU profiles cannot fill {len(groups)} buckets")
    return groups


def reference_batch_time(profile: Profile, num_gpus: int) -> float:
    """One worker's mini-batch time at the rate the job had in Philly (module docstring)."""
    if num_gpus <= LOCAL_GPUS:
        return profile.batch_time(REFERENCE_LOCAL_GBPS)
    return profile.batch_time(profile.worker_gbps())


def read_philly(path: str | os.PathLike | None = None, *, sample: int | None = None,
                seed: int = 0, slot_seconds: float = 300, start: str | None = None,
                max_gpus: int | None = None, time_scale: float = 1.0) -> list[Job]:
    """Jobs derived from the Philly log by the rules of the module docstring.

    ``path`` defaults to :func:`default_path`. Arguments are validated (ValueError names
    the argument); the same file and arguments always give the same jobs."""
    _check_args(sample=sample, seed=seed, slot_seconds=slot_seconds, max_gpus=max_gpus,
                time_scale=time_scale)
    since = _parse_start(start)
    path = Path(path) if path is not None else default_path()
    rows = sorted(_read_rows(path), key=lambda r: (r.submitted, r.line))
    if since is not None:
        rows = [r for r in rows if r.submitted >= since]
    if not rows:
        raise ValueError(f"{path}: no usable rows" + (f" at or after {start}" if start else ""))
    rng = np.random.default_rng(seed)
    if sample is not None:
        if sample > len(rows):
            raise ValueError(f"sample={sample} is more than the {len(rows)} usable rows of {path}"
                             + (f" at or after {start}" if start else ""))
        first = 0 if since is not None else int(rng.integers(len(rows) - sample + 1))
        rows = rows[first:first + sample]

    groups = gpu_profiles()
    pick = rng.random(size=len(rows))
    multiple = rng.choice(PS_GBPS_MULTIPLES, size=len(rows))
    restart = rng.integers(RESTART_SECONDS[0], RESTART_SECONDS[1] + 1, size=len(rows))
    origin = rows[0].submitted
    jobs = []
    for k, r in enumerate(rows):
        gpu_time = r.duration * r.gpus
        group = groups[int(np.searchsorted(GPU_TIME_EDGES, gpu_time, side="right"))]
        p = group[int(pick[k] * len(group))]
        worker, ps = p.demands()
        wg = p.worker_gbps()
        offset = (r.submitted - origin).total_seconds()
        jobs.append(Job(
            id=f"p{r.line}",
            arrival=math.floor(time_scale * offset / slot_seconds),
            work_batches=math.ceil(gpu_time / reference_batch_time(p, r.gpus)),
            batch_seconds=p.batch_seconds, gradient_mb=p.model_mb, worker=worker, ps=ps,
            min_workers=1, max_workers=min(r.gpus, max_gpus) if max_gpus else r.gpus,
            worker_gbps=wg, ps_gbps=int(multiple[k]) * wg, weight=1,
            restart_seconds=int(restart[k])))
    logger.info("%s: %d jobs over %d slots of %g s", path, len(jobs), jobs[-1].arrival + 1,
                slot_seconds)
    return jobs


def _read_rows(path: Path) -> list[_Row]:
    """The usable rows; dropped ones are counted in the log, malformed ones raise."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: cannot read the Philly trace: no such file")
    # the input policy (docs/limits.md): at most PLACEMENT_MAX_FILE_MB read, UTF-8 by line and column
    _, header, reader = open_csv(path, ",".join(_COLUMNS))
    rows, dropped = [], 0
    missing = [c for c in _COLUMNS if c not in header]
    if missing:
        raise FileFormatError(f"{path}:line 1", f"missing column(s) {', '.join(missing)} "
                              f"(a Philly log has {', '.join(_COLUMNS)}, ...)")
    for cells in reader:
        if not any(c.strip() for c in cells):   # a blank line
            continue
        rec, line = dict(zip(header, cells)), reader.line_num
        submitted = _cell(path, line, "timestamp", rec, datetime.fromisoformat)
        duration = _cell(path, line, "duration", rec, float)
        gpus = _cell(path, line, "num_gpus", rec, float)
        if not (math.isfinite(duration) and math.isfinite(gpus) and gpus.is_integer()):
            raise FileFormatError(f"{path}:line {line}", f"duration {duration} must be "
                                  f"finite and num_gpus {gpus} a whole number")
        if duration <= 0 or gpus <= 0:
            dropped += 1
            continue
        rows.append(_Row(line, submitted, duration, int(gpus)))
    if dropped:
        logger.warning("%s: dropped %d of %d rows with duration <= 0 or num_gpus <= 0",
                       path, dropped, dropped + len(rows))
    return rows


def _cell(path: Path, line: int, column: str, rec: dict, parse):
    text = rec.get(column)
    try:
        return parse(text.strip())
    except (AttributeError, ValueError):
        raise FileFormatError(f"{path}:line {line}:{column}",
                              f"cannot read {text!r}") from None


def _parse_start(start: str | None) -> datetime | None:
    if start is None:
        return None
    try:
        return datetime.fromisoformat(start)
    except (TypeError, ValueError):
        raise ValueError(f"start must be a time like '2017-10-03 09:00:00', "
                         f"got {start!r}") from None


def _check_args(*, sample, seed, slot_seconds, max_gpus, time_scale) -> None:
    def whole(name: str, v, minimum: int) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")

    def positive(name: str, v) -> None:
        if (isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                or not math.isfinite(v) or v <= 0):
            raise ValueError(f"{name} must be a finite number > 0, got {v!r}")

    if sample is not None:
        whole("sample", sample, 1)
    whole("seed", seed, 0)
    if max_gpus is not None:
        whole("max_gpus", max_gpus, 1)
    positive("slot_seconds", slot_seconds)
    positive("time_scale", time_scale)
