"""OnlineScheduler: enforces MODEL.md on any policy, handles failures, lagging reports,
bad calls, checkpoints and commit mode."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from placement.model.evaluate import validate
from placement.traces.generate import generate
from placement.model.instance import Instance
from placement.online.greedy_policy import GreedyPolicy
from placement.online.policy import CommittingPolicy, Policy, View
from placement.online.scheduler import OnlineScheduler
from placement.model.progress import slot_batches
from placement.simulate import AddMachine, RemoveMachine, simulate
from placement.model.topology import Machine

from .. import builders as B


RES = B.RESOURCES


class Fixed:
    """A policy that returns whatever the test put in ``answer``."""

    name = "fixed"

    def __init__(self, answer=None):
        self.answer = answer or {}
        self.views: list[View] = []

    def decide(self, view):
        self.views.append(view)
        return self.answer


def scheduler(topology=None, policy=None, **kw) -> OnlineScheduler:
    kw.setdefault("slot_seconds", 10)
    return OnlineScheduler(topology or B.star(), resources=RES, policy=policy or GreedyPolicy(), **kw)


# ----- MODEL.md is enforced ------------------------------------------------------------------
def test_every_bad_decision_is_dropped_and_the_good_one_kept():
    jobs = [B.job("wide", max_workers=4), B.job("nowhere"), B.job("big", max_workers=16),
            B.job("nops"), B.job("psonly"), B.job("float"), B.job("few_ps", worker_gbps=2),
            B.job("later", arrival=5), B.job("good")]
    policy = Fixed({
        "wide": {"m0": (6, 6)},             # more than max_workers
        "nowhere": {"zz": (1, 1)},          # unknown machine
        "ghost": {"m0": (1, 1)},            # unknown job
        "big": {"m0": (9, 9)},              # 9 GPUs on an 8-GPU machine
        "nops": {"m0": (2, 0)},             # workers without a PS
        "psonly": {"m1": (0, 2)},           # PS without workers
        "float": {"m1": (2.0, 2)},          # not an integer count
        "few_ps": {"m1": (2, 3)},           # kappa 2 needs 4 PSs
        "later": {"m1": (1, 1)},            # not arrived
        "good": {"m1": (2, 2)},
    })
    s = scheduler(policy=policy)
    for j in jobs:
        s.submit(j)
    assert s.step(0) == {"good": {"m1": (2, 2)}}
    reasons = {d.job: d.reason for d in s.dropped}
    assert set(reasons) == set(policy.answer) - {"good"}
    assert "max_workers" in reasons["wide"] and "unknown machine" in reasons["nowhere"]
    assert reasons["ghost"] == "unknown job" and "do not fit" in reasons["big"]
    assert "0 PS for 2 workers, needs at least 2" in reasons["nops"] and "without workers" in reasons["psonly"]
    assert "not a pair of integers" in reasons["float"] and "needs at least 4" in reasons["few_ps"]
    assert "arrives in slot 5" in reasons["later"]
    s.finish("good")
    policy.answer = {"good": {"m1": (2, 2)}}
    assert s.step(1) == {}
    assert s.dropped[0].reason == "the job is finished" and s.drops_total == 10


def test_decisions_are_packed_in_the_policys_order():
    # each job alone fits m0 (8 GPUs); together they do not: the second one waits
    s = scheduler(policy=Fixed({"b": {"m0": (5, 5)}, "a": {"m0": (5, 5)}}))
    s.submit(B.job("a"))
    s.submit(B.job("b"))
    assert s.step(0) == {"b": {"m0": (5, 5)}}
    assert [d.job for d in s.dropped] == ["a"]


def test_link_capacity_is_enforced():
    # spread over m0 and m1: 4 workers + 4 PSs reserve 8 Gbps on m0's 5 Gbps link
    s = scheduler(B.star(gbps=5), Fixed({"a": {"m0": (4, 4), "m1": (1, 1)}}))
    s.submit(B.job("a"))
    assert s.step(0) == {}
    assert "link" in s.dropped[0].reason


class Chaos:
    """Greedy's decisions, then garbage: inflated counts, unknown machines, finished and
    unknown jobs, shuffled order. Only the scheduler stands between it and the cluster."""

    name = "chaos"

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.seen: set[str] = set()
        self.greedy = GreedyPolicy()

    def decide(self, view):
        out = dict(self.greedy.decide(view))
        self.seen |= set(view.jobs)
        machines = [m.id for m in view.instance.topology.machines]
        for j in sorted(self.seen):
            roll = self.rng.random()
            if roll < 0.2:
                out[j] = {machines[self.rng.integers(len(machines))]: (int(self.rng.integers(1, 40)), 1)}
            elif roll < 0.3:
                out[j] = {"nowhere": (1, 1)}
            elif roll < 0.4 and j in out:
                out[j] = {h: (w + 1, s) for h, (w, s) in out[j].items()}
        out["ghost"] = {machines[0]: (1, 1)}
        keys = list(out)
        self.rng.shuffle(keys)
        return {k: out[k] for k in keys}


@pytest.mark.parametrize("seed", range(3))
def test_a_chaotic_policy_never_gets_an_invalid_allocation_through(seed):
    inst = generate(jobs=12, cluster="racks:2x3", seed=seed)
    result = simulate(inst, policy=Chaos(seed), horizon=inst.horizon + 40)
    assert result.dropped > 0
    assert validate(result.instance, result.schedule) == []


# ----- machines come and go --------------------------------------------------------------------
def test_removing_a_busy_machine_displaces_its_jobs_and_they_are_placed_again():
    s = scheduler(policy=GreedyPolicy())
    s.submit(B.job("a", max_workers=4))
    first = s.step(0)
    (machine,) = first["a"]
    assert s.remove_machine(machine) == ["a"]
    assert s.view(1).jobs["a"].previous == {}
    second = s.step(1)
    assert second["a"] and machine not in second["a"]
    assert machine not in s.topology.machine_index
    assert not any(machine in (l.a, l.b) for l in s.topology.links)


def test_removing_an_idle_machine_only_shrinks_the_cluster():
    s = scheduler(policy=Fixed({"a": {"m0": (2, 2)}}))
    s.submit(B.job("a"))
    s.step(0)
    assert s.remove_machine("m1") == []
    assert s.step(1) == {"a": {"m0": (2, 2)}}
    with pytest.raises(ValueError, match="unknown machine 'm1'"):
        s.remove_machine("m1")


def test_a_job_that_fits_nowhere_after_a_failure_waits_for_a_new_machine():
    topo = B.star(B.machine("m0"), B.machine("small", gpu=1, cpu=16))
    s = scheduler(topo, GreedyPolicy())
    s.submit(B.job("a", min_workers=4))
    assert "a" in s.step(0)
    s.remove_machine("m0")
    assert s.step(1) == {} and s.view(2).jobs == {}
    s.add_machine(B.machine("m2"), "sw", 100)
    assert sum(w for w, _ in s.step(2)["a"].values()) >= 4
    with pytest.raises(ValueError, match="already a node"):
        s.add_machine(B.machine("m2"), "sw", 100)
    with pytest.raises(ValueError, match="unknown switch"):
        s.add_machine(B.machine("m3"), "nope", 100)
    with pytest.raises(ValueError, match="gbps"):
        s.add_machine(B.machine("m3"), "sw", -1)


def test_machine_failure_mid_simulation():
    inst = generate(jobs=15, cluster="racks:2x4", seed=4)
    base = simulate(inst, policy=GreedyPolicy())
    t_fail = 2
    busy = {a.machine for t, a in base.schedule.rows() if t == t_fail - 1}
    victim = sorted(busy)[0]
    displaced = {a.job for t, a in base.schedule.rows() if t == t_fail - 1 and a.machine == victim}
    result = simulate(inst, policy=GreedyPolicy(), events=[RemoveMachine(t_fail, victim)])
    assert result.unfinished == ()
    assert not [a for t, a in result.schedule.rows() if t >= t_fail and a.machine == victim]
    still_running = {j for j in displaced if base.report.jobs[inst.job_index[j]].completion_slot >= t_fail}
    assert still_running, "the test needs a job displaced before it completes"
    for j in still_running:
        assert any(a.job == j for t, a in result.schedule.rows() if t >= t_fail)
    assert validate(result.instance, result.schedule) == []


def test_a_machine_added_mid_run_is_used():
    inst = generate(jobs=12, cluster="star:1", seed=2)
    new = Machine("extra", dict(inst.topology.machines[0].capacity), 400)
    result = simulate(inst, policy=GreedyPolicy(), events=[AddMachine(1, new, "sw", 100)])
    assert any(a.machine == "extra" for _, a in result.schedule.rows())
    assert result.unfinished == () and validate(result.instance, result.schedule) == []


# ----- the cluster's truth -----------------------------------------------------------------
def test_a_job_whose_reported_progress_lags_keeps_running_until_reported_complete():
    job = B.job("a", work_batches=100, max_workers=2)   # 2 workers x 10 s / 1 s: done in 5 slots
    s = scheduler(B.single(), GreedyPolicy())
    s.submit(job)
    model = 0.0
    for t in range(8):   # the cluster reports half of what the model predicts
        alloc = s.step(t)
        assert alloc == {"a": {"m0": (2, 2)}}, f"slot {t}: the job must still run"
        model += 20
        s.report("a", model / 2)
    assert model >= 100     # the model thinks it finished long ago
    s.report("a", 100)      # reported complete: the policy stops, the scheduler keeps it open
    assert s.step(8) == {}
    assert "a" in s.view(9).jobs
    s.finish("a")
    assert s.view(9).jobs == {}


# ----- bad calls ---------------------------------------------------------------------------
def test_duplicate_and_unknown_ids_are_clear_errors():
    s = scheduler()
    s.submit(B.job("a"))
    with pytest.raises(ValueError, match="duplicate job id 'a'"):
        s.submit(B.job("a"))
    s.finish("a")
    with pytest.raises(ValueError, match="duplicate job id 'a'"):
        s.submit(B.job("a"))
    with pytest.raises(ValueError, match="no longer active.*finished"):
        s.report("a", 1)
    for call in (s.report, s.finish, s.cancel):
        args = ("zz", 1) if call == s.report else ("zz",)
        with pytest.raises(ValueError, match="unknown job 'zz'"):
            call(*args)
    s.submit(B.job("b"))
    with pytest.raises(ValueError, match="batches_done"):
        s.report("b", -1)
    s.cancel("b")
    with pytest.raises(ValueError, match="was cancelled"):
        s.cancel("b")


def test_a_job_that_fits_no_machine_is_refused_at_submission():
    s = scheduler()
    with pytest.raises(ValueError, match="'huge' cannot run.*exceeds the capacity of every machine"):
        s.submit(B.job("huge", worker={"gpu": 9}))
    with pytest.raises(ValueError, match="not declared"):
        s.submit(B.job("odd", worker={"tpu": 1}))


def test_step_must_advance_by_exactly_one():
    s = scheduler()
    s.step(0)
    with pytest.raises(ValueError, match=r"step\(2\) out of order.*step\(1\)"):
        s.step(2)
    with pytest.raises(ValueError, match="out of order"):
        s.step(0)
    s.step(1)
    with pytest.raises(ValueError, match="arrival slot 1 is in the past"):
        s.submit(B.job("late", arrival=1))
    with pytest.raises(ValueError, match=">= 0"):
        scheduler().step(-1)


def test_constructor_arguments_are_checked():
    with pytest.raises(ValueError, match="mode"):
        scheduler(mode="sometimes")
    with pytest.raises(ValueError, match="commit\\(\\) method"):
        scheduler(mode="commit")
    with pytest.raises(ValueError, match="lookahead"):
        scheduler(lookahead=0)
    with pytest.raises(ValueError, match="slot_seconds"):
        scheduler(slot_seconds=0)
    assert isinstance(GreedyPolicy(), Policy)


# ----- checkpoints ---------------------------------------------------------------------------


def test_a_checkpoint_resumes_with_exactly_the_same_decisions():
    inst = generate(jobs=16, cluster="racks:2x4", seed=5)
    plain = B.drive(inst, GreedyPolicy)[0]
    assert sum(map(len, plain)) > 0
    for k in (1, inst.horizon // 2):
        assert B.drive(inst, GreedyPolicy, restart_at=k)[0] == plain


def test_the_view_counts_each_jobs_changes_and_the_seconds_they_left_it():
    # slot 10 s, restart 4 s: start (no change), keep, grow (change), pause, resume (change)
    plan = [{"a": {"m0": (1, 1)}}, {"a": {"m0": (1, 1)}}, {"a": {"m0": (2, 2)}}, {}, {"a": {"m1": (2, 2)}}]

    class Plan:
        def decide(self, view):
            return plan[view.t]
    s = scheduler(policy=Plan())
    s.submit(B.job("a", restart_seconds=4.0))
    seen = []
    for t in range(len(plan)):
        s.step(t)
        state = s.view(t + 1).jobs["a"]
        seen.append((state.changes, state.useful))
    assert seen == [(0, 10.0), (0, 20.0), (1, 26.0), (1, 26.0), (2, 32.0)]
    assert s.view(5).jobs["a"].hold_seconds == pytest.approx(32.0 / 3)
    again = OnlineScheduler.from_state(s.state(), Plan())
    assert (again.view(5).jobs["a"].changes, again.view(5).jobs["a"].useful) == (2, 32.0)
    state = s.state()
    del state["jobs"][0]["changes"], state["jobs"][0]["useful"]     # a state of an older release
    assert OnlineScheduler.from_state(state, Plan()).view(5).jobs["a"].hold_seconds == 0.0
    state["jobs"][0]["changes"] = -1
    with pytest.raises(ValueError, match=r"jobs\[0\]\.changes: expected an integer >= 0"):
        OnlineScheduler.from_state(state, Plan())


def test_the_view_holds_the_active_jobs_as_a_checked_instance_would():
    s = scheduler(lookahead=3)
    for j in (B.job("a"), B.job("b", arrival=2), B.job("c")):
        s.submit(j)
    s.finish("c")
    view = s.view(1)
    assert list(view.jobs) == ["a"] and view.t == 1 and view.lookahead == 3
    assert view.instance == Instance(10, 4, RES, s.topology, (B.job("a"),), name="online-t1")
    assert view.instance.job_index == {"a": 0}


def test_from_state_rejects_other_documents():
    with pytest.raises(ValueError, match="not an online scheduler state"):
        OnlineScheduler.from_state({"jobs": []}, GreedyPolicy())
    state = scheduler().state()
    del state["jobs"]
    with pytest.raises(ValueError, match="malformed"):
        OnlineScheduler.from_state(state, GreedyPolicy())


# ----- commit mode -----------------------------------------------------------------------------
class Reserve:
    """Commits a job at arrival: each slot from now, the largest local placement left in
    ``reserved(s)``, until the model says it completes. Logs every commitment."""

    name = "reserve"

    def __init__(self):
        self.log: list[tuple[int, str, dict]] = []

    def decide(self, view):  # not used in commit mode
        raise AssertionError("decide called in commit mode")

    def commit(self, view, job_id, reserved):
        state = view.jobs[job_id]
        job, done, prev = state.job, state.done, None
        plan = {}
        for s in range(view.t, view.t + 50):
            tasks = reserved(s).best_local(job, job.max_workers)
            if tasks:
                plan[s] = tasks
                done += slot_batches(view.instance, job, tasks, prev)
                if done >= job.work_batches * (1 - 1e-9):
                    break
            prev = tasks
        self.log.append((view.t, job_id, plan))
        return plan


def test_commit_mode_executes_the_committed_plan():
    # one 8-GPU machine; each job wants 6 workers: the second must wait for the first
    a = B.job("a", work_batches=300, max_workers=6)           # 60 batches a slot: 5 slots
    b = B.job("b", work_batches=120, min_workers=4, max_workers=6, arrival=1)
    policy = Reserve()
    assert isinstance(policy, CommittingPolicy)
    inst = B.instance(B.single(), a, b, T=20)
    result = simulate(inst, policy=policy, mode="commit")
    committed = {job: plan for _, job, plan in policy.log}
    assert [(t, j) for t, j, _ in policy.log] == [(0, "a"), (1, "b")]
    assert min(committed["b"]) == max(committed["a"]) + 1     # reserved() held a's slots
    executed = {}
    for t, alloc in result.schedule.rows():
        executed.setdefault(alloc.job, {})[t] = {alloc.machine: (alloc.workers, alloc.ps)}
    assert executed == committed
    assert result.unfinished == () and result.dropped == 0


def test_commit_mode_recommits_a_job_whose_machine_failed():
    topo = B.star()
    a = B.job("a", work_batches=400, max_workers=4)          # 40 a slot: 10 slots
    policy = Reserve()
    inst = B.instance(topo, a, T=30)
    result = simulate(inst, policy=policy, mode="commit")
    (machine,) = {al.machine for _, al in result.schedule.rows()}
    policy = Reserve()
    result = simulate(inst, policy=policy, mode="commit", events=[RemoveMachine(3, machine)])
    assert [(t, j) for t, j, _ in policy.log] == [(0, "a"), (3, "a")]
    assert all(machine not in tasks for tasks in policy.log[1][2].values())
    assert not [al for t, al in result.schedule.rows() if t >= 3 and al.machine == machine]
    assert result.unfinished == ()


def test_commit_mode_recommits_a_job_whose_plan_ran_out():
    """The truth lags the model: the plan ends before the cluster reports completion."""
    a = B.job("a", work_batches=200, max_workers=4)
    policy = Reserve()
    result = simulate(B.instance(B.single(), a, T=30), policy=policy, mode="commit",
                      progress_noise=0.5, seed=1)
    assert len(policy.log) >= 2 and result.unfinished == ()


def test_an_empty_commitment_is_a_rejection_that_is_not_retried():
    class Reject(Reserve):
        def commit(self, view, job_id, reserved):
            self.log.append((view.t, job_id, {}))
            return {}
    policy = Reject()
    result = simulate(B.instance(B.single(), B.job("a", work_batches=10), T=5), policy=policy,
                      mode="commit", horizon=6)
    assert [(t, j) for t, j, _ in policy.log] == [(0, "a")]
    assert result.unfinished == ("a",) and result.schedule.slots == ()


def test_commit_state_round_trips():
    a = B.job("a", work_batches=300, max_workers=6)
    inst = B.instance(B.single(), a, replace(a, id="b", arrival=1), T=20)
    plain = B.drive(inst, Reserve, mode="commit")[0]
    assert B.drive(inst, Reserve, mode="commit", restart_at=3)[0] == plain
