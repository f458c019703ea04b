"""What every baseline policy shares: queue order, stable placement and the final packing.

Stability is the same rule in every policy, because MODEL.md charges a restart whenever a
job's task set changes: a job whose worker count the policy leaves unchanged keeps its
previous task set if it still fits (:func:`settle`), and a policy that may *grow* a
running job does so only when the move finishes the job sooner, restart included
(:func:`moves_pay`).

GPU types (MODEL.md 8) are the Residual's: its searches put a gang's workers on one type the
job runs on, the fastest placement over its types by default, and ``fits`` refuses mixed
gangs, so every placement made here (and by the policies through it) keeps the type rule.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from placement.model.instance import COMPLETE, TOL_FIT, Instance, Job
from placement.online.policy import JobState, TaskDict, View
from placement.slots.residual import Residual
from placement.model.progress import canonical, per_worker_seconds

Tasks = Mapping[str, tuple[int, int]]


def workers(tasks: Tasks | None) -> int:
    return sum(w for w, _ in tasks.values()) if tasks else 0


def by_workers(tasks: Tasks | None) -> list[str]:
    """Machines of ``tasks``, most workers first: the order ``Residual`` prefers them in."""
    return sorted(tasks, key=lambda h: (-tasks[h][0], -tasks[h][1], h)) if tasks else []


def arrival_order(view: View) -> list[str]:
    """Active jobs by arrival slot, ties by id (the FIFO queue)."""
    return sorted(view.jobs, key=lambda j: (view.jobs[j].job.arrival, j))


def local_time(instance: Instance, job: Job) -> float:
    """Seconds per mini-batch on the fastest machine (the job's best rate per worker)."""
    if job.speed is not None:
        return 1.0 / job.speed.best_per_worker(local=True)
    return job.batch_time(instance.best_local_gbps)


def cannot_finish_by(view: View, job: Job, end: int) -> bool:
    """True when no plan completes ``job`` before slot ``end``: even max_workers at the
    fastest rate of any placement, with no restart, need more slots."""
    if job.speed is not None:
        per_worker = max(job.speed.best_per_worker(local=True), job.speed.best_per_worker(local=False))
    else:
        per_worker = 1.0 / min(job.batch_time(view.instance.best_local_gbps), job.batch_time(job.worker_gbps))
    per_slot = job.max_workers * per_worker * view.instance.slot_seconds
    return view.t + view.jobs[job.id].remaining * COMPLETE / per_slot > end + 1


def unit_demand(res: Residual, job: Job) -> np.ndarray:
    """One worker with its share (kappa) of a PS, as a vector over the resources."""
    alpha, beta = res.demand(job)
    return alpha + job.kappa * beta


def share(demand: np.ndarray, totals: np.ndarray) -> float:
    """Dominant share of ``demand``: its largest fraction of any resource's total."""
    used = totals > 0
    return float((demand[used] / totals[used]).max(initial=0.0))


def one_machine_holds(res: Residual, job: Job, count: int) -> bool:
    """Could one machine of the cluster of a GPU type the job runs on (its capacity, not
    what is free now) hold ``count`` workers and their PSs?"""
    alpha, beta = res.demand(job)
    need = count * alpha + job.min_ps(count) * beta
    return bool(((need <= res.cap + TOL_FIT).all(axis=1) & res.may_hold_workers(job)).any())


def fastest_type(res: Residual, job: Job, count: int, ok: np.ndarray) -> np.ndarray:
    """The machines of ``ok`` (a mask) of the GPU type on which ``count`` workers of the job
    on one machine run fastest (MODEL.md 8); all of ``ok`` when the types' rates tie."""
    topo = res.instance.topology
    if not topo.typed or job.speed is None:
        return ok
    rate = np.array([job.speed.rate(count, 1, g) for g in topo.gpu_types])[topo.type_code]
    return ok & (rate > 0) & (rate >= rate[ok].max(initial=0.0))


def held_vector(res: Residual, job: Job, tasks: Tasks) -> np.ndarray:
    """Resources ``tasks`` take, workers and PSs together."""
    alpha, beta = res.demand(job)
    return workers(tasks) * alpha + sum(s for _, s in tasks.values()) * beta


def finish_seconds(instance: Instance, job: Job, tasks: Tasks, remaining: float,
                   restart: bool) -> float:
    """Seconds to finish ``remaining`` batches if ``tasks`` were kept to the end, the
    restart (at most one slot, MODEL.md 4) charged now when ``restart``."""
    lost = min(job.restart_seconds, instance.slot_seconds) if restart else 0.0
    return lost + remaining * per_worker_seconds(instance, job, tasks) / workers(tasks)


def moves_pay(instance: Instance, state: JobState, new: Tasks, keep: Tasks) -> bool:
    """Does moving from ``keep`` (running, no restart) to ``new`` finish the job sooner?"""
    if canonical(new) == canonical(keep):
        return False
    return (finish_seconds(instance, state.job, new, state.remaining, True)
            < finish_seconds(instance, state.job, keep, state.remaining, False) - 1e-9)


def keep_previous(res: Residual, state: JobState, count: int | None = None) -> TaskDict | None:
    """Place the previous task set if it has ``count`` workers (any, if None) and fits."""
    prev = state.previous
    if not workers(prev) or (count is not None and workers(prev) != count):
        return None
    if not res.fits(state.job, prev):
        return None
    res.place(state.job, prev)
    return dict(prev)


def place_count(res: Residual, state: JobState, count: int, prefer: Iterable[str] = ()
                ) -> TaskDict | None:
    """Place exactly ``count`` workers (and ``min_ps`` PSs): the previous task set if it
    has that many and fits, else local first, else the smallest subtree (``Residual.find``)."""
    kept = keep_previous(res, state, count)
    if kept is not None:
        return kept
    prefer = list(prefer) or by_workers(state.previous)
    tasks = res.find(state.job, count, prefer=prefer)
    if tasks is not None:
        res.place(state.job, tasks)
    return tasks


def settle(view: View, decided: Mapping[str, Tasks], order: list[str]) -> dict[str, TaskDict]:
    """Re-pack ``decided`` (valid together) without gratuitous moves.

    A job whose worker count is unchanged from last slot gets its previous task set back
    if it fits (these are packed first, in ``order``); the others then take their decided
    placement, or another one with the same count (``Residual.find``) if a kept task set
    now overlaps it. If some job cannot be placed that way, ``decided`` is returned as is
    (it is valid together; only its stability is worse)."""
    res = view.residual()
    out: dict[str, TaskDict] = {}
    movers = []
    for j in order:
        tasks = decided.get(j)
        if not workers(tasks):
            continue
        state = view.jobs[j]
        kept = keep_previous(res, state, workers(tasks))
        if kept is not None:
            out[j] = kept
        else:
            movers.append(j)
    for j in movers:
        job, tasks = view.jobs[j].job, dict(decided[j])
        if not res.fits(job, tasks):
            tasks = res.find(job, workers(tasks), prefer=by_workers(tasks))
            if tasks is None:
                return {k: dict(v) for k, v in decided.items() if workers(v)}
        res.place(job, tasks)
        out[j] = tasks
    return out
