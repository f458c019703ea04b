"""Tiresias: discretised two-dimensional least-attained-service, gang-scheduled."""
from __future__ import annotations

import bisect

from placement.online.baselines._common import by_workers, keep_previous, one_machine_holds, settle
from placement.online.policy import JobState, TaskDict, View
from placement.slots.residual import Residual


class Tiresias:
    """Tiresias' discretised 2D-LAS (Gu et al., "Tiresias: A GPU Cluster Manager for
    Distributed Deep Learning", NSDI 2019), the ``dlas-gpu`` scheduler of its simulator.

    Rules, each slot:

    1. Attained service is GPU-time, here worker-seconds (``JobState.attained``), counted
       since the job last entered the top queue. Queues Q0, Q1, ...: a job is in the
       first queue whose threshold its service has not reached; ``thresholds`` default
       (3250,): two queues split at 3,250 GPU-seconds, the first ``queue_limit`` of the
       Tiresias simulator (SymbioticLab/Tiresias, simulator/jobs.py, ``_TFJobs``, whose
       ``update_priority_queues`` uses two queues; its README calls the limits a setting
       to choose per cluster). A job starts in Q0 and is demoted as its service crosses
       the thresholds.
    2. Starvation: a job outside Q0 that has waited (whole slots since it last ran) at
       least ``promote_knob`` times the length of its last run (its last uninterrupted
       streak of slots) is promoted to Q0 and its service count restarts from zero
       (the paper's promotion knob, ``solve_starvation`` in its simulator; default 8,
       one of the values the simulator's run scripts sweep; None turns it off, as the
       Pollux artifact's Tiresias runs).
    3. Order: Q0 first; inside a queue first come, first served (arrival, then id), so a
       waiting job that arrived earlier goes ahead of a running one of the same queue
       (it preempts). The simulators differ in the details: the Pollux artifact's
       Tiresias keeps Q0 in arrival order but Q1 in order of demotion; the Tiresias
       authors' simulator (run_sim.py, ``dlas_sim_jobs``) moves the jobs left waiting
       after each round behind the running ones. This implementation follows neither
       detail.
    4. Gang scheduling: a job runs with exactly its requested ``max_workers`` (capped at
       the most the empty cluster holds, so no job waits forever) and ``min_ps`` PSs, or
       not at all; Tiresias never changes a job's worker count. Jobs that do not fit are
       skipped and later ones may run (the simulator's fit-first loop). A job that ran
       last slot keeps its task set if it fits.
    5. Placement, with the paper's skip-consolidation rule: a job is consolidation-
       sensitive when spreading slows its mini-batch by more than ``skip_below`` (10%;
       the paper's test is the model's tensor-size skew, here the model's own
       communication share: batch_time(worker_gbps) / batch_time(best local_gbps) - 1,
       so this rule reads the job's speed, which the rest of Tiresias never does).
       A sensitive job runs on one machine whenever one machine of the cluster could
       hold its gang, and waits otherwise; the others go local first, else in the
       smallest subtree. (The Pollux artifact's Tiresias has no such rule: it takes
       GPUs from the emptiest nodes whatever the model.)
    6. GPU types (MODEL.md 8; Tiresias has none): a gang's workers go on one type the job
       runs on, the fastest with room (the Residual's searches); rule 5 reads its fastest type's table.

    In the peer arena (``benchmarks/peer_pollux.py``) it runs with the constants of the
    peer's own Tiresias (the Pollux artifact's tiresias.py: one threshold of
    ``3600 * 16`` GPU-seconds, ``_solve_starvation = 0``), so that only the code differs.

    The queue bookkeeping (service at the last promotion, last run streak) lives in the
    policy across slots; ``state()`` / ``load_state()`` checkpoint it as plain JSON.
    """

    name = "tiresias"

    def __init__(self, thresholds: tuple[float, ...] = (3250.0,), promote_knob: float | None = 8.0,
                 skip_below: float = 0.1):
        self.thresholds = tuple(sorted(thresholds))
        self.promote_knob = promote_knob
        self.skip_below = skip_below
        self._base: dict[str, float] = {}            # attained service when it entered Q0
        self._streak: dict[str, tuple[int, int]] = {}  # last run: (first slot, last slot)
        self._gang: dict[str, int] = {}                # gang size per job on this cluster
        self._gang_topology = None
        self._last_t: int | None = None

    def queue(self, state: JobState) -> int:
        """The job's queue index (0 is the top) by its service since entering Q0."""
        service = state.attained - self._base.get(state.job.id, 0.0)
        return bisect.bisect_right(self.thresholds, service)

    def decide(self, view: View) -> dict[str, TaskDict]:
        self._observe(view)
        res = view.residual()
        order = sorted(view.jobs, key=lambda j: (self.queue(view.jobs[j]),
                                                 view.jobs[j].job.arrival, j))
        decided: dict[str, TaskDict] = {}
        for j in order:
            tasks = self._place(view, res, view.jobs[j])
            if tasks is not None:
                decided[j] = tasks
        return settle(view, decided, order)

    def _observe(self, view: View) -> None:
        """Update run streaks and promote starving jobs (state kept across slots)."""
        t = view.t
        if self._last_t is not None and t <= self._last_t:  # a new run: forget the old one
            self._base.clear()
            self._streak.clear()
            self._gang.clear()
        self._last_t = t
        for j, state in view.jobs.items():
            if state.last_ran is None:
                continue
            first, last = self._streak.get(j, (state.last_ran, state.last_ran))
            if state.last_ran != last:
                first = state.last_ran if state.last_ran > last + 1 else first
            self._streak[j] = (first, state.last_ran)
            waited = (t - 1 - state.last_ran) * view.instance.slot_seconds
            ran = (state.last_ran - first + 1) * view.instance.slot_seconds
            if (self.promote_knob is not None and self.queue(state) > 0 and waited > 0
                    and waited >= self.promote_knob * ran):
                self._base[j] = state.attained

    def state(self) -> dict:
        """Service counted at each job's last promotion, run streaks and the last slot seen."""
        return {"last_t": self._last_t, "base": dict(self._base),
                "streak": {j: list(v) for j, v in self._streak.items()}}

    def load_state(self, state: dict) -> None:
        self._last_t = state["last_t"]
        self._base = {j: float(v) for j, v in state["base"].items()}
        self._streak = {j: (int(a), int(b)) for j, (a, b) in state["streak"].items()}
        self._gang.clear()

    def _place(self, view: View, res: Residual, state: JobState) -> TaskDict | None:
        job = state.job
        if self._gang_topology is not view.instance.topology:  # the cluster changed
            self._gang = {}
            self._gang_topology = view.instance.topology
        if job.id not in self._gang or not job.min_workers <= self._gang[job.id] <= job.max_workers:  # new, or revised
            self._gang[job.id] = min(job.max_workers,
                                     max(job.min_workers, view.residual().max_workers_that_fit(job)))
        count = self._gang[job.id]
        kept = keep_previous(res, state, count)
        if kept is not None:
            return kept
        prefer = by_workers(state.previous)
        if self._sensitive(res, job) and one_machine_holds(res, job, count):
            tasks = res.local(job, count, prefer=prefer[0] if prefer else None)
        else:
            tasks = res.find(job, count, prefer=prefer)
        if tasks is not None:
            res.place(job, tasks)
        return tasks

    def _sensitive(self, res: Residual, job) -> bool:
        if job.speed is not None:  # local over spread rate at full size on its fastest type (MODEL.md 8)
            table = job.speed.table(res.job_types(job)[0])
            return table.rate(job.max_workers, 1) / table.rate(job.max_workers, 2) - 1 > self.skip_below
        best = job.batch_time(res.instance.best_local_gbps)
        return job.batch_time(job.worker_gbps) / best - 1 > self.skip_below
