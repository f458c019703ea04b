"""Speed tables (MODEL.md 8) in the exact model (:mod:`placement.formulation.time_indexed`): the
table's own rate for the worker count and the machines spanned, not a rate per worker.

For a job j with a table and each job-slot k = (j, t), t >= a_j, a binary q[k, c, W] per
rate class c (0: local; r >= 1: the table's r-th spread row, for key_r <= machines spanned
< key_r+1, the last row up to every machine) and worker count W in [min_workers, max_workers]:

- sum_W q[k, 0, W] = sum_{v local} y,   sum_W W q[k, 0, W] = sum_{v local} w,
- sum_{r >= 1, W} q[k, r, W] = sum_{v spread} y,   sum_{r >= 1, W} W q[k, r, W] = sum_{v spread} w,

so one q is 1 exactly when the job runs, at its worker count and class. A job with one table
per GPU type has these q per type g it may use, each at that type's rates, and when it has
the type binaries G of :mod:`placement.formulation.type_choice`, sum_{c, W} q[k, g, c, W] =
G[k, g]: the q that is 1 is of its workers' type (a job of one type has q of that type
only). With more than one spread row, per spread option's machine h a binary b ("h holds a
task of j"):
b <= w + s <= (their upper bounds) b, and the machines spanned m[k] = sum b satisfy
sum key_r q[k,r,W] <= m[k] <= sum (key_r+1 - 1) q[k,r,W] over the spread classes (when the job
is local or idle every b is 0, and so are both sides). The batches credited in slot t are
then work[k] = sum q[k,c,W] rate(c, W) Delta: MODEL.md 8's rate exactly (the restart loss
comes on top, :mod:`placement.formulation.restarts`).
"""
from __future__ import annotations

import numpy as np

from placement.formulation.job_slots import JobSlots, Terms
from placement.formulation.rows import Rows
from placement.formulation.tasks import TaskVariables
from placement.formulation.type_choice import TypeChoice
from placement.model.instance import Job
from placement.model.speed import SpeedTable

__all__ = ["TableRates"]


def _tables(job: Job, types: np.ndarray, names: tuple[str | None, ...]) -> list[tuple[int, SpeedTable]]:
    """(type code, table) of a table job: per type it may use (``types``, codes into ``names``)
    when its table is per type, else its one table for any type (code -1)."""
    if job.speed.types is None:
        return [(-1, job.speed)]
    return [(g, job.speed.table(names[g])) for g in types.tolist()]


class TableRates:
    """The columns q and b (module docstring), placed from column ``start`` on; ``choice``:
    the GPU type binaries."""

    def __init__(self, core: TaskVariables, slots: JobSlots, start: int, choice: TypeChoice):
        inst = core.instance
        self.core, self.slots, self.choice = core, slots, choice
        H = len(inst.topology.machines)
        jobs = inst.jobs
        self.table = np.array([j.speed is not None for j in jobs], dtype=bool)
        self.keys = np.flatnonzero(self.table[slots.job])
        self.pos = np.full(slots.n, -1, dtype=np.int64)
        self.pos[self.keys] = np.arange(len(self.keys))
        parts: list[np.ndarray] = []
        per_job = {j: _tables(jobs[j], choice.types[j], inst.topology.gpu_types)
                   for j in np.flatnonzero(self.table).tolist()}
        for j, tables in per_job.items():
            counts = np.arange(jobs[j].min_workers, jobs[j].max_workers + 1)
            one = []
            for g, sp in tables:
                rows = [(1, 1, sp.local)] + [(key, (sp.spread[r + 1][0] if r + 1 < len(sp.spread) else H + 1) - 1,
                                              rates) for r, (key, rates) in enumerate(sp.spread)]
                one += [(c, w, rate, lo, hi, g) for c, (lo, hi, rates) in enumerate(rows)
                        for w, rate in zip(counts, rates)]
            if not one:  # no type of its table can hold a worker of it: it never runs
                continue
            ks = np.arange(slots.first[j], slots.last[j] + 1)
            parts.append(np.column_stack([np.repeat(ks, len(one)), np.tile(np.array(one, dtype=float), (len(ks), 1))]))
        table = np.vstack(parts) if parts else np.zeros((0, 7))
        self.q_key, self.q_cls, self.q_w = (table[:, i].astype(np.int64) for i in range(3))
        self.q_rate, self.q_lo, self.q_hi = table[:, 3], table[:, 4], table[:, 5]
        #: per q, the GPU type code of its table (-1: one table for any type)
        self.q_type = table[:, 6].astype(np.int64)
        self.q_col = start + np.arange(len(table))
        # b: per (spread option, machine) of a job with several spread rows (in a table of any of its types)
        multi = np.zeros(len(jobs), dtype=bool)
        multi[list(per_job)] = [any(len(sp.spread) > 1 for _, sp in tables) for tables in per_job.values()]
        task = np.concatenate([core.w_idx, core.s_idx])
        task = task[multi[core.job[task]] & ~core.domains.is_local[core.dom[task]]]
        pair, self.b_of_task = np.unique(core.option[task] * H + core.machine[task], return_inverse=True)
        self.b_task, self.b_option = task, pair // H
        self.b_col = start + len(table) + np.arange(len(pair))
        self.n = len(table) + len(pair)
        self.upper = np.ones(self.n)
        self.integer = np.ones(self.n, dtype=bool)
        dt = inst.slot_seconds
        #: the batches credited per job-slot, before any restart loss
        self.work = Terms(self.q_key, self.q_col, self.q_rate * dt)
        #: per job, the most batches one slot can credit it (0 without a table)
        self.most = np.zeros(len(jobs))
        np.maximum.at(self.most, slots.job[self.q_key], self.q_rate * dt)

    def rows(self, block: Rows) -> None:
        core, slots = self.core, self.slots
        n_k = len(self.keys)
        # per type: the q of type g sum to G[k, g] (module docstring)
        g_col = self.choice.columns(self.q_key, self.q_type)
        typed = g_col >= 0
        if typed.any():
            pairs, row = np.unique(g_col[typed], return_inverse=True)
            block.add(len(pairs), [(row, self.q_col[typed], 1.0), (np.arange(len(pairs)), pairs, -1.0)], 0.0, 0.0)
        pos_q = self.pos[self.q_key]
        local_dom = core.domains.is_local
        for local in (True, False):
            qs = (self.q_cls == 0) == local
            for idx, q_coef in ((core.y_idx, np.ones(len(self.q_col))), (core.w_idx, self.q_w.astype(float))):
                k = slots.key(core.job[idx], core.slot[idx])
                on = (self.pos[k] >= 0) & (local_dom[core.dom[idx]] == local)
                block.add(n_k, [(pos_q[qs], self.q_col[qs], q_coef[qs]), (self.pos[k[on]], idx[on], -1.0)], 0.0, 0.0)
        n_b = len(self.b_col)
        if not n_b:
            return
        cap = np.zeros(n_b)
        np.add.at(cap, self.b_of_task, core.upper[self.b_task])
        block.add(n_b, [(np.arange(n_b), self.b_col, 1.0), (self.b_of_task, self.b_task, -1.0)], -np.inf, 0.0)
        block.add(n_b, [(np.arange(n_b), self.b_col, -cap), (self.b_of_task, self.b_task, 1.0)], -np.inf, 0.0)
        b_key = slots.key(core.opt_job[self.b_option], core.opt_slot[self.b_option])
        spread_q = self.q_cls > 0
        multi_k, row = np.unique(b_key, return_inverse=True)
        q_row = np.searchsorted(multi_k, self.q_key[spread_q])
        mine = np.isin(self.q_key[spread_q], multi_k)
        q_cols = self.q_col[spread_q][mine]
        for bound, lo, hi in ((self.q_lo, 0.0, np.inf), (self.q_hi, -np.inf, 0.0)):
            block.add(len(multi_k), [(row, self.b_col, 1.0), (q_row[mine], q_cols, -bound[spread_q][mine])], lo, hi)

    def values(self, x: np.ndarray) -> np.ndarray:
        """q and b at the task variables of ``x`` (a schedule's encoding)."""
        core, slots = self.core, self.slots
        n_k = slots.n
        out = np.zeros(self.n)
        out[len(self.q_col):] = np.bincount(self.b_of_task, weights=x[self.b_task], minlength=len(self.b_col)) > 0
        local_dom = core.domains.is_local
        gang_type = self.choice.worker_type(x)
        task = np.concatenate([core.w_idx, core.s_idx])
        task = task[self.table[core.job[task]] & ~local_dom[core.dom[task]] & (x[task] > 0)]
        used = np.unique(slots.key(core.job[task], core.slot[task]) * len(core.instance.topology.machines)
                         + core.machine[task])
        spanned = np.bincount(used // len(core.instance.topology.machines), minlength=n_k)
        for local in (True, False):
            running = np.zeros(n_k)
            workers = np.zeros(n_k)
            for idx, total in ((core.y_idx, running), (core.w_idx, workers)):
                sel = idx[local_dom[core.dom[idx]] == local]
                np.add.at(total, slots.key(core.job[sel], core.slot[sel]), x[sel])
            k = self.q_key
            m = np.where(local, 1, spanned[k])
            chosen = ((self.q_cls == 0) == local) & (running[k] > 0) & (self.q_w == workers[k]) & \
                     (self.q_lo <= m) & (m <= self.q_hi) & ((self.q_type < 0) | (self.q_type == gang_type[k]))
            out[: len(self.q_col)][chosen] = 1.0
        return out
