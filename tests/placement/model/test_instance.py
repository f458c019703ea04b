"""Instance loading: every MODEL.md section 1 check names the JSON path and the reason."""
import json

import pytest

from placement.model.instance import Instance, InstanceError, Job

from ..conftest import write


def test_spec_example_loads_and_round_trips(tiny_doc, tmp_path):
    inst = Instance.from_dict(tiny_doc)
    assert inst.to_dict() == tiny_doc
    path = tmp_path / "tiny.json"
    inst.save(path)
    assert Instance.load(path) == inst
    assert json.loads(path.read_text()) == tiny_doc


def test_defaults_and_name_from_file_stem(tiny_doc, tmp_path):
    del tiny_doc["name"]
    job = tiny_doc["jobs"][0]
    for key in ("min_workers", "weight", "restart_seconds", "gradient_mb"):
        del job[key]
    inst = Instance.load(write(tmp_path, "my-cluster.json", tiny_doc))
    assert inst.name == "my-cluster"
    j = inst.jobs[0]
    assert (j.min_workers, j.weight, j.restart_seconds, j.gradient_mb) == (1, 1, 0, 0)


def error_of(doc) -> str:
    with pytest.raises(InstanceError) as info:
        Instance.from_dict(doc)
    return str(info.value)


@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.update(horizn=3), "horizn: unknown key"),
    (lambda d: d.pop("horizon"), "horizon: missing required key"),
    (lambda d: d["jobs"][0].update(colour="red"), "jobs[0].colour: unknown key"),
    (lambda d: d["jobs"][0].pop("ps_gbps"), "jobs[0].ps_gbps: missing required key"),
    (lambda d: d["topology"]["machines"][1].pop("local_gbps"),
     "topology.machines[1].local_gbps: missing required key"),
    (lambda d: d.update(horizon=4.0), "horizon: must be an integer, got 4.0"),
    (lambda d: d.update(horizon=True), "horizon: must be an integer, got true"),
    (lambda d: d.update(horizon=0), "horizon: must be >= 1"),
    (lambda d: d.update(slot_seconds=0), "slot_seconds: must be > 0"),
    (lambda d: d.update(slot_seconds="60"), "slot_seconds: must be a number, got '60'"),
    (lambda d: d["jobs"][0]["worker"].update(gpu=float("nan")), "jobs[0].worker.gpu: must be finite"),
    (lambda d: d["jobs"][0]["worker"].update(gpu=float("inf")), "jobs[0].worker.gpu: must be finite"),
    (lambda d: d["jobs"][0]["worker"].update(gpu=-1), "jobs[0].worker.gpu: must be >= 0"),
    (lambda d: d["jobs"][0].update(work_batches=0), "jobs[0].work_batches: must be > 0"),
    (lambda d: d["jobs"][0].update(weight=0), "jobs[0].weight: must be > 0"),
    (lambda d: d["jobs"][0].update(restart_seconds=-1), "jobs[0].restart_seconds: must be >= 0"),
    (lambda d: d["jobs"][0].update(arrival=4), "jobs[0].arrival: arrival slot 4 is not inside"),
    (lambda d: d["jobs"][0].update(arrival=-1), "jobs[0].arrival: must be >= 0"),
    (lambda d: d["jobs"][0].update(min_workers=9), "jobs[0].min_workers: min_workers 9 > max_workers 8"),
    (lambda d: d["jobs"][0].update(max_workers=0), "jobs[0].max_workers: must be >= 1"),
    (lambda d: d["jobs"].append(dict(d["jobs"][0])), "jobs[1].id: duplicate job id 'j0'"),
    (lambda d: d["jobs"][0].update(id=""), "jobs[0].id: must be a non-empty string"),
    (lambda d: d["jobs"][0]["worker"].update(tpu=1), "jobs[0].worker.tpu: resource 'tpu' is not declared"),
    (lambda d: d["topology"]["machines"][0]["capacity"].update(ssd=1),
     "topology.machines[0].capacity.ssd: resource 'ssd' is not declared"),
    (lambda d: d["resources"].append("gpu"), "resources[3]: duplicate resource 'gpu'"),
    (lambda d: d["jobs"][0]["worker"].update(gpu=5),
     "jobs[0].worker: one worker (demand {'gpu': 5, 'cpu': 4, 'mem': 16}) exceeds the capacity of every machine"),
    (lambda d: d["jobs"][0]["ps"].update(mem=300), "jobs[0].ps: one ps"),
    (lambda d: d["jobs"][0].update(min_workers=9, max_workers=9, worker={"gpu": 1, "cpu": 8}),
     "jobs[0].min_workers: the whole cluster holds at most 8 workers"),
    (lambda d: d.update(jobs={}), "jobs: must be a JSON array, got an object"),
    (lambda d: d["jobs"].__setitem__(0, 7), "jobs[0]: must be a JSON object, got an integer"),
])
def test_bad_instances_name_path_and_reason(tiny_doc, edit, expected):
    edit(tiny_doc)
    assert expected in error_of(tiny_doc)


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t["links"].append({"a": "m0", "b": "m1", "gbps": 1}),
     "topology.links: the links form a cycle"),
    (lambda t: t["links"].append({"a": "m1", "b": "tor0", "gbps": 1}),
     "topology.links[3]: a second link between 'm1' and 'tor0'"),
    (lambda t: t["links"].append({"a": "m0", "b": "m0", "gbps": 1}),
     "topology.links[3]: a link from 'm0' to itself is a cycle"),
    (lambda t: t["links"].pop(1), "topology.machines[1]: node 'm1' is not connected to the root 'spine'"),
    (lambda t: t["switches"].append({"id": "lonely"}), "topology.switches[2]: node 'lonely' is not connected"),
    (lambda t: t["links"][0].update(b="tor9"), "topology.links[0].b: unknown node 'tor9'"),
    (lambda t: t["switches"].append({"id": "m0"}), "topology.switches[2].id: duplicate id 'm0'"),
    (lambda t: t.update(root="m0"), "topology.root: must name a switch, got 'm0'"),
    (lambda t: t.pop("root"), "topology.root: missing required key"),
    (lambda t: t["links"][0].update(gbps=0), "topology.links[0].gbps: must be > 0"),
    (lambda t: t.update(machines=[]), "topology.machines: must list at least one machine"),
])
def test_bad_topologies(tiny_doc, edit, expected):
    edit(tiny_doc["topology"])
    assert expected in error_of(tiny_doc)


def test_single_machine_cluster_root_optional(tiny_doc):
    topo = tiny_doc["topology"]
    topo.update(machines=topo["machines"][:1], switches=[], links=[])
    topo.pop("root")
    assert Instance.from_dict(tiny_doc).topology.root_id == "m0"
    topo["root"] = "m0"
    assert Instance.from_dict(tiny_doc).topology.root_id == "m0"
    topo["root"] = "mX"
    assert "topology.root: must name the only machine 'm0'" in error_of(tiny_doc)


def test_two_machines_without_switch_rejected(tiny_doc):
    topo = tiny_doc["topology"]
    topo.update(switches=[], links=[{"a": "m0", "b": "m1", "gbps": 1}], root="m0")
    assert "a cluster of several machines needs switches" in error_of(tiny_doc)


@pytest.mark.parametrize("text, expected", [
    ('{"name": "x", ', "not valid JSON: Expecting property name enclosed in double quotes at line 1"),
    ('{"horizon": 1, "horizon": 2}', "the key 'horizon' appears twice"),
    ("[1, 2]", "must be a JSON object, got an array"),
])
def test_malformed_files(tmp_path, text, expected):
    with pytest.raises(InstanceError) as info:
        Instance.load(write(tmp_path, "x.json", text))
    assert expected in str(info.value)


@pytest.mark.parametrize("kappa_gbps, workers, expected", [
    ((5, 10), 4, 2), ((5, 10), 3, 2), ((5, 10), 1, 1), ((0.3, 0.1), 3, 9),
    ((0.1, 0.3), 3, 1), ((1, 1), 7, 7), ((2, 3), 0, 0), ((0.7, 0.1), 10, 70),
])
def test_min_ps_is_exact_ceiling(kappa_gbps, workers, expected):
    wg, pg = kappa_gbps
    job = Job("j", 0, 1, 1, {}, {}, 100, wg, pg)
    assert job.min_ps(workers) == expected
    if workers:
        s = job.min_ps(workers)
        assert s * pg >= workers * wg - 1e-9 and (s == 1 or (s - 1) * pg < workers * wg - 1e-9)


def test_shape_error_names_the_broken_rule():
    job = Job(id="j", arrival=0, work_batches=10, batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1},
              max_workers=4, min_workers=2, worker_gbps=2, ps_gbps=3)
    assert job.shape_error(3, 2) is None                      # 3 x 2 Gbps needs 2 PSs of 3 Gbps
    assert "outside min_workers..max_workers = 2..4" in job.shape_error(1, 1)
    assert "outside" in job.shape_error(5, 4)
    assert job.shape_error(3, 1) == "1 PS for 3 workers, needs at least 2"
