"""The aggregated placement model: one worker count and one PS count per (job, slot,
domain) instead of one per machine — for decisions that must be fast (online, large
clusters). docs/formulation.md, section 'Aggregated model'.

Variables per job j, slot t >= a_j and domain d of j: y (binary), W and S (integers),
plus p[j,t] and q[j] exactly as in :mod:`placement.formulation.progress_block`. Rows:
- capacity per (t, node u, resource r): the W/S of every option whose domain lies in
  u's subtree use at most the subtree's total capacity (for u a machine this is the
  exact machine row of the jobs local to it; spread jobs count at every subtree that
  contains their domain);
- links per (t, spread domain v): every task of a job spread below v crosses the uplink
  of the child it sits under, so sum (worker_gbps W + ps_gbps S) <= the summed uplink
  capacity of v's populated children;
- shape per option: L y <= W <= upper_W y, S >= kappa W; one domain per job-slot
  (choice group); progress p[j,t] <= sum_d speed_d W / B_j; work sum_t p + q >= 1 - 1e-9.
Every valid schedule maps to a feasible point of this model with the same objective
terms (its per-machine rows imply the aggregated ones), so with all domains allowed the
LP value is again a lower bound on the optimal weighted JCT — weaker than the
per-machine model's, as it forgets how tasks split between machines.

GPU types (MODEL.md 8) keep it a relaxation: a domain's worker room counts only the machines
of the types the job runs on (:func:`~placement.formulation.domains.fit_table`), each worker
is credited the best rate per worker over those types, and that a gang's workers share one
type is not modelled (a domain's count is not split by type; the configuration model does
that). The decoder puts a spread option's workers on the machines of one type, the one with
the most room.
"""
from __future__ import annotations

import numpy as np

from placement import deadline
from placement.formulation.domains import Domains, fit_table, subtrees, local_gbps as machine_gbps
from placement.formulation.progress_block import ProgressBlock
from placement.formulation.rows import Rows, packing_rows
from placement.model.instance import TOL, Instance
from placement.model.intent import Intent, JobIntent
from placement.model.topology import Topology
from solvers.problem import FlatGroups, Problem

_W, _S, _Y = 0, 1, 2


class AggregateDecoder:
    """Rounded (domain, W, S) per job-slot back to an Intent: local domains exactly, spread
    domains split over the domain's machines, most room first (the slot rules repair)."""

    def __init__(self, instance: Instance, domains: Domains, opt_job, opt_slot, opt_dom, index, split, n_core):
        self.instance, self.domains = instance, domains
        self.opt_job, self.opt_slot, self.opt_dom, self.index = opt_job, opt_slot, opt_dom, index
        self.split, self.n_core = split, n_core

    def decode(self, x: np.ndarray) -> Intent:
        inst = self.instance
        plan = Intent(inst.horizon)
        y, w, s = (np.rint(x[self.index[:, k]]).astype(np.int64) for k in (_Y, _W, _S))
        machines = [m.id for m in inst.topology.machines]
        for o in np.flatnonzero((y == 1) & (w > 0)):
            d = int(self.opt_dom[o])
            tasks = self._spread(self.split[o], int(w[o]), int(s[o]), machines)
            plan.slots[int(self.opt_slot[o])][inst.jobs[int(self.opt_job[o])].id] = JobIntent(
                self.domains.nodes[self.domains.node[d]], tasks)
        return plan

    @staticmethod
    def _spread(order: list[tuple[int, int]], workers: int, ps: int, machines: list[str]) -> dict[str, tuple[int, int]]:
        """Fill machines (h, room) in order with workers, then one PS per worker machine
        round-robin until ``ps`` are placed."""
        tasks: dict[str, list[int]] = {}
        left = workers
        for h, room in order:
            take = min(left, room)
            if take > 0:
                tasks[machines[h]] = [take, 0]
                left -= take
            if left == 0:
                break
        if left > 0 and order:
            tasks.setdefault(machines[order[0][0]], [0, 0])[0] += left
        hosts = list(tasks) or [machines[order[0][0]]]
        for k in range(ps):
            tasks.setdefault(hosts[k % len(hosts)], [0, 0])[1] += 1
        return {h: (v[0], v[1]) for h, v in tasks.items()}


def _one_type(topology: Topology, split: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (machine, room) pairs of ``split`` of the GPU type with the most room (MODEL.md 8:
    the decoder's workers on one type; PSs go beside them); all of them without types."""
    if not topology.typed:
        return split
    code = topology.type_code
    room = np.bincount([code[h] for h, _ in split], weights=[r for _, r in split], minlength=len(topology.gpu_types))
    return [(h, r) for h, r in split if code[h] == int(np.argmax(room))]


def formulate_aggregated(instance: Instance, *, start: int = 0, end: int | None = None,
                         remaining: dict[str, float] | None = None,
                         domains: dict[str, set[str]] | None = None,
                         later_domains: dict[str, set[str]] | None = None,
                         overflow_extra: dict[str, float] | None = None) -> tuple[Problem, AggregateDecoder]:
    """The aggregated model over slots ``start..end-1``; arguments as
    :func:`placement.formulation.formulate_per_machine`, plus ``later_domains``: a (smaller) set of
    domains per job for the slots after ``start`` (online look-ahead slots only plan), and
    ``overflow_extra``: per job id, a cost added to its q[j] (objective units, i.e.
    weighted seconds for all of the job's work left after the window) — the online
    policy's charge for queueing after the window; with it the LP value is no longer a
    lower bound."""
    progress = ProgressBlock(instance, start=start, end=end, remaining=remaining)
    end, jobs = progress.end, progress.jobs
    topo, dt = instance.topology, instance.slot_seconds
    doms = Domains.of(instance)
    nodes = topo.nodes
    res = instance.resources
    local_gbps = machine_gbps(topo)
    tree = subtrees(instance, doms)

    # ---- options: per job its domains with (upper W, upper S, speed, machine split) -----
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("job", "slot", "dom", "uw", "us", "speed")}
    o_split: list = []
    for j in jobs:
        job = instance.jobs[j]
        fits = fit_table(job, instance)
        w_fit, s_fit = fits.workers, fits.ps
        per_job = []
        for d in doms.allowed(None if domains is None else domains.get(job.id)).tolist():
            members = doms.machines[d]
            if doms.is_local[d]:
                h = members[0]
                uw = int(fits.local[h])
                if uw < job.min_workers:
                    continue
                speed = dt * job.speed.best_per_worker(local=True) if job.speed is not None \
                    else dt / job.batch_time(local_gbps[h])
                split = [(h, uw)]
                us = job.min_ps(uw)
            else:
                useful = [h for h in members if w_fit[h] >= 1 or s_fit[h] >= 1]
                uw = min(job.max_workers, int(w_fit[useful].sum()) if useful else 0)
                if len(useful) < 2 or uw < job.min_workers:
                    continue
                speed = dt * job.speed.best_per_worker(local=False) if job.speed is not None \
                    else dt / job.batch_time(job.worker_gbps)
                split = _one_type(topo, sorted(((h, int(w_fit[h])) for h in useful), key=lambda item: -item[1]))
                us = int(s_fit[useful].sum())
            per_job.append((d, uw, max(us, 1), speed, split))
        e_dom = np.array([e[0] for e in per_job], dtype=np.int64)
        later = None if later_domains is None else later_domains.get(job.id)
        every = np.arange(len(per_job))
        after = every if later is None else every[np.isin(e_dom, doms.allowed(later))]
        picks = []
        for t in range(max(job.arrival, start), end):
            deadline.check("building the model")
            picks.append(every if t == start else after)
        pick = np.concatenate(picks)
        parts["slot"].append(np.repeat(np.arange(max(job.arrival, start), end), [len(p) for p in picks]))
        parts["job"].append(np.full(len(pick), j, dtype=np.int64))
        parts["dom"].append(e_dom[pick])
        for k, key in enumerate(("uw", "us", "speed"), start=1):
            parts[key].append(np.array([e[k] for e in per_job], dtype=float)[pick])
        o_split += [per_job[i][4] for i in pick.tolist()]
    o_job, o_slot, o_dom = (np.concatenate(parts[k]) for k in ("job", "slot", "dom"))
    o_uw, o_us, o_speed = (np.concatenate(parts[k]) for k in ("uw", "us", "speed"))
    n_opt = len(o_job)
    index = np.arange(3 * n_opt).reshape(n_opt, 3)  # columns W, S, Y of each option

    progress.place(3 * n_opt)
    n = progress.n
    cost = np.zeros(n)
    offset = progress.cost(cost)
    if overflow_extra:
        cost[progress.q_idx] += [overflow_extra.get(instance.jobs[j].id, 0.0) for j in jobs]
    upper = np.zeros(n)
    upper[index[:, _W]], upper[index[:, _S]], upper[index[:, _Y]] = o_uw, o_us, 1.0
    upper[3 * n_opt:] = progress.upper()
    integer = np.zeros(n, dtype=bool)
    integer[: 3 * n_opt] = True

    # ---- packing: subtree capacity (t, u, r) and spread-domain uplinks (t, v) ---------
    of_job = progress.positions(o_job)
    job_list = [instance.jobs[j] for j in jobs]
    alpha = np.array([[jb.worker.get(r, 0) for r in res] for jb in job_list], dtype=float)[of_job]
    beta = np.array([[jb.ps.get(r, 0) for r in res] for jb in job_list], dtype=float)[of_job]
    R, N, T0 = len(res), len(nodes), start
    rows_k, cols, vals = [], [], []
    for level in range(tree.up.shape[1]):
        u = tree.up[o_dom, level]
        for r in range(R):
            for var, demand in ((_W, alpha[:, r]), (_S, beta[:, r])):
                on = (u >= 0) & (demand > 0)
                rows_k.append(((o_slot[on] - T0) * N + u[on]) * R + r)
                cols.append(index[on, var])
                vals.append(demand[on])
    n_cap = (end - start) * N * R
    spread = np.flatnonzero(~doms.is_local[o_dom])
    wg = np.array([jb.worker_gbps for jb in job_list], dtype=float)[of_job]
    pg = np.array([jb.ps_gbps for jb in job_list], dtype=float)[of_job]
    link_key = n_cap + (o_slot[spread] - T0) * len(doms.node) + o_dom[spread]
    rows_k += [link_key, link_key]
    cols += [index[spread, _W], index[spread, _S]]
    vals += [wg[spread], pg[spread]]
    packing, _ = packing_rows(rows_k, cols, vals, tree.rhs(end - start))
    A, _, b = packing.matrix(n)

    C, d = progress.work_rows()
    general = Rows()
    L = np.array([jb.min_workers for jb in job_list], dtype=float)[of_job]
    kappa = np.array([jb.kappa for jb in job_list], dtype=float)[of_job]
    tol = np.array([TOL / jb.ps_gbps for jb in job_list], dtype=float)[of_job]
    ar = np.arange(n_opt)
    W_, S_, Y_ = index[:, _W], index[:, _S], index[:, _Y]
    # W <= U y is implied by the choice group's own W <= upper_W y (upper_W <= U), and
    # S >= y is left out: a relaxation (the bound stays valid) with a third fewer rows;
    # the slot rules give every running job its min_ps(W) PSs anyway.
    general.add(n_opt, [(ar, W_, 1.0), (ar, Y_, -L)], 0.0, np.inf)
    general.add(n_opt, [(ar, S_, 1.0), (ar, W_, -kappa)], -tol, np.inf)
    progress.progress_rows(general, W_, o_job, o_slot, o_speed)
    G, g_lo, g_hi = general.matrix(n)

    # one choice group per job-slot (the options come job by job, slot by slot); members W, S
    new = np.ones(n_opt, dtype=bool)
    new[1:] = (o_job[1:] != o_job[:-1]) | (o_slot[1:] != o_slot[:-1])
    groups = FlatGroups(Y_, np.cumsum(new) - 1, index[:, [_W, _S]].reshape(-1), np.repeat(ar, 2))
    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=groups,
                      offset=offset, name=f"placement-aggregated:{instance.name}")
    return problem, AggregateDecoder(instance, doms, o_job, o_slot, o_dom, index, o_split, 3 * n_opt)
