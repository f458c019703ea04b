"""keep_machines (placement.slots.relabel): the slot's decision with interchangeable machines
exchanged so that running jobs decided on their previous counts keep their machines."""
from __future__ import annotations

import random

from placement.model.instance import Instance
from placement.slots.relabel import keep_machines
from placement.model.evaluate import validate
from placement.model.schedule import Allocation, Schedule

from .. import builders as B


def cluster(n: int = 4, gpus: int = 4) -> Instance:
    machines = [B.machine(f"m{i}", gpu=gpus, cpu=16, mem=64) for i in range(n)]
    return Instance(slot_seconds=10, horizon=4, resources=("gpu", "cpu", "mem"), topology=B.star(*machines),
                    jobs=(B.job("a", max_workers=4), B.job("b", max_workers=4), B.job("c", max_workers=4)))


def test_a_job_decided_on_equal_machines_gets_its_own_back():
    inst = cluster()
    previous = {"a": {"m0": (4, 1)}, "b": {"m1": (2, 0)}}
    placed = {"a": {"m2": (4, 1)}, "b": {"m1": (2, 0)}, "c": {"m0": (4, 0)}}
    out = keep_machines(inst, previous, placed)
    # a goes back to m0; c, which the decision put there, takes m2 (they trade machines)
    assert out == {"a": {"m0": (4, 1)}, "b": {"m1": (2, 0)}, "c": {"m2": (4, 0)}}


def test_a_job_left_in_place_never_moves_for_another():
    inst = cluster()
    # b stays on m1; a ran on m1 and m0 and is decided on m2 and m3 with the same counts, but
    # m1 holds b's tasks as decided: a cannot have m1 back without moving b, so it moves
    previous = {"a": {"m0": (2, 0), "m1": (2, 0)}, "b": {"m1": (2, 0)}}
    placed = {"a": {"m2": (2, 0), "m3": (2, 0)}, "b": {"m1": (2, 0)}}
    out = keep_machines(inst, previous, placed)
    assert out["b"] == {"m1": (2, 0)}


def test_different_counts_or_machine_classes_are_not_renamed():
    big = [B.machine("m0", gpu=4, cpu=16, mem=64), B.machine("m1", gpu=8, cpu=16, mem=64)]
    inst = Instance(slot_seconds=10, horizon=4, resources=("gpu", "cpu", "mem"), topology=B.star(*big),
                    jobs=(B.job("a", max_workers=4),))
    # m1 has another capacity: not interchangeable with m0
    assert keep_machines(inst, {"a": {"m0": (4, 0)}}, {"a": {"m1": (4, 0)}}) == {"a": {"m1": (4, 0)}}
    inst = cluster()
    # other counts: a real change, decided as it is
    assert keep_machines(inst, {"a": {"m0": (4, 0)}}, {"a": {"m1": (3, 0)}}) == {"a": {"m1": (3, 0)}}


def test_random_slots_stay_valid_and_keep_at_least_as_many_jobs():
    rng = random.Random(7)
    for _ in range(300):
        inst = cluster(n=6)
        jobs = [B.job(f"j{i}", max_workers=6) for i in range(5)]
        inst = Instance(slot_seconds=10, horizon=4, resources=inst.resources, topology=inst.topology, jobs=tuple(jobs))
        previous, placed = _random_slot(rng, inst), _random_slot(rng, inst)
        out = keep_machines(inst, previous, placed)
        assert len(_violations(inst, out)) == len(_violations(inst, placed))
        assert _kept(previous, out) >= _kept(previous, placed)
        # the same workers of each job, on as many machines, at the same counts
        for j, tasks in placed.items():
            assert sorted(tasks.values()) == sorted(out[j].values())


def _violations(inst: Instance, placed: dict) -> list:
    allocations = [Allocation(j, h, w, p) for j, tasks in placed.items() for h, (w, p) in tasks.items()]
    return validate(inst, Schedule.from_allocations({0: allocations}, instance=inst.name))


def _kept(previous, placed) -> int:
    return sum(1 for j, tasks in placed.items() if tasks and previous.get(j) == tasks)


def _random_slot(rng: random.Random, inst: Instance) -> dict:
    free = {m.id: 4 for m in inst.topology.machines}
    out = {}
    for job in inst.jobs:
        if rng.random() < 0.3:
            continue
        tasks = {}
        for h in rng.sample(sorted(free), rng.randint(1, 2)):
            w = rng.randint(0, free[h])
            if w:
                tasks[h] = (w, 0)
                free[h] -= w
        if tasks:
            out[job.id] = tasks
    return out
