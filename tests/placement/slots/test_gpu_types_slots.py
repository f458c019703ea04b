"""GPU types in the slot rules (MODEL.md 8, docs/model.md 'GPU types'): Residual's checks and
searches keep a job's workers on one type it runs on, the slot rules turn intents that mix
types into valid schedules, and greedy gives the fastest type to the job it helps most."""
from __future__ import annotations

import statistics
import time
from dataclasses import replace

import numpy as np
import pytest

from placement.model.evaluate import validate
from placement.model.instance import Instance
from placement.model.intent import Intent, JobIntent
from placement.model.progress import ProgressTracker
from placement.offline.greedy import greedy
from placement.slots.residual import ANY, Residual
from placement.slots.rules import build_schedule, decide_slot

from .typed_cases import random_typed, small, typed_job


def types_of(inst, tasks) -> set:
    """The GPU types of the machines holding workers in ``tasks``."""
    machines, index = inst.topology.machines, inst.topology.machine_index
    return {machines[index[h]].gpu_type for h, (w, _) in tasks.items() if w}


# ----- Residual --------------------------------------------------------------------------------
def test_fits_and_try_place_refuse_mixed_gangs_and_unlisted_types():
    inst = small([typed_job("bert"), typed_job("a-only", t4=None)])
    bert, a_only = inst.jobs
    res = Residual(inst)
    assert res.fits(bert, {"a1": (2, 0)}) and res.fits(bert, {"t1": (2, 0)})
    assert not res.fits(bert, {"a1": (1, 0), "t1": (1, 0)})
    assert not res.fits(a_only, {"t1": (1, 0)})
    assert res.fits(bert, {"a1": (2, 0), "t1": (0, 1)})  # a PS may sit on another type
    assert not res.try_place(bert, {"a1": (1, 0), "t1": (1, 0)})
    assert res.held("bert") is None and (res.free == res.cap).all()


def test_searches_keep_one_type_and_by_default_take_the_fastest_with_room():
    inst = small([typed_job("bert", workers=4)])
    bert = inst.jobs[0]
    res = Residual(inst)
    assert res.job_types(bert) == ("a100", "t4")
    # A100 (3 per worker, 2.4 spread) beats T4 (1 per worker) at any size: 4 on a1+a2
    assert types_of(inst, res.best_spread(bert, 4)) == {"a100"}
    assert res.find(bert, 2) == {"a1": (2, 1)}
    assert res.best_local(bert, 4, gpu_type="t4") == {"t1": (4, 2)}  # min_ps(4) = 2
    assert types_of(inst, res.find(bert, 3, gpu_type="a100")) == {"a100"}
    assert res.local(bert, 3, gpu_type="a100") is None  # no A100 machine holds 3
    assert res.max_workers_that_fit(bert) == 4
    res.place(replace(bert, id="other"), {"a1": (1, 0), "a2": (1, 0)})
    # one A100 GPU left per machine: 2 spread on A100 (4.8) is still faster than 2 on T4 (2)
    assert types_of(inst, res.find(bert, 2)) == {"a100"}
    assert res.find(bert, 3) == {"t1": (3, 2)}  # only T4 has room for 3


def test_a_search_on_a_type_the_job_does_not_list_finds_nothing():
    inst = small([typed_job("a-only", t4=None)])
    job = inst.jobs[0]
    res = Residual(inst)
    assert res.job_types(job) == ("a100",)
    assert res.best_local(job, 2, gpu_type="t4") is None
    assert res.spread(job, 2, gpu_type="t4") is None
    assert res.find(job, 2, gpu_type="v100") is None
    assert res.may_hold_workers(job).tolist() == [True, True, False]
    res.place(replace(job, id="other"), {"a1": (2, 0), "a2": (2, 0)})
    assert res.find(job, 1) is None  # the free T4 is not its type
    assert res.beside(job, {"a1": 1, "t1": 1}, within="s") is None


def test_an_untyped_cluster_knows_no_types():
    doc = small().to_dict()
    for m in doc["topology"]["machines"]:
        del m["gpu_type"]
    doc["jobs"][0]["speed"] = {"local": [3, 6], "spread": [2.4, 4.8]}
    inst = Instance.from_dict(doc)
    res = Residual(inst)
    job = inst.jobs[0]
    assert res.job_types(job) == (None,)
    assert res.fits(job, {"a1": (1, 0), "t1": (1, 0)})
    assert res.best_local(job, 2, gpu_type=None) == res.best_local(job, 2, gpu_type=ANY) == {"a1": (2, 1)}
    assert res.best_local(job, 2, gpu_type="a100") is None


# ----- the slot rules ------------------------------------------------------------------------
def plan(inst, t: int, **tasks) -> Intent:
    """An intent with ``tasks[job] = {machine: (workers, ps)}`` in slot ``t`` only."""
    intent = Intent(inst.horizon)
    intent.slots[t] = {j: JobIntent(inst.topology.root_id, dict(ts)) for j, ts in tasks.items()}
    return intent


def test_a_mixed_plan_keeps_the_type_holding_most_planned_workers():
    inst = small([typed_job("bert", workers=4)])
    placed = decide_slot(inst, ProgressTracker(inst), 0, plan(inst, 0, bert={"a1": (1, 1), "t1": (2, 0)}).slots[0],
                         fill=False)
    assert placed == {"bert": {"t1": (2, 0), "a1": (0, 1)}}  # 2 on T4 beat 1 on A100; its PS kept (any type)


def test_a_tie_between_types_keeps_the_faster_one():
    inst = small([typed_job("bert", workers=4)])
    placed = decide_slot(inst, ProgressTracker(inst), 0, plan(inst, 0, bert={"a1": (1, 0), "t1": (1, 1)}).slots[0],
                         fill=False)
    assert placed == {"bert": {"a1": (1, 0), "t1": (0, 1)}}


def test_a_plan_only_on_a_type_the_job_cannot_use_is_a_plan_that_does_not_fit():
    # 3 planned on T4: rule a's fallback, the best of at most 3 on A100: 2 on a1 (rate 6)
    # finish 1000 batches in as many slots as 3 spread (7.2), with fewer workers
    inst = small([typed_job("a-only", workers=4, t4=None)])
    placed = decide_slot(inst, ProgressTracker(inst), 0, plan(inst, 0, **{"a-only": {"t1": (3, 1)}}).slots[0],
                         fill=False)
    assert placed == {"a-only": {"a1": (2, 1)}}


@pytest.mark.parametrize("planned", [False, True])
def test_rules_b_and_d_never_keep_a_mixed_previous_task_set(planned):
    # at max_workers and not finishing, the previous set would stay as it is if it "fit"
    inst = small()
    mixed = {"a1": (1, 1), "t1": (1, 0)}
    tracker = ProgressTracker(inst, last={"bert": mixed}, done={"bert": 10.0})
    intended = plan(inst, 0, bert=mixed).slots[0] if planned else None
    placed = decide_slot(inst, tracker, 0, intended)
    assert types_of(inst, placed["bert"]) == {"a100"}


def random_intent(inst, rng: np.random.Generator) -> Intent:
    """Per slot, for most jobs, workers on a few random machines of any type."""
    machines = [m.id for m in inst.topology.machines]
    intent = Intent(inst.horizon)
    for t in range(inst.horizon):
        for job in inst.jobs:
            if rng.random() < 0.7:
                hs = rng.choice(machines, size=int(rng.integers(1, 4)), replace=False)
                tasks = {str(h): (int(rng.integers(0, 4)), int(rng.integers(0, 2))) for h in hs}
                intent.slots[t][job.id] = JobIntent(inst.topology.lca(list(tasks)), tasks)
    return intent


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fill, follow_sizes", [(True, False), (False, False), (True, True)])
def test_intents_that_mix_types_give_valid_schedules(seed, fill, follow_sizes):
    inst = random_typed(seed, by_rack=seed % 2 == 1)
    schedule = build_schedule(inst, random_intent(inst, np.random.default_rng(seed)), fill=fill,
                              follow_sizes=follow_sizes)
    assert validate(inst, schedule) == []
    assert schedule.slots and any(s.allocations for s in schedule.slots)


# ----- greedy ---------------------------------------------------------------------------------
def two_jobs():
    """'gains' runs 3x faster on A100, 'flat' 1.2x; each wants all 4 GPUs of either type,
    so only one of them fits on A100."""
    return small([typed_job("gains", workers=4, min_workers=4, a100=3.0, t4=1.0, work=20000),
                  typed_job("flat", workers=4, min_workers=4, a100=1.2, t4=1.0, work=20000)])


def test_greedy_gives_the_fastest_type_to_the_job_that_gains_most():
    inst = two_jobs()
    schedule = greedy(inst)
    assert validate(inst, schedule) == []
    first = {j: {} for j in ("gains", "flat")}
    for a in schedule.slots[0].allocations:
        first[a.job][a.machine] = (a.workers, a.ps)
    assert types_of(inst, first["gains"]) == {"a100"}
    assert types_of(inst, first["flat"]) == {"t4"}


def test_greedy_starts_a_job_on_the_only_type_it_lists_even_when_a_faster_one_is_free():
    inst = small([typed_job("t4-only", a100=None)])
    placed = decide_slot(inst, ProgressTracker(inst), 0)
    assert types_of(inst, placed["t4-only"]) == {"t4"}


@pytest.mark.parametrize("seed", range(4))
def test_greedy_schedules_are_valid_on_random_typed_instances(seed):
    inst = random_typed(seed, jobs=20, by_rack=seed % 2 == 0)
    schedule = greedy(inst)
    assert validate(inst, schedule) == []
    assert sum(len(s.allocations) for s in schedule.slots) > 0


def test_a_typed_greedy_slot_of_160_jobs_on_64_gpus_is_fast():
    inst = random_typed(0, jobs=160)  # racks:2x4: 8 machines of 8 GPUs, three types
    inst = replace(inst, jobs=tuple(replace(j, arrival=0) for j in inst.jobs))
    assert sum(m.capacity["gpu"] for m in inst.topology.machines) == 64
    times = []
    for _ in range(3):
        start = time.perf_counter()
        placed = decide_slot(inst, ProgressTracker(inst), 0)
        times.append(time.perf_counter() - start)
    assert placed and all(len(types_of(inst, tasks)) == 1 for tasks in placed.values())
    assert statistics.median(times) < 0.2
