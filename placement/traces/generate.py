"""Seeded random instances built from measured training-job profiles.

This docstring is the documented derivation of every generated instance: each rule and
constant below is the one the code uses (the constants are module attributes).

Arguments of :func:`generate` (keyword-only): ``jobs`` (count), ``cluster`` (spec below,
default ``racks:2x4``), ``horizon`` (slots; default derived below), ``slot_seconds``
(300), ``seed`` (0), ``load`` (1.0), ``arrival_span`` (0.5: arrivals fall in at most
the first half of the horizon), ``max_workers`` (16: the largest U drawn),
``max_run_slots`` (8: the longest run, in slots, at U workers), ``restarts`` (True;
False sets every ``restart_seconds`` to 0, for which the exact time-indexed ILP is
exact, without changing any other draw) and ``name`` (default like
``racks2x4_j20_s0``: cluster, jobs, seed).

Cluster
    A spec of :func:`placement.model.cluster_spec.parse_cluster` (grammar there): ``star:N``,
    ``racks:RxM`` or ``pai:N``, with link speeds and machine options such as
    ``racks:2x4@25/100,gpu=4``.

Jobs (one :class:`numpy.random.Generator` seeded with ``seed`` draws everything)
    - Model: uniform over the rows of ``placement/data/dl2_models.csv`` (DL2, Peng et al.;
      see ``placement/data/README.md``) whose worker and one PS fit together on some
      machine of the cluster (GPU models are left out of a CPU-only cluster).
    - ``batch_seconds`` = the profile's; ``gradient_mb`` = the model's size in MB.
    - Worker demand: ``gpu`` = worker_gpu_slots / 4 (the profile counts quarter GPUs:
      1 GPU, or 0 for the CPU-only models), ``cpu`` = worker_cpu,
      ``mem`` = 4 + ceil(3 x model GB) GB (:data:`WORKER_MEM_BASE_GB`,
      :data:`MEM_MODEL_COPIES`: model, gradients and optimizer state, plus 4 GB of input
      pipeline). PS demand: ``cpu`` = ps_cpu, ``mem`` = 2 + ceil(3 x model GB) GB.
    - ``worker_gbps`` = inter-node MB/s x 8 / 1000, at least :data:`MIN_WORKER_GBPS`
      (0.1; it lifts only wlm, 0.083); ``ps_gbps`` = m x ``worker_gbps`` with m uniform
      in :data:`PS_GBPS_MULTIPLES` (1, 2, 4), so kappa = worker_gbps / ps_gbps is
      1, 1/2 or 1/4 PS per worker.
    - ``max_workers`` U: drawn from :data:`WORKER_SIZES` (1, 2, 4, 8, 16) with
      :data:`WORKER_SIZE_PROBS` (0.2, 0.25, 0.25, 0.2, 0.1: mostly small jobs, a few
      wide ones), restricted to sizes <= the ``max_workers`` argument
      (probabilities renormalised), then capped at what the cluster holds: the sum over
      machines of L_h, the most workers that fit on machine h together with their
      ceil(kappa W) PSs (so a capacity-feasible placement always exists).
    - ``min_workers``: 1; with probability :data:`MIN_WORKERS_PROB` (0.2) and U >= 2 it
      is ceil(U / 2), capped at max_h L_h so that one machine can always run the job.
    - ``work_batches`` B = ceil(d x slot_seconds x U / theta_L): the job runs for d slots
      at U workers when local, theta_L being its mini-batch time at the largest
      ``local_gbps`` among the machines that fit it (restarts not counted). d is
      log-uniform on [1, ``max_run_slots``].
    - ``restart_seconds``: an integer uniform on :data:`RESTART_SECONDS` (10..60 s);
      ``weight`` 1.

Arrivals
    Each job's offered work is its dominant share (the largest fraction of the cluster's
    total capacity of any resource that U workers and ceil(kappa U) PSs take) times d
    slots. Jobs arrive as a Poisson process conditioned on ``jobs`` arrivals within a
    window of A = (total offered work) / ``load`` slots: sorted uniform times on [0, A),
    floored to slots; job ids ``j0, j1, ...`` follow arrival order. ``load`` 1.0 offers
    about as much work as the cluster can do during the window (its GPUs roughly busy).
    An explicit ``horizon`` caps the window at ``arrival_span`` x horizon (arrivals then
    come faster than ``load`` asks).

Horizon (when not given)
    max(ceil(A / ``arrival_span``), c + 1), where c is the slot in which the last job
    completes in :func:`placement.traces.first_fit.first_fit_schedule`: a plain
    first-come-first-served schedule, each job local on one machine (rules there). It is
    a valid schedule, so c + 1 slots are provably enough to finish every job (MODEL.md
    section 4 asks benchmark horizons to be so). More than ``PLACEMENT_MAX_HORIZON``
    slots (docs/limits.md), like ``jobs`` above ``PLACEMENT_MAX_JOBS``, is a ValueError.

The same arguments give the identical instance (with the same NumPy version: NumPy may
change a Generator's streams between releases; ``benchmarks/make_suites.py --check``
notices).
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path
from dataclasses import dataclass
from importlib import resources as package_files

import numpy as np

from placement.model import clusters
from placement.model import limits
from placement.model.cluster_spec import parse_cluster, tidy
from placement.traces.first_fit import first_fit
from placement.model.instance import MB_TO_GB, TOL, Instance, Job, demand_vector
from placement.model.strict_json import InstanceError, string

__all__ = ["Profile", "default_name", "generate", "load_profiles"]

PROFILE_FILE = "dl2_models.csv"
GPU_SLOTS_PER_GPU = 4
WORKER_MEM_BASE_GB = 4
PS_MEM_BASE_GB = 2
MEM_MODEL_COPIES = 3
MIN_WORKER_GBPS = 0.1
PS_GBPS_MULTIPLES = (1, 2, 4)
WORKER_SIZES = (1, 2, 4, 8, 16)
WORKER_SIZE_PROBS = (0.2, 0.25, 0.25, 0.2, 0.1)
MIN_WORKERS_PROB = 0.2
RESTART_SECONDS = (10, 60)


@dataclass(frozen=True)
class Profile:
    """One measured model of the DL2 testbed (a row of ``dl2_models.csv``)."""

    model: str
    batch_seconds: float
    model_mb: float
    inter_node_mb_per_s: float
    intra_node_mb_per_s: float
    worker_cpu: float
    worker_gpu_slots: int
    ps_cpu: float

    def demands(self) -> tuple[dict[str, float], dict[str, float]]:
        """Worker and PS demand vectors (rules in the module docstring)."""
        copies = math.ceil(MEM_MODEL_COPIES * self.model_mb / 1000)
        worker = {"gpu": tidy(self.worker_gpu_slots / GPU_SLOTS_PER_GPU), "cpu": tidy(self.worker_cpu),
                  "mem": WORKER_MEM_BASE_GB + copies}
        return worker, {"cpu": tidy(self.ps_cpu), "mem": PS_MEM_BASE_GB + copies}

    def worker_gbps(self) -> float:
        """A worker's measured inter-machine bandwidth, in Gb/s (at least MIN_WORKER_GBPS)."""
        return round(max(MIN_WORKER_GBPS, self.inter_node_mb_per_s * 8 / 1000), 6)

    def batch_time(self, gbps: float) -> float:
        """Seconds per mini-batch when the gradient exchange runs at ``gbps`` (MODEL.md 4)."""
        return self.batch_seconds + 2 * self.model_mb * MB_TO_GB / gbps


def load_profiles() -> tuple[Profile, ...]:
    """The packaged profile table (read from the installed package, never from a path
    relative to the working directory, so generation works from anywhere)."""
    text = package_files.files("placement.data").joinpath(PROFILE_FILE).read_text()
    rows = list(csv.DictReader(text.splitlines()))
    return tuple(Profile(r["model"], float(r["batch_seconds"]), float(r["model_mb"]),
                         float(r["inter_node_mb_per_s"]), float(r["intra_node_mb_per_s"]),
                         float(r["worker_cpu"]), int(r["worker_gpu_slots"]), float(r["ps_cpu"]))
                 for r in rows)


# ----- the generator ----------------------------------------------------------------------
def generate(*, jobs: int, cluster: str = "racks:2x4", horizon: int | None = None,
             slot_seconds: float = 300, seed: int = 0, load: float = 1.0,
             arrival_span: float = 0.5, max_workers: int = 16, max_run_slots: float = 8,
             restarts: bool = True, name: str | None = None) -> Instance:
    """A random instance drawn by the rules of the module docstring.

    Keyword-only and validated (``ValueError`` names the argument), so a command line is
    a thin wrapper; the same arguments always give the identical instance."""
    _check_args(jobs=jobs, cluster=cluster, horizon=horizon, slot_seconds=slot_seconds,
                seed=seed, load=load, arrival_span=arrival_span, max_workers=max_workers,
                max_run_slots=max_run_slots, restarts=restarts, name=name)
    topology = parse_cluster(cluster)
    resources = clusters.RESOURCES
    cap = np.array([[m.capacity.get(r, 0) for r in resources] for m in topology.machines],
                   dtype=float)
    total = cap.sum(axis=0)
    local = np.array([m.local_gbps for m in topology.machines], dtype=float)
    profiles = [p for p in load_profiles() if _local_max(p, 1, 1.0, cap).max() >= 1]
    if not profiles:
        raise ValueError(f"cluster {cluster!r}: no model's worker fits on a machine beside "
                         "one PS (machines too small)")

    rng = np.random.default_rng(seed)
    sizes = [s for s in WORKER_SIZES if s <= max_workers]
    probs = np.array(WORKER_SIZE_PROBS[:len(sizes)]) / sum(WORKER_SIZE_PROBS[:len(sizes)])
    model_ix = rng.integers(len(profiles), size=jobs)
    size_draw = rng.choice(sizes, size=jobs, p=probs)
    run_slots = np.exp(rng.uniform(0.0, math.log(max_run_slots), size=jobs))
    multiple = rng.choice(PS_GBPS_MULTIPLES, size=jobs)
    min_coin = rng.random(size=jobs)
    restart = rng.integers(RESTART_SECONDS[0], RESTART_SECONDS[1] + 1, size=jobs)

    drafts, offered = [], 0.0
    for k in range(jobs):
        p = profiles[model_ix[k]]
        mult = int(multiple[k])
        fit = _local_max(p, int(size_draw[k]), 1.0 / mult, cap)
        U = int(min(size_draw[k], fit.sum()))
        m = math.ceil(U / 2) if U >= 2 and min_coin[k] < MIN_WORKERS_PROB else 1
        m = min(m, int(fit.max()))
        worker, ps = p.demands()
        theta = p.batch_time(float(local[fit >= 1].max()))
        ps_count = math.ceil(U / mult)
        need = U * demand_vector(worker, resources) + ps_count * demand_vector(ps, resources)
        share = max(need[r] / total[r] for r in range(len(resources)) if total[r] > 0)
        offered += share * run_slots[k]
        wg = p.worker_gbps()
        drafts.append(dict(work_batches=math.ceil(run_slots[k] * slot_seconds * U / theta),
                           batch_seconds=p.batch_seconds, gradient_mb=p.model_mb,
                           worker=worker, ps=ps, min_workers=m, max_workers=U,
                           worker_gbps=wg, ps_gbps=mult * wg, weight=1,
                           restart_seconds=int(restart[k]) if restarts else 0))

    window = offered / load
    if horizon is not None:
        window = min(window, arrival_span * horizon)
    arrivals = np.floor(np.sort(rng.uniform(0.0, window, size=jobs))).astype(int)
    job_list = tuple(Job(id=f"j{k}", arrival=int(a), **d)
                     for k, (a, d) in enumerate(zip(arrivals, drafts)))
    if horizon is None:
        most = limits.value(limits.HORIZON)
        _, completion = first_fit(job_list, topology, resources, slot_seconds, limit=most)
        horizon = max(math.ceil(window / arrival_span), max(completion) + 1, 1)
        if horizon > most or min(completion) < 0:
            raise ValueError(f"these jobs need more than {most} slots, the limit of "
                             f"{limits.HORIZON.env} ({limits.DOC}): raise it, or pass "
                             "--horizon, fewer jobs or a larger cluster")
    return Instance(slot_seconds=slot_seconds, horizon=horizon, resources=resources,
                    topology=topology, jobs=job_list,
                    name=name if name is not None else default_name(cluster, jobs, seed))


def default_name(cluster: str, jobs: int, seed: int) -> str:
    """A file-friendly name such as ``racks2x4-25-100-gpu4_j20_s3`` (a cluster file: its stem)."""
    if cluster.endswith(".json") or Path(cluster).is_file():
        cluster = Path(cluster).stem
    tag = re.sub(r"[^A-Za-z0-9.]+", "-", re.sub("[:=]", "", cluster)).strip("-")
    return f"{tag}_j{jobs}_s{seed}"


def _check_args(**a) -> None:
    def integer(key: str, minimum: int) -> None:
        v = a[key]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum:
            raise ValueError(f"{key} must be an integer >= {minimum}, got {v!r}")

    def real(key: str, low: float, high: float = math.inf, low_open: bool = True) -> None:
        v = a[key]
        ok = (not isinstance(v, bool) and isinstance(v, (int, float, np.number))
              and math.isfinite(v) and (v > low if low_open else v >= low) and v <= high)
        if not ok:
            lo = f"> {low}" if low_open else f">= {low}"
            hi = f" and <= {high}" if high < math.inf else ""
            raise ValueError(f"{key} must be a finite number {lo}{hi}, got {v!r}")

    integer("jobs", 1)
    integer("seed", 0)
    integer("max_workers", 1)
    if a["horizon"] is not None:
        integer("horizon", 1)
    for key, limit in (("jobs", limits.JOBS), ("horizon", limits.HORIZON),
                       ("max_workers", limits.WORKERS)):
        if a[key] is not None and a[key] > limits.value(limit):
            raise ValueError(f"{key}: {limits.too_many(limit, a[key])}")
    real("slot_seconds", 0)
    reason = limits.SLOT.check(a["slot_seconds"], True)
    if reason:
        raise ValueError(f"slot_seconds {reason}")
    real("load", 0)
    if not 1e-6 <= a["load"] <= 1e6:   # 1e-308 spread the arrivals over infinitely many slots
        raise ValueError(f"load must be between 1e-06 and 1e+06 (the bound in {limits.DOC}), got {a['load']!r}")
    real("arrival_span", 0, 1)
    real("max_run_slots", 1, low_open=False)
    if not isinstance(a["restarts"], bool):
        raise ValueError(f"restarts must be True or False, got {a['restarts']!r}")
    if a["name"] is not None and (not isinstance(a["name"], str) or not a["name"]):
        raise ValueError(f"name must be a non-empty string, got {a['name']!r}")
    if a["name"] is not None:   # what the loader takes back: no control characters
        string(a["name"], "name", InstanceError)


def _local_max(p: Profile, upto: int, kappa: float, cap: np.ndarray) -> np.ndarray:
    """Per machine, the most workers (<= ``upto``) of profile ``p`` that fit on it with
    their ceil(kappa W) PSs (kappa = 1/m is exact for the multiples used)."""
    worker, ps = p.demands()
    a, b = demand_vector(worker, clusters.RESOURCES), demand_vector(ps, clusters.RESOURCES)
    best = np.zeros(len(cap), dtype=int)
    for w in range(1, upto + 1):
        fits = np.all(w * a + math.ceil(kappa * w) * b <= cap + TOL, axis=1)
        best = np.where(fits, w, best)
    return best
