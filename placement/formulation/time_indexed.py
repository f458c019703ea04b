"""The exact time-indexed ILP of MODEL.md: its optimum is the best weighted total JCT of any
valid schedule, restart losses and speed tables included (the exact optimum that rounding
and the online policies are measured against).

Variables and rows, over the whole horizon:

- Tasks (:class:`~placement.formulation.tasks.TaskVariables`): per job-slot (j, t >= a_j)
  and domain v an indicator y, per machine h under v workers w and PSs s; capacity, hose
  link, shape (MODEL.md 3) and one-domain rows. Per spread option (j, t, v) and populated
  child c of v a continuous u[j,t,v,c] in [0, 1] with u <= (w + s under c) and
  sum_c u >= 2 y: as w, s are integers, u reaches 1 only on a child holding a task, so a
  chosen spread domain IS the lowest common ancestor of the job's machines and the rates
  and link loads are MODEL.md's. The per-machine PS bound min_ps(max_workers) loses nothing
  (lowering a larger count keeps the machine used, the shape met and every load no larger).
- GPU types (MODEL.md 8): per job-slot of a job whose workers could sit on two types or
  more, a binary per type choosing the gang's type (:mod:`placement.formulation.type_choice`):
  at most one, and workers on a machine of type g only when g's is 1; none on a type the
  job does not run on. Without types (or for a job of one type) there is none.
- Work: work[j,t] = sum w * Delta / theta (TaskVariables.speed), the batches of slot t
  before any restart loss; for a job with a speed table (MODEL.md 8) the table's rate by
  worker count, machines spanned and GPU type instead (:mod:`placement.formulation.table_rates`);
  net[j,t] = work[j,t] - L[j,t], with the loss L of :mod:`placement.formulation.restarts`
  (exactly MODEL.md's loss at a schedule's encoding, never less at any feasible point;
  absent for r_j = 0).
- Completion: the cumulative net batches P[j,t] = P[j,t-1] + net[j,t] (continuous; one
  row per slot, not every slot's terms in every later row) and a binary z[j,t] ("completed
  by the end of t"), t = a_j .. T-1, with progress  P[j,t] >= B_j (1 - 1e-9) z[j,t];
  monotone  z[j,t] <= z[j,t+1];  life  sum_v y[j,t,v] + z[j,t-1] <= 1;
  remainder  rem_j >= B_j - P[j,T-1] - B_j z[j,T-1],  0 <= rem_j <= B_j.
- Objective  sum_j w_j JCT_j,  JCT_j = Delta sum_{t=a_j}^{T-1} (1 - z[j,t]) + Delta z[j,T-1]
  + rem_j theta^L_j / U_j: if z switches on in slot c this is (c - a_j + 1) Delta with
  rem_j = 0 allowed, MODEL.md's JCT; if z stays 0 it is (T - a_j) Delta plus the charge of
  the remaining batches, MODEL.md's charge for an unfinished job.

So every valid schedule encodes (:meth:`ExactDecoder.encode`) to a feasible point of equal
objective, and every feasible point decodes (:meth:`ExactDecoder.decode`) to a valid
schedule scoring no more (its net progress is at most MODEL.md's, and minimisation pushes z
up as far as progress and life allow): the two optima are equal.

Earliest completion, a fixing that removes no valid schedule: z[j,t] = 0 while
M_j (t - a_j + 1 - f_j) < B_j (1 - 1e-9), M_j the most batches one slot can credit j and
f_j its first slot's restart fraction (P[j,t] is bounded by the same amount). Beside
cutting the search, it gives HiGHS a bound of sum_j w_j (each job's earliest JCT) before
any LP, which on lightly loaded instances is already the optimum.

Symmetry rows across interchangeable machines (ordering their loads) were tried and left
out: on the medium suite they made HiGHS slower to prove optimality (s107 5.4 -> 8.2 s,
s109 15.7 -> 25.4 s, s110 11.2 -> 13.5 s) and changed no bound.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.model.evaluate import evaluate
from placement.formulation.job_slots import JobSlots, Terms
from placement.formulation.restarts import RestartLosses
from placement.formulation.rows import Rows
from placement.formulation.table_rates import TableRates
from placement.formulation.tasks import S, W, Y, TaskVariables
from placement.formulation.type_choice import TypeChoice
from placement.model.instance import COMPLETE, Instance
from placement.model.intent import Intent
from placement.model.progress import ProgressTracker
from placement.model.schedule import Allocation, Schedule
from solvers.check import violations
from solvers.problem import Problem

__all__ = ["ExactDecoder", "formulate_time_indexed"]


@dataclass
class ExactDecoder:
    """Inverse of :func:`formulate_time_indexed` (a vector back to an Intent that is already valid;
    the chain writes it as it stands, see :class:`placement.chain.AsPlanned`) and its
    forward map (a valid schedule to a feasible vector of the same objective). ``exact``
    (always True: the model is exact for every instance) and ``message`` are what the
    chain's trace reports."""

    core: TaskVariables
    exact: bool
    message: str
    problem: Problem
    slots: JobSlots
    types: TypeChoice
    tables: TableRates
    restarts: RestartLosses
    u_task: np.ndarray      # task columns of spread options ...
    u_of_task: np.ndarray   # ... and the u each one enters (u columns follow the task variables)
    z0: int                 # column of z[k] = z0 + k
    rem0: int               # column of rem_j = rem0 + j
    p0: int                 # column of P[k] = p0 + k
    net: Terms              # each job-slot's net batches

    def decode(self, x: np.ndarray) -> Intent:
        """The intent of ``x`` without tasks after each job's actual completion (an incumbent
        stopped at a time limit may leave z lagging behind the progress)."""
        inst = self.core.instance
        intent = self.core.decode(x)
        tracker = ProgressTracker(inst)
        jobs = inst.jobs
        for t, slot in enumerate(intent.slots):
            for job_id in [j for j in slot if tracker.is_done(jobs[inst.job_index[j]])]:
                del slot[job_id]
            tracker.advance(t, {j: p.tasks for j, p in slot.items()})
        return intent

    def encode(self, schedule: Schedule) -> np.ndarray:
        """The point of a valid ``schedule``: feasible, and its objective is the schedule's
        MODEL.md score (decoding it gives the schedule back). Raises ValueError for an invalid schedule or one the model cannot
        hold (e.g. more PSs on one machine than min_ps(max_workers))."""
        inst, core = self.core.instance, self.core
        wrong, report = evaluate(inst, schedule)
        if wrong:
            raise ValueError(f"not a valid schedule: {wrong[0]}")
        x = np.zeros(self.problem.n)
        x[: core.n] = self._tasks(schedule)
        x[core.n + self.u_of_task[x[self.u_task] > 0]] = 1.0   # u = 1 on each child holding a task
        done = np.array([o.completion_slot if o.finished else inst.horizon for o in report.jobs])
        x[self.z0 + np.arange(self.slots.n)] = self.slots.slot >= done[self.slots.job]
        x[self.rem0 + np.arange(len(inst.jobs))] = [0.0 if o.finished else o.remaining_batches for o in report.jobs]
        x[self.types.col] = self.types.values(x)
        x[np.concatenate([self.tables.q_col, self.tables.b_col])] = self.tables.values(x)
        x[np.concatenate([self.restarts.loss_col, self.restarts.rho_col])] = self.restarts.values(x)
        net = self.net.total(x, self.slots.n)
        x[self.p0 + np.arange(self.slots.n)] = np.concatenate(
            [net[a: b + 1].cumsum() for a, b in zip(self.slots.first, self.slots.last)] or [np.zeros(0)])
        bad = violations(self.problem, x)
        if bad:
            worst = max(bad, key=lambda v: v.amount)
            raise ValueError(f"the schedule falls outside the model: {len(bad)} row(s) violated, worst {worst.kind} "
                             f"{worst.name or worst.row} ({worst.lhs:.6g} vs {worst.rhs:.6g})")
        return x

    def _tasks(self, schedule: Schedule) -> np.ndarray:
        """y, w, s of the schedule: per job-slot, the domain its machines imply."""
        inst, core = self.core.instance, self.core
        topo, doms = inst.topology, core.domains
        dom_of_node = {int(nd): d for d, nd in enumerate(doms.node)}
        node_index = {nd: i for i, nd in enumerate(topo.nodes)}
        lookup = {(int(k), int(j), int(t), int(d), int(h)): i for i, (k, j, t, d, h) in
                  enumerate(zip(core.kind, core.job, core.slot, core.dom, core.machine))}
        x = np.zeros(core.n)
        for slot in schedule.slots:
            by_job: dict[str, list[Allocation]] = {}
            for a in slot.allocations:
                if a.workers or a.ps:
                    by_job.setdefault(a.job, []).append(a)
            for job_id, allocs in by_job.items():
                j = inst.job_index[job_id]
                hosts = [topo.machine_index[a.machine] for a in allocs]
                d = dom_of_node.get(node_index[topo.lca([a.machine for a in allocs])], -1)
                try:
                    x[lookup[(Y, j, slot.t, d, -1)]] = 1
                    for a, h in zip(allocs, hosts):
                        for kind, count in ((W, a.workers), (S, a.ps)):
                            if count:
                                i = lookup[(kind, j, slot.t, d, h)]
                                if count > core.upper[i]:
                                    raise KeyError(i)
                                x[i] = count
                except KeyError:
                    raise ValueError(f"job {job_id} in slot {slot.t}: the model cannot hold its placement "
                                     f"{[(a.machine, a.workers, a.ps) for a in allocs]}") from None
        return x


def formulate_time_indexed(instance: Instance) -> tuple[Problem, ExactDecoder]:
    """The time-indexed ILP of every job over the whole horizon (module docstring)."""
    topo = instance.topology
    if any(len(topo.below(m.id)) > 1 for m in topo.machines):
        raise ValueError("a machine has machines below it; the exact model needs machines at the leaves")
    T, dt, jobs = instance.horizon, instance.slot_seconds, instance.jobs
    J = len(jobs)
    core = TaskVariables(instance, list(range(J)), 0, T)
    u_task, u_of_task, u_opt = _lca_variables(core)
    n_u = len(u_opt)
    u_idx = core.n + np.arange(n_u)
    slots = JobSlots(instance)
    z0, rem0 = core.n + n_u, core.n + n_u + slots.n
    p0 = rem0 + J
    z_idx, rem_idx, p_idx = z0 + np.arange(slots.n), rem0 + np.arange(J), p0 + np.arange(slots.n)
    types = TypeChoice(core, slots, p0 + slots.n)
    tables = TableRates(core, slots, p0 + slots.n + types.n, types)
    w = core.w_idx[~tables.table[core.job[core.w_idx]]]
    work = Terms(*(np.concatenate([a, c]) for a, c in zip(
        Terms(slots.key(core.job[w], core.slot[w]), w, core.speed[w]), tables.work)))
    most = np.where(tables.table, tables.most, _most_work(core))
    restarts = RestartLosses(core, slots, work, most, p0 + slots.n + types.n + tables.n)
    n = p0 + slots.n + types.n + tables.n + restarts.n

    B = np.array([j.work_batches for j in jobs], dtype=float)
    weight = np.array([j.weight for j in jobs], dtype=float)
    cost = np.zeros(n)
    cost[z_idx] = -weight[slots.job] * dt
    cost[z0 + slots.last] = 0.0
    cost[rem_idx] = weight * np.array([instance.unfinished_seconds(j, 1.0) for j in jobs])
    offset = float(np.sum(weight * dt * slots.length))
    # earliest completion: M_j (t - a_j + 1 - f_j) batches at most by the end of t
    reach = (most * (1 - restarts.frac))[slots.job] + most[slots.job] * (slots.slot - slots.arrival[slots.job])
    z_upper = np.where(reach * (1 + 1e-9) < COMPLETE * B[slots.job], 0.0, 1.0)
    upper = np.concatenate([core.upper, np.ones(n_u), z_upper, B, reach * (1 + 1e-9), types.upper, tables.upper,
                            restarts.upper])
    integer = np.concatenate([np.ones(core.n, bool), np.zeros(n_u, bool), np.ones(slots.n, bool),
                              np.zeros(J + slots.n, bool), types.integer, tables.integer, restarts.integer])

    # packing: the task variables' capacity/link rows, then life rows  Y[j,t] + z[j,t-1] <= 1
    packing, pack_names = core.packing()
    y = core.y_idx
    ky = slots.key(core.job[y], core.slot[y])
    life = np.flatnonzero(slots.slot > slots.arrival[slots.job])
    life_row = np.full(slots.n, -1, dtype=np.int64)
    life_row[life] = np.arange(len(life))
    on = life_row[ky] >= 0
    packing.add(len(life), [(np.arange(len(life)), z_idx[life - 1], 1.0), (life_row[ky[on]], y[on], 1.0)], -np.inf, 1.0)
    pack_names += [f"life[{jobs[j].id},t={t}]" for j, t in zip(slots.job[life].tolist(), slots.slot[life].tolist())]
    A, _, b = packing.matrix(n)

    general = Rows()
    core.shape_rows(general)
    # LCA: u - (w + s under the child) <= 0, then sum_c u - 2 y >= 0 per spread option
    general.add(n_u, [(np.arange(n_u), u_idx, 1.0), (u_of_task, u_task, -1.0)], -np.inf, 0.0)
    spread = np.flatnonzero(~core.domains.is_local[core.opt_dom])
    general.add(len(spread), [(np.searchsorted(spread, u_opt), u_idx, 1.0),
                              (np.arange(len(spread)), core.opt_y[spread], -2.0)], 0.0, np.inf)
    net = Terms(*(np.concatenate([a, c]) for a, c in zip(work, restarts.net)))
    # cumulative: P[j,t] - P[j,t-1] - net[j,t] = 0;  progress: P[j,t] - B (1 - 1e-9) z[j,t] >= 0;
    # remainder: rem + P[j,T-1] + B z[j,T-1] >= B
    later = np.flatnonzero(slots.slot > slots.arrival[slots.job])
    general.add(slots.n, [(np.arange(slots.n), p_idx, 1.0), (later, p_idx[later - 1], -1.0),
                          (net.key, net.col, -net.coef)], 0.0, 0.0)
    general.add(slots.n, [(np.arange(slots.n), p_idx, 1.0), (np.arange(slots.n), z_idx, -COMPLETE * B[slots.job])],
                0.0, np.inf)
    general.add(J, [(np.arange(J), p0 + slots.last, 1.0), (np.arange(J), rem_idx, 1.0),
                    (np.arange(J), z0 + slots.last, B)], B, np.inf)
    # monotone: z[j,t] - z[j,t+1] <= 0
    step = np.flatnonzero(slots.slot < T - 1)
    general.add(len(step), [(np.arange(len(step)), z_idx[step], 1.0), (np.arange(len(step)), z_idx[step] + 1, -1.0)],
                -np.inf, 0.0)
    types.rows(general)
    tables.rows(general)
    restarts.rows(general)
    G, g_lo, g_hi = general.matrix(n)

    problem = Problem(c=cost, sense="min", A=A, b=b, G=G, g_lo=g_lo, g_hi=g_hi, upper=upper, integer=integer,
                      groups=core.choice_groups(), offset=offset, name=f"placement-exact:{instance.name}",
                      pack_names=pack_names)
    return problem, ExactDecoder(core, True, "", problem, slots, types, tables, restarts, u_task, u_of_task, z0, rem0,
                                 p0, net)


def _lca_variables(core: TaskVariables) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The u variables: one per (spread option, populated child holding one of its task
    variables). Returns those task columns, the u each enters, and each u's option."""
    doms = core.domains
    child_of = np.full((len(doms.node), len(core.instance.topology.machines)), -1, dtype=np.int64)
    for d, kids in enumerate(doms.children):
        for k, members in enumerate(kids):
            child_of[d, members] = k
    task = np.concatenate([core.w_idx, core.s_idx])
    task = task[~doms.is_local[core.dom[task]]]
    width = max((len(kids) for kids in doms.children), default=1) or 1
    u_key, u_of_task = np.unique(core.option[task] * width + child_of[core.dom[task], core.machine[task]],
                                 return_inverse=True)
    return task, u_of_task, u_key // width


def _most_work(core: TaskVariables) -> np.ndarray:
    """Per job, a bound on the batches one slot credits it: over its domains, the fewer of
    max_workers and the domain's room for workers, at the domain's fastest speed."""
    jobs = core.instance.jobs
    w = core.w_idx
    opt = core.option[w]
    room = np.bincount(opt, weights=core.upper[w], minlength=core.n_opt)
    fastest = np.zeros(core.n_opt)
    np.maximum.at(fastest, opt, core.speed[w])
    U = np.array([j.max_workers for j in jobs], dtype=float)
    most = np.zeros(len(jobs))
    np.maximum.at(most, core.opt_job, np.minimum(U[core.opt_job], room) * fastest)
    return most
