"""Gavel: heterogeneity-aware time fractions per GPU type from an LP, realised in rounds."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from placement.model.instance import TOL_FIT, Job
from placement.model.progress import gpu_types
from placement.online.baselines._common import by_workers, keep_previous, workers
from placement.online.policy import JobState, TaskDict, View
from placement.slots.residual import Residual
from solvers.lp import solve_lp
from solvers.problem import Problem

__all__ = ["OBJECTIVES", "Gavel", "Offer", "allocation"]

logger = logging.getLogger(__name__)

#: the allocation LPs: the Sia arena's configured Gavel first (the default), then the paper's LAS
OBJECTIVES = ("max-sum-throughput", "max-min-fairness")

GpuType = str | None  # a machine's gpu_type; None: untyped (docs/model.md, 'GPU types')


@dataclass(frozen=True)
class Offer:
    """A job as Gavel sees it: its gang (the scale factor), what the gang takes, and its
    throughput on each GPU type (0 where it cannot run)."""

    workers: int
    need: np.ndarray    # the gang's demand over the resources: workers and their PSs
    rates: np.ndarray   # per GPU type (``Topology.gpu_types`` order), mini-batches per second


def allocation(rates: np.ndarray, need: np.ndarray, capacity: np.ndarray, scale: np.ndarray,
               objective: str = "max-sum-throughput") -> np.ndarray:
    """Gavel's allocation X (jobs x types): the fraction of time each job should run on each
    GPU type, solved by our LP engine.

    ``rates[j, g]``: job j's throughput on type g (0: it may not run there, x[j, g] = 0);
    ``need[j]``: its gang's demand; ``capacity[g]``: type g's total capacity (both over the
    resources); ``scale[j]``: its gang's worker count. Constraints, as Gavel's
    (policies/policy.py:57-63 of the Sia simulator): sum_g x[j, g] <= 1 and, per type and
    resource, sum_j need[j] x[j, g] <= capacity[g] (Gavel counts the GPUs, scale_factor x
    x <= GPUs of the type; here every resource of the gang).

    - ``max-sum-throughput`` (policies/max_sum_throughput.py:39-90): maximise
      sum_jg rates[j, g] x[j, g].
    - ``max-min-fairness`` (the paper's LAS, section 4.1; policies/max_min_fairness.py:42-81):
      maximise min_j scale[j] x throughput_j(X) / throughput_j(X_equal), weights 1; X_equal
      gives each job every type in proportion to its size (policies/proportional.py:26-40:
      GPUs of the type / all GPUs; here the gangs of the job its total capacity holds), and
      the scale factor makes a job of k GPUs worth k one-GPU jobs, as Gavel's code does.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    J, G = rates.shape
    if not (rates > 0).any():  # nothing can run now
        return np.zeros((J, G))
    R = capacity.shape[1]
    n = J * G  # x[j, g] is variable j * G + g
    jj, gg = np.divmod(np.arange(n), G)
    per_type = sp.coo_array((need[jj].reshape(-1), ((gg[:, None] * R + np.arange(R)).reshape(-1),
                                                    np.repeat(np.arange(n), R))), shape=(G * R, n))
    per_job = sp.coo_array((np.ones(n), (jj, np.arange(n))), shape=(J, n))
    A = sp.vstack([per_type, per_job]).tocsr()
    b = np.concatenate([capacity.reshape(-1), np.ones(J)])
    upper = np.where(rates.reshape(-1) > 0, 1.0, 0.0)
    if objective == "max-sum-throughput":
        problem = Problem(c=rates.reshape(-1), sense="max", A=A, b=b, upper=upper,
                          integer=np.zeros(n, dtype=bool), name="gavel-max-sum-throughput")
    else:  # variables x, then t = the smallest normalised throughput: t <= each job's
        with np.errstate(divide="ignore", invalid="ignore"):
            held = np.where(need[:, None, :] > 0, capacity[None, :, :] / need[:, None, :], np.inf).min(axis=2)
            equal = (rates * held / held.sum(axis=1, keepdims=True)).sum(axis=1)
            weight = np.where(equal > 0, scale / equal, 0.0)
        runs = np.flatnonzero(equal > 0)  # a job that can run nowhere now has no row (t would be 0)
        coef = sp.coo_array((weight[jj] * rates.reshape(-1), (jj, np.arange(n))), shape=(J, n))
        rows = sp.hstack([-coef.tocsr()[runs], np.ones((len(runs), 1))])
        problem = Problem(c=np.r_[np.zeros(n), 1.0], sense="max", A=sp.hstack([A, sp.csr_array((A.shape[0], 1))]),
                          b=b, G=rows, g_hi=np.zeros(len(runs)), upper=np.r_[upper, np.inf],
                          integer=np.zeros(n + 1, dtype=bool), name="gavel-max-min-fairness")
    result = solve_lp(problem)
    if not result.success:  # never seen: x = 0 leaves the order to the rounds' tie-breaks
        logger.warning("gavel: the allocation LP failed (%s); every job is given 0", result.status.value)
        return np.zeros((J, G))
    return np.clip(result.x[:n].reshape(J, G), 0.0, 1.0)


@contextmanager
def only_type(res: Residual, mask: np.ndarray) -> Iterator[Residual]:
    """``res`` with every machine outside ``mask`` shown full until the block ends: how many
    workers of a job one GPU type holds on the empty slot (its PSs counted on that type's
    machines too: a bound on the gang's size, the placement itself uses ``Residual.find``
    with the type); nothing placed inside the block is kept."""
    if mask.all():
        yield res
        return
    saved = res.snapshot()
    free, link_free, held = saved
    res.restore((np.where(mask[:, None], free, 0.0), link_free, held))
    try:
        yield res
    finally:
        res.restore(saved)


class Gavel:
    """Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep
    Learning Workloads", OSDI 2020), as the Sia paper's simulator runs it (the artifact's
    ``gavel.py`` and ``policies/``; its ``simulator_config.py:75`` configures
    ``gavel_default_policy = "max_sum_throughput_perf"``), on our model: one round per slot
    (Gavel's round is 360 s: upstream ``scheduler.py`` ``time_per_iteration=360``, the Sia
    artifact's ``run_experiment.sh:9`` ``--interval=360``; here the instance's slot).

    Rules, each slot:

    1. Gang (scale factor): a job runs rigidly with ``max_workers`` workers (its requested
       count, the artifact's ``scale_factor = job.target_num_replicas``, cluster.py:487;
       ``min_workers == max_workers`` for a rigid job) and ``min_ps`` PSs, capped at the most
       one of its GPU types holds when empty, and never resized (multi_simulator.py:52-53
       disables batch-size tuning under Gavel).
    2. Throughputs: on each GPU type the job lists (``Job.runs_on``) and that holds its gang,
       its speed table's rate (or MODEL.md 4's linear rate) at the gang's count: local when
       one machine of the type could hold the gang, else over the fewest machines of the type
       that hold it (the artifact's ``predict_throughput``, gavel.py:515-546, packs a gang
       node by node); 0 elsewhere (the artifact's 0.1 for a gang larger than the type,
       gavel.py:520-522, is a stand-in for "cannot"). Gavel reads no job length: both LPs
       take throughputs, scale factors and the cluster only (gavel.py:227-244).
    3. Allocation: the LP of :func:`allocation` over all active jobs, ``objective``
       ``max-sum-throughput`` (default, the arena's) or ``max-min-fairness`` (the paper's).
    4. Priorities (gavel.py:249-282): priority[j, g] = x[j, g] / (seconds j ran on g /
       seconds all jobs ran on g), counted since the job arrived; a job starts with half a
       round on every type and the type's total with it (gavel.py:111-125); each round a job
       runs adds the round to its type and to the type's total (gavel.py:505-509), which
       keeps the time of finished jobs (the artifact resets nothing: gavel.py:127-149 is
       commented out). x = 0 gives priority 0.
    5. Rounds (gavel.py:284-330): the (job, type) pairs in one queue by priority, then x,
       descending (the artifact's deficits stay 0), ties by arrival, id and type; each pair
       whose job is not placed yet and runs on the type (upstream ``scheduler.py`` skips
       zero throughput) is placed as one gang on machines of that type, if it fits (the
       artifact counts free GPUs; here the slot's ``Residual``: capacity, PSs, links). Jobs
       of priority 0 still fill what is left: the rounds are work-conserving.
    6. Placement (gavel.py:360-427): jobs that stay on the type they ran on keep their
       previous task set when it is free, placed first; the others then take a placement
       of their gang on their type, largest gangs first (local first, else the smallest
       subtree). If one no longer fits that way, the placements of rule 5 are kept.

    State between slots (time per job and type, the types' totals, the last slot seen) is
    checkpointed by ``state()`` / ``load_state()``.
    """

    def __init__(self, objective: str = "max-sum-throughput"):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        self.objective = objective
        self.name = "gavel" if objective == OBJECTIVES[0] else f"gavel-{objective}"
        self._ran: dict[str, dict[GpuType, float]] = {}  # seconds per job and type (rule 4)
        self._total: dict[GpuType, float] = {}           # seconds per type, every job seen
        self._last_t: int | None = None
        self._most: dict[tuple, list[int]] = {}  # per job: most workers each type holds, empty
        self._most_topology = None

    def decide(self, view: View) -> dict[str, TaskDict]:
        self._observe(view)
        if not view.jobs:
            return {}
        topology = view.instance.topology
        types = topology.gpu_types
        masks = [topology.type_code == k for k in range(len(types))]
        order = sorted(view.jobs, key=lambda j: (view.jobs[j].job.arrival, j))
        empty = view.residual()
        offers = self._offers(view, empty, order, types, masks)
        rates = np.array([o.rates for o in offers])
        x = allocation(rates, np.array([o.need for o in offers]), np.array([empty.cap[m].sum(axis=0) for m in masks]),
                       np.array([o.workers for o in offers], dtype=float), self.objective)
        share = np.array([[self._ran[j][g] / self._total[g] for g in types] for j in order])
        priority = x / share
        queue = sorted(((i, k) for i in range(len(order)) for k in range(len(types))),
                       key=lambda p: (-priority[p], -x[p], view.jobs[order[p[0]]].job.arrival, order[p[0]], p[1]))
        res = view.residual()
        chosen: dict[str, tuple[int, TaskDict]] = {}
        for i, k in queue:
            j = order[i]
            if j in chosen or rates[i, k] <= 0:
                continue
            state = view.jobs[j]
            tasks = self._keep(view, res, state, types[k], offers[i].workers)
            if tasks is None:
                tasks = res.find(state.job, offers[i].workers, prefer=by_workers(state.previous),
                                 gpu_type=types[k])
                if tasks is None:
                    continue
                res.place(state.job, tasks)
            chosen[j] = (k, tasks)
        return self._stable(view, chosen, types, masks)

    def _offers(self, view: View, empty: Residual, order: list[str], types: tuple[GpuType, ...],
                masks: list[np.ndarray]) -> list[Offer]:
        """Each job's gang and throughput per type (rules 1 and 2), on the empty slot ``empty``."""
        if self._most_topology is not view.instance.topology:  # the cluster changed
            self._most, self._most_topology = {}, view.instance.topology
        jobs = [view.jobs[j].job for j in order]
        keys = [(job.id, job.min_workers, job.max_workers, None if job.speed is None else job.speed.types)
                for job in jobs]
        new = [job for job, key in zip(jobs, keys) if key not in self._most]
        most = {job.id: [0] * len(types) for job in new}
        for k, (g, mask) in enumerate(zip(types, masks)):
            with only_type(empty, mask) as shown:
                for job in new:
                    most[job.id][k] = shown.max_workers_that_fit(job) if job.runs_on(g) else 0
        self._most.update((key, most[job.id]) for job, key in zip(jobs, keys) if job.id in most)
        offers = []
        for job, key in zip(jobs, keys):
            holds = self._most[key]
            count = max(job.min_workers, min(job.max_workers, max(holds)))
            alpha, beta = empty.demand(job)
            need = count * alpha + job.min_ps(count) * beta
            rates = [self._rate(empty, job, count, need, g, mask) if held >= count else 0.0
                     for g, mask, held in zip(types, masks, holds)]
            offers.append(Offer(count, need, np.array(rates)))
        return offers

    @staticmethod
    def _rate(empty: Residual, job: Job, count: int, need: np.ndarray, gpu_type: GpuType,
              mask: np.ndarray) -> float:
        """The gang's throughput on ``gpu_type`` (rule 2)."""
        holds = (need <= empty.cap[mask] + TOL_FIT).all(axis=1)
        if holds.any():
            return job.rate(count, 1, float(empty.local_gbps[mask][holds].max()), gpu_type)
        room = np.sort(empty.worker_room(job)[mask])[::-1]
        machines = int(np.searchsorted(np.cumsum(room), count)) + 1
        return job.rate(count, machines, float(empty.local_gbps[mask].max()), gpu_type)

    @staticmethod
    def _keep(view: View, res: Residual, state: JobState, gpu_type: GpuType, count: int) -> TaskDict | None:
        """The job's previous task set, placed into ``res``, if its workers ran on ``gpu_type``,
        it has ``count`` workers and it fits; else None."""
        if not state.previous or gpu_types(view.instance, state.previous) != {gpu_type}:
            return None
        return keep_previous(res, state, count)

    def _stable(self, view: View, chosen: dict[str, tuple[int, TaskDict]], types: tuple[GpuType, ...],
                masks: list[np.ndarray]) -> dict[str, TaskDict]:
        """Rule 6: previous task sets on the same type first, then the other gangs, largest first."""
        res = view.residual()
        out: dict[str, TaskDict] = {}
        movers = []
        for j, (k, tasks) in chosen.items():
            kept = self._keep(view, res, view.jobs[j], types[k], workers(tasks))
            if kept is not None:
                out[j] = kept
            else:
                movers.append(j)
        for j in sorted(movers, key=lambda j: -workers(chosen[j][1])):
            (k, tasks), job = chosen[j], view.jobs[j].job
            if not res.fits(job, tasks):
                tasks = res.find(job, workers(tasks), prefer=by_workers(tasks), gpu_type=types[k])
                if tasks is None:
                    return {i: placed for i, (_, placed) in chosen.items()}
            res.place(job, tasks)
            out[j] = tasks
        return out

    def _observe(self, view: View) -> None:
        """Rule 4's bookkeeping: new jobs' half rounds, last slot's round, finished jobs forgotten."""
        t, seconds = view.t, view.instance.slot_seconds
        if self._last_t is not None and t <= self._last_t:  # a new run: forget the old one
            self._ran.clear()
            self._total.clear()
        for j, state in view.jobs.items():
            ran = self._ran.setdefault(j, {})
            for g in view.instance.topology.gpu_types:
                if g not in ran:
                    ran[g] = seconds / 2
                    self._total[g] = self._total.get(g, 0.0) + seconds / 2
            if self._last_t is not None and state.last_ran == self._last_t and state.previous:
                on = gpu_types(view.instance, state.previous)
                if len(on) == 1:
                    g = on.pop()
                    ran[g] += seconds
                    self._total[g] += seconds
        for j in [j for j in self._ran if j not in view.jobs]:
            del self._ran[j]
        self._last_t = t

    def state(self) -> dict:
        """Seconds per job and type, per type, and the last slot seen (types as [type, s] pairs:
        an untyped machine's type is null)."""
        return {"last_t": self._last_t, "total": [[g, s] for g, s in self._total.items()],
                "ran": {j: [[g, s] for g, s in ran.items()] for j, ran in self._ran.items()}}

    def load_state(self, state: dict) -> None:
        self._last_t = state["last_t"]
        self._total = {g: float(s) for g, s in state["total"]}
        self._ran = {j: {g: float(s) for g, s in pairs} for j, pairs in state["ran"].items()}
        self._most.clear()
