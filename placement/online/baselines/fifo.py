"""First-in, first-out: the scheduler every cluster starts with."""
from __future__ import annotations

from placement.model.instance import Job
from placement.online.baselines._common import (arrival_order, by_workers, keep_previous,
                                                one_machine_holds, settle)
from placement.online.policy import JobState, TaskDict, View
from placement.slots.residual import Residual


class FIFO:
    """First-in, first-out with gang scheduling, as in YARN's FIFO scheduler and the FIFO
    baseline of Tiresias (Gu et al., NSDI 2019) and Optimus (Peng et al., EuroSys 2018).
    The rules follow Tiresias' public simulator (github.com/SymbioticLab/Tiresias,
    ``simulator/run_sim.py``: the ``fifo`` schedule, ``one_queue_fifo_sim_jobs``, with
    the default ``yarn`` placement, ``simulator/switch.py``: ``ms_yarn_alloc_res``).

    Rules, each slot:

    1. Gang: a job asks for its requested GPU count, here ``max_workers`` workers (capped at
       the most the empty cluster holds, so that no job waits forever), with ``min_ps``
       PSs, and runs with exactly that gang or not at all: FIFO never shrinks, grows or
       splits a job (the Tiresias simulator allocates a job's ``num_gpu`` "all-or-nothing"
       and starts it only when the whole gang fits).
    2. No preemption, no migration: a job that ran last slot keeps its task set (the
       simulator releases a job's GPUs only when it completes). It is re-placed by rule 4
       only if that set no longer fits (a machine left the cluster).
    3. Queue: the jobs that are not running, by arrival slot, ties by id. Strict
       (default): the first job whose gang does not fit blocks the queue and no later
       job starts this slot (head-of-line blocking: the simulator's FIFO loop stops at
       the first job it cannot place). ``backfill=True``: it is skipped and later jobs
       may take the room (the simulator's ``fjf``, "fit job first (in fifo order)").
    4. Placement, the simulator's MS-YARN scheme ("all-or-nothing"): a gang that one
       machine of the cluster could hold (its capacity, workers and PSs together) runs
       on one machine or waits ("if need_gpu <= gpu_p_node then get one node with
       enough gpus"); a larger gang goes in the smallest subtree that holds it (the
       simulator takes whole nodes under one switch).

    Rule 4 is what keeps a communication-heavy job from starting spread over machines:
    FIFO never revisits a running job's placement (rule 2), so a job started spread would
    stay spread (and slow) to its end.

    GPU types (MODEL.md 8; the simulator has none): a gang runs on one type the job runs on,
    the fastest with room, and "one machine could hold it" counts machines of those types.
    """

    def __init__(self, backfill: bool = False):
        self.backfill = backfill
        self.name = "fifo-backfill" if backfill else "fifo"

    def decide(self, view: View) -> dict[str, TaskDict]:
        res = view.residual()
        empty = view.residual()
        order = arrival_order(view)
        gang = {j: self.gang(empty, view.jobs[j].job) for j in order}
        decided: dict[str, TaskDict] = {}
        for j in order:  # rule 2: running jobs first, on their own task sets
            kept = keep_previous(res, view.jobs[j], gang[j])
            if kept is not None:
                decided[j] = kept
        for j in order:  # rules 3 and 4
            if j in decided:
                continue
            tasks = self.place(res, view.jobs[j], gang[j])
            if tasks is not None:
                decided[j] = tasks
            elif not self.backfill:
                break
        return settle(view, decided, order)

    @staticmethod
    def gang(empty: Residual, job: Job) -> int:
        """The job's gang size (rule 1) on the cluster of ``empty`` (an empty slot)."""
        if one_machine_holds(empty, job, job.max_workers) or \
                empty.spread(job, job.max_workers) is not None:
            return job.max_workers
        return min(job.max_workers, max(job.min_workers, empty.max_workers_that_fit(job)))

    @staticmethod
    def place(res: Residual, state: JobState, count: int) -> TaskDict | None:
        """Rule 4: one machine if one could hold the gang (else wait), else the smallest
        subtree; placed into ``res``."""
        job = state.job
        prefer = by_workers(state.previous)
        if one_machine_holds(res, job, count):
            tasks = res.local(job, count, prefer=prefer[0] if prefer else None)
        else:
            tasks = res.spread(job, count, prefer=prefer)
        if tasks is not None:
            res.place(job, tasks)
        return tasks
