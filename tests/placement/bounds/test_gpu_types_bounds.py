"""GPU types (MODEL.md 8) in the bounds: the column bound and the pooled bound stay below the
brute-force optimum on small typed instances, per-type capacity makes both see a queue for the
A100s, and the certificate of every solver holds (bound <= the score of its valid schedule)."""
from __future__ import annotations

import dataclasses

import pytest

from placement.bounds.column_bound import column_bound
from placement.bounds.pooled_bound import as_one_machine, pooled_bound, pooled_size
from placement.model.evaluate import validate
from placement.model.instance import Instance
from placement.model.topology import Topology
from placement.offline.solve import solve
from placement.online.registry import make_policy
from placement.simulate import simulate

from ..formulation.test_gpu_types_lp import bert_and_speech, typed_cases, typed_view


def a100_only(jobs: int = 2) -> Instance:
    """A100-only jobs of one slot at 2 workers; one A100 machine of 2 GPUs beside a T4 machine of 8:
    the jobs take turns (two jobs: 60 + 120 s)."""
    machines = [{"id": "a1", "capacity": {"gpu": 2, "cpu": 4}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 8, "cpu": 4}, "local_gbps": 100, "gpu_type": "t4"}]
    rows = [{"id": f"j{k}", "arrival": 0, "work_batches": 240, "batch_seconds": 1, "worker": {"gpu": 1},
             "ps": {"cpu": 1}, "max_workers": 2, "worker_gbps": 1, "ps_gbps": 2,
             "speed": {"by_type": {"a100": {"local": [2, 4], "spread": [2, 4]}}}} for k in range(jobs)]
    return Instance.from_dict({"name": "a100-only", "slot_seconds": 60, "horizon": 3, "resources": ["gpu", "cpu"],
                               "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                                            "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
                               "jobs": rows})


def test_column_and_pooled_bounds_are_below_the_optimum():
    runs = typed_cases()
    for inst, best, _ in runs:
        assert column_bound(inst, time_limit=None).bound <= best * (1 + 1e-7), inst.name
        assert pooled_bound(inst) <= best * (1 + 1e-7), inst.name
    tight = sum(column_bound(inst, time_limit=None).bound >= best * (1 - 1e-7) for inst, best, _ in runs)
    assert tight >= len(runs) // 2   # a strong bound, not only a valid one


def test_per_type_capacity_makes_the_bounds_see_the_a100_queue():
    """Both bounds say 180 s (the optimum); with the T4 machine's 8 GPUs counted as A100s (the
    cluster pooled as one machine) the jobs would run at once: 120 s."""
    inst = a100_only()
    pooled = as_one_machine(inst)
    assert [(m.gpu_type, m.capacity["gpu"]) for m in pooled.topology.machines] == [("a100", 2.0), ("t4", 8.0)]
    assert pooled_bound(inst) == pytest.approx(180.0, rel=1e-6)
    assert column_bound(inst, time_limit=None).bound == pytest.approx(180.0, rel=1e-6)
    one_type = dataclasses.replace(inst, topology=Topology(
        tuple(dataclasses.replace(m, gpu_type="a100") for m in inst.topology.machines),
        inst.topology.switches, inst.topology.links, inst.topology.root))
    assert pooled_bound(one_type) == pytest.approx(120.0, rel=1e-6)
    assert [m.gpu_type for m in as_one_machine(one_type).topology.machines] == [None]  # one type: one machine


def test_the_pooled_size_counts_configurations_per_type():
    inst = a100_only(1)
    # 3 slots x 2 worker counts x (local, spread) on the one type the job runs on
    assert pooled_size(inst) == 3 * 2 * 2
    assert pooled_bound(inst, max_configurations=pooled_size(inst) - 1) is None


@pytest.mark.parametrize("solver", ["rounding", "greedy", "exact"])
def test_certificates_hold_on_typed_instances(solver):
    for inst in [bert_and_speech(), a100_only(), *(inst for inst, _, _ in typed_cases()[:8])]:
        solution = solve(inst, solver=solver, trials=4)
        assert validate(inst, solution.schedule) == [], inst.name
        assert solution.certificate.lower_bound <= solution.objective * (1 + 1e-9), inst.name


@pytest.mark.parametrize("policy", ["greedy", "lp-rounding"])
def test_the_pooled_bound_is_below_a_simulated_typed_run(policy):
    view = typed_view(12, 5)
    inst = dataclasses.replace(view.instance, horizon=40)
    run = simulate(inst, policy=make_policy(policy))
    assert not run.violations and run.unfinished == ()
    assert pooled_bound(run.instance) <= run.report.objective * (1 + 1e-9)


def test_the_column_bound_credits_spread_rows_wider_than_the_fewest_machines():
    """A valid schedule may hold more PSs than min_ps(W) and so span more machines; a table
    whose 3-machine row is the fastest must be credited with it (found by review: the column
    bound said 20 s, and the exact solver certified 20 s, on an instance whose optimum is 10 s:
    one worker on m0 and a PS on each of m1 and m2)."""
    machines = [{"id": "m0", "capacity": {"gpu": 1, "cpu": 2}, "local_gbps": 50},
                {"id": "m1", "capacity": {"gpu": 0, "cpu": 1}, "local_gbps": 50},
                {"id": "m2", "capacity": {"gpu": 0, "cpu": 1}, "local_gbps": 50}]
    inst = Instance.from_dict({
        "slot_seconds": 10, "horizon": 4, "resources": ["gpu", "cpu"],
        "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                     "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
        "jobs": [{"id": "j", "arrival": 0, "work_batches": 150, "batch_seconds": 1, "worker": {"gpu": 1},
                  "ps": {"cpu": 1}, "max_workers": 1, "worker_gbps": 1, "ps_gbps": 1,
                  "speed": {"local": [10], "spread": {"2": [10], "3": [20]}}}]})
    assert column_bound(inst).bound <= 10 + 1e-6
    solution = solve(inst, solver="exact")
    assert solution.objective == pytest.approx(10)
    assert solution.certificate.lower_bound <= 10 + 1e-6
