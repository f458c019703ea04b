"""The exact time-indexed ILP of MODEL.md: its optimum is the best weighted total JCT of any
valid schedule when every job has ``restart_seconds = 0`` (the referee that rounding and
the online policies are measured against on small instances).

On top of the task variables and rows of :class:`~placement.formulation.tasks.TaskVariables` over the
whole horizon it adds, per spread option (j, t, v) and populated child c of v, a
continuous u[j,t,v,c] in [0, 1] with

    u <= sum of w + s on the machines under c,      sum_c u >= 2 y[j,t,v].

Because w and s are integers, u can reach 1 only on a child that holds a task, so a chosen
spread domain has tasks under two of its children: it IS the lowest common ancestor of
the job's machines, and the rates (local or spread) and hose-model link loads of the
task rows are exactly MODEL.md's. (u needs no integrality: the integer counts decide it.)

Per job j, for slots t = a_j .. T-1, a binary z[j,t] ("completed by the end of slot t"):

- progress    sum_{t' <= t} sum w * speed >= B_j (1 - 1e-9) z[j,t]  (speed: TaskVariables.speed)
- monotone    z[j,t] <= z[j,t+1]
- life        sum_v y[j,t,v] + z[j,t-1] <= 1  (no tasks after completion)
- remainder   rem_j >= B_j - sum_t sum w * speed - B_j z[j,T-1],  0 <= rem_j <= B_j

and the objective  sum_j w_j JCT_j  with

    JCT_j = Delta * sum_{t=a_j}^{T-1} (1 - z[j,t]) + Delta * z[j,T-1] + rem_j * theta^L_j / U_j.

Check: if z switches on in slot c (z = 0 before, 1 from c on), the sum counts the c - a_j
slots before c and Delta * z[j,T-1] adds the completion slot itself: (c - a_j + 1) Delta,
MODEL.md's JCT, and rem_j = 0 is allowed. If z stays 0 the sum is (T - a_j) Delta and
rem_j = B_j - (batches done) at the optimum: MODEL.md's charge for an unfinished job.
Minimisation pushes every z up as far as progress and life allow, so the model optimum
equals the best score. The per-machine PS bound of the task variables (at most min_ps(max_workers)) loses
nothing: lowering a larger count to it keeps the machine used, the shape rule met and
every load no larger.

With restart_seconds > 0 on a job, progress here is the loss-free one, which is never
less than MODEL.md's, so every valid schedule is still feasible at no higher cost (put z
on at its true completion): the model is a RELAXATION, its bound is still a lower bound on
the MODEL.md optimum, but its schedule (scored with losses) may not be optimal.
"""
from __future__ import annotations

import numpy as np

from placement.formulation.rows import Rows
from placement.formulation.tasks import TaskVariables
from placement.instance import COMPLETE, Instance
from placement.intent import Intent
from placement.progress import ProgressTracker
from solvers.problem import Problem

__all__ = ["ExactDecoder", "formulate_exact"]

class ExactDecoder:
    """Inverse of :func:`formulate_exact`: a vector of the Problem back to an Intent that is
    already valid (the chain writes it as it stands, see :class:`placement.chain.AsPlanned`)."""

    def __init__(self, core: TaskVariables, exact: bool, message: str):
        self.core, self.exact, self.message = core, exact, message

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


def formulate_exact(instance: Instance) -> tuple[Problem, ExactDecoder]:
    """The time-indexed ILP of every job over the whole horizon (module docstring)."""
    topo = instance.topology
    if any(len(topo.below(m.id)) > 1 for m in topo.machines):
        raise ValueError("a machine has machines below it; the exact model needs machines at the leaves")
    T, dt = instance.horizon, instance.slot_seconds
    jobs = instance.jobs
    core = TaskVariables(instance, list(range(len(jobs))), 0, T)
    doms = core.domains

    # u: one per (spread option, populated child holding one of its task variables)
    child_of = np.full((len(doms.node), len(topo.machines)), -1, dtype=np.int64)
    for d, kids in enumerate(doms.children):
        for k, members in enumerate(kids):
            child_of[d, members] = k
    task = np.concatenate([core.w_idx, core.s_idx])
    task = task[~doms.is_local[core.dom[task]]]
    width = max((len(kids) for kids in doms.children), default=1) or 1
    u_key, u_of_task = np.unique(core.option[task] * width + child_of[core.dom[task], core.machine[task]],
                                 return_inverse=True)
    u_opt = u_key // width
    n_u = len(u_key)
    u_idx = core.n + np.arange(n_u)

    # z[j, t] for t = a_j .. T-1, job by job; then rem[j]
    arrival = np.array([j.arrival for j in jobs], dtype=np.int64)
    z_len = T - arrival
    z_first = core.n + n_u + np.concatenate([[0], np.cumsum(z_len)[:-1]])
    z_job = np.repeat(np.arange(len(jobs)), z_len)
    z_slot = np.concatenate([np.arange(a, T) for a in arrival])
    n_z = len(z_job)
    z_idx = core.n + n_u + np.arange(n_z)
    rem_idx = core.n + n_u + n_z + np.arange(len(jobs))
    n = core.n + n_u + n_z + len(jobs)

    work = np.array([j.work_batches for j in jobs], dtype=float)
    weight = np.array([j.weight for j in jobs], dtype=float)
    charge = np.array([instance.unfinished_seconds(j, 1.0) for j in jobs])
    cost = np.zeros(n)
    cost[z_idx] = -weight[z_job] * dt
    cost[z_first + z_len - 1] = 0.0
    cost[rem_idx] = weight * charge
    offset = float(np.sum(weight * dt * z_len))

    upper = np.concatenate([core.upper, np.ones(n_u + n_z), work])
    integer = np.concatenate([np.ones(core.n, bool), np.zeros(n_u, bool), np.ones(n_z, bool),
                              np.zeros(len(jobs), bool)])

    # packing: the task variables' capacity/link rows, then life rows  y[j,t,*] + z[j,t-1] <= 1
    packing, pack_names = core.packing()
    y = core.y_idx
    has_y = core.slot[y] > arrival[core.job[y]]
    y_prev = z_first[core.job[y]] + core.slot[y] - 1 - arrival[core.job[y]]
    life_z = z_idx[z_slot < T - 1]
    life_key, life_row = np.unique(np.concatenate([life_z, y_prev[has_y]]), return_inverse=True)
    packing.add(len(life_key), [(life_row, np.concatenate([life_z, y[has_y]]), 1.0)], -np.inf, 1.0)
    pack_names += [f"life[{jobs[z_job[k - z_idx[0]]].id},t={z_slot[k - z_idx[0]] + 1}]" for k in life_key]
    A, _, b = packing.matrix(n)

    # covering: rem_j + sum_t sum w*speed + B_j z[j,T-1] >= B_j
    w = core.w_idx
    covering = Rows()
    covering.add(len(jobs), [(core.job[w], w, core.speed[w]), (np.arange(len(jobs)), rem_idx, 1.0),
                             (np.arange(len(jobs)), z_first + z_len - 1, work)], work, np.inf)
    C, d, _ = covering.matrix(n)

    general = Rows()
    core.shape_rows(general)
    # LCA: u - sum(w + s on the child) <= 0, then sum_c u - 2 y >= 0 per spread option
    general.add(n_u, [(np.arange(n_u), u_idx, 1.0), (u_of_task, task, -1.0)], -np.inf, 0.0)
    spread = np.flatnonzero(~doms.is_local[core.opt_dom])
    spread_row = np.searchsorted(spread, u_opt)
    general.add(len(spread), [(spread_row, u_idx, 1.0), (np.arange(len(spread)), core.opt_y[spread], -2.0)],
                0.0, np.inf)
    # progress: sum_{t' <= t} sum w*speed - B (1 - 1e-9) z[j,t] >= 0, one row per z
    reach = T - core.slot[w]
    w_rep = np.repeat(w, reach)
    later = np.arange(reach.sum()) - np.repeat(np.cumsum(reach) - reach, reach)
    rows = np.repeat(z_first[core.job[w]] - z_idx[0] + core.slot[w] - arrival[core.job[w]], reach) + later
    general.add(n_z, [(rows, w_rep, core.speed[w_rep]), (np.arange(n_z), z_idx, -COMPLETE * work[z_job])],
                0.0, np.inf)
    # monotone: z[j,t] - z[j,t+1] <= 0
    step = z_idx[z_slot < T - 1]
    general.add(len(step), [(np.arange(len(step)), step, 1.0), (np.arange(len(step)), step + 1, -1.0)],
                -np.inf, 0.0)
    G, g_lo, g_hi = general.matrix(n)

    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi, upper=upper,
                      integer=integer, groups=core.choice_groups(), offset=offset,
                      name=f"placement-exact:{instance.name}", pack_names=pack_names)
    restarting = [j.id for j in jobs if j.restart_seconds > 0]
    tables = [j.id for j in jobs if j.speed is not None]
    notes = []
    if restarting:
        notes.append(f"restart_seconds > 0 on job(s) {', '.join(restarting)}: the exact model ignores restart "
                     "losses")
    if tables:
        notes.append(f"speed tables on job(s) {', '.join(tables)}: the exact model credits each worker the "
                     "table's best rate per worker")
    message = "" if not notes else "; ".join(notes) + (
        ", so it is a relaxation (its bound is a valid lower bound; its schedule, scored by MODEL.md, "
        "may not be optimal)")
    return problem, ExactDecoder(core, not notes, message)
