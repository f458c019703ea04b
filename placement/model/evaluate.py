"""The referee: ``validate`` (MODEL.md section 3) and ``score`` (sections 4-5).

Formulation-blind by design: it reads only the instance and the allocations, so every
solver, the simulator and the benchmarks are judged by the same rules. Vectorised with
NumPy over the (slot, job, machine) entries, so a schedule of 1,000 jobs x 500 machines
x 50 slots validates in seconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from placement.model.instance import COMPLETE, MB_TO_GB, TOL, Instance, Job
from placement.model.schedule import Schedule

__all__ = ["JobOutcome", "Report", "Violation", "evaluate", "score", "validate"]

RULES = {0: "well-defined", 1: "capacity", 2: "life", 3: "shape", 4: "network"}


@dataclass(frozen=True)
class Violation:
    """One broken rule: which rule, in which slot, about what, and the amounts."""

    rule: int
    slot: int | None
    subject: str
    message: str

    def __str__(self) -> str:
        where = f"slot {self.slot}" if self.slot is not None else "schedule"
        return f"rule {self.rule} ({RULES[self.rule]}), {where}, {self.subject}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "name": RULES[self.rule], **asdict(self)}


@dataclass(frozen=True)
class JobOutcome:
    id: str
    finished: bool
    completion_slot: int | None  # c_j; None when unfinished
    jct: float                   # seconds; the MODEL.md charge when unfinished
    remaining_batches: float
    reconfigurations: int


@dataclass(frozen=True)
class Report:
    """The score of a schedule (MODEL.md section 5); ``objective`` is the weighted total JCT."""

    instance: str
    objective: float
    average_jct: float
    makespan: float
    unfinished: int
    reconfigurations: int
    utilisation: dict[str, float]
    jobs: tuple[JobOutcome, ...]
    bound: float | None = None
    gap: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def with_bound(self, bound: float) -> "Report":
        """The same report with a solver's lower bound and the gap (objective - bound) / objective."""
        gap = (self.objective - bound) / self.objective if self.objective > 0 else 0.0
        return replace(self, bound=bound, gap=gap)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        lines = [f"instance          {self.instance}",
                 f"weighted JCT      {self.objective:.6g} s  (objective)",
                 f"average JCT       {self.average_jct:.6g} s",
                 f"makespan          {self.makespan:.6g} s",
                 f"unfinished jobs   {self.unfinished} of {len(self.jobs)}",
                 f"reconfigurations  {self.reconfigurations}",
                 "utilisation       " + ", ".join(f"{r} {u:.1%}" for r, u in self.utilisation.items())]
        if self.bound is not None:
            lines.append(f"lower bound       {self.bound:.6g} s  (gap {self.gap:.2%})")
        return "\n".join(lines)


def validate(instance: Instance, schedule: Schedule) -> list[Violation]:
    """Every broken rule of MODEL.md section 3 (empty list: the schedule is valid)."""
    return _Evaluation(instance, schedule).violations()


def score(instance: Instance, schedule: Schedule) -> Report:
    """The MODEL.md score of the schedule's allocations (rule-0 entries left out)."""
    return _Evaluation(instance, schedule).report()


def isolated_jct(instance: Instance, job: Job) -> float:
    """The JCT the job would have alone on the cluster: max_workers from its arrival slot at
    the fastest per-batch time any placement gives (local on the machine with the largest
    local_gbps, or spread at worker_gbps), paying its restart once. Every valid schedule
    that completes the job gives it at least this, so the mean over jobs bounds the average
    JCT of any policy that finishes them all (no contention: a floor, not a target)."""
    dt = instance.slot_seconds
    if job.speed is not None:  # the fastest rate of its table (of any type), local or spread (MODEL.md 8)
        fastest = job.speed.fastest
        need = job.work_batches * COMPLETE / fastest
    else:
        theta = job.batch_time(max(instance.best_local_gbps, job.worker_gbps))
        need = job.work_batches * (1 - 1e-9) * theta / job.max_workers  # seconds of running at full size
    first = max(0.0, dt - job.restart_seconds)  # the first slot reconfigures
    if need <= first:
        return dt
    slots = (need - first) / dt
    # The evaluator sums progress slot by slot, so its round-off grows with the slot count: a
    # relative slack keeps a job that ends within that round-off of a slot boundary above the floor.
    return dt * (1 + int(np.ceil(slots - 1e-9 * max(1.0, slots))))


def evaluate(instance: Instance, schedule: Schedule) -> tuple[list[Violation], Report]:
    """Both at the price of one pass."""
    ev = _Evaluation(instance, schedule)
    return ev.violations(), ev.report()


class _Evaluation:
    """Entry arrays (t, j, h, w, s), sorted by (j, t, h), and everything derived from them."""

    def __init__(self, instance: Instance, schedule: Schedule):
        self.inst = instance
        self.rule0: list[Violation] = []
        T, J = instance.horizon, len(instance.jobs)
        rows = self._well_defined(schedule)
        arr = np.array(rows, dtype=np.int64).reshape(-1, 5)
        order = np.lexsort((arr[:, 2], arr[:, 0], arr[:, 1]))
        self.t, self.j, self.h, self.w, self.s = (arr[order, k] for k in range(5))
        jobs = instance.jobs
        self.W = np.zeros((J, T), dtype=np.int64)
        self.S = np.zeros((J, T), dtype=np.int64)
        np.add.at(self.W, (self.j, self.t), self.w)
        np.add.at(self.S, (self.j, self.t), self.s)
        self.wg = np.array([j.worker_gbps for j in jobs], dtype=float)
        self.pg = np.array([j.ps_gbps for j in jobs], dtype=float)
        self._groups()
        self._types()
        self._progress()
        self._usage()

    # ----- rule 0 and the entry arrays -----------------------------------------------
    def _well_defined(self, schedule: Schedule) -> list[tuple[int, int, int, int, int]]:
        inst = self.inst
        jobs, machines = inst.job_index, inst.topology.machine_index
        seen_t: set[int] = set()
        rows = []
        for s in schedule.slots:
            if not 0 <= s.t < inst.horizon:
                self.rule0.append(Violation(0, s.t, "slot", f"t={s.t} is outside 0..{inst.horizon - 1}"))
                continue
            if s.t in seen_t:
                self.rule0.append(Violation(0, s.t, "slot", f"t={s.t} is listed twice; "
                                            "the second listing is ignored"))
                continue
            seen_t.add(s.t)
            pairs: set[tuple[str, str]] = set()
            for a in s.allocations:
                if a.workers == 0 and a.ps == 0:
                    continue
                if a.job not in jobs:
                    self.rule0.append(Violation(0, s.t, f"job {a.job}", "unknown job"))
                    continue
                if a.machine not in machines:
                    self.rule0.append(Violation(0, s.t, f"machine {a.machine}", "unknown machine"))
                    continue
                if (a.job, a.machine) in pairs:
                    self.rule0.append(Violation(0, s.t, f"job {a.job} on {a.machine}",
                                                "listed twice in one slot"))
                    continue
                pairs.add((a.job, a.machine))
                rows.append((s.t, jobs[a.job], machines[a.machine], a.workers, a.ps))
        return rows

    def _groups(self) -> None:
        """Group entries by (job, slot): group start, size, machines count, LCA depth and node."""
        n = len(self.t)
        key = self.j * self.inst.horizon + self.t
        new = np.ones(n, dtype=bool)
        new[1:] = key[1:] != key[:-1]
        self.start = np.flatnonzero(new)
        self.size = np.diff(np.append(self.start, n))
        self.group_of = np.cumsum(new) - 1
        self.gj, self.gt = self.j[self.start], self.t[self.start]
        anc, depth, self.up_link = self.inst.topology.ancestor_table
        self.anc, self.depth = anc, depth
        self.local = self.size == 1  # (job, machine) pairs are unique within a group
        if n == 0:
            self.lca_depth = np.zeros(0, dtype=np.int64)
            return
        lca_depth = np.zeros(len(self.start), dtype=np.int64)
        for d in range(anc.shape[1]):
            col = anc[self.h, d]
            same = (np.minimum.reduceat(col, self.start) == np.maximum.reduceat(col, self.start))
            same &= np.minimum.reduceat(col, self.start) >= 0
            lca_depth = np.where(same, d, lca_depth)
        self.lca_depth = lca_depth

    # ----- progress (MODEL.md section 4) -----------------------------------------------
    def _progress(self) -> None:
        inst, jobs = self.inst, self.inst.jobs
        J, T, dt = len(jobs), inst.horizon, inst.slot_seconds
        local_gbps = np.array([m.local_gbps for m in inst.topology.machines], dtype=float)
        tau = np.array([j.batch_seconds for j in jobs], dtype=float)
        grad = np.array([j.gradient_mb for j in jobs], dtype=float)
        restart = np.array([j.restart_seconds for j in jobs], dtype=float)
        work = np.array([j.work_batches for j in jobs], dtype=float)
        gj, gt = self.gj, self.gt
        bw = np.where(self.local, local_gbps[self.h[self.start]], self.wg[gj])
        theta = tau[gj] + 2 * grad[gj] * MB_TO_GB / bw
        reconf = self._reconfigures()
        effective = np.maximum(0.0, dt - restart[gj] * reconf)
        done = np.zeros((J, T))
        done[gj, gt] = self.W[gj, gt] * effective / theta
        # jobs with a measured speed table (MODEL.md 8): the table's rate for the group's
        # worker count, the machines it spans and its workers' GPU type (the slowest of
        # them if they mix types: rule 3 forbids it, the score stays informative)
        table = np.flatnonzero(np.array([jobs[j].speed is not None for j in gj.tolist()], dtype=bool))
        types = self.inst.topology.gpu_types
        for g in table.tolist():
            j, t = int(gj[g]), int(gt[g])
            rates = [jobs[j].speed.rate(int(self.W[j, t]), int(self.size[g]), types[k])
                     for k in self._group_types(g)] or [0.0]
            done[j, t] = min(rates) * effective[g]
        self.reconf = np.zeros((J, T), dtype=bool)
        self.reconf[gj, gt] = reconf
        cum = np.cumsum(done, axis=1)
        reached = cum >= (work * COMPLETE)[:, None]
        self.finished = reached.any(axis=1)
        self.completion = np.where(self.finished, reached.argmax(axis=1), -1)
        self.remaining = np.where(self.finished, 0.0, np.maximum(0.0, work - cum[:, -1]))

    def _types(self) -> None:
        """Per group, the lowest and highest GPU type code (``Topology.type_code``) of the
        machines holding its workers (-1 for a group without workers)."""
        code = self.inst.topology.type_code[self.h] if len(self.h) else np.zeros(0, dtype=np.int64)
        worker = self.w > 0
        big = np.iinfo(np.int64).max
        if len(self.h):
            lo = np.minimum.reduceat(np.where(worker, code, big), self.start)
            hi = np.maximum.reduceat(np.where(worker, code, -1), self.start)
        else:
            lo = hi = np.zeros(0, dtype=np.int64)
        self.type_lo, self.type_hi = np.where(hi < 0, -1, lo), hi

    def _group_types(self, g: int) -> list[int]:
        """The GPU type codes of group ``g``'s worker machines."""
        if self.type_hi[g] < 0:
            return []
        if self.type_lo[g] == self.type_hi[g]:
            return [int(self.type_lo[g])]
        rows = slice(self.start[g], self.start[g] + self.size[g])
        code = self.inst.topology.type_code[self.h[rows]]
        return sorted(set(code[self.w[rows] > 0].tolist()))

    def _reconfigures(self) -> np.ndarray:
        """Per group: is its (machine, workers, ps) set different from the job's previous slot?"""
        G = len(self.start)
        index = {(j, t): g for g, (j, t) in enumerate(zip(self.gj.tolist(), self.gt.tolist()))}
        prev = np.array([index.get((j, t - 1), -1) for j, t in zip(self.gj.tolist(), self.gt.tolist())],
                        dtype=np.int64)
        same = np.zeros(G, dtype=bool)
        cand = np.flatnonzero((prev >= 0) & (self.size == self.size[np.maximum(prev, 0)]))
        if len(cand):
            sizes = self.size[cand]
            offs = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            a = np.repeat(self.start[cand], sizes) + offs
            b = np.repeat(self.start[prev[cand]], sizes) + offs
            eq = (self.h[a] == self.h[b]) & (self.w[a] == self.w[b]) & (self.s[a] == self.s[b])
            same[cand] = np.logical_and.reduceat(eq, np.cumsum(sizes) - sizes)
        return ~same

    # ----- validity (MODEL.md section 3) -----------------------------------------------
    def violations(self) -> list[Violation]:
        return [*self.rule0, *self._capacity(), *self._life(), *self._shape(), *self._network()]

    def _usage(self) -> None:
        """used[t, h, r]: resource r taken on machine h in slot t; cap[h, r]."""
        inst = self.inst
        R = inst.resources
        alpha = np.array([[j.worker.get(r, 0) for r in R] for j in inst.jobs], dtype=float).reshape(-1, len(R))
        beta = np.array([[j.ps.get(r, 0) for r in R] for j in inst.jobs], dtype=float).reshape(-1, len(R))
        self.cap = np.array([[m.capacity.get(r, 0) for r in R] for m in inst.topology.machines], dtype=float)
        self.used = np.zeros((inst.horizon, len(self.cap), len(R)))
        np.add.at(self.used, (self.t, self.h),
                  alpha[self.j] * self.w[:, None] + beta[self.j] * self.s[:, None])

    def _capacity(self) -> list[Violation]:
        inst, used, cap, R = self.inst, self.used, self.cap, self.inst.resources
        out = []
        for t, h, r in np.argwhere(used > cap[None] + TOL):
            m = inst.topology.machines[h]
            out.append(Violation(1, int(t), f"machine {m.id}",
                                 f"{R[r]} used {used[t, h, r]:.6g} > capacity {cap[h, r]:.6g}"))
        return out

    def _life(self) -> list[Violation]:
        jobs = self.inst.jobs
        arrival = np.array([j.arrival for j in jobs], dtype=np.int64)
        last = np.where(self.finished, self.completion, self.inst.horizon - 1)
        busy = (self.W + self.S) > 0
        slots = np.arange(self.inst.horizon)[None, :]
        out = []
        for j, t in np.argwhere(busy & (slots < arrival[:, None])):
            out.append(Violation(2, int(t), f"job {jobs[j].id}",
                                 f"has tasks before its arrival slot {arrival[j]}"))
        for j, t in np.argwhere(busy & (slots > last[:, None])):
            out.append(Violation(2, int(t), f"job {jobs[j].id}",
                                 f"has tasks after it completed in slot {last[j]}"))
        return out

    def _shape(self) -> list[Violation]:
        jobs = self.inst.jobs
        W, S = self.W, self.S
        lo = np.array([j.min_workers for j in jobs])[:, None]
        hi = np.array([j.max_workers for j in jobs])[:, None]
        running = W > 0
        checks = [
            (running & (W < lo), lambda j, t: f"{W[j, t]} workers < min_workers {lo[j, 0]}"),
            (running & (W > hi), lambda j, t: f"{W[j, t]} workers > max_workers {hi[j, 0]}"),
            (running & (S < 1), lambda j, t: f"{W[j, t]} workers but no PS"),
            (running & (S >= 1) & (S * self.pg[:, None] < W * self.wg[:, None] - TOL),
             lambda j, t: f"{S[j, t]} PS x {self.pg[j]:g} Gbps < {W[j, t]} workers x "
                          f"{self.wg[j]:g} Gbps (needs {jobs[j].min_ps(int(W[j, t]))} PS)"),
            (~running & (S > 0), lambda j, t: f"{S[j, t]} PS but no workers"),
        ]
        out = []
        for mask, say in checks:
            for j, t in np.argwhere(mask):
                out.append(Violation(3, int(t), f"job {jobs[j].id}", say(j, t)))
        out += self._type_rule()
        return sorted(out, key=lambda v: (v.slot, v.subject))

    def _type_rule(self) -> list[Violation]:
        """MODEL.md 8, GPU types: a job's workers in one slot use one type, and one its
        speed table lists (when the table is per type)."""
        if not self.inst.topology.typed:
            return []
        jobs, types, out = self.inst.jobs, self.inst.topology.gpu_types, []
        name = lambda k: repr(types[k]) if types[k] is not None else "untyped"
        allowed = np.array([[job.runs_on(g) for g in types] for job in jobs], dtype=bool).reshape(len(jobs), -1)
        running = self.type_hi >= 0
        odd = running & ((self.type_lo != self.type_hi) | ~allowed[self.gj, np.maximum(self.type_lo, 0)])
        for g in np.flatnonzero(odd).tolist():
            j, t = int(self.gj[g]), int(self.gt[g])
            codes = self._group_types(g)
            if len(codes) > 1:
                out.append(Violation(3, t, f"job {jobs[j].id}", "workers on GPU types "
                                     f"{', '.join(name(k) for k in codes)}: one type per slot"))
            for k in codes:
                if not jobs[j].runs_on(types[k]):
                    out.append(Violation(3, t, f"job {jobs[j].id}", f"workers on GPU type {name(k)}, "
                                         "which its speed table does not list"))
        return out

    def _network(self) -> list[Violation]:
        topo = self.inst.topology
        links = topo.links
        if not links or not len(self.t):
            return []
        load = np.zeros((self.inst.horizon, len(links)))
        lca_d = self.lca_depth[self.group_of]
        bw = self.w * self.wg[self.j] + self.s * self.pg[self.j]
        own_depth = self.depth[self.h]
        for k in range(1, self.anc.shape[1]):
            on = (k > lca_d) & (k <= own_depth)
            np.add.at(load, (self.t[on], self.up_link[self.anc[self.h[on], k]]), bw[on])
        cap = np.array([l.gbps for l in links])
        out = []
        for t, e in np.argwhere(load > cap[None] + TOL):
            l = links[e]
            out.append(Violation(4, int(t), f"link {l.a}-{l.b}",
                                 f"reserved {load[t, e]:.6g} Gbps > capacity {cap[e]:.6g} Gbps "
                                 f"(jobs {', '.join(self._jobs_on_link(int(t), int(e)))})"))
        return out

    def _jobs_on_link(self, t: int, e: int) -> list[str]:
        """Names of the jobs reserving link ``e`` in slot ``t`` (for messages only)."""
        lca_d = self.lca_depth[self.group_of]
        names = set()
        for i in np.flatnonzero(self.t == t):
            path = self.anc[self.h[i], lca_d[i] + 1: self.depth[self.h[i]] + 1]
            if np.any(self.up_link[path] == e):
                names.add(self.inst.jobs[self.j[i]].id)
        return sorted(names)

    # ----- score (MODEL.md section 5) --------------------------------------------------
    def report(self) -> Report:
        inst = self.inst
        dt, T = inst.slot_seconds, inst.horizon
        outcomes, jcts, ends, weights = [], [], [], []
        for i, job in enumerate(inst.jobs):
            if self.finished[i]:
                jct = (self.completion[i] + 1) * dt - job.arrival * dt
            else:
                jct = (T - job.arrival) * dt + inst.unfinished_seconds(job, self.remaining[i])
            outcomes.append(JobOutcome(job.id, bool(self.finished[i]),
                                       int(self.completion[i]) if self.finished[i] else None,
                                       float(jct), float(self.remaining[i]),
                                       int(self.reconf[i].sum())))
            jcts.append(jct)
            ends.append(job.arrival * dt + jct)
            weights.append(job.weight)
        cap_total = self.cap.sum(axis=0)
        used_total = self.used.sum(axis=(0, 1))
        util = {r: float(used_total[k] / (T * cap_total[k])) if cap_total[k] > 0 else 0.0
                for k, r in enumerate(inst.resources)}
        jcts_a = np.array(jcts, dtype=float)
        return Report(
            instance=inst.name,
            objective=float(np.dot(weights, jcts_a)) if jcts else 0.0,
            average_jct=float(jcts_a.mean()) if jcts else 0.0,
            makespan=float(max(ends)) if ends else 0.0,
            unfinished=int((~self.finished).sum()),
            reconfigurations=int(self.reconf.sum()),
            utilisation=util,
            jobs=tuple(outcomes),
        )
