"""The search for spread placements: W workers and their ``job.min_ps(W)`` PSs over
several machines, inside the smallest subtree (switch) that can hold them with every link
up to that switch respected.

Inside the chosen subtree, tasks go to the machines with the most room, grouped by the
switch's child subtrees, and PSs sit beside the workers (first on the machines holding
workers, then elsewhere in the same subtree). Every placement returned is checked with
``fits`` and keeps rule 3.

These are methods of :class:`placement.capacity.Residual` (through :class:`SpreadSearch`),
kept apart because they are a heuristic search, while the rest of Residual is the exact
bookkeeping of rules 1 and 4 that the validator applies too.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from placement.instance import TOL_FIT, Instance, Job

__all__ = ["SpreadSearch"]


class SpreadSearch:
    """The spread-placement methods of :class:`placement.capacity.Residual` (module
    docstring). They read its free capacity and tree tables, declared here, and call its
    ``demand``, ``worker_room``, ``fits`` and ``_within``."""

    instance: Instance
    machine_ids: tuple[str, ...]
    free: np.ndarray
    link_free: np.ndarray
    _anc: np.ndarray
    _depth: np.ndarray
    _up_link: np.ndarray
    _up: list[np.ndarray]
    _node_index: dict[str, int]
    _node_depth: np.ndarray
    _below: list[np.ndarray]
    _spread_nodes: list[int]

    def _order(self, job: Job, v: int, prefer: Iterable[str]) -> np.ndarray:
        """Machines below node ``v`` in filling order: preferred ones first, then grouped by
        v's child subtree (most room first), most room first inside a group."""
        hs = self._below[v]
        room = np.minimum(self.worker_room(job, hs), job.max_workers + 1)
        child = self._anc[hs, min(self._node_depth[v] + 1, self._anc.shape[1] - 1)]
        _, inv = np.unique(child, return_inverse=True)
        group_room = np.bincount(inv, weights=room)[inv]
        index = self.instance.topology.machine_index
        pref = set(index[p] for p in prefer if p in index)
        is_pref = np.array([h in pref for h in hs.tolist()], dtype=bool)
        return hs[np.lexsort((hs, -room, -group_room, ~is_pref))]

    def _link_room(self, hs: np.ndarray, v: int) -> np.ndarray:
        """Per machine, the least free bandwidth on its links up to node ``v``."""
        dv = self._node_depth[v]
        out = np.full(len(hs), np.inf)
        for k in range(dv + 1, self._anc.shape[1]):
            nodes = self._anc[hs, k]
            on = nodes >= 0
            if not on.any():
                break
            up = self._up_link[nodes[on]]
            out[on] = np.minimum(out[on], self.link_free[up])
        return out

    def _greedy(self, job: Job, v: int, workers: int, order: np.ndarray,
                fixed: Mapping[int, int] | None = None, share: bool = True
                ) -> dict[str, tuple[int, int]] | None:
        """Fill ``order`` (machines below ``v``) with the workers (or take ``fixed`` ones) and
        ``min_ps`` PSs, counting every task's bandwidth on each link up to ``v``. With
        ``share`` each machine takes its share of PSs with its workers; without, workers go
        first and PSs fill the room left (better when links, not machines, are short)."""
        alpha, beta = self.demand(job)
        wg, pg = job.worker_gbps, job.ps_gbps
        ps_total = job.min_ps(workers)
        dv = int(self._node_depth[v])
        free = {h: self.free[h].copy() for h in order.tolist()}
        link_free = self.link_free.copy()
        w_at: dict[int, int] = {}
        s_at: dict[int, int] = {}

        def path(h: int) -> np.ndarray:
            return self._up[h][: self._depth[h] - dv]

        def take(h: int, w: int, s: int) -> None:
            free[h] -= w * alpha + s * beta
            link_free[path(h)] -= w * wg + s * pg
            w_at[h] = w_at.get(h, 0) + w
            s_at[h] = s_at.get(h, 0) + s

        def most(h: int, unit: np.ndarray, gbps: float, limit: int) -> int:
            """Most units (of demand ``unit``, ``gbps`` each) machine h still takes, <= limit."""
            need = unit > 0
            n = limit if not need.any() else int(min(limit, np.floor(
                (np.maximum(free[h][need], 0) + TOL_FIT) / unit[need]).min()))
            p = path(h)
            if len(p):
                n = min(n, int(np.floor((max(link_free[p].min(), 0) + TOL_FIT) / gbps)))
            return max(n, 0)

        left_w, left_s = workers, ps_total
        if fixed is not None:
            for h, w in fixed.items():
                if h not in free or most(h, alpha, wg, w) < w:
                    return None
                take(h, w, 0)
            for h, w in sorted(fixed.items(), key=lambda hw: (-hw[1], hw[0])):
                s = min(left_s, -(-w * ps_total // workers), most(h, beta, pg, left_s))
                take(h, 0, s)  # each worker machine its share of PSs first
                left_s -= s
            left_w = 0
        for h in order.tolist():
            if left_w == 0:
                break
            # workers with their share of PSs beside them, else workers alone
            w = most(h, alpha, wg, left_w) if share else 0
            while w > 0:
                s = min(left_s, -(-w * ps_total // workers))
                if (w * alpha + s * beta <= free[h] + TOL_FIT).all() and (
                        not len(path(h)) or w * wg + s * pg <= link_free[path(h)].min() + TOL_FIT):
                    break
                w -= 1
            if w > 0:
                take(h, w, s)
                left_w -= w
                left_s -= s
            else:
                w = most(h, alpha, wg, left_w)
                if w > 0:
                    take(h, w, 0)
                    left_w -= w
        if left_w > 0:
            return None
        holders = sorted(w_at, key=lambda h: (-w_at[h], h))
        for h in holders + [h for h in order.tolist() if h not in w_at]:
            if left_s == 0:
                break
            s = most(h, beta, pg, left_s)
            if s > 0:
                take(h, 0, s)
                left_s -= s
        if left_s > 0:
            return None
        tasks = {self.machine_ids[h]: (w_at.get(h, 0), s_at.get(h, 0))
                 for h in sorted(set(w_at) | set(s_at)) if w_at.get(h, 0) or s_at.get(h, 0)}
        return tasks if self.fits(job, tasks) else None

    def _could_hold(self, job: Job, v: int, workers: int) -> bool:
        """Cheap necessary condition: room by capacity and by each machine's link path."""
        hs = self._below[v]
        alpha, beta = self.demand(job)
        total = workers * alpha + job.min_ps(workers) * beta
        if not (total <= np.maximum(self.free[hs], 0).sum(axis=0) + TOL_FIT).all():
            return False
        room = self.worker_room(job, hs)
        by_link = np.floor((np.maximum(self._link_room(hs, v), 0) + TOL_FIT) / job.worker_gbps)
        return bool(np.minimum(room, by_link).sum() >= workers)

    def spread(self, job: Job, workers: int, *, within: str | None = None,
               prefer: Iterable[str] = ()) -> dict[str, tuple[int, int]] | None:
        """``workers`` workers and their PSs in the smallest subtree (under ``within``, or
        ``within`` itself) that holds them with every link respected, or None."""
        if not job.min_workers <= workers <= job.max_workers:
            return None
        prefer = list(prefer)
        top = None if within is None else self._node_index[within]
        for v in self._spread_nodes:
            if top is not None and top not in self._anc[self._below[v][0], : self._node_depth[v] + 1]:
                continue
            if not self._could_hold(job, v, workers):
                continue
            order = self._order(job, v, prefer)
            for share in (True, False):
                tasks = self._greedy(job, v, workers, order, share=share)
                if tasks is not None:
                    return tasks
        return None

    def best_spread(self, job: Job, cap: int, *, within: str | None = None,
                    prefer: Iterable[str] = ()) -> dict[str, tuple[int, int]] | None:
        """The spread placement with the most workers (min_workers..cap) found, or None."""
        prefer = list(prefer)
        room = int(self.worker_room(job, self._within(within)).sum())
        hi = min(cap, job.max_workers, room)
        lo = job.min_workers
        if hi < lo:
            return None
        best = self.spread(job, hi, within=within, prefer=prefer)
        if best is not None:
            return best
        found = None
        hi -= 1
        while lo <= hi:  # the largest count the greedy can place (binary search)
            mid = (lo + hi) // 2
            tasks = self.spread(job, mid, within=within, prefer=prefer)
            if tasks is None:
                hi = mid - 1
            else:
                found, lo = tasks, mid + 1
        return found

    def beside(self, job: Job, workers: Mapping[str, int], *, within: str
               ) -> dict[str, tuple[int, int]] | None:
        """The given workers per machine plus ``min_ps`` PSs, on the workers' machines first,
        then elsewhere under ``within``; None if they do not fit."""
        index = self.instance.topology.machine_index
        fixed = {index[h]: w for h, w in workers.items() if w > 0}
        total = sum(fixed.values())
        if total < 1:
            return None
        v = self._node_index[within]
        order = self._order(job, v, (self.machine_ids[h] for h in sorted(fixed, key=lambda h: -fixed[h])))
        return self._greedy(job, v, total, order, fixed=fixed)
