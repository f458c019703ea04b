"""The pooled bound (placement.bounds.pooled_bound): never above the optimum (brute force, linear and table
jobs, tables whose spread rows beat the local one), never above a simulated run's score, and above
the no-contention floor when jobs must queue."""
from __future__ import annotations

import dataclasses
import random

import pytest

from placement.model.clusters import RESOURCES, star
from placement.offline.ilp import solve_ilp
from placement.model.evaluate import isolated_jct
from placement.formulation import formulate_aggregated, formulate_configuration
from placement.traces.generate import generate
from placement.model.instance import Instance, Job
from placement.online.registry import make_policy
from placement.bounds.pooled_bound import (AverageJctBounds, as_one_machine, average_jct_bound, average_jct_bounds,
                                    pooled_bound, pooled_size)
from placement.simulate import simulate
from placement.model.speed import SpeedTable
from placement.model.topology import Machine, Topology
from solvers.lp import solve_lp

from ..conftest import bruteforce
from .test_column_bound import tiny as tiny_mixed
from ..formulation.test_time_indexed import tiny as tiny_linear

BF = bruteforce()


def table_instance(seed: int) -> Instance:
    """<= 2 table jobs on star:1 or star:2; spread rows may be faster than local ones (data, MODEL.md 8)."""
    rng = random.Random(seed)
    topo = star(rng.choice([1, 2]), capacity={"gpu": 2, "cpu": 2, "mem": 8}, local_gbps=50,
                link_gbps=rng.choice([1, 4, 8]))
    jobs = []
    for k in range(rng.choice([1, 2])):
        one = rng.uniform(5, 20)
        local = (one, one * rng.uniform(1.1, 1.9))
        spread = (one * rng.uniform(0.6, 1.4), local[1] * rng.uniform(0.6, 1.6))
        jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, 1]), work_batches=round(rng.uniform(0.4, 2.0) * one * 10, 1),
                        batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1}, max_workers=2, worker_gbps=1,
                        ps_gbps=rng.choice([1, 2]), weight=rng.choice([1, 2]),
                        restart_seconds=rng.choice([0, 2]), speed=SpeedTable(1, local, ((2, spread),))))
    return Instance(slot_seconds=10.0, horizon=rng.choice([2, 3]), resources=RESOURCES, topology=topo,
                    jobs=tuple(jobs), name=f"table{seed}")


def _checked_against_brute_force(instances) -> int:
    checked = 0
    for inst in instances:
        try:
            best, _, _ = BF.optimum(inst, limit=3000)
        except ValueError:  # too many schedules to enumerate
            continue
        bound = pooled_bound(inst)
        assert bound is not None and bound <= best * (1 + 1e-7), inst.name
        checked += 1
    return checked


def test_never_above_the_optimum_with_linear_jobs():
    instances = [tiny_linear(s, restarts=bool(s % 2)) for s in range(30)]
    assert _checked_against_brute_force(instances) >= 20


def test_never_above_the_optimum_with_mixed_jobs_weights_and_restarts():
    assert _checked_against_brute_force(tiny_mixed(s) for s in range(30)) >= 20


def test_never_above_the_optimum_with_tables():
    assert _checked_against_brute_force(table_instance(s) for s in range(40)) >= 10


def test_at_least_the_aggregated_models_value_and_tighter_on_a_concave_table():
    """Why the configuration model: per worker count it credits the table's own rate, where the
    aggregated model credits every worker at the table's best rate per worker."""
    for s in range(20):
        inst = table_instance(s)
        assert pooled_bound(inst) >= solve_lp(formulate_aggregated(as_one_machine(inst))[0]).objective * (1 - 1e-7)
    # Two jobs of 600 batches on 4 GPUs, concave: the aggregated model runs both at 13.5 batches/s
    # on 1.35 GPUs each; the configuration model knows 2 + 2 GPUs give 12 each.
    topo = star(1, capacity={"gpu": 4, "cpu": 4, "mem": 8}, local_gbps=10, link_gbps=100)
    jobs = tuple(Job(id=f"j{k}", arrival=0, work_batches=600, batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1},
                     max_workers=4, worker_gbps=1, ps_gbps=4,
                     speed=SpeedTable(1, (10.0, 12.0, 13.0, 13.5), ((2, (1.0, 1.0, 1.0, 1.0)),)))
                 for k in range(2))
    inst = Instance(slot_seconds=10.0, horizon=10, resources=RESOURCES, topology=topo, jobs=jobs, name="concave")
    exact = solve_ilp(inst, time_limit=60)
    aggregated = solve_lp(formulate_aggregated(as_one_machine(inst))[0]).objective
    assert exact.exact and exact.objective == pytest.approx(100.0)  # 2 + 2 GPUs: 50 s, 5 slots each
    assert aggregated * 1.02 < pooled_bound(inst) <= exact.objective * (1 + 1e-7)


def test_a_spread_row_faster_than_local_is_kept():
    """Two 1-GPU machines; the job runs 4x faster spread over both than on one. Pooling with the
    local row only would claim it needs 4 slots where the optimum needs 1: a bound above the optimum."""
    topo = star(2, capacity={"gpu": 1, "cpu": 4, "mem": 8}, local_gbps=10, link_gbps=100)
    job = Job(id="j", arrival=0, work_batches=40, batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1},
              max_workers=2, worker_gbps=1, ps_gbps=2, speed=SpeedTable(1, (1.0, 1.0), ((2, (1.0, 4.0)),)))
    inst = Instance(slot_seconds=10.0, horizon=4, resources=RESOURCES, topology=topo, jobs=(job,), name="fast-spread")
    best, _, _ = BF.optimum(inst)
    assert best == pytest.approx(10.0)
    assert pooled_bound(inst) <= best * (1 + 1e-7)
    local_only = dataclasses.replace(as_one_machine(inst), jobs=inst.jobs)
    assert solve_lp(formulate_configuration(local_only, counts="all")[0]).objective > best * 1.5


def test_contention_lifts_it_above_the_floor():
    """Two jobs that each fill the cluster for two slots: alone each takes 2 slots (floor 4 slots in
    all); sharing, the best total is 2 + 4 slots. The bound must see some of that queueing."""
    topo = Topology((Machine("m", {"gpu": 4, "cpu": 8, "mem": 64}, 10),))
    jobs = tuple(Job(id=f"j{k}", arrival=0, work_batches=800, batch_seconds=0.1, worker={"gpu": 1},
                     ps={"cpu": 1}, max_workers=4, worker_gbps=1, ps_gbps=4) for k in range(2))
    inst = Instance(slot_seconds=10.0, horizon=6, resources=RESOURCES, topology=topo, jobs=jobs, name="queue")
    floor = sum(isolated_jct(inst, j) for j in jobs)
    exact = solve_ilp(inst, time_limit=60)
    best = exact.objective
    bound = pooled_bound(inst)
    assert exact.exact and floor == pytest.approx(40.0) and best == pytest.approx(60.0)
    assert floor < bound <= best * (1 + 1e-7)


@pytest.mark.parametrize("policy", ["greedy", "lp-rounding", "fifo"])
def test_never_above_a_simulated_run(policy):
    inst = generate(jobs=14, cluster="racks:2x2", seed=3, load=2.0, horizon=40)
    run = simulate(inst, policy=make_policy(policy))
    assert run.unfinished == () and not run.violations
    bound = pooled_bound(run.instance)
    assert bound is not None and bound <= run.report.objective * (1 + 1e-9)


def test_the_average_bound_weighs_every_job_alike():
    """Weights 1-3 in the instance; the average-JCT bound is the unit-weight LP over the jobs, and
    no run's unweighted average goes below it."""
    inst = generate(jobs=10, cluster="racks:1x2", seed=4, load=2.0, horizon=40)
    weighted = dataclasses.replace(inst, jobs=tuple(dataclasses.replace(j, weight=1 + k % 3)
                                                    for k, j in enumerate(inst.jobs)))
    unit = pooled_bound(dataclasses.replace(weighted, jobs=tuple(dataclasses.replace(j, weight=1)
                                                                  for j in weighted.jobs)))
    assert average_jct_bound(weighted) == pytest.approx(unit / len(inst.jobs))
    assert average_jct_bound(weighted) != pytest.approx(pooled_bound(weighted) / len(inst.jobs))
    run = simulate(weighted, policy=make_policy("greedy"))
    assert run.unfinished == () and average_jct_bound(weighted) <= run.average_jct * (1 + 1e-9)


def test_the_floor_counts_only_for_runs_that_finish_every_job():
    bounds = AverageJctBounds(floor=120.0, pooled=60.0, size=1)
    assert bounds.for_run(finished_all=True) == 120.0 and bounds.for_run(finished_all=False) == 60.0
    assert AverageJctBounds(floor=120.0, pooled=None, size=1).for_run(finished_all=False) is None


def test_a_model_over_the_size_limit_is_not_built():
    inst = generate(jobs=6, cluster="racks:1x2", seed=1, horizon=12)
    size = pooled_size(inst)
    assert size == sum((12 - j.arrival) * (j.max_workers - j.min_workers + 1) for j in inst.jobs)
    assert pooled_bound(inst, max_configurations=size - 1) is None
    assert pooled_bound(inst, max_configurations=size) is not None


def test_no_jobs_no_pooled_bound():
    empty = dataclasses.replace(generate(jobs=2, cluster="star:2", seed=0), jobs=())
    assert average_jct_bounds(empty) == AverageJctBounds(floor=0.0, pooled=None, size=0)
