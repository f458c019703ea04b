"""simulate(): a job stream through the online scheduler, judged by the referee."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from placement.model.evaluate import score, validate
from placement.traces.generate import generate
from placement.offline.greedy import greedy
from placement.online.greedy_policy import GreedyPolicy
from placement.simulate import (RemoveMachine, RepairMachine, Restart, default_horizon, parse_event,
                                jct_axis_is_log, plot_simulation, simulate)

from .. import builders as B


class Idle:
    name = "idle"

    def decide(self, view):
        return {}


@pytest.fixture(scope="module")
def inst():
    return generate(jobs=20, cluster="racks:2x4", seed=7)


@pytest.fixture(scope="module")
def run(inst):
    return simulate(inst, policy=GreedyPolicy())


def test_a_generated_stream_finishes_and_its_schedule_validates(inst, run):
    assert run.unfinished == () and len(run.jct) == len(inst.jobs)
    assert validate(run.instance, run.schedule) == []
    assert run.slots == max(o.completion_slot for o in run.report.jobs) + 1
    # without noise the MODEL.md score of the executed schedule is the simulated truth
    assert {o.id: o.jct for o in run.report.jobs} == run.jct
    assert run.weighted_jct == pytest.approx(run.report.objective)
    assert run.average_jct == pytest.approx(run.report.average_jct)
    assert run.makespan == pytest.approx(run.report.makespan)
    assert run.p95_jct == pytest.approx(np.percentile(list(run.jct.values()), 95))
    assert run.reconfigurations == run.report.reconfigurations > 0
    assert len(run.decision_seconds) == run.slots
    d = run.decision_time
    assert 0 < d["median"] <= d["p95"] <= d["max"]
    for r, series in run.utilisation.items():
        assert len(series) == run.slots and all(0 <= u <= 1 + 1e-9 for u in series)
        # the cluster never changed, so the mean over slots is MODEL.md's utilisation
        assert np.mean(series) == pytest.approx(run.report.utilisation[r])
    assert run.dropped == 0


def test_the_result_is_json(run):
    doc = json.loads(json.dumps(run.to_dict()))
    assert doc["policy"] == "greedy" and doc["jobs"] == 20 and doc["violations"] == []
    assert len(doc["schedule"]["slots"]) > 0
    assert "schedule" not in run.to_dict(schedule=False)
    assert "average JCT" in run.summary()


@pytest.mark.parametrize("arrivals", ["generated", "all at 0"])
def test_greedy_policy_online_equals_the_offline_greedy(arrivals):
    """The policy runs the slot rules' builder on exactly the jobs that have arrived and not
    completed, with the model's own progress reported back, so each slot is the offline
    greedy's slot: identical JCTs (given a horizon long enough for the offline run)."""
    inst = generate(jobs=18, cluster="racks:2x4", seed=3)
    if arrivals == "all at 0":
        inst = replace(inst, jobs=tuple(replace(j, arrival=0) for j in inst.jobs), horizon=3 * inst.horizon)
    offline = score(inst, greedy(inst))
    assert offline.unfinished == 0
    online = simulate(inst, policy=GreedyPolicy())
    assert online.jct == {o.id: o.jct for o in offline.jobs}
    assert online.weighted_jct == offline.objective


def test_progress_noise_makes_the_truth_lag_and_both_scores_are_kept(inst, run):
    noisy = simulate(inst, policy=GreedyPolicy(), progress_noise=0.4, seed=1)
    assert noisy.unfinished == ()
    assert noisy.weighted_jct > run.weighted_jct
    # the model thinks jobs complete before the cluster says so: rule 2 breaks, honestly kept
    assert noisy.violations and {v.rule for v in noisy.violations} == {2}
    assert noisy.report.objective < noisy.weighted_jct
    again = simulate(inst, policy=GreedyPolicy(), progress_noise=0.4, seed=1)
    assert again.jct == noisy.jct and again.schedule == noisy.schedule
    other = simulate(inst, policy=GreedyPolicy(), progress_noise=0.4, seed=2)
    assert other.schedule != noisy.schedule


def test_a_restarted_manager_gives_the_same_run(inst, run):
    resumed = simulate(inst, policy=GreedyPolicy(), events=[Restart(2), Restart(run.slots - 2)])
    assert resumed.schedule.to_dict() == run.schedule.to_dict()
    assert resumed.jct == run.jct and resumed.report == run.report


def test_failure_then_repair(inst, run):
    victim = next(a.machine for t, a in run.schedule.rows() if t == 1)
    result = simulate(inst, policy=GreedyPolicy(), events=[parse_event(f"1:remove:{victim}"),
                                                         parse_event(f"4:repair:{victim}")])
    used = {t for t, a in result.schedule.rows() if a.machine == victim}
    assert not used & {1, 2, 3}
    assert result.unfinished == () and validate(result.instance, result.schedule) == []
    assert [str(e) for e in result.events] == [f"1:remove:{victim}", f"4:repair:{victim}"]
    with pytest.raises(ValueError, match="not a removed machine"):
        simulate(inst, policy=GreedyPolicy(), events=[RepairMachine(1, victim)])


def test_the_horizon_caps_a_run_and_unfinished_jobs_get_the_model_charge():
    inst = B.instance(B.star(), B.job("a", work_batches=50), B.job("b", arrival=2, work_batches=50), T=3)
    result = simulate(inst, policy=Idle(), horizon=6)
    assert result.slots == 6 and result.unfinished == ("a", "b")
    assert result.jct == {o.id: o.jct for o in result.report.jobs}
    assert result.jct["a"] == pytest.approx(6 * 10 + 50 * 1 / 8)
    with pytest.raises(ValueError, match="last arrival"):
        simulate(inst, policy=Idle(), horizon=2)


def test_default_horizon_is_generous(inst, run):
    cap = default_horizon(inst.jobs, inst.topology, inst.slot_seconds, inst.resources)
    assert cap == run.horizon and cap >= 4 * run.slots
    assert default_horizon([], inst.topology, 60, inst.resources) == 1


def test_a_job_list_needs_a_cluster_and_a_slot_length(inst):
    jobs = list(inst.jobs[:5])
    with pytest.raises(ValueError, match="topology= and slot_seconds="):
        simulate(jobs, policy=GreedyPolicy())
    result = simulate(jobs, topology=inst.topology, slot_seconds=inst.slot_seconds,
                      policy=GreedyPolicy(), progress_bar=True)
    assert result.unfinished == () and result.instance.name == "simulation"
    with pytest.raises(ValueError, match="does not fit the cluster"):
        simulate([B.job("huge", worker={"gpu": 99})], topology=inst.topology, slot_seconds=60,
                  policy=GreedyPolicy())


def test_argument_and_event_errors(inst):
    with pytest.raises(ValueError, match="progress_noise"):
        simulate(inst, policy=GreedyPolicy(), progress_noise=1.0)
    with pytest.raises(ValueError, match="seed"):
        simulate(inst, policy=GreedyPolicy(), seed=-1)
    for text in ("remove:m0", "x:remove:m0", "3:explode:m0", "3:remove:"):
        with pytest.raises(ValueError, match="expected T:remove"):
            parse_event(text)
    with pytest.raises(ValueError, match="unknown event"):
        simulate(inst, policy=GreedyPolicy(), events=["3:restart"])
    assert parse_event("3:restart") == Restart(3)
    assert parse_event("3:remove:m0") == RemoveMachine(3, "m0")


def test_plots_are_written(tmp_path, inst, run):
    noisy = simulate(inst, policy=GreedyPolicy(), progress_noise=0.3)
    paths = plot_simulation({"greedy": run, "greedy+noise": noisy}, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["jct_cdf.png", "utilisation.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "plots").glob(".*"))  # no temp files left behind


def test_jct_axis_turns_log_when_jcts_span_orders_of_magnitude(run) -> None:
    assert not jct_axis_is_log({"greedy": run})  # a small instance: JCTs within 100x
    starved = replace(run, jct={**run.jct, "late": 1000 * max(run.jct.values())})
    assert jct_axis_is_log({"greedy": run, "starving": starved})
