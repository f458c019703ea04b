"""The configuration model's columns: every (job, slot, domain, GPU type, worker count W)
option, built for all jobs at once in arrays.

Per job, its configurations come in domain order, then type order, then W order: on each
allowed local domain (machine h, of h's GPU type, if the job runs on it) the counts up to
the most h holds with their PSs; on each allowed spread domain and each type g the job runs
on, the counts up to the workers its machines of type g hold, when at least two of its
machines are useful (of type g and holding a worker, or holding a PS alone: PSs may sit on
any type, MODEL.md 8); the option's tasks go to its useful machines of type g (its *split*).
On a cluster without GPU types every machine has the one type None, so these are the
(job, domain, W) options of before. Then they are repeated over the job's time buckets, the first slot of the window
taking every allowed domain and the later ones only the job's later domains. The model is
the one :mod:`placement.formulation.configuration` describes; this module only says how
its columns are enumerated, without a Python loop per job (an online decision builds a model
of ~125 jobs per partition, 32 partitions a slot at 4,000 jobs: the loop was half of the
model's time).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement import deadline
from placement.formulation.domains import Domains, local_gbps, worker_types
from placement.formulation.progress_block import ProgressBlock
from placement.model.instance import MB_TO_GB, Instance, Job

__all__ = ["Options", "options", "min_ps_row", "count_choices"]


@dataclass(frozen=True)
class Options:
    """One entry per column x[j, t, c], job by job, bucket by bucket, configuration by
    configuration: its job (instance index), first slot, domain, GPU type (code in
    ``Topology.gpu_types``), workers, batches per slot, PSs, and machine split (an index into
    ``splits``: the machines of a spread domain that hold a task; -1 for a local domain)."""

    job: np.ndarray
    slot: np.ndarray
    dom: np.ndarray
    gtype: np.ndarray
    workers: np.ndarray
    speed: np.ndarray
    ps: np.ndarray
    split: np.ndarray
    splits: list


_MIN_PS: dict[tuple[float, float, int], np.ndarray] = {}


def min_ps_row(job: Job) -> np.ndarray:
    """``job.min_ps(W)`` for W = 0..max_workers as floats, kept per (worker_gbps, ps_gbps,
    max_workers): min_ps depends on nothing else."""
    key = (job.worker_gbps, job.ps_gbps, job.max_workers)
    row = _MIN_PS.get(key)
    if row is None:
        if len(_MIN_PS) >= 4096:
            _MIN_PS.clear()
        row = np.array([job.min_ps(w) for w in range(job.max_workers + 1)], dtype=float)
        row.flags.writeable = False
        _MIN_PS[key] = row
    return row


def options(instance: Instance, progress: ProgressBlock, doms: Domains, domains: dict[str, set[str]] | None,
            later_domains: dict[str, set[str]] | None, counts: str, start: int,
            keep: dict[str, int] | None = None) -> Options:
    """Every option of the model (module docstring): ``domains`` per job id the domains it
    may use (None: every domain), ``later_domains`` those of the slots after ``start``,
    ``keep`` per job id a worker count offered wherever it fits even when ``counts`` would
    skip it (the count a job runs at now)."""
    jobs = [instance.jobs[j] for j in progress.jobs]
    n_jobs = len(jobs)
    allowed = [doms.allowed(None if domains is None else domains.get(job.id)) for job in jobs]
    pair_job = np.repeat(np.arange(n_jobs), [len(a) for a in allowed])
    pair_dom = np.concatenate(allowed) if allowed else np.zeros(0, dtype=np.int64)
    low = np.array([job.min_workers for job in jobs], dtype=np.int64)
    high = np.array([job.max_workers for job in jobs], dtype=np.int64)
    also = None if not keep else np.array([keep.get(job.id, -1) for job in jobs], dtype=np.int64)
    code = instance.topology.type_code
    runs = np.ones((n_jobs, len(instance.topology.gpu_types)), dtype=bool)  # per job, the types it runs on
    for k in (k for k, job in enumerate(jobs) if job.speed is not None and job.speed.types is not None):
        runs[k] = worker_types(jobs[k], instance.topology)

    # local domains (machines of a type the job runs on): the counts up to the most it holds with their PSs
    on = doms.is_local[pair_dom]
    l_job, l_dom = pair_job[on], pair_dom[on]
    runs_here = runs[l_job, code[l_dom]]
    l_job, l_dom = l_job[runs_here], l_dom[runs_here]
    which = instance.machine_kinds[1]
    local_most = np.stack([kinds.local for kinds in progress.fit_kinds]) if n_jobs else np.zeros((0, 1), np.int64)
    n, l_w = count_choices(low[l_job], np.minimum(high[l_job], local_most[l_job, which[l_dom]]), counts,
                           None if also is None else also[l_job])
    l_job, l_dom = np.repeat(l_job, n), np.repeat(l_dom, n)

    # spread domains, per type: the counts up to the workers its useful machines of the type hold
    s_job, s_dom, s_type, room, s_split, splits = _spread(progress, doms, which, code, runs, pair_job[~on],
                                                          pair_dom[~on])
    n, s_w = count_choices(low[s_job], np.minimum(high[s_job], room), counts,
                           None if also is None else also[s_job])
    s_job, s_dom, s_type, s_split = (np.repeat(a, n) for a in (s_job, s_dom, s_type, s_split))

    # domain order, then type and W order, per job: a job's local domains come before its spread ones
    order = np.argsort(np.concatenate([l_job, s_job]), kind="stable")
    c_job = np.concatenate([l_job, s_job])[order]
    c_dom = np.concatenate([l_dom, s_dom])[order]
    c_type = np.concatenate([code[l_dom], s_type])[order]
    c_w = np.concatenate([l_w, s_w])[order]
    c_split = np.concatenate([np.full(len(l_job), -1, dtype=np.int64), s_split])[order]
    c_rate = _rates(instance, jobs, c_job, c_dom, c_type, c_w)
    c_ps = _min_ps(jobs, c_job, c_w)

    # repeated per bucket: the first slot of the window every domain, the later ones the later domains
    later_ok = _in_later(jobs, doms, later_domains, c_job, c_dom)
    per_job = np.bincount(c_job, minlength=n_jobs)
    first_of = np.concatenate([[0], np.cumsum(per_job)[:-1]]).astype(np.int64)
    block = per_job * progress.p_count
    e_job = np.repeat(np.arange(n_jobs), block)
    within = np.arange(len(e_job)) - np.repeat(np.cumsum(block) - block, block)
    size = per_job[e_job]
    e_slot = progress.p_slot[progress.row_start[e_job] + within // np.maximum(size, 1)]
    e_opt = first_of[e_job] + within % np.maximum(size, 1)
    keep = (e_slot == start) | later_ok[e_opt]
    e_opt, e_slot = e_opt[keep], e_slot[keep]
    return Options(job=np.asarray(progress.jobs, dtype=np.int64)[c_job[e_opt]], slot=e_slot.astype(np.int64),
                   dom=c_dom[e_opt], gtype=c_type[e_opt], workers=c_w[e_opt],
                   speed=instance.slot_seconds * c_rate[e_opt], ps=c_ps[e_opt], split=c_split[e_opt], splits=splits)


def count_choices(low: np.ndarray, top: np.ndarray, counts: str,
                  also: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per (job, domain) pair whose counts run low..top (the job's min_workers, and its
    max_workers capped by what the domain holds): how many counts it has, and the counts
    themselves, pair by pair, ascending: every count ("all") or low, the powers of two
    between and top ("powers"), plus the pair's count in ``also`` when it lies between (-1:
    none; a running job's count, so staying as it is stays an option); none when top < low."""
    ok = top >= low
    if counts == "all":
        n = np.where(ok, top - low + 1, 0)
        at = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        return n, np.repeat(low, n) + at
    powers = 1 << np.arange(max(1, int(top.max(initial=1)).bit_length()), dtype=np.int64)
    extra = np.full(len(low), -1, dtype=np.int64) if also is None else np.asarray(also, dtype=np.int64)
    table = np.column_stack([low, np.broadcast_to(powers, (len(low), len(powers))), extra, top])
    take = np.repeat(ok[:, None], table.shape[1], axis=1)
    take[:, 1:-2] &= (powers > low[:, None]) & (powers < top[:, None])
    take[:, -2] &= (extra > low) & (extra < top) & ((extra & (extra - 1)) != 0)
    take[:, -1] &= top > low
    if also is not None:  # the extra count sits between the powers: sort each pair's counts
        order = np.argsort(np.where(take, table, np.iinfo(np.int64).max), axis=1, kind="stable")
        table, take = np.take_along_axis(table, order, axis=1), np.take_along_axis(take, order, axis=1)
    return take.sum(axis=1), table[take]


def _spread(progress: ProgressBlock, doms: Domains, which: np.ndarray, code: np.ndarray, runs: np.ndarray,
            pair_job: np.ndarray, pair_dom: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """The (job, spread domain, GPU type g) triples, g a type the job runs on (``runs[job,
    g]``; ``code``: each machine's type), with two or more useful machines (of type g and
    taking a worker of the job alone, or taking a PS alone) and room for a worker: their jobs,
    domains, types, the workers the type's machines hold, and their splits (indices into the
    list returned last, of the useful machines of type g). The same for jobs of one fit table
    and types: found once."""
    seen: dict[tuple[int, int, bytes], list[tuple[int, int, int]]] = {}
    splits: list = []
    kept: list[tuple[int, ...]] = []
    for k, d in zip(pair_job.tolist(), pair_dom.tolist()):
        deadline.check("building the model")
        kinds = progress.fit_kinds[k]
        key = (id(kinds), d, runs[k].tobytes())
        if key not in seen:
            members = doms.member_arrays[d]
            kind = which[members]
            worker, ps = kinds.workers[kind] >= 1, kinds.ps[kind] >= 1
            seen[key] = []
            for g in np.unique(code[members]).tolist():
                mine = code[members] == g
                if runs[k, g] and np.count_nonzero((mine & worker) | ps) >= 2:
                    useful = members[mine & (worker | ps)]
                    seen[key].append((g, int(kinds.workers[which[useful]].sum()), len(splits)))
                    splits.append(useful)
        kept += [(k, d, *entry) for entry in seen[key]]
    job, dom, gtype, room, split = np.array(kept, dtype=np.int64).reshape(-1, 5).T
    return job, dom, gtype, room, split, splits


def _rates(instance: Instance, jobs: list[Job], job: np.ndarray, dom: np.ndarray, gtype: np.ndarray,
           workers: np.ndarray) -> np.ndarray:
    """Batches per second of each option (``config_rate``): W / theta at the machine's
    local_gbps or the job's worker_gbps, or the job's speed table on the option's GPU type
    (``gtype``; ``job``: each option's job, ascending)."""
    spread = dom >= len(instance.topology.machines)  # a local domain d is machine d
    batch = np.array([j.batch_seconds for j in jobs], dtype=float)[job]
    gradient = np.array([j.gradient_mb for j in jobs], dtype=float)[job]
    worker_gbps = np.array([j.worker_gbps for j in jobs], dtype=float)[job]
    gbps = np.where(spread, worker_gbps, local_gbps(instance.topology)[np.where(spread, 0, dom)])
    with np.errstate(divide="ignore", invalid="ignore"):  # a table job's entries are replaced below
        rate = workers / (batch + 2 * gradient * MB_TO_GB / gbps)
    # ``job`` is sorted (options come job by job): each table job's options are one slice
    bounds = np.searchsorted(job, np.arange(len(jobs) + 1))
    types = instance.topology.gpu_types
    for k in (k for k, j in enumerate(jobs) if j.speed is not None):
        deadline.check("building the model")
        mine = np.arange(bounds[k], bounds[k + 1])
        index = workers[mine] - jobs[k].min_workers
        apart = spread[mine]
        for g in np.unique(gtype[mine]).tolist():
            table = jobs[k].speed.table(types[g])
            on = gtype[mine] == g
            rows = np.array([table.local, np.max([rates for _, rates in table.spread], axis=0)], dtype=float)
            rate[mine[on]] = rows[apart[on].astype(np.int64), index[on]]
    return rate


def _min_ps(jobs: list[Job], job: np.ndarray, workers: np.ndarray) -> np.ndarray:
    """``min_ps(W)`` of each option's job, from one row per job."""
    if not jobs:
        return np.zeros(0)
    rows = [min_ps_row(j) for j in jobs]
    offset = np.concatenate([[0], np.cumsum([len(r) for r in rows])[:-1]]).astype(np.int64)
    return np.concatenate(rows)[offset[job] + workers]


def _in_later(jobs: list[Job], doms: Domains, later_domains: dict[str, set[str]] | None, job: np.ndarray,
              dom: np.ndarray) -> np.ndarray:
    """Per option, may it be used after the window's first slot (its domain is one of the
    job's later domains, or the job has none given)?"""
    if later_domains is None:
        return np.ones(len(job), dtype=bool)
    n_dom = len(doms.node)
    free = np.array([later_domains.get(j.id) is None for j in jobs], dtype=bool)
    codes = [k * n_dom + doms.allowed(later_domains[j.id]) for k, j in enumerate(jobs) if not free[k]]
    listed = np.isin(job * n_dom + dom, np.concatenate(codes)) if codes else np.zeros(len(job), dtype=bool)
    return free[job] | listed
