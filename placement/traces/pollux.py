"""Jobs of the placement model from the Pollux simulator's workloads.

The Pollux paper's (OSDI'21) cluster simulator (artifact ``pollux-simulator``, Apache
2.0) replays workloads ``name,time,application,num_replicas,batch_size`` (``time``: the
submission second) against measured data of six applications. This module reads the
workloads with its own code (no pandas) and turns every row into a
:class:`~placement.model.instance.Job`, so the peer's workloads can be replayed in
:mod:`placement.simulate`. The measured data of an application, with the simulator's
semantics, is :class:`~placement.traces.pollux_application.PolluxApplication`: kept apart
because it is the simulator's own model, while this module is our translation of it into
the placement model. Every assumption is stated in the two module docstrings;
``docs/model.md`` ("Jobs without parameter servers (all-reduce)") says what the
conversion loses.

Conversion of a workload row (:func:`pollux_job`)
    - ``fixed`` (the simulator's Tiresias mode): min_workers = max_workers =
      ``num_replicas``.
    - ``tuned`` (its Optimus mode): min_workers 1, max_workers = the useful count K, the
      largest count in 1..min(B // min_local_bsz, 64) whose rate on the fewest machines
      (:func:`~placement.integrations.measured_speed.packed`) is at least half of count x
      the one-GPU rate (:func:`~placement.integrations.measured_speed.useful_count`; ncf:
      1, as the simulator's Optimus caps it). ``num_replicas`` is read but not used.
    - Speed: a speed table (MODEL.md 8) of the traces' iterations per second at batch size
      B, one entry per W = min_workers..max_workers, local and spread over 2, 4, 8 and 16
      machines (:func:`~placement.integrations.measured_speed.speed_table`: each entry is
      the traces' rate on one placement, W on one machine or packed on the rows' machine
      count; an entry the traces have no value for gets 1e-6 of the table's fastest
      rate). Exact at every entry's placement; a job spanning machines between two rows
      (3, 5-7, 9-15) reads the row below. ``batch_seconds`` is the table's best
      local time per mini-batch and worker, ``gradient_mb`` 0 (every rule reads the
      table); ``worker_gbps`` :data:`WORKER_GBPS`.
    - work_batches = the work above at B; worker demand ``{"gpu": 1}``, nothing else;
      ``restart_seconds`` 30 (the simulator's re-scale time, paid on every allocation
      change including the first); weight 1; arrival = floor(time / slot_seconds).
    - No parameter servers: the simulator's jobs all-reduce. The model (MODEL.md section
      3) requires S >= 1 PS with S ps_gbps >= W worker_gbps whenever W > 0, so the job
      gets one PS that demands nothing (``ps = {}``) and ``ps_gbps`` = max_workers x
      worker_gbps: min_ps(W) = 1 for every W. MODEL.md section 8 plans a proper
      extension (jobs that declare no PS).

Cluster (:func:`pollux_cluster`)
    The simulator's 16 nodes x 4 GPUs as a :func:`~placement.model.clusters.star` whose
    machines have only ``gpu`` capacity and whose links and ``local_gbps`` are 1e6 Gbps:
    the simulator models no network limit, so no link ever binds.

What is lost (details and measurements: docs/model.md)
    Speeds are exact at every table entry's placement; another layout of the same count
    and machines reads the entry's, a machine count between the rows the row below. A job
    completes after its iterations, not after the simulator's efficiency-weighted
    progress (a few percent of its run time either way). The batch size stays the row's (no Pollux adaptivity).
    Arrivals round down to a slot, completions up; interference is not modelled.

Errors
    A missing or unreadable file, a missing column, a row with the wrong number of
    cells, a bad number, an unknown application, a duplicate job name or a row whose
    configuration has no measured value raise :class:`~placement.model.strict_json.InstanceError`
    whose path names the file, the row (its line number; the header is row 1) and the
    column, e.g. ``workload.csv:row 4:batch_size: must be a positive integer, got 'x'``.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from placement.model.clusters import star
from placement.model.instance import Job
from placement.integrations.measured_speed import packed, speed_table
from placement.model.strict_json import InstanceError
from placement.model.topology import Topology
from placement.traces.pollux_application import (APPLICATIONS, GPUS_PER_NODE, MAX_REPLICAS,
                                                 PolluxApplication, parse_count, parse_number,
                                                 read_csv_rows)

__all__ = ["LINK_GBPS", "LOCAL_GBPS", "MODES", "RESTART_SECONDS", "SLOT_SECONDS", "WORKER_GBPS",
           "pollux_cluster", "pollux_job", "read_pollux_workload"]

#: Conversion modes: the simulator's Tiresias (fixed GPUs) and Optimus (tuned GPUs) jobs.
MODES = ("fixed", "tuned")
#: Gbps each worker is given (the stand-in PS's traffic; the speed is the table's).
WORKER_GBPS = 1.0
#: ``local_gbps`` of the machines (never binding).
LOCAL_GBPS = 1e6
#: Capacity of every link of :func:`pollux_cluster` (the simulator has no network limit).
LINK_GBPS = 1e6
#: The simulator's re-scale time (``Job.reallocate``: ``rescale_time = 30``).
RESTART_SECONDS = 30
#: The simulator's scheduling interval (``Cluster.step(seconds=60)``).
SLOT_SECONDS = 60
_WORKLOAD_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


# ----- workloads -----------------------------------------------------------------------------
def pollux_job(name: str, time: float, app: PolluxApplication, num_replicas: int,
               batch_size: int, mode: str, *, slot_seconds: float = SLOT_SECONDS,
               gpus_per_node: int = GPUS_PER_NODE) -> Job:
    """One workload row as a Job (rules: module docstring). ValueError where the traces
    have no value for the row's configuration."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "fixed":
        count = lo = num_replicas
    else:
        count, lo = app.useful_count(batch_size, gpus_per_node), 1
    work = app.total_iterations(batch_size)
    app.rate(packed(count, gpus_per_node), batch_size)  # ValueError naming what is unmeasured

    def rate(placement: tuple[int, ...]) -> float | None:
        try:
            return app.rate(placement, batch_size)
        except ValueError:
            return None

    table = speed_table(rate, lo, count, gpus_per_node)
    return Job.from_dict({
        "id": name, "arrival": int(math.floor(time / slot_seconds)), "work_batches": work,
        "batch_seconds": 1 / table.best_per_worker(local=True), "gradient_mb": 0,
        "worker": {"gpu": 1}, "ps": {}, "min_workers": lo, "max_workers": count,
        "worker_gbps": WORKER_GBPS, "ps_gbps": count * WORKER_GBPS, "weight": 1,
        "speed": table.to_dict(),
        "restart_seconds": RESTART_SECONDS}, name)


def read_pollux_workload(workload_csv: str | os.PathLike, traces_dir: str | os.PathLike,
                         mode: str, slot_seconds: float = SLOT_SECONDS, *,
                         gpus_per_node: int = GPUS_PER_NODE) -> list[Job]:
    """The jobs of a Pollux simulator workload, in file order (module docstring).

    ``traces_dir`` holds one folder per application (the artifact's ``traces/``);
    ``mode`` is ``fixed`` or ``tuned``. Errors: :class:`InstanceError` naming the file,
    row and column; a bad argument: ValueError."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not (isinstance(slot_seconds, (int, float)) and math.isfinite(slot_seconds)
            and slot_seconds > 0):
        raise ValueError(f"slot_seconds must be a positive number, got {slot_seconds!r}")
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be a positive integer, got {gpus_per_node!r}")
    path = Path(workload_csv)
    traces = Path(traces_dir)
    jobs, rows_of, apps = [], {}, {}
    for row, cells in read_csv_rows(path, _WORKLOAD_COLUMNS):
        where = f"{path}:row {row}"
        name = cells["name"]
        if not name:
            raise InstanceError(f"{where}:name", "empty cell")
        if name in rows_of:
            raise InstanceError(f"{where}:name", f"duplicate job name {name!r} (first on row "
                                f"{rows_of[name]})")
        rows_of[name] = row
        time = parse_number(f"{where}:time", cells["time"])
        application = cells["application"]
        if application not in APPLICATIONS:
            raise InstanceError(f"{where}:application", f"unknown application {application!r} "
                                f"(known: {', '.join(APPLICATIONS)})")
        replicas = parse_count(f"{where}:num_replicas", cells["num_replicas"])
        batch_size = parse_count(f"{where}:batch_size", cells["batch_size"])
        if application not in apps:
            try:
                apps[application] = PolluxApplication(traces / application)
            except InstanceError as exc:
                raise InstanceError(exc.path, f"{exc.reason} (traces of {application}, first "
                                    f"used on {where})") from None
        app = apps[application]
        sizes = list(app.validation)
        if not sizes[0] <= batch_size <= sizes[-1]:
            raise InstanceError(f"{where}:batch_size", f"{batch_size} is outside the batch sizes "
                                f"{sizes[0]}..{sizes[-1]} measured for {application}")
        if mode == "fixed" and replicas > MAX_REPLICAS:
            raise InstanceError(f"{where}:num_replicas", f"{replicas} is more than the "
                                f"simulator's {MAX_REPLICAS}")
        try:
            jobs.append(pollux_job(name, time, app, replicas, batch_size, mode,
                                   slot_seconds=slot_seconds, gpus_per_node=gpus_per_node))
        except ValueError as exc:
            column = "num_replicas" if mode == "fixed" else "batch_size"
            raise InstanceError(f"{where}:{column}", str(exc)) from None
    return jobs


def pollux_cluster(nodes: int = 16, gpus: int = GPUS_PER_NODE) -> Topology:
    """The simulator's cluster: ``nodes`` machines of ``gpus`` GPUs under one switch, with
    links and ``local_gbps`` of :data:`LINK_GBPS` / :data:`LOCAL_GBPS` (never binding)."""
    return star(nodes, capacity={"gpu": gpus}, local_gbps=LOCAL_GBPS, link_gbps=LINK_GBPS)
