"""GPU types (MODEL.md 8, docs/model.md 'GPU types'): machines declare a type, a job's speed
table may be per type, a job's workers use one type per slot; untyped instances unchanged;
malformed input is a located error."""
from __future__ import annotations

import copy

import pytest

from placement.model.evaluate import evaluate
from placement.model.instance import Instance, InstanceError
from placement.model.progress import job_rate
from placement.model.schedule import Schedule
from placement.model.speed import TypedSpeed


def document() -> dict:
    """Two A100 machines of 2 GPUs and one T4 machine of 4; one job with a per-type table."""
    machines = [{"id": "a1", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "a2", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 4}, "local_gbps": 100, "gpu_type": "t4"}]
    job = {"id": "bert", "arrival": 0, "work_batches": 1000, "batch_seconds": 1, "worker": {"gpu": 1},
           "ps": {}, "max_workers": 2, "worker_gbps": 1, "ps_gbps": 2,
           "speed": {"by_type": {"a100": {"local": [3, 5], "spread": [3, 4]},
                                 "t4": {"local": [1, 1.5], "spread": [1, 1.2]}}}}
    return {"name": "typed", "slot_seconds": 60, "horizon": 5, "resources": ["gpu"],
            "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                         "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
            "jobs": [job]}


def schedule(*slots) -> Schedule:
    return Schedule.from_dict({"slots": [
        {"t": t, "allocations": [{"job": "bert", "machine": h, "workers": w, "ps": s} for h, w, s in allocs]}
        for t, allocs in enumerate(slots)]})


def test_types_load_and_round_trip():
    inst = Instance.from_dict(document())
    assert inst.topology.gpu_types == ("a100", "t4")
    assert inst.topology.typed
    assert isinstance(inst.jobs[0].speed, TypedSpeed)
    assert inst.jobs[0].speed.types == {"a100", "t4"}
    assert Instance.from_dict(inst.to_dict()) == inst


def test_progress_reads_the_workers_type():
    inst = Instance.from_dict(document())
    job = inst.jobs[0]
    assert job_rate(inst, job, {"a1": (2, 1)}) == 5
    assert job_rate(inst, job, {"t1": (2, 1)}) == 1.5
    assert job_rate(inst, job, {"a1": (1, 1), "a2": (1, 0)}) == 4
    violations, report = evaluate(inst, schedule([("t1", 2, 1)], [("a1", 2, 1)]))
    assert violations == []
    assert report.jobs[0].remaining_batches == pytest.approx(1000 - 1.5 * 60 - 5 * 60)


def test_mixed_types_in_one_slot_break_rule_3_and_run_at_the_slowest():
    inst = Instance.from_dict(document())
    violations, report = evaluate(inst, schedule([("a1", 1, 1), ("t1", 1, 0)]))
    assert [(v.rule, v.slot) for v in violations] == [(3, 0)]
    assert "one type per slot" in violations[0].message
    assert report.jobs[0].remaining_batches == pytest.approx(1000 - 1.2 * 60)  # t4's spread rate


def test_a_type_the_table_does_not_list_breaks_rule_3():
    doc = document()
    del doc["jobs"][0]["speed"]["by_type"]["t4"]
    inst = Instance.from_dict(doc)
    violations, report = evaluate(inst, schedule([("t1", 2, 1)]))
    assert [(v.rule, v.slot) for v in violations] == [(3, 0)]
    assert "does not list" in violations[0].message
    assert report.jobs[0].remaining_batches == 1000  # no progress there


def test_one_table_for_all_types_and_linear_jobs_still_keep_one_type():
    doc = document()
    doc["jobs"][0]["speed"] = {"local": [3, 5], "spread": [3, 4]}
    inst = Instance.from_dict(doc)
    assert job_rate(inst, inst.jobs[0], {"t1": (2, 1)}) == 5  # the same rates on every type
    assert evaluate(inst, schedule([("t1", 2, 1)]))[0] == []
    assert [v.rule for v in evaluate(inst, schedule([("a1", 1, 1), ("t1", 1, 0)]))[0]] == [3]
    del doc["jobs"][0]["speed"]
    inst = Instance.from_dict(doc)
    assert [v.rule for v in evaluate(inst, schedule([("a1", 1, 1), ("t1", 1, 0)]))[0]] == [3]


def test_untyped_machines_are_a_class_of_their_own():
    doc = document()
    del doc["topology"]["machines"][2]["gpu_type"]
    doc["jobs"][0]["speed"] = {"local": [3, 5], "spread": [3, 4]}
    inst = Instance.from_dict(doc)
    assert inst.topology.gpu_types == ("a100", None)
    assert [v.rule for v in evaluate(inst, schedule([("a1", 1, 1), ("t1", 1, 0)]))[0]] == [3]


def test_untyped_instances_never_see_the_rule():
    doc = document()
    for m in doc["topology"]["machines"]:
        del m["gpu_type"]
    doc["jobs"][0]["speed"] = {"local": [3, 5], "spread": [3, 4]}
    inst = Instance.from_dict(doc)
    assert not inst.topology.typed
    assert "gpu_type" not in str(inst.to_dict())
    assert evaluate(inst, schedule([("a1", 1, 1), ("t1", 1, 0)]))[0] == []


@pytest.mark.parametrize("edit, where, reason", [
    (lambda d: d["jobs"][0]["speed"]["by_type"].update(v100={"local": [1, 2], "spread": [1, 2]}),
     "jobs[0].speed.by_type.v100", "no machine has GPU type 'v100'"),
    (lambda d: d["jobs"][0]["speed"].update(by_type={}), "jobs[0].speed.by_type", "at least one"),
    (lambda d: d["jobs"][0]["speed"].update(local=[1, 2]), "jobs[0].speed.local", "unknown"),
    (lambda d: d["jobs"][0]["speed"]["by_type"]["t4"].update(local=[1]), "jobs[0].speed.by_type.t4.local",
     "needs 2"),
    (lambda d: d["topology"]["machines"][0].update(gpu_type=""), "topology.machines[0].gpu_type",
     "non-empty string"),
    (lambda d: d["topology"]["machines"][0].update(gpu_type=7), "topology.machines[0].gpu_type",
     "non-empty string"),
    (lambda d: d["jobs"][0].update(min_workers=2, max_workers=2,
                                   speed={"by_type": {"t4": {"local": [1], "spread": [1]}}},
                                   worker={"gpu": 3}),
     "jobs[0].speed", "cannot run on any of its GPU types"),
])
def test_malformed_types_are_located_errors(edit, where, reason):
    doc = copy.deepcopy(document())
    edit(doc)
    with pytest.raises(InstanceError) as err:
        Instance.from_dict(doc)
    assert where in str(err.value) and reason in str(err.value), str(err.value)


def test_a_typed_table_on_an_untyped_cluster_is_refused():
    doc = document()
    for m in doc["topology"]["machines"]:
        del m["gpu_type"]
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.speed\.by_type\.a100.*no machine has GPU type"):
        Instance.from_dict(doc)


def test_a_job_whose_min_workers_fit_no_single_type_is_refused():
    """Found by review: its workers must share one type, so the cluster's total room is not
    enough (3 workers: 2 + 2 on A100, 4 on T4 -> fits; 5 fits no type)."""
    doc = document()
    doc["jobs"][0].update(min_workers=3, max_workers=5)
    del doc["jobs"][0]["speed"]
    assert Instance.from_dict(doc).jobs[0].min_workers == 3
    doc["jobs"][0]["min_workers"] = 5
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.min_workers: the machines of one GPU type hold at most 4"):
        Instance.from_dict(doc)
