"""relabel(): a plan that only renames interchangeable machines leaves running jobs on
their machines (no restart), and changes nothing else: no job's counts, no machine's load."""
from __future__ import annotations

from placement.model.intent import JobIntent
from placement.model.progress import ProgressTracker
from placement.model.topology import Link, Machine, Switch, Topology
from placement.slots.relabel import relabel
from placement.slots.rules import decide_slot

from .. import builders as B


def star4(**over) -> Topology:
    """m0..m3 under one switch; ``over`` replaces a machine (by id) with another shape."""
    ms = tuple(over.get(f"m{i}", B.machine(f"m{i}")) for i in range(4))
    return Topology(ms, (Switch("sw"),), tuple(Link(m.id, "sw", 100) for m in ms), "sw")


def test_a_running_job_renamed_onto_other_machines_gets_its_own_back_and_the_other_plan_moves():
    inst = B.instance(star4(), B.job("new", max_workers=8), B.job("old", max_workers=8))
    plan = {"new": JobIntent("m0", {"m0": (8, 1)}), "old": JobIntent("m1", {"m1": (8, 1)})}
    out = relabel(inst, {"old": {"m0": (8, 1)}}, plan, ["new", "old"])
    assert out == {"new": JobIntent("m1", {"m1": (8, 1)}), "old": JobIntent("m0", {"m0": (8, 1)})}


def test_a_spread_job_keeps_its_machines_through_a_cycle_of_renamings():
    # planned on m1 (4) and m2 (4, its PS); it ran on m3 (4, PS) and m1 (4): m2 -> m3, m1 stays
    # as a machine of the job but its counts (4, 0) match m1's previous (4, 0)
    inst = B.instance(star4(), B.job("a", max_workers=8), B.job("b", max_workers=4))
    plan = {"a": JobIntent("sw", {"m1": (4, 0), "m2": (4, 1)}), "b": JobIntent("m3", {"m3": (4, 1)})}
    out = relabel(inst, {"a": {"m3": (4, 1), "m1": (4, 0)}}, plan, ["b", "a"])
    assert out["a"].tasks == {"m3": (4, 1), "m1": (4, 0)}
    assert out["b"] == JobIntent("m2", {"m2": (4, 1)})


def test_machines_that_differ_are_never_exchanged():
    for other in (B.machine("m1", gpu=4, cpu=16), B.machine("m1", local_gbps=100),
                  Machine("m1", dict(B.CAPACITY), 400, "a100")):
        inst = B.instance(star4(m1=other), B.job("j", max_workers=4))
        plan = {"j": JobIntent("m1", {"m1": (4, 1)})}
        assert relabel(inst, {"j": {"m0": (4, 1)}}, plan, ["j"]) == plan


def test_machines_under_other_switches_are_never_exchanged():
    inst = B.instance(B.two_racks(), B.job("j", max_workers=4))
    plan = {"j": JobIntent("b0", {"b0": (4, 1)})}
    assert relabel(inst, {"j": {"a0": (4, 1)}}, plan, ["j"]) == plan
    inside = {"j": JobIntent("a1", {"a1": (4, 1)})}
    assert relabel(inst, {"j": {"a0": (4, 1)}}, inside, ["j"]) == {"j": JobIntent("a0", {"a0": (4, 1)})}


def test_a_resized_plan_or_an_overpacked_machine_is_left_to_the_slot_rules():
    inst = B.instance(star4(), B.job("j", max_workers=8), B.job("k", max_workers=8))
    resized = {"j": JobIntent("m1", {"m1": (6, 1)})}
    assert relabel(inst, {"j": {"m0": (4, 1)}}, resized, ["j"]) == resized
    crowded = {"j": JobIntent("m1", {"m1": (8, 1)}), "k": JobIntent("m1", {"m1": (8, 1)})}
    assert relabel(inst, {"j": {"m0": (8, 1)}}, crowded, ["k", "j"]) == crowded


def test_a_job_given_back_its_machines_is_not_moved_for_a_later_one():
    inst = B.instance(star4(), B.job("first", max_workers=8), B.job("second", max_workers=8))
    # both ran; the plan swapped them: the first in the order gets m0 back, which is then
    # fixed, and the second's m1 (now the plan's m0's job... its own already) stays right
    plan = {"first": JobIntent("m1", {"m1": (8, 1)}), "second": JobIntent("m0", {"m0": (8, 1)})}
    prev = {"first": {"m0": (8, 1)}, "second": {"m1": (8, 1)}}
    assert relabel(inst, prev, plan, ["first", "second"]) == {
        "first": JobIntent("m0", {"m0": (8, 1)}), "second": JobIntent("m1", {"m1": (8, 1)})}


def test_the_slot_rules_keep_a_renamed_running_job_in_place_without_a_restart():
    inst = B.instance(star4(), B.job("new", max_workers=8, work_batches=100, ps_gbps=8),
                      B.job("old", max_workers=8, work_batches=1e6, ps_gbps=8), T=3)  # one PS for 8 workers
    tracker = ProgressTracker(inst)
    tracker.advance(0, {"old": {"m0": (8, 1)}})
    plan = {"new": JobIntent("m0", {"m0": (8, 1)}), "old": JobIntent("m1", {"m1": (8, 1)})}
    assert decide_slot(inst, tracker, 1, plan, fill=False) == {"new": {"m1": (8, 1)}, "old": {"m0": (8, 1)}}


def test_machines_other_running_jobs_may_be_kept_on_are_not_given_away():
    """Found by review: j0 and j1 shared m1; the plan put every job on m0. Renaming m0 and m1
    for j1 put j2's plan where rule b keeps j0, cutting j2 to one worker with m0 idle."""
    ms = (B.machine("m0", gpu=4, cpu=16), B.machine("m1", gpu=4, cpu=16))
    inst = B.instance(B.star(*ms), *[B.job(j, max_workers=2, restart_seconds=5) for j in ("j0", "j1", "j2")], T=3)
    tracker = ProgressTracker(inst)
    tracker.advance(0, {"j0": {"m1": (2, 1)}, "j1": {"m1": (1, 1)}})
    plan = {"j0": JobIntent("m0", {"m0": (1, 1)}), "j1": JobIntent("m0", {"m0": (1, 1)}),
            "j2": JobIntent("m0", {"m0": (2, 1)})}
    assert relabel(inst, tracker.last, plan, ["j0", "j1", "j2"]) == plan
    assert decide_slot(inst, tracker, 1, plan, fill=False)["j2"] == {"m0": (2, 2)}


def test_a_malformed_domain_is_carried_along_when_machines_are_renamed():
    inst = B.instance(star4(), B.job("old", max_workers=8, ps_gbps=8), B.job("g"))
    tracker = ProgressTracker(inst)
    tracker.advance(0, {"old": {"m0": (8, 1)}})
    plan = {"old": JobIntent("m1", {"m1": (8, 1)}), "g": JobIntent(["x"], {})}
    assert decide_slot(inst, tracker, 1, plan, fill=False) == {"old": {"m0": (8, 1)}}
