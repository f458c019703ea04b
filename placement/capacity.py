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
  up to that switch respected (:mod:`placement.spread_search`, whose
  :class:`~placement.spread_search.SpreadSearch` gives Residual those methods).

Comparisons allow half the referee's tolerance (``TOL_FIT`` = TOL / 2, both in
:mod:`placement.instance`), so running sums that differ from the validator's in the last
bit can never turn a "fits" here into a violation there.
"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from placement.instance import TOL_FIT, Instance, Job
from placement.progress import Tasks
from placement.spread_search import SpreadSearch

__all__ = ["Residual"]


_MANY = 10**9  # room of a job whose worker needs none of a machine's resources


class Residual(SpreadSearch):
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

    # ----- local or spread (spread placements: placement.spread_search) ----------------------
    def find(self, job: Job, workers: int, *, within: str | None = None,
             prefer: Iterable[str] = ()) -> dict[str, tuple[int, int]] | None:
        """``workers`` workers and their PSs: local first, else the smallest subtree."""
        prefer = list(prefer)
        tasks = self.local(job, workers, within=within, prefer=prefer[0] if prefer else None)
        return tasks if tasks is not None else self.spread(job, workers, within=within, prefer=prefer)

    def max_workers_that_fit(self, job: Job, where: str | None = None) -> int:
        """Most workers (with their PSs) of ``job`` placeable on machine or under switch
        ``where`` (the whole cluster if None), local or spread; 0 if not even min_workers."""
        counts = [sum(w for w, _ in t.values()) for t in
                  (self.best_local(job, job.max_workers, within=where),
                   self.best_spread(job, job.max_workers, within=where)) if t is not None]
        return max(counts, default=0)
