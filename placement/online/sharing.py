"""The power-mean share: the worker counts Pollux's objective gives the active jobs.

Pollux (Qiao et al., OSDI 2021, section 4.2; the peer's ``pollux.py``, ``Problem._evaluate``)
allocates each round the counts that maximise the power mean with p = :data:`POWER` of the
jobs' speedups. Per job and worker count W:

1. Speedup: its rate on the fewest machines that hold W (its speed table's entry, or
   MODEL.md 4; the fastest of its GPU types: Pollux has none) over its rate at its fair share
   F = ceil(workers the cluster holds / active jobs) (Pollux's base goodput at
   ``fair_replicas``), times its worker's dominant share of the cluster times the machine
   count (so one machine's share is worth about 1).
2. Restarts: a count other than last slot's multiplies that speedup by
   max(age - changes x delay, 0) / (age + delay), age the seconds since submission (to the
   end of this slot), changes its restarts so far, delay its ``restart_seconds`` (Pollux:
   30 s, its simulator's re-scale time).
3. Objective: the power mean of (speedup + :data:`FLOOR`) over the active jobs, maximised:
   with p = -1, the sum of 1 / (speedup + FLOOR) minimised, so a job without workers costs
   1 / FLOOR and every job runs while the cluster holds one worker of each.
4. Search: exact over worker counts (:func:`counts`, a knapsack over the cluster's units of
   the resource the jobs' workers bind on), where Pollux searches allocations, placement
   included, with a genetic algorithm (NSGA-II, 100 generations of 100).

It reads no job length. Our ``pollux`` baseline places these counts; ``lp-rounding`` below
``oracle`` caps at them its elastic jobs whose speedup bends (``share_caps``; :func:`bends`).

Types (:func:`typed_shares`, ``lp-rounding`` on a cluster of several GPU types). Pollux's
objective knows no types: rule 1 takes each count at the job's fastest type, and rule 4's
knapsack holds every GPU alike, so it may give two jobs five GPUs each of a type that has
eight. With types the share is Sia's (Jayaram Subramanya et al., SOSP 2023; the artifact's
``sia.py``, ``optimize_mip``, constants from its ``simulator_config.py``): each job takes
one (type, count) configuration or nothing, at that type's rate on its fewest machines,
each type's units at most what its machines hold, and the sum over jobs of
(goodput / the job's slowest goodput) ** :data:`SIA_POWER` (p = -0.5), a job left out
costing :data:`SIA_LEFT_OUT` (1.1), is minimised (:func:`sia_values`); a change of type or
count multiplies the goodput by rule 2's factor, as Sia does (``sia_use_pollux_realloc_factor``).
Solved exactly by dynamic programming over the units left per type while that is cheap,
else by the LP relaxation rounded (:func:`typed_counts`). With rules 1-3's terms instead
(Pollux's p = -1 over the fair share, which runs every job it can) the Sia arena gave
1.025x ``peer:sia``, with Sia's 1.002x (docs/sia_arena.md): Sia's cost of leaving a job out
is small, so its share grows the jobs that gain most from a type before it starts another.
``lp-rounding`` caps each job at the count of its pick and leaves the type to the window
(capping the rate instead, the job allowed as many GPUs of any type as come to its pick's
rate, did worse: docs/sia_arena.md).
"""
from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from placement.model.instance import Job
from placement.model.progress import gpu_types
from placement.online.policy import JobState, View
from placement.slots.residual import Residual
from placement.slots.rules import workers_of
from solvers.lp import solve_lp
from solvers.problem import Problem

logger = logging.getLogger(__name__)

__all__ = ["FLOOR", "LINEAR_BEND", "POWER", "SIA_LEFT_OUT", "SIA_POWER", "TYPED_WORK", "bend", "bends",
           "capped_view", "counts", "share_counts", "shares", "sia_values", "speedup_values", "typed_counts",
           "typed_shares"]

#: the power mean's exponent (pollux.py, ``Problem._evaluate``: p = -1, "more negative = more fair")
POWER = -1.0
#: added to every speedup before the power mean (pollux.py: ``scaled_speedups + 1e-3``)
FLOOR = 1e-3
#: Sia's fairness exponent over normalised goodputs (simulator_config.py, ``sia_default_p_val``)
SIA_POWER = -0.5
#: Sia's cost of a job left without GPUs (simulator_config.py, ``sia_default_lambda_n``)
SIA_LEFT_OUT = 1.1
#: the typed share is exact by dynamic programming up to this much work (states x options)
TYPED_WORK = 4_000_000
#: a job whose speedup's fitted exponent (:func:`bend`) is at least this is taken as linear
LINEAR_BEND = 0.95


def shares(view: View, parts: Sequence[tuple[Sequence[str], np.ndarray]]) -> dict[str, int]:
    """The worker count each bent job (:func:`bends`) may have, partition by partition
    (``parts``: each partition's jobs and machine indices, as if it were the cluster):
    :func:`typed_shares`' count on a cluster of several GPU types, else :func:`share_counts`.
    What ``lp-rounding``'s step 0 caps its jobs at (:func:`capped_view`)."""
    res = view.residual()
    typed = len(view.instance.topology.gpu_types) > 1
    out: dict[str, int] = {}
    for jobs, machines in parts:
        if typed:
            out.update({j: w for j, (_, w) in typed_shares(view, jobs, machines, res, bent_only=True).items()})
        else:
            out.update(share_counts(view, jobs, machines, res, bent_only=True))
    return out


def share_counts(view: View, jobs: Sequence[str] | None = None, machines: np.ndarray | None = None,
                 res: Residual | None = None, *, bent_only: bool = False) -> dict[str, int]:
    """Each active job's worker count under rules 1-4 (module docstring), in arrival order;
    or, given a partition (``jobs`` and the indices of its ``machines``), the counts of its
    jobs on its machines alone, as if it were the cluster (POP: the knapsack's cost grows
    with jobs x GPUs, so a large cluster's share is taken partition by partition). ``res``:
    ``view.residual()``, built once by a caller taking every partition's share.
    ``bent_only``: only the counts of the jobs whose speedup bends (:func:`bends`; every
    job still takes part in the knapsack), none computed when no job bends."""
    order, res, by_type, rates, keep = _prelude(view, jobs, machines, res, bent_only)
    if not keep:
        return {}
    capacity, cost = _budget(res, [view.jobs[j].job for j in order], machines)
    values = [speedup_values(view, res, view.jobs[j], len(order), machines, rates[j]) for j in order]
    return {j: c for j, c in zip(order, counts(values, cost, capacity)) if j in keep}


def typed_shares(view: View, jobs: Sequence[str] | None = None, machines: np.ndarray | None = None,
                 res: Residual | None = None, *, bent_only: bool = False) -> dict[str, tuple[str | None, int]]:
    """Sia's share (module docstring, "Types"): each job one (type, count) or nothing, each
    type's units at most what its machines hold, Sia's objective (:func:`sia_values`)
    optimised, each count at its own type's rate, by :func:`typed_counts`. Each job's pick
    (type None and count 0: none), arguments as :func:`share_counts`."""
    order, res, by_type, _, keep = _prelude(view, jobs, machines, res, bent_only)
    if not keep:
        return {}
    k, unit = _binding(res, [view.jobs[j].job for j in order], machines)
    if unit is None:
        return {}
    hs = np.arange(len(res.machine_ids)) if machines is None else machines
    kinds = np.array([res.instance.topology.machines[h].gpu_type for h in hs], dtype=object)
    # sorted, then None: machines that declare no type are a type of their own
    types = sorted({g for g in kinds if g is not None}) + [None] * any(g is None for g in kinds)
    held = [int(math.floor(res.cap[hs][np.array([x == g for x in kinds], dtype=bool), k].sum() / unit + 1e-9))
            for g in types]
    options, picks = [], []
    for j in order:
        state = view.jobs[j]
        cost = int(round(res.demand(state.job)[0][k] / unit))
        now = gpu_types(view.instance, state.previous)
        mine, pick = [], []
        slowest = _slowest(by_type[j], state.job)
        for g, rate in by_type[j].items():
            values = sia_values(view, state, rate, slowest=slowest, kept=now == {g})
            best = 0.0
            for w in np.flatnonzero(np.isfinite(values[1:])) + 1:
                gain = values[w] - values[0]
                if gain > best:  # a count no better than a smaller one on its type is never worth its units
                    best = gain
                    mine.append((types.index(g), int(w) * cost, gain))
                    pick.append((g, int(w)))
        options.append(mine)
        picks.append(pick)
    chosen = typed_counts(options, held)
    out = {j: picks[i][c] if c >= 0 else (None, 0) for i, (j, c) in enumerate(zip(order, chosen))}
    return {j: p for j, p in out.items() if j in keep}


def _prelude(view: View, jobs: Sequence[str] | None, machines: np.ndarray | None, res: Residual | None,
             bent_only: bool) -> tuple[list[str], Residual, dict[str, dict[str | None, np.ndarray]],
                                       dict[str, np.ndarray], set[str]]:
    """What both shares start from: the jobs in arrival order, the residual, each job's
    rates by type and at its fastest type (rule 1), and the jobs whose counts are wanted."""
    ids = list(view.jobs) if jobs is None else list(jobs)
    order = sorted(ids, key=lambda j: (view.jobs[j].job.arrival, j))
    res = view.residual() if res is None else res
    by_type = {j: _rates_by_type(res, view.jobs[j].job, machines) for j in order}
    rates = {j: _fastest(by_type[j]) for j in order}
    keep = {j for j in order if bends(view.jobs[j].job, rates[j])} if bent_only else set(order)
    return order, res, by_type, rates, keep


def typed_counts(options: list[list[tuple[int, int, float]]], held: list[int]) -> list[int]:
    """Per job, the index of its option (type, units, gain) chosen, or -1 for none: the
    summed gains maximised with each type's units at most ``held``. Exact, by dynamic
    programming over the units left of every type, while its work (those states times the
    options) is at most :data:`TYPED_WORK` (Sia's 64-GPU cluster: 10,625 states, so about
    ten jobs of a few dozen options; with one type always, its work only linear in the
    units); past that, the LP relaxation (solved through
    ``solvers``), whose basic optimum splits at most one job per type, each split job then
    given the best of its options that still fits, in order: at most one job per type
    from exact, among many."""
    shape = tuple(h + 1 for h in held)
    if len(shape) == 1 or math.prod(shape) * sum(len(mine) for mine in options) <= TYPED_WORK:
        return _typed_dp(options, shape)
    return _typed_lp(options, held)


def _typed_dp(options: list[list[tuple[int, int, float]]], shape: tuple[int, ...]) -> list[int]:
    best = np.full(shape, -np.inf)
    best[(0,) * len(shape)] = 0.0
    steps = []
    for mine in options:
        new, pick = best.copy(), np.full(shape, -1, dtype=np.int32)
        for c, (g, u, gain) in enumerate(mine):
            if u >= shape[g]:
                continue
            dst = tuple(slice(u, None) if a == g else slice(None) for a in range(len(shape)))
            src = tuple(slice(None, shape[g] - u) if a == g else slice(None) for a in range(len(shape)))
            offer = best[src] + gain
            better = offer > new[dst]
            np.copyto(new[dst], offer, where=better)
            pick[dst][better] = c
        best = new
        steps.append(pick)
    at = list(np.unravel_index(int(np.argmax(best)), shape))
    out = []
    for pick, mine in zip(reversed(steps), reversed(options)):
        c = int(pick[tuple(at)])
        out.append(c)
        if c >= 0:
            at[mine[c][0]] -= mine[c][1]
    return out[::-1]


def _typed_lp(options: list[list[tuple[int, int, float]]], held: list[int]) -> list[int]:
    flat = [(i, c, g, u, gain) for i, mine in enumerate(options) for c, (g, u, gain) in enumerate(mine)]
    if not flat:
        return [-1] * len(options)
    i, _, g, u, gain = (np.array(x) for x in zip(*flat))
    n = len(flat)
    per_job = sp.coo_array((np.ones(n), (i, np.arange(n))), shape=(len(options), n))
    per_type = sp.coo_array((u.astype(float), (g, np.arange(n))), shape=(len(held), n))
    problem = Problem(c=gain.astype(float), sense="max", A=sp.vstack([per_job, per_type]).tocsr(),
                      b=np.r_[np.ones(len(options)), held], upper=np.ones(n), name="typed-share")
    result = solve_lp(problem)
    x = result.x if result.success else np.zeros(n)
    if not result.success:  # never seen: each job then takes the best option that fits, in order
        logger.warning("typed share: the LP failed (%s)", result.status.value)
    out, left = [-1] * len(options), np.array(held, dtype=float)
    for k in np.flatnonzero(x > 1 - 1e-6):
        out[i[k]] = int(flat[k][1])
        left[g[k]] -= u[k]
    for job in range(len(options)):
        if out[job] < 0:
            fits = [c for c, (gg, uu, _) in enumerate(options[job]) if uu <= left[gg] + 1e-9]
            if fits:
                c = max(fits, key=lambda c: options[job][c][2])
                out[job] = c
                left[options[job][c][0]] -= options[job][c][1]
    return out


def speedup_values(view: View, res: Residual, state: JobState, active: int,
                   machines: np.ndarray | None = None, rate: np.ndarray | None = None) -> np.ndarray:
    """Per worker count W = 0 .. the most the job may take, -(speedup + FLOOR) ** POWER:
    the job's term of rules 1-3 (``-inf`` below its ``min_workers``; W = 0 costs 1 / FLOOR),
    the cluster being ``machines`` (indices; None: all) and ``active`` jobs. ``rate``: the
    job's rate by count on ``machines`` (rule 1), when the caller has it already."""
    job = state.job
    rate = _rate_by_count(res, job, machines) if rate is None else rate
    most = len(rate) - 1
    values = np.full(most + 1, -np.inf)
    values[0] = -FLOOR ** POWER
    if most < 1:
        return values
    holds = int(res.worker_room(job, machines).sum())
    fair = rate[min(most, max(1, math.ceil(holds / active)))]
    alpha, _ = res.demand(job)
    cap = res.cap if machines is None else res.cap[machines]
    totals = cap.sum(axis=0)
    share = float(np.max(np.divide(alpha, totals, out=np.zeros_like(alpha), where=totals > 0)))
    scale = share * len(cap) / fair if fair > 0 else 0.0
    factor, before = _restart_factor(view, state), workers_of(state.previous)
    for w in range(max(1, job.min_workers), most + 1):
        speedup = rate[w] * scale * (1.0 if w == before else factor)
        values[w] = -(speedup + FLOOR) ** POWER
    return values


def sia_values(view: View, state: JobState, rate: np.ndarray, *, slowest: float, kept: bool) -> np.ndarray:
    """Per worker count W = 0 .. len(rate) - 1 on one GPU type, minus the job's term of Sia's
    objective (module docstring, "Types"), so that larger is better: -(rate[W] / ``slowest``,
    times rule 2's factor unless W is the count it runs on this type) ** SIA_POWER, W = 0
    (left out) -SIA_LEFT_OUT, ``-inf`` below ``min_workers`` and where the rate is 0.
    ``kept``: are these rates on the job's current type (False: every count is a restart)."""
    job = state.job
    values = np.full(len(rate), -np.inf)
    values[0] = -SIA_LEFT_OUT
    factor = _restart_factor(view, state)
    before = workers_of(state.previous) if kept else -1
    for w in range(max(1, job.min_workers), len(rate)):
        goodput = rate[w] / slowest * (1.0 if w == before else factor) if slowest > 0 else 0.0
        if goodput > 0:
            values[w] = -goodput ** SIA_POWER
    return values


def _slowest(rates: dict[str | None, np.ndarray], job: Job) -> float:
    """Sia's unit of a job's goodput: its slowest configuration, its fewest workers on its
    slowest type (Sia takes the least goodput of any configuration; on its tables, these)."""
    lo = max(1, job.min_workers)
    runs = [r[lo] for r in rates.values() if len(r) > lo and r[lo] > 0]
    return min(runs) if runs else 0.0


def _restart_factor(view: View, state: JobState) -> float:
    """Rule 2: max(age - changes x delay, 0) / (age + delay), the goodput kept by a job that
    changes its count or type now (Pollux's; Sia's ``sia_use_pollux_realloc_factor``)."""
    job = state.job
    age = (view.t - job.arrival + 1) * view.instance.slot_seconds
    delay = job.restart_seconds
    return max(age - state.changes * delay, 0.0) / (age + delay) if age + delay > 0 else 1.0


def bends(job: Job, rate: np.ndarray) -> bool:
    """Is ``job`` elastic with a speedup that bends: the exponent p of its ``rate`` by count
    (rule 1) as W ** p (:func:`bend`) below :data:`LINEAR_BEND`? Why only those are capped:
    with a linear speedup a worker does as much on a wide job as on a narrow one, so no
    share gains anything and running the shortest first is optimal (SRPT; heSRPT, Berg et
    al. 2020, tends to it as p tends to 1); a share pays where the speedup bends, each
    worker less useful than the last."""
    return job.min_workers < job.max_workers and bend(rate, max(1, job.min_workers)) < LINEAR_BEND


def bend(rate: np.ndarray, lo: int) -> float:
    """The exponent p of rate(W) = rate(lo) (W / lo) ** p, by least squares in logs over the
    counts W > ``lo`` that run at least as fast as ``lo`` (``rate`` indexed by W): 1 for a
    linear speedup, 0 for one that gains nothing from more workers; 1 when no larger count
    runs. A count slower than the fewest workers is one no share gives, and in the Sia arena
    a count the simulator has no measure of (its placeholder rate, ``UNMEASURED`` x the
    fastest): fitted, such counts made every elastic job there look bent."""
    if lo >= len(rate) or rate[lo] <= 0:
        return 1.0
    w = np.arange(lo + 1, len(rate))
    w = w[rate[w] >= rate[lo]]
    if not len(w):
        return 1.0
    x, y = np.log(w / lo), np.log(rate[w] / rate[lo])
    return float((x @ y) / (x @ x))


def _rate_by_count(res: Residual, job: Job, machines: np.ndarray | None = None) -> np.ndarray:
    """The job's rate at W = 0 .. its most workers the empty cluster holds, each on the
    fewest machines of one GPU type that hold W, the fastest type (rule 1), among ``machines``."""
    return _fastest(_rates_by_type(res, job, machines))


def _fastest(rates: dict[str | None, np.ndarray]) -> np.ndarray:
    """Per count, the fastest of the types' ``rates`` (:func:`_rates_by_type`)."""
    out = np.zeros(max((len(r) for r in rates.values()), default=1))
    for r in rates.values():
        out[:len(r)] = np.maximum(out[:len(r)], r)
    return out


def _rates_by_type(res: Residual, job: Job, machines: np.ndarray | None = None) -> dict[str | None, np.ndarray]:
    """Per GPU type the job runs on (None on an untyped cluster), its rate at W = 0 .. the
    most workers that type's machines among ``machines`` hold empty (at most its
    ``max_workers``), each on the fewest of them that hold W."""
    hs = np.arange(len(res.machine_ids)) if machines is None else machines
    room = res.worker_room(job, hs)
    out = {}
    for g in res.job_types(job):
        ok = res.may_hold_workers(job, g)[hs]
        held = np.cumsum(np.sort(room[ok])[::-1])
        most = min(job.max_workers, int(held[-1]) if len(held) else 0)
        rate = np.zeros(most + 1)
        gbps = float(res.local_gbps[hs][ok & (room > 0)].max()) if (ok & (room > 0)).any() else job.worker_gbps
        for w in range(1, most + 1):
            rate[w] = job.rate(w, int(np.searchsorted(held, w)) + 1, gbps, g)
        out[g] = rate
    return out


def _budget(res: Residual, jobs: list[Job], machines: np.ndarray | None = None) -> tuple[int, list[int]]:
    """Rule 4's knapsack: the capacity of the cluster (``machines``; None: all) in units of
    the resource the jobs' workers bind on (the largest summed worker demand over its
    capacity; GPUs in practice), a unit the smallest worker demand of it, and each job's
    units per worker (0: the job's workers do not use it)."""
    k, unit = _binding(res, jobs, machines)
    if unit is None:
        return 0, [0] * len(jobs)
    alpha = np.array([res.demand(job)[0][k] for job in jobs])
    total = (res.cap if machines is None else res.cap[machines])[:, k].sum()
    return int(math.floor(total / unit + 1e-9)), [int(round(a / unit)) for a in alpha]


def _binding(res: Residual, jobs: list[Job], machines: np.ndarray | None = None) -> tuple[int, float | None]:
    """The resource the jobs' workers bind on (the largest summed worker demand over its
    capacity) and its unit, the smallest worker demand of it (None: no job's workers use it)."""
    alpha = np.array([res.demand(job)[0] for job in jobs])
    totals = (res.cap if machines is None else res.cap[machines]).sum(axis=0)
    load = np.divide(alpha.sum(axis=0), totals, out=np.zeros_like(totals), where=totals > 0)
    k = int(np.argmax(load))
    used = alpha[:, k][alpha[:, k] > 0]
    return k, float(used.min()) if len(used) else None


def counts(values: list[np.ndarray], cost: list[int], capacity: int) -> list[int]:
    """The worker count of each job maximising the summed ``values[j][W]`` with the counts'
    units (``cost[j]`` per worker) at most ``capacity``: :func:`typed_counts` with one type,
    each count W >= 1 of finite value an option gaining ``values[j][W] - values[j][0]``
    (ties: the fewest units used)."""
    ws = [[int(w) for w in np.flatnonzero(np.isfinite(value)) if w > 0] for value in values]
    options = [[(0, w * c, float(value[w] - value[0])) for w in mine] for value, c, mine in zip(values, cost, ws)]
    return [mine[k] if k >= 0 else 0 for mine, k in zip(ws, typed_counts(options, [capacity]))]


def capped_view(view: View, share: dict[str, int]) -> View:
    """``view`` with each elastic job (``min_workers < max_workers``) of ``share`` allowed at
    most its share of workers, or the workers it runs on now if more (at least its
    ``min_workers``; its speed table cut to match): what ``lp-rounding`` plans with under a
    share. The share bounds a job's growth but never forces a running job to shrink: the
    window still may, weighing the restart (a shrink the share alone forced was a restart
    in every round the share moved: 969 restarts against 594 on the Pollux arena's
    workload-6, docs/online.md). Gangs and the jobs ``share`` leaves out are left as they are."""
    jobs: dict[str, Job] = {}
    for j, state in view.jobs.items():
        job = state.job
        if job.min_workers < job.max_workers and j in share:
            cap = max(job.min_workers, min(job.max_workers, max(share[j], workers_of(state.previous))))
            if cap < job.max_workers:
                job = dataclasses.replace(job, max_workers=cap,
                                          speed=None if job.speed is None else job.speed.cut(cap))
        jobs[j] = job
    instance = dataclasses.replace(view.instance, jobs=tuple(jobs.get(job.id, job) for job in view.instance.jobs))
    states = {j: dataclasses.replace(state, job=jobs[j]) for j, state in view.jobs.items()}
    return dataclasses.replace(view, instance=instance, jobs=states)
