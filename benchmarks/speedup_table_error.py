"""How far the peer's speedup function is from the simulator's own speed, on real jobs.

    .peer-venv/bin/python benchmarks/speedup_table_error.py --simulator DIR
        [--workload CSV] [--rows 30] [--slots 60] [--mode adaptive|tuned] [--policy greedy]

Plays the first ROWS jobs of the workload (default DIR/workloads/workload-6.csv) for SLOTS
decisions in the Pollux simulator with one of our policies (through the peer arena's
adapter, placement.integrations.pollux_adapter), and at every decision, for every job
whose JobInfo carries a fitted speedup function, compares the two sources of its speed
table entry by entry (placement.integrations.measured_speed.entry_placements, the W of
1..max_workers): ``base x speedup_fn(machines, W)`` (the ``speedup`` source, base = the
progress rate of one GPU) over ``progress_rate`` on the entry's placement (the
``traces`` source: what the simulator makes the job do there). 1.0 is exact; entries the
traces do not measure are left out. In ``tuned`` mode the JobInfo's speedup_fn is the
same fitted goodput model as in ``adaptive`` mode, which also assumes the batch size
adapts; a tuned job's does not.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placement.integrations.measured_speed import entry_placements  # noqa: E402
from placement.integrations.pollux import load_simulator, read_workload  # noqa: E402
from placement.integrations.pollux_adapter import GPU, make_adapter, progress_rate  # noqa: E402
from placement.online.registry import POLICIES  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulator", required=True)
    ap.add_argument("--workload", help="default: DIR/workloads/workload-6.csv")
    ap.add_argument("--rows", type=int, default=30, help="the first ROWS jobs of the workload")
    ap.add_argument("--slots", type=int, default=60, help="decisions (60-s slots) to play")
    ap.add_argument("--mode", choices=["adaptive", "tuned"], default="adaptive")
    ap.add_argument("--policy", default="greedy")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)
    sim = load_simulator(args.simulator)
    workload = args.workload or str(Path(args.simulator) / "workloads" / "workload-6.csv")
    frame = read_workload(workload).head(args.rows)
    holder: dict = {}
    adapter = make_adapter(sim, POLICIES[args.policy](), args.mode,
                           clock=lambda: holder["cluster"].current_time,
                           sim_jobs=lambda: {j.name: j for j in holder["cluster"].jobs})
    ratios: dict[str, list[float]] = {"local": [], "spread": []}
    jobs_seen: set[str] = set()
    decide = adapter.optimize

    def optimize(jobs, nodes, prev, template=None):
        out = decide(jobs, nodes, prev, template)
        per_node = max(int(n.resources.get(GPU, 0)) for n in nodes.values())
        truth = {j.name: j for j in holder["cluster"].jobs}
        for name, info in jobs.items():
            sim_job, job = truth[name], adapter._scheduler.open_jobs[name]
            if info.speedup_fn is None or sim_job.perf_params is None:
                continue  # no fitted model yet
            base = progress_rate(sim_job, (1,))
            if not base:
                continue
            jobs_seen.add(name)
            for p in set(entry_placements(job.min_workers, job.max_workers, per_node, len(nodes)).values()):
                truth_rate = progress_rate(sim_job, p)
                if truth_rate:
                    ratios["local" if len(p) == 1 else "spread"].append(
                        base * float(info.speedup_fn(len(p), sum(p))) / truth_rate)
        return out

    adapter.optimize = optimize
    cluster = sim.simulator.Cluster(frame, adapter, 16, num_gpus=4)
    holder["cluster"] = cluster
    for _ in range(args.slots):
        if cluster.all_complete():
            break
        with contextlib.redirect_stdout(io.StringIO()):
            cluster.step(60)
    print(f"{Path(workload).name}, first {args.rows} jobs, {args.mode} mode, {args.policy}, "
          f"{len(adapter.decision_seconds)} decisions, {len(jobs_seen)} jobs with a fitted model; "
          "base x speedup_fn / progress_rate per table entry:")
    for kind, xs in ratios.items():
        if not xs:
            print(f"  {kind}: no entries")
            continue
        xs.sort()
        q = statistics.quantiles(xs, n=20)
        print(f"  {kind}: {len(xs)} entries, median {statistics.median(xs):.3f}, 5th-95th "
              f"percentile {q[0]:.3f}-{q[-1]:.3f}, min {xs[0]:.3f}, max {xs[-1]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
