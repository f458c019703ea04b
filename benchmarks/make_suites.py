"""Write the benchmark suites instances/bench/{small,medium}/ deterministically.

Each suite is a grid: every cluster x every job count x ``--*-replicates`` seeds; seeds
run from the suite's ``--*-seed-base`` upwards in grid order, so every file has its own
fixed seed. The parameters of every file go to ``manifest.json`` (read back by the tests
and by ``--check``) and to the README's table.

    python benchmarks/make_suites.py            # (re)write both suites, manifest, README
    python benchmarks/make_suites.py --check    # exit 1 if a file differs from the manifest
    python benchmarks/make_suites.py --small-jobs 2 3 --small-replicates 2   # other sizes

Small instances are meant for an exact time-indexed ILP (few jobs, 2-4 machines, few
slots, max_workers <= 4); medium ones are too big for it to prove optimal in 60 s.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from placement.traces.generate import default_name, generate
from placement.model.instance import Instance

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "instances" / "bench"

SUITES = {
    "small": dict(clusters=["star:2@10,gpu=2", "star:3@10,gpu=2", "racks:2x2@10/10,gpu=2"],
                  jobs=[2, 3, 4, 5], replicates=3, seed_base=1, load=2.0, max_workers=4,
                  max_run_slots=4.0, slot_seconds=300.0, arrival_span=0.5, restarts=False),
    "medium": dict(clusters=["racks:2x8@25/100,gpu=4", "racks:3x4@25/100,gpu=4", "racks:4x8@25/100,gpu=2"],
                   jobs=[30, 40], replicates=2, seed_base=101, load=1.0, max_workers=8,
                   max_run_slots=6.0, slot_seconds=300.0, arrival_span=0.5, restarts=True),
    "busy": dict(clusters=["racks:2x4@25/100,gpu=4", "racks:3x4@25/100,gpu=2"],
                 jobs=[30, 40], replicates=2, seed_base=201, load=4.0, max_workers=8,
                 max_run_slots=6.0, slot_seconds=300.0, arrival_span=0.5, restarts=True),
    "large": dict(clusters=["racks:4x8@25/100,gpu=4", "racks:8x8@25/100,gpu=2"],
                  jobs=[80, 150], replicates=2, seed_base=301, load=2.0, max_workers=8,
                  max_run_slots=6.0, slot_seconds=300.0, arrival_span=0.5, restarts=True),
}
PURPOSE = {
    "small": "for an exact time-indexed ILP; which of them it proves optimal within 60 s is "
             "for the calibration with the exact solver. No restart times (`restarts=False`): "
             "with restarts the time-indexed ILP is only a relaxation.",
    "medium": "meant to be too big for the exact solver to prove optimal within 60 s.",
    "busy": "the medium sizes on fewer GPUs with four times the arrival rate: jobs compete for "
            "the cluster, so no schedule reaches every job's best alone.",
    "large": "80-150 jobs on 32-64 machines: the exact ILP's size limit, for the column bound and "
             "a long exact run on a pool.",
}
PARAMS = ("load", "max_workers", "max_run_slots", "slot_seconds", "arrival_span", "restarts")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="suite root (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory from OUT/manifest.json and compare; write nothing")
    ap.add_argument("--prune", action="store_true",
                    help="delete *.json files in the suite folders that the new suite does not contain")
    for suite, d in SUITES.items():
        g = ap.add_argument_group(f"{suite} suite")
        g.add_argument(f"--{suite}-clusters", nargs="+", default=d["clusters"], metavar="SPEC")
        g.add_argument(f"--{suite}-jobs", nargs="+", type=int, default=d["jobs"], metavar="N")
        g.add_argument(f"--{suite}-replicates", type=int, default=d["replicates"])
        g.add_argument(f"--{suite}-seed-base", type=int, default=d["seed_base"])
        g.add_argument(f"--{suite}-load", type=float, default=d["load"])
        g.add_argument(f"--{suite}-max-workers", type=int, default=d["max_workers"])
        g.add_argument(f"--{suite}-max-run-slots", type=float, default=d["max_run_slots"])
        g.add_argument(f"--{suite}-slot-seconds", type=float, default=d["slot_seconds"])
        g.add_argument(f"--{suite}-arrival-span", type=float, default=d["arrival_span"])
        g.add_argument(f"--{suite}-restarts", action=argparse.BooleanOptionalAction,
                       default=d["restarts"], help="restart_seconds from the generator's rule "
                       "(else 0: the exact ILP is exact only without restarts)")
    return ap.parse_args(argv)


def plan(args: argparse.Namespace) -> dict[str, list[dict]]:
    """Suite -> the generate() keyword arguments of each file, in grid order."""
    out: dict[str, list[dict]] = {}
    for suite in SUITES:
        opt = lambda key: getattr(args, f"{suite}_{key}")  # noqa: E731
        seed = opt("seed_base")
        files = []
        for cluster in opt("clusters"):
            for jobs in opt("jobs"):
                for _ in range(opt("replicates")):
                    kw = dict(jobs=jobs, cluster=cluster, seed=seed,
                              **{p: opt(p) for p in PARAMS})
                    kw["name"] = default_name(cluster, jobs, seed)
                    files.append(kw)
                    seed += 1
        out[suite] = files
    return out


def check(out: Path) -> int:
    """Regenerate every manifest entry and compare with the file on disk."""
    manifest = json.loads((out / "manifest.json").read_text())
    bad = 0
    for suite, files in manifest["suites"].items():
        for kw in files:
            path = out / suite / f"{kw['name']}.json"
            if not path.exists() or Instance.load(path) != generate(**kw):
                print(f"differs: {path}")
                bad += 1
    print(f"{sum(len(f) for f in manifest['suites'].values()) - bad} files match, {bad} differ")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.check:
        return check(args.out)
    suites = plan(args)
    rows: dict[str, list[tuple[dict, Instance]]] = {}
    for suite, files in suites.items():
        folder = args.out / suite
        folder.mkdir(parents=True, exist_ok=True)
        rows[suite] = []
        for kw in files:
            inst = generate(**kw)
            inst.save(folder / f"{kw['name']}.json")
            rows[suite].append((kw, inst))
        wanted = {f"{kw['name']}.json" for kw in files}
        for stale in sorted(p for p in folder.glob("*.json") if p.name not in wanted):
            if args.prune:
                stale.unlink()
                print(f"deleted stale {stale}")
            else:
                print(f"note: {stale} is not part of the suite (use --prune to delete it)")
        print(f"{suite}: {len(files)} instances in {folder}")
    command = "python benchmarks/make_suites.py" + "".join(
        f" {shlex.quote(a)}" for a in (sys.argv[1:] if argv is None else argv))
    (args.out / "manifest.json").write_text(json.dumps(
        {"command": command, "suites": suites}, indent=1) + "\n")
    (args.out / "README.md").write_text(readme(command, rows))
    return 0


def readme(command: str, rows: dict[str, list[tuple[dict, Instance]]]) -> str:
    lines = [
        "# Benchmark suites",
        "",
        "Generated by `placement.traces.generate.generate` (its module docstring states every rule",
        "and constant) from the measured DL2 model profiles. Written by:",
        "",
        f"    {command}",
        "",
        "Every file is `generate(**kwargs)` saved as JSON, with the keyword arguments of its",
        "row below (also in `manifest.json`); `python benchmarks/make_suites.py --check`",
        "regenerates them all and compares. Each horizon is the generator's default: long",
        "enough that its first-fit schedule finishes every job (MODEL.md section 4).",
        "",
        *[summary(suite, items) for suite, items in rows.items()],
        "",
        "One file by hand, e.g. the first small one:",
        "",
    ]
    first = rows["small"][0][0] if rows.get("small") else None
    if first:
        args = ", ".join(f"{k}={v!r}" for k, v in first.items())
        lines += ["    python -c \"from placement.traces.generate import generate; "
                  f"generate({args}).save('{first['name']}.json')\"", ""]
    for suite, items in rows.items():
        lines += [f"## {suite} ({len(items)} instances)", "",
                  "| file | cluster | jobs | seed | load | max_workers | max_run_slots | "
                  "slot_seconds | arrival_span | restarts | machines | GPUs | horizon |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for kw, inst in items:
            gpus = sum(m.capacity.get("gpu", 0) for m in inst.topology.machines)
            lines.append(
                f"| `{suite}/{kw['name']}.json` | `{kw['cluster']}` | {kw['jobs']} | {kw['seed']} "
                f"| {kw['load']:g} | {kw['max_workers']} | {kw['max_run_slots']:g} "
                f"| {kw['slot_seconds']:g} | {kw['arrival_span']:g} | {kw['restarts']} "
                f"| {len(inst.topology.machines)} | {gpus:g} | {inst.horizon} |")
        lines.append("")
    return "\n".join(lines)


def summary(suite: str, items: list[tuple[dict, Instance]]) -> str:
    """One line of ranges: jobs, machines, GPUs, max_workers and horizons of a suite."""
    def span(values: list[float]) -> str:
        lo, hi = min(values), max(values)
        return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
    insts = [inst for _, inst in items]
    return (f"- `{suite}/`: {PURPOSE.get(suite, '')} {len(items)} instances; "
            f"{span([len(i.jobs) for i in insts])} jobs, "
            f"{span([len(i.topology.machines) for i in insts])} machines, "
            f"{span([sum(m.capacity.get('gpu', 0) for m in i.topology.machines) for i in insts])} GPUs, "
            f"max_workers {span([j.max_workers for i in insts for j in i.jobs])}, "
            f"horizon {span([i.horizon for i in insts])} slots.")


if __name__ == "__main__":
    sys.exit(main())
