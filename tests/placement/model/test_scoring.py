"""Scores of MODEL.md sections 4-5, computed by hand (the arithmetic is in the comments).

Unless a test says otherwise: slot_seconds (delta) 10, tau 1 s, no gradient (theta = 1 s),
restart 0, huge work_batches (the job never finishes), so progress is read off
``remaining_batches``.
"""
from __future__ import annotations

import pytest

from placement.model.evaluate import evaluate, score, validate
from placement.model.instance import Instance
from placement.model.schedule import Schedule

from .. import builders as B
from ..conftest import TINY


job, machine, instance, sched, every = B.job, B.machine, B.instance, B.sched, B.every

approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-9)  # noqa: E731
BIG = 1e6


def outcome(report, job_id="j"):
    (o,) = [o for o in report.jobs if o.id == job_id]
    return o


def done(inst: Instance, schedule: Schedule, job_id="j") -> float:
    """Mini-batches processed by ``job_id`` (work_batches - remaining)."""
    j = inst.jobs[inst.job_index[job_id]]
    return j.work_batches - outcome(score(inst, schedule), job_id).remaining_batches


# ======================================================================================
# Per-mini-batch time: local uses the machine's local_gbps, spread uses worker_gbps
# ======================================================================================

# m0: local 16 Gbps, m1: local 32 Gbps.  tau 0.5 s, gradient 500 MB:
# each mini-batch moves 2 * 500 * 0.008 = 8 Gb.
#   local on m0: theta = 0.5 + 8/16 = 1.0 s
#   local on m1: theta = 0.5 + 8/32 = 0.75 s
#   spread, worker_gbps 4: theta = 0.5 + 8/4 = 2.5 s
def theta_instance(worker_gbps=4):
    topo = B.star(machine("m0", local_gbps=16), machine("m1", local_gbps=32))
    return instance(topo, job(batch_seconds=0.5, gradient_mb=500, work_batches=BIG,
                              worker_gbps=worker_gbps, ps_gbps=worker_gbps), T=2)


def test_local_on_m0_uses_its_local_gbps():
    # 2 workers, theta 1.0: 2 * 10 / 1.0 = 20 per slot, 2 slots -> 40.
    inst = theta_instance()
    s = every([0, 1], [("j", "m0", 2, 2)])
    assert validate(inst, s) == []
    assert done(inst, s) == approx(40)


def test_local_on_m1_uses_its_own_local_gbps():
    # 2 workers, theta 0.75: 2 * 10 / 0.75 = 26.666.. per slot -> 53.333..
    inst = theta_instance()
    s = every([0, 1], [("j", "m1", 2, 2)])
    assert done(inst, s) == approx(2 * 2 * 10 / 0.75)


def test_spread_workers_use_worker_gbps():
    # 1 worker on m0 + 1 on m1, 2 PS on m0: spread, theta 2.5: 2*10/2.5 = 8 per slot -> 16.
    inst = theta_instance()
    s = every([0, 1], [("j", "m0", 1, 2), ("j", "m1", 1, 0)])
    assert validate(inst, s) == []
    assert done(inst, s) == approx(16)


def test_ps_on_another_machine_makes_the_job_spread():
    # Both workers on m0, both PS on m1: the tasks sit on two machines -> not local.
    # theta 2.5 -> 8 per slot -> 16 (local on m0 would give 40).
    inst = theta_instance()
    s = every([0, 1], [("j", "m0", 2, 0), ("j", "m1", 0, 2)])
    assert validate(inst, s) == []
    assert done(inst, s) == approx(16)


def test_spread_uses_worker_gbps_even_when_faster_than_local():
    # worker_gbps 64: theta = 0.5 + 8/64 = 0.625; 1 worker: 10/0.625 = 16 per slot -> 32.
    inst = theta_instance(worker_gbps=64)
    s = every([0, 1], [("j", "m0", 1, 0), ("j", "m1", 0, 1)])
    assert validate(inst, s) == []
    assert done(inst, s) == approx(32)


def test_locality_is_decided_per_slot():
    # slot 0 local on m0 (2 workers: 20), slot 1 spread (2 workers: 8) -> 28.
    inst = theta_instance()
    s = sched((0, [("j", "m0", 2, 2)]), (1, [("j", "m0", 1, 2), ("j", "m1", 1, 0)]))
    assert done(inst, s) == approx(28)


def test_zero_allocation_does_not_make_a_job_spread():
    # 2 workers + 2 PS on m0 and a 0/0 entry on m1: still local on m0 -> 40.
    inst = theta_instance()
    s = every([0, 1], [("j", "m0", 2, 2), ("j", "m1", 0, 0)])
    assert done(inst, s) == approx(40)


# ======================================================================================
# Restart loss (r = 2 s, delta 10, theta 1: a reconfiguring slot gives (10-2)/1 = 8 per
# worker, a steady slot 10 per worker)
# ======================================================================================

def restart_instance(r=2, T=6, **kw):
    return instance(B.star(), job(work_batches=BIG, restart_seconds=r, **kw), T=T)


def test_restart_loss_on_the_first_start():
    # slot 0 first start: 8; slot 1 unchanged: 10 -> 18; one reconfiguration.
    inst = restart_instance()
    s = every([0, 1], [("j", "m0", 1, 1)])
    assert done(inst, s) == approx(18)
    assert outcome(score(inst, s)).reconfigurations == 1
    assert score(inst, s).reconfigurations == 1


def test_restart_loss_on_a_late_first_start():
    # arrival 1, first start in slot 2: 8, slot 3: 10 -> 18.
    inst = restart_instance(arrival=1)
    s = every([2, 3], [("j", "m0", 1, 1)])
    assert done(inst, s) == approx(18)
    assert outcome(score(inst, s)).reconfigurations == 1


def test_no_loss_while_triples_are_unchanged():
    # 8 + 10 + 10 + 10 = 38 over slots 0..3, one reconfiguration.
    inst = restart_instance()
    s = every(range(4), [("j", "m0", 1, 1)])
    assert done(inst, s) == approx(38)
    assert outcome(score(inst, s)).reconfigurations == 1


def test_restart_loss_on_a_changed_worker_count():
    # slot 0 (1 worker): 8; slot 1 (2 workers, changed): 2*8 = 16; slot 2 (same): 20 -> 44.
    inst = restart_instance()
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 2, 2)]), (2, [("j", "m0", 2, 2)]))
    assert done(inst, s) == approx(44)
    assert outcome(score(inst, s)).reconfigurations == 2


def test_restart_loss_on_a_changed_ps_count_only():
    # (m0, 1, 1) then (m0, 1, 2): the triple changed -> 8 + 8 = 16.
    inst = restart_instance()
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 1, 2)]))
    assert done(inst, s) == approx(16)
    assert outcome(score(inst, s)).reconfigurations == 2


def test_restart_loss_on_a_move_to_another_machine():
    # (m0, 1, 1) then (m1, 1, 1): same counts, another machine -> 8 + 8 = 16.
    inst = restart_instance()
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m1", 1, 1)]))
    assert done(inst, s) == approx(16)
    assert outcome(score(inst, s)).reconfigurations == 2


def test_restart_loss_on_a_resume_after_a_paused_slot():
    # slot 0: 8; slot 1 paused: 0; slot 2 same triples as slot 0 but after a pause: 8;
    # slot 3: 10 -> 26; two reconfigurations (slots 0 and 2).
    inst = restart_instance()
    s = every([0, 2, 3], [("j", "m0", 1, 1)])
    assert done(inst, s) == approx(26)
    assert outcome(score(inst, s)).reconfigurations == 2


def test_same_set_of_triples_in_another_order_is_no_reconfiguration():
    # {(m0,1,1), (m1,1,0)} listed in two orders: spread, theta = 1 + 0 (no gradient) = 1.
    # slot 0: 2 * 8 = 16; slot 1: 2 * 10 = 20 -> 36; one reconfiguration.
    inst = restart_instance()
    s = sched((0, [("j", "m0", 1, 1), ("j", "m1", 1, 0)]),
              (1, [("j", "m1", 1, 0), ("j", "m0", 1, 1)]))
    assert done(inst, s) == approx(36)
    assert outcome(score(inst, s)).reconfigurations == 1


def test_zero_allocation_is_not_a_triple():
    # slot 1 adds a 0/0 entry on m1: ignored, the triples are unchanged -> 8 + 10 = 18.
    inst = restart_instance()
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 1, 1), ("j", "m1", 0, 0)]))
    assert done(inst, s) == approx(18)
    assert outcome(score(inst, s)).reconfigurations == 1


def test_restart_loss_scales_with_workers_and_theta():
    # 3 workers, tau 2 (theta 2), r 4: slot 0: 3 * (10 - 4) / 2 = 9; slot 1: 3 * 10 / 2 = 15.
    inst = restart_instance(r=4, batch_seconds=2)
    s = every([0, 1], [("j", "m0", 3, 3)])
    assert done(inst, s) == approx(24)


@pytest.mark.parametrize("r", [10, 25])
def test_restart_at_least_a_slot_gives_a_zero_work_slot_then_full_speed(r):
    # r >= delta: slot 0 does max(0, 10 - r) = 0; slots 1, 2 (same triples) 10 each -> 20.
    inst = restart_instance(r=r)
    s = every([0, 1, 2], [("j", "m0", 1, 1)])
    assert done(inst, s) == approx(20)
    assert outcome(score(inst, s)).reconfigurations == 1


def test_restart_at_least_a_slot_and_changing_every_slot_never_progresses():
    inst = restart_instance(r=10)
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m1", 1, 1)]), (2, [("j", "m0", 1, 1)]))
    assert done(inst, s) == approx(0)
    assert outcome(score(inst, s)).reconfigurations == 3


def test_restart_at_least_a_slot_completion():
    # r 10, B 10: slot 0 does 0, slot 1 does 10 -> c = 1, JCT = (1 + 1) * 10 - 0 = 20.
    inst = instance(B.star(), job(work_batches=10, restart_seconds=10), T=4)
    s = every([0, 1], [("j", "m0", 1, 1)])
    assert validate(inst, s) == []
    o = outcome(score(inst, s))
    assert o.finished and o.completion_slot == 1
    assert o.jct == approx(20)


def test_reconfigurations_count_even_without_restart_cost():
    # r = 0: the count still follows the definition (start, change, resume) -> 3.
    inst = restart_instance(r=0)
    s = sched((0, [("j", "m0", 1, 1)]), (1, [("j", "m0", 2, 2)]), (3, [("j", "m0", 2, 2)]))
    assert done(inst, s) == approx(10 + 20 + 20)
    assert score(inst, s).reconfigurations == 3


def test_reconfiguration_count_sums_over_jobs():
    # j: start (1); k: start, change (2) -> 3.
    inst = instance(B.star(), job("j"), job("k"), T=4)
    s = sched((0, [("j", "m0", 1, 1), ("k", "m1", 1, 1)]),
              (1, [("j", "m0", 1, 1), ("k", "m1", 2, 2)]))
    rep = score(inst, s)
    assert rep.reconfigurations == 3
    assert outcome(rep, "j").reconfigurations == 1
    assert outcome(rep, "k").reconfigurations == 2


# ======================================================================================
# Completion and JCT
# ======================================================================================

def test_completion_slot_and_jct():
    # arrival 1, 1 worker, theta 1: 10 per slot; B 25: cumulative 10, 20, 30 in slots 1..3
    # -> c = 3; C = (3 + 1) * 10 = 40; JCT = 40 - 1 * 10 = 30.
    inst = instance(B.star(), job(arrival=1, work_batches=25), T=5)
    s = every([1, 2, 3], [("j", "m0", 1, 1)])
    assert validate(inst, s) == []
    rep = score(inst, s)
    o = outcome(rep)
    assert o.finished and o.completion_slot == 3
    assert o.jct == approx(30)
    assert rep.unfinished == 0


def test_completion_exactly_at_the_end_of_a_slot():
    # B 20: cumulative exactly 20 after slot 2 -> c = 2, JCT = 30 - 10 = 20.
    inst = instance(B.star(), job(arrival=1, work_batches=20), T=5)
    o = outcome(score(inst, every([1, 2], [("j", "m0", 1, 1)])))
    assert o.completion_slot == 2 and o.jct == approx(20)


def test_completion_in_the_arrival_slot_costs_one_slot():
    # arrival 2, B 10, one slot of work -> c = 2, JCT = 3*10 - 2*10 = 10.
    inst = instance(B.star(), job(arrival=2, work_batches=10), T=4)
    o = outcome(score(inst, sched((2, [("j", "m0", 1, 1)]))))
    assert o.completion_slot == 2 and o.jct == approx(10)


def test_completion_in_the_last_slot_of_the_horizon():
    # T 2, B 20: c = 1 = T - 1 -> finished, JCT 20.
    inst = instance(B.star(), job(work_batches=20), T=2)
    o = outcome(score(inst, every([0, 1], [("j", "m0", 1, 1)])))
    assert o.finished and o.completion_slot == 1 and o.jct == approx(20)


def test_completion_tolerance_is_relative():
    # delta 1000, tau 0.001, 1 worker: 1000 / 0.001 = 1e6 in slot 0.
    # B = 1e6 + 1e-4: B * (1 - 1e-9) = 1e6 + 1e-4 - (1e-3 + 1e-13) < 1e6 -> c = 0, JCT 1000.
    # (An absolute 1e-9 tolerance would say 1e6 < 1e6 + 1e-4 - 1e-9: not complete.)
    inst = instance(B.star(), job(work_batches=1e6 + 1e-4, batch_seconds=0.001), T=3,
                    delta=1000)
    o = outcome(score(inst, sched((0, [("j", "m0", 1, 1)]))))
    assert o.finished and o.completion_slot == 0 and o.jct == approx(1000)


def test_completion_tolerance_is_not_larger_than_stated():
    # B = 1e6 + 0.01: B * (1 - 1e-9) = 1e6 + 0.01 - 0.00100000001 > 1e6 -> not in slot 0;
    # slot 1 adds 1e6 -> c = 1, JCT 2000.
    inst = instance(B.star(), job(work_batches=1e6 + 0.01, batch_seconds=0.001), T=3,
                    delta=1000)
    o = outcome(score(inst, every([0, 1], [("j", "m0", 1, 1)])))
    assert o.completion_slot == 1 and o.jct == approx(2000)


def test_no_progress_after_completion_changes_nothing():
    # B 10 completes in slot 0 (JCT 10); the (invalid) extra slot does not move it.
    inst = instance(B.star(), job(work_batches=10), T=4)
    o = outcome(score(inst, every([0, 1, 2], [("j", "m0", 1, 1)])))
    assert o.completion_slot == 0 and o.jct == approx(10)


# ======================================================================================
# Unfinished jobs: JCT = (T - a) * delta + R * theta^L / U
# ======================================================================================

def unfinished_instance(**kw):
    # m0 local 16, m1 local 32 (the largest).  tau 0.5, gradient 500 MB (8 Gb per batch),
    # U = 4, B = 100, T = 2, delta 10.  theta^L = 0.5 + 8/32 = 0.75 s.
    topo = B.star(machine("m0", local_gbps=16), machine("m1", local_gbps=32))
    base = dict(batch_seconds=0.5, gradient_mb=500, work_batches=100, max_workers=4)
    base.update(kw)
    return instance(topo, job(**base), T=2)


def test_unfinished_charge_uses_the_largest_local_gbps():
    # Ran locally on m0 (theta 1.0) with 1 worker: 10 per slot -> R = 100 - 20 = 80.
    # JCT = (2 - 0) * 10 + 80 * 0.75 / 4 = 20 + 15 = 35.
    # (With m0's own theta 1.0 it would be 20 + 20 = 40.)
    inst = unfinished_instance()
    rep = score(inst, every([0, 1], [("j", "m0", 1, 1)]))
    o = outcome(rep)
    assert not o.finished and o.completion_slot is None
    assert o.remaining_batches == approx(80)
    assert o.jct == approx(35)
    assert rep.unfinished == 1


def test_unfinished_charge_largest_local_machine_listed_first():
    # Same with the machine order swapped: still theta^L from local 32 Gbps.
    topo = B.star(machine("m1", local_gbps=32), machine("m0", local_gbps=16))
    inst = instance(topo, job(batch_seconds=0.5, gradient_mb=500, work_batches=100,
                              max_workers=4), T=2)
    o = outcome(score(inst, every([0, 1], [("j", "m0", 1, 1)])))
    assert o.jct == approx(35)


def test_unfinished_job_never_scheduled():
    # arrival 1, nothing done: R = 100; JCT = (2 - 1) * 10 + 100 * 0.75 / 4 = 10 + 18.75.
    inst = unfinished_instance(arrival=1)
    o = outcome(score(inst, Schedule(())))
    assert not o.finished and o.remaining_batches == approx(100)
    assert o.jct == approx(28.75)


def test_unfinished_charge_divides_by_max_workers_not_by_workers_used():
    # U = 2 now, ran with 1 worker on m1 (theta 0.75): 10/0.75 = 13.333.. per slot,
    # R = 100 - 26.666.. = 73.333..; JCT = 20 + 73.333.. * 0.75 / 2 = 20 + 27.5 = 47.5.
    inst = unfinished_instance(max_workers=2)
    o = outcome(score(inst, every([0, 1], [("j", "m1", 1, 1)])))
    assert o.remaining_batches == approx(100 - 20 / 0.75)
    assert o.jct == approx(47.5)


# ======================================================================================
# The report: weighted objective, average JCT, makespan, unfinished, utilisation
# ======================================================================================

def three_jobs():
    """delta 10, T 4; m0 local 16, m1 local 32.

    A: arrival 1, weight 2, theta 1, B 25, 1 worker on m0 in slots 1..3
       -> c 3, JCT 40 - 10 = 30, a*delta + JCT = 40.
    K: arrival 0, weight 0.5, tau 0.5, gradient 500 MB, U 4, B 1000, 1 worker on m1 in
       slots 0..3, theta 0.75 -> 4 * 10/0.75 = 160/3 done, R = 2840/3;
       JCT = 4*10 + (2840/3) * 0.75 / 4 = 40 + 177.5 = 217.5 (unfinished).
    C: arrival 2, weight 1, theta 1, B 10, 1 worker on m1 in slot 2 -> c 2, JCT 10,
       a*delta + JCT = 30.
    """
    topo = B.star(machine("m0", local_gbps=16), machine("m1", local_gbps=32))
    inst = instance(topo,
                    job("A", arrival=1, weight=2, work_batches=25),
                    job("K", weight=0.5, batch_seconds=0.5, gradient_mb=500, max_workers=4,
                        work_batches=1000),
                    job("C", arrival=2, work_batches=10), T=4)
    s = sched((0, [("K", "m1", 1, 1)]),
              (1, [("A", "m0", 1, 1), ("K", "m1", 1, 1)]),
              (2, [("A", "m0", 1, 1), ("K", "m1", 1, 1), ("C", "m1", 1, 1)]),
              (3, [("A", "m0", 1, 1), ("K", "m1", 1, 1)]))
    return inst, s


def test_report_jcts():
    inst, s = three_jobs()
    assert validate(inst, s) == []
    rep = score(inst, s)
    assert outcome(rep, "A").jct == approx(30)
    assert outcome(rep, "K").jct == approx(217.5)
    assert outcome(rep, "C").jct == approx(10)
    assert rep.unfinished == 1


def test_report_weighted_objective():
    # 2 * 30 + 0.5 * 217.5 + 1 * 10 = 60 + 108.75 + 10 = 178.75
    inst, s = three_jobs()
    assert score(inst, s).objective == approx(178.75)


def test_report_average_jct_is_unweighted():
    # (30 + 217.5 + 10) / 3 = 85.8333..
    inst, s = three_jobs()
    assert score(inst, s).average_jct == approx(257.5 / 3)


def test_report_makespan():
    # max(10 + 30, 0 + 217.5, 20 + 10) = 217.5
    inst, s = three_jobs()
    assert score(inst, s).makespan == approx(217.5)


def test_report_makespan_all_finished():
    # A alone finishing: max(1*10 + 30) = 40, i.e. (c + 1) * delta.
    topo = B.star()
    inst = instance(topo, job("A", arrival=1, work_batches=25), job("C", work_batches=10), T=5)
    s = sched((0, [("C", "m1", 1, 1)]), *((t, [("A", "m0", 1, 1)]) for t in (1, 2, 3)))
    rep = score(inst, s)
    assert rep.unfinished == 0
    assert rep.makespan == approx(40)
    assert rep.average_jct == approx((30 + 10) / 2)


def test_report_reconfigurations_of_three_jobs():
    # each job starts once and never changes -> 3.
    inst, s = three_jobs()
    assert score(inst, s).reconfigurations == 3


def test_utilisation_counts_worker_and_ps_demand():
    # m0, m1 each {gpu 4, cpu 8, mem 10}; worker {gpu 1, cpu 1}, PS {cpu 3}; kappa 1/2; T 2.
    # slot 0: 2 workers + 1 PS on m0: gpu 2, cpu 2 + 3 = 5.
    # slot 1: 1 worker on m0, 1 worker + 1 PS on m1: gpu 2, cpu 1 + 1 + 3 = 5.
    # gpu: (2 + 2) / (2 * (4 + 4)) = 0.25;  cpu: (5 + 5) / (2 * (8 + 8)) = 0.3125;  mem: 0.
    topo = B.star(machine("m0", gpu=4, cpu=8, mem=10), machine("m1", gpu=4, cpu=8, mem=10))
    inst = instance(topo, job(worker={"gpu": 1, "cpu": 1}, ps={"cpu": 3}, ps_gbps=2), T=2,
                    resources=("gpu", "cpu", "mem"))
    s = sched((0, [("j", "m0", 2, 1)]), (1, [("j", "m0", 1, 0), ("j", "m1", 1, 1)]))
    assert validate(inst, s) == []
    u = score(inst, s).utilisation
    assert set(u) == {"gpu", "cpu", "mem"}
    assert u["gpu"] == approx(0.25)
    assert u["cpu"] == approx(0.3125)
    assert u["mem"] == approx(0)


def test_utilisation_over_the_whole_horizon():
    # One slot of 8 gpu out of T = 4 slots on one machine of 8 gpu: 8 / (4 * 8) = 0.25.
    inst = instance(B.single(), job(worker={"gpu": 1}, ps={"cpu": 2}), T=4)
    u = score(inst, sched((1, [("j", "m0", 8, 8)]))).utilisation
    assert u["gpu"] == approx(0.25)
    assert u["cpu"] == approx(16 / (4 * 16))


def test_gap_to_a_bound():
    # (objective - bound) / objective = (178.75 - 100) / 178.75
    inst, s = three_jobs()
    rep = score(inst, s).with_bound(100)
    assert rep.bound == 100 and rep.gap == approx(78.75 / 178.75)


def test_evaluate_is_validate_and_score():
    inst, s = three_jobs()
    vs, rep = evaluate(inst, s)
    assert vs == validate(inst, s) == []
    assert rep.objective == approx(score(inst, s).objective)


# ======================================================================================
# The example of MODEL.md section 1-2, loaded from its JSON form
# ======================================================================================

TINY_SCHEDULE = {"instance": "tiny", "slots": [
    {"t": 0, "allocations": [{"job": "j0", "machine": "m0", "workers": 4, "ps": 2}]},
    {"t": 1, "allocations": [{"job": "j0", "machine": "m0", "workers": 4, "ps": 2}]}]}


def test_model_md_example():
    # kappa 5/10: 4 workers need 2 PS.  m0: gpu 4 <= 4, cpu 16 + 8 = 24 <= 32,
    # mem 64 + 32 = 96 <= 256.  Local: no link loaded.
    # theta = 0.05 + 2 * 100 * 0.008 / 400 = 0.05 + 0.004 = 0.054 s.
    # slot 0 (first start, r 10): 4 * (60 - 10) / 0.054 = 200 / 0.054 = 3703.7..
    # slot 1 (same):             4 * 60 / 0.054        = 240 / 0.054 = 4444.4..
    # done = 440 / 0.054; R = 20000 - 440/0.054; unfinished (T = 4):
    # JCT = 4 * 60 + R * 0.054 / 8 = 240 + (1080 - 440) / 8 = 240 + 80 = 320.
    # utilisation: gpu 2*4 / (4 * 8) = 0.25; cpu 2*24 / (4 * 64) = 0.1875;
    #              mem 2*96 / (4 * 512) = 0.09375.
    inst = Instance.from_dict(TINY)
    s = Schedule.from_dict(TINY_SCHEDULE)
    vs, rep = evaluate(inst, s)
    assert vs == []
    o = outcome(rep, "j0")
    assert o.remaining_batches == approx(20000 - 440 / 0.054)
    assert not o.finished and o.jct == approx(320)
    assert rep.objective == approx(320) and rep.average_jct == approx(320)
    assert rep.makespan == approx(320)
    assert rep.unfinished == 1 and rep.reconfigurations == 1
    assert rep.utilisation["gpu"] == approx(0.25)
    assert rep.utilisation["cpu"] == approx(0.1875)
    assert rep.utilisation["mem"] == approx(0.09375)
    assert rep.instance == "tiny"
