"""The scheduler's commit mode (OASiS style): a :class:`~placement.online.policy.CommittingPolicy`
fixes a job's whole future when it arrives; the scheduler executes the commitment unchanged
(still enforcing MODEL.md), commits a job again when its plan runs out before the manager
finishes it or a machine failure breaks it, and takes an empty commitment as a rejection.
A mixin of :class:`~placement.online.scheduler.OnlineScheduler`, kept apart so the slot logic
stays short."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from placement.online.checkpoint import JobRecord
from placement.online.policy import CommittingPolicy, Policy, TaskDict, View
from placement.slots.residual import Residual

__all__ = ["CommitMode", "is_count"]

logger = logging.getLogger("placement.online.scheduler")


class CommitMode:
    """``_committed`` and ``_commit`` of :class:`~placement.online.scheduler.OnlineScheduler`;
    they read and set the scheduler's own fields, declared here."""

    policy: Policy | CommittingPolicy
    _jobs: dict[str, JobRecord]

    def _committed(self, view: View) -> dict[str, TaskDict]:
        """Commit every job that is due (new, plan ran out, or broken by a failure), then
        read slot ``t`` off the commitments. An empty commitment is the policy's rejection
        (OASiS admission control): the job is not asked about again and never runs."""
        t = view.t
        for job_id in view.jobs:
            e = self._jobs[job_id]
            if e.commitment is None:
                self._commit(view, e)
        return {j: self._jobs[j].commitment[t] for j in view.jobs
                if self._jobs[j].commitment and t in self._jobs[j].commitment}

    def _commit(self, view: View, entry: JobRecord) -> None:
        entry.commitment = None
        job_id = entry.job.id

        def reserved(s: int) -> Residual:
            res = view.residual()
            for j in view.jobs:
                tasks = (self._jobs[j].commitment or {}).get(s)
                job = self._jobs[j].job
                if tasks and res.fits(job, tasks):
                    res.place(job, tasks)
            return res

        plan = self.policy.commit(view, job_id, reserved)
        commitment: dict[int, TaskDict] = {}
        if isinstance(plan, Mapping):
            for s, tasks in plan.items():
                if is_count(s) and int(s) >= view.t and isinstance(tasks, Mapping):
                    commitment[int(s)] = dict(tasks)
                else:
                    logger.warning("job %s: commitment entry for slot %r ignored", job_id, s)
        else:
            logger.warning("job %s: the policy's commitment is %s, not a dict", job_id, type(plan).__name__)
        entry.commitment = commitment
        if commitment:
            logger.debug("slot %d: job %s committed for %d slots", view.t, job_id, len(commitment))
        else:
            logger.info("slot %d: the policy rejected job %s; it will not run", view.t, job_id)


def is_count(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= 0
