"""What is left of each machine, slot by slot, while a decoder turns the chosen
(domain, worker count) of every job-slot into tasks on machines.

The window models choose a domain per job-slot, not machines: a spread choice only says
"W workers below switch v". Splitting each such choice over v's machines by their empty
capacity sends every job spread below v to the same few machines, far over their
capacity, so the slot rules had to place most jobs again, slowly and away from the
domains the LP chose. A decoder instead packs the choices of a slot into what the
choices before them left: local ones first (the LP pinned them to a machine), then
spread ones, fewest workers first; a spread job that one machine of its domain still
holds whole goes there (the tightest such machine: local is faster than spread, and the
large holes stay for the jobs that must spread), else its workers go to the machines
with most room left and its PSs beside them. Fewest first because the small jobs are the
ones a single machine can still hold whole, so fewer jobs run spread (slower than
local). What does not fit is still placed (on the roomiest machine), so the intent says
what the LP chose and the slot rules repair it, as before.
"""
from __future__ import annotations

import numpy as np

from placement.slots.room import room_rows
from placement.model.instance import Instance, Job, demand_vectors

__all__ = ["SlotRoom"]


class SlotRoom:
    """Capacity left per time step (a slot, or a bucket of slots that share their choices)
    and machine, as rows of ``instance.capacity_matrix``."""

    def __init__(self, instance: Instance):
        self.instance = instance
        self.capacity = np.asarray(instance.capacity_matrix, dtype=float)
        self.left: dict[int, np.ndarray] = {}
        self._demand: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def order(self, is_local: np.ndarray, workers: np.ndarray) -> np.ndarray:
        """Positions of chosen options in packing order: local first, then fewest workers
        first (module docstring); ties keep the given order (stable)."""
        return np.lexsort((np.asarray(workers), ~np.asarray(is_local, dtype=bool)))

    def local(self, job: Job, step: int, h: int, workers: int, ps: int,
              machines: list[str]) -> dict[str, tuple[int, int]]:
        """The LP's local choice as it is: every task on machine ``h``."""
        alpha, beta = self._of(job)
        self._left(step)[h] -= workers * alpha + ps * beta
        return {machines[h]: (workers, ps)}

    def spread(self, job: Job, step: int, members: np.ndarray, workers: int, ps: int,
               machines: list[str]) -> dict[str, tuple[int, int]]:
        """``workers`` workers and ``ps`` PSs on the tightest member (machine index) that
        holds them all; else the workers over ``members``, most room left first, and the
        PSs round-robin over the worker machines that still hold one, else on the member
        with most room for one, else on the first worker machine."""
        alpha, beta = self._of(job)
        left = self._left(step)
        whole = room_rows(alpha, left[members] - ps * beta)
        if whole.max() >= workers:  # one machine holds them all: local, faster, tightest fit
            h = int(members[np.flatnonzero(whole >= workers)[np.argmin(whole[whole >= workers])]])
            left[h] -= workers * alpha + ps * beta
            return {machines[h]: (workers, ps)}
        room = room_rows(alpha, left[members])
        order = np.argsort(-room, kind="stable").tolist()
        hosts, counts = [], []
        need = workers
        for k in order:
            take = min(need, int(room[k]))
            if take <= 0:
                break
            hosts.append(int(members[k]))
            counts.append(take)
            need -= take
        if need > 0:  # more than the domain holds: the slot rules repair
            if not hosts:
                hosts.append(int(members[order[0]]))
                counts.append(0)
            counts[0] += need
        left[hosts] -= np.array(counts, dtype=float)[:, None] * alpha
        ps_of = self._place_ps(hosts, members, ps, beta, left)
        tasks = {machines[h]: (w, ps_of.pop(h, 0)) for h, w in zip(hosts, counts)}
        tasks.update((machines[h], (0, s)) for h, s in ps_of.items())
        return tasks

    @staticmethod
    def _place_ps(hosts: list[int], members: np.ndarray, ps: int, beta: np.ndarray,
                  left: np.ndarray) -> dict[int, int]:
        """PSs per machine (module docstring): round-robin over ``hosts`` while they hold
        one, then the members with most room, then ``hosts`` again; taken from ``left``."""
        out: dict[int, int] = {}
        room = room_rows(beta, left[hosts]).tolist() if ps > 0 else []  # falls by one with each PS
        placed, k = 0, 0
        while placed < ps and max(room) >= 1:
            j = k % len(hosts)
            k += 1
            if room[j] >= 1:
                out[hosts[j]] = out.get(hosts[j], 0) + 1
                room[j] -= 1
                placed += 1
        rest = ps - placed
        if rest:
            spare = room_rows(beta, left[members])
            spare[np.isin(members, hosts)] = 0  # the hosts are full for a PS
            for k in np.argsort(-spare, kind="stable").tolist():
                take = min(rest, int(spare[k]))
                if take <= 0:
                    break
                out[int(members[k])] = out.get(int(members[k]), 0) + take
                rest -= take
            for k in range(rest):
                out[hosts[k % len(hosts)]] = out.get(hosts[k % len(hosts)], 0) + 1
        for h, n in out.items():
            left[h] -= n * beta
        return out

    def _left(self, step: int) -> np.ndarray:
        left = self.left.get(step)
        if left is None:
            left = self.left[step] = self.capacity.copy()
        return left

    def _of(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        pair = self._demand.get(job.id)
        if pair is None:
            pair = self._demand[job.id] = demand_vectors(job, self.instance.resources)
        return pair

