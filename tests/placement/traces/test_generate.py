"""The instance generator: determinism, cluster specs, argument checks, and that every
instance is strictly valid, round-trips, and has a horizon its first-fit witness meets."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import placement
from placement.traces import generate as gen
from placement.model.cluster_spec import parse_cluster
from placement.model.evaluate import evaluate
from placement.traces.first_fit import first_fit_schedule
from placement.traces.generate import generate, load_profiles
from placement.model.instance import Instance

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "instances" / "bench"
CLUSTERS = ["star:1", "star:3@10,gpu=2", "racks:2x2@10/10,gpu=2", "racks:2x4", "pai:12",
            "star:2,gpu=0", "racks:2x3@25/100,gpu=4,cpu=16,mem=64,local=100"]


def _load_script():
    spec = importlib.util.spec_from_file_location("make_suites", ROOT / "benchmarks" / "make_suites.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_instance(inst: Instance, *, default_horizon: bool, arrival_span: float = 0.5) -> None:
    """Everything a generated instance promises (module docstring of placement.traces.generate)."""
    assert Instance.from_dict(json.loads(json.dumps(inst.to_dict()))) == inst  # strict checks
    profiles = {p.batch_seconds: p for p in load_profiles()}
    cap = [m.capacity for m in inst.topology.machines]
    for job in inst.jobs:
        p = profiles[job.batch_seconds]
        assert job.gradient_mb == p.model_mb
        assert job.worker["gpu"] == p.worker_gpu_slots / 4
        assert job.worker_gbps == pytest.approx(max(0.1, p.inter_node_mb_per_s * 8 / 1000))
        assert job.ps_gbps / job.worker_gbps in (1, 2, 4)
        assert job.restart_seconds == 0 or 10 <= job.restart_seconds <= 60
        assert job.weight == 1
        assert job.arrival <= arrival_span * inst.horizon
        # min_workers (with their PSs) fit on one machine; max_workers on the cluster
        need = {r: job.min_workers * job.worker.get(r, 0) + job.min_ps(job.min_workers) * job.ps.get(r, 0)
                for r in inst.resources}
        assert any(all(need[r] <= c.get(r, 0) for r in need) for c in cap)
        per_machine = [max((w for w in range(1, job.max_workers + 1)
                            if all(w * job.worker.get(r, 0) + job.min_ps(w) * job.ps.get(r, 0)
                                   <= c.get(r, 0) for r in inst.resources)), default=0)
                       for c in cap]
        assert job.max_workers <= sum(per_machine)
    assert [j.arrival for j in inst.jobs] == sorted(j.arrival for j in inst.jobs)
    if default_horizon:
        violations, report = evaluate(inst, first_fit_schedule(inst))
        assert violations == []
        assert report.unfinished == 0
        last = max(o.completion_slot for o in report.jobs)
        assert inst.horizon >= last + 1


# ----- determinism -----------------------------------------------------------------------
def test_same_arguments_give_the_identical_instance():
    kw = dict(jobs=12, cluster="racks:2x4@25/100", seed=7, load=1.3, arrival_span=0.4)
    a, b = generate(**kw), generate(**kw)
    assert a == b
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_different_seeds_differ():
    docs = {json.dumps(generate(jobs=6, seed=s).to_dict()["jobs"]) for s in range(10)}
    assert len(docs) == 10


def test_round_trip_through_a_file(tmp_path):
    inst = generate(jobs=9, cluster="pai:20", seed=3)
    inst.save(tmp_path / "x.json")
    back = Instance.load(tmp_path / "x.json")
    assert back == inst and back.name == "pai20_j9_s3"


# ----- cluster specs ---------------------------------------------------------------------
def test_parse_cluster_shapes_and_options():
    star = parse_cluster("star:3")
    assert [m.id for m in star.machines] == ["m0", "m1", "m2"]
    assert {l.gbps for l in star.links} == {100}
    racks = parse_cluster("racks:2x4@25/100")
    assert len(racks.machines) == 8 and racks.root == "spine"
    assert sorted({l.gbps for l in racks.links}) == [25, 100]
    small = parse_cluster(" star:2@10,gpu=2,mem=64,local=100 ")
    assert small.machines[0].capacity == {"gpu": 2, "cpu": 64, "mem": 64}
    assert small.machines[0].local_gbps == 100 and small.links[0].gbps == 10
    pai = parse_cluster("pai:10")
    assert len(pai.machines) == 10


@pytest.mark.parametrize("spec, message", [
    ("racks:0x4", "number of racks must be a positive integer, got '0'"),
    ("racks:2x0", "machines per rack must be a positive integer"),
    ("foo:3", "unknown kind 'foo'; expected star:N"),
    ("star3", "unknown kind"),
    ("pai:999999", "more than the 1897 machines"),
    ("star:", "number of machines must be a positive integer, got ''"),
    ("star:1.5", "positive integer"),
    ("racks:2", "expected racks:RxM"),
    ("racks:2x4@25", "link speeds are @MACHINE/RACK"),
    ("star:2@fast", "link speed (Gbps) must be a number > 0, got 'fast'"),
    ("star:2@0", "must be a number > 0"),
    ("star:2,gpu=-1", "gpu= must be a number >= 0"),
    ("star:2,cpu=0", "cpu= must be a number > 0"),
    ("star:2,disk=1", "unknown option 'disk=1'"),
    ("star:2,gpu=2,gpu=4", "option 'gpu' is given twice"),
    ("pai:3,gpu=2", "pai:N takes no link speeds or options"),
    ("pai:3@10", "pai:N takes no"),
    (3, "must be a string"),
])
def test_bad_cluster_specs_are_named_clearly(spec, message):
    with pytest.raises(ValueError) as err:
        parse_cluster(spec)
    assert message in str(err.value)
    with pytest.raises(ValueError):
        generate(jobs=2, cluster=spec)


@pytest.mark.parametrize("kwargs, message", [
    (dict(jobs=0), "jobs must be an integer >= 1"),
    (dict(jobs=2.0), "jobs must be an integer"),
    (dict(jobs=True), "jobs must be an integer"),
    (dict(jobs=2, horizon=0), "horizon must be an integer >= 1"),
    (dict(jobs=2, seed=-1), "seed must be an integer >= 0"),
    (dict(jobs=2, load=0), "load must be a finite number > 0"),
    (dict(jobs=2, slot_seconds=math.nan), "slot_seconds must be a finite number > 0"),
    (dict(jobs=2, arrival_span=0), "arrival_span must be a finite number > 0 and <= 1"),
    (dict(jobs=2, arrival_span=1.5), "arrival_span"),
    (dict(jobs=2, max_workers=0), "max_workers must be an integer >= 1"),
    (dict(jobs=2, max_run_slots=0.5), "max_run_slots must be a finite number >= 1"),
    (dict(jobs=2, name=""), "name must be a non-empty string"),
    (dict(jobs=2, restarts=1), "restarts must be True or False"),
    (dict(jobs=2, cluster="star:2,cpu=1"), "no model's worker fits"),
])
def test_bad_arguments_raise_value_error_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        generate(**kwargs)


# ----- every instance keeps the promises -------------------------------------------------
@pytest.mark.parametrize("cluster", CLUSTERS)
def test_instances_over_many_seeds(cluster):
    for seed in range(12):
        inst = generate(jobs=1 + seed % 9, cluster=cluster, seed=seed, load=0.5 + seed / 4,
                        max_run_slots=1 + seed % 6)
        _check_instance(inst, default_horizon=True)


@settings(max_examples=40, deadline=None)
@given(jobs=st.integers(1, 25), cluster=st.sampled_from(CLUSTERS), seed=st.integers(0, 2**32),
       load=st.floats(0.1, 5), span=st.floats(0.05, 1), slot=st.sampled_from([30, 60, 300, 900]),
       max_workers=st.integers(1, 20), run=st.floats(1, 10))
def test_generated_instances_property(jobs, cluster, seed, load, span, slot, max_workers, run):
    inst = generate(jobs=jobs, cluster=cluster, seed=seed, load=load, arrival_span=span,
                    slot_seconds=slot, max_workers=max_workers, max_run_slots=run)
    assert len(inst.jobs) == jobs and inst.slot_seconds == slot
    assert all(j.max_workers <= max_workers for j in inst.jobs)
    _check_instance(inst, default_horizon=True, arrival_span=span)


def test_explicit_horizon_is_kept_and_bounds_arrivals():
    inst = generate(jobs=30, cluster="star:2", horizon=10, arrival_span=0.3, seed=1, load=0.01)
    assert inst.horizon == 10
    assert max(j.arrival for j in inst.jobs) <= 2  # within 0.3 x 10 slots
    _check_instance(inst, default_horizon=False, arrival_span=0.3)


def test_load_compresses_arrivals():
    calm = generate(jobs=20, seed=4, load=0.5)
    busy = generate(jobs=20, seed=4, load=2.0)
    assert [j.id for j in calm.jobs] == [j.id for j in busy.jobs]
    assert all(b.arrival <= c.arrival for b, c in zip(busy.jobs, calm.jobs))
    assert max(j.arrival for j in busy.jobs) < max(j.arrival for j in calm.jobs)


def test_run_time_at_max_workers_is_within_the_stated_range():
    inst = generate(jobs=40, cluster="racks:2x4", seed=2, max_run_slots=5)
    local = inst.best_local_gbps
    slots = [j.work_batches * j.batch_time(local) / (j.max_workers * inst.slot_seconds)
             for j in inst.jobs]
    assert all(1 <= s <= 5 + 1e-6 for s in slots)
    assert max(slots) > 2 and min(slots) < 2  # spread over the range, not one value


def test_worker_sizes_follow_the_caps():
    inst = generate(jobs=60, cluster="racks:2x4", seed=0)
    assert {j.max_workers for j in inst.jobs} == {1, 2, 4, 8, 16}
    assert any(j.min_workers > 1 for j in inst.jobs)
    assert all(j.min_workers in (1, math.ceil(j.max_workers / 2)) for j in inst.jobs)
    tiny = generate(jobs=30, cluster="star:1,gpu=2", seed=0)  # the cluster holds 2 workers
    assert {j.max_workers for j in tiny.jobs if j.worker["gpu"]} <= {1, 2}


def test_cpu_only_cluster_gets_only_cpu_models():
    inst = generate(jobs=20, cluster="star:2,gpu=0", seed=5)
    assert all(j.worker["gpu"] == 0 for j in inst.jobs)
    cpu_models = {p.batch_seconds for p in load_profiles() if p.worker_gpu_slots == 0}
    assert {j.batch_seconds for j in inst.jobs} == cpu_models


def test_restarts_off_changes_nothing_else():
    with_r, without = generate(jobs=15, seed=8), generate(jobs=15, seed=8, restarts=False)
    assert all(10 <= j.restart_seconds <= 60 for j in with_r.jobs)
    assert all(j.restart_seconds == 0 for j in without.jobs)
    strip = lambda inst: [{**j.to_dict(), "restart_seconds": 0} for j in inst.jobs]  # noqa: E731
    assert strip(with_r) == strip(without)


def test_default_name_is_file_friendly():
    assert gen.default_name("racks:2x4@25/100,gpu=4", 20, 3) == "racks2x4-25-100-gpu4_j20_s3"
    assert generate(jobs=1, name="mine").name == "mine"


# ----- the profile table -----------------------------------------------------------------
def test_profiles_come_from_the_package_copy(monkeypatch, tmp_path):
    packaged = Path(placement.__file__).parent / "data" / gen.PROFILE_FILE
    assert packaged.is_file()
    rows = packaged.read_text().splitlines()
    profiles = load_profiles()
    assert [p.model for p in profiles] == [r.split(",")[0] for r in rows[1:]]
    assert len(profiles) == 8 and profiles[1].model == "vgg-16" and profiles[1].model_mb == 553.4
    monkeypatch.chdir(tmp_path)  # nothing relative to the working directory is read
    assert generate(jobs=3, seed=1) == generate(jobs=3, seed=1)


# ----- the benchmark suites --------------------------------------------------------------
def test_bench_files_match_their_manifest():
    manifest = json.loads((BENCH / "manifest.json").read_text())
    readme = (BENCH / "README.md").read_text()
    small, medium = manifest["suites"]["small"], manifest["suites"]["medium"]
    assert len(small) >= 36 and len(medium) >= 12
    for suite, files in manifest["suites"].items():
        for kw in files:
            path = BENCH / suite / f"{kw['name']}.json"
            inst = Instance.load(path)
            assert inst == generate(**kw), path
            assert f"`{suite}/{kw['name']}.json`" in readme
            if suite == "small":
                assert 2 <= len(inst.jobs) <= 5 and 2 <= len(inst.topology.machines) <= 4
                assert all(j.max_workers <= 4 for j in inst.jobs)
                assert all(j.restart_seconds == 0 for j in inst.jobs)
            else:
                assert len(inst.jobs) >= 15 and len(inst.topology.machines) >= 8


def test_make_suites_writes_checks_and_detects_changes(tmp_path, capsys):
    script = _load_script()
    argv = ["--out", str(tmp_path), "--small-jobs", "2", "--small-replicates", "1",
            "--medium-clusters", "racks:2x2", "--medium-jobs", "15", "--medium-replicates", "1"]
    assert script.main(argv) == 0
    names = sorted(p.name for p in (tmp_path / "small").glob("*.json"))
    assert len(names) == 3 and len(list((tmp_path / "medium").glob("*.json"))) == 1
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["command"].endswith("--medium-replicates 1")
    assert [kw["seed"] for kw in manifest["suites"]["small"]] == [1, 2, 3]
    assert script.main(["--out", str(tmp_path), "--check"]) == 0
    victim = tmp_path / "small" / names[0]
    doc = json.loads(victim.read_text())
    doc["horizon"] += 1
    victim.write_text(json.dumps(doc))
    assert script.main(["--out", str(tmp_path), "--check"]) == 1
    assert "differs" in capsys.readouterr().out
