"""The task variables every placement model shares: per job, slot and domain an indicator
y and per machine the workers w and PSs s, with the capacity and hose-model link rows,
the per-domain shape rows, the choice groups, and decoding a vector back to an
:class:`~placement.model.intent.Intent`.

The per-machine LP-bound model (:mod:`placement.formulation.per_machine`) and the exact
time-indexed model (:mod:`placement.formulation.time_indexed`) add their own progress variables
and objective on top.
"""
from __future__ import annotations

import numpy as np

from placement import deadline
from placement.formulation.domains import Domains, FitTable, fit_table
from placement.formulation.rows import Rows, packing_rows
from placement.model.instance import MB_TO_GB, TOL, Instance, Job
from placement.model.intent import Intent, JobIntent
from solvers.problem import ChoiceGroup, Option

W, S, Y = 0, 1, 2


class TaskVariables:
    """The task variables of jobs ``jobs`` over slots ``start..end-1``.

    Per job-slot (j, t >= a_j) and domain v of j: an indicator y and, per machine h under
    v, workers w and PSs s. A job with a speed table (MODEL.md 8) credits each worker the
    table's best rate per worker (per GPU type: the best over the types it runs on), which
    never under-states its progress. GPU types: w is 0 on machines of a type the job does not
    run on (:func:`~placement.formulation.domains.fit_table`); that a gang's workers share one
    type per slot is left to the exact model (:mod:`placement.formulation.type_choice`), so
    this LP is a relaxation of it. Arrays ``kind``, ``job``, ``slot``, ``dom``, ``machine``,
    ``upper`` and ``option`` (one id per (j, t, v)) describe every variable; the model
    appends its own variables after index ``n``."""

    def __init__(self, instance: Instance, jobs: list[int], start: int, end: int,
                 allowed: dict[int, set[str]] | None = None):
        """``allowed`` optionally restricts job j (by index) to the domains (node ids) named
        (the online policy's pruning); a restricted model is no longer a lower bound."""
        self.instance, self.start, self.end = instance, start, end
        self.allowed = allowed or {}
        self.domains = doms = Domains(instance)
        topo = instance.topology
        self.cap = instance.capacity_matrix
        local_gbps = np.array([m.local_gbps for m in topo.machines])
        parts: dict[str, list[np.ndarray]] = {k: [] for k in ("kind", "job", "slot", "dom", "machine", "upper", "speed")}
        for j in jobs:
            job = instance.jobs[j]
            fits = fit_table(job, instance)
            pairs_d, pairs_h = self._pairs(job, fits, self.allowed.get(j))
            w_fit, s_fit = fits.workers.astype(float), fits.ps.astype(float)
            if job.speed is not None:  # per worker, the table's best rate per worker (a relaxation)
                theta = np.where(doms.is_local[pairs_d], 1.0 / job.speed.best_per_worker(local=True),
                                 1.0 / job.speed.best_per_worker(local=False))
            else:
                theta = np.where(doms.is_local[pairs_d],
                                 job.batch_seconds + 2 * job.gradient_mb * MB_TO_GB / local_gbps[pairs_h],
                                 job.batch_time(job.worker_gbps))
            used = np.unique(pairs_d)
            k, nd = len(pairs_d), len(used)
            for t in range(max(job.arrival, start), end):
                deadline.check("building the model")
                parts["kind"] += [np.full(k, W), np.full(k, S), np.full(nd, Y)]
                parts["job"].append(np.full(2 * k + nd, j))
                parts["slot"].append(np.full(2 * k + nd, t))
                parts["dom"] += [pairs_d, pairs_d, used]
                parts["machine"] += [pairs_h, pairs_h, np.full(nd, -1)]
                parts["upper"] += [w_fit[pairs_h], s_fit[pairs_h], np.ones(nd)]
                parts["speed"] += [instance.slot_seconds / theta, np.zeros(k + nd)]
        cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in parts.items()}
        self.kind, self.job, self.slot, self.dom, self.machine = (
            cat[k].astype(np.int64) for k in ("kind", "job", "slot", "dom", "machine"))
        self.upper = cat["upper"].astype(float)
        #: batches one worker does in one slot (no restart loss), on w variables; 0 elsewhere
        self.speed = cat["speed"].astype(float)
        self.n = len(self.kind)
        key = (self.job * (instance.horizon + 1) + self.slot) * len(doms.node) + self.dom
        self.option_key, self.option = np.unique(key, return_inverse=True)
        self.n_opt = len(self.option_key)
        self.w_idx = np.flatnonzero(self.kind == W)
        self.s_idx = np.flatnonzero(self.kind == S)
        self.y_idx = np.flatnonzero(self.kind == Y)
        self.opt_job = np.zeros(self.n_opt, dtype=np.int64)
        self.opt_job[self.option[self.y_idx]] = self.job[self.y_idx]
        self.opt_slot = np.zeros(self.n_opt, dtype=np.int64)
        self.opt_slot[self.option[self.y_idx]] = self.slot[self.y_idx]
        self.opt_dom = np.zeros(self.n_opt, dtype=np.int64)
        self.opt_dom[self.option[self.y_idx]] = self.dom[self.y_idx]
        self.opt_y = np.zeros(self.n_opt, dtype=np.int64)
        self.opt_y[self.option[self.y_idx]] = self.y_idx

    def _pairs(self, job: Job, fits: FitTable, allowed: set[str] | None) -> tuple[np.ndarray, np.ndarray]:
        """(domain, machine) pairs worth a variable: a local domain whose machine holds
        min_workers workers with their PSs; a spread domain's machines that hold a worker
        or a PS, if there are two or more and together they hold min_workers workers."""
        local_ok = fits.local >= job.min_workers
        w_fit = fits.workers
        any_fit = (fits.workers >= 1) | (fits.ps >= 1)
        d_list: list[int] = []
        h_list: list[int] = []
        for d, members in enumerate(self.domains.machines):
            if allowed is not None and self.domains.nodes[self.domains.node[d]] not in allowed:
                continue
            if self.domains.is_local[d]:
                if local_ok[members[0]]:
                    d_list.append(d)
                    h_list.append(members[0])
            else:
                useful = [h for h in members if any_fit[h]]
                if len(useful) >= 2 and int(w_fit[useful].sum()) >= job.min_workers:
                    d_list += [d] * len(useful)
                    h_list += useful
        return np.array(d_list, dtype=np.int64), np.array(h_list, dtype=np.int64)

    # ----- rows --------------------------------------------------------------------------
    def packing(self) -> tuple[Rows, list[str]]:
        """Machine capacity per (t, h, r) and link capacity per (t, e): rows A x <= b
        (kept only where some variable enters). Returns the rows and their names."""
        inst, topo = self.instance, self.instance.topology
        H, R, E, T0 = len(topo.machines), len(inst.resources), len(topo.links), self.start
        jobs = inst.jobs
        alpha = np.array([[j.worker.get(r, 0) for r in inst.resources] for j in jobs], dtype=float)
        beta = np.array([[j.ps.get(r, 0) for r in inst.resources] for j in jobs], dtype=float)
        keys, cols, vals = [], [], []
        for r in range(R):
            for idx, demand in ((self.w_idx, alpha[:, r]), (self.s_idx, beta[:, r])):
                sel = idx[demand[self.job[idx]] > 0]
                keys.append(((self.slot[sel] - T0) * H + self.machine[sel]) * R + r)
                cols.append(sel)
                vals.append(demand[self.job[sel]])
        n_cap = (self.end - T0) * H * R
        if E:
            anc, depth, up_link = topo.ancestor_table
            node_depth = np.array([topo.depth(nd) for nd in self.domains.nodes])
            wg = np.array([j.worker_gbps for j in jobs])
            pg = np.array([j.ps_gbps for j in jobs])
            task = np.concatenate([self.w_idx, self.s_idx])
            sel = task[~self.domains.is_local[self.dom[task]]]
            dom_depth = node_depth[self.domains.node[self.dom[sel]]]
            own_depth = depth[self.machine[sel]]
            bw = np.where(self.kind[sel] == W, wg[self.job[sel]], pg[self.job[sel]])
            for k in range(1, anc.shape[1]):
                on = (k > dom_depth) & (k <= own_depth)
                link = up_link[anc[self.machine[sel][on], k]]
                keys.append(n_cap + (self.slot[sel][on] - T0) * E + link)
                cols.append(sel[on])
                vals.append(bw[on])
        rhs_full = np.concatenate([np.tile(self.cap.reshape(-1), self.end - T0),
                                   np.tile([l.gbps for l in topo.links], self.end - T0)])
        block, used = packing_rows(keys, cols, vals, rhs_full)
        return block, [self._packing_name(int(u), n_cap, H, R, E) for u in used]

    def _packing_name(self, key: int, n_cap: int, H: int, R: int, E: int) -> str:
        topo = self.instance.topology
        if key < n_cap:
            t, rest = divmod(key, H * R)
            h, r = divmod(rest, R)
            return f"cap[t={t + self.start},{topo.machines[h].id},{self.instance.resources[r]}]"
        t, e = divmod(key - n_cap, E)
        link = topo.links[e]
        return f"link[t={t + self.start},{link.a}-{link.b}]"

    def shape_rows(self, block: Rows) -> None:
        """Per option (j, t, v): L*y <= sum_h w <= U*y, sum_h s >= kappa * sum_h w - tol,
        sum_h s >= y: MODEL.md rule 3 for the chosen domain."""
        jobs = self.instance.jobs
        U = np.array([j.max_workers for j in jobs], dtype=float)
        L = np.array([j.min_workers for j in jobs], dtype=float)
        kappa = np.array([j.kappa for j in jobs])
        tol = np.array([TOL / j.ps_gbps for j in jobs])
        w, s, y, opt = self.w_idx, self.s_idx, self.y_idx, self.option
        n = self.n_opt
        block.add(n, [(opt[w], w, 1.0), (opt[y], y, -U[self.job[y]])], -np.inf, 0.0)
        block.add(n, [(opt[w], w, 1.0), (opt[y], y, -L[self.job[y]])], 0.0, np.inf)
        block.add(n, [(opt[s], s, 1.0), (opt[w], w, -kappa[self.job[w]])], -tol[self.opt_job], np.inf)
        block.add(n, [(opt[s], s, 1.0), (opt[y], y, -1.0)], 0.0, np.inf)

    def choice_groups(self) -> list[ChoiceGroup]:
        """One group per job-slot: at most one domain, whose w/s may then be non-zero."""
        task = np.concatenate([self.w_idx, self.s_idx])
        order = np.argsort(self.option[task], kind="stable")
        task = task[order]
        bounds = np.searchsorted(self.option[task], np.arange(self.n_opt + 1))
        jobslot = self.opt_job * (self.instance.horizon + 1) + self.opt_slot
        groups: dict[int, list[Option]] = {}
        for o in range(self.n_opt):
            groups.setdefault(int(jobslot[o]), []).append(
                Option(int(self.opt_y[o]), task[bounds[o]:bounds[o + 1]]))
        return [ChoiceGroup(tuple(opts)) for opts in groups.values()]

    # ----- decoding ----------------------------------------------------------------------
    def decode(self, x: np.ndarray) -> Intent:
        """Each job-slot's chosen domain (indicator > 1/2) and its rounded task counts, its
        workers kept on one GPU type (the type holding most of them; the PSs stay)."""
        inst = self.instance
        plan = Intent(inst.horizon)
        x = np.asarray(x, dtype=float)[: self.n]
        chosen = np.zeros(self.n_opt, dtype=bool)
        chosen[self.option[self.y_idx]] = x[self.y_idx] > 0.5
        counts = np.rint(x).astype(np.int64)
        task = np.concatenate([self.w_idx, self.s_idx])
        task = task[chosen[self.option[task]] & (counts[task] > 0)]
        grouped: dict[int, dict[str, list[int]]] = {}
        for i in task.tolist():
            h = inst.topology.machines[self.machine[i]].id
            grouped.setdefault(int(self.option[i]), {}).setdefault(h, [0, 0])[int(self.kind[i])] += int(counts[i])
        for o, by_machine in grouped.items():
            domain = self.domains.nodes[self.domains.node[self.opt_dom[o]]]
            plan.slots[int(self.opt_slot[o])][inst.jobs[int(self.opt_job[o])].id] = JobIntent(
                domain, one_type(inst, {h: (v[0], v[1]) for h, v in by_machine.items()}))
        return plan


def one_type(instance: Instance, tasks: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """``tasks`` with workers only on the GPU type holding most of them (the first such type
    in ``Topology.gpu_types`` order on a tie; MODEL.md 8: one type per slot); PSs stay where
    they are, machines left empty are dropped. Unchanged on a cluster without types."""
    topo = instance.topology
    if not topo.typed:
        return tasks
    code = {h: int(topo.type_code[topo.machine_index[h]]) for h in tasks}
    workers = np.bincount([code[h] for h in tasks], weights=[w for w, _ in tasks.values()],
                          minlength=len(topo.gpu_types))
    keep = int(np.argmax(workers))
    kept = {h: (w if code[h] == keep else 0, s) for h, (w, s) in tasks.items()}
    return {h: ws for h, ws in kept.items() if ws != (0, 0)}
