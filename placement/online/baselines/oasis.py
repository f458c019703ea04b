"""OASiS: online admission and scheduling by a primal-dual method with resource prices."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement.model import limits
from placement.model.instance import COMPLETE, TOL_FIT, Instance, Job
from placement.online.baselines._common import (arrival_order, cannot_finish_by, fastest_type, local_time,
                                                workers)
from placement.online.policy import TaskDict, View
from placement.slots.residual import Residual
from placement.model.progress import per_worker_seconds


@dataclass(frozen=True)
class Offer:
    """The best schedule found for one job: its tasks per slot, utility and cost."""

    plan: dict[int, TaskDict]
    utility: float
    cost: float

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


@dataclass(frozen=True)
class PriceTerms:
    """One job's terms of OASiS' price constants (rule 2), in normalised units:
    ``top[r]`` = f_j(earliest completion) / alpha_j^r (0 if the job holds no r), its term
    of U^r; ``least`` = f_j(T_j - 1) / demand_j, its term of L's minimum; ``share`` =
    demand_j / window slots, its term of 1/mu before the division by the cluster's
    capacity. ``least`` and ``share`` are None for a job with no work left (demand 0)."""

    top: tuple[float, ...]
    least: float | None
    share: float | None


class OASiS:
    """OASiS (Bao, Peng, Wu and Li, "Online Job Scheduling in Distributed Machine Learning
    Clusters", INFOCOM 2018, arXiv:1801.00936): each job is admitted or rejected at its
    arrival, and an admitted job's whole schedule (workers and PSs per slot) is fixed then.
    The paper's objective, and so the way to score it, is the total utility of the
    admitted jobs, sum_i f_i(completion of i); a rejected job never runs (``rejected``,
    ``utility``: what the simulator reports beside the JCTs).

    Rules, for a job arriving in slot t:

    1. Window and utility. The job is planned over slots t .. T_j - 1 with
       T_j = t + n_j + lookahead, n_j the slots it needs alone at ``min_workers`` at its
       slowest per-batch time, restart included (and the lookahead as room to wait), so
       every job could complete inside its window. Utility of completing in slot c:
       f_j(c) = weight x (T_j - c) x slot_seconds: positive, falling linearly with the
       JCT at the job's weight (the paper's f_i is any non-increasing function of the
       completion time), so maximising the admitted utility minimises their weighted JCT.
       T_j is fixed at the job's first plan: ``utility(j, c)`` is f_j(c).
    2. Prices, as the paper states them (Section IV-B, its price function and the two
       constants; restated here from arXiv:1801.00936, whose text could not be checked
       in this workspace, so no equation numbers are given):

       - p_h^r(t) = L (U^r / L) ** (g_h^r(t) / c_h^r), g_h^r(t) the amount of type-r
         resource already allocated on server h in slot t and c_h^r its capacity: L when
         idle, U^r when full.
       - U^r = max_i f_i(earliest completion of i) / alpha_i^r: "the maximum
         per-unit-resource job utility" of r, a job's largest utility (at its smallest
         completion time, all N_i workers) over one worker's demand alpha_i^r. At full
         use any schedule holding r there costs at least its utility, so none is admitted.
       - L = 1/(2 mu) x min_i f_i(T - a_i) / (ceil(E_i K_i (tau_i + 2 e_i / b_e))
         x sum_r (alpha_i^r + beta_i^r)): the least utility per unit of resource of any
         job (at its latest completion T, over its whole demand: its worker-slots times a
         worker's and a PS's demand), with the scaling factor mu chosen so that
         1/mu <= ceil(...) sum_r (alpha_i^r + beta_i^r) / (T sum_h sum_r c_h^r) for every
         i: the initial dual objective sum_t sum_h sum_r c_h^r L is then at most half of
         any job's utility, the 2 of the paper's 2 alpha competitive ratio
         (alpha = max_r (1, ln(U^r / L))).

       Mapping to this model (quantities the paper has and ours does not, or differently):
       every resource is normalised by C_r, the largest machine capacity of r, so that
       the sums over r add like quantities (prices are per normalised unit); f_i is f_j
       of rule 1, T - a_i its latest completion slot T_j - 1 (f = weight x slot_seconds)
       and the smallest completion time the job alone at ``max_workers`` at its fastest
       per-batch time, restart included; alpha_i^r is ``worker[r] / C_r`` (``ps[r] / C_r``
       for a resource only its PSs use), beta_i^r is ``ps[r] / C_r``; the worker-slots
       ceil(E_i K_i (tau_i + 2 e_i / b_e)) are ceil(remaining batches x fastest
       per-batch time / slot_seconds) (OASiS has one per-batch time, ours depends on the
       placement); T sum_h sum_r c_h^r is the job's window on the current cluster,
       (T_j - t) x sum_h sum_r c_hr / C_r, and mu is the smallest the condition allows;
       the jobs i of the paper (all known to its analysis) are the jobs seen so far in
       this run, each one's terms fixed when it is first seen, so U^r only rises and L
       only falls as jobs arrive (constants given to the constructor override both).
       Links are not priced (the paper's model has none); the Residuals respect them.
       The previous version deviated in four ways, fixed here: U^r's utility was the
       job's utility if it completed in its arrival slot (unreachable for a job longer
       than a slot) over its whole run's least use of r (worker-slots x demand) instead
       of one worker's demand; L had no mu (so an idle cluster's dual was not bounded)
       and divided by the least use per resource rather than the paper's worker and PS
       demand; and both were recomputed at every arrival from the active jobs only.
    3. Dual subroutine (the job's best schedule at these prices), simplified to plans with
       a constant worker count W in [min_workers, max_workers] run in consecutive slots
       from a start slot s until the job completes: in each slot the job keeps the
       previous slot's task set if it fits there (no restart), else takes the cheapest
       machine that holds all W workers and ``min_ps(W)`` PSs, else the smallest subtree
       (``Residual.spread``). Progress follows MODEL.md 4, restarts included. Over every
       (W, s) that completes inside the window, the plan with the largest utility minus
       cost is chosen (ties: earlier completion, fewer workers). Commitments beyond the
       View's own horizon are fine: the scheduler's ``reserved(t)`` covers any slot.
    4. Admission: the job is admitted iff that payoff is > 0; a rejected job never runs.
       An admitted job that needs a new plan (``commit`` docstring) keeps its admission.
       :class:`OASiSAdmitAll` skips this test (same prices and subroutine).
    5. GPU types (MODEL.md 8; OASiS has none): rule 3 takes the cheapest machine of the fastest
       type with one free, else the Residual's spread (one type, the fastest).

    ``commit(view, job_id, reserved)`` returns the admitted plan (empty if rejected).
    ``decide(view)`` is the re-planning fallback of the per-slot mode: it plans each new
    job (and a job whose plan ran out before it completed) against its own earlier
    commitments, releases the commitments of jobs that completed early, and executes the
    plans of slot ``view.t``; a plan that uses a machine the cluster lost is redone.
    ``state()`` / ``load_state()`` checkpoint the plans, rejections, windows and price
    terms (plain JSON), so that a resumed scheduler decides as an uninterrupted one.
    """

    #: False: rule 4's admission test; True (OASiSAdmitAll): every job gets its best plan.
    admit_all = False
    name = "oasis"

    def __init__(self, L: float | None = None, U: float | None = None):
        self.L = L
        self.U = U
        self._plans: dict[str, dict[int, TaskDict]] = {}
        self._rejected: set[str] = set()
        self._ends: dict[str, tuple[int, float]] = {}   # job -> (T_j, weight x slot_seconds)
        self._terms: dict[str, PriceTerms] = {}          # job -> its terms of rule 2
        self._slots: dict[int, Residual] = {}       # cache: slots charged with the plans
        self._topology = None                        # the cluster the cache was built on
        self._last_t: int | None = None

    # ----- what the paper scores ----------------------------------------------------------
    @property
    def rejected(self) -> frozenset[str]:
        """Jobs rejected in this run, so never run: at arrival (rule 4), or (rare) admitted
        but impossible to re-plan in four times their window. The simulator reports the
        acceptance rate and the admitted jobs' metrics from it."""
        return frozenset(self._rejected)

    def utility(self, job_id: str, completion_slot: int) -> float | None:
        """f_j(completion_slot) of rule 1 with the window fixed at the job's first plan
        (None for a job never planned): the paper's objective sums it over admitted jobs."""
        if job_id not in self._ends:
            return None
        end, unit = self._ends[job_id]
        return unit * (end - completion_slot)

    # ----- admission at arrival ---------------------------------------------------------------
    def commit(self, view: View, job_id: str, reserved: Callable[[int], Residual]
               ) -> dict[int, TaskDict]:
        """Tasks of ``job_id`` per slot t >= view.t, or {} if it is rejected (rule 4).

        A job that has already run, or was admitted earlier, is re-planned without the
        admission test: its plan ran out (the cluster lagged the model) or a machine it
        used failed. Its window is doubled (up to three times) if it cannot finish in it;
        so is the window of a new job under ``admit_all`` that cannot finish in its own."""
        state = view.jobs[job_id]
        if job_id not in self._ends and state.last_ran is None and state.done <= 0:
            end = self.window_end(view, job_id)
            self._ends[job_id] = (end, state.job.weight * view.instance.slot_seconds)
            offer = self.offer(view, job_id, reserved, end=end)
            if offer is not None and (offer.payoff > 0 or self.admit_all):
                return offer.plan
            if not self.admit_all:
                self._rejected.add(job_id)
                return {}
        span = self.window_end(view, job_id) - view.t
        for grow in range(3):
            offer = self.offer(view, job_id, reserved, end=view.t + span * 2 ** grow)
            if offer is not None:
                return offer.plan
        if self.admit_all:
            return {view.t: {}}  # wait this slot and be committed again next slot: never rejected
        self._rejected.add(job_id)  # an empty commitment is a rejection (OnlineScheduler)
        return {}

    def offer(self, view: View, job_id: str, reserved: Callable[[int], Residual],
              end: int | None = None) -> Offer | None:
        """The best plan at the current prices (rule 3), admitted or not, over the slots
        before ``end`` (default: the window of rule 1); None if the job cannot complete
        inside it at all."""
        state = view.jobs[job_id]
        job = state.job
        inst = view.instance
        t0 = view.t
        end = self.window_end(view, job_id) if end is None else end
        end = min(end, t0 + limits.value(limits.HORIZON))  # a window is a horizon: bounded (docs/limits.md)
        if cannot_finish_by(view, job, end):  # before building up to that many slots for nothing
            return None
        slots = [reserved(tau) for tau in range(t0, end)]
        scale = self.scale(slots[0])
        low, high = self.bounds(view, scale)
        prices = [self.prices(res, low, high) for res in slots]
        need_work = state.remaining * COMPLETE
        best: tuple[tuple[float, int, int], Offer] | None = None
        for w in range(job.min_workers, job.max_workers + 1):
            tasks, cost, full, fresh, changed = self._chain(inst, job, w, slots, prices, scale)
            step = np.where(changed, fresh, full)
            usable = np.array([x is not None for x in tasks])
            for s in np.flatnonzero(usable):
                stop = s + int(np.argmin(usable[s:])) if not usable[s:].all() else len(tasks)
                done = np.cumsum(step[s:stop]) - step[s] + fresh[s]
                hit = np.flatnonzero(done >= need_work)
                if len(hit) == 0:
                    continue
                c = s + int(hit[0])
                utility = float(job.weight * (end - (t0 + c)) * inst.slot_seconds)
                spent = float(cost[s:c + 1].sum())
                key = (utility - spent, -c, -w)
                if best is None or key > best[0]:  # the plan is built for the best only
                    best = (key, Offer({t0 + k: dict(tasks[k]) for k in range(s, c + 1)},
                                       utility, spent))
        return best[1] if best is not None else None

    @staticmethod
    def scale(res: Residual) -> np.ndarray:
        """C_r: the largest machine capacity of each resource (1 where no machine has r),
        the unit every price and demand is normalised to."""
        top = res.cap.max(axis=0)
        return np.where(top > 0, top, 1.0)

    @staticmethod
    def _slots_needed(view: View, job: Job, workers: int, theta: float) -> int:
        """Slots to finish the job's remaining work with ``workers`` workers at ``theta``
        seconds per batch, the restart charged in the first slot (MODEL.md 4)."""
        delta = view.instance.slot_seconds
        per_slot = workers * delta / theta
        first = workers * max(0.0, delta - job.restart_seconds) / theta
        remaining = view.jobs[job.id].remaining
        return 1 + math.ceil(max(0.0, remaining - first) / per_slot - 1e-9)

    @staticmethod
    def window_end(view: View, job_id: str) -> int:
        """T_j of rule 1: t + the slots the job needs alone at min_workers and its slowest
        per-batch time (restart included) + the lookahead."""
        job, inst = view.jobs[job_id].job, view.instance
        if job.speed is not None:  # the slower class at min_workers, of its slowest type (MODEL.md 8)
            slowest = job.min_workers / min(job.speed.rate(job.min_workers, c, g) for c in (1, 2)
                                            for g in inst.topology.gpu_types if job.runs_on(g))
        else:
            slowest = max(job.batch_time(job.worker_gbps),
                          job.batch_time(min(m.local_gbps for m in inst.topology.machines)))
        return view.t + OASiS._slots_needed(view, job, job.min_workers, slowest) + view.lookahead

    @staticmethod
    def earliest_completion(view: View, job_id: str) -> int:
        """The paper's smallest completion time: the slot in which the job would complete
        alone at max_workers at its fastest per-batch time, restart included."""
        job = view.jobs[job_id].job
        return view.t + OASiS._slots_needed(view, job, job.max_workers,
                                            local_time(view.instance, job)) - 1

    def price_terms(self, view: View, job_id: str, scale: np.ndarray) -> PriceTerms:
        """Job ``job_id``'s terms of rule 2 at ``view`` (normalised by ``scale`` = C_r)."""
        state = view.jobs[job_id]
        job, inst = state.job, view.instance
        delta = inst.slot_seconds
        alpha = np.array([job.worker.get(r, 0.0) for r in inst.resources]) / scale
        beta = np.array([job.ps.get(r, 0.0) for r in inst.resources]) / scale
        end = self.window_end(view, job_id)
        most = job.weight * (end - self.earliest_completion(view, job_id)) * delta
        one = np.where(alpha > 0, alpha, beta)            # alpha_i^r (a PS's for PS-only r)
        top = np.where(one > 0, most / np.where(one > 0, one, 1.0), 0.0)
        worker_slots = math.ceil(state.remaining * local_time(inst, job) / delta - 1e-9)
        demand = worker_slots * float((alpha + beta).sum())
        if demand <= 0:
            return PriceTerms(tuple(float(x) for x in top), None, None)
        least = job.weight * delta / demand               # f_j(T_j - 1) / demand
        return PriceTerms(tuple(float(x) for x in top), least, demand / (end - view.t))

    def bounds(self, view: View, scale: np.ndarray) -> tuple[float, np.ndarray]:
        """(L, U_r) of rule 2 over every job seen so far (or the constants given to the
        constructor); a job's terms are fixed the first time a view shows it."""
        for j in view.jobs:
            if j not in self._terms:
                self._terms[j] = self.price_terms(view, j, scale)
        terms = self._terms.values()
        least = [t.least for t in terms if t.least is not None]
        share = [t.share for t in terms if t.share is not None]
        capacity = float((view.instance.capacity_matrix / scale).sum())  # sum_h sum_r c/C_r
        if self.L is not None:
            low = float(self.L)
        elif least and capacity > 0:
            low = min(least) * (min(share) / capacity) / 2        # 1/(2 mu) x min f / demand
        else:
            low = 1.0
        if self.U is not None:
            high = np.full(len(scale), float(self.U))
        else:
            tops = np.array([t.top for t in terms], dtype=float).reshape(-1, len(scale))
            high = tops.max(axis=0, initial=0.0)
            high = np.where(high > 0, high, low)   # a resource no job uses keeps the price L
        return low, np.maximum(high, low)

    @staticmethod
    def prices(res: Residual, low: float, high: np.ndarray) -> np.ndarray:
        """Price per normalised unit of each resource on each machine (machines x resources)."""
        cap = np.where(res.cap > 0, res.cap, 1.0)
        used = np.clip((res.cap - res.free) / cap, 0.0, 1.0)
        return low * (high / low)[None, :] ** used

    @staticmethod
    def _chain(inst: Instance, job: Job, w: int, slots: list[Residual], prices: list[np.ndarray],
               scale: np.ndarray) -> tuple[list[TaskDict | None], np.ndarray, np.ndarray,
                                           np.ndarray, np.ndarray]:
        """Per slot of the window: the task set of ``w`` workers (the previous slot's if it
        fits, else the cheapest; None where none fits), its cost, the batches it does
        without and with a restart, and whether it differs from the previous slot's."""
        alpha, beta = slots[0].demand(job)
        need = w * alpha + job.min_ps(w) * beta
        index = inst.topology.machine_index
        n = len(slots)
        tasks: list[TaskDict | None] = [None] * n
        cost, full, fresh = np.zeros(n), np.zeros(n), np.zeros(n)
        changed = np.ones(n, dtype=bool)
        prev: TaskDict | None = None
        for k, (res, price) in enumerate(zip(slots, prices)):
            if prev is not None and OASiS._fits(res, job, prev, need, index):
                changed[k] = False
            else:
                prev = OASiS._cheapest(res, job, w, need, price, scale)
                if prev is None:
                    continue
                hs = np.array([index[h] for h in prev])
                units = np.array([x * alpha + s * beta for x, s in prev.values()]) / scale
                theta = per_worker_seconds(inst, job, prev)
                rate = w * inst.slot_seconds / theta
                lost = w * max(0.0, inst.slot_seconds - job.restart_seconds) / theta
            tasks[k] = prev
            cost[k] = float((units * price[hs]).sum())
            full[k], fresh[k] = rate, lost
        return tasks, cost, full, fresh, changed

    @staticmethod
    def _fits(res: Residual, job: Job, tasks: TaskDict, need: np.ndarray,
              index: dict[str, int]) -> bool:
        """``Residual.fits``, with a vectorised shortcut for a local task set (no links)."""
        if len(tasks) == 1:
            return bool((need <= res.free[index[next(iter(tasks))]] + TOL_FIT).all())
        return res.fits(job, tasks)

    @staticmethod
    def _cheapest(res: Residual, job: Job, w: int, need: np.ndarray, price: np.ndarray,
                  scale: np.ndarray) -> TaskDict | None:
        ok = fastest_type(res, job, w, (need <= res.free + TOL_FIT).all(axis=1))  # rule 5
        if ok.any():
            cost = np.where(ok, price @ (need / scale), np.inf)
            return {res.machine_ids[int(np.argmin(cost))]: (w, job.min_ps(w))}
        return res.spread(job, w)

    # ----- per-slot mode --------------------------------------------------------------------
    def decide(self, view: View) -> dict[str, TaskDict]:
        t = view.t
        if self._last_t is not None and t <= self._last_t:  # a new run: forget the old one
            self._plans.clear()
            self._rejected.clear()
            self._ends.clear()
            self._terms.clear()
            self._slots.clear()
        self._last_t = t
        topology = view.instance.topology
        if topology is not self._topology:  # the cluster changed: re-plan what it broke
            self._slots.clear()
            self._topology = topology
            for j, plan in list(self._plans.items()):
                if any(h not in topology.machine_index for tasks in plan.values() for h in tasks):
                    del self._plans[j]
        for j in [j for j in self._plans if j not in view.jobs]:
            self._release(j)
        for tau in [tau for tau in self._slots if tau < t]:
            del self._slots[tau]
        order = arrival_order(view)
        for j in order:
            plan = self._plans.get(j)
            if j in self._rejected or (plan and max(plan) >= t):
                continue
            if plan is not None:
                self._release(j)
            plan = self.commit(view, j, lambda tau: self._reserved(view, tau))
            if not plan:
                if not self.admit_all:  # for good; admit-all tries again next slot
                    self._rejected.add(j)
                continue
            for tau, tasks in plan.items():
                self._reserved(view, tau).place(view.jobs[j].job, tasks)
            self._plans[j] = plan
        res = view.residual()
        out: dict[str, TaskDict] = {}
        for j in order:
            tasks = self._plans.get(j, {}).get(t)
            if workers(tasks) and res.fits(view.jobs[j].job, tasks):
                res.place(view.jobs[j].job, tasks)
                out[j] = dict(tasks)
        return out

    def _reserved(self, view: View, tau: int) -> Residual:
        """Slot ``tau`` charged with this policy's own plans (built on first use)."""
        if tau not in self._slots:
            res = view.residual()
            for j, plan in self._plans.items():
                if tau in plan and j in view.jobs and res.fits(view.jobs[j].job, plan[tau]):
                    res.place(view.jobs[j].job, plan[tau])
            self._slots[tau] = res
        return self._slots[tau]

    def _release(self, job_id: str) -> None:
        for tau in self._plans.pop(job_id, {}):
            if tau in self._slots:
                self._slots[tau].remove(job_id)

    # ----- checkpoint ---------------------------------------------------------------------------
    def state(self) -> dict:
        """Plans, rejections, windows, price terms and the last slot seen, as plain JSON."""
        return {"last_t": self._last_t, "rejected": sorted(self._rejected),
                "plans": {j: {str(tau): [[h, w, s] for h, (w, s) in tasks.items()]
                              for tau, tasks in plan.items()} for j, plan in self._plans.items()},
                "ends": {j: [end, unit] for j, (end, unit) in self._ends.items()},
                "terms": {j: [list(x.top), x.least, x.share] for j, x in self._terms.items()}}

    def load_state(self, state: dict) -> None:
        self._last_t = state["last_t"]
        self._rejected = set(state["rejected"])
        self._plans = {j: {int(tau): {h: (int(w), int(s)) for h, w, s in rows}
                           for tau, rows in plan.items()} for j, plan in state["plans"].items()}
        self._ends = {j: (int(end), float(unit)) for j, (end, unit) in state.get("ends", {}).items()}
        self._terms = {j: PriceTerms(tuple(map(float, top)), least, share)
                       for j, (top, least, share) in state.get("terms", {}).items()}
        self._slots.clear()


class OASiSAdmitAll(OASiS):
    """OASiS without its admission test, so that its JCTs compare with policies that run
    every job: the same prices (rule 2, same constants) and dual subroutine (rule 3), and
    every job gets its best plan even when its payoff is <= 0 (rule 4 skipped). A new job
    that cannot complete inside its window is planned over a window doubled up to three
    times; if even that fails it is planned again next slot, never rejected."""

    name = "oasis-admit-all"
    admit_all = True
