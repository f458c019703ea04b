"""How far the linear speed (placement.integrations.linear_speed) is from the measured one
at a tuned job's largest count, on a Pollux workload.

    python benchmarks/linear_speed_error.py --simulator DIR [--workload CSV]

For each row converted in ``tuned`` mode (placement.traces.pollux), the model's rate at
max_workers = K (K / theta, spread when K exceeds one machine) over the traces' rate of K
GPUs on the fewest machines: 1.0 is exact, above 1 the model over-states the speed.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placement.integrations.linear_speed import packed  # noqa: E402
from placement.traces.pollux import LOCAL_GBPS, WORKER_GBPS, read_pollux_workload  # noqa: E402
from placement.traces.pollux_application import GPUS_PER_NODE, PolluxApplication  # noqa: E402


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
    ratios = []
    for job, row in zip(jobs, rows):
        app = apps.setdefault(row["application"], PolluxApplication(sim / "traces" / row["application"]))
        k = job.max_workers
        theta = job.batch_time(LOCAL_GBPS if k <= GPUS_PER_NODE else WORKER_GBPS)
        ratios.append((k / theta) / app.rate(packed(k, GPUS_PER_NODE), int(row["batch_size"])))
    print(f"{workload.name}: {len(ratios)} jobs; model / measured rate at max_workers: median "
          f"{statistics.median(ratios):.2f}, max {max(ratios):.2f}, min {min(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
