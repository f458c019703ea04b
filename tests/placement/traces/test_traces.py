"""Trace readers: the Philly derivation (deterministic, documented rules, durations kept),
the CSV job list (exact round trip, errors naming row and column) and instance_from_jobs.

``tests/data/philly_head.csv`` is the header and first 300 rows of the Philly per-job
extract (msr-fiddle/philly-traces, CC-BY-4.0, extract by petuum/adaptdl), so these tests
run without the shared data; the shipped samples are re-derived only when it is there.
"""
from __future__ import annotations

import csv
import importlib.util
import logging
import math
import os
from datetime import datetime
from pathlib import Path

import pytest

from placement.traces import generate as gen
from placement.model.clusters import racks
from placement.model.evaluate import evaluate
from placement.traces.first_fit import first_fit_schedule
from placement.model.strict_json import FileFormatError, InstanceError
from placement.traces.generate import generate
from placement.model.instance import Job
from placement.model.schedule import Allocation, Schedule
from placement.traces import instance_from_jobs, read_joblist, read_philly, write_joblist
from placement.traces import philly
from placement.traces.joblist import COLUMNS

ROOT = Path(__file__).resolve().parents[3]
HEAD = ROOT / "tests" / "data" / "philly_head.csv"
SAMPLES = ROOT / "instances" / "traces"
HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _rows() -> dict[int, dict]:
    """Line number -> row of the head file (the job id is ``p<line>``)."""
    with open(HEAD, newline="") as f:
        reader = csv.DictReader(f)
        return {reader.line_num: r for r in reader}


def _profile(job: Job) -> gen.Profile:
    (p,) = [p for p in gen.load_profiles() if p.batch_seconds == job.batch_seconds]
    return p


def _trace(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "".join(r + "\n" for r in rows))
    return path


# ----- the Philly derivation -------------------------------------------------------------
def test_head_jobs_follow_the_documented_rules():
    rows = _rows()
    jobs = read_philly(HEAD, seed=5)
    assert len(jobs) == len(rows) == 300
    order = sorted(rows, key=lambda line: (rows[line]["timestamp"], line))
    assert [j.id for j in jobs] == [f"p{line}" for line in order]  # arrival order, traceable
    origin = datetime.fromisoformat(rows[order[0]]["timestamp"])
    groups = philly.gpu_profiles()
    assert [[p.model for p in g] for g in groups] == [
        ["resnext-110", "wlm"], ["seq2seq", "inception-bn"], ["resnet-50", "vgg-16"]]
    for job in jobs:
        row = rows[int(job.id[1:])]
        duration, gpus = float(row["duration"]), int(row["num_gpus"])
        offset = (datetime.fromisoformat(row["timestamp"]) - origin).total_seconds()
        assert job.arrival == math.floor(offset / 300)
        p = _profile(job)
        bucket = sum(duration * gpus >= edge for edge in philly.GPU_TIME_EDGES)
        assert p in groups[bucket]
        worker, ps = p.demands()
        assert (job.worker, job.ps, job.gradient_mb) == (worker, ps, p.model_mb)
        assert job.worker["gpu"] == 1 and job.worker_gbps == p.worker_gbps()
        assert job.ps_gbps / job.worker_gbps in (1, 2, 4)
        assert 10 <= job.restart_seconds <= 60 and job.weight == 1
        assert (job.min_workers, job.max_workers) == (1, gpus)
        assert job.work_batches == math.ceil(duration * gpus / philly.reference_batch_time(p, gpus))
    # every GPU-time bucket occurs in the head, so every group of models is exercised
    assert {next(i for i, g in enumerate(groups) if _profile(j) in g) for j in jobs} == {0, 1, 2}


def test_derivation_is_deterministic_and_seeded():
    a = read_philly(HEAD, sample=40, seed=3)
    assert a == read_philly(HEAD, sample=40, seed=3)
    others = [read_philly(HEAD, sample=40, seed=s) for s in range(3, 9)]
    assert all(x != y for i, x in enumerate(others) for y in others[i + 1:])
    # without sampling, seeds change the drawn fields, never which rows or their arrivals
    x, y = read_philly(HEAD, seed=1), read_philly(HEAD, seed=2)
    assert [(j.id, j.arrival, j.max_workers) for j in x] == [(j.id, j.arrival, j.max_workers) for j in y]
    assert x != y


def test_sample_is_a_contiguous_window_of_submissions():
    rows = _rows()
    order = sorted(rows, key=lambda line: (rows[line]["timestamp"], line))
    for seed in range(5):
        jobs = read_philly(HEAD, sample=25, seed=seed)
        first = order.index(int(jobs[0].id[1:]))
        assert [j.id for j in jobs] == [f"p{line}" for line in order[first:first + 25]]
        assert jobs[0].arrival == 0


def test_start_time_scale_and_max_gpus():
    rows = _rows()
    start = "2017-10-06 23:00:00"
    jobs = read_philly(HEAD, sample=30, start=start, time_scale=0.25, slot_seconds=60, max_gpus=2)
    later = sorted((r["timestamp"], line) for line, r in rows.items() if r["timestamp"] >= start)
    assert [j.id for j in jobs] == [f"p{line}" for _, line in later[:30]]
    origin = datetime.fromisoformat(later[0][0])
    for j in jobs:
        row = rows[int(j.id[1:])]
        offset = (datetime.fromisoformat(row["timestamp"]) - origin).total_seconds()
        assert j.arrival == math.floor(0.25 * offset / 60)
        assert j.max_workers == min(int(row["num_gpus"]), 2)
        # the work is the job's, not the cap's: it stays duration x GPUs
        p = _profile(j)
        gpus = int(row["num_gpus"])
        assert j.work_batches == math.ceil(float(row["duration"]) * gpus
                                           / philly.reference_batch_time(p, gpus))
    assert max(int(rows[int(j.id[1:])]["num_gpus"]) for j in jobs) > 2  # the cap did bite


def test_every_head_job_passes_instance_checks_on_racks_4x8():
    jobs = read_philly(HEAD, seed=0)
    inst = instance_from_jobs(jobs, racks(4, 8), slot_seconds=300, name="head")
    assert inst.jobs == tuple(jobs)  # 8-GPU machines x 32: nothing to cap
    violations, report = evaluate(inst, first_fit_schedule(inst))
    assert violations == [] and report.unfinished == 0
    assert inst.horizon == 1 + max(o.completion_slot for o in report.jobs)


@pytest.mark.parametrize("gpus, duration", [(8, 70.0), (8, 700.0), (8, 5000.0), (8, 86400.0),
                                            (16, 30.0), (16, 7000.0), (16, 90000.0)])
def test_num_gpus_workers_take_the_logged_duration(tmp_path, gpus, duration):
    """With its GPUs as workers at the reference placement (one machine for 8 GPUs, two
    machines for 16), the job completes within [d, d + restart + one slot + one batch]:
    the restart is lost in the first slot, completion is counted at slot ends, and
    work_batches is rounded up to a whole batch. Durations cover all three GPU-time
    buckets; six seeds draw both models of a bucket. Wide links so the spread job fits."""
    cluster = racks(2, 2, machine_gbps=400, rack_gbps=800)
    for seed in range(6):
        (job,) = read_philly(_trace(tmp_path, f"2017-10-01 00:00:00,{duration},{gpus},0,c"),
                             seed=seed)
        assert job.max_workers == gpus
        slots = math.ceil((duration + job.restart_seconds) / 300) + 1
        inst = instance_from_jobs([job], cluster, slot_seconds=300, horizon=slots, name="one")
        machines = [m.id for m in cluster.machines][:gpus // 8]
        ps = job.min_ps(gpus)
        share = [ps // len(machines) + (i < ps % len(machines)) for i in range(len(machines))]
        run = [Allocation(job.id, m, 8, s) for m, s in zip(machines, share)]
        _, report = evaluate(inst, Schedule.from_allocations({t: run for t in range(slots)}))
        last = report.jobs[0].completion_slot
        violations, report = evaluate(inst, Schedule.from_allocations(
            {t: run for t in range(last + 1)}))
        assert violations == [] and report.jobs[0].completion_slot == last
        done = (last + 1) * 300
        theta = philly.reference_batch_time(_profile(job), gpus)
        assert duration <= done <= duration + job.restart_seconds + 300 + theta


def test_rows_without_work_are_dropped_and_counted(tmp_path, caplog):
    path = _trace(tmp_path, "2017-10-01 00:00:00,60,1,60,c", "2017-10-01 00:01:00,0,1,0,c",
                  "2017-10-01 00:02:00,60,0,0,c", "2017-10-01 00:03:00,-5,2,-10,c",
                  "2017-10-01 00:20:00,100,2,200,c")
    with caplog.at_level(logging.WARNING, logger="placement.traces.philly"):
        jobs = read_philly(path)
    assert [(j.id, j.arrival) for j in jobs] == [("p2", 0), ("p6", 4)]
    assert "dropped 3 of 5 rows" in caplog.text


@pytest.mark.parametrize("row, where", [
    ("yesterday,60,1,60,c", "line 2:timestamp"),
    ("2017-10-01 00:00:00,abc,1,60,c", "line 2:duration"),
    ("2017-10-01 00:00:00,60,,60,c", "line 2:num_gpus"),
    ("2017-10-01 00:00:00,nan,1,60,c", "line 2"),
    ("2017-10-01 00:00:00,60,1.5,60,c", "line 2"),
])
def test_malformed_philly_rows_name_the_line(tmp_path, row, where):
    with pytest.raises(FileFormatError, match=where):
        read_philly(_trace(tmp_path, row))


@pytest.mark.parametrize("kwargs, message", [
    (dict(sample=0), "sample must be an integer >= 1"),
    (dict(seed=-1), "seed must be an integer >= 0"),
    (dict(slot_seconds=0), "slot_seconds must be a finite number > 0"),
    (dict(time_scale=math.nan), "time_scale must be a finite number > 0"),
    (dict(max_gpus=0), "max_gpus must be an integer >= 1"),
    (dict(start="soon"), "start must be a time like"),
    (dict(sample=301), "sample=301 is more than the 300 usable rows"),
    (dict(start="2030-01-01"), "no usable rows at or after 2030-01-01"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        read_philly(HEAD, **kwargs)


def test_default_path_env_var_and_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv(philly.ENV_VAR, str(HEAD))
    assert read_philly(sample=10, seed=1) == read_philly(HEAD, sample=10, seed=1)
    monkeypatch.setenv(philly.ENV_VAR, str(tmp_path / "nope.csv"))
    with pytest.raises(FileNotFoundError, match="PLACEMENT_PHILLY="):
        read_philly()
    monkeypatch.delenv(philly.ENV_VAR)
    monkeypatch.setattr(philly, "_SHARED", tmp_path / "shared" / "philly.csv")
    with pytest.raises(FileNotFoundError, match=r"not found at .*shared/philly.csv; pass path=, "
                                                r"set PLACEMENT_PHILLY"):
        read_philly()


# ----- the job list ----------------------------------------------------------------------
def test_joblist_round_trip_is_exact(tmp_path):
    inst = generate(jobs=15, cluster="racks:2x4,gpu=0", seed=4)  # CPU-only models: gpu 0
    for jobs in (read_philly(HEAD, seed=2), list(inst.jobs)):
        path = tmp_path / "jobs.csv"
        write_joblist(jobs, path)
        back = read_joblist(path)
        assert back == jobs
        assert [j.to_dict() for j in back] == [j.to_dict() for j in jobs]  # types kept too
        assert [type(getattr(j, f)) for j in back for f in ("work_batches", "gradient_mb")] == \
               [type(getattr(j, f)) for j in jobs for f in ("work_batches", "gradient_mb")]
        text = path.read_text()
        assert text.splitlines()[0] == ",".join(COLUMNS)
        write_joblist(back, path)
        assert path.read_text() == text


def test_joblist_defaults_any_column_order_and_blank_lines(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("max_workers,id,arrival,work_batches,batch_seconds,worker_gpu,worker_cpu,"
                    "worker_mem,ps_cpu,ps_mem,worker_gbps,ps_gbps\n"
                    "4, a ,0,1000,0.5,1,2,8,2,4,1.5,3\n\n"
                    "2,b,3,2.5e3,0.25,0,4,8,2,4,1,1\n")
    a, b = read_joblist(path)
    assert a == Job(id="a", arrival=0, work_batches=1000, batch_seconds=0.5,
                    worker={"gpu": 1, "cpu": 2, "mem": 8}, ps={"cpu": 2, "mem": 4},
                    max_workers=4, worker_gbps=1.5, ps_gbps=3)
    assert (a.gradient_mb, a.min_workers, a.weight, a.restart_seconds) == (0, 1, 1, 0)
    assert b.work_batches == 2500.0 and b.arrival == 3


def _bad(tmp_path: Path, column: str, value: str) -> Path:
    job = read_philly(HEAD, sample=3, seed=1)
    path = tmp_path / "jobs.csv"
    write_joblist(job, path)
    lines = path.read_text().splitlines()
    cells = lines[2].split(",")
    cells[COLUMNS.index(column)] = value
    lines[2] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("column, value, message", [
    ("worker_gpu", "-1", "line 3:worker_gpu: must be >= 0, got -1"),
    ("worker_gbps", "nan", "line 3:worker_gbps: must be finite, got nan"),
    ("batch_seconds", "inf", "line 3:batch_seconds: must be finite"),
    ("work_batches", "0", "line 3:work_batches: must be > 0, got 0"),
    ("ps_mem", "", "line 3:ps_mem: empty cell"),
    ("ps_cpu", "two", "line 3:ps_cpu: must be a number, got 'two'"),
    ("ps_cpu", "1_000", "line 3:ps_cpu: must be a number"),
    ("arrival", "3.0", "line 3:arrival: must be an integer, got 3.0"),
    ("min_workers", "9", "line 3:min_workers: min_workers 9 > max_workers"),
    ("id", "", "line 3:id: must be a non-empty string"),
])
def test_bad_joblist_cells_name_row_and_column(tmp_path, column, value, message):
    path = _bad(tmp_path, column, value)
    with pytest.raises(InstanceError, match=f"^{path}:{message}"):
        read_joblist(path)


def test_duplicate_job_ids_name_both_rows(tmp_path):
    first = read_philly(HEAD, sample=3, seed=1)[0].id
    path = _bad(tmp_path, "id", first)
    with pytest.raises(InstanceError, match=rf"jobs.csv:line 3:id: duplicate job id '{first}' "
                                            r"\(first on line 2\)"):
        read_joblist(path)


@pytest.mark.parametrize("header, message", [
    (lambda h: h.replace("worker_gpu", "worker_gpus"), "line 1:worker_gpus: unknown column"),
    (lambda h: h.replace(",ps_mem", ""), "line 1:ps_mem: missing column"),
    (lambda h: h.replace("weight", "ps_cpu"), "line 1:ps_cpu: duplicate column"),
])
def test_bad_joblist_headers(tmp_path, header, message):
    path = tmp_path / "jobs.csv"
    write_joblist(read_philly(HEAD, sample=2, seed=1), path)
    head, *body = path.read_text().splitlines()
    path.write_text("\n".join([header(head), *body]) + "\n")
    with pytest.raises(InstanceError, match=f"^{path}:{message}"):
        read_joblist(path)


def test_joblist_row_shape_and_file_errors(tmp_path):
    path = tmp_path / "jobs.csv"
    write_joblist(read_philly(HEAD, sample=2, seed=1), path)
    path.write_text(path.read_text() + "x,1,2\n")
    with pytest.raises(InstanceError, match=r"jobs.csv:line 4: 3 cells, but the header has 16"):
        read_joblist(path)
    with pytest.raises(InstanceError, match="no such file"):
        read_joblist(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InstanceError, match="empty file; expected the header id,arrival"):
        read_joblist(tmp_path / "empty.csv")


def test_write_refuses_demands_it_has_no_column_for(tmp_path):
    job = read_philly(HEAD, sample=1, seed=1)[0]
    odd = Job(**{**job.__dict__, "ps": {**job.ps, "gpu": 1}})
    with pytest.raises(ValueError, match="no column for its ps demand {'gpu': 1}"):
        write_joblist([odd], tmp_path / "x.csv")


# ----- instance_from_jobs ----------------------------------------------------------------
def test_workers_are_capped_to_what_the_cluster_holds(tmp_path, caplog):
    path = _trace(tmp_path, "2017-10-01 00:00:00,600,32,0,c", "2017-10-01 00:05:00,600,2,0,c")
    jobs = read_philly(path, seed=1)
    cluster = racks(1, 2)  # 16 GPUs, 64 cores each machine
    with caplog.at_level(logging.INFO, logger="placement.traces"):
        inst = instance_from_jobs(jobs, cluster, slot_seconds=300, name="small")
    assert "lowered max_workers of 1 of 2 jobs" in caplog.text
    wide = inst.jobs[0]
    capacity = cluster.machines[0].capacity
    per_machine = max(w for w in range(1, 33) if all(
        w * wide.worker.get(r, 0) + wide.min_ps(w) * wide.ps.get(r, 0) <= capacity[r]
        for r in capacity))
    assert wide.max_workers == 2 * per_machine < 32
    assert inst.jobs[1] == jobs[1]
    kept = instance_from_jobs(jobs, cluster, slot_seconds=300, name="x", cap_workers=False)
    assert kept.jobs[0].max_workers == 32


def test_default_horizon_needs_min_workers_on_one_machine():
    job = read_philly(HEAD, sample=1, seed=1)[0]
    wide = Job(**{**job.__dict__, "min_workers": 12, "max_workers": 12})
    with pytest.raises(ValueError, match="fit on no single machine.*pass horizon="):
        instance_from_jobs([wide], racks(2, 2), slot_seconds=300, name="x")
    assert instance_from_jobs([wide], racks(2, 2), slot_seconds=300, name="x", horizon=50).horizon == 50


# ----- shipped samples -------------------------------------------------------------------
def test_shipped_samples_read_and_fit_racks_4x8():
    sizes = {}
    for path in sorted(SAMPLES.glob("*.csv")):
        jobs = read_joblist(path)
        sizes[path.stem] = len(jobs)
        instance_from_jobs(jobs, racks(4, 8), slot_seconds=300, horizon=20000, name=path.stem)
        assert f"`{path.name}`" in (SAMPLES / "README.md").read_text()
    assert sum(n >= 200 for n in sizes.values()) >= 2 and min(sizes.values()) <= 30


@pytest.mark.skipif(not philly._SHARED.is_file() and philly.ENV_VAR not in os.environ,
                    reason="the full Philly trace is not here")
def test_shipped_samples_are_what_make_traces_makes():
    spec = importlib.util.spec_from_file_location("make_traces", ROOT / "benchmarks" / "make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0
