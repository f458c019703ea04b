"""Check placement.traces.pollux (and pollux_application) against the Pollux simulator's own code.

Runs in an environment that has the simulator's dependencies (numpy<2, pandas<2) and
this package, with the simulator's checkout at PEER (default
``../shared/peers/pollux-simulator``)::

    /work/peerenv/bin/python benchmarks/check_pollux_traces.py [PEER]

It compares, for every application:
1. iteration time (step + accum x (step - sync), the batch size set up by the
   simulator's ``Job.update_local_bsz``, throughput from ``Application.get_throughput``)
   on every measured placement, on the packed placement of 1..64 GPUs and on seeded random
   placements of up to 16 nodes, at every measured batch size and at midpoints between
   them; configurations where the simulator itself fails (nothing measured) must fail in
   ours too;
2. total iterations (``get_iteration(B, get_completion_epoch(B))``) at every batch size
   from the smallest to the largest measured one;
3. for every row of the workload (default ``workloads/workload-6.csv``), both conversion
   modes' work and speed tables (every entry of the local and the 2-machine rows against
   the simulator's rate on the entry's placement; the rows of more machines come from the
   same reader on placements of the same kind, checked in 1; an entry the simulator has
   no value for must be the table's tiny UNMEASURED rate), and the isolated completion
   time the simulator gives
   a job that runs alone on the packed placement of its GPU count (``Job.reallocate`` then
   ``Job.step``: progress weighted by the statistical efficiency) against ours
   (30 s + work x iteration time: iterations, no efficiency weighting).

Prints the max relative differences; exits 1 if 1 or 2 exceed 1e-9.
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import warnings
from pathlib import Path

import numpy as np

np.float = float  # the simulator uses the aliases NumPy 1.24 removed
np.int = int


def main() -> int:
    here = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", nargs="?", default=str(here.parent / "shared" / "peers" / "pollux-simulator"))
    parser.add_argument("--workload", default=None, help="default: PEER/workloads/workload-6.csv")
    parser.add_argument("--random", type=int, default=40, help="random placements per application")
    args = parser.parse_args()
    peer = Path(args.peer)
    sys.path.insert(0, str(peer))
    warnings.filterwarnings("ignore", category=FutureWarning)  # the simulator's DataFrame.append
    import pandas
    from applications import APPLICATIONS as PEER
    from simulator import Job as PeerJob

    from placement.integrations.measured_speed import UNMEASURED, entry_placements, packed
    from placement.traces.pollux import read_pollux_workload
    from placement.traces.pollux_application import PolluxApplication

    def peer_time(app, placement, bsz):
        job = PeerJob("x", app, 0, target_num_replicas=sum(placement), target_batch_size=bsz)
        job.update_local_bsz(placement)
        step, sync = app.get_throughput(tuple(placement), job.atomic_bsz)
        return float(step + job.accum_steps * (step - sync))

    rng = random.Random(0)
    worst_time = worst_iter = 0.0
    worst_time_at = worst_iter_at = None
    checked = both_fail = 0
    for name, papp in PEER.items():
        ours = PolluxApplication(peer / "traces" / name)
        print(f"checking {name} ...", file=sys.stderr, flush=True)
        sizes = list(papp.validation)
        batches = sorted(set(sizes) | {(a + b) // 2 for a, b in zip(sizes, sizes[1:])})
        placements = {tuple(int(c) for c in str(p)) for p in papp.placements.placement.unique()}
        placements |= {packed(c, 4) for c in range(1, 65)}
        for _ in range(args.random):
            nodes = rng.randint(1, 16)
            placements.add(tuple(rng.randint(1, 4) for _ in range(nodes)))
        for p in sorted(placements):
            for b in batches:
                if sum(p) * papp.min_local_bsz > b:
                    continue  # the simulator never runs a job thinner than min_local_bsz
                try:
                    theirs = peer_time(papp, p, b)
                except (ValueError, AssertionError):
                    theirs = None
                try:
                    mine = ours.iteration_time(p, b)
                except ValueError:
                    mine = None
                if theirs is None or mine is None:
                    if theirs is not None or mine is not None:
                        print(f"MISMATCH {name} {p} B={b}: peer {theirs}, ours {mine}")
                        worst_time = math.inf
                    both_fail += 1
                    continue
                checked += 1
                d = abs(mine - theirs) / theirs
                if d > worst_time:
                    worst_time, worst_time_at = d, (name, p, b, theirs, mine)
        for b in range(sizes[0], sizes[-1] + 1, max(1, (sizes[-1] - sizes[0]) // 997)):
            e = papp.get_completion_epoch(b)
            theirs = float(papp.get_iteration(b, e))
            mine = ours.total_iterations(b)
            d = abs(mine - theirs) / theirs
            if d > worst_iter:
                worst_iter, worst_iter_at = d, (name, b, theirs, mine)
    print(f"iteration time: {checked} configurations, max relative difference {worst_time:.3g} "
          f"{worst_time_at or ''}; {both_fail} configurations unmeasured in both")
    print(f"total iterations: max relative difference {worst_iter:.3g} {worst_iter_at or ''}")

    workload = args.workload or peer / "workloads" / "workload-6.csv"
    rows = pandas.read_csv(workload)
    worst_row = 0.0
    gaps = []
    for mode in ("fixed", "tuned"):
        jobs = read_pollux_workload(workload, peer / "traces", mode)
        for row, job in zip(rows.itertuples(), jobs):
            papp = PEER[row.application]
            b = int(row.batch_size)
            work = float(papp.get_iteration(b, papp.get_completion_epoch(b)))
            worst_row = max(worst_row, abs(job.work_batches - work) / work)
            count = job.max_workers
            table = job.speed
            fastest = max(max(rates) for rates in (table.local, *(r for _, r in table.spread)))
            for (m, w), p in entry_placements(job.min_workers, count, 4).items():
                if m > 2:
                    continue
                mine = table.rate(w, m)                 # iterations/s of the whole job
                try:
                    theirs = 1 / peer_time(papp, p, b)
                except (ValueError, AssertionError):  # the simulator has no value there
                    if mine != UNMEASURED * fastest:
                        worst_row = math.inf
                    continue
                worst_row = max(worst_row, abs(mine - theirs) / theirs)
            if mode == "fixed":
                p = packed(count, 4)
                pj = PeerJob(row.name, papp, 0, target_num_replicas=count, target_batch_size=b)
                pj.reallocate(list(p))
                pj.step(1e9)
                ours_jct = 30 + work * peer_time(papp, p, b)
                gaps.append((ours_jct - pj.completion_time) / pj.completion_time)
    print(f"workload rows ({workload}), both modes: max relative difference of work and of "
          f"the table entries {worst_row:.3g}")
    g = np.array(gaps)
    print(f"isolated JCT on the packed placement, ours (iterations) vs the simulator's "
          f"(efficiency-weighted progress), fixed mode: mean {g.mean():+.3%}, "
          f"min {g.min():+.3%}, max {g.max():+.3%}")
    by_app = {}
    for row, gap in zip(rows.itertuples(), gaps):
        by_app.setdefault(row.application, []).append(gap)
    for a, v in sorted(by_app.items()):
        print(f"  {a:<12} {len(v):>3} rows: mean {np.mean(v):+.3%}, min {min(v):+.3%}, max {max(v):+.3%}")
    return 0 if worst_time <= 1e-9 and worst_iter <= 1e-9 and worst_row <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
