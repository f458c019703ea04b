"""OASiS: online admission and scheduling by a primal-dual method with resource prices."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement.instance import Instance, Job
from placement.online.baselines._common import arrival_order, local_time, unit_demand, workers
from placement.online.policy import TaskDict, View
from placement.packing import TOL_FIT, Residual
from placement.progress import batch_time


@dataclass(frozen=True)
class Offer:
    """The best schedule found for one job: its tasks per slot, utility and cost."""

    plan: dict[int, TaskDict]
    utility: float
    cost: float

    @property
    def payoff(self) -> float:
        return self.utility - self.cost


class OASiS:
    """OASiS (Bao, Peng, Wu and Li, "Online Job Scheduling in Distributed Machine Learning
    Clusters", INFOCOM 2018): each job is admitted or rejected at its arrival, and an
    admitted job's whole schedule (workers and PSs per slot) is fixed then.

    Rules, for a job arriving in slot t:

    1. Window and utility. The job is planned over slots t .. T_j - 1 with
       T_j = t + n_j + lookahead, n_j the slots it needs alone at ``min_workers`` at its
       slowest per-batch time, restart included (and the lookahead as room to wait), so
       every job could complete inside its window. Utility of completing in slot c:
       f_j(c) = weight x (T_j - c) x slot_seconds: positive, falling linearly with the
       JCT at the job's weight, so maximising the admitted utility minimises their
       weighted JCT.
    2. Prices (the paper's exponential price function): resource r on machine h in slot
       tau costs, per unit of r normalised by C_r (the largest machine capacity of r),
       p = L x (U_r / L) ** (g / c_hr), where g is what earlier commitments hold of r on h
       in tau and c_hr the capacity. Constants from the active jobs' utility bounds
       (recomputed at each arrival unless given): with n_k = remaining batches x local
       batch time / slot_seconds (the fewest worker-slots job k needs) and
       D_kr = n_k x (alpha_kr + kappa_k beta_kr) / C_r its least use of r,
       U_r = max_k f_k(t) / D_kr (at full use, r costs more than any job can pay) and
       L = min_k f_k(T_k-1) / (2 sum_r D_kr) (when idle, any job pays at most about half
       its least utility, so an idle cluster admits every job). Links are not priced;
       they are respected through the Residuals.
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

    ``commit(view, job_id, reserved)`` returns the admitted plan (empty if rejected).
    ``decide(view)`` is the re-planning fallback of the per-slot mode: it plans each new
    job (and a job whose plan ran out before it completed) against its own earlier
    commitments, releases the commitments of jobs that completed early, and executes the
    plans of slot ``view.t``; a plan that uses a machine the cluster lost is redone.
    ``state()`` / ``load_state()`` checkpoint the plans and rejections (plain JSON), so
    that a resumed scheduler decides as an uninterrupted one.
    """

    name = "oasis"

    def __init__(self, L: float | None = None, U: float | None = None):
        self.L = L
        self.U = U
        self._plans: dict[str, dict[int, TaskDict]] = {}
        self._rejected: set[str] = set()
        self._slots: dict[int, Residual] = {}       # cache: slots charged with the plans
        self._topology = None                        # the cluster the cache was built on
        self._last_t: int | None = None

    # ----- admission at arrival ---------------------------------------------------------------
    def commit(self, view: View, job_id: str, reserved: Callable[[int], Residual]
               ) -> dict[int, TaskDict]:
        """Tasks of ``job_id`` per slot t >= view.t, or {} if it is rejected (rule 4).

        A job that has already run was admitted earlier: its plan ran out (the cluster
        lagged the model) or a machine it used failed, so it is re-planned without the
        admission test, its window doubled (up to three times) if it cannot finish in it."""
        state = view.jobs[job_id]
        if state.last_ran is None and state.done <= 0:
            offer = self.offer(view, job_id, reserved)
            return offer.plan if offer is not None and offer.payoff > 0 else {}
        span = self.window_end(view, job_id) - view.t
        for grow in range(3):
            offer = self.offer(view, job_id, reserved, end=view.t + span * 2 ** grow)
            if offer is not None:
                return offer.plan
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
        slots = [reserved(tau) for tau in range(t0, end)]
        scale = np.where(slots[0].cap.max(axis=0) > 0, slots[0].cap.max(axis=0), 1.0)
        low, high = self.bounds(view, scale)
        prices = [self.prices(res, low, high) for res in slots]
        need_work = state.remaining * (1 - 1e-9)
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
                utility = job.weight * (end - (t0 + c)) * inst.slot_seconds
                offer = Offer({t0 + k: dict(tasks[k]) for k in range(s, c + 1)}, utility,
                              float(cost[s:c + 1].sum()))
                key = (offer.payoff, -c, -w)
                if best is None or key > best[0]:
                    best = (key, offer)
        return best[1] if best is not None else None

    @staticmethod
    def window_end(view: View, job_id: str) -> int:
        """T_j of rule 1: t + the slots the job needs alone at min_workers and its slowest
        per-batch time (restart included) + the lookahead."""
        state = view.jobs[job_id]
        job, inst = state.job, view.instance
        slowest = max(job.batch_time(job.worker_gbps),
                      job.batch_time(min(m.local_gbps for m in inst.topology.machines)))
        per_slot = job.min_workers * inst.slot_seconds / slowest
        first = job.min_workers * max(0.0, inst.slot_seconds - job.restart_seconds) / slowest
        need = 1 + math.ceil(max(0.0, state.remaining - first) / per_slot - 1e-9)
        return view.t + need + view.lookahead

    def bounds(self, view: View, scale: np.ndarray) -> tuple[float, np.ndarray]:
        """(L, U_r) of rule 2 (or the constants given to the constructor)."""
        inst = view.instance
        delta = inst.slot_seconds
        res = view.residual()
        lows, highs = [], []
        for j, state in view.jobs.items():
            job = state.job
            n = state.remaining * local_time(inst, job) / delta
            use = n * unit_demand(res, job) / scale
            if n <= 0 or use.sum() <= 0:
                continue
            lows.append(job.weight * delta / (2 * use.sum()))
            top = job.weight * (self.window_end(view, j) - view.t) * delta
            highs.append(np.where(use > 0, top / np.where(use > 0, use, 1.0), 0.0))
        low = self.L if self.L is not None else (min(lows) if lows else 1.0)
        if self.U is not None:
            high = np.full(len(scale), float(self.U))
        else:
            high = np.max(highs, axis=0) if highs else np.full(len(scale), low)
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
                theta = batch_time(inst, job, prev)
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
        ok = (need <= res.free + TOL_FIT).all(axis=1)
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
        """Plans, rejections and the last slot seen, as plain JSON."""
        return {"last_t": self._last_t, "rejected": sorted(self._rejected),
                "plans": {j: {str(tau): [[h, w, s] for h, (w, s) in tasks.items()]
                              for tau, tasks in plan.items()} for j, plan in self._plans.items()}}

    def load_state(self, state: dict) -> None:
        self._last_t = state["last_t"]
        self._rejected = set(state["rejected"])
        self._plans = {j: {int(tau): {h: (int(w), int(s)) for h, w, s in rows}
                           for tau, rows in plan.items()} for j, plan in state["plans"].items()}
        self._slots.clear()
