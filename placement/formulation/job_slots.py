"""The time-indexed model's numbering of job-slots (every job's slots from its arrival to the
horizon, job by job) and sums of terms per job-slot: shared by the restart losses
(:mod:`placement.formulation.restarts`), the speed-table rates
(:mod:`placement.formulation.table_rates`) and the model (:mod:`placement.formulation.time_indexed`)."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from placement.model.instance import Instance

__all__ = ["JobSlots", "Terms"]


class Terms(NamedTuple):
    """A sum per job-slot: ``coef * x[col]`` added into job-slot ``key``."""

    key: np.ndarray
    col: np.ndarray
    coef: np.ndarray

    def total(self, x: np.ndarray, n: int) -> np.ndarray:
        """The sums at ``x``, one per job-slot."""
        return np.bincount(self.key, weights=self.coef * x[self.col], minlength=n)


class JobSlots:
    """Every job's slots a_j .. T-1 in one numbering, job by job: k = first[j] + t - a_j."""

    def __init__(self, instance: Instance):
        T = instance.horizon
        self.arrival = np.array([j.arrival for j in instance.jobs], dtype=np.int64)
        self.length = T - self.arrival
        self.first = np.concatenate([[0], np.cumsum(self.length)[:-1]]).astype(np.int64)
        self.last = self.first + self.length - 1
        self.job = np.repeat(np.arange(len(instance.jobs)), self.length)
        self.slot = np.concatenate([np.arange(a, T) for a in self.arrival] or [np.zeros(0, np.int64)])
        self.n = len(self.job)

    def key(self, job: np.ndarray, slot: np.ndarray) -> np.ndarray:
        return self.first[job] + slot - self.arrival[job]

    def cumulative(self, terms: Terms) -> Terms:
        """Each term of job-slot k repeated into k .. the job's last slot: sums up to t."""
        reach = self.last[self.job[terms.key]] - terms.key + 1
        rep = np.repeat(np.arange(len(terms.key)), reach)
        later = np.arange(reach.sum()) - np.repeat(np.cumsum(reach) - reach, reach)
        coef = np.broadcast_to(terms.coef, terms.key.shape)
        return Terms(terms.key[rep] + later, terms.col[rep], coef[rep])
