"""The configuration model: per job and slot, a choice among *configurations* — a worker
count W, a domain d (a machine: local; a switch: spread below it) and a GPU type g (MODEL.md
8: the type of the gang's workers) — each with its own rate. It is the model in which the
LP decides how many GPUs a job gets, whether it may spread and on which type, which the
other models cannot say when speedups are concave (a speed table, MODEL.md 8): their
progress is linear in the worker count. docs/formulation.md, 'Configuration model' and
'GPU types'.

Variables: x[j,t,c] in {0, 1} per job j, slot t >= a_j and configuration c = (W, d), plus
p[j,t] and q[j] of :mod:`placement.formulation.progress_block`. Rows:

- choice: at most one configuration per job-slot (a choice group, so ``solvers.rounding``
  rounds it with its dependent rounding and per-solve guarantee);
- capacity per (t, node u, resource r): sum over configurations in u's subtree of
  (W alpha_j + min_ps(W) beta_j) x <= u's subtree capacity (for u a machine, its own row);
- GPU types, per (t, node u whose subtree holds two types or more, type g, resource r):
  sum over type-g configurations in u's subtree of W alpha_j x <= the capacity of u's
  type-g machines (the workers' part only: PSs may sit on any type), so the LP cannot pack
  work of one type into another's capacity; on a cluster without types there are none;
- links per (t, spread domain v): sum (W worker_gbps + min_ps(W) ps_gbps) x <= the summed
  uplink capacity of v's populated children (every task of a job spread below v crosses
  the uplink of the child it sits under);
- progress p[j,t] <= sum_c rate_c Delta x[j,t,c] / B_j, work sum_t p + q >= 1 - 1e-9, and
  the lower bound's objective.

rate_c is the job's whole rate with W workers on type g: local on machine h (of type g),
W / theta_h (MODEL.md 4) or the type's table's local[W]; spread, W / theta at worker_gbps or
the type's table's fastest spread row at W (its rows by machines spanned are then not told
apart: a relaxation). A job with one table, or linear speed, has the same rates on every type.

**Lower bound.** With every W (``counts="all"``) and every domain allowed, a valid schedule
maps to one configuration per job-slot — its worker count, the lowest common ancestor of
its machines and its workers' one type — at a rate no lower than its progress (restarts
only slow it), and its per-machine loads imply these rows (its workers sit on machines of
their type; a spread option exists wherever two useful machines do, a PS-only machine of
another type counted); so the LP value (and the IP optimum) bounds the optimal weighted JCT
from below (tested against brute force, with and without GPU types). ``counts="powers"``
(min_workers, max_workers, the powers of two between, the most a domain holds, and a
running job's current count) keeps the model small for per-slot decisions; it is then a
planning model, as are restricted domains.
"""
from __future__ import annotations

import math

import numpy as np

from placement import deadline
from placement.formulation.config_options import Options, count_choices, options
from placement.formulation.domains import Domains, subtrees
from placement.formulation.progress_block import ProgressBlock, geometric_buckets
from placement.formulation.rows import Rows, packing_rows
from placement.formulation.slot_room import SlotRoom
from placement.model.instance import Instance, Job, demand_matrix
from placement.model.intent import Intent, JobIntent
from solvers.problem import FlatGroups, Problem

__all__ = ["COUNTS", "ConfigurationDecoder", "formulate_configuration"]

#: which worker counts become configurations
COUNTS = ("all", "powers")
#: how the window's slots are grouped (``formulate_configuration``)
BUCKETS = ("slots", "geometric")


def worker_counts(job: Job, most: int, counts: str) -> list[int]:
    """The worker counts of a domain that holds at most ``most`` workers of ``job``."""
    top = np.array([min(job.max_workers, most)], dtype=np.int64)
    return count_choices(np.array([job.min_workers], dtype=np.int64), top, counts)[1].tolist()


def config_rate(instance: Instance, job: Job, workers: int, local: bool, h: int) -> float:
    """Batches per second of the whole job with ``workers`` workers on machine ``h``'s GPU
    type, local on ``h`` or spread (module docstring)."""
    if job.speed is not None:
        table = job.speed.table(instance.topology.machines[h].gpu_type)
        if local:
            return table.rate(workers, 1)
        return max(rates[workers - job.min_workers] for _, rates in table.spread)
    gbps = instance.topology.machines[h].local_gbps if local else job.worker_gbps
    return workers / job.batch_time(gbps)


def restart_discount(instance: Instance, opts: Options,
                     running: dict[str, tuple[int, str | None, float]]) -> np.ndarray:
    """Per option, the share of its rate a running job keeps once it pays the restart a
    resize costs: 1 for its current worker count and GPU type (``running``: workers, GPU
    type, and H > 0, the seconds it is expected to hold a configuration) and for a job not
    running (its start costs a restart on every option alike; below ``oracle`` the
    scheduler's ranks charge it, :mod:`placement.online.sizes`), else H / (H + r), r its
    ``restart_seconds`` as the cluster gives it (not capped at a slot as MODEL.md 4 charges
    it: a restart that outlasts the slot, 250 s for imagenet in the Sia simulator's 60-s
    rounds, is lost in full there): the new rate is kept about H seconds, of which r are
    lost. Sia's reallocation factor (SOSP'23) reads the job's age over its restarts; here H
    is its useful seconds over its configurations so far. It damps a job's resizes as they
    become frequent. The configuration model itself has no variable for "changed since the
    last slot" (it would be fractional in the LP), so the factor holds in every bucket of
    the window. A move at the same count and type is left to the slot rules, which keep a
    job's machines unless a move finishes it sooner (their rule b). The window offers a
    running job its current count even where ``counts="powers"`` would skip it
    (:func:`formulate_configuration`), so staying is an undiscounted option."""
    if any(not (hold > 0 and math.isfinite(hold)) for _, _, hold in running.values()):
        raise ValueError("running: each job's hold time H must be a finite number of seconds > 0")
    types = instance.topology.gpu_types
    n = len(instance.jobs)
    workers, kind, factor = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64), np.ones(n)
    for j_id, (count, gpu_type, hold) in running.items():
        if (j := instance.job_index.get(j_id)) is not None:
            workers[j], factor[j] = count, hold / (hold + instance.jobs[j].restart_seconds)
            kind[j] = types.index(gpu_type) if gpu_type in types else -1
    w, g = workers[opts.job], kind[opts.job]
    resized = (w >= 0) & ((opts.workers != w) | ((g >= 0) & (opts.gtype != g)))
    return np.where(resized, factor[opts.job], 1.0)


class ConfigurationDecoder:
    """A rounded vector back to an Intent: the chosen configuration of each job-slot (of
    each slot of a job-bucket), local exactly, spread packed into what the slot's other
    choices left of the domain's machines (:class:`placement.formulation.slot_room.SlotRoom`;
    the slot rules repair the rest). With ``decode_until``, only the choices of the slots
    before it: the others are left empty (a caller that reads only the first slot spares
    packing the rest; each bucket is packed on its own, so the slots decoded are the same)."""

    def __init__(self, instance: Instance, domains: Domains, o_job: np.ndarray, o_slot: np.ndarray,
                 o_until: np.ndarray, o_dom: np.ndarray, o_workers: np.ndarray, o_split: np.ndarray, splits: list,
                 n_opt: int, decode_until: int | None = None):
        """Option o holds in slots ``o_slot[o]..o_until[o]-1``; ``splits[o_split[o]]``: the
        machines of a spread option's domain that hold a task."""
        self.decode_until = decode_until
        self.instance, self.domains = instance, domains
        self.o_job, self.o_slot, self.o_until, self.o_dom, self.o_workers = o_job, o_slot, o_until, o_dom, o_workers
        self.o_split, self.splits, self.n_opt = o_split, splits, n_opt

    def decode(self, x: np.ndarray) -> Intent:
        inst = self.instance
        intent = Intent(inst.horizon)
        machines = [m.id for m in inst.topology.machines]
        chosen = np.flatnonzero(np.asarray(x, dtype=float)[: self.n_opt] > 0.5)
        if self.decode_until is not None:
            chosen = chosen[self.o_slot[chosen] < self.decode_until]
        is_local = self.domains.is_local[self.o_dom[chosen]]
        room = SlotRoom(inst)
        for o in chosen[room.order(is_local, self.o_workers[chosen])].tolist():
            job = inst.jobs[int(self.o_job[o])]
            d, w, until = int(self.o_dom[o]), int(self.o_workers[o]), int(self.o_until[o])
            if self.domains.is_local[d]:  # a local domain d is machine d
                tasks = room.local(job, until, d, w, job.min_ps(w), machines)
            else:  # one packing per bucket: its slots share their choices
                tasks = room.spread(job, until, self.splits[int(self.o_split[o])], w, job.min_ps(w), machines)
            chosen_config = JobIntent(self.domains.nodes[self.domains.node[d]], tasks)
            for t in range(int(self.o_slot[o]), until):
                intent.slots[t][job.id] = chosen_config
        return intent


def formulate_configuration(instance: Instance, *, start: int = 0, end: int | None = None,
                            remaining: dict[str, float] | None = None,
                            domains: dict[str, set[str]] | None = None,
                            later_domains: dict[str, set[str]] | None = None,
                            overflow_extra: dict[str, float] | None = None,
                            counts: str = "all", buckets: str = "slots",
                            decode_until: int | None = None,
                            running: dict[str, tuple[int, str | None, float]] | None = None
                            ) -> tuple[Problem, ConfigurationDecoder]:
    """The configuration model over slots ``start..end-1``; arguments as
    :func:`placement.formulation.aggregated.formulate_aggregated`, plus ``counts``: every
    worker count ("all", the lower bound) or a few ("powers", module docstring), and
    ``buckets``: a configuration per slot ("slots") or per geometric time bucket
    ("geometric": slots start, start+1, then 2, 4, ... slots at a time; a planning model,
    :mod:`placement.formulation.progress_block`); ``decode_until``: the decoder fills only
    the slots before it (:class:`ConfigurationDecoder`); ``running``: per job id that runs
    now, its worker count, its workers' GPU type and how long it keeps a configuration: its
    other counts and types pay the restart a resize costs (:func:`restart_discount`; a
    planning model), and its current count is among its options whatever ``counts`` says."""
    if counts not in COUNTS:
        raise ValueError(f"counts must be one of {', '.join(COUNTS)}, got {counts!r}")
    if buckets not in BUCKETS:
        raise ValueError(f"buckets must be one of {', '.join(BUCKETS)}, got {buckets!r}")
    last = instance.horizon if end is None else end
    lengths = geometric_buckets(last - start) if buckets == "geometric" and last > start else None
    progress = ProgressBlock(instance, start=start, end=end, remaining=remaining, buckets=lengths)
    end, jobs = progress.end, progress.jobs
    res = instance.resources
    doms = Domains.of(instance)
    nodes = instance.topology.nodes
    tree = subtrees(instance, doms)

    # ---- configurations per job, repeated per bucket (after the first slot: the later domains) ----
    deadline.check("building the model")
    keep = None if running is None else {j_id: count for j_id, (count, _, _) in running.items()}
    opts = options(instance, progress, doms, domains, later_domains, counts, start, keep)
    o_job, o_slot, o_dom, o_w, o_split, o_speed, s_o = (opts.job, opts.slot, opts.dom, opts.workers, opts.split,
                                                        opts.speed, opts.ps)
    splits = opts.splits
    n_opt = len(o_job)
    if running is not None:
        o_speed = o_speed * restart_discount(instance, opts, running)

    progress.place(n_opt)
    n = progress.n
    cost = np.zeros(n)
    offset = progress.cost(cost)
    if overflow_extra:
        cost[progress.q_idx] += [overflow_extra.get(instance.jobs[j].id, 0.0) for j in jobs]
    upper = np.concatenate([np.ones(n_opt), progress.upper()])
    integer = np.concatenate([np.ones(n_opt, dtype=bool), np.zeros(n - n_opt, dtype=bool)])

    # ---- packing: subtree capacity (t, u, r), spread-domain uplinks (t, v), per-type capacity (t, u, g, r) ----
    of_job = progress.positions(o_job)
    job_list = [instance.jobs[j] for j in jobs]
    alpha, beta = demand_matrix(job_list, res, "worker"), demand_matrix(job_list, res, "ps")
    demand = o_w[:, None] * alpha[of_job] + s_o[:, None] * beta[of_job]
    R, N, n_b = len(res), len(nodes), len(progress.bucket_end)
    o_bucket = progress.bucket_of_slot[o_slot - start]
    cols_all = np.arange(n_opt)
    rows_k, cols, vals = [], [], []
    for level in range(tree.up.shape[1]):
        u = tree.up[o_dom, level]
        for r in range(R):
            on = (u >= 0) & (demand[:, r] > 0)
            rows_k.append((o_bucket[on] * N + u[on]) * R + r)
            cols.append(cols_all[on])
            vals.append(demand[on, r])
    n_cap = n_b * N * R
    spread = np.flatnonzero(~doms.is_local[o_dom])
    wg = np.array([jb.worker_gbps for jb in job_list], dtype=float)[of_job[spread]]
    pg = np.array([jb.ps_gbps for jb in job_list], dtype=float)[of_job[spread]]
    rows_k.append(n_cap + o_bucket[spread] * len(doms.node) + o_dom[spread])
    cols.append(spread)
    vals.append(o_w[spread] * wg + s_o[spread] * pg)
    if tree.mixed.any():  # GPU types: the workers' demand against their type's machines, where types mix
        n_types, first = len(instance.topology.gpu_types), n_cap + n_b * len(doms.node)
        workers = o_w[:, None] * alpha[of_job]
        for level in range(tree.up.shape[1]):
            u = tree.up[o_dom, level]
            mixed = (u >= 0) & tree.mixed[u]
            for r in range(R):
                on = mixed & (workers[:, r] > 0)
                rows_k.append(first + ((o_bucket[on] * N + u[on]) * n_types + opts.gtype[on]) * R + r)
                cols.append(cols_all[on])
                vals.append(workers[on, r])
    packing, _ = packing_rows(rows_k, cols, vals, tree.rhs(n_b))
    A, _, b = packing.matrix(n)

    C, d = progress.work_rows()
    general = Rows()
    progress.progress_rows(general, cols_all, o_job, o_slot, o_speed)
    G, g_lo, g_hi = general.matrix(n)

    # one choice group per job-bucket: the options come job by job, bucket by bucket
    new = np.ones(n_opt, dtype=bool)
    new[1:] = (o_job[1:] != o_job[:-1]) | (o_slot[1:] != o_slot[:-1])
    groups = FlatGroups(cols_all, np.cumsum(new) - 1)
    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=groups,
                      offset=offset, name=f"placement-configuration:{instance.name}")
    return problem, ConfigurationDecoder(instance, doms, o_job, o_slot, progress.bucket_end[o_bucket], o_dom, o_w,
                                         o_split, splits, n_opt, decode_until)
