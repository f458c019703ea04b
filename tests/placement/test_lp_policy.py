"""The LP-rounding online policy: valid decisions, partitions, determinism."""
import dataclasses

import pytest

from placement.evaluate import validate
from placement.generate import generate
from placement.instance import Instance
from placement.online.lp_policy import LPRoundingPolicy
from placement.online.policy import JobState, View
from placement.schedule import Allocation, Schedule
from placement.simulate import simulate


def view_of(jobs: int, cluster: str, seed: int, previous=None) -> View:
    g = generate(jobs=jobs, cluster=cluster, seed=seed)
    inst = Instance(slot_seconds=g.slot_seconds, horizon=6, resources=g.resources, topology=g.topology,
                    jobs=tuple(dataclasses.replace(j, arrival=0) for j in g.jobs), name="view")
    previous = previous or {}
    return View(0, inst, {j.id: JobState(j, 0.0, 0.0, previous.get(j.id, {}), None) for j in inst.jobs}, 6)


def one_slot(view: View, placed) -> list:
    sched = Schedule.from_allocations({0: [Allocation(j, h, w, s) for j, tasks in placed.items()
                                           for h, (w, s) in tasks.items()]})
    return validate(view.instance, sched)


@pytest.mark.parametrize("seed", range(4))
def test_decisions_are_valid(seed):
    view = view_of(20, "racks:2x4", seed)
    policy = LPRoundingPolicy()
    placed = policy.decide(view)
    assert placed and one_slot(view, placed) == []
    assert policy.last_lp_value is not None and policy.last_lp_value > 0


def test_partitions_split_jobs_and_threads_do_not_change_decisions():
    view = view_of(40, "racks:4x4", 7)
    one = LPRoundingPolicy(jobs_per_partition=10, threads=1)
    two = LPRoundingPolicy(jobs_per_partition=10, threads=2)
    parts = one.partitions(view)
    assert len(parts) == 4 and sorted(j for p, _ in parts for j in p) == sorted(view.jobs)
    machines = [set(m.tolist()) for _, m in parts]
    assert all(a.isdisjoint(b) for i, a in enumerate(machines) for b in machines[i + 1:])
    a, b = one.decide(view), two.decide(view)
    assert a == b and one_slot(view, a) == []


def test_candidates_keep_the_current_domain():
    view = view_of(6, "racks:2x4", 3)
    job = next(iter(view.jobs.values())).job
    where = view.instance.topology.machines[5].id
    view = view_of(6, "racks:2x4", 3, previous={job.id: {where: (job.min_workers, job.min_ps(job.min_workers))}})
    policy = LPRoundingPolicy()
    domains, later = policy.candidate_domains(view, policy.partitions(view))
    assert where in domains[job.id] and where in later[job.id]
    assert all(later[j] <= domains[j] and 1 <= len(later[j]) <= 2 for j in domains)


def test_simulation_with_the_policy_validates():
    inst = generate(jobs=25, cluster="racks:2x4", seed=4, load=2)
    result = simulate(inst, policy=LPRoundingPolicy())
    assert result.violations == () and not result.unfinished and result.dropped == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="window"):
        LPRoundingPolicy(window=0)


def test_selection_takes_one_of_the_two_candidates():
    # step 6: the LP-guided decision or the slot rules' own, nothing else
    from placement.realise import decide_slot
    for seed in (11, 12, 13):
        view = view_of(30, "racks:2x4", seed)
        lp_only = LPRoundingPolicy(select_limit=0)
        guided = lp_only.decide(view)
        assert "select" not in lp_only.last_timings
        alone = decide_slot(view.instance, view.tracker(), 0, {}, fill=True)
        policy = LPRoundingPolicy()
        chosen = policy.decide(view)
        assert "select" in policy.last_timings or guided == alone
        assert chosen in (guided, alone) and one_slot(view, chosen) == []
