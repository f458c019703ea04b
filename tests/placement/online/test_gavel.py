"""Gavel (placement/online/baselines/gavel.py): its allocation LPs on hand-worked cases, its
rounds realising the fractions, and whole simulations on typed and untyped clusters that
the referee validates."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from placement.model.clusters import RESOURCES, racks
from placement.model.evaluate import validate
from placement.model.instance import Instance, Job
from placement.model.speed import SpeedTable, TypedSpeed
from placement.model.topology import Machine, Switch, Link, Topology
from placement.online.baselines.gavel import Gavel, allocation
from placement.online.registry import make_policy
from placement.online.scheduler import OnlineScheduler
from placement.simulate import simulate


def table(rate: float, workers: int = 1) -> SpeedTable:
    """A rigid gang of ``workers`` at ``rate`` batches/s, local or spread."""
    return SpeedTable(workers, (rate,), ((2, (rate,)),))


def typed_job(id: str, fast: float, slow: float, *, work: float = 2400, arrival: int = 0) -> Job:
    """One GPU; ``fast`` batches/s on type 'fast', ``slow`` on type 'slow'."""
    return Job(id=id, arrival=arrival, work_batches=work, batch_seconds=1, worker={"gpu": 1}, ps={},
               max_workers=1, min_workers=1, worker_gbps=1, ps_gbps=1,
               speed=TypedSpeed((("fast", table(fast)), ("slow", table(slow)))))


def two_types() -> Topology:
    """One 1-GPU machine of each type under one switch."""
    machines = (Machine("a", {"gpu": 1}, 100, "fast"), Machine("b", {"gpu": 1}, 100, "slow"))
    return Topology(machines, (Switch("s"),), tuple(Link(m.id, "s", 100) for m in machines), "s")


def ratio_case() -> Instance:
    # j1 runs 4x faster on 'fast' than on 'slow', j2 only 1.5x
    return Instance(slot_seconds=60, horizon=8, resources=("gpu",), topology=two_types(),
                    jobs=(typed_job("j1", 4, 1), typed_job("j2", 3, 2)), name="ratio")


# ----- the allocation LPs --------------------------------------------------------------------
def test_max_sum_throughput_gives_each_job_the_type_where_its_ratio_is_higher():
    # 1 GPU per type: j1 on fast and j2 on slow is worth 4 + 2 = 6 batches/s, the swap
    # 1 + 3 = 4, and any mix lies between: the optimum is the first, whole
    x = allocation(np.array([[4.0, 1.0], [3.0, 2.0]]), np.ones((2, 1)), np.ones((2, 1)), np.ones(2))
    assert x == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]))


def test_max_min_fairness_equalises_throughput_over_the_equal_share():
    # equal share: half the time on each type, so both jobs' reference is 2.5 batches/s.
    # With fast split a / 1 - a and slow b / 1 - b (both types full is best): j1 = 4a + b,
    # j2 = 3(1 - a) + 2(1 - b), and a + b <= 1 (j1's time): the best min is at a = b = 1/2,
    # both 2.5 (each at its equal share), and only there
    x = allocation(np.array([[4.0, 1.0], [3.0, 2.0]]), np.ones((2, 1)), np.ones((2, 1)), np.ones(2),
                   "max-min-fairness")
    assert x == pytest.approx(np.full((2, 2), 0.5), abs=1e-7)


def test_max_min_fairness_counts_a_gang_of_k_as_k_jobs():
    # one type of 2 GPUs: a (gang 2, 2 batches/s) and b (gang 1, 1 batch/s); each job's
    # equal-share throughput is its own rate, so the normalised throughputs are 2 x_a (the
    # scale factor 2, as Gavel's code) and x_b; 2 x_a + x_b <= 2 GPUs: x_a = 1/2, x_b = 1,
    # one GPU each on average (without the scale factor it would be 2/3 each)
    x = allocation(np.array([[2.0], [1.0]]), np.array([[2.0], [1.0]]), np.array([[2.0]]),
                   np.array([2.0, 1.0]), "max-min-fairness")
    assert x == pytest.approx(np.array([[0.5], [1.0]]), abs=1e-7)


def test_a_job_gets_no_time_on_a_type_it_cannot_use_and_an_unknown_objective_is_refused():
    x = allocation(np.array([[0.0, 1.0], [3.0, 2.0]]), np.ones((2, 1)), np.ones((2, 1)), np.ones(2))
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]))
    # a job that fits no type now gets nothing and does not hold the others' minimum at 0
    x = allocation(np.array([[0.0, 0.0], [4.0, 1.0], [3.0, 2.0]]), np.ones((3, 1)), np.ones((2, 1)),
                   np.ones(3), "max-min-fairness")
    assert x == pytest.approx(np.array([[0.0, 0.0], [0.5, 0.5], [0.5, 0.5]]), abs=1e-7)
    with pytest.raises(ValueError, match="objective"):
        Gavel("makespan")


# ----- the rounds ----------------------------------------------------------------------------
def placements(result) -> list[dict[str, str]]:
    return [{a.job: a.machine for a in s.allocations} for s in result.schedule.slots]


def test_the_rounds_realise_the_fractions():
    inst = ratio_case()
    # max-sum-throughput: x is whole, so every round repeats it until j1 is done (slot 10)
    rounds = placements(simulate(inst, policy=Gavel(), horizon=40))
    assert rounds[:10] == [{"j1": "a", "j2": "b"}] * 10
    # max-min fairness: x = 1/2 everywhere; the job furthest behind its share of a type
    # goes first there, so the jobs take turns, each half of the rounds on each type
    rounds = placements(simulate(inst, policy=Gavel("max-min-fairness"), horizon=40))
    assert rounds[:8] == [{"j1": "a", "j2": "b"}, {"j1": "b", "j2": "a"}] * 4


def test_a_checkpoint_resumes_the_rounds_where_they_were():
    def scheduler(policy: Gavel) -> OnlineScheduler:
        sched = OnlineScheduler(two_types(), resources=("gpu",), policy=policy, slot_seconds=60)
        for job in ratio_case().jobs:
            sched.submit(job)
        return sched

    whole = scheduler(Gavel("max-min-fairness"))
    resumed = scheduler(Gavel("max-min-fairness"))
    for t in range(3):
        assert resumed.step(t) == whole.step(t)
    saved = json.loads(json.dumps(resumed.state()))  # plain JSON
    resumed = OnlineScheduler.from_state(saved, Gavel("max-min-fairness"))
    for t in range(3, 7):
        assert resumed.step(t) == whole.step(t)


# ----- whole simulations ---------------------------------------------------------------------
def random_jobs(rng: np.random.Generator, n: int, types: tuple[str, ...]) -> list[Job]:
    """Rigid and elastic jobs, a few hours each on their gang, more than the cluster holds at
    once: a third with a per-type table (a type left out now and then), a third with one
    table, the rest linear."""
    jobs = []
    for i in range(n):
        top = int(rng.choice([1, 2, 4, 8, 16]))
        low = top if rng.random() < 0.5 else 1
        base = Job(id=f"j{i}", arrival=int(rng.integers(0, 6)), work_batches=float(rng.integers(2000, 20000) * top),
                   batch_seconds=float(rng.uniform(0.2, 1)), gradient_mb=float(rng.uniform(0, 100)),
                   worker={"gpu": 1, "cpu": int(rng.integers(1, 4)), "mem": 8}, ps={"cpu": 1, "mem": 4},
                   max_workers=top, min_workers=low, worker_gbps=float(rng.uniform(1, 4)), ps_gbps=8.0)
        rates = lambda speed: (tuple(speed * w for w in range(low, top + 1)),
                               ((2, tuple(0.7 * speed * w for w in range(low, top + 1))),))
        kind = i % 3
        if kind == 0:
            listed = [g for g in types if rng.random() < 0.8] or [types[0]]
            base = replace(base, speed=TypedSpeed(tuple(
                (g, SpeedTable(low, *rates(float(rng.uniform(0.5, 3))))) for g in sorted(listed))))
        elif kind == 1:
            base = replace(base, speed=SpeedTable(low, *rates(1.0)))
        jobs.append(base)
    return jobs


def typed_racks(per_machine: bool) -> Topology:
    """2 racks of 3 machines of 8 GPUs (links wide enough for any gang of 16 spread over 2
    machines); type 'v100' or 't4' per rack, or alternating per machine."""
    topo = racks(2, 3, capacity={"gpu": 8, "cpu": 32, "mem": 256}, machine_gbps=100, rack_gbps=200)
    machines = tuple(replace(m, gpu_type=("v100", "t4")[(k if per_machine else k // 3) % 2])
                     for k, m in enumerate(topo.machines))
    return Topology(machines, topo.switches, topo.links, topo.root)


@pytest.mark.parametrize("objective", ["max-sum-throughput", "max-min-fairness"])
@pytest.mark.parametrize("per_machine", [False, True])
def test_typed_simulations_are_valid_and_finish_every_job(objective, per_machine):
    topo = typed_racks(per_machine)
    inst = Instance(slot_seconds=300, horizon=10, resources=RESOURCES, topology=topo,
                    jobs=tuple(random_jobs(np.random.default_rng(3), 14, ("v100", "t4"))))
    result = simulate(inst, policy=Gavel(objective), horizon=300)
    assert validate(result.instance, result.schedule) == []
    assert result.unfinished == () and result.dropped == 0
    used = {topo.machines[topo.machine_index[a.machine]].gpu_type
            for s in result.schedule.slots for a in s.allocations if a.workers}
    assert used == {"v100", "t4"}


def test_gavel_reads_no_job_length():
    inst = Instance(slot_seconds=300, horizon=10, resources=RESOURCES, topology=typed_racks(False),
                    jobs=tuple(random_jobs(np.random.default_rng(5), 10, ("v100", "t4"))))
    told = simulate(inst, policy=Gavel(), horizon=300)
    blind = simulate(inst, policy=Gavel(), horizon=300, information="none")
    assert blind.schedule == told.schedule


def test_an_untyped_cluster_is_one_type():
    topo = racks(2, 3, capacity={"gpu": 8, "cpu": 32, "mem": 256}, machine_gbps=100, rack_gbps=200)
    jobs = [job for job in random_jobs(np.random.default_rng(7), 12, ("any",))
            if job.speed is None or job.speed.types is None]
    inst = Instance(slot_seconds=300, horizon=10, resources=RESOURCES, topology=topo, jobs=tuple(jobs))
    for objective in ("max-sum-throughput", "max-min-fairness"):
        result = simulate(inst, policy=Gavel(objective))
        assert validate(result.instance, result.schedule) == []
        assert result.unfinished == () and result.dropped == 0


def test_registered_as_gavel_with_the_arena_objective():
    policy = make_policy("gavel")
    assert isinstance(policy, Gavel) and policy.name == "gavel"
    assert policy.objective == "max-sum-throughput"
    assert Gavel("max-min-fairness").name == "gavel-max-min-fairness"
