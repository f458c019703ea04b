"""Online policies side by side on Philly samples; writes benchmarks/ONLINE.md.

Every policy of :data:`placement.online.registry.POLICIES` (the project's ``lp-rounding``
and ``greedy``; the baselines ``fifo``, ``drf``, ``tetris``, ``tiresias``, ``optimus``,
``oasis``, ``oasis-admit-all``) is played through :func:`placement.simulate.simulate` on
every (sample, cluster) pair, one run after the other in this one process, and compared on
average and p95 JCT, makespan, mean GPU utilisation, reconfigurations, unfinished jobs,
decision time per slot and contention (queueing). Each policy's average JCT is divided by
that of the best baseline of the same (sample, cluster). A policy with admission control
(``oasis``) is also scored as its paper scores it: acceptance rate, the admitted jobs'
average JCT and their total utility, beside the all-jobs average in which each rejected
job is charged the horizon (said so wherever it appears); ``oasis-admit-all`` (the same
prices, no rejection) is the fair JCT comparison. Then the per-slot decision time of
:class:`~placement.online.lp_policy.LPRoundingPolicy` with 200 active jobs on 64 machines
(``racks:8x8``) is measured on its own.

    python benchmarks/online.py                       # the default benchmark (~15 min on 2 cores)
    python benchmarks/online.py --quick               # smoke run, a few minutes; writes to a temp dir
    python benchmarks/online.py --samples philly-200-s2 philly:400:7:0.5 --clusters racks:4x4
    python benchmarks/online.py --only-decision       # only the 200-job decision time, printed

Samples: a name of ``instances/traces/<name>.csv`` (or a path to a job-list CSV made with
300-s slots, as those are), whose arrivals are re-counted in slots of ``--slot-seconds``
(``floor(arrival x 300 / slot_seconds)``: for a multiple of 300 this is exactly
``read_philly(..., slot_seconds=slot_seconds)`` with the file's other arguments, checked
against the Philly log when it is available); or ``philly:SAMPLE:SEED[:TIME_SCALE]``,
derived here by :func:`placement.traces.read_philly` (needs the Philly log, see
``instances/traces/README.md``).

Outputs: ``--out`` (Markdown, default ``benchmarks/ONLINE.md``) and, beside it in
``<dir>/<stem in lower case>/`` (default ``benchmarks/online/``), ``results.json`` and
``<sample>-<cluster>/{jct_cdf,utilisation}.png`` from :func:`placement.simulate.plot_simulation`.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)
from placement.bounds.pooled_bound import AverageJctBounds, average_jct_bounds
from placement.model.cluster_spec import parse_cluster
from placement.model.instance import Job
from placement.online.baselines import BASELINES
from placement.online.knowledge import INFORMATION, information_label
from placement.online.lp_policy import LPRoundingPolicy
from placement.online.registry import POLICIES, make_policy
from placement.online.scheduler import OnlineScheduler
from placement.simulate import SimulationResult, plot_simulation, simulate
from placement.model.topology import Topology
from placement.traces import read_joblist, read_philly
from placement.traces.philly import LOCAL_GPUS, REFERENCE_LOCAL_GBPS

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "instances" / "traces"
DEFAULT_OUT = Path(__file__).resolve().with_name("ONLINE.md")
#: Slot length the shipped job lists count arrivals in.
SHIPPED_SLOT_SECONDS = 300

DEFAULTS = dict(samples=["philly-200-s1", "philly-200-s2"], clusters=["racks:2x4", "pai:24"],
                slot_seconds=1800.0, jobs=None, decision_cluster="racks:8x8", decision_jobs=200,
                decision_slots=8)
QUICK = dict(samples=["philly-200-s1", "philly-200-s2"], clusters=["racks:2x4"],
             slot_seconds=3600.0, jobs=100, decision_cluster="racks:8x8", decision_jobs=200,
             decision_slots=5)
LOOKAHEAD = 8          # simulate()'s and the CLI's default
MODE = "reoptimise"    # the CLI's default; every policy has decide()

logger = logging.getLogger("online_bench")


# ----- machine and code -------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    cpu = cpu_model()
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    return {"nproc": nproc, "cpu": cpu, "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform()}


def code_state() -> dict[str, Any]:
    """The commit and any uncommitted change to the library code the run used."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    dirty = [line[3:] for line in git("status", "--porcelain", "--", "placement", "solvers").splitlines()]
    return {"commit": git("rev-parse", "--short", "HEAD"), "subject": git("log", "-1", "--format=%s"),
            "uncommitted": dirty}


# ----- samples -----------------------------------------------------------------------------------
@dataclasses.dataclass
class Sample:
    name: str
    jobs: list[Job]
    derivation: str          # how it was made (Markdown)
    spec: str
    all_jobs: list[Job]      # before --jobs cut it (the decision-time measurement uses these)


def _readme_rows() -> dict[str, str]:
    """file name -> the 'made by' cell of instances/traces/README.md."""
    rows = {}
    try:
        for line in (TRACES / "README.md").read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith(".csv`"):
                rows[cells[0].strip("`")] = cells[1]
    except OSError:
        pass
    return rows


def load_sample(spec: str, slot_seconds: float, n_jobs: int | None, check: bool) -> Sample:
    if spec.startswith("philly:"):
        parts = spec.split(":")[1:]
        if len(parts) not in (2, 3):
            raise ValueError(f"sample {spec!r}: expected philly:SAMPLE:SEED[:TIME_SCALE]")
        size, seed = int(parts[0]), int(parts[1])
        scale = float(parts[2]) if len(parts) == 3 else 1.0
        jobs = read_philly(sample=size, seed=seed, slot_seconds=slot_seconds, time_scale=scale)
        name = f"philly-{size}-s{seed}" + (f"-ts{scale:g}" if scale != 1.0 else "")
        call = f"read_philly(sample={size}, seed={seed}, slot_seconds={slot_seconds:g}, time_scale={scale:g})"
        derivation = f"`{call}` (derived in this run from the Philly log)"
    else:
        path = Path(spec)
        if not path.suffix:
            path = TRACES / f"{spec}.csv"
        name = path.stem
        if slot_seconds % SHIPPED_SLOT_SECONDS:
            raise ValueError(f"sample {spec!r}: its arrivals are in {SHIPPED_SLOT_SECONDS}-s slots, so "
                             f"--slot-seconds must be a multiple of {SHIPPED_SLOT_SECONDS} "
                             f"(got {slot_seconds:g}); or derive it with philly:SAMPLE:SEED")
        factor = int(slot_seconds // SHIPPED_SLOT_SECONDS)
        jobs = [dataclasses.replace(j, arrival=j.arrival // factor) for j in read_joblist(path)]
        made_by = _readme_rows().get(path.name)
        derivation = (f"`{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}`"
                      + (f", made by {made_by} (`instances/traces/README.md`)" if made_by else "")
                      + f"; arrivals re-counted in {slot_seconds:g}-s slots: "
                      f"`arrival // {factor}`")
        match = re.fullmatch(r"`read_philly\(sample=(\d+), seed=(\d+), slot_seconds=300\)`", made_by or "")
        if match and factor > 1:
            call = f"read_philly(sample={match[1]}, seed={match[2]}, slot_seconds={slot_seconds:g})"
            same = _same_as_log(jobs, int(match[1]), int(match[2]), slot_seconds) if check else None
            derivation += (f", which is `{call}`" + {True: " (checked against the Philly log in this run: "
                                                            "identical jobs)",
                                                     False: " — **differs from the Philly log in this run**",
                                                     None: " (not checked: Philly log not found)"}[same])
    all_jobs = jobs
    if n_jobs is not None and n_jobs < len(jobs):
        jobs = jobs[:n_jobs]
        name = f"{name}-first{n_jobs}"
        derivation += f"; only its first {n_jobs} jobs (in arrival order)"
    return Sample(name, jobs, derivation, spec, all_jobs)


def _same_as_log(jobs: list[Job], size: int, seed: int, slot_seconds: float) -> bool | None:
    try:
        return read_philly(sample=size, seed=seed, slot_seconds=slot_seconds) == jobs
    except FileNotFoundError:
        return None


def run_hours(job: Job) -> float:
    """Hours the job takes with all its GPUs at the reference rate (its logged duration)."""
    gbps = REFERENCE_LOCAL_GBPS if job.max_workers <= LOCAL_GPUS else job.worker_gbps
    return job.work_batches * job.batch_time(gbps) / job.max_workers / 3600


def sample_stats(s: Sample, slot_seconds: float) -> dict[str, Any]:
    gpus = [int(j.worker.get("gpu", 0)) * j.max_workers for j in s.jobs]
    hours = [run_hours(j) for j in s.jobs]
    return {"jobs": len(s.jobs), "last_arrival_slot": max(j.arrival for j in s.jobs),
            "arrival_span_h": max(j.arrival for j in s.jobs) * slot_seconds / 3600,
            "max_gpus": max(gpus), "requested_gpus": sum(gpus),
            "work_gpu_hours": float(sum(g * h for g, h in zip(gpus, hours))),
            "median_run_h": float(np.median(hours)), "longest_run_h": float(max(hours)),
            "jobs_under_one_slot": int(sum(h * 3600 <= slot_seconds for h in hours))}


def cluster_stats(topo: Topology) -> dict[str, Any]:
    return {"machines": len(topo.machines),
            "gpus": int(sum(m.capacity.get("gpu", 0) for m in topo.machines)),
            "switches": len(topo.switches)}


# ----- one run's measures -------------------------------------------------------------------------
def run_metrics(r: SimulationResult, slot_seconds: float, wall: float, cpu: float,
                busy_slots: int) -> tuple[dict[str, Any], dict[str, list]]:
    """Metrics of one run; ``busy_slots``: the slots the whole cluster needs for the
    sample's work (the contended start whose utilisation is reported separately)."""
    jobs = {j.id: j for j in r.instance.jobs}
    slots = r.slots
    allocated = np.zeros(slots, dtype=int)
    first: dict[str, int] = {}
    last_alloc = -1
    for s in r.schedule.slots:
        running = {a.job for a in s.allocations if a.workers > 0}
        allocated[s.t] = len(running)
        for j in running:
            first.setdefault(j, s.t)
        if running:
            last_alloc = max(last_alloc, s.t)
    unfinished = set(r.unfinished)
    diff = np.zeros(slots + 1, dtype=int)
    for j, job in jobs.items():
        end = slots - 1 if j in unfinished else job.arrival + round(r.jct[j] / slot_seconds) - 1
        diff[job.arrival] += 1
        diff[end + 1] -= 1
    active = np.cumsum(diff)[:slots]
    queued = active - allocated
    gpu = np.array(r.utilisation.get("gpu", ()))
    dec = np.array(r.decision_seconds)
    waiting = queued > 0
    finished = [v for j, v in r.jct.items() if j not in unfinished]
    waits = [(first[j] - jobs[j].arrival) * slot_seconds / 3600 for j in jobs if j in first]
    peak = int(active.max()) if slots else 0
    at_peak = dec[active == peak] if slots else dec
    d = r.decision_time
    m = {"policy": r.policy, "slots": slots, "horizon": r.horizon, "wall_seconds": wall, "cpu_seconds": cpu,
         "average_jct_h": r.average_jct / 3600, "p95_jct_h": r.p95_jct / 3600,
         "makespan_h": r.makespan / 3600, "gpu_utilisation_mean": float(gpu.mean()) if len(gpu) else 0.0,
         "busy_slots": busy_slots,
         "gpu_utilisation_busy": float(np.pad(gpu, (0, max(0, busy_slots - len(gpu))))[:busy_slots].mean())
         if busy_slots else None,
         "reconfigurations": r.reconfigurations, "unfinished": len(r.unfinished),
         "dropped_decisions": r.dropped, "violations": len(r.violations),
         "decision_median_ms": d["median"] * 1e3, "decision_p95_ms": d["p95"] * 1e3,
         "decision_max_ms": d["max"] * 1e3,
         "average_jct_finished_h": float(np.mean(finished)) / 3600 if finished else None,
         "mean_wait_to_start_h": float(np.mean(waits)) if waits else None,
         "never_started": len(jobs) - len(first),
         "mean_queued_jobs": float(queued.mean()) if slots else 0.0,
         "slots_with_waiting_jobs": float(waiting.mean()) if slots else 0.0,
         "gpu_utilisation_while_jobs_wait": float(gpu[waiting].mean()) if waiting.any() else None,
         "peak_active_jobs": peak, "slots_at_peak": int(len(at_peak)),
         "decision_at_peak_median_ms": float(np.median(at_peak)) * 1e3 if len(at_peak) else None,
         "decision_at_peak_max_ms": float(at_peak.max()) * 1e3 if len(at_peak) else None,
         "decision_max_active_jobs": int(active[int(dec.argmax())]) if len(dec) else 0,
         "last_allocation_slot": int(last_alloc),
         **admission_metrics(r)}
    n = max(last_alloc + 1, 1)   # after it nothing runs (only jobs that never will wait)
    series = {"slots": n,
              "gpu_utilisation": run_lengths(round(float(u), 4) for u in gpu[:n]),
              "decision_ms": run_lengths(round(float(x) * 1e3, 1) for x in dec[:n]),
              "active_jobs": run_lengths(int(x) for x in active[:n]),
              "running_jobs": run_lengths(int(x) for x in allocated[:n])}
    return m, series


def admission_metrics(r: SimulationResult) -> dict[str, Any]:
    """How a policy with admission control (``r.rejected`` not None: OASiS-like) is scored
    by its paper: acceptance rate, the admitted jobs' average JCT and their total utility
    (sum of the policy's f_j(completion) over admitted jobs that completed, in hours of
    weighted slack). ``average_jct_h`` stays the all-jobs average, a rejected job charged
    the horizon (MODEL.md's unfinished charge). None for a policy that never rejects."""
    if r.rejected is None:
        return {"admission_control": False, "submitted": len(r.jct), "rejected": None, "acceptance_rate": None,
                "average_jct_admitted_h": None, "admitted_completed": None, "admitted_utility_h": None}
    adm = r.admitted_average_jct
    return {"admission_control": True, "submitted": len(r.jct), "rejected": len(r.rejected),
            "acceptance_rate": r.acceptance_rate,
            "average_jct_admitted_h": adm / 3600 if adm is not None else None,
            "admitted_completed": len(r.utility or {}),
            "admitted_utility_h": r.admitted_utility / 3600 if r.admitted_utility is not None else None}


def _charged(m: dict[str, Any]) -> str:
    """The mark of an all-jobs average that includes rejected jobs charged the horizon."""
    return "†" if m.get("rejected") else ""


def run_lengths(values) -> list[list]:
    """[[value, repeats], ...]: the per-slot series of results.json (long tails of one job
    running alone are runs)."""
    out: list[list] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return out


def plot_copies(results: dict[str, SimulationResult], metrics: dict[str, dict]) -> tuple[dict[str, SimulationResult], int, float]:
    """Copies for plot_simulation: utilisation cut where every policy has stopped running
    anything, unfinished jobs' JCT drawn at the right edge (the largest finished JCT)."""
    span = max(m["last_allocation_slot"] for m in metrics.values()) + 2
    finished = [v for r in results.values() for j, v in r.jct.items() if j not in set(r.unfinished)]
    edge = max(finished) if finished else 0.0
    out = {}
    for name, r in results.items():
        unf = set(r.unfinished)
        label = name if not unf else f"{name} ({len(unf)} unfinished: drawn at {edge / 3600:.4g} h)"
        jct = {j: (min(v, edge) if j in unf else v) for j, v in r.jct.items()}
        util = {k: v[:span] for k, v in r.utilisation.items()}
        out[label] = dataclasses.replace(r, jct=jct, utilisation=util)
    return out, span, edge


# ----- decision time at 200 active jobs ------------------------------------------------------------
def decision_at_scale(sample: Sample, cluster: str, n_jobs: int, slots: int, slot_seconds: float) -> dict[str, Any]:
    """LPRoundingPolicy (defaults) in an OnlineScheduler with ``n_jobs`` jobs of the sample
    submitted at slot 0; steps 0..slots-1 are timed. No progress is reported, so every job
    stays active (remaining = its whole work) and from slot 1 on each has its previous
    slot's tasks, as in a running cluster."""
    jobs = [dataclasses.replace(j, arrival=0) for j in sample.all_jobs[:n_jobs]]
    topo = parse_cluster(cluster)
    policy = LPRoundingPolicy()
    sched = OnlineScheduler(topo, policy=policy, lookahead=LOOKAHEAD, slot_seconds=slot_seconds, mode=MODE)
    for j in jobs:
        sched.submit(j)
    rows = []
    for t in range(slots):
        active = len(sched.view(t).jobs)
        start = time.perf_counter()
        placed = sched.step(t)
        rows.append({"t": t, "active_jobs": active, "running_jobs": len(placed),
                     "seconds": time.perf_counter() - start,
                     "parts": {k: float(v) for k, v in policy.last_timings.items()}})
    secs = np.array([r["seconds"] for r in rows])
    parts = sorted({k for r in rows for k in r["parts"]})
    return {"sample": sample.name.split("-first")[0], "cluster": cluster, "jobs": len(jobs), "machines": len(topo.machines),
            "gpus": cluster_stats(topo)["gpus"], "slot_seconds": slot_seconds, "slots": rows,
            "median_s": float(np.median(secs)), "p95_s": float(np.percentile(secs, 95)),
            "max_s": float(secs.max()), "min_s": float(secs.min()),
            "parts_median": {k: float(np.median([r["parts"].get(k, 0.0) for r in rows])) for k in parts}}


# ----- Markdown ------------------------------------------------------------------------------------
def _bound_sentence(st: dict[str, Any], policies: list[str]) -> str:
    """How far the project's policies can at most be from the optimum: over the larger bound that
    holds for each run (the floor only for a run that finished every job)."""
    bounds = AverageJctBounds(floor=st["floor_h"], pooled=st.get("bound_h"), size=0)
    ours = []
    for p in ("lp-rounding", "greedy"):
        if p in policies:
            lower = bounds.for_run(finished_all=not st["runs"][p].get("unfinished"))
            if lower is not None:
                ours.append(f"`{p}` {st['runs'][p]['average_jct_h'] / lower - 1:.1%} above {lower:.2f} h")
    if not ours:
        return ""
    return (" Lower bounds: no valid schedule averages less than the pooled LP bound, none that finishes "
            "every job less than the floor; over the larger that holds for the run: " + ", ".join(ours) + ".")


def _f(x: Any, fmt: str = ".3g") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return format(x, fmt)


def _ms(x: float) -> str:
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}"


def _h(x: Any) -> str:
    return "–" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


def markdown(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    mach, code = doc["machine"], doc["code"]
    L = ["# Online policies on Philly samples", "",
         f"Command: `{doc['command']}`  ",
         f"Date: {doc['date']}  ",
         f"Machine: {mach['nproc']} cores ({mach['cpu']}), Python {mach['python']}, NumPy "
         f"{mach['numpy']}, {mach['platform']}; shared with other users, so wall times are noisy. "
         "Every run (and every timing) was made one after the other in this one process.  ",
         f"Code: commit `{code['commit']}` ({code['subject']})"
         + (f"; uncommitted changes at run time in: {', '.join('`' + f + '`' for f in code['uncommitted'])}"
            if code["uncommitted"] else "; no uncommitted changes in `placement/` or `solvers/`") + "  ",
         f"Runtime: {doc['runtime']['total_s'] / 60:.1f} min wall in all, {doc['runtime']['cpu_s'] / 60:.1f} min CPU "
         "of this process (the rest: other users' load). Wall: simulations "
         f"{doc['runtime']['simulations_s'] / 60:.1f} min, pooled bounds "
         f"{doc['runtime'].get('bounds_s', 0):.0f} s, plots and files "
         f"{doc['runtime']['plots_s']:.0f} s, decision-time measurement {doc['runtime']['decision_s']:.0f} s."
         + (" **Quick mode** (`--quick`): a smoke run, not the benchmark." if s["quick"] else ""),
         "",
         "Settings: every policy of `placement.online.registry.POLICIES` built with its defaults, "
         f"`simulate(jobs, topology=cluster, slot_seconds={s['slot_seconds']:g}, policy=...)` with its "
         f"defaults: lookahead {LOOKAHEAD}, mode `{MODE}`, no progress noise, no machine events, "
         "and the default horizon (`placement.simulate.default_horizon`: the run stops when every job "
         "has completed or at that cap). Baselines: "
         + ", ".join(f"`{b}`" for b in BASELINES) + "; the project's own: `lp-rounding`, `greedy`. "
         "Ratio = a policy's average JCT / the lowest average JCT among the baselines of the same "
         "(sample, cluster).",
         "", "## Samples", "",
         "Source: Microsoft's Philly traces (msr-fiddle/philly-traces, CC-BY-4.0; Jeon et al., USENIX "
         "ATC 2019) through the Pollux authors' per-job extract; model profiles from DL2. Derivation "
         "rules: `placement/traces/philly.py`'s docstring and `instances/traces/README.md`.", "",
         "| sample | how it was derived | jobs | arrivals span | GPUs per job (max) | GPUs requested (sum) "
         "| work (GPU-h) | median run | longest run | jobs shorter than a slot |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, smp in doc["samples"].items():
        st = smp["stats"]
        L.append(f"| `{name}` | {smp['derivation']} | {st['jobs']} | {st['arrival_span_h']:.1f} h "
                 f"(slots 0..{st['last_arrival_slot']}) | {st['max_gpus']} | {st['requested_gpus']} | "
                 f"{st['work_gpu_hours']:.0f} | {st['median_run_h']:.2f} h | {st['longest_run_h']:.1f} h | "
                 f"{st['jobs_under_one_slot']} |")
    L += ["", "\"Run\" = hours with all the job's GPUs at the reference rate (its logged duration, "
          "rounded up to whole mini-batches); work = GPUs x run. A job's JCT is at least one slot "
          f"({s['slot_seconds'] / 3600:g} h here), so the many short Philly jobs all count as one slot.",
          "", "## Clusters", "", "| cluster | machines | GPUs | switches |", "|---|---:|---:|---:|"]
    for c, cs in doc["clusters"].items():
        L.append(f"| `{c}` | {cs['machines']} | {cs['gpus']} | {cs['switches']} |")
    L += ["", "`racks:RxM`: R racks of M machines of 8 GPUs, 64 cores, 512 GB "
          "(`placement.model.clusters.racks`); `pai:N`: N real machines of the Alibaba PAI trace, mixed "
          "0/2/8-GPU types in homogeneous racks, 2:1 oversubscribed uplinks (`placement.model.clusters.pai`).",
          "", "## Average JCT / best baseline", ""]
    settings = doc["settings_run"]
    policies = doc["settings"]["policies"]
    L.append("| sample | cluster | best baseline (avg JCT) | no-contention floor | pooled LP bound | "
             + " | ".join(f"`{p}`" for p in policies) + " |")
    L.append("|---|---|---|---:|---:|" + "---:|" * len(policies))
    for st in settings:
        best = st["best_baseline"]
        head = f"`{best}` ({_h(st['runs'][best]['average_jct_h'])} h)" if best else "–"
        cells = []
        for p in policies:
            ratio = st["runs"][p].get("ratio_to_best_baseline")
            cell = _f(ratio, ".3f") + _charged(st["runs"][p])
            cells.append(f"**{cell}**" if p in ("lp-rounding", "greedy") else cell)
        floor = st.get("floor_h")
        floor_cell = (_f(floor / st["runs"][best]["average_jct_h"], ".3f") if best and floor is not None else "–")
        bound = st.get("bound_h")
        bound_cell = (_f(bound / st["runs"][best]["average_jct_h"], ".3f") if best and bound is not None else "–")
        L.append(f"| `{st['sample']}` | `{st['cluster']}` | {head} | {floor_cell} | {bound_cell} | "
                 + " | ".join(cells) + " |")
    L += ["", "Below 1: better than every baseline on that (sample, cluster). No-contention floor: the mean "
          "over jobs of `placement.model.evaluate.isolated_jct` (each job alone on the cluster at max_workers "
          "from its arrival, at its fastest per-batch time), over the best baseline's average JCT; no "
          "policy that finishes every job can have a lower ratio. Pooled LP bound: "
          "`placement.bounds.pooled_bound` (the LP of the whole horizon with the cluster as one machine of its "
          "summed capacity at its fastest speed, every weight 1; docs/formulation.md, 'The pooled "
          "bound'), a proven lower bound on any valid schedule's average JCT that, unlike the floor, "
          "counts the queueing, and forgets fragmentation, links and locality. A policy's ratio over "
          "this column's is an upper limit on its distance from the optimum. †: the policy rejected "
          "jobs, and "
          "its average is over all jobs with each rejected job charged the horizon (MODEL.md's "
          "unfinished charge): see the admission tables below for its admitted jobs."]
    for st in settings:
        cs = doc["clusters"][st["cluster"]]
        smp = doc["samples"][st["sample"]]["stats"]
        L += ["", f"## `{st['sample']}` on `{st['cluster']}`", "",
              f"{cs['gpus']} GPUs on {cs['machines']} machines. Contention: the sample's work "
              f"({smp['work_gpu_hours']:.0f} GPU-h) keeps every GPU busy for "
              f"{smp['work_gpu_hours'] / cs['gpus']:.0f} h; its jobs ask for {smp['requested_gpus']} GPUs in all "
              f"({smp['requested_gpus'] / cs['gpus']:.1f}x the cluster) within {smp['arrival_span_h']:.1f} h. "
              f"Over those first {st['contention']['busy_slots'] * s['slot_seconds'] / 3600:g} h the policies kept "
              f"{st['contention']['busy_utilisation_min']:.0%}–{st['contention']['busy_utilisation_max']:.0%} of the "
              "GPUs busy (column \"GPU util, busy start\"); the queueing columns show who waited."
              + _bound_sentence(st, policies),
              "",
              "| policy | information | avg JCT, all jobs (h) | / best baseline | p95 JCT (h) | makespan (h) | GPU util (mean) "
              "| GPU util, busy start | reconfigurations | unfinished | decision median (ms) | decision p95 (ms) "
              "| decision max (ms) | avg JCT of finished (h) | mean wait to start (h) | mean queued jobs "
              "| share of slots with a waiting job | GPU util while jobs wait | slots | run wall (s) | run CPU (s) |",
              "|---|---|" + "---:|" * 19]
        for p in policies:
            m = st["runs"][p]
            name = f"**{p}**" if p in ("lp-rounding", "greedy") else p
            L.append(f"| {name} | {m.get('information', 'oracle')} | {_h(m['average_jct_h'])}{_charged(m)} | "
                     f"{_f(m.get('ratio_to_best_baseline'), '.3f')}{_charged(m)} | "
                     f"{_h(m['p95_jct_h'])} | {_h(m['makespan_h'])} | {m['gpu_utilisation_mean']:.3f} | "
                     f"{_f(m['gpu_utilisation_busy'], '.3f')} | "
                     f"{m['reconfigurations']} | {m['unfinished']} | {m['decision_median_ms']:.1f} | "
                     f"{m['decision_p95_ms']:.1f} | {_ms(m['decision_max_ms'])} | {_h(m['average_jct_finished_h'])} | "
                     f"{_h(m['mean_wait_to_start_h'])} | {m['mean_queued_jobs']:.1f} | "
                     f"{m['slots_with_waiting_jobs']:.0%} | {_f(m['gpu_utilisation_while_jobs_wait'], '.3f')} | "
                     f"{m['slots']} | {m['wall_seconds']:.1f} | {m['cpu_seconds']:.1f} |")
        charged = [p for p in policies if st["runs"][p].get("rejected")]
        if charged:
            L += ["", "† Rejected jobs charged the horizon: the all-jobs average of "
                  + ", ".join(f"`{p}`" for p in charged) + " includes each rejected job at MODEL.md's "
                  "unfinished charge (the slots to the end of the run plus its work at full speed)."]
        admitting = [p for p in policies if st["runs"][p].get("admission_control")]
        if admitting:
            L += ["", "Admission control, scored as the OASiS paper scores it (its objective: the "
                  "admitted jobs' total utility, sum of f_j(completion), f_j(c) = weight x (T_j - c) x "
                  "slot: hours of weighted slack left in each job's window):", "",
                  "| policy | submitted | admitted | acceptance rate | avg JCT of admitted (h) "
                  "| avg JCT, all jobs, rejected jobs charged the horizon (h) | admitted and completed "
                  "| total admitted utility (h) |", "|---|" + "---:|" * 7]
            for p in admitting:
                m = st["runs"][p]
                L.append(f"| {p} | {m['submitted']} | {m['submitted'] - m['rejected']} | "
                         f"{m['acceptance_rate']:.3f} | {_h(m['average_jct_admitted_h'])} | "
                         f"{_h(m['average_jct_h'])} | {m['admitted_completed']} | "
                         f"{_f(m['admitted_utility_h'], '.4g')} |")
        notes = [f"`{p}`: {st['runs'][p]['dropped_decisions']} decisions dropped by the scheduler"
                 for p in policies if st["runs"][p]["dropped_decisions"]]
        notes += [f"`{p}`: {st['runs'][p]['violations']} MODEL.md violations in the executed schedule"
                  for p in policies if st["runs"][p]["violations"]]
        if notes:
            L += ["", "; ".join(notes) + "."]
        rel = Path(st["plots"][0]).parent
        L += ["", f"Plots: [JCT CDF]({rel}/jct_cdf.png), [utilisation over time]({rel}/utilisation.png) "
              f"(slots 0..{st['plot_span'] - 1}: after them no policy runs anything"
              + (f"; unfinished jobs are drawn at the largest finished JCT, {st['plot_edge_h']:.4g} h"
                 if any(st["runs"][p]["unfinished"] for p in policies) else "") + ")."]
    L += ["", "## Decision time of `lp-rounding`", "",
          "In the simulations above (wall time of `OnlineScheduler.step(t)` per slot, as `simulate` "
          "measures it; active = arrived and not completed):", "",
          "| sample | cluster | peak active jobs | slots at the peak | decision at the peak: median (ms) "
          "| max (ms) | all slots: median (ms) | p95 (ms) | max (ms) | active jobs in the slowest slot |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    largest = None
    for st in settings:
        m = st["runs"].get("lp-rounding")
        if m is None:
            continue
        key = (m["peak_active_jobs"], doc["clusters"][st["cluster"]]["gpus"])
        if largest is None or key > largest[0]:
            largest = (key, st, m)
        L.append(f"| `{st['sample']}` | `{st['cluster']}` | {m['peak_active_jobs']} | {m['slots_at_peak']} | "
                 f"{_f(m['decision_at_peak_median_ms'], '.1f')} | {_f(m['decision_at_peak_max_ms'], '.1f')} | "
                 f"{m['decision_median_ms']:.1f} | {m['decision_p95_ms']:.1f} | {m['decision_max_ms']:.1f} | "
                 f"{m['decision_max_active_jobs']} |")
    if largest:
        _, st, m = largest
        L += ["", f"Largest setting (most active jobs at once; then most GPUs): `{st['sample']}` on "
              f"`{st['cluster']}`: {m['peak_active_jobs']} active jobs at the peak, decision "
              f"{_f(m['decision_at_peak_median_ms'], '.1f')} ms median over the {m['slots_at_peak']} "
              f"slot(s) at that peak (max {_f(m['decision_at_peak_max_ms'], '.1f')} ms)."]
    dec = doc.get("decision_at_scale") or []
    if dec:
        d0 = dec[0]
        L += ["", f"At scale: `LPRoundingPolicy()` (defaults) in an `OnlineScheduler` on `{d0['cluster']}` "
              f"({d0['machines']} machines, {d0['gpus']} GPUs), slot_seconds {d0['slot_seconds']:g}, lookahead "
              f"{LOOKAHEAD}, with the sample's first {d0['jobs']} jobs all submitted at slot 0; steps "
              f"0..{len(d0['slots']) - 1} timed one after the other. No progress is reported, so all "
              f"{d0['jobs']} jobs stay active with their whole work, and from slot 1 on each has its "
              "previous slot's tasks (the stable-placement case of a running cluster). Measured by "
              f"`{doc['decision_command']}` (part of every run of this benchmark).", "",
              "| jobs from | active jobs | slots | median (s) | p95 (s) | max (s) | min (s) | median parts (s) |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]
        for d in dec:
            parts = ", ".join(f"{k} {v:.3f}" for k, v in d["parts_median"].items() if k != "partitions")
            if "partitions" in d["parts_median"]:
                parts += f"; partitions {d['parts_median']['partitions']:g}"
            active = sorted({r["active_jobs"] for r in d["slots"]})
            L.append(f"| `{d['sample']}` | {'/'.join(map(str, active))} | {len(d['slots'])} | {d['median_s']:.3f} | "
                     f"{d['p95_s']:.3f} | {d['max_s']:.3f} | {d['min_s']:.3f} | {parts} |")
        L += ["", "Per slot (s): " + "; ".join(
            f"`{d['sample']}` " + ", ".join(f"{r['seconds']:.3f}" for r in d["slots"]) for d in dec) + "."]
    L += ["", "## Reading the numbers", "",
          "- Unfinished jobs (the run reached the default horizon) are charged as MODEL.md section 4 "
          "does: the slots to the end of the run plus their remaining work at full speed. A policy that "
          "rejects jobs (`oasis` admits a job only if its payoff at the current prices is positive; a "
          "rejected job never runs) therefore runs to the horizon, and its all-jobs average JCT (marked †) "
          "mostly measures that cap: it is reported as its paper scores it in the admission tables "
          "(acceptance rate, the admitted jobs' average JCT, their total utility), and `oasis-admit-all` "
          "(the same prices and plans, every job admitted) is the JCT comparison that charges no "
          "rejection. \"avg JCT of finished\" is over the jobs a policy completed only, and a rejecting "
          "policy's mean GPU utilisation is diluted by the idle slots to the horizon. \"GPU util while "
          "jobs wait\" is the mean over slots in which some arrived job got no task.",
          "- Utilisation = GPUs used / GPUs of the cluster per slot, averaged over the slots simulated; "
          "a long-tailed sample (one job of hundreds of hours) leaves the cluster mostly idle after its "
          "busy start whatever the policy. \"GPU util, busy start\" averages over the first slots only: as "
          "many as the whole cluster needs for the sample's work (work GPU-h / the cluster's GPUs), the "
          "period in which a work-conserving policy could keep every GPU busy. Queueing: a job is queued "
          "in a slot when it has arrived, is not complete and got no task; \"wait to start\" is from "
          "arrival to its first slot with a task (jobs that never ran are left out).",
          "- Reconfigurations: MODEL.md's count in the executed schedule. Decision time: wall time of "
          "the scheduler's `step(t)` (view, policy, checks), noisy on this shared machine. The maximum "
          "matters for `oasis`: it plans each arriving job's whole window when the job arrives, so the "
          "slot of the arrival burst takes minutes while every later slot only executes plans (its "
          "median and p95 hide that slot).",
          "- The plots come from `placement.simulate.plot_simulation` (linear JCT axis): when some "
          "policy has very long JCTs, the bulk of short jobs is squeezed at the left edge; the tables "
          "and `results.json` have the numbers.",
          "- Policies are run as shipped, with their defaults; nothing was tuned for this benchmark.",
          f"- Files: `{doc['results_rel']}` (every number here, per-job JCTs and per-slot series up to "
          "each run's last allocation) and the plots named above.", ""]
    return "\n".join(L)


# ----- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--samples", nargs="+", default=None, metavar="SAMPLE",
                    help=f"shipped sample names, job-list CSVs or philly:SAMPLE:SEED[:TIME_SCALE] "
                         f"(default {' '.join(DEFAULTS['samples'])})")
    ap.add_argument("--clusters", nargs="+", default=None, metavar="SPEC",
                    help=f"cluster specs (default {' '.join(DEFAULTS['clusters'])})")
    ap.add_argument("--policies", nargs="+", default=None, metavar="NAME",
                    help=f"policy names (default all: {' '.join(POLICIES)})")
    ap.add_argument("--slot-seconds", type=float, default=None,
                    help=f"slot length (default {DEFAULTS['slot_seconds']:g}; --quick {QUICK['slot_seconds']:g})")
    ap.add_argument("--jobs", type=int, default=None,
                    help="use only each sample's first N jobs (default all; --quick 100)")
    ap.add_argument("--decision-slots", type=int, default=None,
                    help=f"slots timed at 200 active jobs (default {DEFAULTS['decision_slots']}; "
                         f"--quick {QUICK['decision_slots']}; 0 skips)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: racks:2x4, 3600-s slots, first 100 jobs, 5 timed slots; "
                         "writes under the temp dir unless --out is given")
    ap.add_argument("--out", default=None, help=f"Markdown report (default {DEFAULT_OUT.relative_to(ROOT)})")
    ap.add_argument("--only-decision", action="store_true",
                    help="only the decision time at 200 active jobs, printed (no files written)")
    ap.add_argument("--verbose", action="store_true", help="log the library's warnings and info")
    ap.add_argument("--information", choices=INFORMATION, default="oracle",
                    help="what the scheduler is told of job lengths, for every policy alike (docs/model.md); "
                         "default oracle")
    ap.add_argument("--estimate-error", type=float, default=0.0, metavar="SIGMA",
                    help="--information estimate: the truth times exp(SIGMA N(0,1))")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR,
                        format="%(levelname)s %(name)s: %(message)s")
    base = QUICK if args.quick else DEFAULTS
    samples_spec = args.samples or base["samples"]
    clusters = args.clusters or base["clusters"]
    policies = args.policies or list(POLICIES)
    slot_seconds = args.slot_seconds or base["slot_seconds"]
    n_jobs = args.jobs if args.jobs is not None else base["jobs"]
    decision_slots = args.decision_slots if args.decision_slots is not None else base["decision_slots"]
    if args.out:
        out = Path(args.out).resolve()
    elif args.quick:
        out = Path(tempfile.gettempdir()) / "placement-online-quick" / "ONLINE.md"
    else:
        out = DEFAULT_OUT
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        ap.error(f"unknown policies {', '.join(unknown)}; choose from {', '.join(POLICIES)}")
    topologies = {c: parse_cluster(c) for c in clusters}
    command = "python benchmarks/online.py" + ("" if argv is None and len(sys.argv) == 1 else
                                               " " + shlex.join(sys.argv[1:] if argv is None else argv))
    decision_command = "python benchmarks/online.py --only-decision" + (
        f" --decision-slots {decision_slots}" if decision_slots != DEFAULTS["decision_slots"] else "")
    t_start = time.perf_counter()

    samples = [load_sample(s, slot_seconds, n_jobs, check=not args.only_decision) for s in samples_spec]
    if args.only_decision:
        for smp in samples:
            d = decision_at_scale(smp, base["decision_cluster"], base["decision_jobs"], decision_slots, slot_seconds)
            print(f"{d['sample']} on {d['cluster']}: {d['jobs']} active jobs, {len(d['slots'])} slots: "
                  f"median {d['median_s']:.3f} s, p95 {d['p95_s']:.3f} s, max {d['max_s']:.3f} s; "
                  f"parts (median) {d['parts_median']}")
        return 0

    results_dir = out.parent / out.stem.lower()
    results_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "command": command, "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": machine_info(), "code": code_state(),
        "settings": {"samples": [s.name for s in samples], "clusters": clusters, "policies": policies,
                     "slot_seconds": slot_seconds, "jobs": n_jobs, "lookahead": LOOKAHEAD, "mode": MODE,
                     "baselines": [p for p in policies if p in BASELINES], "quick": args.quick},
        "samples": {s.name: {"spec": s.spec, "derivation": s.derivation, "stats": sample_stats(s, slot_seconds)}
                    for s in samples},
        "clusters": {c: cluster_stats(t) for c, t in topologies.items()},
        "series_format": "runs[*].series: per slot 0..slots-1 (to the run's last allocation), each "
                         "series as run-length pairs [value, repeats]; decision_ms rounded to 0.1 ms",
        "settings_run": [], "decision_command": decision_command,
        "results_rel": os.path.relpath(results_dir / "results.json", out.parent)}

    t_sim = 0.0
    t_plot = 0.0
    t_bound = 0.0
    cpu_start = time.process_time()
    runs = [(smp, c, p) for smp in samples for c in clusters for p in policies]
    bar = tqdm(total=len(runs), unit="run", desc="online benchmark", dynamic_ncols=True)
    for smp in samples:
        work = doc["samples"][smp.name]["stats"]["work_gpu_hours"] * 3600
        busy = {c: max(1, math.ceil(work / max(doc["clusters"][c]["gpus"], 1) / slot_seconds)) for c in clusters}
        for c in clusters:
            results: dict[str, SimulationResult] = {}
            metrics: dict[str, dict] = {}
            series: dict[str, dict] = {}
            for p in policies:
                bar.set_postfix_str(f"{smp.name} {c} {p}")
                start, cpu0 = time.perf_counter(), time.process_time()
                r = simulate(smp.jobs, topology=topologies[c], slot_seconds=slot_seconds,
                             policy=make_policy(p), lookahead=LOOKAHEAD, mode=MODE,
                             information=args.information, estimate_error=args.estimate_error)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
                t_sim += wall
                results[p] = r
                metrics[p], series[p] = run_metrics(r, slot_seconds, wall, cpu, busy[c])
                metrics[p]["jct_s"] = dict(r.jct)
                metrics[p]["information"] = information_label(r.information, r.estimate_error)
                bar.update(1)
            bar.set_postfix_str(f"{smp.name} {c} bounds")
            start = time.perf_counter()
            bounds = average_jct_bounds(max(results.values(), key=lambda r: r.instance.horizon).instance)
            floor_h, bound_h = bounds.floor / 3600, None if bounds.pooled is None else bounds.pooled / 3600
            t_bound += time.perf_counter() - start
            start = time.perf_counter()
            base_avg = {p: metrics[p]["average_jct_h"] for p in policies if p in BASELINES}
            best = min(base_avg, key=base_avg.get) if base_avg else None
            for p in policies:
                metrics[p]["ratio_to_best_baseline"] = (metrics[p]["average_jct_h"] / base_avg[best]
                                                        if best else None)
                metrics[p]["series"] = series[p]
            copies, span, edge = plot_copies(results, metrics)
            plot_dir = results_dir / f"{smp.name}-{c.replace(':', '-')}"
            paths = plot_simulation(copies, plot_dir)
            waits = [m["mean_wait_to_start_h"] for m in metrics.values() if m["mean_wait_to_start_h"] is not None]
            shares = [m["slots_with_waiting_jobs"] for m in metrics.values()]
            busy_util = [m["gpu_utilisation_busy"] for m in metrics.values()]
            doc["settings_run"].append({
                "sample": smp.name, "cluster": c, "best_baseline": best, "runs": metrics, "floor_h": floor_h,
                "bound_h": bound_h,
                "plots": [os.path.relpath(p_, out.parent) for p_ in paths], "plot_span": span,
                "plot_edge_h": edge / 3600,
                "contention": {"mean_wait_h_min": min(waits, default=None), "mean_wait_h_max": max(waits, default=None),
                               "waiting_share_min": min(shares), "waiting_share_max": max(shares),
                               "busy_slots": busy[c], "busy_utilisation_min": min(busy_util),
                               "busy_utilisation_max": max(busy_util)}})
            del results, copies
            t_plot += time.perf_counter() - start
    bar.close()

    start = time.perf_counter()
    doc["decision_at_scale"] = []
    if decision_slots > 0:
        for smp in tqdm(samples, desc="decision time at 200 jobs", unit="sample"):
            doc["decision_at_scale"].append(decision_at_scale(
                smp, base["decision_cluster"], base["decision_jobs"], decision_slots, slot_seconds))
    t_dec = time.perf_counter() - start
    doc["runtime"] = {"simulations_s": t_sim, "bounds_s": t_bound, "plots_s": t_plot, "decision_s": t_dec,
                      "total_s": time.perf_counter() - t_start,
                      "cpu_s": time.process_time() - cpu_start}
    _write(results_dir / "results.json", _compact_lists(json.dumps(doc, indent=1)) + "\n")
    _write(out, markdown(doc))
    print(f"wrote {out} and {results_dir} in {doc['runtime']['total_s'] / 60:.1f} min")
    for st in doc["settings_run"]:
        print(f"{st['sample']:>24} {st['cluster']:>10}  best baseline {st['best_baseline']}: " + "  ".join(
            f"{p} {_f(st['runs'][p]['ratio_to_best_baseline'], '.3f')}" for p in policies))
    return 0


def _compact_lists(text: str) -> str:
    """JSON with every list of plain numbers, and every list of those, on one line."""
    text = re.sub(r"\[\s*(-?[0-9][-0-9.eE+]*(?:,\s*-?[0-9][-0-9.eE+]*)*)\s*\]",
                  lambda m: "[" + ",".join(x.strip() for x in m.group(1).split(",")) + "]", text)
    return re.sub(r"\[\s*(\[[^\[\]]*\](?:,\s*\[[^\[\]]*\])*)\s*\]",   # lists of such lists
                  lambda m: "[" + ",".join(re.findall(r"\[[^\[\]]*\]", m.group(1))) + "]", text)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
