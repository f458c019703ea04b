"""Our policies as the Sia simulator's policy (placement.integrations.sia_adapter): the
translation on fakes of the simulator's objects (no simulator needed), information parity
(below oracle the true length never reaches a decision), and a few jobs inside the real
simulator (its environment: PLACEMENT_SIA_PYTHON, docs/sia_arena.md)."""
from __future__ import annotations

import json
import types

import numpy as np
import pytest

from placement.integrations.sia_adapter import configurations, make_adapter
from placement.online.registry import make_policy

from .test_sia_runner import SIMULATOR, _needs_sia, _runner, _tree


def test_configurations_are_sias():
    assert configurations(4, 6) == [1, 2, 4, 8, 12, 16, 20, 24]   # aws: 6 x 4 T4
    assert configurations(8, 3) == [1, 2, 4, 8, 16, 24]           # rtx: 3 x 8
    assert configurations(8, 2) == [1, 2, 4, 8, 16]               # dgx-ext: 2 x 8


class FakeSia:
    """Stands in for the simulator's ``SiaPolicy``: its goodput, per type, from a per-GPU
    speed and a spread penalty."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def _compute_goodputs_v2(self, info, g, nodes, gpus):
        if info.speedup_fn.get(g) is None:
            return None
        return info.per_gpu[g] * gpus * np.where(nodes > 1, 0.8, 1.0)


def info(per_gpu, most=8, fitted=True):
    return types.SimpleNamespace(speedup_fn={g: (object() if fitted else None) for g in per_gpu},
                                 per_gpu=per_gpu, max_replicas={g: most for g in per_gpu},
                                 cluster_throughputs=dict(per_gpu), category=None)


def sim_job(name, progress=0.0, epochs=10):
    app = types.SimpleNamespace(init_batch_size=1, get_progress=lambda e: 1000.0 * e)
    return types.SimpleNamespace(name=name, progress=progress, reference_app=app, completion_epoch=epochs,
                                 calibration_factor=1.0, max_rescale_time=30)


def nodes():
    node = lambda g: types.SimpleNamespace(resources={"nvidia.com/gpu": g})  # noqa: E731
    return {"aws": {0: node(4), 1: node(4)}, "dgx-ext": {0: node(8)}}


def adapter(policy="greedy", information="none", sims=None, now=60.0):
    cls = make_adapter(FakeSia, make_policy(policy), clock=lambda: now, sim_jobs=lambda: sims,
                       information=information)
    return cls(p_fairness=-0.5)


@pytest.mark.parametrize("policy", ["greedy", "lp-rounding"])
def test_the_job_that_gains_most_gets_the_a100s(policy):
    sims = {"bert": sim_job("bert"), "speech": sim_job("speech")}
    a = adapter(policy, sims=sims)
    jobs = {"bert": info({"aws": 1.0, "dgx-ext": 6.0}), "speech": info({"aws": 1.0, "dgx-ext": 1.2})}
    out = a.optimize(jobs, nodes(), {})
    assert out["bert"][0] == "dgx-ext" and len(out["bert"][1]) == 8
    assert out["speech"][0] == "aws" and out["speech"][1] == sorted(out["speech"][1])
    assert a.kwargs == {"p_fairness": -0.5}  # the driver's own arguments reach the simulator's class


def test_the_lp_never_chooses_counts_outside_sias_configurations():
    sims = {f"j{k}": sim_job(f"j{k}") for k in range(3)}
    a = adapter("lp-rounding", sims=sims)
    jobs = {f"j{k}": info({"aws": 1.0, "dgx-ext": 1.0}, most=6) for k in range(3)}
    out = a.optimize(jobs, nodes(), {})
    for g, ids in out.values():
        assert len(ids) in configurations(4 if g == "aws" else 8, 2 if g == "aws" else 1)


def test_a_job_without_a_fitted_model_gets_one_gpu():
    a = adapter("greedy", sims={"new": sim_job("new")})
    out = a.optimize({"new": info({"aws": 1.0, "dgx-ext": 3.0}, fitted=False)}, nodes(), {})
    assert out == {"new": ("dgx-ext", [0])}


def test_below_oracle_the_true_length_never_reaches_a_decision():
    """Sia's information: doubling every job's true length changes nothing before a job finishes."""
    def decisions(epochs):
        sims = {f"j{k}": sim_job(f"j{k}", progress=100.0 * k, epochs=epochs) for k in range(6)}
        a = adapter("lp-rounding", sims=sims)
        jobs = {f"j{k}": info({"aws": 1.0 + k, "dgx-ext": 2.0 + k % 3}) for k in range(6)}
        out = []
        for t in range(1, 4):
            a._clock = lambda t=t: 60.0 * t
            out.append(a.optimize(jobs, nodes(), {}))
        return out
    assert decisions(10) == decisions(20)


def test_lp_rounding_and_greedy_finish_a_few_jobs_in_the_real_simulator(tmp_path):
    py = _needs_sia()
    workload = tmp_path / "small.csv"
    workload.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n"
                        "bert-1,30,bert,2,12\ncifar10-2,60,cifar10,4,256\ndeepspeech2-3,90,deepspeech2,2,20\n")
    before = _tree(SIMULATOR)
    for policy in ("greedy", "lp-rounding"):
        p = _runner(py, "--simulator", str(SIMULATOR), "--workload", str(workload), "--policy", policy,
                    "--out", str(tmp_path / f"{policy}.json"))
        assert p.returncode == 0, p.stderr[-2000:]
        run = json.loads((tmp_path / f"{policy}.json").read_text())
        assert run["policy"] == policy and run["information"] == "none"
        assert run["unfinished"] == [] and len(run["jcts"]) == 4
        assert all(0 < j < 6 * 3600 for j in run["jcts"].values())
        assert run["decisions"] > 0
    assert _tree(SIMULATOR) == before


def test_a_rigid_job_no_type_can_hold_waits_instead_of_failing():
    class FakeGavel:
        def __init__(self, **kwargs):
            pass

        def predict_throughput(self, info, g, name):
            return 10.0
    node = lambda g: types.SimpleNamespace(resources={"nvidia.com/gpu": g})  # noqa: E731
    cls = make_adapter(FakeGavel, make_policy("gavel"), slot_seconds=360, clock=lambda: 360.0,
                       sim_jobs=lambda: {"j": types.SimpleNamespace(name="j"), "k": types.SimpleNamespace(name="k")})
    a = cls()
    big = types.SimpleNamespace(scale_factor=8, total_steps=1000, cur_step=0, rescale_time=10)
    small = types.SimpleNamespace(scale_factor=4, total_steps=1000, cur_step=0, rescale_time=10)
    out = a.optimize({"j": big, "k": small}, {"aws": {0: node(4)}, "rtx": {0: node(4)}}, {})
    assert "j" not in out and len(out["k"][1]) == 4
