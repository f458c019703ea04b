"""The project's own online policy: re-solve the placement LP over a look-ahead window
every slot, round it, and realise the first slot.

Per slot t:
1. *Candidate domains* per job (keeps the window model small enough for a decision in
   well under a second at 200 jobs x 64 machines): the domain it runs in now (no
   reconfiguration needed), the ``local_candidates`` machines with the most room for it,
   the ``spread_candidates`` smallest subtrees (racks) with the most room, and the root
   only when no candidate rack could hold ``max_workers``. Room is measured in the slot
   as it would be if every job kept its current tasks, minus the job's own.
2. *Window LP*: the aggregated model (``placement.aggregate``: one worker and one PS
   count per job, slot and domain) over slots t..t+window-1 with each job's remaining
   work as reported by the cluster, restricted to those domains.
3. *Rounding*: in every job-slot the option with the largest LP weight, its counts
   rounded from their conditional values (the deterministic member of the rounding
   family of ``solvers.rounding``; one trial is what a per-slot decision affords).
4. *Realise slot t* with the realiser's slot rules (``placement.realise``): the plan's
   placement normalised and fitted, kept unchanged when a change would not finish the job
   sooner despite its restart cost, trimmed when the job completes, and the capacity left
   filled shortest-remaining-work first.
"""
from __future__ import annotations

import logging
import time

import numpy as np

from placement.aggregate import formulate_aggregated
from placement.online.policy import TaskDict, View
from placement.packing import Residual
from placement.realise import decide_slot
from placement.solve import _most_likely
from solvers.lp import solve_lp
from solvers.result import Status
from solvers.rounding import plan_rounding

logger = logging.getLogger(__name__)


class LPRoundingPolicy:
    """Window LP + rounding + realise, re-optimised every slot (module docstring)."""

    name = "lp-rounding"

    def __init__(self, *, window: int = 4, local_candidates: int = 3, spread_candidates: int = 2,
                 time_limit: float | None = 5.0):
        if window < 1 or local_candidates < 0 or spread_candidates < 0:
            raise ValueError("window must be >= 1 and candidate counts >= 0")
        self.window, self.local_k, self.spread_k, self.time_limit = (
            window, local_candidates, spread_candidates, time_limit)
        self.last_timings: dict[str, float] = {}

    def decide(self, view: View) -> dict[str, TaskDict]:
        inst, t = view.instance, view.t
        intended = {}
        timings: dict[str, float] = {}
        if view.jobs:
            t0 = time.perf_counter()
            domains = self.candidate_domains(view)
            end = min(inst.horizon, t + max(1, min(self.window, view.lookahead)))
            remaining = {j: s.remaining for j, s in view.jobs.items()}
            problem, decoder = formulate_aggregated(inst, start=t, end=end, remaining=remaining, domains=domains)
            t1 = time.perf_counter()
            lp = solve_lp(problem, time_limit=self.time_limit)
            t2 = time.perf_counter()
            timings.update(candidates_formulate=t1 - t0, lp=t2 - t1)
            if lp.status is Status.OPTIMAL:
                x = _most_likely(plan_rounding(problem, lp.x), problem.n)
                intended = decoder.plan(x).slots[t]
            else:
                logger.warning("slot %d: window LP %s (%s); falling back to the slot rules alone",
                               t, lp.status.value, lp.message)
        t3 = time.perf_counter()
        placed = decide_slot(inst, view.tracker(), t, intended, fill=True)
        timings["realise"] = time.perf_counter() - t3
        self.last_timings = timings
        return placed

    def candidate_domains(self, view: View) -> dict[str, set[str]]:
        """Per job: current domain, best local machines, roomiest racks, root if needed."""
        inst = view.instance
        topo = inst.topology
        residual = Residual(inst)
        for state in view.jobs.values():
            if state.previous and residual.fits(state.job, state.previous):
                residual.place(state.job, state.previous)
        switches = [s.id for s in topo.switches]
        below = {s: residual.machines_below(s) for s in switches}
        index = topo.machine_index
        out: dict[str, set[str]] = {}
        for job_id, state in view.jobs.items():
            job = state.job
            held = residual.remove(job_id) if residual.held(job_id) else None
            room = residual.worker_room(job)
            chosen: set[str] = set()
            if state.previous:
                chosen.add(topo.lca(h for h, (w, s) in state.previous.items() if w or s))
            order = np.argsort(-room, kind="stable")
            chosen.update(topo.machines[h].id for h in order[: self.local_k] if room[h] >= job.min_workers)
            racks = sorted(((int(room[[index[h] for h in below[s]]].sum()), -len(below[s]), s)
                            for s in switches if len(below[s]) > 1), reverse=True)
            useful = [(r, s) for r, _, s in racks if r >= job.min_workers]
            smallest_first = sorted(useful, key=lambda item: (len(below[item[1]]), -item[0]))
            picked = smallest_first[: self.spread_k]
            chosen.update(s for _, s in picked)
            if not picked or max(r for r, _ in picked) < job.max_workers:
                chosen.add(topo.root_id)
            if held:
                residual.place(job, held)
            out[job_id] = chosen
        return out
