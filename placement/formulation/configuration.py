"""The configuration model: per job and slot, a choice among *configurations* — a worker
count W and a domain d (a machine: local; a switch: spread below it) — each with its own
rate. It is the model in which the LP decides how many GPUs a job gets and whether it may
spread, which the other models cannot say when speedups are concave (a speed table,
MODEL.md 8): their progress is linear in the worker count. docs/formulation.md,
'Configuration model'.

Variables: x[j,t,c] in {0, 1} per job j, slot t >= a_j and configuration c = (W, d), plus
p[j,t] and q[j] of :mod:`placement.formulation.progress_block`. Rows:

- choice: at most one configuration per job-slot (a choice group, so ``solvers.rounding``
  rounds it with its dependent rounding and per-solve guarantee);
- capacity per (t, node u, resource r): sum over configurations in u's subtree of
  (W alpha_j + min_ps(W) beta_j) x <= u's subtree capacity (for u a machine, its own row);
- links per (t, spread domain v): sum (W worker_gbps + min_ps(W) ps_gbps) x <= the summed
  uplink capacity of v's populated children (every task of a job spread below v crosses
  the uplink of the child it sits under);
- progress p[j,t] <= sum_c rate_c Delta x[j,t,c] / B_j, work sum_t p + q >= 1 - 1e-9, and
  the lower bound's objective.

rate_c is the job's whole rate with W workers: local on machine h, W / theta_h (MODEL.md 4)
or the table's local[W]; spread, W / theta at worker_gbps or the table's fastest spread
row at W (its rows by machines spanned are then not told apart: a relaxation).

**Lower bound.** With every W (``counts="all"``) and every domain allowed, a valid schedule
maps to one configuration per job-slot — its worker count and the lowest common ancestor
of its machines — at a rate no lower than its progress (restarts only slow it), and its
per-machine loads imply these rows; so the LP value (and the IP optimum) bounds the optimal
weighted JCT from below (tested against brute force). ``counts="powers"`` (min_workers,
max_workers, the powers of two between, the most a domain holds) keeps the model small
for per-slot decisions; it is then a planning model, as are restricted domains.
"""
from __future__ import annotations

import numpy as np

from placement import deadline
from placement.formulation.aggregated import AggregateDecoder
from placement.formulation.domains import Domains, fit_table, subtrees
from placement.formulation.progress_block import ProgressBlock
from placement.formulation.rows import Rows, packing_rows
from placement.instance import Instance, Job
from placement.intent import Intent, JobIntent
from solvers.problem import ChoiceGroup, Option, Problem

__all__ = ["COUNTS", "ConfigurationDecoder", "formulate_configuration"]

#: which worker counts become configurations
COUNTS = ("all", "powers")


def worker_counts(job: Job, most: int, counts: str) -> list[int]:
    """The worker counts of a domain that holds at most ``most`` workers of ``job``."""
    top = min(job.max_workers, most)
    if top < job.min_workers:
        return []
    if counts == "all":
        return list(range(job.min_workers, top + 1))
    picked = {job.min_workers, top}
    w = 1
    while w < top:
        if w > job.min_workers:
            picked.add(w)
        w *= 2
    return sorted(picked)


def config_rate(instance: Instance, job: Job, workers: int, local: bool, h: int) -> float:
    """Batches per second of the whole job with ``workers`` workers, local on machine ``h``
    or spread (module docstring)."""
    if job.speed is not None:
        if local:
            return job.speed.rate(workers, 1)
        return max(rates[workers - job.min_workers] for _, rates in job.speed.spread)
    gbps = instance.topology.machines[h].local_gbps if local else job.worker_gbps
    return workers / job.batch_time(gbps)


class ConfigurationDecoder:
    """A rounded vector back to an Intent: the chosen configuration of each job-slot, local
    exactly, spread split over the domain's machines with most room first (the slot rules
    repair the rest)."""

    def __init__(self, instance: Instance, domains: Domains, o_job: np.ndarray, o_slot: np.ndarray,
                 o_dom: np.ndarray, o_workers: np.ndarray, o_split: list, n_opt: int):
        self.instance, self.domains = instance, domains
        self.o_job, self.o_slot, self.o_dom, self.o_workers, self.o_split = o_job, o_slot, o_dom, o_workers, o_split
        self.n_opt = n_opt

    def decode(self, x: np.ndarray) -> Intent:
        inst = self.instance
        intent = Intent(inst.horizon)
        machines = [m.id for m in inst.topology.machines]
        chosen = np.flatnonzero(np.asarray(x, dtype=float)[: self.n_opt] > 0.5)
        for o in chosen.tolist():
            job = inst.jobs[int(self.o_job[o])]
            w = int(self.o_workers[o])
            tasks = AggregateDecoder._spread(self.o_split[o], w, job.min_ps(w), machines)
            intent.slots[int(self.o_slot[o])][job.id] = JobIntent(
                self.domains.nodes[self.domains.node[int(self.o_dom[o])]], tasks)
        return intent


def formulate_configuration(instance: Instance, *, start: int = 0, end: int | None = None,
                            remaining: dict[str, float] | None = None,
                            domains: dict[str, set[str]] | None = None,
                            later_domains: dict[str, set[str]] | None = None,
                            overflow_extra: dict[str, float] | None = None,
                            counts: str = "all") -> tuple[Problem, ConfigurationDecoder]:
    """The configuration model over slots ``start..end-1``; arguments as
    :func:`placement.formulation.aggregated.formulate_aggregated`, plus ``counts``: every
    worker count ("all", the lower bound) or a few ("powers", module docstring)."""
    if counts not in COUNTS:
        raise ValueError(f"counts must be one of {', '.join(COUNTS)}, got {counts!r}")
    progress = ProgressBlock(instance, start=start, end=end, remaining=remaining)
    end, jobs = progress.end, progress.jobs
    topo, dt, res = instance.topology, instance.slot_seconds, instance.resources
    doms = Domains(instance)
    nodes = topo.nodes
    tree = subtrees(instance, doms)

    # ---- configurations per job: (domain, W, rate per slot, machine split) ---------------
    o_job, o_slot, o_dom, o_w, o_speed, o_split = [], [], [], [], [], []
    for j in jobs:
        job = instance.jobs[j]
        allow = None if domains is None else domains.get(job.id)
        fits = fit_table(job, instance)
        per_job = []
        for d, members in enumerate(doms.machines):
            if allow is not None and nodes[doms.node[d]] not in allow:
                continue
            local = bool(doms.is_local[d])
            if local:
                h = members[0]
                most, split = int(fits.local[h]), [(h, int(fits.local[h]))]
            else:
                useful = [h for h in members if fits.workers[h] >= 1 or fits.ps[h] >= 1]
                if len(useful) < 2:
                    continue
                h = useful[0]
                most = int(fits.workers[useful].sum())
                split = sorted(((k, int(fits.workers[k])) for k in useful), key=lambda item: -item[1])
            for w in worker_counts(job, most, counts):
                per_job.append((d, w, dt * config_rate(instance, job, w, local, h), split))
        later = None if later_domains is None else later_domains.get(job.id)
        for t in range(max(job.arrival, start), end):
            deadline.check("building the model")
            for d, w, speed, split in per_job:
                if t > start and later is not None and nodes[doms.node[d]] not in later:
                    continue
                o_job.append(j); o_slot.append(t); o_dom.append(d)
                o_w.append(w); o_speed.append(speed); o_split.append(split)
    n_opt = len(o_job)
    o_job, o_slot, o_dom, o_w = (np.array(a, dtype=np.int64) for a in (o_job, o_slot, o_dom, o_w))
    o_speed = np.array(o_speed, dtype=float)

    progress.place(n_opt)
    n = progress.n
    cost = np.zeros(n)
    offset = progress.cost(cost)
    if overflow_extra:
        cost[progress.q_idx] += [overflow_extra.get(instance.jobs[j].id, 0.0) for j in jobs]
    upper = np.concatenate([np.ones(n_opt), progress.upper()])
    integer = np.concatenate([np.ones(n_opt, dtype=bool), np.zeros(n - n_opt, dtype=bool)])

    # ---- packing: subtree capacity (t, u, r) and spread-domain uplinks (t, v) ---------
    jobs_o = [instance.jobs[j] for j in o_job.tolist()]
    alpha = np.array([[jb.worker.get(r, 0) for r in res] for jb in jobs_o], dtype=float).reshape(-1, len(res))
    beta = np.array([[jb.ps.get(r, 0) for r in res] for jb in jobs_o], dtype=float).reshape(-1, len(res))
    s_o = np.array([jb.min_ps(int(w)) for jb, w in zip(jobs_o, o_w.tolist())], dtype=float)
    demand = o_w[:, None] * alpha + s_o[:, None] * beta
    R, N, T0 = len(res), len(nodes), start
    cols_all = np.arange(n_opt)
    rows_k, cols, vals = [], [], []
    for level in range(tree.up.shape[1]):
        u = tree.up[o_dom, level]
        for r in range(R):
            on = (u >= 0) & (demand[:, r] > 0)
            rows_k.append(((o_slot[on] - T0) * N + u[on]) * R + r)
            cols.append(cols_all[on])
            vals.append(demand[on, r])
    n_cap = (end - start) * N * R
    spread = np.flatnonzero(~doms.is_local[o_dom])
    wg = np.array([jb.worker_gbps for jb in jobs_o])
    pg = np.array([jb.ps_gbps for jb in jobs_o])
    rows_k.append(n_cap + (o_slot[spread] - T0) * len(doms.node) + o_dom[spread])
    cols.append(spread)
    vals.append(o_w[spread] * wg[spread] + s_o[spread] * pg[spread])
    packing, _ = packing_rows(rows_k, cols, vals, tree.rhs(end - start))
    A, _, b = packing.matrix(n)

    C, d = progress.work_rows()
    general = Rows()
    progress.progress_rows(general, cols_all, o_job, o_slot, o_speed)
    G, g_lo, g_hi = general.matrix(n)

    groups: dict[tuple[int, int], list[Option]] = {}
    empty = np.zeros(0, dtype=np.int64)
    for o in range(n_opt):
        if o % 4096 == 0:
            deadline.check("building the model")
        groups.setdefault((int(o_job[o]), int(o_slot[o])), []).append(Option(o, empty))
    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=[ChoiceGroup(tuple(v)) for v in groups.values()],
                      offset=offset, name=f"placement-configuration:{instance.name}")
    return problem, ConfigurationDecoder(instance, doms, o_job, o_slot, o_dom, o_w, o_split, n_opt)
