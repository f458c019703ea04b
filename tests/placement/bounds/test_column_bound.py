"""The column bound (placement.bounds.column_bound): never above the optimum, by brute force on tiny instances
with contention, restarts, pauses and speed tables, and tight where the cluster is not the bottleneck."""
from __future__ import annotations

import random
from functools import cache

import numpy as np
import pytest

from placement.bounds.column_plan import ColumnPlan
from placement.chain import Chain, SlotRules
from placement.bounds.column_bound import column_bound, score_lattice
from placement.model.clusters import RESOURCES, star
from placement.formulation.job_schedules import JobSchedules
from placement.model.evaluate import score, validate
from placement.traces.generate import generate
from placement.offline.greedy import greedy
from placement.model.instance import Instance, InstanceError, Job
from placement.model.speed import SpeedTable

from ..conftest import EXAMPLES, bruteforce


BF = bruteforce()


def tiny(seed: int) -> Instance:
    """<= 3 jobs on 1-2 small machines over 2-3 slots: GPUs short, restarts of 0-12 s on 10 s slots
    (some lose whole slots), some jobs with a concave speed table, weights 1-3 and one of 0.5."""
    rng = random.Random(seed)
    while True:
        topo = star(rng.choice([1, 2, 2]), capacity={"gpu": rng.choice([1, 2]), "cpu": rng.choice([1, 2, 3]), "mem": 8},
                    local_gbps=rng.choice([2, 50]), link_gbps=rng.choice([0.5, 1, 2, 4, 8]))
        T = rng.choice([2, 3])
        jobs = []
        for k in range(rng.choice([1, 2, 3])):
            U = rng.choice([1, 2])
            tau, grad = rng.choice([0.05, 0.1]), rng.choice([0, 5, 20])
            rate = U * 10.0 / (tau + 2 * grad * 0.008 / 50)
            speed = None
            if rng.random() < 0.3 and U == 2:
                speed = SpeedTable(min_workers=1, local=(10.0, 16.0), spread=((2, (8.0, 12.0)),))
                rate = 16.0 * 10
            jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, T - 1]),
                            work_batches=round(rng.uniform(0.3, 1.8) * rate, 1), batch_seconds=tau,
                            gradient_mb=grad, worker={"gpu": 1}, ps={"cpu": 1}, min_workers=1, max_workers=U,
                            worker_gbps=rng.choice([1, 2]), ps_gbps=rng.choice([1, 2]),
                            weight=rng.choice([1, 2, 3, 0.5]), restart_seconds=rng.choice([0.0, 2.0, 5.0, 12.0]),
                            speed=speed))
        try:
            return Instance(slot_seconds=10.0, horizon=T, resources=RESOURCES, topology=topo,
                            jobs=tuple(jobs), name=f"tiny{seed}")
        except InstanceError:
            continue


@cache
def cases() -> tuple:
    out = []
    for seed in range(60):
        inst = tiny(seed)
        try:
            best, _, _ = BF.optimum(inst, limit=3000)
        except ValueError:
            continue
        out.append((inst, best, column_bound(inst, time_limit=30)))
    return tuple(out)


def test_bound_never_exceeds_the_brute_force_optimum():
    runs = cases()
    assert len(runs) >= 25
    for inst, best, cb in runs:
        assert cb.bound <= best * (1 + 1e-9) + 1e-9, (inst.name, cb, best)


def test_bound_is_tight_on_many_and_the_sample_is_interesting():
    runs = cases()
    tight = sum(cb.bound >= best * (1 - 1e-9) for _, best, cb in runs)
    assert tight >= len(runs) // 2, tight
    assert any(cb.bound < best * (1 - 1e-6) for _, best, cb in runs)      # contention the columns miss
    assert any(any(j.restart_seconds >= inst.slot_seconds for j in inst.jobs) for inst, _, _ in runs)
    assert any(any(j.speed is not None for j in inst.jobs) for inst, _, _ in runs)


def test_the_lagrangian_value_is_itself_below_the_optimum():
    for inst, best, cb in cases():
        assert cb.lagrangian <= best * (1 + 1e-9) + 1e-9, inst.name


def test_lattice_step_is_the_weights_gcd_times_the_slot():
    inst = tiny(3)
    weights = {j.weight for j in inst.jobs}
    jobs = tuple(Job(**{**j.__dict__, "weight": w}) for j, w in zip(inst.jobs, [2, 4, 6]))
    two_four = Instance(slot_seconds=10.0, horizon=inst.horizon, resources=RESOURCES, topology=inst.topology,
                        jobs=jobs, name="w")
    assert score_lattice(two_four) == 20.0
    halves = Instance(slot_seconds=10.0, horizon=inst.horizon, resources=RESOURCES, topology=inst.topology,
                      jobs=tuple(Job(**{**j.__dict__, "weight": 0.5}) for j in inst.jobs), name="h")
    assert score_lattice(halves) == 5.0
    assert weights  # the drawn instance has jobs


@pytest.mark.parametrize("name, optimum", [("bottleneck", 300.0), ("racks", 240.0)])
def test_examples_bound_reaches_the_hand_checked_optimum(name, optimum):
    cb = column_bound(Instance.load(EXAMPLES / f"{name}.json"), time_limit=30)
    assert cb.bound == pytest.approx(optimum, rel=1e-9)
    assert cb.source.startswith("column LP")


def test_local_example_bound_is_below_greedy():
    inst = Instance.load(EXAMPLES / "local.json")
    assert column_bound(inst, time_limit=30).bound <= score(inst, greedy(inst)).objective * (1 + 1e-9)


def test_the_dp_matches_a_direct_enumeration_of_one_jobs_schedules():
    """Zero prices: the DP's least cost is the best exact score over every config sequence."""
    from itertools import product

    for seed in range(30):
        inst = tiny(seed)
        for job in inst.jobs:
            js = JobSchedules(inst, job)
            priced = js.price(np.zeros((inst.horizon, len(js.configs))))
            slots = inst.horizon - job.arrival
            best = min(js.score(seq)[0] for seq in product(range(-1, len(js.configs)), repeat=slots))
            assert priced.least <= best * (1 + 1e-12)
            assert priced.cost == pytest.approx(best, rel=1e-12), (inst.name, job.id)


@pytest.mark.parametrize("name, optimum", [("bottleneck", 300.0), ("racks", 240.0), ("local", 480.0)])
def test_the_column_plan_is_valid_and_reaches_the_examples_optimum(name, optimum):
    inst = Instance.load(EXAMPLES / f"{name}.json")
    out = Chain([SlotRules(), ColumnPlan()]).run(inst)
    assert out.schedule is not None and validate(inst, out.schedule) == []
    assert out.report.objective == pytest.approx(optimum) and out.trace.bound == pytest.approx(optimum)


def test_the_column_plan_beats_greedy_where_the_cluster_is_contended():
    inst = generate(jobs=35, cluster="racks:2x4", load=4.0, seed=2)
    plan = Chain([SlotRules(), ColumnPlan()]).run(inst)
    assert validate(inst, plan.schedule) == []
    assert plan.trace.bound <= plan.report.objective < score(inst, greedy(inst)).objective
