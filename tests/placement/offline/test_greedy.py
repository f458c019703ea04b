"""The greedy baseline: valid, finishes the examples as well as their hand-checked
schedules, keeps a rack-bound job in one rack, is stable, and is fast enough."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings

from placement.model.clusters import RESOURCES, racks
from placement.model.evaluate import evaluate, score
from placement.offline.greedy import greedy
from placement.model.instance import Instance, Job
from placement.model.intent import Intent
from placement.slots.rules import build_schedule
from placement.model.schedule import Schedule

from ..conftest import EXAMPLES
from ..slots.test_rules import B, check, random_instances


@pytest.mark.parametrize("name", ["local", "racks", "bottleneck"])
def test_greedy_finishes_the_examples_as_well_as_their_hand_checked_schedules(name):
    inst = Instance.load(EXAMPLES / f"{name}.json")
    schedule = greedy(inst)
    violations, report = evaluate(inst, schedule)
    assert violations == [] and report.unfinished == 0
    hand = score(inst, Schedule.load(EXAMPLES / f"{name}.valid.json"))
    assert report.objective <= hand.objective + 1e-9
    assert schedule.extra["solver"] == "greedy"


def test_greedy_keeps_the_bottleneck_job_inside_one_rack():
    inst = Instance.load(EXAMPLES / "bottleneck.json")
    schedule = greedy(inst)
    for s in schedule.slots:
        z = [a.machine for a in s.allocations if a.job == "z"]
        if z:
            assert inst.topology.lca(z) in ("tor0", "tor1")


@settings(max_examples=40, deadline=None)
@given(random_instances(max_jobs=8))
def test_greedy_is_valid_and_agrees_with_the_tracker(inst):
    schedule = greedy(inst)
    check(inst, schedule)
    assert list(schedule.rows()) == list(build_schedule(inst, Intent(inst.horizon)).rows())


def test_running_jobs_are_not_moved_when_a_new_job_fits_beside_them():
    long = dict(work_batches=1e9, max_workers=4)
    inst = B.instance(B.two_racks(), B.job("a", **long), B.job("b", **long),
                      B.job("c", arrival=2, **long), T=5)
    report = score(inst, greedy(inst))
    assert report.reconfigurations == 3  # one start each, nothing moved or resized
    assert report.unfinished == 3


def test_a_short_job_preempts_a_long_one_only_when_it_cannot_start_otherwise():
    # one machine with 8 GPUs: `long` holds all of them; `short` (arrives in slot 1) is
    # first in SRPT order and cannot start beside it, so it takes the machine.
    inst = B.instance(B.single(), B.job("long", max_workers=8),
                      B.job("short", arrival=1, work_batches=80, max_workers=8), T=3)
    schedule = greedy(inst)
    report = score(inst, schedule)
    short = report.jobs[1]
    assert short.finished and short.completion_slot == 1
    assert {a.job for s in schedule.slots if s.t == 1 for a in s.allocations} == {"short"}


def synthetic(n_jobs: int, n_racks: int, per_rack: int, horizon: int, seed: int = 0) -> Instance:
    """A loaded racks cluster with mixed jobs (what the timing figure in the report uses)."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n_jobs):
        jobs.append(Job(id=f"j{i}", arrival=rng.randrange(horizon // 2),
                        work_batches=rng.uniform(2e3, 6e4), batch_seconds=rng.uniform(0.05, 0.5),
                        gradient_mb=rng.uniform(0, 200),
                        worker={"gpu": rng.choice([1, 1, 2, 4]), "cpu": 4, "mem": 32},
                        ps={"cpu": 4, "mem": 16}, max_workers=rng.choice([1, 2, 4, 8, 16]),
                        worker_gbps=rng.choice([1, 2, 5]), ps_gbps=rng.choice([2, 5, 10]),
                        weight=rng.choice([1, 1, 2]), restart_seconds=rng.choice([0, 10, 30])))
    return Instance(slot_seconds=300, horizon=horizon, resources=RESOURCES,
                    topology=racks(n_racks, per_rack), jobs=tuple(jobs), name="synthetic")


def test_greedy_on_a_loaded_cluster_is_valid():
    # decision time is measured in benchmarks/online.py, not asserted here
    inst = synthetic(200, 8, 8, horizon=10)
    schedule = greedy(inst)
    assert evaluate(inst, schedule)[0] == []
