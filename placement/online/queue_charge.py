"""The queueing charge of the LP policy's window: what a job's work left after the window
costs, beyond MODEL.md's unfinished charge, to the jobs queued behind it.

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

from collections.abc import Sequence

import numpy as np

from placement.model.instance import Instance, Job, demand_matrix

__all__ = ["leftover", "queue_delay", "queue_extra"]


def leftover(instance: Instance, jobs: Sequence[Job], remaining: Sequence[float],
             machines: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per job: ``own``, the seconds its ``remaining`` batches take at full local speed with
    max_workers workers (MODEL.md's unfinished charge), and ``load``, the seconds of the
    whole cluster (or of ``machines``) that this work occupies: ``own`` times the share of
    the capacity the job holds at full size, max_workers x (worker + kappa x PS demand)
    over the capacity, in its dominant resource, at most 1 (module docstring)."""
    cap = instance.capacity_matrix if machines is None else instance.capacity_matrix[machines]
    cap = cap.sum(axis=0)
    own = np.array([instance.unfinished_seconds(job, r) for job, r in zip(jobs, remaining)], dtype=float)
    kappa = np.array([job.kappa for job in jobs], dtype=float)
    need = (demand_matrix(jobs, instance.resources, "worker")
            + kappa[:, None] * demand_matrix(jobs, instance.resources, "ps"))
    on = (need > 0) & (cap > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(on, need / np.where(cap > 0, cap, 1.0), -np.inf).max(axis=1, initial=-np.inf)
    most = np.array([job.max_workers for job in jobs], dtype=np.int64)
    share = np.where(on.any(axis=1), np.minimum(1.0, most * ratio), 0.0)
    return own, own * share


def _smith(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Smith's rule on the cluster as one machine: smallest load per weight first
    (ties in the given order)."""
    return np.argsort(load / weight, kind="stable")


def queue_delay(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Per job, the summed ``load`` of the jobs ahead of it in Smith order: how long the
    leftover work queued before it keeps the cluster busy (module docstring)."""
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
