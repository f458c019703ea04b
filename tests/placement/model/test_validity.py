"""Validity rules of MODEL.md, written from the spec (sections 2 and 3), not from the code.

For every rule: a minimal schedule that breaks it (rule number, slot, what is named and
the amounts) and one that *just* satisfies it (the boundary case).
Rule numbers: 0 well-defined, 1 capacity, 2 life, 3 shape, 4 network.
"""
from __future__ import annotations

import pytest

from placement.model.evaluate import validate
from placement.model.schedule import Schedule, ScheduleError
from placement.model.topology import Link, Switch, Topology

from .. import builders as B


job, machine, instance, sched, every, one, mentions, of_rule = (
    B.job, B.machine, B.instance, B.sched, B.every, B.one, B.mentions, B.of_rule)


def link_violation(violations, x: str, y: str):
    """The rule-4 violations that name the link between nodes x and y."""
    return [v for v in of_rule(violations, 4) if x in B.text(v) and y in B.text(v)]


# ======================================================================================
# Sanity: nothing scheduled, and a plainly fine schedule, are valid
# ======================================================================================

def test_empty_schedule_is_valid():
    assert validate(instance(B.star()), Schedule(())) == []


def test_plain_local_job_is_valid():
    inst = instance(B.star())
    assert validate(inst, every(range(4), [("j", "m0", 2, 2)])) == []


def test_single_machine_cluster_without_switches():
    inst = instance(B.single())
    assert validate(inst, every(range(4), [("j", "m0", 8, 8)])) == []


# ======================================================================================
# Rule 0: well-defined (section 2)
# ======================================================================================

def test_rule0_unknown_job():
    inst = instance(B.star())
    vs = validate(inst, sched((1, [("ghost", "m0", 1, 1)])))
    v = one(vs, 0, 1)
    assert mentions(v, "ghost")


def test_rule0_unknown_machine():
    inst = instance(B.star())
    vs = validate(inst, sched((2, [("j", "m9", 1, 1)])))
    v = one(vs, 0, 2)
    assert mentions(v, "m9")


def test_rule0_same_t_twice():
    inst = instance(B.star())
    vs = validate(inst, sched((1, [("j", "m0", 1, 1)]), (1, [("j", "m1", 1, 1)])))
    one(vs, 0, 1)


def test_rule0_distinct_t_in_any_order_is_fine():
    inst = instance(B.star())
    assert validate(inst, sched((2, [("j", "m0", 1, 1)]), (0, [("j", "m0", 1, 1)]))) == []


@pytest.mark.parametrize("t", [4, 7, -1])
def test_rule0_t_outside_horizon(t):
    # T = 4: slots are 0..3.
    inst = instance(B.star(), T=4)
    vs = validate(inst, sched((t, [("j", "m0", 1, 1)])))
    assert [v.rule for v in vs] == [0], [str(v) for v in vs]
    assert vs[0].slot == t
    assert mentions(vs[0], float(t))


def test_rule0_last_slot_inside_horizon_is_fine():
    inst = instance(B.star(), T=4)
    assert validate(inst, sched((3, [("j", "m0", 1, 1)]))) == []


def test_rule0_same_job_machine_pair_twice_in_a_slot():
    inst = instance(B.star())
    vs = validate(inst, sched((1, [("j", "m0", 1, 1), ("j", "m0", 1, 1)])))
    v = one(vs, 0, 1)
    assert mentions(v, "j", "m0")


def test_rule0_same_job_on_two_machines_and_two_jobs_on_one_machine_are_fine():
    inst = instance(B.star(), job("j"), job("k"))
    s = sched((0, [("j", "m0", 1, 1), ("j", "m1", 1, 1), ("k", "m0", 1, 1)]))
    assert validate(inst, s) == []


def test_rule0_same_pair_in_different_slots_is_fine():
    inst = instance(B.star())
    assert validate(inst, every([0, 1], [("j", "m0", 1, 1)])) == []


def test_zero_allocation_before_arrival_is_ignored():
    # workers = ps = 0 is ignored: no life violation although slot 0 < arrival 2.
    inst = instance(B.star(), job(arrival=2))
    assert validate(inst, sched((0, [("j", "m0", 0, 0)]))) == []


def test_zero_allocation_does_not_make_a_job_spread():
    # j runs 3 workers + 3 PS on m0 and has a 0/0 entry on m1.  If m1 counted as holding
    # tasks, the job would be spread and load link m0-sw with 6 Gbps > 1.  Ignored: local.
    inst = instance(B.star(gbps=1))
    s = sched((0, [("j", "m0", 3, 3), ("j", "m1", 0, 0)]))
    assert validate(inst, s) == []


def test_zero_allocation_after_completion_is_ignored():
    # delta 10, tau 1, 1 worker -> 10 batches per slot; B = 10 completes in slot 0.
    inst = instance(B.star(), job(work_batches=10))
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 0, 0)]), (2, [("j", "m1", 0, 0)]))
    assert validate(inst, s) == []


def test_zero_allocation_of_a_job_otherwise_absent_is_not_a_shape_violation():
    # W = 0 and S = 0 in slot 1 (only a 0/0 entry): fine.
    inst = instance(B.star())
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 0, 0)]))
    assert validate(inst, s) == []


# Well-formedness (not a verdict: an error)

@pytest.mark.parametrize("bad", [
    {"slots": {}},
    {"slots": [{"allocations": []}]},
    {"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m0", "workers": 2.0, "ps": 1}]}]},
    {"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m0", "workers": True, "ps": 1}]}]},
    {"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m0", "workers": 1}]}]},
    {"slots": [{"t": 0, "allocations": [{"job": "j", "machine": "m0", "workers": 1, "ps": 1,
                                         "gpu": 1}]}]},
    {"slots": [{"t": 0.0, "allocations": []}]},
    {"slots": [{"t": True, "allocations": []}]},
])
def test_malformed_schedule_is_an_error(bad):
    with pytest.raises(ScheduleError):
        Schedule.from_dict(bad)


def test_other_top_level_keys_are_allowed():
    s = Schedule.from_dict({"instance": "x", "solver": "greedy", "objective": 3.0, "bound": 1,
                            "timings": {}, "metrics": {},
                            "slots": [{"t": 0, "allocations": [
                                {"job": "j", "machine": "m0", "workers": 1, "ps": 1}]}]})
    assert validate(instance(B.star()), s) == []


# ======================================================================================
# Rule 1: capacity
# ======================================================================================

SMALL = dict(gpu=4, cpu=8)
# worker: 1 gpu + 1 cpu; PS: 2 cpu; kappa = 1/4 so PS count is not the binding rule here
CAP_JOB = dict(worker={"gpu": 1, "cpu": 1}, ps={"cpu": 2}, worker_gbps=1, ps_gbps=4)


def test_rule1_capacity_exactly_full_is_fine():
    # 4 workers + 2 PS on m0: gpu 4*1 = 4 <= 4, cpu 4*1 + 2*2 = 8 <= 8.
    inst = instance(B.single(machine("m0", **SMALL)), job(**CAP_JOB))
    assert validate(inst, sched((0, [("j", "m0", 4, 2)]))) == []


def test_rule1_ps_demand_counts():
    # 4 workers + 3 PS: cpu 4 + 6 = 10 > 8 (gpu 4 is fine).
    inst = instance(B.single(machine("m0", **SMALL)), job(**CAP_JOB))
    vs = validate(inst, sched((0, [("j", "m0", 4, 3)])))
    assert [v.rule for v in vs] == [1], [str(v) for v in vs]
    v = one(vs, 1, 0)
    assert mentions(v, "m0", "cpu", 10, 8)
    assert "gpu" not in B.text(v)


def test_rule1_sums_over_jobs():
    # j: 2 workers (gpu 2), k: 3 workers (gpu 3) on m0: gpu 5 > 4;
    # cpu 2+2 + 3+2 = 9 > 8 too.
    inst = instance(B.single(machine("m0", **SMALL)), job("j", **CAP_JOB), job("k", **CAP_JOB))
    vs = validate(inst, sched((1, [("j", "m0", 2, 1), ("k", "m0", 3, 1)])))
    assert {v.rule for v in vs} == {1}
    gpu = [v for v in of_rule(vs, 1) if "gpu" in B.text(v)]
    cpu = [v for v in of_rule(vs, 1) if "cpu" in B.text(v)]
    assert len(gpu) >= 1 and len(cpu) >= 1
    assert all(v.slot == 1 for v in vs)
    assert mentions(gpu[0], "m0", 5, 4)
    assert mentions(cpu[0], "m0", 9, 8)


def test_rule1_two_jobs_exactly_full_is_fine():
    # j: 2 workers 1 PS (gpu 2, cpu 4); k: 2 workers 1 PS (gpu 2, cpu 4): gpu 4, cpu 8.
    inst = instance(B.single(machine("m0", **SMALL)), job("j", **CAP_JOB), job("k", **CAP_JOB))
    assert validate(inst, sched((1, [("j", "m0", 2, 1), ("k", "m0", 2, 1)]))) == []


def test_rule1_float_sum_within_tolerance():
    # 3 workers of 0.1 cpu: 0.1+0.1+0.1 = 0.30000000000000004 in floats, capacity 0.3:
    # within the 1e-9 tolerance.  PS demand gpu 1 each, 3 PS -> gpu 3 <= 4.
    inst = instance(B.single(machine("m0", gpu=4, cpu=0.3)),
                    job(worker={"cpu": 0.1}, ps={"gpu": 1}))
    assert validate(inst, sched((0, [("j", "m0", 3, 3)]))) == []
    vs = validate(inst, sched((0, [("j", "m0", 4, 4)])))   # cpu 0.4 > 0.3
    assert [v.rule for v in vs] == [1]
    assert mentions(vs[0], "m0", "cpu", 0.4, 0.3)


def test_rule1_absolute_tolerance():
    # usage cpu 4*1 + 2*2 = 8 against 8 - 5e-10: within 1e-9; against 8 - 2e-9: over.
    ok = instance(B.single(machine("m0", gpu=4, cpu=8 - 5e-10)), job(**CAP_JOB))
    assert validate(ok, sched((0, [("j", "m0", 4, 2)]))) == []
    bad = instance(B.single(machine("m0", gpu=4, cpu=8 - 2e-9)), job(**CAP_JOB))
    vs = validate(bad, sched((0, [("j", "m0", 4, 2)])))
    assert [(v.rule, v.slot) for v in vs] == [(1, 0)]
    assert mentions(vs[0], "m0", "cpu", 8)


def test_rule1_missing_capacity_name_means_zero():
    # m1 lists no fpga: capacity 0.  A worker needs 1 fpga.
    topo = B.star(machine("m0", gpu=8, cpu=16, fpga=1), machine("m1", gpu=8, cpu=16))
    inst = instance(topo, job(worker={"gpu": 1, "fpga": 1}), resources=("gpu", "cpu", "fpga"))
    assert validate(inst, sched((0, [("j", "m0", 1, 1)]))) == []
    vs = validate(inst, sched((0, [("j", "m1", 1, 1)])))
    v = one(vs, 1, 0)
    assert mentions(v, "m1", "fpga", 1, 0)


def test_rule1_ps_on_a_machine_without_workers():
    # 1 worker on m0, 1 PS (cpu 2) on m1 whose cpu is 1: m1 is over.
    topo = B.star(machine("m0"), machine("m1", gpu=8, cpu=1))
    inst = instance(topo, job(ps={"cpu": 2}))
    vs = validate(inst, sched((0, [("j", "m0", 1, 0), ("j", "m1", 0, 1)])))
    assert [v.rule for v in vs] == [1], [str(v) for v in vs]
    assert mentions(one(vs, 1, 0), "m1", "cpu", 2, 1)


def test_rule1_is_checked_per_slot():
    inst = instance(B.single(machine("m0", **SMALL)), job(**CAP_JOB))
    vs = validate(inst, sched((0, [("j", "m0", 4, 2)]), (1, [("j", "m0", 4, 2)]),
                              (2, [("j", "m0", 4, 3)]), (3, [("j", "m0", 4, 2)])))
    assert [(v.rule, v.slot) for v in vs] == [(1, 2)]


# ======================================================================================
# Rule 2: life
# ======================================================================================

def test_rule2_arrival_slot_is_fine():
    inst = instance(B.star(), job(arrival=2))
    assert validate(inst, every([2, 3], [("j", "m0", 1, 1)])) == []


def test_rule2_one_slot_before_arrival():
    inst = instance(B.star(), job(arrival=2))
    vs = validate(inst, every([1, 2], [("j", "m0", 1, 1)]))
    v = one(vs, 2, 1)
    assert mentions(v, "j", 2)          # the arrival slot
    assert [x.rule for x in vs] == [2]


def test_rule2_ps_only_before_arrival_is_a_life_violation():
    # A PS alone before arrival: tasks before a_j (rule 2; also rule 3, W = 0 but S > 0).
    inst = instance(B.star(), job(arrival=2))
    vs = validate(inst, sched((1, [("j", "m0", 0, 1)])))
    assert one(vs, 2, 1)


def test_rule2_tasks_in_the_completion_slot_are_fine():
    # delta 10, tau 1, no gradient: 10 batches per worker per slot.  B = 20 with 1 worker:
    # cumulative 10 after slot 0, 20 after slot 1 -> completes in slot 1.
    inst = instance(B.star(), job(work_batches=20))
    assert validate(inst, every([0, 1], [("j", "m0", 1, 1)])) == []


def test_rule2_one_slot_after_completion():
    inst = instance(B.star(), job(work_batches=20))
    vs = validate(inst, every([0, 1, 2], [("j", "m0", 1, 1)]))
    v = one(vs, 2, 2)
    assert mentions(v, "j", 1)          # the completion slot
    assert [x.rule for x in vs] == [2]


def test_rule2_completion_accounts_for_pauses():
    # Slots 0 and 2 (paused in 1): cumulative 10, 10, 20 -> completes in slot 2; slot 3 not.
    inst = instance(B.star(), job(work_batches=20))
    assert validate(inst, every([0, 2], [("j", "m0", 1, 1)])) == []
    vs = validate(inst, every([0, 2, 3], [("j", "m0", 1, 1)]))
    assert [(v.rule, v.slot) for v in vs] == [(2, 3)]


def test_rule2_completion_accounts_for_restart_loss():
    # r = 5, delta 10, theta 1, 1 worker: slot 0 (first start) does (10 - 5)/1 = 5,
    # slot 1 (same triples) 10 -> cumulative 5, 15.  B = 8: not done in slot 0 (it would
    # be if the restart loss were ignored: 10 >= 8), done in slot 1.
    inst = instance(B.star(), job(work_batches=8, restart_seconds=5))
    assert validate(inst, every([0, 1], [("j", "m0", 1, 1)])) == []
    vs = validate(inst, every([0, 1, 2], [("j", "m0", 1, 1)]))
    assert [(v.rule, v.slot) for v in vs] == [(2, 2)]


def test_rule2_completion_uses_relative_tolerance():
    # 1 worker, delta 1000, tau 0.001: 1000/0.001 = 1e6 batches in slot 0.
    # B = 1e6 + 1e-4: B*(1 - 1e-9) = 1e6 + 1e-4 - 1e-3 (about) < 1e6 -> completes in slot 0,
    # so tasks in slot 1 break rule 2.
    inst = instance(B.star(), job(work_batches=1e6 + 1e-4, batch_seconds=0.001), delta=1000)
    vs = validate(inst, every([0, 1], [("j", "m0", 1, 1)]))
    assert [(v.rule, v.slot) for v in vs] == [(2, 1)]


def test_rule2_spread_job_completes_at_spread_speed():
    # tau 1, gradient 500 MB -> 2*500*0.008 = 8 Gb per batch.
    # Local on m0 (local_gbps 8): theta = 1 + 8/8 = 2 -> 1 worker does 10/2 = 5 per slot.
    # Spread (worker on m0, PS on m1), worker_gbps 2: theta = 1 + 8/2 = 5 -> 2 per slot.
    # B = 5: local completes in slot 0; spread needs 3 slots (2, 4, 6) -> completes in slot 2.
    topo = B.star(machine("m0", local_gbps=8), machine("m1", local_gbps=8))
    inst = instance(topo, job(work_batches=5, gradient_mb=500, worker_gbps=2, ps_gbps=2))
    spread = [("j", "m0", 1, 0), ("j", "m1", 0, 1)]
    assert validate(inst, every([0, 1, 2], spread)) == []
    vs = validate(inst, every([0, 1, 2, 3], spread))
    assert [(v.rule, v.slot) for v in vs] == [(2, 3)]
    vs = validate(inst, every([0, 1], [("j", "m0", 1, 1)]))
    assert [(v.rule, v.slot) for v in vs] == [(2, 1)]


# ======================================================================================
# Rule 3: shape
# ======================================================================================

def test_rule3_exactly_min_workers_is_fine():
    inst = instance(B.star(), job(min_workers=2, max_workers=4))
    assert validate(inst, sched((0, [("j", "m0", 2, 2)]))) == []


def test_rule3_below_min_workers():
    inst = instance(B.star(), job(min_workers=2, max_workers=4))
    vs = validate(inst, sched((1, [("j", "m0", 1, 1)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 1), "j", 1, 2)


def test_rule3_min_workers_counts_all_machines():
    # 1 worker on m0 + 1 on m1 = W 2 >= min 2.
    inst = instance(B.star(), job(min_workers=2, max_workers=4))
    assert validate(inst, sched((0, [("j", "m0", 1, 2), ("j", "m1", 1, 0)]))) == []


def test_rule3_exactly_max_workers_is_fine():
    inst = instance(B.star(), job(max_workers=3))
    assert validate(inst, sched((0, [("j", "m0", 3, 3)]))) == []


def test_rule3_above_max_workers():
    inst = instance(B.star(), job(max_workers=3))
    vs = validate(inst, sched((0, [("j", "m0", 4, 4)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 0), "j", 4, 3)


def test_rule3_max_workers_counts_all_machines():
    # 2 + 2 = 4 > 3 although each machine alone holds only 2.
    inst = instance(B.star(), job(max_workers=3))
    vs = validate(inst, sched((0, [("j", "m0", 2, 4), ("j", "m1", 2, 0)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 0), "j", 4, 3)


def test_rule3_workers_without_ps():
    inst = instance(B.star())
    vs = validate(inst, sched((2, [("j", "m0", 1, 0)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 2), "j")


def test_rule3_ps_without_workers():
    inst = instance(B.star())
    vs = validate(inst, sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 0, 1)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 1), "j")


def test_rule3_more_ps_than_needed_is_fine():
    inst = instance(B.star())
    assert validate(inst, sched((0, [("j", "m0", 1, 5)]))) == []


@pytest.mark.parametrize("wg, pg, W, need", [
    # need = ceil(wg/pg * W) in exact decimal arithmetic, by hand:
    (0.3, 0.1, 3, 9),   # 0.3/0.1 = 3 -> 3*3 = 9   (floats: 3*0.3 = 0.8999999999999999)
    (1.1, 0.1, 1, 11),  # 11
    (0.1, 0.1, 3, 3),   # 1*3 = 3 (floats: 3*0.1/0.1 = 3.0000000000000004 -> naive ceil 4)
    (0.2, 0.1, 3, 6),   # 2*3 = 6 (floats: 3*0.2/0.1 = 6.000000000000001 -> naive ceil 7)
    (0.1, 0.7, 7, 1),   # 1/7*7 = 1 (floats: 0.1/0.7*7 = 1.0000000000000002 -> naive 2)
    (0.1, 0.3, 3, 1),   # 1/3*3 = 1
    (1, 4, 5, 2),       # 5/4 = 1.25 -> 2
    (1, 4, 1, 1),       # 0.25 -> 1 (and S >= 1)
    (3, 2, 3, 5),       # 4.5 -> 5
])
def test_rule3_ps_count_exactly_ceil_kappa_w(wg, pg, W, need):
    inst = instance(B.single(machine("m0", gpu=16, cpu=32)),
                    job(worker_gbps=wg, ps_gbps=pg, max_workers=16))
    assert inst.jobs[0].min_ps(W) == need
    assert validate(inst, sched((0, [("j", "m0", W, need)]))) == []
    if need > 1:
        vs = validate(inst, sched((0, [("j", "m0", W, need - 1)])))
        assert [v.rule for v in vs] == [3], [str(v) for v in vs]
        assert mentions(one(vs, 3, 0), "j", need - 1)


def test_rule3_ps_bandwidth_absolute_tolerance():
    # W = S = 2, worker_gbps 1: S * ps_gbps >= W * worker_gbps - 1e-9.
    # ps_gbps 1 - 2e-10: 2 - 4e-10 >= 2 - 1e-9 -> 2 PS suffice.
    # ps_gbps 1 - 1e-9:  2 - 2e-9  <  2 - 1e-9 -> 2 PS are short (3 needed).
    inst = instance(B.single(), job(worker_gbps=1, ps_gbps=1 - 2e-10))
    assert validate(inst, sched((0, [("j", "m0", 2, 2)]))) == []
    inst = instance(B.single(), job(worker_gbps=1, ps_gbps=1 - 1e-9))
    vs = validate(inst, sched((0, [("j", "m0", 2, 2)])))
    assert [(v.rule, v.slot) for v in vs] == [(3, 0)]
    assert inst.jobs[0].min_ps(2) == 3


def test_rule3_paused_slot_needs_no_min_workers():
    # min_workers 2 binds only when W > 0: a paused slot (W = S = 0) is fine.
    inst = instance(B.star(), job(min_workers=2))
    assert validate(inst, every([0, 2], [("j", "m0", 2, 2)])) == []


def test_rule3_ps_ratio_holds_for_local_jobs_too():
    # kappa = 2/1: 2 workers need 4 PS even on one machine.
    inst = instance(B.single(), job(worker_gbps=2, ps_gbps=1))
    assert validate(inst, sched((0, [("j", "m0", 2, 4)]))) == []
    vs = validate(inst, sched((0, [("j", "m0", 2, 3)])))
    assert [v.rule for v in vs] == [3]
    assert mentions(one(vs, 3, 0), "j", 3)


def test_rule3_ps_on_machines_without_workers_count():
    # kappa 1, W = 2 on m0, S = 1 on m0 + 1 on m1 = 2: fine.  S = 1 on m1 only: short.
    inst = instance(B.star())
    assert validate(inst, sched((0, [("j", "m0", 2, 1), ("j", "m1", 0, 1)]))) == []
    assert validate(inst, sched((0, [("j", "m0", 2, 0), ("j", "m1", 0, 2)]))) == []
    vs = validate(inst, sched((0, [("j", "m0", 2, 0), ("j", "m1", 0, 1)])))
    assert [v.rule for v in vs] == [3]


# ======================================================================================
# Rule 4: network (hose model on the tree, up to the lowest common ancestor)
# ======================================================================================

NET = dict(worker_gbps=10, ps_gbps=10)


def test_rule4_in_rack_spread_loads_machine_links_exactly_full():
    # W 1 on a0, PS 1 on a1: LCA tor0.  a0-tor0 carries 10 (= 10), a1-tor0 carries 10
    # (= 10), tor0-spine carries nothing (its 1 Gbps is irrelevant).
    inst = instance(B.two_racks(machine_gbps=10, rack_gbps=1), job(**NET))
    assert validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "a1", 0, 1)]))) == []


def test_rule4_in_rack_spread_over_machine_links():
    inst = instance(B.two_racks(machine_gbps=9.5, rack_gbps=1), job(**NET))
    vs = validate(inst, sched((1, [("j", "a0", 1, 0), ("j", "a1", 0, 1)])))
    assert {v.rule for v in vs} == {4}
    assert all(v.slot == 1 for v in vs)
    a0 = link_violation(vs, "a0", "tor0")
    a1 = link_violation(vs, "a1", "tor0")
    assert len(a0) == 1 and len(a1) == 1 and len(vs) == 2, [str(v) for v in vs]
    assert mentions(a0[0], 10, 9.5)
    assert mentions(a1[0], 10, 9.5)   # the PS on a machine with no workers reserves too
    assert not link_violation(vs, "tor0", "spine")


def test_rule4_cross_rack_loads_both_levels_exactly_full():
    # W 1 on a0, PS 1 on b0: LCA spine.  a0-tor0 10, tor0-spine 10, b0-tor1 10, tor1-spine 10.
    inst = instance(B.two_racks(machine_gbps=10, rack_gbps=10), job(**NET))
    assert validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "b0", 0, 1)]))) == []


def test_rule4_cross_rack_worker_side_uplink_over():
    inst = instance(B.two_racks(machine_gbps=10, rack_gbps=(9.5, 10)), job(**NET))
    vs = validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "b0", 0, 1)])))
    assert len(vs) == 1 and vs[0].rule == 4 and vs[0].slot == 0, [str(v) for v in vs]
    assert mentions(vs[0], "tor0", "spine", 10, 9.5)


def test_rule4_cross_rack_ps_side_uplink_over():
    # The PS sits on b0, which holds no worker: it still reserves 10 on b0-tor1-spine.
    inst = instance(B.two_racks(machine_gbps=10, rack_gbps=(10, 9.5)), job(**NET))
    vs = validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "b0", 0, 1)])))
    assert len(vs) == 1 and vs[0].rule == 4, [str(v) for v in vs]
    assert mentions(vs[0], "tor1", "spine", 10, 9.5)


def test_rule4_counts_every_task_on_a_machine():
    # kappa = 1/2.  W 3 + S 2 on a0, W 1 on a1 (spread in rack 0, LCA tor0).
    # a0-tor0: 3*1 + 2*2 = 7;  a1-tor0: 1*1 = 1;  tor0-spine: 0.
    j = job(worker_gbps=1, ps_gbps=2)
    alloc = [("j", "a0", 3, 2), ("j", "a1", 1, 0)]
    assert validate(instance(B.two_racks(machine_gbps=7, rack_gbps=0.5), j), sched((0, alloc))) == []
    vs = validate(instance(B.two_racks(machine_gbps=6.9, rack_gbps=0.5), j), sched((0, alloc)))
    assert len(vs) == 1 and vs[0].rule == 4, [str(v) for v in vs]
    assert mentions(vs[0], "a0", "tor0", 7, 6.9)


def test_rule4_hose_reserves_up_to_the_lca_even_for_traffic_that_could_stay_below():
    # W 1 on a0 + PS 1 on a1 (rack 0), W 1 on b0 + PS 1 on b1 (rack 1); kappa 1.
    # LCA spine: every task reserves on its whole path to the spine, so
    # tor0-spine carries 1 + 1 = 2 and tor1-spine 2 (section 7: conservative by design).
    j = job(worker_gbps=1, ps_gbps=1)
    alloc = [("j", "a0", 1, 0), ("j", "a1", 0, 1), ("j", "b0", 1, 0), ("j", "b1", 0, 1)]
    assert validate(instance(B.two_racks(machine_gbps=1, rack_gbps=2), j), sched((0, alloc))) == []
    vs = validate(instance(B.two_racks(machine_gbps=1, rack_gbps=1.9), j), sched((0, alloc)))
    assert {v.rule for v in vs} == {4} and len(vs) == 2, [str(v) for v in vs]
    assert len(link_violation(vs, "tor0", "spine")) == 1
    assert len(link_violation(vs, "tor1", "spine")) == 1
    assert all(mentions(v, 2, 1.9) for v in vs)


def test_rule4_sums_reservations_of_all_jobs():
    # j and k each: W 1 on a0, PS 1 on a1 -> a0-tor0 carries 1 + 1 = 2.
    j, k = job("j", worker_gbps=1, ps_gbps=1), job("k", worker_gbps=1, ps_gbps=1)
    alloc = [("j", "a0", 1, 0), ("j", "a1", 0, 1), ("k", "a0", 1, 0), ("k", "a1", 0, 1)]
    assert validate(instance(B.two_racks(machine_gbps=2), j, k), sched((0, alloc))) == []
    vs = validate(instance(B.two_racks(machine_gbps=1.5), j, k), sched((3, alloc)))
    assert {v.rule for v in vs} == {4} and all(v.slot == 3 for v in vs)
    assert mentions(link_violation(vs, "a0", "tor0")[0], 2, 1.5)
    assert mentions(link_violation(vs, "a1", "tor0")[0], 2, 1.5)


def test_rule4_local_job_loads_no_link_even_if_huge():
    inst = instance(B.two_racks(machine_gbps=1, rack_gbps=1),
                    job(worker_gbps=1000, ps_gbps=1000))
    assert validate(inst, sched((0, [("j", "a0", 8, 8)]))) == []


def test_rule4_local_and_spread_jobs_share_a_link():
    # local job k on a0 adds nothing; spread j (W a0, PS a1) loads a0-tor0 with 1.
    inst = instance(B.two_racks(machine_gbps=1), job("j"), job("k", worker_gbps=50, ps_gbps=50))
    s = sched((0, [("j", "a0", 1, 0), ("j", "a1", 0, 1), ("k", "a0", 2, 2)]))
    assert validate(inst, s) == []


def three_level(gbps: dict[str, float]) -> Topology:
    """core -- agg -- tor0 -- a0;  agg -- tor1 -- b0;  core -- c0 (a machine under core).
    Some links are written child-first, some parent-first: direction comes from the root."""
    g = {"a0": 100, "b0": 100, "tor0": 100, "tor1": 100, "agg": 100, "c0": 100, **gbps}
    ms = (machine("a0"), machine("b0"), machine("c0"))
    links = (Link("tor0", "a0", g["a0"]), Link("b0", "tor1", g["b0"]),
             Link("agg", "tor0", g["tor0"]), Link("tor1", "agg", g["tor1"]),
             Link("core", "agg", g["agg"]), Link("c0", "core", g["c0"]))
    return Topology(ms, (Switch("core"), Switch("agg"), Switch("tor0"), Switch("tor1")),
                    links, "core")


def test_rule4_lca_below_the_root():
    # W on a0, PS on b0: LCA agg.  a0-tor0, tor0-agg, b0-tor1, tor1-agg carry 1 each;
    # agg-core (gbps 0.5) carries nothing.
    inst = instance(three_level({"a0": 1, "b0": 1, "tor0": 1, "tor1": 1, "agg": 0.5}), job())
    assert validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "b0", 0, 1)]))) == []
    inst = instance(three_level({"a0": 1, "b0": 1, "tor0": 0.5, "tor1": 1, "agg": 0.5}), job())
    vs = validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "b0", 0, 1)])))
    assert len(vs) == 1 and vs[0].rule == 4, [str(v) for v in vs]
    assert mentions(vs[0], "tor0", "agg", 1, 0.5)


def test_rule4_lca_at_the_root_with_uneven_depths():
    # W on a0 (depth 3), PS on c0 (depth 1): LCA core.
    # Path a0-tor0-agg-core: links a0, tor0, agg carry 1; c0-core carries 1.
    inst = instance(three_level({"a0": 1, "tor0": 1, "agg": 1, "c0": 1}), job())
    assert validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "c0", 0, 1)]))) == []
    inst = instance(three_level({"a0": 1, "tor0": 1, "agg": 0.5, "c0": 1}), job())
    vs = validate(inst, sched((0, [("j", "a0", 1, 0), ("j", "c0", 0, 1)])))
    assert len(vs) == 1 and vs[0].rule == 4, [str(v) for v in vs]
    assert mentions(vs[0], "agg", "core", 1, 0.5)


def test_rule4_absolute_tolerance():
    # W on m0, PS on m1, 10 Gbps each: each machine link carries 10.
    j = job(worker_gbps=10, ps_gbps=10)
    alloc = [("j", "m0", 1, 0), ("j", "m1", 0, 1)]
    assert validate(instance(B.star(gbps=10 - 5e-10), j), sched((0, alloc))) == []
    vs = validate(instance(B.star(gbps={"m0": 10 - 2e-9, "m1": 10}), j), sched((0, alloc)))
    assert [(v.rule, v.slot) for v in vs] == [(4, 0)]
    assert mentions(vs[0], "m0", "sw", 10)


def test_rule4_link_loaded_within_float_tolerance():
    # 3 workers of 0.1 Gbps on m0: m0-sw carries 0.1+0.1+0.1 = 0.30000000000000004 in
    # floats against 0.3 -> fine within 1e-9.  kappa 1/3 -> 1 PS on m1 (m1-sw carries 0.3).
    inst = instance(B.star(gbps=0.3), job(worker_gbps=0.1, ps_gbps=0.3))
    assert validate(inst, sched((0, [("j", "m0", 3, 0), ("j", "m1", 0, 1)]))) == []
