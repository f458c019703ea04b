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
  up to that switch respected (:mod:`placement.slots.spread_search`, whose
  :class:`~placement.slots.spread_search.SpreadSearch` gives Residual those methods).

GPU types (MODEL.md 8): ``fits`` and ``try_place`` also refuse workers that mix types or sit
on a type the job does not run on, and every search keeps them on one type (``gpu_type=``,
:mod:`placement.slots.spread_search`); an untyped cluster takes the code paths of before.

Comparisons allow half the referee's tolerance (``TOL_FIT`` = TOL / 2, both in
:mod:`placement.model.instance`), so running sums that differ from the validator's in the last
bit can never turn a "fits" here into a violation there.

Speed, never at the cost of a different answer: tables per machine (room per worker
demand, most workers held alone per job shape) are kept across changes and recomputed
only where a machine changed; plain int task counts are checked in Python floats (the
same IEEE operations in the same order as the array code).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from placement.model.instance import TOL_FIT, Instance, Job
from placement.model.progress import Tasks
from placement.slots.residual_tables import STATIC_KEPT, demand_entry, tree_tables
from placement.slots.room import most_rows, room_each, room_rows
from placement.slots.spread_search import ANY, SpreadSearch

__all__ = ["ANY", "Residual"]


class Residual(SpreadSearch):
    """Free capacity of one slot: ``free[h, r]`` per machine and ``link_free[e]`` per link,
    and the tasks of every job placed so far (so that ``remove`` can undo them)."""

    def __init__(self, instance: Instance):
        self.instance = instance
        # the tree's tables, the same for every Residual of this cluster: built once
        self.__dict__.update(tree_tables(instance))
        self.free = self.cap.copy()
        self.link_free = self.link_cap.copy()
        self._held: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]] = {}
        n_machines = len(self.machine_ids)
        # speed (module docstring): a version bumped by every change, per machine the version
        # that last changed it, per node whether its free-capacity sum is current, the
        # per-machine tables kept per job shape, and memos emptied on every change
        self._version = 0
        self._stamp = np.zeros(n_machines, dtype=np.int64)
        self._rooms: dict[object, list] = {}
        self._node_free = np.zeros((len(self._node_index), len(instance.resources)))
        self._node_free_ok = np.zeros(len(self._node_index), dtype=bool)
        self._memo: dict = {}
        self._link_memo: dict = {}  # the same for what depends on the links' free bandwidth only

    def clear(self) -> None:
        """Empty the slot again (cheaper than building a new Residual for every slot)."""
        self.free = self.cap.copy()
        self.link_free = self.link_cap.copy()
        self._held.clear()
        self._changed(None)

    def _changed(self, hs: np.ndarray | None, links: bool = True) -> None:
        """The free capacity of machines ``hs`` (all if None) changed, and of links if
        ``links``: caches computed before are refreshed or dropped."""
        self._version += 1
        self._memo.clear()
        if links:
            self._link_memo.clear()
        if hs is None:
            self._stamp[:] = self._version
            self._node_free_ok[:] = False
        else:
            self._stamp[hs] = self._version
            self._node_free_ok[self._anc[hs]] = False  # (-1: the last node too, harmless)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, dict]:
        """The current state, to :meth:`restore` after a tentative change."""
        return self.free.copy(), self.link_free.copy(), dict(self._held)

    def restore(self, state: tuple[np.ndarray, np.ndarray, dict]) -> None:
        free, link_free, held = state
        self.free, self.link_free, self._held = free.copy(), link_free.copy(), dict(held)
        self._changed(None)

    def is_node(self, node: object) -> bool:
        """Is ``node`` a machine or switch id of the cluster?"""
        return isinstance(node, str) and node in self._node_index

    # ----- rules 1 and 4 -----------------------------------------------------------------
    def demand(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        """(alpha, beta): one worker's and one PS's demand as vectors over the resources."""
        return self._demand_entry(job)[1]

    def _demand_entry(self, job: Job) -> tuple:
        """The cluster's cached demands of ``job`` (:func:`placement.slots.residual_tables.demand_entry`)."""
        entry = self._demands.get(job.id)
        if entry is None or entry[0]() is not job:
            entry = self._demands[job.id] = demand_entry(job, self.instance.resources, self._gpu_types, self._demands)
        return entry

    def _types_ok(self, job: Job, items: Iterable[tuple[int, int, int]]) -> bool:
        """Do the workers of ``items`` (machine, workers, PSs) sit on one type the job runs on?"""
        codes = {self._type_codes[h] for h, w, _ in items if w}
        return not codes or (len(codes) == 1 and codes.pop() in self._demand_entry(job)[3])

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
        """Would ``tasks`` of ``job`` keep rules 1 and 4 and the type rule on top of what is placed?"""
        items = self._plain(tasks)
        if items is not None:
            return (not self._typed or self._types_ok(job, items)) and self._fits_plain(job, items)
        hs, ws, ss = self._arrays(tasks)
        if len(hs) == 0:
            return True
        if self._typed and not self._types_ok(job, zip(hs.tolist(), ws.tolist(), ss.tolist())):
            return False
        alpha, beta = self.demand(job)
        use = ws[:, None] * alpha + ss[:, None] * beta
        if not (use <= self.free[hs] + TOL_FIT).all():
            return False
        links, load = self._loads(job, hs, ws, ss)
        return bool((load <= self.link_free[links] + TOL_FIT).all())

    # the same for plain int counts, in Python floats (module docstring)
    def _plain(self, tasks: Tasks) -> list[tuple[int, int, int]] | None:
        """(machine, workers, PSs) of the tasks if every count is a non-negative int."""
        index = self.instance.topology.machine_index
        items = [(index[h], w, s) for h, (w, s) in tasks.items() if w or s]
        ok = all(type(w) is int and type(s) is int and w >= 0 and s >= 0 for _, w, s in items)
        return items if ok else None

    def _fits_plain(self, job: Job, items: list[tuple[int, int, int]]) -> bool:
        alpha, beta = self._demand_lists(job)
        free = self.free
        for h, w, s in items:
            for a, b, f in zip(alpha, beta, free[h].tolist()):
                if not w * a + s * b <= f + TOL_FIT:
                    return False
        link_free = self.link_free
        return all(x <= float(link_free[e]) + TOL_FIT for e, x in self._loads_plain(job, items).items())

    def _loads_plain(self, job: Job, items: list[tuple[int, int, int]]) -> dict[int, float]:
        """``_loads`` as link -> Gbps, summed per link in task order as np.bincount does."""
        if len(items) <= 1:
            return {}
        rows = [self._anc_rows[h] for h, _, _ in items]
        first, lca = rows[0], len(rows[0]) - 1
        for k, node in enumerate(first):  # the deepest depth all tasks share a node at
            if node < 0 or any(r[k] != node for r in rows):
                lca = k - 1
                break
        load: dict[int, float] = {}
        wg, pg = job.worker_gbps, job.ps_gbps
        for h, w, s in items:
            amount = w * wg + s * pg
            for e in self._up_rows[h][: self._depths[h] - lca]:
                load[e] = load.get(e, 0.0) + amount
        return load

    def _demand_lists(self, job: Job) -> tuple[list[float], list[float]]:
        """``demand`` as lists of Python floats (kept as ``demand`` is)."""
        return self._demand_entry(job)[2]

    def place(self, job: Job, tasks: Tasks) -> None:
        """Take the resources and link bandwidth of ``tasks``; raises if they do not fit."""
        if not self.try_place(job, tasks):
            raise ValueError(f"job {job.id}: tasks {dict(tasks)} do not fit")

    def try_place(self, job: Job, tasks: Tasks) -> bool:
        """:meth:`place` if ``tasks`` fit (:meth:`fits`), checked and taken in one pass;
        False, and nothing changed, if they do not."""
        if job.id in self._held:
            raise ValueError(f"job {job.id} is already placed in this slot")
        items = self._plain(tasks)
        if items is not None:
            if self._typed and not self._types_ok(job, items):
                return False
            alpha, beta = self._demand_lists(job)
            free = self.free
            rows = []
            for h, w, s in items:
                row = [w * a + s * b for a, b in zip(alpha, beta)]
                if not all(u <= f + TOL_FIT for u, f in zip(row, free[h].tolist())):
                    return False
                rows.append(row)
            loads = self._loads_plain(job, items)
            link_free = self.link_free
            if not all(x <= float(link_free[e]) + TOL_FIT for e, x in loads.items()):
                return False
            hs = np.array([h for h, _, _ in items], dtype=np.int64)
            use = np.array(rows, dtype=float).reshape(len(items), len(alpha))
            links, load = np.array(list(loads), dtype=np.int64), np.array(list(loads.values()))
        else:
            if not self.fits(job, tasks):
                return False
            hs, ws, ss = self._arrays(tasks)
            alpha_a, beta_a = self.demand(job)
            use = ws[:, None] * alpha_a + ss[:, None] * beta_a
            links, load = self._loads(job, hs, ws, ss)
        self.free[hs] -= use
        if len(links):
            self.link_free[links] -= load
        self._changed(hs, len(links) > 0)
        self._held[job.id] = (hs, use, links, load, {h: tuple(v) for h, v in tasks.items() if v[0] or v[1]})
        return True

    def remove(self, job_id: str) -> dict[str, tuple[int, int]]:
        """Give back what ``job_id`` holds; returns its tasks (empty if it held none)."""
        if job_id not in self._held:
            return {}
        hs, use, links, load, tasks = self._held.pop(job_id)
        self.free[hs] += use
        if len(links):
            self.link_free[links] += load
        self._changed(hs, len(links) > 0)
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
        room = self._room(job)
        return room.copy() if hs is None else room[hs]

    def worker_rooms_without(self, jobs: list[Job], hs: np.ndarray) -> np.ndarray:
        """Per job (rows): :meth:`worker_room` on machines ``hs`` (ascending) as if the job
        held nothing: what it holds is added back on paper, so nothing changes and no cached
        table of other job shapes is invalidated (as a remove and place again would). Jobs
        of one shape share a row, computed once."""
        shape_of: dict[bytes, int] = {}
        tables, rows, at, own, use, alpha_at = [], [], [], [], [], []
        for row, job in enumerate(jobs):
            alpha = self.demand(job)[0]
            key = alpha.tobytes()
            if key not in shape_of:
                shape_of[key] = len(tables)
                tables.append(self._room(job)[hs])
            rows.append(shape_of[key])
            entry = self._held.get(job.id)
            if entry is not None:
                at.append(np.full(len(entry[0]), row))
                own.append(entry[0])
                use.append(entry[1])
                alpha_at.append(np.broadcast_to(alpha, entry[1].shape))
        if not jobs:
            return np.zeros((0, len(hs)), dtype=np.int64)
        rooms = np.stack(tables)[rows]
        if own and len(hs):
            at_a, own_a, use_a, alpha_a = (np.concatenate(x) for x in (at, own, use, alpha_at))
            pos = np.minimum(np.searchsorted(hs, own_a), len(hs) - 1)
            mine = hs[pos] == own_a
            rooms[at_a[mine], pos[mine]] = room_each(alpha_a[mine], self.free[own_a[mine]] + use_a[mine])
        return rooms

    def _room(self, job: Job, code: int | None = None) -> np.ndarray:
        """``worker_room`` of every machine, 0 on machines not of type ``code`` when given
        (the caller must not modify it)."""
        alpha, _ = self.demand(job)
        room = self._kept(alpha.tobytes(), lambda free: room_rows(alpha, free))
        if code is None:
            return room
        key = ("room", alpha.tobytes(), code)
        if key not in self._memo:
            self._memo[key] = np.where(self._type_code == code, room, 0)
        return self._memo[key]

    def _kept(self, key: object, rows: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """A per-machine table ``rows(free)``, kept across changes (per job shape ``key``) and
        recomputed only on the machines changed since (``rows`` works row by row)."""
        entry = self._rooms.get(key)
        if entry is None:
            entry = self._rooms[key] = [rows(self.free), self._version]
        elif entry[1] != self._version:
            stale = np.flatnonzero(self._stamp > entry[1])
            if len(stale):
                entry[0][stale] = rows(self.free[stale])
            entry[1] = self._version
        return entry[0]

    # ----- local placements ----------------------------------------------------------------
    def _within(self, within: str | None, code: int | None = None) -> np.ndarray:
        """The machines under ``within`` (all if None), of type ``code`` only when given."""
        cand = self._all if within is None else self._below[self._node_index[within]]
        if code is None:
            return cand
        key = ("within", within, code)
        if key not in self._static:
            self._static[key] = cand[self._type_code[cand] == code]
        return self._static[key]

    def local(self, job: Job, workers: int, *, within: str | None = None,
              prefer: str | None = None, gpu_type: object = ANY) -> dict[str, tuple[int, int]] | None:
        """One machine (under ``within``, of one GPU type) for all ``workers`` and their PSs:
        ``prefer`` if it fits, else the largest local_gbps, then the tightest fit."""
        if not job.min_workers <= workers <= job.max_workers:
            return None
        if not self._typed and (gpu_type is ANY or gpu_type is None):  # untyped: no dispatch
            return self._local(job, workers, within, prefer, None)
        return self._per_type(job, gpu_type, self._local, job, workers, within, prefer)

    def _local(self, job: Job, workers: int, within: str | None, prefer: str | None, code: int | None
               ) -> dict[str, tuple[int, int]] | None:
        """``local`` (and ``find``'s local step) on the machines of type ``code`` (None: all)."""
        return self._local_in(job, workers, self._within(within, code), prefer)

    def _local_in(self, job: Job, workers: int, cand: np.ndarray, prefer: str | None,
                  fitting: bool = False) -> dict[str, tuple[int, int]] | None:
        """``local`` among machines ``cand`` (``fitting``: known to hold the tasks)."""
        ps = job.min_ps(workers)
        alpha, beta = self.demand(job)
        need = workers * alpha + ps * beta
        if not fitting:
            ok = (need <= self.free[cand] + TOL_FIT).all(axis=1)
            if not ok.any():
                return None
            cand = cand[ok]
        fitting = cand
        if prefer is not None:
            p = self.instance.topology.machine_index.get(prefer)
            if p is not None and (fitting == p).any():
                return {prefer: (workers, ps)}
        h = fitting[self._tightest(fitting, need)]
        return {self.machine_ids[h]: (workers, ps)}

    def _tightest(self, hs: np.ndarray, need: np.ndarray) -> int:
        """Position (in ``hs``) of the best machine: largest local_gbps, then least left."""
        gbps = self.local_gbps[hs]
        fastest = np.flatnonzero(gbps == gbps.max())  # the first of these with least left
        left = ((self.free[hs[fastest]] - need) / self._scale[hs[fastest]]).sum(axis=1)
        return int(fastest[np.argmin(left)])

    def best_local(self, job: Job, cap: int, *, within: str | None = None,
                   prefer: str | None = None, gpu_type: object = ANY) -> dict[str, tuple[int, int]] | None:
        """The local placement with the most workers (min_workers..cap), on one GPU type, or None."""
        if not self._typed and (gpu_type is ANY or gpu_type is None):  # untyped: no dispatch
            return self._best_local(job, cap, within, prefer, None)
        return self._per_type(job, gpu_type, self._best_local, job, cap, within, prefer)

    def _best_local(self, job: Job, cap: int, within: str | None, prefer: str | None, code: int | None
                    ) -> dict[str, tuple[int, int]] | None:
        """``best_local`` on the machines of type ``code`` (None: every machine)."""
        cand = self._within(within, code)
        whole = within is None and code is None
        room = self._room(job) if whole else self._room(job)[cand]
        top = min(cap, job.max_workers, int(room.max(initial=0)))
        if top < job.min_workers:
            return None
        most = self._local_most(job) if len(cand) else None
        if most is None:  # (no table: negative demands) every count from the most down
            for workers in range(top, job.min_workers - 1, -1):
                if (tasks := self._local_in(job, workers, cand, prefer)) is not None:
                    return tasks
            return None
        most = most if whole else most[cand]
        workers = min(top, int(most.max()))  # the most that one machine holds
        if workers < job.min_workers:
            return None
        return self._local_in(job, workers, cand[most >= workers], prefer, fitting=True)

    def _local_most(self, job: Job) -> np.ndarray | None:
        """Per machine, how many of the counts 1, 2, ..., top >= max_workers it holds alone,
        workers with their PSs: it holds W iff W <= that number, as the demand grows with
        the count. None when it may not grow (negative demands) or min_workers < 1."""
        if job.min_workers < 1:
            return None
        alpha, beta = self.demand(job)
        top = 1 << max(job.max_workers - 1, 0).bit_length()  # a power of two: few tables
        key = (alpha.tobytes(), beta.tobytes(), job.worker_gbps, job.ps_gbps, top)
        if key not in self._static:
            if len(self._static) >= STATIC_KEPT:  # kept per cluster: a long run sees many shapes
                self._static.clear()
            ws = np.arange(1, top + 1)
            ss = np.array([job.min_ps(int(w)) for w in ws], dtype=np.int64)
            grows = (alpha >= 0).all() and (beta >= 0).all() and (np.diff(ss) >= 0).all()
            self._static[key] = (ws[:, None] * alpha + ss[:, None] * beta).T.copy() if grows else None
        need = self._static[key]
        return None if need is None else self._kept(key, lambda free: most_rows(need, free))

    # ----- local or spread (spread placements: placement.slots.spread_search) ----------------------
    def find(self, job: Job, workers: int, *, within: str | None = None,
             prefer: Iterable[str] = (), gpu_type: object = ANY) -> dict[str, tuple[int, int]] | None:
        """``workers`` workers and their PSs: local first, else the smallest subtree; on one
        GPU type (module docstring: by default local or spread on each type, the fastest)."""
        if not job.min_workers <= workers <= job.max_workers:
            return None
        if not self._typed and (gpu_type is ANY or gpu_type is None):  # untyped: no dispatch
            return self._find(job, workers, within, list(prefer), None)
        return self._per_type(job, gpu_type, self._find, job, workers, within, list(prefer))

    def _find(self, job: Job, workers: int, within: str | None, prefer: list[str], code: int | None
              ) -> dict[str, tuple[int, int]] | None:
        """``find`` with the workers on type ``code`` (None: every machine)."""
        tasks = self._local(job, workers, within, prefer[0] if prefer else None, code)
        return tasks if tasks is not None else self._spread(job, workers, within, prefer, code)

    def max_workers_that_fit(self, job: Job, where: str | None = None) -> int:
        """Most workers (with their PSs) of ``job`` placeable on machine or under switch
        ``where`` (the whole cluster if None), local or spread, on any one of its GPU types;
        0 if not even min_workers."""
        counts = [sum(w for w, _ in t.values()) for code in self._search_codes(job) for t in
                  (self._best_local(job, job.max_workers, where, None, code),
                   self._best_spread(job, job.max_workers, where, [], code)) if t is not None]
        return max(counts, default=0)
