"""Idealised list schedules for a Philly sample on a real cluster, beside the proven bounds: how
low the average JCT goes with a classic rule and placement for free, and how low it provably can go.

Usage: python benchmarks/list_reference.py [--samples philly-200-s1 philly-200-s2]
       [--clusters racks:2x4 pai:24] [--slot-seconds 1800] [--out benchmarks/LIST_REFERENCE.md]

The samples and clusters are those of ``benchmarks/online.py`` (same loader). Every reference
re-decides each slot from scratch: the arrived, unfinished jobs in one priority order, each given
the machine with free GPUs where it runs fastest alone, local, with W = min(max_workers, the
machine's free GPUs) workers (SRPT-FM, shortest remaining time on the fastest machine: optimal for
the mean completion time on uniform machines with preemption and no arrivals, Gonzalez 1977).
It pays no restart, needs no PS, ignores CPU and memory and never spreads; a job completes at the
end of the slot in which its work is done, as in MODEL.md. Orders: shortest remaining time at full
size first, and smallest remaining area (that time x its GPUs) first.

These are references, not bounds (neither rule is optimal with arrivals and elastic jobs); the
bounds beside them are (``placement.bounds.pooled_bound.average_jct_bounds``): the no-contention floor
(``placement.model.evaluate.isolated_jct``) and the pooled LP bound of the jobs on the cluster over
the longer of the two list schedules (so they hold for every valid schedule at least as short).
``benchmarks/ONLINE.md`` has the policies' averages.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from online import load_sample  # noqa: E402
from placement.model.cluster_spec import parse_cluster  # noqa: E402
from placement.model.clusters import RESOURCES  # noqa: E402
from placement.model.instance import Instance, Job  # noqa: E402
from placement.bounds.pooled_bound import average_jct_bounds  # noqa: E402
from placement.model.topology import Topology  # noqa: E402


def list_schedule(jobs: list[Job], topology: Topology, slot: float, order: str) -> tuple[float, int]:
    """Average JCT (s) of the idealised list schedule (module docstring) and its slots."""
    machines = [(float(m.capacity.get("gpu", 0)), m.local_gbps) for m in topology.machines]
    machines = [m for m in machines if m[0] >= 1]
    widest, fastest = max(g for g, _ in machines), max(b for _, b in machines)
    left = {j.id: j.work_batches for j in jobs}
    jct: dict[str, float] = {}
    t = 0
    while len(jct) < len(jobs):
        def key(j: Job) -> tuple[float, str]:
            size = min(j.max_workers, widest)
            hours = left[j.id] * j.batch_time(fastest) / size
            return (hours * size if order == "area" else hours), j.id
        free = [g for g, _ in machines]
        for j in sorted((j for j in jobs if j.arrival <= t and j.id not in jct), key=key):
            best = max(((min(j.max_workers, int(free[k])) / j.batch_time(b), -free[k], k)
                        for k, (_, b) in enumerate(machines) if free[k] >= 1), default=None)
            if best is None:
                break
            rate, _, k = best
            free[k] -= min(j.max_workers, int(free[k]))
            left[j.id] -= rate * slot
            if left[j.id] <= j.work_batches * 1e-9:
                jct[j.id] = (t + 1 - j.arrival) * slot
        t += 1
    return float(np.mean(list(jct.values()))), t


def _online_averages(path: Path) -> dict[tuple[str, str, str], float]:
    """(sample, cluster, policy) -> average JCT (h) from benchmarks/online.py's results, if there."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {(st["sample"], st["cluster"], p): run["average_jct_h"]
            for st in doc.get("settings_run", []) for p, run in st["runs"].items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", nargs="+", default=["philly-200-s1", "philly-200-s2"])
    ap.add_argument("--clusters", nargs="+", default=["racks:2x4", "pai:24"])
    ap.add_argument("--slot-seconds", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "LIST_REFERENCE.md")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for spec in args.samples:
        sample = load_sample(spec, args.slot_seconds, None, False)
        for c in args.clusters:
            topo = parse_cluster(c)
            refs = {o: list_schedule(list(sample.jobs), topo, args.slot_seconds, o) for o in ("srpt", "area")}
            inst = Instance(slot_seconds=args.slot_seconds, horizon=max(n for _, n in refs.values()),
                            resources=RESOURCES, topology=topo, jobs=tuple(sample.jobs), name=f"{sample.name}-{c}")
            bounds = average_jct_bounds(inst)
            floor, bound = bounds.floor, bounds.pooled
            refs = {o: avg for o, (avg, _) in refs.items()}
            rows.append((sample.name, c, floor, bound, refs))
            print(f"{sample.name} {c}: floor {floor / 3600:.2f} h, pooled bound "
                  f"{'-' if bound is None else f'{bound / 3600:.2f}'} h, SRPT-FM {refs['srpt'] / 3600:.2f} h, "
                  f"area-FM {refs['area'] / 3600:.2f} h")
    ours = _online_averages(ROOT / "benchmarks" / "online" / "results.json")
    cmd = "python benchmarks/list_reference.py" + ("" if argv is None else " " + " ".join(argv))
    lines = ["# Idealised list schedules and proven bounds on the Philly samples", "",
             f"Command: `{cmd}` ({time.perf_counter() - start:.0f} s). Definitions: the module docstring "
             "of `benchmarks/list_reference.py`; the policies' own averages: `benchmarks/ONLINE.md`.", "",
             "| sample | cluster | no-contention floor (h) | pooled LP bound (h) | SRPT-FM (h) | "
             "smallest-area-FM (h) | `lp-rounding` (ONLINE.md) | `greedy` (ONLINE.md) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, c, floor, bound, refs in rows:
        theirs = [ours.get((name, c, p)) for p in ("lp-rounding", "greedy")]
        lines.append(f"| `{name}` | `{c}` | {floor / 3600:.2f} | "
                     f"{'-' if bound is None else f'{bound / 3600:.2f}'} | {refs['srpt'] / 3600:.2f} | "
                     f"{refs['area'] / 3600:.2f} | " + " | ".join('-' if h is None else f"{h:.2f}" for h in theirs)
                     + " |")
    lines += ["", "The two bounds hold for every valid schedule; the two list schedules are references that "
              "pay no restart, place no PS and get each machine's local speed for free."]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
