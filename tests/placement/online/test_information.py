"""What the scheduler knows of job lengths (placement.online.knowledge): below ``oracle`` a
policy's view carries no truth, completion is only what the cluster reports, and the
information level travels with the checkpoint and the simulation."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from placement.cli import main
from placement.online.greedy_policy import GreedyPolicy
from placement.online.lp_policy import LPRoundingPolicy
from placement.online.scheduler import OnlineScheduler
from placement.simulate.loop import simulate
from placement.traces.generate import generate

from .. import builders as B

RES = ("gpu", "cpu", "mem")


class Watch:
    """Greedy, keeping every view it was shown."""

    name = "watch"

    def __init__(self):
        self.inner, self.views = GreedyPolicy(), []

    def decide(self, view):
        self.views.append(view)
        return self.inner.decide(view)


def scheduler(information: str, policy=None) -> OnlineScheduler:
    return OnlineScheduler(B.star(), resources=RES, policy=policy or Watch(), slot_seconds=10,
                           information=information)


def test_below_oracle_the_view_does_not_carry_the_submitted_length():
    shown = {}
    for work in (1e3, 1e9):
        s = scheduler("none")
        s.submit(B.job("j", work_batches=work))
        s.step(0)
        shown[work] = s.policy.views[0].jobs["j"].job.work_batches
    assert shown[1e3] == shown[1e9] and shown[1e3] not in (1e3, 1e9)
    s = scheduler("oracle")
    s.submit(B.job("j", work_batches=1e3))
    s.step(0)
    assert s.policy.views[0].jobs["j"].job.work_batches == 1e3 and s.policy.views[0].lengths_known


def test_a_job_that_did_not_run_last_slot_is_shown_its_restart_first():
    # one finished job learned; "a" ran in slot 0, "b" arrives in slot 1, neither has done
    # anything yet: "b" is ranked with its restart first, restart_seconds at its fastest rate
    # in GPU-seconds (fastest / rate per worker), shown, as every rank is, at its fastest rate
    s = scheduler("none")
    s.submit(B.job("done", work_batches=1e3, restart_seconds=4.0))
    s.report("done", 1e3)
    s.finish("done")
    s.submit(B.job("a", work_batches=1e3, restart_seconds=4.0))
    s.step(0)
    s.submit(B.job("b", arrival=1, work_batches=1e3, restart_seconds=4.0))
    s.step(1)
    a, b = s.policy.views[1].jobs["a"].job, s.policy.views[1].jobs["b"].job
    assert s.policy.views[1].jobs["a"].previous and not s.policy.views[1].jobs["b"].previous
    fastest = a.rate(a.max_workers, 1, max(m.local_gbps for m in B.star().machines))
    per_worker = fastest / a.max_workers
    assert b.work_batches - a.work_batches == pytest.approx(4.0 * fastest / per_worker * fastest)


def test_exact_estimates_show_each_job_its_own_remaining_work():
    # a finished job's estimate was exact (ratio 1), so an open job's exact estimate is its
    # size: shown as its own remaining work, as at oracle, whatever its width (at `none` the
    # rank is shown at the job's fastest rate instead: the test above); paused (never run
    # in slot 0) it is shown its restart first, the batches its fastest rate does in it
    s = scheduler("estimate")
    s.submit(B.job("done", work_batches=1e3), estimate=1e3)
    s.report("done", 1e3)
    s.finish("done")
    s.submit(B.job("a", work_batches=800.0, restart_seconds=4.0), estimate=800.0)
    s.report("a", 300.0)
    s.step(0)
    a = s.policy.views[0].jobs["a"].job
    fastest = a.rate(a.max_workers, 1, max(m.local_gbps for m in B.star().machines))
    assert a.max_workers > 1 and a.work_batches == pytest.approx(800.0 + 4.0 * fastest)
    s.report("a", 350.0)
    s.step(1)
    assert s.policy.views[1].jobs["a"].previous
    assert s.policy.views[1].jobs["a"].job.work_batches == pytest.approx(800.0)


def test_a_job_past_its_estimate_keeps_running_until_the_cluster_finishes_it():
    s = scheduler("estimate")
    s.submit(B.job("j", work_batches=50.0), estimate=50.0)
    for t in range(3):
        s.report("j", 200.0 + t)                    # far past the estimate
        placed = s.step(t)
        view = s.policy.views[-1]
        assert placed.get("j") and view.jobs["j"].job.work_batches > view.jobs["j"].done
        assert not view.lengths_known
    s.finish("j")
    assert len(s.sizes) == 1 and "j" not in s.open_jobs


def test_at_estimate_the_open_jobs_ratios_weigh_the_correction():
    s = scheduler("estimate")
    for j, est in (("f1", 10.0), ("f2", 10.0), ("open", 10.0)):
        s.submit(B.job(j), estimate=est)
    s.report("f1", 20.0)
    s.finish("f1")                                   # ratio 2
    s.report("f2", 40.0)
    s.finish("f2")                                   # ratio 4
    s.report("open", 30.0)                           # open at 3 x its estimate
    s.step(0)
    ratios, weights, beyond = s.sizes.ratio_law()
    assert ratios.tolist() == [2.0, 4.0] and weights == pytest.approx([1 / 3, 2 / 3]) and beyond is None


def test_finished_jobs_become_learned_sizes_and_the_checkpoint_keeps_them():
    s = scheduler("estimate")
    s.submit(B.job("a"), estimate=100.0, label="resnet")
    s.submit(B.job("b"), estimate=30.0)
    s.step(0)
    s.report("a", 120.0)
    s.finish("a")
    state = json.loads(json.dumps(s.state()))
    again = OnlineScheduler.from_state(state, Watch())
    assert again.information == "estimate" and again.sizes.state() == s.sizes.state()
    assert again._jobs["b"].estimate == 30.0 and again._jobs["b"].label is None
    assert again.step(1) == s.step(1)


def test_an_older_state_without_information_resumes_as_oracle():
    s = scheduler("oracle")
    s.submit(B.job("a"))
    s.step(0)
    state = json.loads(json.dumps(s.state()))
    for key in ("information", "sizes"):
        del state[key]
    for job in state["jobs"]:
        del job["estimate"], job["label"]
    again = OnlineScheduler.from_state(state, Watch())
    assert again.information == "oracle" and len(again.sizes) == 0


@pytest.mark.parametrize("kw, says", [({"estimate": 0.0}, "estimate"), ({"estimate": float("nan")}, "estimate"),
                                      ({"estimate": True}, "estimate"), ({"label": 3}, "label")])
def test_bad_estimates_and_labels_are_refused(kw, says):
    with pytest.raises(ValueError, match=says):
        scheduler("estimate").submit(B.job("j"), **kw)


def test_an_unknown_information_level_is_refused():
    with pytest.raises(ValueError, match="information"):
        scheduler("psychic")


@pytest.mark.parametrize("policy", [GreedyPolicy, lambda: LPRoundingPolicy(threads=1)])
def test_with_no_information_doubling_every_length_changes_no_decision_before_the_first_completion(policy):
    inst = generate(jobs=14, cluster="racks:2x3", seed=3)
    doubled = replace(inst, jobs=tuple(replace(j, work_batches=2 * j.work_batches) for j in inst.jobs))
    runs = [simulate(i, policy=policy(), information="none") for i in (inst, doubled)]
    first = min(o.completion_slot for o in runs[0].report.jobs if o.completion_slot is not None)
    slots = [[s for s in r.schedule.slots if s.t <= first] for r in runs]
    assert slots[0] == slots[1] and len(slots[0]) > 0
    assert runs[0].information == "none" and runs[0].to_dict(schedule=False)["information"] == "none"


def test_estimates_are_seeded_and_exact_without_error():
    inst = generate(jobs=10, cluster="racks:2x3", seed=5)
    exact = simulate(inst, policy=GreedyPolicy(), information="estimate")
    noisy = [simulate(inst, policy=GreedyPolicy(), information="estimate", estimate_error=1.0, seed=s)
             for s in (1, 1, 2)]
    assert noisy[0].schedule == noisy[1].schedule
    assert exact.unfinished == () and all(r.unfinished == () for r in noisy)
    assert exact.estimate_error == 0.0 and noisy[0].estimate_error == 1.0


def test_the_command_line_names_the_information_of_each_run(capsys, tmp_path):
    trace = "instances/traces/philly-30-s3.csv"
    root = B.__file__.rsplit("/tests/", 1)[0]
    assert main(["simulate", "--trace", f"{root}/{trace}", "--cluster", "racks:2x2", "--policy", "greedy",
                 "--information", "none", "--out", str(tmp_path / "o.json")]) == 0
    assert "information none" in capsys.readouterr().out
    assert json.loads((tmp_path / "o.json").read_text())["greedy"]["information"] == "none"
    assert main(["simulate", "--trace", f"{root}/{trace}", "--cluster", "racks:2x2", "--policy", "greedy",
                 "--information", "estimate", "--estimate-error", "-1"]) == 2


def test_a_revise_that_makes_the_previous_tasks_unrunnable_shows_the_restart_at_once():
    # the view taken between revise and step already treats the job as one that must restart
    s = scheduler("none")
    s.submit(B.job("done", work_batches=1e3, restart_seconds=4.0))
    s.report("done", 1e3)
    s.finish("done")
    s.submit(B.job("a", work_batches=1e3, restart_seconds=4.0, max_workers=4))
    placed = s.step(0)
    assert sum(w for w, _ in placed["a"].values()) == 4
    before = s.view(1).jobs["a"]
    s.revise(B.job("a", work_batches=1e3, restart_seconds=4.0, max_workers=2))
    after = s.view(1).jobs["a"]
    assert before.previous and not after.previous
    fastest = after.job.rate(after.job.max_workers, 1, max(m.local_gbps for m in B.star().machines))
    per_worker = fastest / after.job.max_workers
    restart = 4.0 * fastest / per_worker * fastest
    assert after.job.work_batches - after.done == pytest.approx(
        s.sizes.gittins_remaining(after.done / per_worker, 10.0) * fastest + restart)
