"""The search for spread placements: W workers and their ``job.min_ps(W)`` PSs over
several machines, inside the smallest subtree (switch) that can hold them with every link
up to that switch respected.

Inside the chosen subtree, tasks go to the machines with the most room, grouped by the
switch's child subtrees, and PSs sit beside the workers (first on the machines holding
workers, then elsewhere in the same subtree). Every placement returned is checked with
``fits`` and keeps rule 3.

GPU types (MODEL.md 8): on a typed cluster every search of Residual (local ones too) puts
the workers on machines of one type the job runs on, ``gpu_type``'s (a type, or None for
untyped machines), or by default (:data:`ANY`) each of the job's types in turn, keeping the
fastest placement found; PSs may sit on any machine. On an untyped cluster each search is
the one that existed before types, unchanged (and skips the dispatch: ``_per_type``).

These are methods of :class:`placement.slots.residual.Residual` (through :class:`SpreadSearch`),
kept apart because they are a heuristic search, while the rest of Residual is the exact
bookkeeping of rules 1 and 4 that the validator applies too.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import numpy as np

from placement.model.instance import TOL_FIT, Instance, Job

__all__ = ["ANY", "SpreadSearch"]

T = TypeVar("T")


class _AnyType:
    """The type of :data:`ANY`."""

    def __repr__(self) -> str:
        return "ANY"


#: ``gpu_type=ANY`` (the default of every search): each GPU type the job runs on, the
#: fastest placement found (module docstring); ``None`` is the class of untyped machines
ANY = _AnyType()


class SpreadSearch:
    """The spread-placement methods of :class:`placement.slots.residual.Residual` (module
    docstring). They read its free capacity and tree tables, declared here, and call its
    ``demand``, ``_demand_entry``, ``_room``, ``fits`` and ``_within``.

    Speed: the room of every machine per worker demand (``_room``), the free capacity
    summed per node and the could-hold test of every candidate subtree at once come
    from tables Residual keeps current, computed exactly as the per-node formulas (sums of
    whole numbers, or the same NumPy expression on the same rows), so the search visits
    the same subtrees in the same order; the fill runs on Python floats, the same IEEE
    operations in the same order as on arrays."""

    instance: Instance
    machine_ids: tuple[str, ...]
    free: np.ndarray
    link_free: np.ndarray
    _anc: np.ndarray
    _depth: np.ndarray
    _up_link: np.ndarray
    _up: list[np.ndarray]
    _up_rows: list[list[int]]
    _depths: list[int]
    _node_index: dict[str, int]
    _node_depth: np.ndarray
    _below: list[np.ndarray]
    _spread_nodes: list[int]
    _static: dict
    _memo: dict
    _link_memo: dict
    _node_free: np.ndarray
    _node_free_ok: np.ndarray
    local_gbps: np.ndarray
    _typed: bool
    _gpu_types: tuple[str | None, ...]
    _type_code: np.ndarray
    _type_index: dict[str | None, int]

    # ----- GPU types ---------------------------------------------------------------------
    def job_types(self, job: Job) -> tuple[str | None, ...]:
        """The GPU types of the cluster the job's workers may use, fastest first
        (:func:`placement.slots.residual_tables.job_types`); (None,) on an untyped cluster."""
        return tuple(self._gpu_types[k] for k in self._demand_entry(job)[3]) if self._typed else (None,)

    def may_hold_workers(self, job: Job, gpu_type: object = ANY) -> np.ndarray:
        """Per machine: may it hold workers of ``job``: is its GPU type one the job runs on
        (``gpu_type``, when given)? All True on an untyped cluster."""
        codes = self._demand_entry(job)[3]
        if gpu_type is not ANY:
            code = self._type_index.get(gpu_type, -1)
            codes = (code,) if code in codes else ()
        return np.isin(self._type_code, codes)

    def _per_type(self, job: Job, gpu_type: object, search: Callable[..., T | None], *args: object) -> T | None:
        """``search(*args, code)``, a search with the workers kept to the machines of type
        ``code``: for ``gpu_type``, or for :data:`ANY` over the job's types, the placement
        with the highest rate (ties: the type tried first). (On an untyped cluster the
        public searches call ``search(*args, None)``, every machine, without this step.)"""
        codes = self._search_codes(job)
        if gpu_type is not ANY:
            code = self._type_index.get(gpu_type, -1) if self._typed else -1
            codes = (code,) if code in codes else ()
        if len(codes) == 1:
            return search(*args, codes[0])
        best, fastest = None, -1.0
        for code in codes:
            tasks = search(*args, code)
            if tasks is not None and (rate := self._rate(job, tasks, code)) > fastest:
                best, fastest = tasks, rate
        return best

    def _rate(self, job: Job, tasks: Mapping[str, tuple[int, int]], code: int) -> float:
        """The job's rate with ``tasks``, its workers on type ``code`` (``job_rate`` of
        placement.model.progress, for one type)."""
        used = [h for h, (w, s) in tasks.items() if w or s]
        gbps = self.local_gbps[self.instance.topology.machine_index[used[0]]] if len(used) == 1 else 0.0
        return job.rate(sum(w for w, _ in tasks.values()), len(used), gbps, self._gpu_types[code])

    def _search_codes(self, job: Job) -> tuple[int | None, ...]:
        """The type codes a search of ``job`` tries, fastest first; (None,) when untyped."""
        return self._demand_entry(job)[3] if self._typed else (None,)

    def _order(self, job: Job, v: int, prefer: Iterable[str], code: int | None = None) -> np.ndarray:
        """Machines below node ``v`` in filling order: preferred ones first, then grouped by
        v's child subtree (most room first), most room first inside a group (room for
        workers on type ``code``: none elsewhere)."""
        index = self.instance.topology.machine_index
        pref = frozenset(index[p] for p in prefer if p in index)
        key = ("order", v, self.demand(job)[0].tobytes(), job.max_workers, pref, code)
        if key not in self._memo:
            hs = self._below[v]
            room = np.minimum(self._room(job, code)[hs], job.max_workers + 1)
            inv = self._child_groups(v)
            group_room = np.bincount(inv, weights=room)[inv]
            keys = (hs, -room, -group_room)
            if pref:  # (without, the key is the same for every machine)
                is_pref = np.zeros(len(self.machine_ids), dtype=bool)
                is_pref[list(pref)] = True
                keys += (~is_pref[hs],)
            self._memo[key] = hs[np.lexsort(keys)]
        return self._memo[key]

    def _child_groups(self, v: int) -> np.ndarray:
        """Per machine below ``v``, the number of its child subtree of v (by node index)."""
        key = ("child", v)
        if key not in self._static:
            hs = self._below[v]
            child = self._anc[hs, min(self._node_depth[v] + 1, self._anc.shape[1] - 1)]
            self._static[key] = np.unique(child, return_inverse=True)[1].reshape(-1)
        return self._static[key]

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
                fixed: Mapping[int, int] | None = None, share: bool = True, code: int | None = None
                ) -> dict[str, tuple[int, int]] | None:
        """Fill ``order`` (machines below ``v``) with the workers (or take ``fixed`` ones) and
        ``min_ps`` PSs, counting every task's bandwidth on each link up to ``v``. With
        ``share`` each machine takes its share of PSs with its workers; without, workers go
        first and PSs fill the room left (better when links, not machines, are short).
        Workers go only on machines of type ``code`` (if given), PSs anywhere."""
        alpha, beta = self._demand_lists(job)
        wg, pg = job.worker_gbps, job.ps_gbps
        ps_total = job.min_ps(workers)
        dv = int(self._node_depth[v])
        base_free, base_link = self.free, self.link_free
        free: dict[int, list[float]] = {}  # machines changed so far (the rest: self.free)
        link_free: dict[int, float] = {}
        w_at: dict[int, int] = {}
        s_at: dict[int, int] = {}
        up_rows, depths = self._up_rows, self._depths

        def path(h: int) -> list[int]:
            return up_rows[h][: depths[h] - dv]

        def row(h: int) -> list[float]:
            return free[h] if h in free else base_free[h].tolist()

        def link_min(p: list[int]) -> float:
            return min(link_free[e] if e in link_free else float(base_link[e]) for e in p)

        def take(h: int, w: int, s: int) -> None:
            free[h] = [f - (w * a + s * b) for f, a, b in zip(row(h), alpha, beta)]
            amount = w * wg + s * pg
            for e in path(h):
                link_free[e] = (link_free[e] if e in link_free else float(base_link[e])) - amount
            w_at[h] = w_at.get(h, 0) + w
            s_at[h] = s_at.get(h, 0) + s

        def most(h: int, unit: list[float], gbps: float, limit: int) -> int:
            """Most units (of demand ``unit``, ``gbps`` each) machine h still takes, <= limit."""
            per = [(max(f, 0.0) + TOL_FIT) / u for f, u in zip(row(h), unit) if u > 0]
            n = limit if not per or min(per) >= limit else math.floor(min(per))
            p = path(h)
            if p:
                n = min(n, math.floor((max(link_min(p), 0) + TOL_FIT) / gbps))
            return max(n, 0)

        left_w, left_s = workers, ps_total
        order_list = order.tolist()
        if fixed is not None:
            members = set(order_list)
            for h, w in fixed.items():
                if h not in members or most(h, alpha, wg, w) < w:
                    return None
                take(h, w, 0)
            for h, w in sorted(fixed.items(), key=lambda hw: (-hw[1], hw[0])):
                s = min(left_s, -(-w * ps_total // workers), most(h, beta, pg, left_s))
                take(h, 0, s)  # each worker machine its share of PSs first
                left_s -= s
            left_w = 0
        rooms = self._room(job, code)[order].tolist() if left_w else []
        for h, room in zip(order_list, rooms):
            if left_w == 0:
                break
            if room == 0 and h not in free:
                continue  # no room for one worker by capacity (or not of type code): most() is 0 below
            # workers with their share of PSs beside them, else workers alone
            w = most(h, alpha, wg, left_w) if share else 0
            while w > 0:
                s = min(left_s, -(-w * ps_total // workers))
                p = path(h)
                if all(w * a + s * b <= f + TOL_FIT for a, b, f in zip(alpha, beta, row(h))) and (
                        not p or w * wg + s * pg <= link_min(p) + TOL_FIT):
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
        rest = [h for h in order_list if h not in w_at] if left_s else []
        for h in holders + rest:
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

    def _candidates(self, job: Job, top: int | None, workers: int, code: int | None = None) -> Iterator[int]:
        """The spread nodes under ``top`` (all if None), in search order, for which
        a cheap necessary condition holds (room by capacity and by each machine's link path):
        first the workers each node's machines hold by capacity and
        links, for all nodes at once (whole numbers, so their sum is exact in any order),
        then, lazily node by node, the free capacity summed over the node's machines (kept
        per node until a machine below changes). Workers count on type ``code`` only."""
        nodes, groups = self._under(top)
        alpha, beta = self.demand(job)
        key = ("hold", alpha.tobytes(), job.worker_gbps, top, code)
        if key not in self._memo:
            room = self._room(job, code)
            held = np.empty(len(nodes))
            for g, (pos, hs, labels, v) in enumerate(groups):
                link_key = ("by_link", job.worker_gbps, top, g)
                if link_key not in self._link_memo:
                    self._link_memo[link_key] = np.floor(
                        (np.maximum(self._link_room(hs, v), 0) + TOL_FIT) / job.worker_gbps)
                by_link = self._link_memo[link_key]
                held[pos] = np.bincount(labels, weights=np.minimum(room[hs], by_link), minlength=len(pos))
            self._memo[key] = held
        total = (workers * alpha + job.min_ps(workers) * beta).tolist()
        for v in nodes[self._memo[key] >= workers].tolist():  # then the capacity sums, in turn
            if not self._node_free_ok[v]:
                self._node_free[v] = np.maximum(self.free[self._below[v]], 0).sum(axis=0)
                self._node_free_ok[v] = True
            if all(x <= f + TOL_FIT for x, f in zip(total, self._node_free[v].tolist())):
                yield v

    def _under(self, top: int | None) -> tuple[np.ndarray, list]:
        """The spread nodes under ``top`` (or ``top`` itself; all if None), smallest first,
        and per depth: their positions, their machines one after another, each machine's
        node (as a position among them) and one node of that depth."""
        key = ("under", top)
        if key not in self._static:
            nodes = np.array(self._spread_nodes, dtype=np.int64)
            if top is not None:  # top is v or an ancestor: v's machines have top at top's depth
                first = np.array([self._below[v][0] for v in self._spread_nodes], dtype=np.int64)
                d = self._node_depth[top]
                nodes = nodes[(self._node_depth[nodes] >= d) & (self._anc[first, d] == top)]
            groups = []
            for d in sorted(set(self._node_depth[nodes].tolist())):
                pos = np.flatnonzero(self._node_depth[nodes] == d)
                members = [self._below[v] for v in nodes[pos].tolist()]
                labels = np.repeat(np.arange(len(pos)), [len(m) for m in members])
                groups.append((pos, np.concatenate(members), labels, int(nodes[pos[0]])))
            self._static[key] = (nodes, groups)
        return self._static[key]

    def spread(self, job: Job, workers: int, *, within: str | None = None,
               prefer: Iterable[str] = (), gpu_type: object = ANY) -> dict[str, tuple[int, int]] | None:
        """``workers`` workers and their PSs in the smallest subtree (under ``within``, or
        ``within`` itself) that holds them with every link respected, the workers on one
        GPU type (module docstring), or None."""
        if not job.min_workers <= workers <= job.max_workers:
            return None
        if not self._typed and (gpu_type is ANY or gpu_type is None):  # untyped: no dispatch
            return self._spread(job, workers, within, list(prefer), None)
        return self._per_type(job, gpu_type, self._spread, job, workers, within, list(prefer))

    def _spread(self, job: Job, workers: int, within: str | None, prefer: list[str], code: int | None
                ) -> dict[str, tuple[int, int]] | None:
        """``spread`` with the workers on type ``code`` (None: any machine)."""
        top = None if within is None else self._node_index[within]
        for v in self._candidates(job, top, workers, code):
            order = self._order(job, v, prefer, code)
            for share in (True, False):
                tasks = self._greedy(job, v, workers, order, share=share, code=code)
                if tasks is not None:
                    return tasks
        return None

    def best_spread(self, job: Job, cap: int, *, within: str | None = None,
                    prefer: Iterable[str] = (), gpu_type: object = ANY) -> dict[str, tuple[int, int]] | None:
        """The spread placement with the most workers (min_workers..cap) found, the workers
        on one GPU type (module docstring), or None."""
        if not self._typed and (gpu_type is ANY or gpu_type is None):  # untyped: no dispatch
            return self._best_spread(job, cap, within, list(prefer), None)
        return self._per_type(job, gpu_type, self._best_spread, job, cap, within, list(prefer))

    def _best_spread(self, job: Job, cap: int, within: str | None, prefer: list[str], code: int | None
                     ) -> dict[str, tuple[int, int]] | None:
        """``best_spread`` with the workers on type ``code`` (None: any machine)."""
        room = self._room(job, code)
        room = int((room if within is None else room[self._within(within)]).sum())
        hi = min(cap, job.max_workers, room)
        lo = job.min_workers
        if hi < lo:
            return None
        best = self._spread(job, hi, within, prefer, code)
        if best is not None:
            return best
        found = None
        hi -= 1
        while lo <= hi:  # the largest count the greedy can place (binary search)
            mid = (lo + hi) // 2
            tasks = self._spread(job, mid, within, prefer, code)
            if tasks is None:
                hi = mid - 1
            else:
                found, lo = tasks, mid + 1
        return found

    def beside(self, job: Job, workers: Mapping[str, int], *, within: str
               ) -> dict[str, tuple[int, int]] | None:
        """The given workers per machine plus ``min_ps`` PSs, on the workers' machines first,
        then elsewhere under ``within``; None if they do not fit (or break the type rule)."""
        index = self.instance.topology.machine_index
        fixed = {index[h]: w for h, w in workers.items() if w > 0}
        total = sum(fixed.values())
        if total < 1:
            return None
        v = self._node_index[within]
        order = self._order(job, v, (self.machine_ids[h] for h in sorted(fixed, key=lambda h: -fixed[h])))
        return self._greedy(job, v, total, order, fixed=fixed)
