"""Idealised references for a workload of rigid jobs: how low the average JCT goes when the
order is shortest-first and placement costs little or nothing.

Usage: python benchmarks/rigid_reference.py --simulator DIR --workload DIR/workloads/workload-6.csv
       [--nodes 16] [--out FILE.md]

The jobs are the workload's as ``placement.traces.pollux.read_pollux_workload`` converts them
in ``fixed`` mode (each job a gang of its own GPU count, its speed the measured table; its
length here is its work at the table's fastest rate). Every reference re-decides each
60-second slot from scratch, in one priority order, taking each job that fits (backfill):
- *pooled*: the cluster's GPUs as one interchangeable pool, each job at its fastest rate,
  completing at the exact second;
- *nodes*: ``--nodes`` machines of 4 GPUs, each job placed roomiest-machine-first at the rate
  its table gives for the machines it spans, completing at the end of its slot; without and
  with a restart (the job's ``restart_seconds``) whenever its placement changes.
Orders: shortest remaining time first, and smallest remaining area (time x GPUs) first. With
the no-contention floor (each job alone from its arrival at its fastest rate).

These are references, not lower bounds: shortest-first is not optimal for rigid parallel
jobs, and the pooled one ignores that a job's GPUs sit on machines. They tell how much of a
policy's distance to the floor is ordering and how much is placement (docs/online.md, "Peer
arena").
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placement.traces.pollux import GPUS_PER_NODE, read_pollux_workload  # noqa: E402

SLOT = 60.0


def pooled(jobs, key, gpus: int) -> float:
    """Average JCT with the GPUs as one pool (module docstring)."""
    left = {j.id: j.work_batches / j.speed.fastest for j in jobs}
    done: dict[str, float] = {}
    t = 0.0
    while len(done) < len(jobs):
        active = sorted((j for j in jobs if j.arrival * SLOT <= t and j.id not in done),
                        key=lambda j: key(left[j.id], j))
        free = gpus
        for j in active:
            if j.max_workers <= free:
                free -= j.max_workers
                left[j.id] -= SLOT
                if left[j.id] <= 0:
                    done[j.id] = t + SLOT + left[j.id] - j.arrival * SLOT
        t += SLOT
    return sum(done.values()) / len(done)


def on_nodes(jobs, key, nodes: int, restart: bool) -> float:
    """Average JCT on ``nodes`` machines of GPUS_PER_NODE GPUs (module docstring)."""
    left = {j.id: j.work_batches for j in jobs}
    done: dict[str, float] = {}
    before: dict[str, dict[int, int]] = {}
    t = 0.0
    while len(done) < len(jobs):
        active = sorted((j for j in jobs if j.arrival * SLOT <= t and j.id not in done),
                        key=lambda j: key(left[j.id] / j.speed.fastest, j))
        free = [GPUS_PER_NODE] * nodes
        now: dict[str, dict[int, int]] = {}
        for j in active:
            if j.max_workers > sum(free):
                continue
            need, used = j.max_workers, {}
            for h in sorted(range(nodes), key=lambda h: (-free[h], h)):
                if need == 0:
                    break
                take = min(free[h], need)
                if take:
                    used[h], need = take, need - take
                    free[h] -= take
            now[j.id] = used
            seconds = SLOT - (j.restart_seconds if restart and before.get(j.id) != used else 0.0)
            left[j.id] -= j.speed.rate(j.max_workers, len(used)) * seconds
            if left[j.id] <= 1e-9 * j.work_batches:
                done[j.id] = t + SLOT - j.arrival * SLOT
        before = now
        t += SLOT
    return sum(done.values()) / len(done)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulator", required=True, help="the peer simulator's folder (its traces/)")
    ap.add_argument("--workload", required=True, help="a workload CSV of the simulator")
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--out", help="also write the table to this Markdown file")
    args = ap.parse_args()
    clock = time.perf_counter()
    jobs = read_pollux_workload(args.workload, Path(args.simulator) / "traces", "fixed", slot_seconds=SLOT)
    orders = {"shortest remaining time": lambda left, j: (left, j.arrival, j.id),
              "smallest remaining area": lambda left, j: (left * j.max_workers, j.arrival, j.id)}
    floor = sum(j.work_batches / j.speed.fastest for j in jobs) / len(jobs)
    lines = [f"# Rigid-job references: {Path(args.workload).name}", "",
             f"Command: `python benchmarks/rigid_reference.py --simulator {args.simulator} --workload "
             f"{args.workload} --nodes {args.nodes}`", "",
             f"{len(jobs)} jobs, {args.nodes} machines x {GPUS_PER_NODE} GPUs, 60-s slots; no-contention "
             f"floor {floor:,.0f} s. References, not bounds (module docstring).", "",
             "| order | pooled GPUs | machines, no restart cost | machines, restart on every change |",
             "|---|---:|---:|---:|"]
    for name, key in orders.items():
        row = [pooled(jobs, key, args.nodes * GPUS_PER_NODE), on_nodes(jobs, key, args.nodes, False),
               on_nodes(jobs, key, args.nodes, True)]
        lines.append(f"| {name} first | " + " | ".join(f"{v:,.0f} s" for v in row) + " |")
    lines += ["", f"Took {time.perf_counter() - clock:.0f} s."]
    print("\n".join(lines))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
