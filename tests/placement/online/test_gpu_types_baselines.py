"""GPU types online (MODEL.md 8, docs/model.md 'GPU types'): the scheduler drops decisions
that break the type rule, the greedy policy and the baselines place a job's workers on one
type it runs on (the fastest with room), and every registered policy simulated on a typed
cluster gives a schedule the referee accepts."""
from __future__ import annotations

import pytest

from placement.model.evaluate import validate
from placement.model.schedule import Allocation, Schedule, Slot
from placement.online.baselines import BASELINES
from placement.online.greedy_policy import GreedyPolicy
from placement.online.policy import JobState, View
from placement.online.registry import POLICIES, make_policy
from placement.online.scheduler import OnlineScheduler
from placement.simulate import simulate

from ..slots.typed_cases import random_typed, small, typed_job


def types_of(inst, tasks) -> set:
    machines, index = inst.topology.machines, inst.topology.machine_index
    return {machines[index[h]].gpu_type for h, (w, _) in tasks.items() if w}


def first_view(inst) -> View:
    """Slot 0 with every job of ``inst`` active and fresh."""
    jobs = {j.id: JobState(j, done=0.0, attained=0.0, previous={}, last_ran=None) for j in inst.jobs}
    return View(0, inst, jobs, lookahead=4)


class Fixed:
    """A policy that answers the same decision every slot."""

    name = "fixed"

    def __init__(self, decision: dict):
        self.decision = decision

    def decide(self, view: View) -> dict:
        return self.decision


# ----- the scheduler's check ---------------------------------------------------------------
@pytest.mark.parametrize("decision, reason", [
    ({"bert": {"a1": (1, 1), "t1": (1, 0)}}, "workers on GPU types 'a100', 't4': one type per slot"),
    ({"a-only": {"t1": (1, 1)}}, "workers on GPU type 't4', which the job's speed table does not list"),
])
def test_the_scheduler_drops_a_decision_that_breaks_the_type_rule(decision, reason):
    inst = small([typed_job("bert"), typed_job("a-only", t4=None)])
    sched = OnlineScheduler(inst.topology, resources=inst.resources, policy=Fixed(decision),
                            slot_seconds=inst.slot_seconds)
    for job in inst.jobs:
        sched.submit(job)
    assert sched.step(0) == {}
    assert [(d.job, d.reason) for d in sched.dropped] == [(next(iter(decision)), reason + " (MODEL.md 8)")]


def test_the_scheduler_keeps_a_gang_on_one_type_with_its_ps_on_another():
    inst = small()
    decision = {"bert": {"a1": (2, 0), "t1": (0, 1)}}
    sched = OnlineScheduler(inst.topology, resources=inst.resources, policy=Fixed(decision),
                            slot_seconds=inst.slot_seconds)
    sched.submit(inst.jobs[0])
    assert sched.step(0) == decision and sched.dropped == []


# ----- greedy and the baselines --------------------------------------------------------------
def test_online_greedy_gives_the_fastest_type_to_the_job_that_gains_most():
    # each wants all 4 GPUs of a type; 'gains' (3x on A100) goes first by its shorter
    # remaining time and takes A100, 'flat' (1.2x) gets T4
    inst = small([typed_job("gains", workers=4, min_workers=4, a100=3.0, work=20000),
                  typed_job("flat", workers=4, min_workers=4, a100=1.2, work=20000)])
    placed = GreedyPolicy().decide(first_view(inst))
    assert types_of(inst, placed["gains"]) == {"a100"}
    assert types_of(inst, placed["flat"]) == {"t4"}


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_baseline_puts_a_gang_on_the_fastest_type_with_room(name):
    # 2 workers fit on one A100 machine (6 batches/s) or on T4 (2): every baseline takes A100
    inst = small([typed_job("bert")])
    placed = BASELINES[name]().decide(first_view(inst))
    assert types_of(inst, placed["bert"]) == {"a100"}


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_baseline_uses_only_the_types_a_job_lists(name):
    inst = small([typed_job("t4-only", a100=None)])
    placed = BASELINES[name]().decide(first_view(inst))
    assert types_of(inst, placed["t4-only"]) == {"t4"}


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_baseline_never_mixes_types_when_the_fastest_is_short(name):
    # 'small' (A100 only) ran on a1; 'big' needs 3 GPUs: A100 (4 GPUs in all) cannot hold
    # both, so 'big' runs on T4 beside 'small' or on A100 instead of it, never across types
    inst = small([typed_job("small", workers=2, min_workers=2, t4=None),
                  typed_job("big", workers=3, min_workers=3)])
    view = first_view(inst)
    view.jobs["small"] = JobState(inst.jobs[0], 0.0, 0.0, {"a1": (2, 1)}, None)
    placed = BASELINES[name]().decide(view)
    assert "big" in placed and all(len(types_of(inst, tasks)) == 1 for tasks in placed.values())
    slot = Schedule((Slot(0, tuple(Allocation(j, h, w, s) for j, tasks in placed.items()
                                   for h, (w, s) in tasks.items())),))
    assert validate(inst, slot) == []


# ----- every registered policy, simulated -------------------------------------------------------
@pytest.mark.parametrize("name", sorted(POLICIES))
@pytest.mark.parametrize("seed, by_rack", [(0, False), (1, True)])
def test_every_policy_simulated_on_a_typed_cluster_gives_a_valid_schedule(name, seed, by_rack):
    inst = random_typed(seed, jobs=16, by_rack=by_rack)
    result = simulate(inst, policy=make_policy(name), horizon=4 * inst.horizon)
    assert result.violations == () and result.dropped == 0
    assert validate(result.instance, result.schedule) == []
    assert len(result.unfinished) < len(inst.jobs)


def test_oasis_commitments_on_a_typed_cluster_are_valid():
    inst = random_typed(2, jobs=12)
    result = simulate(inst, policy=make_policy("oasis"), mode="commit", horizon=4 * inst.horizon)
    assert result.violations == () and result.dropped == 0


def test_a_job_keeps_running_on_its_other_type_when_one_type_leaves():
    """Found by review: once the last A100 machine left, a job listing A100 and T4 was held
    as fitting nowhere; it runs on the T4 machine, and a job listing a type the cluster lacks
    is accepted and runs on the types it has."""
    from placement.model.instance import Job
    from placement.model.speed import SpeedTable, TypedSpeed
    from placement.model.topology import Link, Machine, Switch, Topology
    from placement.online import OnlineScheduler, make_policy
    ms = (Machine("a0", {"gpu": 2}, 100, "a100"), Machine("t0", {"gpu": 4}, 100, "t4"))
    topo = Topology(ms, (Switch("s"),), tuple(Link(m.id, "s", 100) for m in ms), "s")
    tab = SpeedTable(1, (1.0, 2.0), ((2, (1.0, 2.0)),))
    job = Job(id="j", arrival=0, work_batches=1000, batch_seconds=1, worker={"gpu": 1}, ps={}, max_workers=2,
              worker_gbps=1, ps_gbps=2, speed=TypedSpeed((("a100", tab), ("t4", tab))))
    s = OnlineScheduler(topo, resources=("gpu",), policy=make_policy("greedy"), slot_seconds=60)
    s.submit(job)
    assert set(s.step(0)["j"]) == {"a0"}
    s.remove_machine("a0")
    assert set(s.step(1)["j"]) == {"t0"}
    other = Job(id="k", arrival=2, work_batches=1000, batch_seconds=1, worker={"gpu": 1}, ps={}, max_workers=2,
                worker_gbps=1, ps_gbps=2, speed=TypedSpeed((("t4", tab), ("v100", tab))))
    s.submit(other)
    assert set(s.step(2)["k"]) == {"t0"}


def test_a_revise_that_drops_the_type_a_job_ran_on_forgets_its_previous_tasks():
    """The previous tasks a policy is shown (and would keep, restart-free) are only those the
    job may still run: after a revise that no longer lists their GPU type, none."""
    import dataclasses
    from placement.model.instance import Job
    from placement.model.speed import SpeedTable, TypedSpeed
    from placement.model.topology import Link, Machine, Switch, Topology
    ms = (Machine("a0", {"gpu": 2}, 100, "a100"), Machine("t0", {"gpu": 4}, 100, "t4"))
    topo = Topology(ms, (Switch("s"),), tuple(Link(m.id, "s", 100) for m in ms), "s")
    tab = SpeedTable(1, (1.0, 2.0), ((2, (1.0, 2.0)),))
    job = Job(id="j", arrival=0, work_batches=1000, batch_seconds=1, worker={"gpu": 1}, ps={}, max_workers=2,
              worker_gbps=1, ps_gbps=2, speed=TypedSpeed((("a100", tab), ("t4", tab))))
    seen = []

    class Watch:
        name = "watch"

        def decide(self, view):
            seen.append(dict(view.jobs["j"].previous))
            return {"j": {"a0": (2, 1)}} if view.t == 0 else {"j": {"t0": (2, 1)}}

    s = OnlineScheduler(topo, resources=("gpu",), policy=Watch(), slot_seconds=60)
    s.submit(job)
    assert s.step(0) == {"j": {"a0": (2, 1)}}
    s.revise(dataclasses.replace(job, speed=TypedSpeed((("t4", tab),))))
    assert s.step(1) == {"j": {"t0": (2, 1)}} and s.dropped == []
    assert seen == [{}, {}]
