"""GPU types (MODEL.md 8) in the exact model (:mod:`placement.formulation.time_indexed`): a
job's workers in one slot all on machines of one type.

A job's *types* are those of the machines that can hold one of its workers (the task
variables hold none on a type the job does not run on:
:func:`~placement.formulation.domains.fit_table`). For a job with two types or more and each
job-slot k = (j, t), t >= a_j, a binary G[k, g] per type g:

- sum_g G[k, g] <= 1: one type per job-slot;
- sum of w[k, v, h] over the domains v and the machines h of type g <= U_j G[k, g]: workers
  on type g only when G[k, g] = 1.

At an integer point the workers of a slot are therefore on one type. A job with one type
needs no G (its workers can sit on no other), nor does anything on a cluster without types.
Per-type speed tables (:mod:`placement.formulation.table_rates`) tie their rate classes to
G, so a slot's rate is its workers' type's.
"""
from __future__ import annotations

import numpy as np

from placement.formulation.job_slots import JobSlots
from placement.formulation.rows import Rows
from placement.formulation.tasks import TaskVariables

__all__ = ["TypeChoice"]


class TypeChoice:
    """The columns G (module docstring), placed from column ``start`` on."""

    def __init__(self, core: TaskVariables, slots: JobSlots, start: int):
        inst = core.instance
        self.core, self.slots = core, slots
        self.code = inst.topology.type_code
        n_types = len(inst.topology.gpu_types)
        w = core.w_idx[core.upper[core.w_idx] > 0]
        pair = np.unique(core.job[w] * n_types + self.code[core.machine[w]])
        pair_job, pair_type = pair // n_types, pair % n_types
        #: per job, the type codes of the machines that can hold one of its workers, ascending
        self.types = [pair_type[pair_job == j] for j in range(len(inst.jobs))]
        chosen = np.flatnonzero(np.bincount(pair_job, minlength=len(inst.jobs))[pair_job] >= 2)
        reach = slots.length[pair_job[chosen]]
        rep = np.repeat(chosen, reach)
        key = np.repeat(slots.first[pair_job[chosen]], reach) + np.arange(reach.sum()) - \
            np.repeat(np.cumsum(reach) - reach, reach)
        order = np.lexsort((pair_type[rep], key))
        #: per G column, by job-slot then type: its job-slot and type
        self.key, self.type = key[order], pair_type[rep][order]
        self.n = len(rep)
        self.col = start + np.arange(self.n)
        self.upper = np.ones(self.n)
        self.integer = np.ones(self.n, dtype=bool)
        self._n_types = n_types
        self._pair = self.key * n_types + self.type  # ascending

    def columns(self, keys: np.ndarray, types: np.ndarray) -> np.ndarray:
        """The G columns of job-slots ``keys`` and type codes ``types`` (-1 where there is none)."""
        keys, types = np.asarray(keys, dtype=np.int64), np.asarray(types, dtype=np.int64)
        out = np.full(len(keys), -1, dtype=np.int64)
        if self.n:
            pair = keys * self._n_types + types
            at = np.minimum(np.searchsorted(self._pair, pair), self.n - 1)
            found = (types >= 0) & (self._pair[at] == pair)
            out[found] = self.col[at[found]]
        return out

    def rows(self, block: Rows) -> None:
        """One type per job-slot, and workers of type g only when G[k, g] = 1."""
        if not self.n:
            return
        core, slots = self.core, self.slots
        keys, one = np.unique(self.key, return_inverse=True)
        block.add(len(keys), [(one, self.col, 1.0)], -np.inf, 1.0)
        w = core.w_idx[core.upper[core.w_idx] > 0]
        col = self.columns(slots.key(core.job[w], core.slot[w]), self.code[core.machine[w]])
        mine = col >= 0
        most = np.array([j.max_workers for j in core.instance.jobs], dtype=float)[slots.job[self.key]]
        block.add(self.n, [(col[mine] - self.col[0], w[mine], 1.0), (np.arange(self.n), self.col, -most)],
                  -np.inf, 0.0)

    def values(self, x: np.ndarray) -> np.ndarray:
        """G at the task variables of ``x`` (a schedule's encoding): 1 on the type of each
        job-slot's workers."""
        core, slots = self.core, self.slots
        w = core.w_idx[x[core.w_idx] > 0]
        held = set((slots.key(core.job[w], core.slot[w]) * self._n_types + self.code[core.machine[w]]).tolist())
        return np.array([k * self._n_types + g in held for k, g in zip(self.key.tolist(), self.type.tolist())],
                        dtype=float)

    def worker_type(self, x: np.ndarray) -> np.ndarray:
        """Per job-slot, the type code of its workers in ``x`` (-1 without workers; a valid
        schedule's encoding has one type per job-slot)."""
        core, slots = self.core, self.slots
        out = np.full(slots.n, -1, dtype=np.int64)
        w = core.w_idx[x[core.w_idx] > 0]
        out[slots.key(core.job[w], core.slot[w])] = self.code[core.machine[w]]
        return out
