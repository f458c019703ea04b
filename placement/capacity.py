"""What is still free in ONE slot, and where a job's workers and PSs can go (MODEL.md 3).

:class:`Residual` holds the free resources of every machine (a machines x resources
array) and the free bandwidth of every link. ``fits`` / ``place`` / ``remove`` apply
rule 1 (capacity) and rule 4 (hose-model reservations) exactly as the validator does:
the reservations of a job are computed from the *actual* lowest common ancestor of the
machines holding its tasks, workers and PSs alike, never from a planned domain, and a
job whose tasks all sit on one machine loads no link.

The search helpers find a placement of W workers plus ``job.min_ps(W)`` PSs, W in
[min_workers, max_workers], so every placement they return keeps rule 3:

- local first: one machine holding every task, preferring a given machine, then the
  largest ``local_gbps``, then the tightest fit (least capacity left, best fit);
- else spread inside the smallest subtree (switch) that can hold them with every link
  up to that switch respected; inside it, tasks go to the machines with the most room,
  grouped by the switch's child subtrees, and PSs sit beside the workers (first on the
  machines holding workers, then elsewhere in the same subtree).

Comparisons allow half the referee's tolerance (1e-9), so running sums that differ from
the validator's in the last bit can never turn a "fits" here into a violation there.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from placement.instance import TOL, Instance, Job
from placement.progress import Tasks

__all__ = ["Residual", "TOL_FIT"]


#: Slack allowed when comparing a demand to what is free: inside the referee's TOL.
TOL_FIT = TOL / 2
_MANY = 10**9  # room of a job whose worker needs none of a machine's resources


class Residual:
    """Free capacity of one slot: ``free[h, r]`` per machine and ``link_free[e]`` per link,
    and the tasks of every job placed so far (so that ``remove`` can undo them)."""

    def __init__(self, instance: Instance):
        topo = instance.topology
        self.instance = instance
        res = instance.resources
        self.machine_ids = tuple(m.id for m in topo.machines)
        self.cap = np.array([[m.capacity.get(r, 0) for r in res] for m in topo.machines], dtype=float)
        self.free = self.cap.copy()
        self.link_cap = np.array([l.gbps for l in topo.links], dtype=float)
        self.link_free = self.link_cap.copy()
        self.local_gbps = np.array([m.local_gbps for m in topo.machines], dtype=float)
        anc, depth, up_link = topo.ancestor_table
        self._anc, self._depth, self._up_link = anc, depth, up_link
        self._node_index = {n: i for i, n in enumerate(topo.nodes)}
        self._node_depth = np.array([topo.depth(n) for n in topo.nodes], dtype=np.int64)
        # _up[h][i]: the i-th link on the way up from machine h (its own uplink first)
        self._up = [up_link[anc[h, depth[h]:0:-1]] for h in range(len(self.machine_ids))]
        below: list[list[int]] = [[] for _ in topo.nodes]
        for h in range(len(self.machine_ids)):
            for a in anc[h, : depth[h] + 1]:
                below[a].append(h)
        self._below = [np.array(b, dtype=np.int64) for b in below]
        n_machines = len(self.machine_ids)
        # switches (and machines with children) that can hold a spread job, smallest first
        self._spread_nodes = sorted((i for i in range(len(topo.nodes)) if len(below[i]) > 1),
                                    key=lambda i: (len(below[i]), -self._node_depth[i], i))
        self._all = np.arange(n_machines, dtype=np.int64)
        self._vectors: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._held: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]] = {}

    def clear(self) -> None:
        """Empty the slot again (cheaper than building a new Residual for every slot)."""
        self.free = self.cap.copy()
        self.link_free = self.link_cap.copy()
        self._held.clear()

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, dict]:
        """The current state, to :meth:`restore` after a tentative change."""
        return self.free.copy(), self.link_free.copy(), dict(self._held)

    def restore(self, state: tuple[np.ndarray, np.ndarray, dict]) -> None:
        free, link_free, held = state
        self.free, self.link_free, self._held = free.copy(), link_free.copy(), dict(held)

    def is_node(self, node: object) -> bool:
        """Is ``node`` a machine or switch id of the cluster?"""
        return isinstance(node, str) and node in self._node_index

    # ----- rules 1 and 4 -----------------------------------------------------------------
    def demand(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta): one worker's and one PS's demand as vectors over the resources."""
        if job.id not in self._vectors:
            res = self.instance.resources
            self._vectors[job.id] = (np.array([job.worker.get(r, 0) for r in res], dtype=float),
                                     np.array([job.ps.get(r, 0) for r in res], dtype=float))
        return self._vectors[job.id]

    def _arrays(self, tasks: Tasks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        items = [(self.instance.topology.machine_index[h], w, s) for h, (w, s) in tasks.items()
                 if w or s]
        arr = np.array(items, dtype=np.int64).reshape(-1, 3)
        if (arr[:, 1:] < 0).any():
            raise ValueError(f"negative task count in {dict(tasks)}")
        return arr[:, 0], arr[:, 1], arr[:, 2]

    def _loads(self, job: Job, hs: np.ndarray, ws: np.ndarray, ss: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Links loaded by the tasks and the Gbps on each (hose model up to the actual LCA)."""
        if len(hs) <= 1:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = self._anc[hs]
        same = np.all(rows == rows[0], axis=0) & (rows[0] >= 0)
        lca_depth = int(np.argmin(same)) - 1 if not same.all() else rows.shape[1] - 1
        links, amounts = [], []
        for h, w, s in zip(hs.tolist(), ws.tolist(), ss.tolist()):
            path = self._up[h][: self._depth[h] - lca_depth]
            links.append(path)
            amounts.append(np.full(len(path), w * job.worker_gbps + s * job.ps_gbps))
        links_a, amounts_a = np.concatenate(links), np.concatenate(amounts)
        uniq, inv = np.unique(links_a, return_inverse=True)
        return uniq, np.bincount(inv, weights=amounts_a, minlength=len(uniq))

    def fits(self, job: Job, tasks: Tasks) -> bool:
        """Would ``tasks`` of ``job`` keep rules 1 and 4 on top of what is placed already?"""
        hs, ws, ss = self._arrays(tasks)
        if len(hs) == 0:
            return True
        alpha, beta = self.demand(job)
        use = ws[:, None] * alpha + ss[:, None] * beta
        if not (use <= self.free[hs] + TOL_FIT).all():
            return False
        links, load = self._loads(job, hs, ws, ss)
        return bool((load <= self.link_free[links] + TOL_FIT).all())

    def place(self, job: Job, tasks: Tasks) -> None:
        """Take the resources and link bandwidth of ``tasks``; raises if they do not fit."""
        if job.id in self._held:
            raise ValueError(f"job {job.id} is already placed in this slot")
        if not self.fits(job, tasks):
            raise ValueError(f"job {job.id}: tasks {dict(tasks)} do not fit")
        hs, ws, ss = self._arrays(tasks)
        alpha, beta = self.demand(job)
        use = ws[:, None] * alpha + ss[:, None] * beta
        links, load = self._loads(job, hs, ws, ss)
        self.free[hs] -= use
        self.link_free[links] -= load
        self._held[job.id] = (hs, use, links, load, {h: tuple(v) for h, v in tasks.items() if v[0] or v[1]})

    def remove(self, job_id: str) -> dict[str, tuple[int, int]]:
        """Give back what ``job_id`` holds; returns its tasks (empty if it held none)."""
        if job_id not in self._held:
            return {}
        hs, use, links, load, tasks = self._held.pop(job_id)
        self.free[hs] += use
        self.link_free[links] += load
        return tasks

    def held(self, job_id: str) -> dict[str, tuple[int, int]] | None:
        """The tasks ``job_id`` holds in this slot, or None."""
        entry = self._held.get(job_id)
        return dict(entry[4]) if entry else None

    def machines_below(self, node: str) -> list[str]:
        return [self.machine_ids[h] for h in self._below[self._node_index[node]]]

    # ----- capacity-only room --------------------------------------------------------------
    def worker_room(self, job: Job, hs: np.ndarray | None = None) -> np.ndarray:
        """Workers of ``job`` each machine could still take by capacity alone (no PS, no links)."""
        alpha, _ = self.demand(job)
        free = self.free if hs is None else self.free[hs]
        need = alpha > 0
        if not need.any():
            return np.full(len(free), _MANY, dtype=np.int64)
        per = np.floor((np.maximum(free[:, need], 0) + TOL_FIT) / alpha[need])
        return np.minimum(per.min(axis=1), _MANY).astype(np.int64)

    # ----- local placements ----------------------------------------------------------------
    def _within(self, within: str | None) -> np.ndarray:
        return self._all if within is None else self._below[self._node_index[within]]

    def local(self, job: Job, workers: int, *, within: str | None = None,
              prefer: str | None = None) -> dict[str, tuple[int, int]] | None:
        """One machine (under ``within``) for all ``workers`` and their PSs: ``prefer`` if it
        fits, else the largest local_gbps, then the tightest fit."""
        if not job.min_workers <= workers <= job.max_workers:
            return None
        cand = self._within(within)
        ps = job.min_ps(workers)
        alpha, beta = self.demand(job)
        need = workers * alpha + ps * beta
        ok = (need <= self.free[cand] + TOL_FIT).all(axis=1)
        if not ok.any():
            return None
        fitting = cand[ok]
        if prefer is not None:
            p = self.instance.topology.machine_index.get(prefer)
            if p is not None and p in set(fitting.tolist()):
                return {prefer: (workers, ps)}
        h = fitting[self._tightest(fitting, need)]
        return {self.machine_ids[h]: (workers, ps)}

    def _tightest(self, hs: np.ndarray, need: np.ndarray) -> int:
        """Position (in ``hs``) of the best machine: largest local_gbps, then least left."""
        scale = np.where(self.cap[hs] > 0, self.cap[hs], 1.0)
        left = ((self.free[hs] - need) / scale).sum(axis=1)
        return int(np.lexsort((left, -self.local_gbps[hs]))[0])

    def best_local(self, job: Job, cap: int, *, within: str | None = None,
                   prefer: str | None = None) -> dict[str, tuple[int, int]] | None:
        """The local placement with the most workers (min_workers..cap), or None."""
        cand = self._within(within)
        room = self.worker_room(job, cand)
        top = min(cap, job.max_workers, int(room.max(initial=0)))
        if top < job.min_workers:
            return None
        alpha, beta = self.demand(job)
        ws = np.arange(job.min_workers, top + 1)
        ss = np.array([job.min_ps(int(w)) for w in ws])
        need = ws[:, None] * alpha + ss[:, None] * beta
        ok = (need[:, None, :] <= self.free[cand][None] + TOL_FIT).all(axis=2).any(axis=1)
        if not ok.any():
            return None
        return self.local(job, int(ws[np.flatnonzero(ok)[-1]]), within=within, prefer=prefer)

    # ----- spread placements ---------------------------------------------------------------
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

    def find(self, job: Job, workers: int, *, within: str | None = None,
             prefer: Iterable[str] = ()) -> dict[str, tuple[int, int]] | None:
        """``workers`` workers and their PSs: local first, else the smallest subtree."""
        prefer = list(prefer)
        tasks = self.local(job, workers, within=within, prefer=prefer[0] if prefer else None)
        return tasks if tasks is not None else self.spread(job, workers, within=within, prefer=prefer)

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

    def max_workers_that_fit(self, job: Job, where: str | None = None) -> int:
        """Most workers (with their PSs) of ``job`` placeable on machine or under switch
        ``where`` (the whole cluster if None), local or spread; 0 if not even min_workers."""
        counts = [sum(w for w, _ in t.values()) for t in
                  (self.best_local(job, job.max_workers, within=where),
                   self.best_spread(job, job.max_workers, within=where)) if t is not None]
        return max(counts, default=0)

