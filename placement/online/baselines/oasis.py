"""OASiS: online admission and scheduling by a primal-dual method with resource prices."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from placement.instance import Job
from placement.online.baselines._common import arrival_order, local_time, unit_demand, workers
from placement.online.policy import TaskDict, View
from placement.packing import TOL_FIT, Residual
from placement.progress import canonical, slot_batches


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

    Rules, for a job arriving in slot t with the window t .. T-1 (T = ``view.instance.horizon``):

    1. Utility of completing in slot c: f(c) = weight x (T - c) x slot_seconds, i.e.
       weight x (the window's length from arrival - JCT + one slot): positive, falling
       linearly with the JCT, so maximising the admitted utility minimises their weighted
       JCT.
    2. Prices (the paper's exponential price function): resource r on machine h in slot
       tau costs, per unit of r normalised by C_r (the largest machine capacity of r),
       p = L x (U_r / L) ** (g / c_hr), where g is what earlier commitments hold of r on h
       in tau and c_hr the capacity. Constants from the active jobs' utility bounds
       (recomputed at each arrival unless given): with n_k = remaining batches x local
       batch time / slot_seconds (the fewest worker-slots job k needs) and
       D_kr = n_k x (alpha_kr + kappa_k beta_kr) / C_r its least use of r,
       U_r = max_k f_k(t) / D_kr (at full use, r costs more than any job can pay) and
       L = min_k f_k(T-1) / (2 sum_r D_kr) (when idle, any job pays at most half its
       least utility: the paper's 1/(2 mu) with mu = 1). Links are not priced; they are
       respected through the Residuals.
    3. Dual subroutine (the job's best schedule at these prices), simplified to plans with
       a constant worker count W in [min_workers, max_workers] run in consecutive slots
       from a start slot s until the job completes: in each slot the job keeps the
       previous slot's task set if it fits there (no restart), else takes the cheapest
       machine that holds all W workers and ``min_ps(W)`` PSs, else the smallest subtree
       (``Residual.spread``). Progress follows MODEL.md 4, restarts included. Over every
       (W, s) that completes inside the window, the plan with the largest utility minus
       cost is chosen (ties: earlier completion, fewer workers).
    4. Admission: the job is admitted iff that payoff is > 0; a rejected job never runs.

    ``commit(view, job_id, reserved)`` returns the admitted plan (empty if rejected).
    ``decide(view)`` is the re-planning fallback of the per-slot mode: it plans each new
    job (and a job whose plan ran out before it completed) against its own earlier
    commitments, releases the commitments of jobs that completed early, and executes the
    plans of slot ``view.t``.
    """

    name = "oasis"

    def __init__(self, L: float | None = None, U: float | None = None):
        self.L = L
        self.U = U
        self._plans: dict[str, dict[int, TaskDict]] = {}
        self._rejected: set[str] = set()
        self._slots: dict[int, Residual] = {}
        self._last_t: int | None = None

    # ----- admission at arrival ---------------------------------------------------------------
    def commit(self, view: View, job_id: str, reserved: Callable[[int], Residual]
               ) -> dict[int, TaskDict]:
        """Tasks of ``job_id`` per slot t >= view.t, or {} if it is rejected (rule 4)."""
        offer = self.offer(view, job_id, reserved)
        return offer.plan if offer is not None and offer.payoff > 0 else {}

    def offer(self, view: View, job_id: str, reserved: Callable[[int], Residual]) -> Offer | None:
        """The best plan at the current prices (rule 3), admitted or not; None if the job
        cannot complete inside the window at all."""
        state = view.jobs[job_id]
        job = state.job
        inst = view.instance
        t0, end = view.t, inst.horizon
        if end <= t0 or state.remaining <= 0:
            return None
        slots = [reserved(tau) for tau in range(t0, end)]
        scale = np.where(slots[0].cap.max(axis=0) > 0, slots[0].cap.max(axis=0), 1.0)
        low, high = self.bounds(view, scale)
        prices = [self.prices(res, low, high) for res in slots]
        need_work = state.remaining * (1 - 1e-9)
        best: tuple[tuple[float, int, int], Offer] | None = None
        for w in range(job.min_workers, job.max_workers + 1):
            chain = self._chain(job, w, slots, prices, scale)
            full = np.array([slot_batches(inst, job, x, x) if x else 0.0 for x, _ in chain])
            fresh = np.array([slot_batches(inst, job, x, None) if x else 0.0 for x, _ in chain])
            cost = np.array([c for _, c in chain])
            changed = np.array([k == 0 or canonical(chain[k][0] or {}) != canonical(chain[k - 1][0] or {})
                                for k in range(len(chain))])
            step = np.where(changed, fresh, full)
            usable = np.array([x is not None for x, _ in chain])
            for s in np.flatnonzero(usable):
                stop = s + int(np.argmin(usable[s:])) if not usable[s:].all() else len(chain)
                done = np.cumsum(step[s:stop]) - step[s] + fresh[s]
                hit = np.flatnonzero(done >= need_work)
                if len(hit) == 0:
                    continue
                c = s + int(hit[0])
                utility = job.weight * (end - (t0 + c)) * inst.slot_seconds
                offer = Offer({t0 + k: dict(chain[k][0]) for k in range(s, c + 1)}, utility,
                              float(cost[s:c + 1].sum()))
                key = (offer.payoff, -c, -w)
                if best is None or key > best[0]:
                    best = (key, offer)
        return best[1] if best is not None else None

    def bounds(self, view: View, scale: np.ndarray) -> tuple[float, np.ndarray]:
        """(L, U_r) of rule 2 (or the constants given to the constructor)."""
        inst = view.instance
        end, delta = inst.horizon, inst.slot_seconds
        res = view.residual()
        lows, highs = [], []
        for state in view.jobs.values():
            job = state.job
            n = state.remaining * local_time(inst, job) / delta
            use = n * unit_demand(res, job) / scale
            if n <= 0 or use.sum() <= 0:
                continue
            lows.append(job.weight * delta / (2 * use.sum()))
            top = job.weight * (end - view.t) * delta
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
    def _chain(job: Job, w: int, slots: list[Residual], prices: list[np.ndarray],
               scale: np.ndarray) -> list[tuple[TaskDict | None, float]]:
        """Per slot of the window, the task set of ``w`` workers (sticky, else cheapest) and
        its cost; (None, 0) where ``w`` workers do not fit."""
        alpha, beta = slots[0].demand(job)
        ps = job.min_ps(w)
        need = w * alpha + ps * beta
        out: list[tuple[TaskDict | None, float]] = []
        prev: TaskDict | None = None
        for res, price in zip(slots, prices):
            if prev is None or not res.fits(job, prev):
                prev = OASiS._cheapest(res, job, w, need, price, scale)
            if prev is None:
                out.append((None, 0.0))
                continue
            index = res.instance.topology.machine_index
            cost = sum(float(((x * alpha + s * beta) / scale) @ price[index[h]])
                       for h, (x, s) in prev.items())
            out.append((prev, cost))
        return out

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
        for j in [j for j in self._plans if j not in view.jobs]:
            self._release(j)
        for tau in [tau for tau in self._slots if tau < t]:
            del self._slots[tau]

        def reserved(tau: int) -> Residual:
            if tau not in self._slots:
                self._slots[tau] = Residual(view.instance)
            return self._slots[tau]

        order = arrival_order(view)
        for j in order:
            plan = self._plans.get(j)
            if j in self._rejected or (plan and max(plan) >= t):
                continue
            if plan is not None:
                self._release(j)
            plan = self.commit(view, j, reserved)
            if not plan:
                self._rejected.add(j)
                continue
            self._plans[j] = plan
            for tau, tasks in plan.items():
                reserved(tau).place(view.jobs[j].job, tasks)
        res = view.residual()
        out: dict[str, TaskDict] = {}
        for j in order:
            tasks = self._plans.get(j, {}).get(t)
            if workers(tasks) and res.fits(view.jobs[j].job, tasks):
                res.place(view.jobs[j].job, tasks)
                out[j] = dict(tasks)
        return out

    def _release(self, job_id: str) -> None:
        for tau in self._plans.pop(job_id, {}):
            if tau in self._slots:
                self._slots[tau].remove(job_id)
