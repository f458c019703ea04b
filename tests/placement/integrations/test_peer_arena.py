"""The peer arena: the linear-speed rule (the old approximation), the adapter's speed
tables, the scheduler's revise, the adapter inside the Pollux simulator, and the
benchmark's handling of bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from placement.model.instance import Job
from placement.integrations.linear_speed import linear_speed, reference_placements
from placement.integrations.measured_speed import UNMEASURED, entry_placements, packed
from placement.integrations.pollux_adapter import (PeerError, make_adapter, progress_rate, replica_limit,
                                                   speedup_table, traces_table)
from placement.online.greedy_policy import GreedyPolicy
from placement.online.baselines import Pollux
from placement.online.registry import POLICIES, make_policy
from placement.online.scheduler import OnlineScheduler

from .. import builders as B

ROOT = Path(__file__).resolve().parents[3]
SIMULATOR = ROOT.parent / "shared" / "peers" / "pollux-simulator"
sys.path.insert(0, str(ROOT / "benchmarks"))
import peer_pollux  # noqa: E402


# ----- linear speed -------------------------------------------------------------------------
def _job(speed, count: int) -> Job:
    return Job("j", 0, 1000.0, speed.batch_seconds, {"gpu": 1}, {}, count, 1.0, float(count),
               gradient_mb=speed.gradient_mb)


def test_linear_speed_reproduces_both_measured_points():
    # 4 workers on one machine do 10 batches/s, 16 spread do 20: theta_L = 0.4 s and
    # theta_S = 0.8 s per batch and worker; MODEL.md 4 gives back exactly these rates.
    speed = linear_speed(10.0, 4, 20.0, 16, local_gbps=1e6, worker_gbps=1.0)
    job = _job(speed, 16)
    assert 4 / job.batch_time(1e6) == pytest.approx(10.0, rel=1e-12)
    assert 16 / job.batch_time(1.0) == pytest.approx(20.0, rel=1e-12)
    assert speed.batch_seconds > 0 and speed.gradient_mb > 0


def test_linear_speed_when_spreading_is_not_slower_or_absent():
    # Spread per worker 0.2 s < local 0.4 s: not writable with gradient_mb >= 0, so both
    # classes get the local time; a one-worker job has no spread point at all.
    assert linear_speed(10.0, 4, 80.0, 16, local_gbps=1e6, worker_gbps=1.0) == (0.4, 0.0)
    assert linear_speed(2.5, 1, None, None, local_gbps=400, worker_gbps=1.0) == (0.4, 0.0)


@pytest.mark.parametrize("kwargs, match", [
    (dict(local_rate=0.0), "local_rate"),
    (dict(local_rate=float("nan")), "local_rate"),
    (dict(local_workers=0), "local_workers"),
    (dict(local_gbps=1.0), "must exceed"),
    (dict(spread_rate=-1.0), "spread point"),
    (dict(spread_rate=1e-9), "raise local_gbps"),
])
def test_linear_speed_rejects_what_it_cannot_write(kwargs, match):
    args = dict(local_rate=10.0, local_workers=4, spread_rate=20.0, spread_workers=16,
                local_gbps=10.0, worker_gbps=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        linear_speed(**args)


def test_reference_placements_for_gangs_and_elastic_jobs():
    assert packed(9, 4) == (4, 4, 1) and packed(8, 4) == (4, 4)
    assert reference_placements(1, 4) == ((1,), None)
    assert reference_placements(3, 4) == ((3,), (2, 1))
    assert reference_placements(3, 4, elastic=True) == ((3,), (2, 1))
    assert reference_placements(12, 4) == ((4,), (4, 4, 4))          # the gang itself
    assert reference_placements(12, 4, elastic=True) == ((4,), (4, 1))  # the first spread


# ----- the adapter's speed tables (a stand-in for the simulator's job) --------------------------
class _App:
    """Step time 1 / (W x 0.9^(machines - 1)) s, no accumulation, statistical gain 1: the
    simulator's progress rate on a placement is W x 0.9^(machines - 1)."""
    name, init_batch_size, max_epochs = "toy", 8, 3

    def get_throughput(self, placement, atomic_bsz):
        if placement == (1, 1, 1):
            return float("nan"), 0.0                   # unmeasured: the simulator asserts
        return 1 / (sum(placement) * 0.9 ** (len(placement) - 1)), 0.0

    def get_grad_stats(self, batch, epoch):
        return 1.0, 0.0                                # grad_var 0: gain 1 at any batch


class _SimJob:
    application = _App()
    target_batch_size, epoch, grad_params = 8, 0, None

    def __init__(self, fitted: bool):
        self.perf_params = (1.0,) if fitted else None

    def update_local_bsz(self, placement):
        self.atomic_bsz, self.accum_steps = 8 // sum(placement), 0


def test_progress_rate_and_the_traces_table():
    job = _SimJob(fitted=False)
    assert progress_rate(job, (4, 1)) == pytest.approx(5 * 0.9)
    assert progress_rate(job, (1, 1, 1)) is None       # NaN step time: nothing measured
    table = traces_table(job, 1, 6, 4, 16)
    assert table.min_workers == 1 and [m for m, _ in table.spread] == [2, 4]
    for (m, w), p in entry_placements(1, 6, 4, 16).items():
        entry = table.rate(w, m)
        want = UNMEASURED * 5.4 if p == (1, 1, 1) else w * 0.9 ** (len(p) - 1)
        assert entry == pytest.approx(want), (m, w, p)
    assert table.rate(6, 1) == table.rate(6, 2) == pytest.approx(6 * 0.9)   # (4, 2): never local
    assert table.rate(3, 4) == pytest.approx(UNMEASURED * 5.4)  # (1, 1, 1); fastest: 6 on (4, 2)


def test_speedup_table_reads_speedup_fn_times_the_one_gpu_rate():
    calls = []

    def speedup_fn(nodes, replicas):                   # vectorised, as the simulator's
        calls.append(len(nodes))
        return np.where(replicas == 5, 0.0, replicas * 0.5 ** (nodes - 1))

    job = _SimJob(fitted=True)
    table = speedup_table(speedup_fn, job, 1, 6, 4, 16)
    assert len(calls) == 1                             # one call for every placement
    assert table.rate(3, 1) == 3.0 and table.rate(4, 2) == pytest.approx(4 * 0.5)  # (3, 1)
    assert table.rate(6, 4) == pytest.approx(6 * 0.5 ** 3)                         # (3, 1, 1, 1)
    assert table.rate(5, 2) == pytest.approx(5 * 0.9)  # speedup 0: progress_rate on (4, 1)
    # no fitted model (the simulator's prior lambda n, r: r) or no speedup_fn: None
    assert speedup_table(lambda n, r: r, _SimJob(fitted=False), 1, 6, 4, 16) is None
    assert speedup_table(None, job, 1, 6, 4, 16) is None


def test_the_adapter_picks_its_source_and_keeps_a_traces_table_per_epoch():
    sim = types.SimpleNamespace(optimus=types.SimpleNamespace(OptimusPolicy=object),
                                pollux=types.SimpleNamespace(PolluxPolicy=object))
    kw = dict(clock=lambda: 0.0, sim_jobs=dict)
    assert make_adapter(sim, GreedyPolicy(), "tuned", **kw).source == "traces"
    assert make_adapter(sim, GreedyPolicy(), "adaptive", **kw).source == "speedup"
    with pytest.raises(PeerError, match="unknown speed source 'oracle'"):
        make_adapter(sim, GreedyPolicy(), "tuned", source="oracle", **kw)
    adapter = make_adapter(sim, GreedyPolicy(), "tuned", source="speedup", **kw)
    info = types.SimpleNamespace(speedup_fn=lambda n, r: np.asarray(r, dtype=float))
    unfitted = _SimJob(fitted=False)
    first = adapter._table("j", info, unfitted, 1, 6, 4, 16)     # no fitted model: the traces
    assert adapter._table("j", info, unfitted, 1, 6, 4, 16) is first
    unfitted.epoch = 1
    assert adapter._table("j", info, unfitted, 1, 6, 4, 16) is not first
    fitted = adapter._table("j", info, _SimJob(fitted=True), 1, 6, 4, 16)
    assert fitted.rate(5, 2) == pytest.approx(5.0)     # base 1 x speedup 5, not 5 x 0.9


class _AdaptiveApp(_App):
    """As _App, each machine after the first costing a factor ``penalty``; the simulator's
    limit is 96 // 8 = 12 replicas."""
    max_batch_size, min_local_bsz = 96, 8

    def __init__(self, penalty: float):
        self.penalty = penalty

    def get_throughput(self, placement, atomic_bsz):
        return 1 / (sum(placement) * self.penalty ** (len(placement) - 1)), 0.0


class _AdaptiveJob(_SimJob):
    target_batch_size = None                             # the batch adapts (Pollux mode)

    def __init__(self, penalty: float):
        super().__init__(fitted=True)
        self.application, self.profile = _AdaptiveApp(penalty), {}

    def update_local_bsz(self, placement):
        self.atomic_bsz, self.accum_steps = 8, 0


def test_adaptive_count_goes_up_to_the_simulators_limit_and_never_down():
    sim = types.SimpleNamespace(pollux=types.SimpleNamespace(PolluxPolicy=object))
    adapter = make_adapter(sim, GreedyPolicy(), "adaptive", clock=lambda: 0.0, sim_jobs=dict)
    info = types.SimpleNamespace(max_replicas=2)         # Pollux's exploration cap: not ours
    job = _AdaptiveJob(penalty=0.5)
    assert replica_limit(info, job) == 12
    # on 4-GPU machines: 8 on (4, 4) run at 8 x 0.5 = 4 >= 8 / 2; 9 on (4, 4, 1) at 2.25 < 4.5
    assert adapter._useful_count("j", info, job, 4) == 8
    job.application, job.epoch = _AdaptiveApp(penalty=0.9), 1    # a new epoch: found again
    assert adapter._useful_count("j", info, job, 4) == 12
    job.application, job.profile = _AdaptiveApp(penalty=0.5), {(1, 4): 1}   # refit: 8 again,
    assert adapter._useful_count("j", info, job, 4) == 12        # but never below 12 given
    # a job whose batch size the simulator fixes keeps the JobInfo's max_replicas
    fixed = _AdaptiveJob(penalty=0.9)
    fixed.target_batch_size = 32
    assert replica_limit(types.SimpleNamespace(max_replicas=1), fixed) == 1


def test_a_policy_that_sizes_jobs_as_pollux_is_offered_pollux_cap():
    # our pollux: its objective sizes the jobs, so it gets Pollux's own cap (2 here), not
    # the useful count (8, as above) or the simulator's limit (12), at every information level
    sim = types.SimpleNamespace(pollux=types.SimpleNamespace(PolluxPolicy=object))
    info = types.SimpleNamespace(max_replicas=2)
    for information in ("oracle", "none"):
        adapter = make_adapter(sim, Pollux(), "adaptive", clock=lambda: 0.0, sim_jobs=dict,
                               information=information)
        assert adapter._useful_count("j", info, _AdaptiveJob(penalty=0.5), 4) == 2


def test_lp_rounding_is_offered_pollux_cap_only_where_its_share_sizes_the_jobs():
    # below oracle lp-rounding's share sizes the jobs under Pollux's cap (2); at oracle no
    # share is taken and it gets the traces' useful count (8), as lp-no-share does
    sim = types.SimpleNamespace(pollux=types.SimpleNamespace(PolluxPolicy=object))
    info = types.SimpleNamespace(max_replicas=2)
    for policy, information, want in (("lp-rounding", "none", 2), ("lp-rounding", "oracle", 8),
                                      ("lp-no-share", "oracle", 8)):
        adapter = make_adapter(sim, make_policy(policy), "adaptive", clock=lambda: 0.0, sim_jobs=dict,
                               information=information)
        assert adapter._useful_count("j", info, _AdaptiveJob(penalty=0.5), 4) == want, (policy, information)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_job_revised_below_its_running_tasks_keeps_running_with_fewer(name):
    # 8 workers in slot 0; the cluster then says only 4 are worth having (max_workers 4):
    # the view forgets the previous 8 (the scheduler would drop them), so every policy,
    # baselines that keep previous sets themselves included, runs the job with at most 4
    mode = "commit" if name.startswith("oasis") else "reoptimise"
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=make_policy(name),
                            lookahead=2, slot_seconds=10, mode=mode)
    sched.submit(B.job("a", work_batches=2000, max_workers=8))
    assert sum(w for w, _ in sched.step(0)["a"].values()) == 8
    sched.revise(B.job("a", work_batches=2000, max_workers=4))
    assert sched.view(1).jobs["a"].previous == {}
    placed = sched.step(1)
    assert sched.dropped == [] and 1 <= sum(w for w, _ in placed["a"].values()) <= 4


def test_a_revise_the_running_tasks_still_suit_keeps_them_in_view():
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=GreedyPolicy(),
                            lookahead=2, slot_seconds=10)
    sched.submit(B.job("a", work_batches=2000, max_workers=4))
    first = sched.step(0)["a"]
    sched.revise(B.job("a", work_batches=2000, max_workers=6, batch_seconds=0.5))
    assert sched.view(1).jobs["a"].previous == first


def _ran_8_revised_to_4() -> tuple[OnlineScheduler, dict]:
    """A greedy scheduler whose job ran 8 workers in slot 0, then revised to at most 4."""
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=GreedyPolicy(),
                            lookahead=2, slot_seconds=10)
    sched.submit(B.job("a", work_batches=2000, max_workers=8))
    first = sched.step(0)["a"]
    sched.revise(B.job("a", work_batches=2000, max_workers=4))
    return sched, first


def test_a_job_revised_down_and_up_again_before_the_next_step_keeps_its_tasks():
    # 8 -> 4 -> 8 workers between two steps: the 8 it runs suit it again, so nothing is forgotten
    sched, first = _ran_8_revised_to_4()
    sched.revise(B.job("a", work_batches=2000, max_workers=8))
    assert sched.view(1).jobs["a"].previous == first
    assert sched.step(1)["a"] == first


def test_a_machine_removed_after_a_revise_still_displaces_the_job_that_ran_there():
    sched, first = _ran_8_revised_to_4()
    assert sched.remove_machine(next(iter(first))) == ["a"]


def test_a_checkpoint_between_a_revise_and_the_next_step_resumes_as_if_never_stopped():
    sched, first = _ran_8_revised_to_4()
    state = json.loads(json.dumps(sched.state()))
    resumed = OnlineScheduler.from_state(state, GreedyPolicy())
    assert resumed.view(1).jobs["a"].previous == {}  # pending, as in the scheduler that wrote it
    assert resumed.remove_machine(next(iter(first))) == ["a"]
    again = OnlineScheduler.from_state(state, GreedyPolicy())
    again.revise(B.job("a", work_batches=2000, max_workers=8))
    assert again.view(1).jobs["a"].previous == first


class _Planner:
    """A committing policy with a fixed plan shape (an idle slot in it)."""
    name = "planner"

    def __init__(self, plan=None):
        self.calls, self.plan = 0, plan

    def commit(self, view, job_id, reserved):
        self.calls += 1
        t = view.t
        return self.plan(t) if self.plan else {t: {"m0": (2, 2)}, t + 1: {}, t + 2: {"m0": (2, 2)}}


def test_a_revise_keeps_a_commitment_it_can_still_run_and_survives_a_malformed_one():
    policy = _Planner()
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=policy, slot_seconds=10, mode="commit")
    sched.submit(B.job("a", max_workers=8))
    sched.step(0)
    sched.revise(B.job("a", max_workers=8, batch_seconds=0.5))  # speed only: the plan still runs
    assert sched.step(1) == {} and policy.calls == 1  # its idle slot kept, not committed again
    # a buggy policy's plan holds a malformed entry: revise does not crash; the scheduler
    # refuses the entry, with its reason, when its slot comes
    bad = _Planner(lambda t: {t: {"m0": (2, 2)}, t + 1: {"m0": 3}})
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=bad, slot_seconds=10, mode="commit")
    sched.submit(B.job("a", max_workers=8))
    sched.step(0)
    sched.revise(B.job("a", max_workers=4))
    assert sched.step(1) == {} and "not a pair" in sched.dropped[0].reason


def test_resuming_a_state_forgets_tasks_the_job_can_no_longer_run():
    # a state written before revise forgot them (an older release): 8 workers kept for a job
    # revised to at most 4; the resumed scheduler runs it with 4 instead of dropping the 8
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=GreedyPolicy(), lookahead=2, slot_seconds=10)
    sched.submit(B.job("a", work_batches=2000, max_workers=8))
    sched.step(0)
    state = json.loads(json.dumps(sched.state()))
    state["jobs"][0]["job"]["max_workers"] = 4
    resumed = OnlineScheduler.from_state(state, GreedyPolicy())
    assert resumed.view(1).jobs["a"].previous == {}
    placed = resumed.step(1)
    assert resumed.dropped == [] and sum(w for w, _ in placed["a"].values()) == 4


def test_tiresias_runs_a_job_built_with_no_minimum():
    from placement.online.baselines.tiresias import Tiresias
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=Tiresias(), slot_seconds=10)
    sched.submit(B.job("z", min_workers=0, max_workers=4))
    assert sum(w for w, _ in sched.step(0)["z"].values()) == 4


# ----- OnlineScheduler.revise -----------------------------------------------------------------
def test_revise_keeps_progress_and_history_and_checks_the_job():
    sched = OnlineScheduler(B.star(), resources=B.RESOURCES, policy=GreedyPolicy(),
                            lookahead=2, slot_seconds=10)
    job = B.job("a", work_batches=1000, max_workers=4)
    sched.submit(job)
    first = sched.step(0)
    sched.report("a", 40.0)
    faster = B.job("a", work_batches=1000, max_workers=4, batch_seconds=0.5)
    sched.revise(faster)
    assert sched.open_jobs["a"] is faster
    view = sched.view(1)
    assert view.jobs["a"].done == 40.0 and view.jobs["a"].previous == first["a"]
    assert view.instance.jobs[0].batch_seconds == 0.5
    with pytest.raises(ValueError, match="arrival"):
        sched.revise(B.job("a", arrival=1, work_batches=1000, max_workers=4))
    with pytest.raises(ValueError, match="never submitted"):
        sched.revise(B.job("zz"))


# ----- the adapter in the peer's simulator ----------------------------------------------------
def _peer_python() -> Path | None:
    given = os.environ.get("PLACEMENT_PEER_PYTHON")
    if given:
        return Path(given)
    made = ROOT / ".peer-venv" / "bin" / "python"
    return made if made.exists() else None


def _needs_peer() -> Path:
    if not SIMULATOR.is_dir():
        pytest.skip(f"the Pollux simulator is not at {SIMULATOR} (the peers folder beside the project)")
    py = _peer_python()
    if py is None:
        pytest.skip("no environment that runs the Pollux simulator: set PLACEMENT_PEER_PYTHON, or make "
                    ".peer-venv once (python benchmarks/peer_pollux.py does; .ci/run does)")
    why = peer_pollux._probe(py)
    if why:
        pytest.skip(f"{py} cannot run the Pollux simulator: {why}")
    return py


SMALL = """name,time,application,num_replicas,batch_size
cifar10-0,53,cifar10,6,2048
ncf-7,700,ncf,1,32768
ncf-8,760,ncf,2,32768
cifar10-9,900,cifar10,2,1024
ncf-99,40000,ncf,2,32768
"""


@pytest.mark.parametrize("mode, policy", [("fixed", "tiresias"), ("fixed", "greedy"),
                                          ("tuned", "optimus"), ("tuned", "peer:optimus"),
                                          ("adaptive", "pollux")])
def test_adapter_runs_a_few_jobs_in_the_peer_simulator(tmp_path, mode, policy):
    py = _needs_peer()
    workload = tmp_path / "small.csv"
    workload.write_text(SMALL)
    out = tmp_path / "run.json"
    p = subprocess.run([str(py), "-m", "placement.integrations.pollux", "--simulator", str(SIMULATOR),
                        "--workload", str(workload), "--mode", mode, "--policy", policy, "--out", str(out)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads(out.read_text())
    assert run["policy"] == policy and run["mode"] == mode
    # ncf-99 comes long after the others finished: the simulator skips the idle slots
    # (no optimize call) and the adapter must step over them
    assert sorted(run["jcts"]) == ["cifar10-0", "cifar10-9", "ncf-7", "ncf-8", "ncf-99"]
    assert not run["unfinished"] and all(v > 0 for v in run["jcts"].values())
    assert run["average_jct"] == pytest.approx(sum(run["jcts"].values()) / 5)
    assert run["drops"] == 0 and run["decisions"] > 0
    # what the simulator executed: every job got GPUs, a gang exactly its own count
    requested = {line.split(",")[0]: int(line.split(",")[3]) for line in SMALL.split()[1:]}
    assert set(run["replica_counts"]) == set(requested)
    for job, seen in run["replica_counts"].items():
        assert all(c >= 1 for c in seen)
        if mode == "fixed":
            assert seen == [requested[job]], (job, seen)
        else:
            assert max(seen) <= 64


#: bert (short: two epochs, small traces) and ncf: a fast workload for the speed sources
TABLES = """name,time,application,num_replicas,batch_size
bert-0,0,bert,4,96
ncf-1,60,ncf,1,32768
bert-2,300,bert,2,48
"""


@pytest.mark.parametrize("mode, policy, source", [("adaptive", "greedy", None),
                                                  ("tuned", "lp-rounding", "speedup")])
def test_adapter_plays_speed_tables_from_speedup_fn(tmp_path, mode, policy, source):
    """Pollux's fitted speedup as the tables (adaptive's default; tuned when asked): the
    run completes with valid allocations (the scheduler dropped none)."""
    py = _needs_peer()
    workload = tmp_path / "tables.csv"
    workload.write_text(TABLES)
    out = tmp_path / "run.json"
    p = subprocess.run([str(py), "-m", "placement.integrations.pollux", "--simulator", str(SIMULATOR),
                        "--workload", str(workload), "--mode", mode, "--policy", policy, "--out", str(out),
                        *(("--speed-source", source) if source else ())],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads(out.read_text())
    assert run["speed_source"] == "speedup" and run["mode"] == mode
    assert sorted(run["jcts"]) == ["bert-0", "bert-2", "ncf-1"] and not run["unfinished"]
    assert run["drops"] == 0 and run["decisions"] > 0
    assert run["replica_counts"]["ncf-1"] == [1]                 # the simulator's cap for ncf
    assert all(1 <= c <= 64 for seen in run["replica_counts"].values() for c in seen)


def test_speed_source_is_for_our_policies_only(tmp_path):
    from placement.integrations.pollux import run
    with pytest.raises(PeerError, match="--speed-source is for our policies"):
        run(SIMULATOR, tmp_path / "w.csv", "tuned", "peer:optimus", speed_source="speedup")
    with pytest.raises(PeerError, match="unknown speed source 'oracle'"):
        run(SIMULATOR, tmp_path / "w.csv", "tuned", "greedy", speed_source="oracle")


@pytest.mark.parametrize("row, match", [
    ("cifar10-1,60,cifar10,2,64", "row 3:batch_size: 64 is outside the measured 128..4096"),
    ("cifar10-1,60,cifar10,65,2048", "row 3:num_replicas: 65 GPUs, more than the cluster's 64"),
])
def test_adapter_refuses_a_row_the_simulator_cannot_run(tmp_path, row, match):
    py = _needs_peer()
    workload = tmp_path / "bad.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,53,cifar10,6,2048\n"
                        + row + "\n")
    out = tmp_path / "x.json"
    p = subprocess.run([str(py), "-m", "placement.integrations.pollux", "--simulator", str(SIMULATOR),
                        "--workload", str(workload), "--mode", "fixed", "--policy", "greedy",
                        "--out", str(out)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert p.returncode == 2 and match in p.stderr, p.stderr[-500:]
    assert "Traceback" not in p.stderr and not out.exists()


def test_adapter_refuses_a_peer_policy_outside_its_mode(tmp_path):
    py = _needs_peer()
    workload = tmp_path / "small.csv"
    workload.write_text(SMALL)
    p = subprocess.run([str(py), "-m", "placement.integrations.pollux", "--simulator", str(SIMULATOR),
                        "--workload", str(workload), "--mode", "tuned", "--policy", "peer:tiresias",
                        "--out", str(tmp_path / "x.json")], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert p.returncode == 2 and "runs only in mode fixed" in p.stderr
    assert "Traceback" not in p.stderr and not (tmp_path / "x.json").exists()


# ----- the benchmark's bad input ----------------------------------------------------------------
def _bench(tmp_path, capsys, *args: str) -> tuple[int, str]:
    out = tmp_path / "out" / "peer.json"
    out.parent.mkdir(exist_ok=True)
    code = peer_pollux.main([*args, "--out", str(out), "--cache", str(tmp_path / "cache"),
                             "--peer-python", sys.executable])
    err = capsys.readouterr().err
    assert not any((tmp_path / "out").iterdir()), "nothing may be written on bad input"
    return code, err


def test_benchmark_bad_simulator_folder(tmp_path, capsys):
    wl = tmp_path / "w.csv"
    wl.write_text(SMALL)
    code, err = _bench(tmp_path, capsys, "--simulator", str(tmp_path / "nope"), "--workload", str(wl))
    assert code == 2 and "no such folder" in err and "git clone" in err
    (tmp_path / "empty").mkdir()
    code, err = _bench(tmp_path, capsys, "--simulator", str(tmp_path / "empty"), "--workload", str(wl))
    assert code == 2 and "not the Pollux simulator folder" in err
    assert err.count("\n") == 1


@pytest.mark.skipif(not SIMULATOR.is_dir(), reason="the Pollux simulator (shared/peers) is absent")
@pytest.mark.parametrize("content, args, match", [
    (None, (), "no such workload file"),
    (b"\xff\xfe\x00garbage", (), "cannot read the workload"),
    (b"a,b\n1,2\n", (), "missing column"),
    (SMALL.replace("ncf-7,700,ncf,1,32768", "ncf-7,700,ncf,1,7").encode(), (), "row 3"),
    (SMALL.replace("ncf-7,700,ncf,1,32768", "ncf-7,700,ncf,65,32768").encode(), (), "more than the simulator's"),
    (SMALL.encode(), ("--interval", "0"), "--interval and --lookahead must be >= 1"),
    (SMALL.encode(), ("--policy", "nope"), "unknown policy 'nope'"),
    (SMALL.encode(), ("--mode", "tuned", "--policy", "peer:tiresias"), "runs only in mode fixed"),
])
def test_benchmark_bad_workload_or_plan(tmp_path, capsys, content, args, match):
    wl = tmp_path / "w.csv"
    if content is not None:
        wl.write_bytes(content)
    code, err = _bench(tmp_path, capsys, "--simulator", str(SIMULATOR), "--workload", str(wl), *args)
    assert code == 2 and match in err and err.count("\n") == 1


@pytest.mark.skipif(not SIMULATOR.is_dir(), reason="the Pollux simulator (shared/peers) is absent")
def test_benchmark_names_a_python_that_cannot_run_the_simulator(tmp_path, capsys):
    wl = tmp_path / "w.csv"
    wl.write_text(SMALL)
    code, err = _bench(tmp_path, capsys, "--simulator", str(SIMULATOR), "--workload", str(wl))
    # this interpreter (the project's own environment) has numpy>=2 or no pymoo
    assert code == 2 and "--peer-python" in err and "cannot run the simulator" in err


@pytest.mark.parametrize("mode, information", [("fixed", "none"), ("fixed", "estimate"), ("adaptive", "none")])
def test_our_policies_run_at_the_peers_information(tmp_path, mode, information):
    """Below oracle the adapter hands the scheduler no true length (it plans from the sizes of
    finished jobs, or a seeded estimate) and, in adaptive mode, the GPU count from Pollux's
    own JobInfo: the run completes with valid allocations and says what it knew."""
    py = _needs_peer()
    workload = tmp_path / "tables.csv"
    workload.write_text(TABLES)
    out = tmp_path / "run.json"
    p = subprocess.run([str(py), "-m", "placement.integrations.pollux", "--simulator", str(SIMULATOR),
                        "--workload", str(workload), "--mode", mode, "--policy", "lp-rounding", "--out", str(out),
                        "--information", information, "--estimate-error", "1", "--seed", "3"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads(out.read_text())
    assert run["information"] == information and run["estimate_error"] == 1.0
    assert sorted(run["jcts"]) == ["bert-0", "bert-2", "ncf-1"] and not run["unfinished"]
    assert run["drops"] == 0 and run["decisions"] > 0


def test_information_is_for_our_policies_only(tmp_path):
    from placement.integrations.pollux import run
    with pytest.raises(PeerError, match="--information is for our policies"):
        run(SIMULATOR, tmp_path / "w.csv", "fixed", "peer:tiresias", information="none")


def test_the_benchmark_runs_our_policies_at_each_peers_information():
    assert peer_pollux.PARITY == {"fixed": "none", "tuned": "oracle", "adaptive": "none"}
    args = peer_pollux.argparse.Namespace(information="parity")
    assert [peer_pollux.information(args, m) for m in ("fixed", "tuned", "adaptive")] == ["none", "oracle", "none"]
    args.information = "estimate"
    assert peer_pollux.information(args, "tuned") == "estimate"
