"""The exact model against brute force on tiny instances, the shipped examples, and its edges.

Brute force (``bruteforce.py``) enumerates every valid schedule and scores it with the
referee, so "exact optimum == brute force" checks the whole chain: LCA rows, rates, link
loads, restart losses, completion indicators, life rule, unfinished charge and decoding;
encoding sampled valid schedules checks the other direction point by point.
"""
from __future__ import annotations

import random
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from placement.model.clusters import RESOURCES, racks, star
from placement.model.evaluate import score, validate
from placement.offline.ilp import solve_ilp
from placement.formulation.time_indexed import formulate_time_indexed
from placement.formulation.per_machine import formulate_per_machine
from placement.model.instance import Instance, InstanceError, Job
from placement.model.schedule import Allocation, Schedule
from placement.offline.solve import solve
from placement.model.speed import SpeedTable
from placement.model.topology import Link, Machine, Switch, Topology
from solvers.check import violations
from solvers.lp import solve_lp
from solvers.result import Status

from ..conftest import EXAMPLES, bruteforce


BF = bruteforce()

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
    for seed in range(40 if not restarts else 30):
        inst = tiny(seed + 1000 * restarts, restarts)
        try:
            best, schedule, _ = BF.optimum(inst, limit=LIMIT)
        except ValueError:
            continue
        out.append((inst, best, schedule, solve_ilp(inst, time_limit=30)))
    return tuple(out)


@pytest.mark.parametrize("restarts", [False, True])
def test_exact_optimum_equals_brute_force(restarts):
    runs = cases(restarts)
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
        problem, _ = formulate_per_machine(inst)
        lp = solve_lp(problem)
        assert lp.status is Status.OPTIMAL
        assert lp.objective <= best + 1e-6 * max(1.0, best), inst.name


def test_restart_sample_covers_the_interesting_cases():
    runs = cases(True)
    dt = runs[0][0].slot_seconds
    restarts = {j.restart_seconds for inst, *_ in runs for j in inst.jobs}
    assert min(restarts) < dt <= max(restarts)                 # r < Delta and r >= Delta (a lost slot)
    free = [solve_ilp(replace(inst, jobs=tuple(replace(j, restart_seconds=0.0) for j in inst.jobs)))
            for inst, *_ in runs]
    assert sum(f.objective < best - 1 for f, (_, best, _, _) in zip(free, runs)) >= 3   # the losses matter


def sample_schedules(inst: Instance, count: int, seed: int) -> list:
    """Up to ``count`` distinct valid schedules drawn slot by slot from brute force's options."""
    alone = [BF.job_options(inst, j) for j in range(len(inst.jobs))]
    options = [BF.slot_options(inst, t, alone) for t in range(inst.horizon)]
    rng = random.Random(seed)
    out = {}
    for _ in range(20 * count):
        schedule = Schedule.from_allocations({t: rng.choice(opts) for t, opts in enumerate(options)}, inst.name)
        if not validate(inst, schedule):
            out.setdefault(schedule.slots, schedule)
        if len(out) == count:
            break
    return list(out.values())


def _moves(inst: Instance, schedule: Schedule) -> tuple[bool, bool]:
    """(some job pauses and resumes, some job runs on other machines in the next slot)."""
    where = {(a.job, s.t): set() for s in schedule.slots for a in s.allocations}
    for s in schedule.slots:
        for a in s.allocations:
            where[a.job, s.t].add(a.machine)
    ran = {j: sorted(t for jj, t in where if jj == j) for j in {j for j, _ in where}}
    resume = any(b - a > 1 for ts in ran.values() for a, b in zip(ts, ts[1:]))
    move = any(where[j, t] != where[j, t + 1] for j, t in where if (j, t + 1) in where)
    return resume, move


def _allocations(schedule: Schedule) -> set:
    return {(s.t, a) for s in schedule.slots for a in s.allocations if a.workers or a.ps}


def test_encoded_schedules_are_feasible_points_of_their_score():
    """Every sampled valid schedule (pauses, resumes, moves, restarts) encodes to a feasible
    point whose objective is its MODEL.md score, and decodes back to itself."""
    resumes = moves = 0
    for inst, _, best_schedule, _ in cases(True)[:10]:
        problem, decoder = formulate_time_indexed(inst)
        for schedule in [best_schedule, *sample_schedules(inst, 12, seed=len(inst.jobs))]:
            x = decoder.encode(schedule)
            assert violations(problem, x) == [], inst.name
            assert problem.objective(x) == pytest.approx(score(inst, schedule).objective, rel=1e-9), inst.name
            back = decoder.decode(x).to_schedule(inst.name)
            assert _allocations(back) == _allocations(schedule)
            resume, move = _moves(inst, schedule)
            resumes, moves = resumes + resume, moves + move
    assert resumes >= 3 and moves >= 3


def test_encode_refuses_invalid_schedules_and_what_the_model_cannot_hold():
    inst = Instance.load(EXAMPLES / "local.json")
    _, decoder = formulate_time_indexed(inst)
    with pytest.raises(ValueError, match="not a valid schedule"):
        decoder.encode(Schedule.load(EXAMPLES / "local.invalid.json"))
    # a valid schedule with 2 PSs where min_ps(max_workers) = 1: the model bounds the PS count by 1
    inst = Instance(slot_seconds=10, horizon=1, resources=RESOURCES, topology=star(1, capacity={"gpu": 1, "cpu": 2}),
                    jobs=(Job(id="a", arrival=0, work_batches=50, batch_seconds=0.1, worker={"gpu": 1},
                              ps={"cpu": 1}, max_workers=1, worker_gbps=1, ps_gbps=1),), name="two-ps")
    extra_ps = Schedule.from_allocations({0: [Allocation("a", "m0", 1, 2)]})
    assert validate(inst, extra_ps) == []
    with pytest.raises(ValueError, match="cannot hold its placement"):
        formulate_time_indexed(inst)[1].encode(extra_ps)
    out = solve_ilp(inst, start=extra_ps)          # the solve goes on without the start
    assert "MIP start not used" in out.message and out.status is Status.OPTIMAL and out.objective == 10


def test_earliest_completion_fixes_early_indicators():
    # 300 batches at 2 workers x 100 per 10-s slot: not before the second slot, the first one
    # losing 6 s to the start: 2 x 40 + 200 = 280 < 300, so not before the third either
    inst = Instance(slot_seconds=10, horizon=4, resources=RESOURCES, topology=star(1, capacity={"gpu": 2, "cpu": 2}),
                    jobs=(Job(id="a", arrival=0, work_batches=300, batch_seconds=0.1, worker={"gpu": 1},
                              ps={"cpu": 1}, max_workers=2, worker_gbps=1, ps_gbps=1, restart_seconds=6),),
                    name="early")
    problem, decoder = formulate_time_indexed(inst)
    assert problem.upper[decoder.z0 + np.arange(4)].tolist() == [0, 0, 1, 1]
    out = solve_ilp(inst)
    assert out.status is Status.OPTIMAL and out.objective == pytest.approx(30) == BF.optimum(inst)[0]


def test_start_is_encoded_and_never_beaten_by_a_worse_incumbent():
    inst = _mid()
    start = solve(inst, solver="greedy").schedule
    out = solve_ilp(inst, time_limit=0.5, start=start)
    assert out.schedule is not None and validate(inst, out.schedule) == []
    assert out.objective <= score(inst, start).objective + 1e-9
    assert out.status in (Status.FEASIBLE, Status.OPTIMAL) and "MIP start not used" not in out.message
    assert out.bound is None or out.bound <= out.objective + 1e-6


def test_invalid_start_is_refused():
    inst = Instance.load(EXAMPLES / "local.json")
    with pytest.raises(ValueError, match="start: not a valid schedule"):
        solve_ilp(inst, start=Schedule.load(EXAMPLES / "local.invalid.json"))


def multi_table(seed: int) -> Instance:
    """<= 2 jobs with speed tables whose spread rate differs on 2 and on 3 machines, on star:3."""
    rng = random.Random(seed)
    topo = star(3, capacity={"gpu": rng.choice([1, 2]), "cpu": rng.choice([1, 2]), "mem": 8}, local_gbps=50,
                link_gbps=rng.choice([2, 8]))
    jobs = []
    for k in range(rng.choice([1, 2])):
        one = rng.uniform(5, 20)
        local = [one, one * rng.uniform(1.2, 1.9)]
        two = [one * rng.uniform(0.6, 1.0), local[1] * rng.uniform(0.5, 1.2)]
        three = [r * rng.uniform(0.3, 1.3) for r in two]
        jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, 1]), work_batches=round(rng.uniform(0.4, 2.0) * one * 10, 1),
                        batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1}, max_workers=2, worker_gbps=1,
                        ps_gbps=rng.choice([1, 2]), weight=rng.choice([1, 2]), restart_seconds=rng.choice([0, 3, 12]),
                        speed=SpeedTable(1, tuple(local), ((2, tuple(two)), (3, tuple(three))))))
    return Instance(slot_seconds=10.0, horizon=rng.choice([2, 3]), resources=RESOURCES, topology=topo,
                    jobs=tuple(jobs), name=f"multi{seed}")


def test_speed_tables_are_exact_against_brute_force():
    """The table's rate by worker count and machines spanned (rows for 2 and 3 machines)."""
    spans = 0
    for seed in (1, 2, 10, 13, 24, 25, 26, 28):        # enumerable in well under a second each
        inst = multi_table(seed)
        best, schedule, _ = BF.optimum(inst, limit=5000)
        out = solve_ilp(inst, time_limit=30)
        assert out.exact and out.status is Status.OPTIMAL, inst.name
        assert out.objective == pytest.approx(best, rel=1e-9, abs=1e-6), inst.name
        assert out.bound == pytest.approx(best, rel=1e-6, abs=1e-6), inst.name
        problem, decoder = formulate_time_indexed(inst)
        for sample in [schedule, *sample_schedules(inst, 8, seed)]:
            x = decoder.encode(sample)
            assert violations(problem, x) == [], inst.name
            assert problem.objective(x) == pytest.approx(score(inst, sample).objective, rel=1e-9), inst.name
            spans += any(len({a.machine for a in s.allocations if a.job == j.id}) == 3
                         for s in sample.slots for j in inst.jobs)
    assert spans >= 3


@pytest.mark.parametrize("name, optimum", [("bottleneck", 300.0), ("racks", 240.0)])
def test_examples_reach_the_hand_checked_optimum(name, optimum):
    inst = Instance.load(EXAMPLES / f"{name}.json")
    out = solve_ilp(inst)
    assert out.exact and out.status is Status.OPTIMAL
    assert out.objective == pytest.approx(optimum) and out.bound == pytest.approx(optimum)
    assert validate(inst, out.schedule) == []


def test_local_example_with_restarts_is_exact():
    inst = Instance.load(EXAMPLES / "local.json")
    assert any(j.restart_seconds > 0 for j in inst.jobs)
    out = solve_ilp(inst)
    assert out.exact and out.message == "Optimal" and out.status is Status.OPTIMAL
    assert validate(inst, out.schedule) == []
    # the shipped valid schedule scores 480, and the bound proves nothing scores less
    assert out.objective == pytest.approx(480) == score(inst, Schedule.load(EXAMPLES / "local.valid.json")).objective
    assert out.bound == pytest.approx(480)


def test_job_that_cannot_run_is_charged_unfinished():
    # two one-GPU machines, a job needing 2 workers, links too thin to spread: it never runs
    topo = star(2, capacity={"gpu": 1, "cpu": 4, "mem": 8}, link_gbps=0.5)
    stuck = Job(id="stuck", arrival=1, work_batches=100, batch_seconds=0.1, worker={"gpu": 1},
                ps={"cpu": 1}, min_workers=2, max_workers=2, worker_gbps=1, ps_gbps=1, weight=2)
    ok = Job(id="ok", arrival=0, work_batches=50, batch_seconds=0.1, worker={"gpu": 1},
             ps={"cpu": 1}, max_workers=1, worker_gbps=1, ps_gbps=1)
    inst = Instance(slot_seconds=10, horizon=3, resources=RESOURCES, topology=topo, jobs=(stuck, ok), name="stuck")
    out = solve_ilp(inst)
    assert out.status is Status.OPTIMAL and validate(inst, out.schedule) == []
    report = score(inst, out.schedule)
    assert [j.finished for j in report.jobs] == [False, True]
    # stuck: (3 - 1) slots + 100 batches * 0.1 s / 2 workers = 25 s, weight 2; ok: one slot
    assert out.objective == pytest.approx(2 * 25 + 10) == BF.optimum(inst)[0]


def test_one_slot_horizon_leaves_the_long_job_unfinished():
    inst = Instance(slot_seconds=10, horizon=1, resources=RESOURCES, topology=star(1, capacity={"gpu": 2, "cpu": 2}),
                    jobs=(Job(id="long", arrival=0, work_batches=500, batch_seconds=0.1, worker={"gpu": 1},
                              ps={"cpu": 1}, max_workers=2, worker_gbps=1, ps_gbps=1),), name="one")
    out = solve_ilp(inst)
    # 2 workers x 100 batches in slot 0; 300 left at 0.1 s / 2 workers = 15 s
    assert out.status is Status.OPTIMAL and out.objective == pytest.approx(10 + 15) == BF.optimum(inst)[0]


def test_decoder_drops_tasks_after_the_actual_completion():
    inst = Instance.load(EXAMPLES / "bottleneck.json")
    problem, decoder = formulate_time_indexed(inst)
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


def _mid() -> Instance:
    jobs = tuple(Job(id=f"j{k}", arrival=k % 3, work_batches=3000 + 700 * k, batch_seconds=0.1, gradient_mb=20,
                     worker={"gpu": 1, "cpu": 2, "mem": 4}, ps={"cpu": 2, "mem": 4}, max_workers=4,
                     worker_gbps=2, ps_gbps=4, weight=1 + k % 2, restart_seconds=5.0 * k) for k in range(6))
    topo = racks(2, 2, capacity={"gpu": 2, "cpu": 16, "mem": 64}, machine_gbps=10, rack_gbps=10)
    return Instance(slot_seconds=60, horizon=8, resources=RESOURCES, topology=topo, jobs=jobs, name="mid")


def test_time_limit_gives_a_clear_status():
    inst = _mid()
    out = solve_ilp(inst, time_limit=0.01)
    assert out.status in (Status.TIME_LIMIT, Status.FEASIBLE)
    if out.status is Status.TIME_LIMIT:
        assert out.schedule is None and out.objective is None and "no schedule (time_limit)" in out.message
    else:
        assert validate(inst, out.schedule) == [] and out.bound <= out.objective


def test_cpsat_backend_is_unavailable_with_a_reason():
    out = solve_ilp(Instance.load(EXAMPLES / "bottleneck.json"), backend="cpsat")
    assert out.status is Status.UNAVAILABLE and out.schedule is None and "continuous" in out.message


def test_machine_above_a_machine_is_refused():
    machines = (Machine("m0", {"gpu": 1}, 10), Machine("m1", {"gpu": 1}, 10))
    topo = Topology(machines, (Switch("sw"),), (Link("m0", "sw", 10), Link("m1", "m0", 10)), "sw")
    inst = Instance(slot_seconds=10, horizon=2, resources=("gpu",), topology=topo,
                    jobs=(Job(id="j", arrival=0, work_batches=10, batch_seconds=1, worker={"gpu": 1}, ps={},
                              max_workers=1, worker_gbps=1, ps_gbps=1),), name="chain")
    with pytest.raises(ValueError, match="machines at the leaves"):
        formulate_time_indexed(inst)
