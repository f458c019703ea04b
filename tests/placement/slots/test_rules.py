"""build_schedule() turns any intent, garbage included, into a schedule the referee accepts, and
follows a sound plan as far as the rules allow (stability, trim, fill)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.model.evaluate import evaluate, score, validate
from placement.model.instance import Instance
from placement.slots.residual import Residual
from placement.model.intent import JobIntent, Intent
from placement.model.progress import ProgressTracker
from placement.slots.rules import build_schedule, decide_slot, shrink
from placement.model.topology import Link, Machine, Switch, Topology

from .. import builders as B


# ----- random instances and plans ----------------------------------------------------------
@st.composite
def random_instances(draw, max_jobs: int = 6) -> Instance:
    """Small racks clusters, jobs of every shape, some finishing inside the horizon."""
    n_racks = draw(st.integers(1, 3))
    machines, switches, links = [], [Switch("spine")], []
    for r in range(n_racks):
        switches.append(Switch(f"tor{r}"))
        links.append(Link(f"tor{r}", "spine", draw(st.sampled_from([2, 5, 20, 100]))))
        for i in range(draw(st.integers(1, 3))):
            m = Machine(f"r{r}m{i}", {"gpu": draw(st.integers(4, 8)), "cpu": draw(st.integers(4, 16))},
                        draw(st.sampled_from([50, 100, 400])))
            machines.append(m)
            links.append(Link(m.id, f"tor{r}", draw(st.sampled_from([2, 10, 25]))))
    topo = Topology(tuple(machines), tuple(switches), tuple(links), "spine")
    T = draw(st.integers(2, 6))
    jobs = []
    for k in range(draw(st.integers(1, max_jobs))):
        lo = draw(st.integers(1, 2))
        jobs.append(B.job(
            f"j{k}", arrival=draw(st.integers(0, T - 1)),
            work_batches=draw(st.sampled_from([5, 40, 150, 600, 5000])),
            batch_seconds=draw(st.sampled_from([0.1, 0.5, 1])),
            gradient_mb=draw(st.sampled_from([0, 10, 100])),
            worker={"gpu": draw(st.integers(1, 2)), "cpu": draw(st.sampled_from([0, 1]))},
            ps={"cpu": draw(st.sampled_from([1, 2]))},
            min_workers=lo, max_workers=draw(st.integers(lo, 8)),
            worker_gbps=draw(st.sampled_from([0.5, 1, 2])), ps_gbps=draw(st.sampled_from([1, 2])),
            weight=draw(st.sampled_from([1, 2])),
            restart_seconds=draw(st.sampled_from([0, 3, 10, 15]))))
    return B.instance(topo, *jobs, T=T, delta=10)


@st.composite
def garbage_plans(draw, inst: Instance) -> Intent:
    """Plans that break every rule: unknown jobs, domains and machines, counts out of range
    or negative, tasks outside the domain, before arrival and after completion."""
    nodes = [*inst.topology.nodes, "nowhere"]
    machines = [m.id for m in inst.topology.machines] + ["ghost"]
    jobs = [j.id for j in inst.jobs] + ["nobody"]
    slots = []
    for _ in range(draw(st.integers(0, inst.horizon + 1))):
        slot = {}
        for j in draw(st.lists(st.sampled_from(jobs), unique=True)):
            hs = draw(st.lists(st.sampled_from(machines), max_size=4, unique=True))
            slot[j] = JobIntent(draw(st.sampled_from(nodes)),
                                {h: (draw(st.integers(-2, 20)), draw(st.integers(-2, 20))) for h in hs})
        slots.append(slot)
    return Intent(inst.horizon, slots)


def replay(inst: Instance, schedule) -> ProgressTracker:
    """Progress of a schedule per ProgressTracker, slot by slot."""
    by_slot: dict[int, dict[str, dict]] = {}
    for t, a in schedule.rows():
        by_slot.setdefault(t, {}).setdefault(a.job, {})[a.machine] = (a.workers, a.ps)
    tracker = ProgressTracker(inst)
    for t in range(inst.horizon):
        tracker.advance(t, by_slot.get(t, {}))
    return tracker


def check(inst: Instance, schedule) -> None:
    """Valid, nothing after completion, and the tracker agrees with score()."""
    violations, report = evaluate(inst, schedule)
    assert violations == []
    last = {}
    for t, a in schedule.rows():
        last[a.job] = max(last.get(a.job, -1), t)
    tracker = replay(inst, schedule)
    for job, outcome in zip(inst.jobs, report.jobs):
        assert tracker.completed.get(job.id) == outcome.completion_slot
        if outcome.finished:
            assert last[job.id] <= outcome.completion_slot
        else:
            assert tracker.remaining(job) == pytest.approx(outcome.remaining_batches)


@settings(max_examples=80, deadline=None)
@given(st.data(), st.booleans())
def test_any_plan_gives_a_valid_schedule(data, fill):
    inst = data.draw(random_instances())
    plan = data.draw(garbage_plans(inst))
    schedule = build_schedule(inst, plan, fill=fill)
    check(inst, schedule)
    if not fill:  # without fill only planned jobs run
        planned = {(t, j) for t, slot in enumerate(plan.slots) for j in slot}
        assert all((t, a.job) in planned for t, a in schedule.rows())


@settings(max_examples=40, deadline=None)
@given(random_instances())
def test_empty_plan_without_fill_runs_nothing_and_with_fill_runs_jobs(inst):
    assert list(build_schedule(inst, Intent(inst.horizon), fill=False).rows()) == []
    schedule = build_schedule(inst, Intent(inst.horizon))
    check(inst, schedule)
    # a job present in slot 0 that fits the empty cluster is not left waiting with it empty
    startable = [j for j in inst.jobs if j.arrival == 0 and Residual(inst).max_workers_that_fit(j)]
    assert bool(startable) == any(t == 0 for t, _ in schedule.rows())


# ----- following a sound plan --------------------------------------------------------------
def every_slot(inst: Instance, slot: dict[str, JobIntent]) -> Intent:
    return Intent(inst.horizon, [dict(slot) for _ in range(inst.horizon)])


def triples(schedule, t: int) -> set:
    return {(a.job, a.machine, a.workers, a.ps) for s in schedule.slots if s.t == t
            for a in s.allocations}


@pytest.mark.parametrize("fill", [False, True])
def test_a_plan_that_changes_nothing_keeps_its_triples(fill):
    inst = B.instance(B.two_racks(), B.job("a", max_workers=4, restart_seconds=4),
                      B.job("b", max_workers=2, worker_gbps=2, ps_gbps=4), T=4)
    plan = every_slot(inst, {"a": JobIntent("tor0", {"a0": (2, 2), "a1": (2, 2)}),
                             "b": JobIntent("b0", {"b0": (2, 1)})})
    schedule = build_schedule(inst, plan, fill=fill)
    want = {("a", "a0", 2, 2), ("a", "a1", 2, 2), ("b", "b0", 2, 1)}
    assert all(triples(schedule, t) == want for t in range(4))
    assert score(inst, schedule).reconfigurations == 2  # the first starts only


def test_no_reconfiguration_for_no_gain_when_a_restart_costs_the_slot():
    inst = B.instance(B.two_racks(), B.job("j", restart_seconds=10, max_workers=2), T=3)
    plan = Intent(3, [{"j": JobIntent("a0", {"a0": (2, 2)})},
                    {"j": JobIntent("a1", {"a1": (2, 2)})},   # same speed elsewhere: no gain
                    {"j": JobIntent("b0", {"b0": (2, 2)})}])
    schedule = build_schedule(inst, plan, fill=False)
    assert [triples(schedule, t) for t in range(3)] == [{("j", "a0", 2, 2)}] * 3


def test_a_reconfiguration_that_pays_for_its_restart_is_made():
    # 4 workers instead of 1 more than make up for a 5 s restart of a 10 s slot
    inst = B.instance(B.two_racks(), B.job("j", restart_seconds=5, max_workers=4), T=3)
    plan = Intent(3, [{"j": JobIntent("a0", {"a0": (1, 1)})},
                    {"j": JobIntent("a1", {"a1": (4, 4)})},
                    {"j": JobIntent("a1", {"a1": (4, 4)})}])
    schedule = build_schedule(inst, plan, fill=False)
    assert triples(schedule, 1) == triples(schedule, 2) == {("j", "a1", 4, 4)}


def test_counts_are_clamped_and_ps_recomputed_beside_the_workers():
    inst = B.instance(B.two_racks(), B.job("big", max_workers=4, worker_gbps=2, ps_gbps=1),
                      B.job("small", min_workers=3), T=1)
    plan = Intent(1, [{"big": JobIntent("a0", {"a0": (50, 0)}),
                     "small": JobIntent("b0", {"b0": (1, 7)})}])
    schedule = build_schedule(inst, plan, fill=False)
    assert triples(schedule, 0) == {("big", "a0", 4, 8), ("small", "b0", 3, 3)}


def test_tasks_outside_a_known_domain_move_into_it_and_unknown_domains_use_the_lca():
    inst = B.instance(B.two_racks(), B.job("x", max_workers=2), B.job("y", max_workers=2), T=1)
    plan = Intent(1, [{"x": JobIntent("tor1", {"a0": (2, 2)}),
                     "y": JobIntent("no-such-node", {"a1": (1, 1), "ghost": (1, 1)})}])
    schedule = build_schedule(inst, plan, fill=False)
    x = {a.machine for a in schedule.slots[0].allocations if a.job == "x"}
    assert x <= {"b0", "b1"}
    assert triples(schedule, 0) >= {("y", "a1", 1, 1)}


def test_a_job_that_completes_keeps_only_the_workers_it_needs():
    # 30 batches of 1 s in a 10 s slot: 3 workers complete it in slot 0, 8 are not needed
    inst = B.instance(B.two_racks(), B.job("j", work_batches=30), T=2)
    plan = every_slot(inst, {"j": JobIntent("a0", {"a0": (8, 8)})})
    schedule = build_schedule(inst, plan)
    assert triples(schedule, 0) == {("j", "a0", 3, 3)}
    assert triples(schedule, 1) == set()  # the plan's tasks after completion are dropped


@pytest.mark.parametrize("work, slot1", [(60, ("j", "a0", 4, 4)), (50, ("j", "a0", 3, 3))])
def test_trim_counts_the_restart_it_causes(work, slot1):
    # slot 0 (first start, 2 s restart): 4 workers x 8 s = 32 batches, not complete.
    # slot 1 with the same 4: 40 batches, no restart. Trimmed to 3, it restarts: 3 x 8 = 24.
    # work 60 (28 left): 24 < 28, so the 4 stay; work 50 (18 left): 3 suffice, 2 do 16 < 18.
    inst = B.instance(B.two_racks(), B.job("j", work_batches=work, max_workers=4,
                                           restart_seconds=2), T=2)
    plan = every_slot(inst, {"j": JobIntent("a0", {"a0": (4, 4)})})
    schedule = build_schedule(inst, plan)
    assert triples(schedule, 0) == {("j", "a0", 4, 4)}
    assert triples(schedule, 1) == {slot1}
    assert score(inst, schedule).jobs[0].completion_slot == 1


def test_fill_reuses_capacity_freed_by_an_early_completion():
    inst = B.instance(B.single(), B.job("short", work_batches=40, max_workers=8),
                      B.job("long", max_workers=8), T=3)
    # the plan gives the whole machine to `short` for three slots and never runs `long`
    plan = every_slot(inst, {"short": JobIntent("m0", {"m0": (8, 8)})})
    schedule = build_schedule(inst, plan)
    # short needs 4 workers in slot 0 (trim), and long takes the other 4 at once
    assert triples(schedule, 0) == {("short", "m0", 4, 4), ("long", "m0", 4, 4)}
    assert triples(schedule, 1) == {("long", "m0", 8, 8)}  # grown: 8 workers beat a 0 s restart
    assert build_schedule(inst, plan, fill=False).slots[-1].t == 0  # without fill, nothing after slot 0


def test_shrink_keeps_ps_beside_the_remaining_workers():
    job = B.job("j", worker_gbps=1, ps_gbps=1)
    tasks = {"a0": (3, 1), "a1": (1, 1), "b0": (0, 2)}
    # workers leave the machines holding the fewest; PSs leave machines without workers,
    # those holding the fewest first (so fewer machines stay in use)
    assert shrink(job, tasks, 3) == {"a0": (3, 1), "b0": (0, 2)}
    assert shrink(job, tasks, 2) == {"a0": (2, 1), "b0": (0, 1)}
    assert shrink(job, tasks, 4) == tasks
    assert validate(B.instance(B.two_racks(), job, T=1),
                    B.sched((0, [("j", h, w, s) for h, (w, s) in shrink(job, tasks, 2).items()]))) == []


@pytest.mark.parametrize("work, plan, local", [
    (640, {"a0": (6, 6), "a1": (3, 3)}, True),    # 9 spread or 8 on one machine: 8 slots either way
    (400, {"a0": (5, 5), "a1": (5, 5)}, False),   # 10 spread: 4 slots; 8 on one machine: 5
])
def test_following_sizes_a_spread_plan_gives_way_to_one_machine_that_finishes_as_soon(work, plan, local):
    inst = B.instance(B.two_racks(), B.job("a", work_batches=work, max_workers=16), T=8)
    intent = every_slot(inst, {"a": JobIntent("tor0", plan)})
    planned = {("a", h, w, s) for h, (w, s) in plan.items()}
    assert triples(build_schedule(inst, intent, fill=False), 0) == planned  # the plan as it is
    first = triples(build_schedule(inst, intent, fill=False, follow_sizes=True), 0)
    if local:
        assert len(first) == 1 and next(iter(first))[1:] in {("a0", 8, 8), ("a1", 8, 8)}
    else:
        assert first == planned


def test_following_sizes_a_moving_spread_plan_gives_way_to_the_previous_machine():
    # slot 0: 8 workers on a0 (6 s restart of a 10 s slot: 32 batches). Slot 1's plan grows
    # the job to 16 over rack tor1, a move: 16 x 4 = 64 batches, not the 80 left. Keeping
    # a0 (8 x 10 = 80, no restart) completes in slot 1; one machine of tor1 would restart.
    inst = B.instance(B.two_racks(), B.job("a", work_batches=112, max_workers=16, restart_seconds=6), T=3)
    intent = Intent(3, [{"a": JobIntent("a0", {"a0": (8, 8)})},
                        {"a": JobIntent("tor1", {"b0": (8, 8), "b1": (8, 8)})}, {}])
    schedule = build_schedule(inst, intent, fill=False, follow_sizes=True)
    assert triples(schedule, 1) == {("a", "a0", 8, 8)}
    assert score(inst, schedule).jobs[0].completion_slot == 1


def test_following_sizes_a_spread_plan_gives_way_to_one_machine_outside_its_domain():
    # the plan spreads one worker and its PS over rack tor0, whose machines the shorter f0
    # and f1 (placed first) fill; a machine of tor1 holds both (local: no gradient over
    # the 1 Gbps link) and is faster
    full = [B.job(f"f{k}", work_batches=1e6, max_workers=7, ps={"cpu": 15}) for k in range(2)]
    solo = B.job("s", max_workers=1, gradient_mb=100, batch_seconds=0.1, worker={"gpu": 1, "cpu": 1})
    inst = B.instance(B.two_racks(), *full, solo, T=1)
    intent = Intent(1, [{"f0": JobIntent("a0", {"a0": (7, 1)}), "f1": JobIntent("a1", {"a1": (7, 1)}),
                         "s": JobIntent("tor0", {"a0": (1, 0), "a1": (0, 1)})}])
    planned = triples(build_schedule(inst, intent, fill=False), 0)
    assert {t for t in planned if t[0] == "s"} == {("s", "a0", 1, 0), ("s", "a1", 0, 1)}
    followed = triples(build_schedule(inst, intent, fill=False, follow_sizes=True), 0)
    s = [t for t in followed if t[0] == "s"]
    assert len(s) == 1 and s[0][1] in {"b0", "b1"} and s[0][2:] == (1, 1)


def test_a_job_the_plan_shrinks_goes_back_to_its_previous_tasks_when_nobody_takes_the_room():
    # slot 0: 16 workers over a0 and b0 (6 s restart: 64 batches). Slot 1's plan shrinks it
    # to 8 on a0, which restarts (32 batches); nobody else wants the room, and the previous
    # 16 complete the 100 batches left in slot 1 without a restart (160 >= 100)
    inst = B.instance(B.two_racks(), B.job("a", work_batches=164, max_workers=16, restart_seconds=6), T=3)
    spread = {"a0": (8, 8), "b0": (8, 8)}
    intent = Intent(3, [{"a": JobIntent("spine", spread)}, {"a": JobIntent("a0", {"a0": (8, 8)})}, {}])
    assert triples(build_schedule(inst, intent, fill=False, follow_sizes=True), 1) == {("a", "a0", 8, 8)}
    schedule = build_schedule(inst, intent, fill=True, follow_sizes=True)
    assert triples(schedule, 0) == triples(schedule, 1) == {("a", h, w, s) for h, (w, s) in spread.items()}
    assert score(inst, schedule).jobs[0].completion_slot == 1


def test_a_plan_that_does_not_fit_does_not_take_the_room_of_a_later_plan():
    # a and b (before c in the order: less work) are both planned on m0, which holds one of
    # them; c is planned on m1. b's plan fails, and its fallback must not take m1 from c:
    # the plans that fit go first, then b looks for what is left (nothing: it waits)
    inst = B.instance(B.star(), B.job("a", work_batches=1000, max_workers=8),
                      B.job("b", work_batches=2000, max_workers=8),
                      B.job("c", work_batches=9000, max_workers=8), T=1)
    plan = {j: JobIntent(h, {h: (8, 8)}) for j, h in (("a", "m0"), ("b", "m0"), ("c", "m1"))}
    schedule = build_schedule(inst, every_slot(inst, plan))
    assert triples(schedule, 0) == {("a", "m0", 8, 8), ("c", "m1", 8, 8)}


def test_a_running_job_whose_plan_does_not_fit_keeps_its_tasks_before_later_plans_take_them():
    # j1 ran on m0; its plan (m1) collides with j0's, and j2 (later in the order) is planned on
    # m0: rule b keeps j1 on m0 in the first pass, so the later plan cannot take it
    inst = B.instance(B.star(), B.job("j0", work_batches=1000), B.job("j1", work_batches=2000, restart_seconds=5),
                      B.job("j2", work_batches=9000), T=3)
    plan = {"j0": JobIntent("m1", {"m1": (8, 8)}), "j1": JobIntent("m1", {"m1": (8, 8)}),
            "j2": JobIntent("m0", {"m0": (8, 8)})}
    tracker = ProgressTracker(inst)
    tracker.advance(0, {"j1": {"m0": (8, 8)}})
    for fill in (False, True):
        assert decide_slot(inst, tracker, 1, plan, fill=fill) == {"j0": {"m1": (8, 8)}, "j1": {"m0": (8, 8)}}


def test_a_spread_plan_that_fits_keeps_its_place_in_the_order():
    # j0 (first) is planned over m0 and m1; with follow_sizes it may move to one machine, but
    # only after the other plans: it is placed as planned first, so later plans cannot take
    # its room, and then moves to a whole machine when that finishes it as soon
    inst = B.instance(B.star(), B.job("j0", work_batches=1000), B.job("j1", work_batches=2000),
                      B.job("j2", work_batches=9000), T=3)
    plan = {"j0": JobIntent("sw", {"m0": (4, 4), "m1": (4, 4)}), "j1": JobIntent("m0", {"m0": (8, 8)}),
            "j2": JobIntent("m1", {"m1": (8, 8)})}
    placed = decide_slot(inst, ProgressTracker(inst), 0, plan, fill=True, follow_sizes=True)
    assert "j0" in placed and sum(w for w, _ in placed["j0"].values()) == 8
