"""One job's whole schedule as a column, and the dynamic program that prices such columns.

A column is what one job does in every slot of the horizon, seen from the cluster as a whole: per slot
a *configuration* (worker count W, the fewest PSs that carry them, local or spread) or nothing, and the
slot it completes in.  It uses, per slot, W*alpha + S*beta of each resource and, when spread,
W*worker_gbps + S*ps_gbps of machine uplinks (every task of a spread job reserves its bandwidth on its
own machine's uplink at least, MODEL.md 3.4).  What it leaves out (which machines, which links above
them, PS counts above the fewest) can only make a real schedule look costlier, so every valid schedule's
projection is a column and the column LP is a relaxation of MODEL.md:

- a local configuration runs at the best ``local_gbps`` among the machines it fits on; a spread one at
  the table's best rate over the machine counts it could span (linear model: W / theta(worker_gbps));
- GPU types (MODEL.md 8): a configuration also has the type of its workers, one the job runs on (with a
  machine of that type holding it, or one worker when spread) and runs at that type's rates; beside the
  cluster's totals it uses W*alpha of its type's machines (its workers sit there; its PSs anywhere);
- a slot reconfigures (MODEL.md 4) when its configuration differs from the previous slot's, the job was
  paused, or it starts; the same configuration on other machines is counted as no change (optimistic).

The pricing DP walks the slots keeping, per (previous configuration, progress bucket), the least cost so
far and the MOST progress of any state merged into it, and drops states another with the same previous
configuration beats on both progress and cost: merging can only make the DP optimistic, so its
least reduced cost is at most the true least over real schedules (what a Lagrangian bound needs), and
the column it returns is its cheapest path re-scored exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placement.model.instance import COMPLETE, Instance, Job

__all__ = ["Config", "JobSchedules", "PricedColumn"]

BUCKETS = 4000  # progress buckets per job: merging error at most one bucket (of B/BUCKETS) per slot


@dataclass(frozen=True)
class Config:
    """What a job runs in one slot, as the cluster-wide rows see it."""

    workers: int
    ps: int
    local: bool
    rate: float          # mini-batches per second of the whole job
    use: np.ndarray      # per resource
    link_gbps: float     # uplink bandwidth reserved (0 when local)
    gpu_type: int        # the workers' GPU type, a code into Topology.gpu_types


@dataclass(frozen=True)
class PricedColumn:
    """A priced schedule: ``least`` is the DP's (optimistic) least reduced cost; ``slots`` the
    configuration index per slot from arrival (-1: nothing); ``cost`` its exact weighted JCT."""

    least: float
    least_lattice: float
    slots: tuple[int, ...]
    cost: float


class JobSchedules:
    """The configurations of one job and the pricing DP over its schedules."""

    def __init__(self, instance: Instance, job: Job):
        self.instance, self.job = instance, job
        self.configs = _configs(instance, job)
        self.rate = np.array([c.rate for c in self.configs])
        self.first = job.arrival
        self.idle_cost = job.weight * ((instance.horizon - job.arrival) * instance.slot_seconds
                                       + instance.unfinished_seconds(job, job.work_batches))

    def usage(self) -> np.ndarray:
        """Per configuration: the resources then the uplink bandwidth it reserves, then on a
        cluster with GPU types, per type and resource, what its workers use of that type's machines."""
        topo, res = self.instance.topology, self.instance.resources
        width = len(res) + 1 + (len(topo.gpu_types) * len(res) if topo.typed else 0)
        out = np.zeros((len(self.configs), width))
        alpha = np.array([self.job.worker.get(r, 0.0) for r in res])
        for k, c in enumerate(self.configs):
            out[k, : len(res) + 1] = [*c.use, c.link_gbps]
            if topo.typed:
                at = len(res) + 1 + c.gpu_type * len(res)
                out[k, at: at + len(res)] = c.workers * alpha
        return out

    def score(self, slots: tuple[int, ...]) -> tuple[float, float]:
        """The exact weighted JCT of a schedule (config per slot from arrival), and the same with an
        unfinished job charged only (T - a) Delta (the lattice cost)."""
        inst, job = self.instance, self.job
        dt, loss = inst.slot_seconds, min(job.restart_seconds, inst.slot_seconds)
        done, prev = 0.0, -1
        for i, k in enumerate(slots):
            if k >= 0:
                done += self.rate[k] * (dt - (loss if k != prev else 0.0))
                if done >= job.work_batches * COMPLETE:
                    cost = job.weight * (i + 1) * dt
                    return cost, cost
            prev = k
        lattice = job.weight * (inst.horizon - job.arrival) * dt
        return lattice + job.weight * inst.unfinished_seconds(job, job.work_batches - done), lattice

    def price(self, penalty: np.ndarray) -> PricedColumn:
        """The least (penalty + weighted JCT) over schedules; ``penalty[t, k] >= 0`` is charged for
        running configuration k in slot t (the duals' price of its usage)."""
        inst, job = self.instance, self.job
        T, dt = inst.horizon, inst.slot_seconds
        K, B, w = len(self.configs), job.work_batches, job.weight
        loss = min(job.restart_seconds, dt)
        prev = np.array([K])          # state: previous configuration (K: none), progress, cost so far
        prog = np.zeros(1)
        cost = np.zeros(1)
        back: list[tuple[np.ndarray, np.ndarray]] = []   # per slot: (parent state, choice) of each state
        done_cost, done_lattice, done_at = np.inf, np.inf, (-1, -1, -1)  # best completion: (slot, state, k)
        choice = np.arange(K + 1)
        rate = np.append(self.rate, 0.0)
        for t in range(self.first, T):
            i = t - self.first
            kk = np.broadcast_to(choice[None, :], (len(prev), K + 1))
            new_prog = prog[:, None] + rate[kk] * (dt - np.where(kk == prev[:, None], 0.0, loss))
            new_cost = cost[:, None] + np.append(penalty[t], 0.0)[kk]
            complete = (kk < K) & (new_prog >= B * COMPLETE)
            if complete.any():
                c = np.where(complete, new_cost + w * (i + 1) * dt, np.inf)
                s, k = np.unravel_index(int(np.argmin(c)), c.shape)
                done_lattice = min(done_lattice, float(c[s, k]))
                if c[s, k] < done_cost:
                    done_cost, done_at = float(c[s, k]), (i, int(s), int(k))
            parent, pick = np.nonzero(~complete)
            p, c = new_prog[parent, pick], new_cost[parent, pick]
            key = pick * (BUCKETS + 1) + np.minimum(np.floor(p / B * BUCKETS), BUCKETS).astype(np.int64)
            order = np.lexsort((c, key))
            key, p, c, parent, pick = key[order], p[order], c[order], parent[order], pick[order]
            head = np.r_[True, key[1:] != key[:-1]]
            most = np.full(int(head.sum()), -np.inf)
            np.maximum.at(most, np.cumsum(head) - 1, p)
            keep = _pareto(pick[head], most, c[head])
            prev, prog, cost = pick[head][keep], most[keep], c[head][keep]
            back.append((parent[head][keep], pick[head][keep]))
        charge = np.array([inst.unfinished_seconds(job, max(B - q, 0.0)) for q in prog])
        tail = cost + w * ((T - self.first) * dt + charge)
        at = int(np.argmin(tail))
        least = min(done_cost, float(tail[at]))
        least_lattice = min(done_lattice, float(np.min(cost)) + w * (T - self.first) * dt)
        if tail[at] <= done_cost:
            slots = _walk(back, len(back) - 1, at)
        else:
            i, s, k = done_at
            slots = (*_walk(back, i - 1, s), k)
        slots = tuple(-1 if k == K else k for k in slots)
        return PricedColumn(least, least_lattice, slots, self.score(slots)[0])


def _pareto(k: np.ndarray, prog: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of the states no other state with the same previous configuration beats on both
    progress (more) and cost (less): a dominated state's every continuation is matched or beaten."""
    order = np.lexsort((-prog, -k))            # configuration descending, then progress descending
    ks, cs = k[order], cost[order]
    span = float(cs.max() - cs.min()) + 1.0 if len(cs) else 1.0
    shifted = cs + ks * (2.0 * span)            # groups ordered so a running minimum restarts per group
    before = np.r_[np.inf, np.minimum.accumulate(shifted)[:-1]]
    first = np.r_[True, ks[1:] != ks[:-1]]
    return np.sort(order[first | (shifted < before)])


def _walk(back: list[tuple[np.ndarray, np.ndarray]], last: int, state: int) -> tuple[int, ...]:
    """The choices that led to ``state`` after slot index ``last``."""
    out = []
    for i in range(last, -1, -1):  # last = -1: the start state, no choices yet
        parent, pick = back[i]
        out.append(int(pick[state]))
        state = int(parent[state])
    return tuple(reversed(out))


def _configs(instance: Instance, job: Job) -> list[Config]:
    """Every (W, local/spread, GPU type) the job could run in some slot, with its rate and cluster-wide
    usage (one type, None, on a cluster without types)."""
    res = instance.resources
    cap = instance.capacity_matrix
    alpha = np.array([job.worker.get(r, 0.0) for r in res])
    beta = np.array([job.ps.get(r, 0.0) for r in res])
    topo = instance.topology
    machines = topo.machines
    holds_worker = np.all(alpha[None, :] <= cap + 1e-9, axis=1)
    types = [(k, g, topo.type_code == k) for k, g in enumerate(topo.gpu_types) if job.runs_on(g)]
    out = []
    for W in range(job.min_workers, job.max_workers + 1):
        S = job.min_ps(W)
        use = W * alpha + S * beta
        fits = np.all(use[None, :] <= cap + 1e-9, axis=1)
        for k, g, of_type in types:
            if (fits & of_type).any():
                gbps = max(m.local_gbps for m, f in zip(machines, fits & of_type) if f)
                out.append(Config(W, S, True, job.rate(W, 1, gbps, g), use, 0.0, k))
            if len(machines) > 1 and W + S >= 2 and (holds_worker & of_type).any():
                rate = _best_spread_rate(job, W, g, len(machines))
                out.append(Config(W, S, False, rate, use, W * job.worker_gbps + S * job.ps_gbps, k))
    return out


def _best_spread_rate(job: Job, workers: int, gpu_type: str | None, machines: int) -> float:
    """The fastest spread rate of ``workers`` workers on ``gpu_type`` over any number of
    machines the cluster has: a valid schedule may span more machines than W + min_ps(W)
    (extra PSs are allowed), and a table's spread rows need not slow down as they widen."""
    if job.speed is None:
        return job.rate(workers, 2, 0.0, gpu_type)
    table = job.speed.table(gpu_type)
    return max(table.rate(workers, key) for key, _ in table.spread if key <= machines)
