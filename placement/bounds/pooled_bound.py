"""The pooled bound: the LP of the whole horizon with the cluster seen as one machine, a proven
lower bound on the weighted JCT of every valid schedule that contention still shows.

Why: an online run needs a yardstick. The no-contention floor (:func:`placement.model.evaluate.isolated_jct`)
ignores that jobs share the GPUs; the column bound (:mod:`placement.bounds.column_bound`) is the strongest
but its column generation converges slowly over hundreds of slots; the per-machine and aggregated
LPs grow with machines x slots. Pooling every machine's capacity into one machine keeps what decides
the queueing (per slot, the jobs share the cluster's total of each resource) at the size of one
machine, and forgets fragmentation, links and locality.

It is a relaxation (docs/formulation.md, 'The pooled bound'): the one machine has the summed
capacity of each resource and the fastest gradient exchange of any placement (the largest
``local_gbps`` or any job's ``worker_gbps``), and a job with a speed table gets, at every worker
count, its fastest rate over the local and every spread row. Every valid schedule then maps to a
feasible point of the configuration model with every worker count
(:func:`placement.formulation.formulate_configuration`, ``counts="all"``) of the one-machine
instance, slot by slot with the same worker count, at least its progress and at most its objective
terms; that model's LP value is a lower bound on its own optimum, so on the original one. The
configuration model rather than the aggregated one: the same value for linear jobs, tighter for
concave tables (the aggregated model credits every worker at the table's best rate per worker).

GPU types (MODEL.md 8), on a cluster whose machines are all leaves: one such machine per type
(its type's summed capacity, the fastest exchange, each type's table with its fastest rows)
under one switch whose links carry the summed machine uplinks of each type. A valid schedule's
job-slot maps to the local configuration on its workers' type's machine when all its tasks sit
on machines of that type, else (its PSs elsewhere) to a spread configuration of that type below
the switch, at least as fast and no heavier on any row (its tasks reserve their bandwidth on
their machines' uplinks; the per-type rows count workers only). So the jobs queue per type:
the A100s' speed is credited only to what fits in the A100s.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from placement.model.evaluate import isolated_jct
from placement.formulation.configuration import formulate_configuration
from placement.model.instance import Instance, Job
from placement.model.speed import SpeedTable, TypedSpeed
from placement.model.topology import Link, Machine, Switch, Topology
from solvers.lp import solve_lp
from solvers.result import Status

__all__ = ["MAX_CONFIGURATIONS", "AverageJctBounds", "as_one_machine", "average_jct_bound", "average_jct_bounds",
           "pooled_bound", "pooled_size"]

#: The most configurations (job, slot, worker count) the LP is built with: HiGHS takes about 0.85 KB
#: per configuration (2.5 GB at 3.0 million: workload-6 in tuned mode), so about 4 GB at most.
MAX_CONFIGURATIONS = 5_000_000


def as_one_machine(instance: Instance) -> Instance:
    """The relaxation of the module docstring: the same jobs on one machine with the cluster's
    summed capacity, as fast as its fastest placement; one per GPU type where :func:`_per_type`."""
    cap = instance.capacity_matrix
    fastest = max([instance.best_local_gbps] + [j.worker_gbps for j in instance.jobs])
    per_type = _per_type(instance)
    jobs = tuple(_fastest_rows(j, per_type) for j in instance.jobs)
    if not per_type:
        total = {r: float(cap[:, k].sum()) for k, r in enumerate(instance.resources)}
        return dataclasses.replace(instance, topology=Topology((Machine("cluster", total, fastest),)), jobs=jobs,
                                   name=instance.name + "-pooled")
    topo = instance.topology
    uplink = np.array([sum(topo.links[i].gbps for i in topo.path_links(m.id, topo.parent(m.id)))
                       for m in topo.machines])
    machines, links = [], []
    for k, g in enumerate(topo.gpu_types):
        mine = topo.type_code == k
        machines.append(Machine(f"pool{k}", {r: float(cap[mine, i].sum()) for i, r in enumerate(instance.resources)},
                                fastest, g))
        links.append(Link(f"pool{k}", "pool", float(uplink[mine].sum())))
    return dataclasses.replace(instance, topology=Topology(tuple(machines), (Switch("pool"),), tuple(links), "pool"),
                               jobs=jobs, name=instance.name + "-pooled")


def _per_type(instance: Instance) -> bool:
    """Pool per GPU type (module docstring): two types or more, every machine a leaf (a machine with
    machines below it may be a spread job's lowest common ancestor, whose tasks reserve no uplink)."""
    topo = instance.topology
    return len(topo.gpu_types) >= 2 and all(len(topo.below(m.id)) == 1 for m in topo.machines)


def pooled_size(instance: Instance) -> int:
    """The configurations of the pooled LP: per job, its slots from arrival to the horizon times its
    worker counts (on the one machine every count fits); pooled per type, at most two (local, spread)
    per type the job runs on."""
    types = instance.topology.gpu_types if _per_type(instance) else None
    return sum(max(0, instance.horizon - j.arrival) * (j.max_workers - j.min_workers + 1)
               * (1 if types is None else 2 * sum(j.runs_on(g) for g in types)) for j in instance.jobs)


def pooled_bound(instance: Instance, *, time_limit: float | None = None,
                 max_configurations: int = MAX_CONFIGURATIONS) -> float | None:
    """A proven lower bound on the optimal weighted JCT (MODEL.md 5, seconds) of ``instance``; None
    when the LP would have more than ``max_configurations`` configurations (:func:`pooled_size`) or
    is not solved to optimality within ``time_limit`` (then no bound is claimed).

    For a bound on the average JCT, pass the instance with every weight 1 and divide by the jobs."""
    if pooled_size(instance) > max_configurations:
        return None
    result = solve_lp(formulate_configuration(as_one_machine(instance), counts="all")[0], time_limit=time_limit)
    if result.status is not Status.OPTIMAL:
        return None
    return float(result.bound if result.bound is not None else result.objective)


def average_jct_bound(instance: Instance, *, time_limit: float | None = None,
                      max_configurations: int = MAX_CONFIGURATIONS) -> float | None:
    """Seconds below which no valid schedule's average JCT (MODEL.md 5) can be on ``instance``: the
    pooled bound with every weight 1, over the jobs; None as :func:`pooled_bound`."""
    if not instance.jobs:
        return None
    unit = dataclasses.replace(instance, jobs=tuple(dataclasses.replace(j, weight=1) for j in instance.jobs))
    bound = pooled_bound(unit, time_limit=time_limit, max_configurations=max_configurations)
    return None if bound is None else bound / len(unit.jobs)


@dataclass(frozen=True)
class AverageJctBounds:
    """Lower bounds on the average JCT of one instance (seconds from :func:`average_jct_bounds`).
    ``floor`` (the mean :func:`placement.model.evaluate.isolated_jct`) holds only for schedules that finish
    every job (an unfinished job's MODEL.md charge may be lower); ``pooled``
    (:func:`average_jct_bound`) holds for every valid schedule, None when it was not built (``size``
    over :data:`MAX_CONFIGURATIONS`) or not solved."""

    floor: float
    pooled: float | None
    size: int

    def for_run(self, finished_all: bool) -> float | None:
        """The larger bound that holds for a run: the floor counts only if it finished every job."""
        held = [b for b in (self.pooled, self.floor if finished_all else None) if b is not None]
        return max(held) if held else None


def average_jct_bounds(instance: Instance) -> AverageJctBounds:
    """Both average-JCT bounds of ``instance`` (the pooled one skipped above the size limit)."""
    size = pooled_size(instance)
    return AverageJctBounds(floor=float(np.mean([isolated_jct(instance, j) for j in instance.jobs] or [0.0])),
                            pooled=average_jct_bound(instance) if size <= MAX_CONFIGURATIONS else None,
                            size=size)


def _fastest_rows(job: Job, per_type: bool) -> Job:
    """A table job whose local row is, per worker count, its fastest rate over every row (on one
    machine every job is local, and a spread row may be faster than the local one; the spread rows
    stay, because a table must have one, and are read by the spread configurations of a pool per
    type). A per-type table: each type's so when pooled ``per_type``, else one table over all of them."""
    if job.speed is None:
        return job
    if job.speed.types is None:
        return dataclasses.replace(job, speed=_fastest([job.speed]))
    tables = [t for _, t in job.speed.by_type]
    if not per_type:
        return dataclasses.replace(job, speed=_fastest(tables))
    return dataclasses.replace(job, speed=TypedSpeed(tuple((g, _fastest([t])) for g, t in job.speed.by_type)))


def _fastest(tables: list[SpeedTable]) -> SpeedTable:
    """One table whose local row is the fastest of every row of ``tables`` (the first one's spread rows)."""
    rows = np.array([row for t in tables for row in (t.local, *(rates for _, rates in t.spread))])
    return SpeedTable(tables[0].min_workers, tuple(float(v) for v in rows.max(axis=0)), tables[0].spread)
