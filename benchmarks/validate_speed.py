"""How long validate + score take on large schedules; writes benchmarks/VALIDATE.md.

Usage: python benchmarks/validate_speed.py [--jobs 1000] [--racks 25] [--per-rack 20]
       [--slots 50] [--repeat 3]

The schedule is built to be valid (each job: 2 workers + 1 PS on one machine, 2 workers
on its rack neighbour), so the timing is of the checks themselves, not of printing
thousands of violations.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from placement.model.clusters import racks
from placement.model.evaluate import evaluate
from placement.model.instance import Instance, Job
from placement.model.schedule import Allocation, Schedule


def build(n_jobs: int, n_racks: int, per_rack: int, slots: int) -> tuple[Instance, Schedule]:
    topo = racks(n_racks, per_rack, capacity={"gpu": 8, "cpu": 64, "mem": 512},
                 machine_gbps=100, rack_gbps=100 * per_rack)
    machines = [m.id for m in topo.machines]
    jobs = tuple(Job(id=f"j{k}", arrival=0, work_batches=1e12, batch_seconds=0.1,
                     worker={"gpu": 1, "cpu": 4, "mem": 16}, ps={"cpu": 4, "mem": 16},
                     max_workers=8, worker_gbps=5, ps_gbps=20, gradient_mb=50)
                 for k in range(n_jobs))
    inst = Instance(slot_seconds=60, horizon=slots, resources=("gpu", "cpu", "mem"),
                    topology=topo, jobs=jobs, name="validate-speed")
    per_slot = []
    for k in range(n_jobs):
        home = k % len(machines)
        rack, pos = divmod(home, per_rack)
        neighbour = rack * per_rack + (pos + 1) % per_rack
        per_slot.append(Allocation(f"j{k}", machines[home], 2, 1))
        per_slot.append(Allocation(f"j{k}", machines[neighbour], 2, 0))
    return inst, Schedule.from_allocations({t: per_slot for t in range(slots)}, instance=inst.name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--racks", type=int, default=25)
    ap.add_argument("--per-rack", type=int, default=20)
    ap.add_argument("--slots", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).with_name("VALIDATE.md")))
    args = ap.parse_args()
    inst, sched = build(args.jobs, args.racks, args.per_rack, args.slots)
    entries = sum(len(s.allocations) for s in sched.slots)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        violations, report = evaluate(inst, sched)
        times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        inst.save(Path(tmp) / "i.json")
        sched.save(Path(tmp) / "s.json")
        start = time.perf_counter()
        evaluate(Instance.load(Path(tmp) / "i.json"), Schedule.load(Path(tmp) / "s.json"))
        with_files = time.perf_counter() - start
    if violations:
        print(f"unexpected violations: {violations[:3]}", file=sys.stderr)
        return 1
    cmd = "python benchmarks/validate_speed.py " + " ".join(sys.argv[1:])
    text = "\n".join([
        "# Validator speed",
        "",
        f"Command: `{cmd.strip()}`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "",
        "| jobs | machines | slots | allocation entries | validate + score (median of "
        f"{args.repeat}) | min | load both files + validate + score |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {args.jobs} | {len(inst.topology.machines)} | {args.slots} | {entries} | "
        f"{statistics.median(times):.2f} s | {min(times):.2f} s | {with_files:.2f} s |",
        "",
        f"Result: valid, {report.reconfigurations} reconfigurations, "
        f"gpu utilisation {report.utilisation['gpu']:.1%}.",
        "",
    ])
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
