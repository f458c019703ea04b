"""Write the Philly samples instances/traces/*.csv (job-list format) and their README.

Each sample is :func:`placement.traces.read_philly` with the fixed arguments in
``SAMPLES`` (seed included), so every file can be remade exactly:

    python benchmarks/make_traces.py                      # (re)write samples and README
    python benchmarks/make_traces.py --check              # exit 1 if a file differs
    python benchmarks/make_traces.py --philly PATH        # another copy of philly.csv

The README's table also gives, per sample, the default horizon of
:func:`placement.traces.instance_from_jobs` on the ``racks:4x8`` cluster.
"""
from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from placement.model.clusters import racks
from placement.model.instance import Job
from placement.traces import instance_from_jobs, read_joblist, read_philly, write_joblist
from placement.traces.philly import LOCAL_GPUS, REFERENCE_LOCAL_GBPS

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "instances" / "traces"

#: file stem -> read_philly keyword arguments.
SAMPLES = {
    "philly-200-s1": dict(sample=200, seed=1, slot_seconds=300),
    "philly-200-s2": dict(sample=200, seed=2, slot_seconds=300),
    "philly-30-s3": dict(sample=30, seed=3, slot_seconds=300),
}

logger = logging.getLogger("make_traces")

README_HEAD = """\
# Philly trace samples

Job lists (the CSV format of `placement.traces.joblist`: one row per job, the MODEL.md
job fields as columns) derived from the Microsoft Philly job log by
`placement.traces.read_philly`; its module docstring (`placement/traces/philly.py`) is
the derivation. In short: a contiguous window of consecutive submissions starting at a
seeded uniform position (the real arrival process), arrivals floored to slots of
`slot_seconds`; a DL2 GPU model picked by GPU-time bucket (under 10 GPU-minutes:
resnext-110 or wlm; up to 2 GPU-hours: seq2seq or inception-bn; more: resnet-50 or
vgg-16; seeded uniform within the bucket); demands, bandwidths and restart costs by the
rules of `placement.traces.generate`; `max_workers` = the job's GPUs, `min_workers` 1;
`work_batches` = ceil(duration x GPUs / one worker's mini-batch time), local at 400 Gbps
for jobs of at most 8 GPUs and spread at `worker_gbps` for wider ones, so the job's
GPUs placed that way run for its logged duration. Job ids are `p<line>`, the row's line
in `philly.csv`.

Arrivals are slot numbers: build an instance with the same `slot_seconds`, e.g.

```python
from placement.model.clusters import racks
from placement.traces import instance_from_jobs, read_joblist
inst = instance_from_jobs(read_joblist("instances/traces/philly-200-s1.csv"), racks(4, 8),
                          slot_seconds=300, name="philly-200-s1")
```

Remake every file with `python benchmarks/make_traces.py` (needs `philly.csv`: the shared
data copy, `$PLACEMENT_PHILLY` or `--philly PATH`); `--check` verifies them. The same
NumPy version gives the same files.

| file | made by | jobs | arrival slots | GPUs (max) | longest run | horizon on racks:4x8 |
|---|---|---|---|---|---|---|
"""

README_TAIL = """
"Made by" is the `read_philly` call of `benchmarks/make_traces.py` (default path: the
full `philly.csv`). "Longest run" is the longest time a job of the sample takes with all its GPUs at
the reference rate: its logged duration, rounded up to whole mini-batches; the
horizon is `instance_from_jobs`' default (first-fit witness, `slot_seconds` 300) on
`placement.model.clusters.racks(4, 8)` (32 machines of 8 GPUs). Philly durations have a long
tail (weeks), so a window holding one long job gets a horizon of thousands of slots;
pass a larger `slot_seconds` to `read_philly` for coarser, shorter instances.

Source: Microsoft's Philly traces (msr-fiddle/philly-traces, CC-BY-4.0; Jeon et al.,
"Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads",
USENIX ATC 2019), per-job extract by the Pollux authors (petuum/adaptdl, branch
osdi21-artifact, simulator/traces/philly.csv); model profiles from DL2 (Peng et al.,
pengyanghua/DL2). Cite them when you use these samples.
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder (default: %(default)s)")
    ap.add_argument("--philly", type=Path, default=None,
                    help="philly.csv (default: $PLACEMENT_PHILLY or the shared data copy)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and compare with OUT; write nothing")
    return ap.parse_args(argv)


def render(philly: Path | None) -> dict[str, str]:
    """File name -> text of every sample and of the README."""
    files, rows = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for stem, kwargs in SAMPLES.items():
            jobs = read_philly(philly, **kwargs)
            path = Path(tmp) / f"{stem}.csv"
            write_joblist(jobs, path)
            files[path.name] = path.read_text(encoding="utf-8")
            if read_joblist(path) != jobs:
                raise RuntimeError(f"{stem}: the job list does not read back exactly")
            inst = instance_from_jobs(jobs, racks(4, 8), slot_seconds=kwargs["slot_seconds"],
                                      name=stem)
            call = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            rows.append(f"| `{path.name}` | `read_philly({call})` | {len(jobs)} | "
                        f"0..{jobs[-1].arrival} | {max(j.max_workers for j in jobs)} | "
                        f"{max(_run_hours(j) for j in jobs):.1f} h | {inst.horizon} |")
    files["README.md"] = README_HEAD + "\n".join(rows) + "\n" + README_TAIL
    return files


def _run_hours(job: Job) -> float:
    """Hours ``job`` runs at max_workers at the reference rate of read_philly (uncapped)."""
    gbps = REFERENCE_LOCAL_GBPS if job.max_workers <= LOCAL_GPUS else job.worker_gbps
    return job.work_batches * job.batch_time(gbps) / job.max_workers / 3600


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = render(args.philly)
    if args.check:
        stale = [name for name, text in files.items()
                 if not (args.out / name).is_file()
                 or (args.out / name).read_text(encoding="utf-8") != text]
        for name in stale:
            logger.error("%s differs from what make_traces.py makes", args.out / name)
        if not stale:
            logger.info("all %d files in %s are as make_traces.py makes them", len(files), args.out)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text, encoding="utf-8")
        logger.info("wrote %s", args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
