"""Per-slot decisions on large clusters: wall time, peak memory, and the gap to the LP.

Usage: python benchmarks/scaling.py [--sizes 100x32 500x128 1000x512 2000x1000 4000x2000]
       [--window 8] [--slots 8] [--executor processes local dask] [--dask-workers 2]
       [--out benchmarks/SCALING.md]

For each size (jobs x machines of 8 GPUs, racks of 16 machines) every job is active at
slot 0 with its whole work (a generated instance, arrivals set to 0). In a fresh process
per size, the LP-rounding policy decides ``--slots`` consecutive slots of the
``--window``-slot look-ahead (progress advanced by MODEL.md); the script records the time
of each decision, the process's peak resident memory, and scores the window's schedule
with placement.model.evaluate. Gaps:
- to the aggregated model's LP over all domains, a proven lower bound on the window
  instance's optimum, where that LP is small enough to solve here (skipped above
  --bound-limit variables);
- to the single-machine bound at every size: placement.bounds.pooled_bound, the LP of the same
  jobs on one machine with the whole cluster's capacity and a local bandwidth no lower
  than any machine's or any job's worker_gbps. Every valid schedule of the real cluster
  maps to one of this machine that runs no slower, uses no more capacity and leaves no
  more work unfinished, so its LP value is a proven (weaker) lower bound too.

``--executor local processes dask`` measures each size on each, side by side: the
partitions solved on the policy's thread pool, on a ``PartitionPool`` of
``--dask-workers`` worker processes, and on a Dask ``LocalCluster`` of as many processes
of one thread each (pool and cluster started before the clock, closed after); the
decisions must be the same, and the report says whether the schedules are.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from queue import Empty
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def window_instance(jobs: int, machines: int, slots: int, seed: int):
    from placement.traces.generate import generate
    from placement.model.instance import Instance

    per_rack = next((k for k in (16, 20, 25, 10, 8) if machines % k == 0), machines)
    g = generate(jobs=jobs, cluster=f"racks:{machines // per_rack}x{per_rack}", seed=seed)
    return Instance(slot_seconds=g.slot_seconds, horizon=slots, resources=g.resources, topology=g.topology,
                    jobs=tuple(dataclasses.replace(j, arrival=0) for j in g.jobs), name=f"scale-{jobs}x{machines}")


def run_size(jobs: int, machines: int, window: int, slots: int, seed: int, bound_limit: int, executor: str,
             dask_workers: int, queue) -> None:
    """In a child process: drive an OnlineScheduler for ``slots`` slots (every job submitted
    at slot 0, progress per MODEL.md reported back), measure each step, score the window.
    ``executor`` "dask": the partitions run on a LocalCluster of ``dask_workers`` processes."""
    from placement.model.evaluate import evaluate
    from placement.online.lp_policy import LPRoundingPolicy
    from placement.online.scheduler import OnlineScheduler
    from placement.model.progress import ProgressTracker
    from placement.model.schedule import Allocation, Schedule

    client = cluster = pool = None
    if executor == "processes":
        from placement.online.partition_pool import PartitionPool

        pool = PartitionPool(dask_workers)   # started and warmed before the clock, as the Dask cluster
    if executor == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=dask_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
    build = time.perf_counter()
    inst = window_instance(jobs, machines, max(slots, window), seed)
    policy = LPRoundingPolicy(window=window, executor=client if pool is None else pool)
    sched = OnlineScheduler(inst.topology, resources=inst.resources, policy=policy, lookahead=window,
                            slot_seconds=inst.slot_seconds)
    for job in inst.jobs:
        sched.submit(job)
    build = time.perf_counter() - build
    tracker = ProgressTracker(inst)
    seconds, timings, by_slot, lp_value = [], [], {}, None
    for t in range(slots):
        clock = time.perf_counter()
        placed = sched.step(t)
        seconds.append(time.perf_counter() - clock)
        timings.append(policy.last_timings)
        if t == 0:
            lp_value = policy.last_lp_value
        tracker.advance(t, placed)
        for job_id in placed:
            sched.report(job_id, tracker.done[job_id])
            if job_id in tracker.completed:
                sched.finish(job_id)
        by_slot[t] = [Allocation(j, h, w, s) for j, tasks in placed.items() for h, (w, s) in tasks.items()]
        if len(tracker.completed) == len(inst.jobs):
            break
    if client is not None:
        client.close()
        cluster.close()
    worker_mb = None
    if pool is not None:
        pool.close()  # its workers have ended and been waited for: their peak is known
        worker_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    violations, report = evaluate(inst, Schedule.from_allocations(by_slot))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # decisions only
    from placement.formulation.aggregated import formulate_aggregated
    from placement.bounds.pooled_bound import pooled_bound
    from solvers.lp import solve_lp

    window_inst = dataclasses.replace(inst, horizon=len(by_slot)) if len(by_slot) < inst.horizon else inst
    bound = single = None
    options = len(window_inst.jobs) * window_inst.horizon * (len(inst.topology.machines) + len(inst.topology.switches))
    if 3 * options <= bound_limit:
        result = solve_lp(formulate_aggregated(window_inst)[0])
        bound = result.objective if result.status.value == "optimal" else None
    single = pooled_bound(window_inst)
    allocations = sorted((t, sorted(map(dataclasses.astuple, a))) for t, a in by_slot.items())
    digest = hashlib.sha256(repr(allocations).encode()).hexdigest()[:12]
    where = {"dask": f"dask: LocalCluster of {dask_workers} x 1 thread",
             "processes": f"{dask_workers} processes (PartitionPool)"}.get(executor, f"{policy.threads} threads")
    queue.put({"jobs": jobs, "machines": machines, "executor": executor, "where": where, "schedule_digest": digest,
               "gpus": int(inst.capacity_matrix[:, 0].sum()),
               "workers_max": sum(j.max_workers for j in inst.jobs), "build_seconds": build,
               "decision_seconds": seconds, "timings": timings, "peak_rss_mb": peak_mb,
               "worker_peak_mb": worker_mb, "workers": dask_workers if pool is not None else 0,
               "objective": report.objective,
               "unfinished": report.unfinished, "valid": not violations, "lp_value_slot0": lp_value,
               "proven_bound": bound, "single_machine_bound": single,
               "gpu_utilisation": report.utilisation.get("gpu")})


def measure(size: str, executor: str, args: argparse.Namespace) -> dict:
    jobs, machines = (int(x) for x in size.split("x"))
    queue = mp.get_context("spawn").Queue()
    proc = mp.get_context("spawn").Process(target=run_size, args=(jobs, machines, args.window, args.slots,
                                                                  args.seed, args.bound_limit, executor,
                                                                  args.dask_workers, queue))
    proc.start()
    while True:  # a child that dies (out of memory, a bug) must not leave the parent waiting forever
        try:
            row = queue.get(timeout=5)
            break
        except Empty:
            if not proc.is_alive():
                try:  # it may have sent its row just before ending
                    row = queue.get(timeout=1)
                    break
                except Empty:
                    raise ChildDied(f"the child measuring {size} ({executor}) died with exit code "
                                    f"{proc.exitcode}") from None
    proc.join()
    return row


class ChildDied(RuntimeError):
    """A size's measuring process ended without a result; the sizes before it are kept."""


def growth(rows: list[dict], key: Callable[[dict], float]) -> float | None:
    """The exponent k of a least-squares fit key(row) ~ c * GPUs^k on log-log axes; None
    unless there are two distinct GPU counts and every value is positive."""
    import numpy as np

    gpus = [r["gpus"] for r in rows]
    values = [key(r) for r in rows]
    if len(set(gpus)) < 2 or min(values, default=0) <= 0:
        return None
    return float(np.polyfit(np.log(gpus), np.log(values), 1)[0])


#: what is plotted and fitted against GPUs: (label, value of a row)
SERIES = (("first decision (s)", lambda r: r["decision_seconds"][0]),
          ("median decision (s)", lambda r: statistics.median(r["decision_seconds"])),
          ("peak memory (MB)", lambda r: r["peak_rss_mb"]))


def plot(rows: list[dict], path: Path) -> None:
    """Time and memory against GPUs on log-log axes, each series with its fitted exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    gpus = np.array([r["gpus"] for r in rows], dtype=float)
    for ax, series in ((axes[0], SERIES[:2]), (axes[1], SERIES[2:])):
        for (label, key), style in zip(series, ("o-", "s--")):
            values = np.array([key(r) for r in rows])
            k = growth(rows, key)
            line = ax.loglog(gpus, values, style, label=f"{label}: ~GPUs^{k:.2f}" if k is not None else label)[0]
            if k is not None:
                c = np.exp(np.polyfit(np.log(gpus), np.log(values), 1)[1])
                ax.loglog(gpus, c * gpus ** k, ":", color=line.get_color(), lw=1)
        ax.set_xlabel("GPUs (jobs x machines of 8 GPUs)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("seconds per slot")
    axes[0].set_title("Per-slot decision time")
    axes[1].set_ylabel("MB (peak resident, deciding process)")
    axes[1].set_title("Peak memory")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def where_time_goes(row: dict) -> list[str]:
    """The first decision at one size split into the policy's steps (``last_timings``):
    formulate and LP are summed over partitions, which run concurrently inside 'solve'."""
    t0 = row["timings"][0]
    total = row["decision_seconds"][0]
    steps = [("candidate domains and chains, partition by partition (each chain starts when built)",
              t0.get("candidates", 0.0)),
             ("window chains after the last one started, wall (build, LP, round, decode)", t0.get("solve", 0.0)),
             ("slot rules for slot t", t0.get("slot rules", 0.0)),
             ("select (play both decisions over the window)", t0.get("select", 0.0))]
    other = total - sum(v for _, v in steps)
    out = [f"Where the first decision's {total:.2f} s go at {row['jobs']} x {row['machines']} "
           f"({row['gpus']:,} GPUs):", "", "| step | seconds | share |", "|---|---:|---:|"]
    out += [f"| {name} | {v:.2f} | {v / total:.0%} |" for name, v in steps + [("scheduler and other", other)]]
    out += ["", f"Inside the window chains, summed over the {int(t0.get('partitions', 1))} partitions: "
            f"building the models {t0['formulate']:.2f} s, LP {t0['lp']:.2f} s.", ""]
    return out


def memory(row: dict) -> str:
    """The deciding process's peak, and with a PartitionPool each worker's at most (the
    largest worker's peak: their sum is at most ``workers`` times it)."""
    text = f"{row['peak_rss_mb']:.0f} MB"
    if row.get("worker_peak_mb"):
        text += f" + {row['workers']} x {row['worker_peak_mb']:.0f} MB"
    return text


def gap(objective: float, bound: float | None) -> str:
    return "" if bound is None or objective <= 0 else f"{(objective - bound) / objective:.1%}"


def report(rows: list[dict], args: argparse.Namespace, wall: float) -> str:
    from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)
    from placement.online.lp_policy import LPRoundingPolicy

    cpu = cpu_model()
    out = ["# Per-slot decisions at scale", "",
           f"Command: `python benchmarks/scaling.py {' '.join(sys.argv[1:])}`".rstrip(),
           f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; run took "
           f"{wall / 60:.1f} min; one fresh process per size; 1-minute load average at start / end "
           f"{args.load_start:.1f} / {os.getloadavg()[0]:.1f}"
           + (" (above the core count: other processes shared the CPU)."
              if max(args.load_start, os.getloadavg()[0]) > (os.cpu_count() or 1) else "."), "",
           f"Policy: LP-rounding ({LPRoundingPolicy().model} window model, {args.window}-slot look-ahead, "
           "candidate domains, "
           f"POP partitions of {LPRoundingPolicy().jobs_per_partition} jobs solved where the executor "
           "column says), every job active at slot 0; machines of 8 GPUs in racks "
           "of 16 (20 when the count is not a multiple of 16).", "",
           "| jobs x machines | executor | GPUs | decision (slot 0) | median decision | peak memory | partitions | "
           "LP / formulate / slot rules at slot 0 | window objective | gap to aggregated LP bound | "
           "gap to single-machine bound | valid |",
           "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        t0 = r["timings"][0]
        out.append(f"| {r['jobs']} x {r['machines']} | {r['where']} | {r['gpus']} | {r['decision_seconds'][0]:.2f} s | "
                   f"{statistics.median(r['decision_seconds']):.2f} s | {memory(r)} | "
                   f"{int(t0.get('partitions', 1))} | {t0['lp']:.2f} / {t0['formulate']:.2f} / {t0['slot rules']:.2f} s | "
                   f"{r['objective']:.4g} | {gap(r['objective'], r['proven_bound'])} | "
                   f"{gap(r['objective'], r['single_machine_bound'])} | {r['valid']} |")
    out += ["", "Window objective: MODEL.md weighted JCT of the window's schedule (horizon = the window, "
            "unfinished work charged as MODEL.md says). Both gaps are to proven lower bounds (module "
            "docstring): the aggregated LP over all domains (solved only where it has at most "
            f"{args.bound_limit:,} variables) and the weaker single-machine LP (every size).", ""]
    if len(args.executor) > 1:
        out += side_by_side(rows, args.executor)
    first = [r for r in rows if r["executor"] == args.executor[0]]
    fits = [(label, growth(first, key)) for label, key in SERIES]
    if all(k is not None for _, k in fits):
        out += [f"Growth with size ({args.executor[0]} executor; least-squares fit of log value on log GPUs over "
                f"{len(first)} sizes, plotted in {args.plot.name}): "
                + "; ".join(f"{label} ~ GPUs^{k:.2f}" for label, k in fits)
                + ". Peak memory includes the interpreter and libraries (about 90 MB), so its exponent "
                "understates the growth of what the decision itself holds.", "",
                f"![time and memory against GPUs]({args.plot.name})", ""]
    out += where_time_goes(max(first, key=lambda r: r["jobs"] * r["machines"]))
    return "\n".join(out) + "\n"


def side_by_side(rows: list[dict], executors: list[str]) -> list[str]:
    """Per size, each executor's median decision, and whether their schedules are the same
    (they must be: the partitions' LPs are the same, only where they run differs)."""
    out = ["Side by side (median decision; peak memory above is the deciding process's, plus for the "
           "PartitionPool its workers' (each at most the largest one's peak), without the Dask workers'):", "",
           "| jobs x machines | " + " | ".join(executors) + " | same schedule |",
           "|---|" + "---:|" * len(executors) + "---|"]
    for size in dict.fromkeys((r["jobs"], r["machines"]) for r in rows):
        same = [r for r in rows if (r["jobs"], r["machines"]) == size]
        medians = {r["executor"]: f"{statistics.median(r['decision_seconds']):.2f} s" for r in same}
        digests = {r["schedule_digest"] for r in same}
        out.append(f"| {size[0]} x {size[1]} | " + " | ".join(medians.get(e, "") for e in executors)
                   + f" | {'yes' if len(digests) == 1 else 'NO'} |")
    return out + [""]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["100x32", "500x128", "1000x512", "2000x1000", "4000x2000"])
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bound-limit", type=int, default=400_000)
    ap.add_argument("--executor", nargs="+", default=["processes"], choices=["local", "processes", "dask"],
                    help="where the partitions are solved (processes: a PartitionPool, the default and "
                         "the fastest on one machine; local: the policy's threads; dask: a LocalCluster); "
                         "several: measured side by side, per size")
    ap.add_argument("--dask-workers", type=int, default=2,
                    help="processes of the PartitionPool or of the Dask LocalCluster (default 2)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "SCALING.md"))
    args = ap.parse_args()
    args.load_start = os.getloadavg()[0]
    start = time.perf_counter()
    rows, failed = [], None
    for size in args.sizes:
        for executor in args.executor:
            try:
                rows.append(measure(size, executor, args))
            except ChildDied as exc:
                failed = str(exc)
                break
            r = rows[-1]
            print(f"{size} ({r['where']}): first decision {r['decision_seconds'][0]:.2f} s, median "
                  f"{statistics.median(r['decision_seconds']):.2f} s, peak {r['peak_rss_mb']:.0f} MB", flush=True)
        if failed:
            break
    if not rows:
        print(f"scaling.py: {failed}", file=sys.stderr)
        return 1
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")  # before anything can fail
    args.plot = Path(args.out).with_name("scaling.png")
    plot([r for r in rows if r["executor"] == args.executor[0]], args.plot)
    text = report(rows, args, time.perf_counter() - start)
    if failed:
        text += f"\n**Stopped early:** {failed}; the sizes above were measured.\n"
    Path(args.out).write_text(text)
    print(text)
    import report as full_report  # benchmarks/report.py: REPORT.md and results.json from every output
    full_report.main()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
