"""The exact model against brute force on tiny instances, the shipped examples, and its edges.

Brute force (``bruteforce.py``) enumerates every valid schedule and scores it with the
referee, so "exact optimum == brute force" checks the whole chain: LCA rows, rates, link
loads, completion indicators, life rule, unfinished charge and decoding.
"""
from __future__ import annotations

import importlib.util
import random
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from placement.clusters import RESOURCES, racks, star
from placement.evaluate import score, validate
from placement.exact_referee import solve_exact_model
from placement.formulation.exact import formulate_exact
from placement.formulation.per_machine import formulate
from placement.instance import Instance, InstanceError, Job
from placement.topology import Link, Machine, Switch, Topology
from solvers.lp import solve_lp
from solvers.result import Status

from .conftest import EXAMPLES


def _load(name: str, file: str):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(file))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


BF = _load("placement_test_bruteforce", "bruteforce.py")

#: candidate schedules beyond which a drawn instance is not tiny enough to enumerate
LIMIT = 3000


def tiny(seed: int, restarts: bool = False) -> Instance:
    """A random instance of <= 2 jobs on star:1 or star:2, <= 3 slots, max_workers <= 2,
    one GPU per worker and one CPU per PS, capacities of 1-3, links from hopeless for
    spreading (0.5 Gbps) to roomy, kappa 0.5-2, work of 0.3-1.6 slots at full local speed."""
    rng = random.Random(seed)
    while True:
        n = rng.choice([1, 2, 2])
        topo = star(n, capacity={"gpu": rng.choice([1, 2]), "cpu": rng.choice([1, 2, 3]), "mem": 8},
                    local_gbps=rng.choice([2, 50]), link_gbps=rng.choice([0.5, 1, 2, 3, 4, 8]))
        T = rng.choice([2, 3])
        jobs = []
        for k in range(rng.choice([1, 2, 2])):
            U = rng.choice([1, 2])
            tau, grad = rng.choice([0.05, 0.1]), rng.choice([0, 5, 20])
            rate = U * 10.0 / (tau + 2 * grad * 0.008 / 50)
            jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, T - 1]),
                            work_batches=round(rng.uniform(0.3, 1.6) * rate, 1), batch_seconds=tau,
                            gradient_mb=grad, worker={"gpu": 1}, ps={"cpu": 1}, min_workers=rng.choice([1, U]),
                            max_workers=U, worker_gbps=rng.choice([1, 2]), ps_gbps=rng.choice([1, 2]),
                            weight=rng.choice([1, 2, 3]),
                            restart_seconds=rng.choice([2.0, 5.0, 12.0]) if restarts else 0.0))
        try:
            return Instance(slot_seconds=10.0, horizon=T, resources=RESOURCES, topology=topo,
                            jobs=tuple(jobs), name=f"tiny{seed}")
        except InstanceError:
            continue


@cache
def cases(restarts: bool) -> tuple:
    """(instance, brute-force optimum, its schedule, exact outcome) for the enumerable seeds."""
    out = []
    for seed in range(40 if not restarts else 10):
        inst = tiny(seed + 1000 * restarts, restarts)
        try:
            best, schedule, _ = BF.optimum(inst, limit=LIMIT)
        except ValueError:
            continue
        out.append((inst, best, schedule, solve_exact_model(inst, time_limit=30)))
    return tuple(out)


def test_exact_optimum_equals_brute_force():
    runs = cases(False)
    assert len(runs) >= 15
    for inst, best, _, out in runs:
        assert out.exact, inst.name
        assert out.status is Status.OPTIMAL, inst.name
        assert out.objective == pytest.approx(best, rel=1e-9, abs=1e-6), inst.name
        assert out.bound == pytest.approx(best, rel=1e-6, abs=1e-6), inst.name


def test_tiny_sample_covers_the_interesting_cases():
    runs = cases(False)

    def spread(inst, schedule):
        return any(len({a.machine for a in s.allocations if a.job == j.id}) > 1
                   for s in schedule.slots for j in inst.jobs)

    reports = [score(inst, out.schedule) for inst, _, _, out in runs]
    assert sum(spread(inst, out.schedule) for inst, _, _, out in runs) >= 3
    assert any(max(j.kappa for j in inst.jobs) > 1 for inst, *_ in runs)
    assert any(j.arrival > 0 for inst, *_ in runs for j in inst.jobs)
    assert any(len(inst.topology.machines) == 1 for inst, *_ in runs)
    assert any(len(inst.topology.machines) == 2 and inst.topology.links[0].gbps < 1 for inst, *_ in runs)
    assert any(r.unfinished for r in reports) and any(r.unfinished == 0 for r in reports)


def test_every_schedule_validates_and_scores_as_reported():
    for inst, _, _, out in cases(False) + cases(True):
        assert validate(inst, out.schedule) == []
        assert score(inst, out.schedule).objective == pytest.approx(out.objective)


def test_lp_bound_is_below_the_exact_optimum():
    for inst, best, _, _ in cases(False):
        problem, _ = formulate(inst)
        lp = solve_lp(problem)
        assert lp.status is Status.OPTIMAL
        assert lp.objective <= best + 1e-6 * max(1.0, best), inst.name


def test_with_restarts_the_model_is_a_flagged_relaxation():
    runs = cases(True)
    assert len(runs) >= 4
    for inst, best, _, out in runs:
        assert not out.exact and "relaxation" in out.message
        assert out.status is Status.OPTIMAL
        assert out.bound <= best + 1e-6, inst.name       # loss-free progress only helps
        assert out.objective >= best - 1e-6, inst.name   # a valid schedule scored with losses
    assert any(out.bound < best - 1 for _, best, _, out in runs)  # and the relaxation is not tight


@pytest.mark.parametrize("name, optimum", [("bottleneck", 300.0), ("racks", 240.0)])
def test_examples_reach_the_hand_checked_optimum(name, optimum):
    inst = Instance.load(EXAMPLES / f"{name}.json")
    out = solve_exact_model(inst)
    assert out.exact and out.status is Status.OPTIMAL
    assert out.objective == pytest.approx(optimum) and out.bound == pytest.approx(optimum)
    assert validate(inst, out.schedule) == []


def test_local_example_has_restarts_and_is_flagged():
    inst = Instance.load(EXAMPLES / "local.json")
    out = solve_exact_model(inst)
    assert not out.exact and "job(s) b" in out.message and "relaxation" in out.message
    assert validate(inst, out.schedule) == []
    # the shipped valid schedule scores 480, so the bound may not exceed it
    assert out.bound <= 480 + 1e-6 <= out.objective + 1e-6


def test_job_that_cannot_run_is_charged_unfinished():
    # two one-GPU machines, a job needing 2 workers, links too thin to spread: it never runs
    topo = star(2, capacity={"gpu": 1, "cpu": 4, "mem": 8}, link_gbps=0.5)
    stuck = Job(id="stuck", arrival=1, work_batches=100, batch_seconds=0.1, worker={"gpu": 1},
                ps={"cpu": 1}, min_workers=2, max_workers=2, worker_gbps=1, ps_gbps=1, weight=2)
    ok = Job(id="ok", arrival=0, work_batches=50, batch_seconds=0.1, worker={"gpu": 1},
             ps={"cpu": 1}, max_workers=1, worker_gbps=1, ps_gbps=1)
    inst = Instance(slot_seconds=10, horizon=3, resources=RESOURCES, topology=topo, jobs=(stuck, ok), name="stuck")
    out = solve_exact_model(inst)
    assert out.status is Status.OPTIMAL and validate(inst, out.schedule) == []
    report = score(inst, out.schedule)
    assert [j.finished for j in report.jobs] == [False, True]
    # stuck: (3 - 1) slots + 100 batches * 0.1 s / 2 workers = 25 s, weight 2; ok: one slot
    assert out.objective == pytest.approx(2 * 25 + 10) == BF.optimum(inst)[0]


def test_one_slot_horizon_leaves_the_long_job_unfinished():
    inst = Instance(slot_seconds=10, horizon=1, resources=RESOURCES, topology=star(1, capacity={"gpu": 2, "cpu": 2}),
                    jobs=(Job(id="long", arrival=0, work_batches=500, batch_seconds=0.1, worker={"gpu": 1},
                              ps={"cpu": 1}, max_workers=2, worker_gbps=1, ps_gbps=1),), name="one")
    out = solve_exact_model(inst)
    # 2 workers x 100 batches in slot 0; 300 left at 0.1 s / 2 workers = 15 s
    assert out.status is Status.OPTIMAL and out.objective == pytest.approx(10 + 15) == BF.optimum(inst)[0]


def test_decoder_drops_tasks_after_the_actual_completion():
    inst = Instance.load(EXAMPLES / "bottleneck.json")
    problem, decoder = formulate_exact(inst)
    core = decoder.core
    x = np.zeros(problem.n)
    # q alone on r1m0 in every slot (z left at 0, as a lagging incumbent would): done in slot 0
    q = inst.job_index["q"]
    h = inst.topology.machine_index["r1m0"]
    on = (core.job == q) & (core.dom == h) & ((core.machine == h) | (core.machine == -1))
    x[: core.n][on] = 1
    schedule = decoder.decode(x).to_schedule(inst.name)
    assert [s.t for s in schedule.slots] == [0]
    assert validate(inst, schedule) == []


def test_time_limit_gives_a_clear_status():
    jobs = tuple(Job(id=f"j{k}", arrival=k % 3, work_batches=3000 + 700 * k, batch_seconds=0.1, gradient_mb=20,
                     worker={"gpu": 1, "cpu": 2, "mem": 4}, ps={"cpu": 2, "mem": 4}, max_workers=4,
                     worker_gbps=2, ps_gbps=4, weight=1 + k % 2) for k in range(6))
    topo = racks(2, 2, capacity={"gpu": 2, "cpu": 16, "mem": 64}, machine_gbps=10, rack_gbps=10)
    inst = Instance(slot_seconds=60, horizon=8, resources=RESOURCES, topology=topo, jobs=jobs, name="mid")
    out = solve_exact_model(inst, time_limit=0.01)
    assert out.status in (Status.TIME_LIMIT, Status.FEASIBLE)
    if out.status is Status.TIME_LIMIT:
        assert out.schedule is None and out.objective is None and "no schedule (time_limit)" in out.message
    else:
        assert validate(inst, out.schedule) == [] and out.bound <= out.objective


def test_cpsat_backend_is_unavailable_with_a_reason():
    out = solve_exact_model(Instance.load(EXAMPLES / "bottleneck.json"), backend="cpsat")
    assert out.status is Status.UNAVAILABLE and out.schedule is None and "continuous" in out.message


def test_machine_above_a_machine_is_refused():
    machines = (Machine("m0", {"gpu": 1}, 10), Machine("m1", {"gpu": 1}, 10))
    topo = Topology(machines, (Switch("sw"),), (Link("m0", "sw", 10), Link("m1", "m0", 10)), "sw")
    inst = Instance(slot_seconds=10, horizon=2, resources=("gpu",), topology=topo,
                    jobs=(Job(id="j", arrival=0, work_batches=10, batch_seconds=1, worker={"gpu": 1}, ps={},
                              max_workers=1, worker_gbps=1, ps_gbps=1),), name="chain")
    with pytest.raises(ValueError, match="machines at the leaves"):
        formulate_exact(inst)
