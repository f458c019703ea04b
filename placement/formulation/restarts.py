"""Restart losses (MODEL.md 4) in the exact model (:mod:`placement.formulation.time_indexed`).

A job j with r_j > 0 loses f_j = min(r_j, Delta) / Delta of the work credited to it in a
slot where it reconfigures. Per job-slot k = (j, t), t >= a_j, of such a job:

- L[k] in [0, f_j M_j]: the batches lost (M_j bounds the batches one slot can credit j);
- for t > a_j, a binary rho[k] ("j reconfigures in t"), forced to 1 by, for every machine h
  that can hold j, with W, S the per-machine counts (sums over the domain index of the
  task variables) and M_w(h), M_s(h) their upper bounds:

      M_w(h) rho[k] >= +-(W[j,h,t] - W[j,h,t-1]),   M_s(h) rho[k] >= +-(S[j,h,t] - S[j,h,t-1]),

  and rho[k] >= Y[k] - Y[k-1] (Y: the job runs in the slot; implied at integer points,
  added for the LP);
- L[k] >= f_j (work[k] - M_j (1 - rho[k])) for t > a_j, and L[k] >= f_j work[k] at t = a_j
  (a job can have no tasks before its arrival, so tasks at a_j are always a start);

and the progress and remainder rows count work[k] - L[k] (:attr:`RestartLosses.net`).

Why this is MODEL.md's loss. Slot t's (machine, workers, ps) set differs from slot t-1's
exactly when some machine's (W, S) differs. So when MODEL.md charges the loss (the set is
non-empty and differs; a start or a resume is such a change, from 0), rho[k] = 1 is forced
and L[k] >= f_j work[k] = W (min(r_j, Delta)) / theta, the loss. When the set is unchanged
every difference is 0, rho[k] = 0 is allowed and then L[k] >= f_j (work[k] - M_j) <= 0: no
loss. When the job has no tasks in t, rho may be forced to 1 but work[k] = 0, so L[k] >= 0:
harmless. Hence at every feasible point the net progress is at most MODEL.md's, and at the
point a schedule encodes to (:meth:`RestartLosses.values`) it is exactly MODEL.md's.
"""
from __future__ import annotations

import numpy as np

from placement.formulation.job_slots import JobSlots, Terms
from placement.formulation.rows import Rows
from placement.formulation.tasks import TaskVariables

__all__ = ["RestartLosses"]


class RestartLosses:
    """The columns L and rho (module docstring), placed from column ``start`` on.

    ``work``: the batches credited per job-slot before any loss; ``most[j]``: an upper bound
    on them in any one slot."""

    def __init__(self, core: TaskVariables, slots: JobSlots, work: Terms, most: np.ndarray, start: int):
        inst = core.instance
        dt = inst.slot_seconds
        self.core, self.slots, self.work, self.most = core, slots, work, most
        self.frac = np.array([min(j.restart_seconds, dt) / dt for j in inst.jobs])
        keys = np.flatnonzero(self.frac[slots.job] > 0)
        self.loss_key = keys
        self.rho_key = keys[slots.slot[keys] > slots.arrival[slots.job[keys]]]
        self.loss_col = start + np.arange(len(keys))
        self.rho_col = start + len(keys) + np.arange(len(self.rho_key))
        self.n = len(keys) + len(self.rho_key)
        self.upper = np.concatenate([(self.frac * most)[slots.job[keys]], np.ones(len(self.rho_key))])
        self.integer = np.concatenate([np.zeros(len(keys), bool), np.ones(len(self.rho_key), bool)])
        self._rho_of = np.full(slots.n, -1, dtype=np.int64)
        self._rho_of[self.rho_key] = self.rho_col
        #: the loss as terms of the job-slots' net work
        self.net = Terms(keys, self.loss_col, np.full(len(keys), -1.0))

    def rows(self, block: Rows) -> None:
        """The loss rows, the change rows per machine and the start rows (module docstring)."""
        core, slots, work = self.core, self.slots, self.work
        rho_of = self._rho_of
        f, M = self.frac[slots.job], self.most[slots.job]
        keys = self.loss_key
        row_of = np.full(slots.n, -1, dtype=np.int64)
        row_of[keys] = np.arange(len(keys))
        on = row_of[work.key] >= 0
        wk = work.key[on]
        lossy = rho_of[keys] >= 0
        block.add(len(keys), [(np.arange(len(keys)), self.loss_col, 1.0),
                              (row_of[wk], work.col[on], -f[wk] * work.coef[on]),
                              (np.flatnonzero(lossy), rho_of[keys[lossy]], -(f * M)[keys[lossy]])],
                  np.where(lossy, -(f * M)[keys], 0.0), np.inf)
        H = len(core.instance.topology.machines)
        for idx in (core.w_idx, core.s_idx):
            sel = idx[(self.frac[core.job[idx]] > 0) & (core.upper[idx] > 0)]
            k = slots.key(core.job[sel], core.slot[sel])
            now, before = rho_of[k] >= 0, k < slots.last[core.job[sel]]
            row_key = np.concatenate([k[now], k[before] + 1]) * H + np.concatenate([core.machine[sel][now],
                                                                                    core.machine[sel][before]])
            col = np.concatenate([sel[now], sel[before]])
            sign = np.concatenate([-np.ones(now.sum()), np.ones(before.sum())])
            used, row = np.unique(row_key, return_inverse=True)
            cap = np.zeros(len(used))
            np.maximum.at(cap, row, core.upper[col])
            mine = (np.arange(len(used)), rho_of[used // H], cap)
            block.add(len(used), [(row, col, sign), mine], 0.0, np.inf)
            block.add(len(used), [(row, col, -sign), mine], 0.0, np.inf)
        y = core.y_idx[self.frac[core.job[core.y_idx]] > 0]
        k = slots.key(core.job[y], core.slot[y])
        n_rho = len(self.rho_key)
        start_row = np.full(slots.n, -1, dtype=np.int64)
        start_row[self.rho_key] = np.arange(n_rho)
        now = start_row[k] >= 0
        before = (k < slots.last[core.job[y]]) & (start_row[np.minimum(k + 1, slots.n - 1)] >= 0)
        block.add(n_rho, [(np.arange(n_rho), self.rho_col, 1.0), (start_row[k[now]], y[now], -1.0),
                          (start_row[k[before] + 1], y[before], 1.0)], 0.0, np.inf)

    def values(self, x: np.ndarray) -> np.ndarray:
        """L and rho at the task variables of ``x``: rho = 1 exactly where some machine's
        counts change, L the loss MODEL.md charges (least values the rows allow)."""
        core, slots = self.core, self.slots
        H = len(core.instance.topology.machines)
        task = np.concatenate([core.w_idx, core.s_idx])
        task = task[x[task] > 0]
        k = slots.key(core.job[task], core.slot[task])
        key = (k * H + core.machine[task]) * 2 + core.kind[task]      # kind: W = 0, S = 1
        keys, inverse = np.unique(key, return_inverse=True)
        count = np.bincount(inverse, weights=x[task])
        step = 2 * H

        def count_at(q: np.ndarray) -> np.ndarray:
            at = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
            return np.where(keys[at] == q, count[at], 0.0)

        changed = np.zeros(slots.n, dtype=bool)
        slot_of = keys // step
        changed[slot_of[count_at(keys - step) != count]] = True        # a count in t differs from t-1
        nxt = slot_of + 1
        gone = (slot_of < slots.last[slots.job[slot_of]]) & (count_at(keys + step) != count)
        changed[nxt[gone]] = True                                       # a count of t-1 differs in t
        work = self.work.total(x, slots.n)
        charged = changed | (slots.slot == slots.arrival[slots.job])
        loss = (self.frac[slots.job] * work * charged)[self.loss_key]
        return np.concatenate([loss, changed[self.rho_key].astype(float)])
