"""How far the old linear speed (placement.integrations.linear_speed) and today's speed
tables (placement.integrations.measured_speed) are from the measured speed, on a Pollux
workload.

    python benchmarks/linear_speed_error.py --simulator DIR [--workload CSV]

For each row converted in ``tuned`` mode (placement.traces.pollux; K = its max_workers):

1. the linear rate the converter wrote before tables, through its two reference
   placements, at K workers (K / theta, spread when K exceeds one machine), over the
   traces' rate of K GPUs on the fewest machines; the table is exact there (1.0);
2. the table's rate for W workers spanning a machine count between its rows (3, 5-7,
   9-15, read from the row below) over the traces' rate of W packed on that many
   machines, for every W and such count, once per (application, batch size).

1.0 is exact; above 1 the model over-states the speed.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placement.model.instance import MB_TO_GB  # noqa: E402
from placement.integrations.linear_speed import linear_speed, reference_placements  # noqa: E402
from placement.integrations.measured_speed import SPREAD_KEYS, packed  # noqa: E402
from placement.traces.pollux import LOCAL_GBPS, WORKER_GBPS, read_pollux_workload  # noqa: E402
from placement.traces.pollux_application import GPUS_PER_NODE, PolluxApplication  # noqa: E402


def _summary(xs: list[float]) -> str:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=20)
    return (f"median {statistics.median(xs):.2f}, 5th-95th percentile {q[0]:.2f}-{q[-1]:.2f}, "
            f"min {xs[0]:.2f}, max {xs[-1]:.2f} ({len(xs)} values, "
            f"{sum(x > 1 for x in xs) / len(xs):.0%} over-stated)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--simulator", required=True)
    ap.add_argument("--workload", help="default: DIR/workloads/workload-6.csv")
    args = ap.parse_args(argv)
    sim = Path(args.simulator)
    workload = Path(args.workload) if args.workload else sim / "workloads" / "workload-6.csv"
    jobs = read_pollux_workload(workload, sim / "traces", "tuned")
    with workload.open(newline="") as f:
        rows = list(csv.DictReader(f))
    apps: dict[str, PolluxApplication] = {}
    linear, between, seen = [], [], set()
    per_node = GPUS_PER_NODE
    for job, row in zip(jobs, rows):
        app = apps.setdefault(row["application"], PolluxApplication(sim / "traces" / row["application"]))
        batch, k = int(row["batch_size"]), job.max_workers
        local, spread = reference_placements(k, per_node, elastic=True)
        line = linear_speed(app.rate(local, batch), sum(local),
                            None if spread is None else app.rate(spread, batch),
                            None if spread is None else sum(spread),
                            local_gbps=LOCAL_GBPS, worker_gbps=WORKER_GBPS)
        gbps = LOCAL_GBPS if k <= per_node else WORKER_GBPS
        theta = line.batch_seconds + 2 * line.gradient_mb * MB_TO_GB / gbps   # MODEL.md 4
        linear.append((k / theta) / app.rate(packed(k, per_node), batch))
        if (row["application"], batch) in seen:
            continue
        seen.add((row["application"], batch))
        for w in range(3, k + 1):
            for m in range(-(-w // per_node) + 1, min(w, max(SPREAD_KEYS)) + 1):
                if m in SPREAD_KEYS:
                    continue
                try:
                    truth = app.rate(packed(w, per_node, m), batch)
                except ValueError:
                    continue  # not measured
                between.append(job.speed.rate(w, m) / truth)
    print(f"{workload.name}: {len(jobs)} jobs (tuned)")
    print(f"  linear rate at max_workers / measured: {_summary(linear)}")
    print(f"  table between its rows / measured on the machines spanned: {_summary(between)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
