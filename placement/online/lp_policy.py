"""The project's own online policy: re-solve the placement LP over a look-ahead window
every slot, round it, and realise the first slot.

Per slot t:
1. *Partitions* (POP, Narayanan et al., SOSP 2021): with more than ``jobs_per_partition``
   active jobs, the top-level subtrees (racks) are dealt into k groups of similar
   capacity and the jobs into the same k groups (a running job stays with the rack it
   runs in; the others are dealt in order of remaining processing time, so every group
   gets a mix); each group is an independent, smaller window model. One partition when
   the cluster is small.
2. *Candidate domains* per job, inside its partition: the domain it runs in now (no
   reconfiguration needed), the ``local_candidates`` machines with the most room for it,
   the ``spread_candidates`` smallest subtrees with the most room, and the root only when
   there is one partition and no candidate rack could hold ``max_workers``. Room is
   measured as if every job kept its current tasks, minus the job's own. The later
   look-ahead slots, which only plan, keep two of them: the current domain (else the
   roomiest machine) and the first rack.
3. *Window LP*: the aggregated model (``placement.formulation.aggregated``: one worker and one PS
   count per job, slot and domain) over slots t..t+window-1 with each job's remaining
   work as reported by the cluster, restricted to those domains; the work a job leaves
   after the window also pays the queueing charge below (``queue_extra``).
4. *Rounding*: in every job-slot the option with the largest LP weight, its counts
   rounded from their conditional values (the deterministic member of the rounding
   family of ``solvers.rounding``; one trial is what a per-slot decision affords).
5. *Realise slot t* with the realiser's slot rules (``placement.slot_rules.decide_slot``):
   each plan normalised and fitted in its domain, kept unchanged when a change would not
   finish the job sooner despite its restart cost, trimmed when the job completes, and
   the capacity left filled shortest remaining work first — across all partitions at once.
6. *Select* (up to ``select_limit`` active jobs): the decision of step 5 and the one the
   slot rules make alone are each played forward over the window with the realiser (the
   LP's plan for the later slots, or none), progress by MODEL.md, and the one whose
   window cost is lower is taken — each job's weighted completion time if it completes
   in the window, else the window's end plus its remaining work at full local speed
   (MODEL.md's unfinished charge) plus the queueing charge below. This is how the
   offline pipeline picks among rounding trials, done per slot.

*Queueing charge* (``queue_charge=True``). MODEL.md's unfinished charge lets every job
left unfinished run at full size right after the window, all at once, so the window
never sees that leftover work competes for the cluster: deferring a job that needs a
large share of the cluster (say 32 of 64 GPUs for two hours) looks almost free, slot
after slot, next to keeping four long 8-GPU jobs running. So a job's leftover work also
delays the leftover of the jobs queued behind it, as on one machine of the cluster's
capacity: each unfinished job j has a *load*, its remaining time at full size times the
share of the capacity it then holds (max_workers x (worker + kappa x PS demand) over the
capacity, dominant resource, at most 1); the leftovers are ordered by Smith's rule
(load / weight ascending, optimal on one machine) and job k is charged, beyond its own
remaining time, the summed load of the jobs ahead of it (``queue_delay``). Summed over
the jobs this is, per job, its load times the weight of the jobs behind it
(``queue_extra``), which is linear in its leftover, so step 3 puts it on the LP's q[j]
with the order fixed by the remaining work at slot t (each partition against its own
machines) and every job behind counted (the LP cannot know which will finish inside the
window; step 6 counts only those its play-out leaves). It is an estimate, not a bound:
the LP value is no longer one.
"""
from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from placement.capacity import Residual
from placement.chain import Chain, ChainStop, Formulate, Round, SolveLP, Trace
from placement.instance import Instance, Job
from placement.online.policy import TaskDict, View
from placement.slot_rules import decide_slot

logger = logging.getLogger(__name__)


def leftover(instance: Instance, jobs: Sequence[Job], remaining: Sequence[float],
             machines: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per job: ``own``, the seconds its ``remaining`` batches take at full local speed with
    max_workers workers (MODEL.md's unfinished charge), and ``load``, the seconds of the
    whole cluster (or of ``machines``) that this work occupies: ``own`` times the share of
    the capacity the job holds at full size, max_workers x (worker + kappa x PS demand)
    over the capacity, in its dominant resource, at most 1 (module docstring, 'Queueing charge')."""
    cap = instance.capacity_matrix if machines is None else instance.capacity_matrix[machines]
    cap = cap.sum(axis=0)
    own = np.array([instance.unfinished_seconds(job, r) for job, r in zip(jobs, remaining)], dtype=float)
    share = np.zeros(len(jobs))
    for k, job in enumerate(jobs):
        need = np.array([job.worker.get(r, 0) + job.kappa * job.ps.get(r, 0) for r in instance.resources], dtype=float)
        on = (need > 0) & (cap > 0)
        share[k] = min(1.0, job.max_workers * float((need[on] / cap[on]).max())) if on.any() else 0.0
    return own, own * share


def _smith(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Smith's rule on the cluster as one machine: smallest load per weight first
    (ties in the given order)."""
    return np.argsort(load / weight, kind="stable")


def queue_delay(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per job, the summed ``load`` of the jobs ahead of it in Smith order: how long the
    leftover work queued before it keeps the cluster busy (module docstring, 'Queueing charge')."""
    order = _smith(load, weight)
    out = np.empty(len(load))
    out[order] = np.cumsum(load[order]) - load[order]
    return out


def queue_extra(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per job, its ``load`` times the total weight of the jobs after it in Smith order:
    what all of its work left after the window costs the jobs queued behind it — the
    same charge as :func:`queue_delay`, summed by the job that causes it (linear in its
    leftover, so it goes on the LP's q[j])."""
    order = _smith(load, weight)
    behind = np.empty(len(load))
    behind[order] = weight[order].sum() - np.cumsum(weight[order])
    return load * behind


def _apply(chain: Chain, instance: Instance) -> tuple[list, Trace, ChainStop | None]:
    """One partition's chain forward; a failed LP is returned, not raised, so the other
    partitions still decide."""
    try:
        candidates, trace = chain.apply(instance)
    except ChainStop as stop:
        return [], stop.trace, stop
    return candidates, trace, None


class LPRoundingPolicy:
    """Window LP + rounding + realise, re-optimised every slot (module docstring)."""

    name = "lp-rounding"

    def __init__(self, *, window: int = 4, local_candidates: int = 3, spread_candidates: int = 2,
                 jobs_per_partition: int = 125, time_limit: float | None = 5.0, threads: int | None = None,
                 select_limit: int = 500, queue_charge: bool = True):
        if window < 1 or local_candidates < 0 or spread_candidates < 0 or jobs_per_partition < 1:
            raise ValueError("window and jobs_per_partition must be >= 1, candidate counts >= 0")
        self.window, self.local_k, self.spread_k = window, local_candidates, spread_candidates
        self.jobs_per_partition, self.time_limit = jobs_per_partition, time_limit
        self.threads = max(1, threads if threads is not None else min(2, os.cpu_count() or 1))
        self.select_limit = select_limit
        self.queue_charge = queue_charge
        self.last_timings: dict[str, float] = {}
        #: sum of the window LP values of the last decision (None if a partition's LP failed)
        self.last_lp_value: float | None = None

    def decide(self, view: View) -> dict[str, TaskDict]:
        inst, t = view.instance, view.t
        timings = {"candidates": 0.0, "formulate": 0.0, "lp": 0.0}
        plans: dict[int, dict] = {}
        self.last_lp_value = 0.0
        end = t + 1
        if view.jobs:
            clock = time.perf_counter()
            parts = self.partitions(view)
            domains, later = self.candidate_domains(view, parts)
            timings["candidates"] = time.perf_counter() - clock
            end = min(inst.horizon, t + max(1, min(self.window, view.lookahead)))
            chains = [self._window_chain(view, jobs, machines, domains, later, end) for jobs, machines in parts]
            clock = time.perf_counter()
            if self.threads > 1 and len(chains) > 1:
                with ThreadPoolExecutor(self.threads) as pool:
                    runs = list(pool.map(_apply, chains, [inst] * len(chains)))
            else:
                runs = [_apply(chain, inst) for chain in chains]
            timings["solve"] = time.perf_counter() - clock
            for chain, (candidates, trace, stop) in zip(chains, runs):
                for key in ("formulate", "lp"):
                    timings[key] += trace.timings.get(key, 0.0)
                if stop is not None:
                    self.last_lp_value = None
                    logger.warning("slot %d: window %s; these jobs follow the slot rules alone", t, stop)
                    continue
                if self.last_lp_value is not None:
                    self.last_lp_value += trace.result.objective
                intent = chain.invert(candidates[0], trace)
                for slot in range(t, end):
                    plans.setdefault(slot, {}).update(intent.slots[slot])
        clock = time.perf_counter()
        placed = decide_slot(inst, view.tracker(), t, plans.get(t, {}), fill=True)
        timings["realise"] = time.perf_counter() - clock
        if plans and len(view.jobs) <= self.select_limit and end > t + 1:
            clock = time.perf_counter()
            alone = decide_slot(inst, view.tracker(), t, {}, fill=True)
            if alone != placed and self._window_cost(view, alone, {}, end) < self._window_cost(view, placed, plans, end):
                placed = alone
            timings["select"] = time.perf_counter() - clock
        timings["partitions"] = len(parts) if view.jobs else 0
        self.last_timings = timings
        return placed

    def _window_cost(self, view: View, first: dict[str, TaskDict], plans: dict[int, dict], end: int) -> float:
        """Weighted completion times over the window if slot t takes ``first`` and the
        later slots follow ``plans`` through the slot rules (module docstring, step 6)."""
        inst, dt = view.instance, view.instance.slot_seconds
        tracker = view.tracker()
        tracker.advance(view.t, first)
        for slot in range(view.t + 1, end):
            tracker.advance(slot, decide_slot(inst, tracker, slot, plans.get(slot, {}), fill=True))
        cost = 0.0
        left: list[Job] = []
        for job_id, state in view.jobs.items():
            job = state.job
            if job_id in tracker.completed:
                cost += job.weight * (tracker.completed[job_id] + 1) * dt
            else:
                left.append(job)
        if not left:
            return cost
        own, load = leftover(inst, left, [tracker.remaining(job) for job in left])
        weight = np.array([job.weight for job in left], dtype=float)
        after = queue_delay(load, weight) if self.queue_charge else 0.0
        return cost + float((weight * (end * dt + own + after)).sum())

    def _window_chain(self, view: View, jobs: list[str], machines: np.ndarray, domains: dict[str, set[str]],
                      later: dict[str, set[str]], end: int) -> Chain:
        """The chain of one partition's window (module docstring, steps 3 and 4): the
        aggregated model restricted to the candidate domains, its LP, the most likely
        rounding; inverted, it gives the partition's intent."""
        inst = view.instance
        remaining = {j: view.jobs[j].remaining for j in jobs}
        extra = None
        if self.queue_charge:
            members = [view.jobs[j].job for j in jobs if remaining[j] > 0]
            own, load = leftover(inst, members, [remaining[job.id] for job in members], machines)
            extra = dict(zip((job.id for job in members),
                             queue_extra(load, np.array([job.weight for job in members], dtype=float))))
        window = Formulate("aggregated", start=view.t, end=end, remaining=remaining,
                           domains={j: domains[j] for j in jobs}, later_domains={j: later[j] for j in jobs},
                           overflow_extra=extra)
        return Chain([window, SolveLP(self.time_limit), Round()])

    # ----- partitions and candidates ---------------------------------------------------
    def partitions(self, view: View) -> list[tuple[list[str], np.ndarray]]:
        """(job ids, machine indices) per partition (module docstring, step 1)."""
        topo = view.instance.topology
        n_machines = len(topo.machines)
        k = min(math.ceil(len(view.jobs) / self.jobs_per_partition), self._top_level_count(view))
        if k <= 1:
            return [(list(view.jobs), np.arange(n_machines))]
        group_of_top, top_of_machine = self._deal_racks(view, k)
        index = topo.machine_index
        buckets: list[list[str]] = [[] for _ in range(k)]
        waiting = []
        for job_id, state in view.jobs.items():
            used = [h for h, (w, s) in state.previous.items() if (w or s) and h in index]
            if used:
                buckets[group_of_top[top_of_machine[index[used[0]]]]].append(job_id)
            else:
                waiting.append(state)
        waiting.sort(key=lambda s: (s.remaining * s.job.batch_seconds / s.job.max_workers, s.job.id))
        for rank, state in enumerate(waiting):
            buckets[min(range(k), key=lambda g: (len(buckets[g]), (g - rank) % k))].append(state.job.id)
        machine_group = group_of_top[top_of_machine]
        return [(buckets[g], np.flatnonzero(machine_group == g)) for g in range(k) if buckets[g]]

    @staticmethod
    def _top_level(view: View) -> np.ndarray:
        """For each machine, the index of its top-level subtree (a child of the root)."""
        anc, depth, _ = view.instance.topology.ancestor_table
        return np.where(depth >= 1, anc[:, min(1, anc.shape[1] - 1)], np.arange(len(depth)))

    def _top_level_count(self, view: View) -> int:
        return len(np.unique(self._top_level(view)))

    def _deal_racks(self, view: View, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-level subtrees dealt into k groups of similar total capacity."""
        top = self._top_level(view)
        tops, top_of_machine = np.unique(top, return_inverse=True)
        cap = np.array([sum(m.capacity.values()) for m in view.instance.topology.machines])
        size = np.bincount(top_of_machine, weights=cap)
        group = np.zeros(len(tops), dtype=np.int64)
        load = np.zeros(k)
        for r in np.argsort(-size, kind="stable"):
            g = int(np.argmin(load))
            group[r] = g
            load[g] += size[r]
        return group, top_of_machine

    def candidate_domains(self, view: View, parts: list[tuple[list[str], np.ndarray]]
                          ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """Per job: current domain, best local machines, roomiest small subtrees, and the
        root only when unpartitioned and needed; and the two kept for the later slots
        (module docstring, step 2)."""
        inst = view.instance
        topo = inst.topology
        residual = Residual(inst)
        for state in view.jobs.values():
            if state.previous and residual.fits(state.job, state.previous):
                residual.place(state.job, state.previous)
        machine_ids = [m.id for m in topo.machines]
        anc, depth, _ = topo.ancestor_table
        # subtrees that can hold a spread job: switches, by the machines below them
        switch_nodes = [i for i in range(len(machine_ids), len(topo.nodes))]
        members = {i: np.flatnonzero((anc == i).any(axis=1)) for i in switch_nodes}
        members = {i: m for i, m in members.items() if len(m) > 1}
        root = topo.nodes.index(topo.root_id)
        out: dict[str, set[str]] = {}
        later: dict[str, set[str]] = {}
        for jobs, machines in parts:
            inside = np.zeros(len(machine_ids), dtype=bool)
            inside[machines] = True
            subtrees = [(i, m) for i, m in members.items() if inside[m].all() and (i != root or len(parts) == 1)]
            for job_id in jobs:
                state = view.jobs[job_id]
                job = state.job
                held = residual.remove(job_id) if residual.held(job_id) else None
                room = np.where(inside, residual.worker_room(job), -1)
                chosen: set[str] = set()
                keep: list[str] = []
                if state.previous:
                    keep.append(topo.lca(h for h, (w, s) in state.previous.items() if w or s))
                order = np.argsort(-room, kind="stable")[: self.local_k]
                local = [machine_ids[h] for h in order if room[h] >= job.min_workers]
                sized = sorted(((len(m), -int(np.maximum(room[m], 0).sum()), i) for i, m in subtrees
                                if i != root and np.maximum(room[m], 0).sum() >= job.min_workers))
                picked = sized[: self.spread_k]
                keep += local[:1] if not keep else []
                keep += [topo.nodes[i] for _, _, i in picked[:1]]
                chosen.update(keep, local, (topo.nodes[i] for _, _, i in picked))
                if len(parts) == 1 and (not picked or max(-r for _, r, _ in picked) < job.max_workers):
                    chosen.add(topo.root_id)
                if held:
                    residual.place(job, held)
                out[job_id] = chosen
                later[job_id] = set(keep) or chosen
        return out, later
