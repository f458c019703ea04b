"""The LP-rounding online policy: valid decisions, partitions, determinism."""
import dataclasses

import pytest

from placement.model.evaluate import validate
from placement.traces.generate import generate
from placement.model.instance import Instance
from placement.online.candidates import candidate_domains
from placement.online.lp_policy import LPRoundingPolicy
from placement.online.partitions import partitions
from placement.online.policy import JobState, View
from placement.model.schedule import Allocation, Schedule
from placement.simulate import simulate

from .. import builders as B


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


@pytest.mark.parametrize("model", ["configuration", "aggregated"])
@pytest.mark.parametrize("seed", range(4))
def test_decisions_are_valid(seed, model):
    view = view_of(20, "racks:2x4", seed)
    policy = LPRoundingPolicy(model=model)
    placed = policy.decide(view)
    assert placed and one_slot(view, placed) == []
    assert policy.last_lp_value is not None and policy.last_lp_value > 0


def test_partitions_split_jobs_and_threads_do_not_change_decisions():
    view = view_of(40, "racks:4x4", 7)
    one = LPRoundingPolicy(jobs_per_partition=10, threads=1)
    two = LPRoundingPolicy(jobs_per_partition=10, threads=2)
    parts = partitions(view, one.jobs_per_partition)
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
    domains, later = candidate_domains(view, partitions(view, policy.jobs_per_partition),
                                       local_k=policy.local_k, spread_k=policy.spread_k)
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
    from placement.slots.rules import decide_slot
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


# ----- the queueing charge (module docstring, 'Queueing charge') ------------------------------
def _job(job_id, arrival, hours, workers):
    """1-s batches on one worker, no gradient traffic: ``hours`` at ``workers`` workers."""
    from placement.model.instance import Job
    return Job(id=job_id, arrival=arrival, work_batches=hours * workers * 3600, batch_seconds=1.0,
               worker={"gpu": 1, "cpu": 2, "mem": 4}, ps={"cpu": 1, "mem": 2}, max_workers=workers,
               worker_gbps=1.0, ps_gbps=10.0, restart_seconds=60)


def test_queue_delay_and_extra_are_the_same_charge():
    import numpy as np
    from placement.online.queue_charge import queue_delay, queue_extra
    load = np.array([3.0, 1.0, 2.0, 1.0])
    weight = np.array([1.0, 1.0, 1.0, 2.0])
    # Smith order by load / weight: job 3 (0.5), job 1 (1), job 2 (2), job 0 (3)
    assert queue_delay(load, weight).tolist() == [4.0, 1.0, 2.0, 0.0]
    assert queue_extra(load, weight).tolist() == [0.0, 2.0, 2.0, 3.0]
    assert float(weight @ queue_delay(load, weight)) == float(queue_extra(load, weight).sum())


def test_leftover_is_own_time_and_cluster_share():
    from placement.model.cluster_spec import parse_cluster
    from placement.online.queue_charge import leftover
    jobs = (_job("wide", 0, 2, 16), _job("one", 0, 3, 1))
    inst = Instance(slot_seconds=1800, horizon=4, resources=("gpu", "cpu", "mem"),
                    topology=parse_cluster("racks:1x2"), jobs=jobs, name="two")
    own, load = leftover(inst, jobs, [j.work_batches / 2 for j in jobs])
    assert own.tolist() == [3600.0, 5400.0]            # half the work, at max_workers
    assert load.tolist() == [3600.0, 5400.0 / 16]      # 16 of 16 GPUs; 1 of 16
    _, half = leftover(inst, jobs, [j.work_batches / 2 for j in jobs], machines=[0])
    assert half.tolist() == [3600.0, 5400.0 / 8]       # against one 8-GPU machine: at most all of it


def test_overflow_extra_goes_on_q_only():
    import numpy as np
    from placement.formulation.aggregated import formulate_aggregated
    view = view_of(8, "racks:2x4", 5)
    remaining = {j: s.remaining for j, s in view.jobs.items()}
    plain, _ = formulate_aggregated(view.instance, start=0, end=3, remaining=remaining)
    extra = {j: 100.0 * k for k, j in enumerate(view.jobs)}
    charged, _ = formulate_aggregated(view.instance, start=0, end=3, remaining=remaining, overflow_extra=extra)
    diff = charged.c - plain.c
    q = np.arange(len(diff) - len(extra), len(diff))  # q[j] are the last columns, in job order
    assert diff[q].tolist() == [extra[j.id] for j in view.instance.jobs]
    assert not diff[: q[0]].any() and charged.offset == plain.offset


def test_queueing_charge_stops_deferring_a_wide_job():
    # Two 40-h 8-GPU jobs fill both machines; a 2-h job on all 16 GPUs arrives at slot 1.
    # With only MODEL.md's unfinished charge the window keeps deferring it (it would
    # "finish 2 h after the window" every time); its leftover also delays the long jobs'
    # leftover, and charging that makes the policy run it at once, as the slot rules do.
    from placement.model.cluster_spec import parse_cluster
    from placement.online.greedy_policy import GreedyPolicy
    jobs = [_job("long0", 0, 40, 8), _job("long1", 0, 40, 8), _job("wide", 1, 2, 16)]
    topo = parse_cluster("racks:1x2")
    runs = {name: simulate(jobs, topology=topo, policy=policy, slot_seconds=1800)
            for name, policy in [("old", LPRoundingPolicy(queue_charge=False)), ("new", LPRoundingPolicy()),
                                 ("greedy", GreedyPolicy())]}
    assert all(r.violations == () and not r.unfinished for r in runs.values())
    assert runs["old"].jct["wide"] > 40 * 3600
    assert runs["new"].jct["wide"] <= 3 * 3600
    assert runs["new"].average_jct < runs["old"].average_jct
    assert runs["new"].average_jct <= runs["greedy"].average_jct


def test_the_default_window_is_the_configuration_model_and_follows_its_sizes():
    from placement.online.lp_policy import LPAggregatedPolicy
    assert LPRoundingPolicy().model == "configuration" and LPRoundingPolicy().follow_sizes
    assert LPAggregatedPolicy().model == "aggregated" and not LPAggregatedPolicy().follow_sizes
    with pytest.raises(ValueError, match="model must be one of"):
        LPRoundingPolicy(model="per-machine")


def test_dealing_waiting_jobs_follows_the_fewest_then_rank_rule():
    """partitions._deal (sorted levels, log k a job) gives each waiting job the group of
    smallest (size, (g - rank) mod k), as the direct rule does, from uneven starts."""
    import random
    from types import SimpleNamespace

    from placement.online.partitions import _deal

    rng = random.Random(7)
    for _ in range(200):
        k = rng.randint(1, 9)
        start = [[f"r{g}-{i}" for i in range(rng.randint(0, 4))] for g in range(k)]
        waiting = [SimpleNamespace(job=SimpleNamespace(id=f"w{n}")) for n in range(rng.randint(0, 40))]
        want = [list(b) for b in start]
        for rank, state in enumerate(waiting):
            want[min(range(k), key=lambda g: (len(want[g]), (g - rank) % k))].append(state.job.id)
        got = [list(b) for b in start]
        _deal(waiting, got)
        assert got == want


@pytest.mark.parametrize("information", ["oracle", "none"])
def test_the_lp_policy_resumes_from_a_checkpoint_with_the_same_decisions(information):
    # what the window reads of the past (each job's changes and useful seconds, the sizes
    # learned at none) must come back from the checkpoint, or the decisions after it differ
    inst = generate(jobs=20, cluster="racks:2x2", seed=3, max_workers=8, load=2.0)
    make = lambda: LPRoundingPolicy(threads=1)
    plain = B.drive(inst, make, information=information)[0]
    assert sum(map(len, plain)) > 0
    sizes = [{j: sum(w for w, _ in tasks.values()) for j, tasks in slot.items()} for slot in plain]
    assert any(sizes[t][j] != sizes[t - 1][j] for t in range(1, len(sizes)) for j in sizes[t]
               if j in sizes[t - 1]), "no job was resized: the restart counts would not matter"
    for k in (2, inst.horizon // 2):
        assert B.drive(inst, make, information=information, restart_at=k)[0] == plain
