"""Measured speed tables (MODEL.md 8, docs/model.md 'Measured speed'): loading with
located errors, progress and the unfinished charge read from the table, linear jobs
unchanged, and every model's LP value still a lower bound."""
from __future__ import annotations

import copy
import json
import random

import pytest

from placement.cli import main
from placement.model.clusters import RESOURCES, star
from placement.model.evaluate import score, validate
from placement.offline.ilp import solve_ilp
from placement.formulation import formulate_per_machine, formulate_aggregated, formulate_configuration
from placement.model.instance import Instance, InstanceError, Job
from placement.model.progress import job_rate, slot_batches
from placement.model.schedule import Allocation, Schedule, Slot
from placement.offline.solve import solve
from placement.model.speed import SpeedTable
from solvers.lp import solve_lp

from ..conftest import bruteforce


BF = bruteforce()

TABLE = {"local": [10.0, 18.0, 24.0], "spread": {"2": [8.0, 14.0, 18.0], "3": [7.0, 12.0, 15.0]}}


def document(speed=TABLE) -> dict:
    job = {"id": "j", "arrival": 0, "work_batches": 500, "batch_seconds": 0.1, "worker": {"gpu": 1},
           "ps": {"cpu": 1}, "min_workers": 1, "max_workers": 3, "worker_gbps": 1, "ps_gbps": 3}
    if speed is not None:
        job["speed"] = speed
    machines = [{"id": f"m{k}", "capacity": {"gpu": 3, "cpu": 3, "mem": 8}, "local_gbps": 50} for k in range(3)]
    return {"slot_seconds": 10, "horizon": 4, "resources": list(RESOURCES),
            "topology": {"machines": machines, "switches": [{"id": "sw"}],
                         "links": [{"a": f"m{k}", "b": "sw", "gbps": 100} for k in range(3)], "root": "sw"},
            "jobs": [job]}


def inst(speed=TABLE) -> Instance:
    return Instance.from_dict(document(speed), name="speed")


def test_the_table_round_trips_and_linear_jobs_write_no_speed_key():
    a = inst()
    assert Instance.from_dict(a.to_dict()) == a
    assert "speed" not in inst(None).to_dict()["jobs"][0]


def test_rates_by_worker_count_and_machines_spanned():
    table = inst().jobs[0].speed
    assert [table.rate(w, 1) for w in (1, 2, 3)] == [10.0, 18.0, 24.0]
    assert table.rate(2, 2) == 14.0 and table.rate(2, 3) == 12.0 and table.rate(2, 7) == 12.0
    assert table.rate(0, 1) == 0.0 and table.rate(4, 1) == 0.0
    assert table.fastest_local == 24.0 and table.best_per_worker(local=True) == 10.0


def test_base_makes_entries_speedups():
    table = inst({"base": 2.0, "local": [1, 1.5, 2], "spread": [1, 1.2, 1.4]}).jobs[0].speed
    assert table.local == (2.0, 3.0, 4.0) and table.rate(3, 2) == pytest.approx(2.8)


def test_progress_is_the_table_rate_times_the_slot_less_restart():
    i = inst()
    job = i.jobs[0]
    local = {"m0": (3, 1)}
    spread = {"m0": (1, 1), "m1": (1, 0)}
    assert job_rate(i, job, local) == 24.0 and job_rate(i, job, spread) == 14.0
    assert slot_batches(i, job, local, None) == 240.0
    # two slots local at W = 3 (480 batches), then one at W = 2 spread over 3 machines
    s = Schedule((Slot(0, (Allocation("j", "m0", 3, 1),)), Slot(1, (Allocation("j", "m0", 3, 1),)),
                  Slot(2, (Allocation("j", "m0", 1, 1), Allocation("j", "m1", 1, 0), Allocation("j", "m2", 0, 1)))))
    assert validate(i, s) == []
    report = score(i, s)
    assert report.jobs[0].finished and report.jobs[0].completion_slot == 2  # 480 + 12 x 10 >= 500


def test_restart_loss_and_the_unfinished_charge_use_the_table():
    i = replace_job(inst(), restart_seconds=4)
    s = Schedule((Slot(0, (Allocation("j", "m0", 2, 1),)),))
    report = score(i, s)
    left = 500 - 18.0 * 6
    assert report.jobs[0].remaining_batches == pytest.approx(left)
    # unfinished: horizon (4 slots x 10 s) plus the rest at the fastest local rate, 24 / s
    assert report.objective == pytest.approx(40 + left / 24.0)


def replace_job(i: Instance, **kw) -> Instance:
    from dataclasses import replace
    return replace(i, jobs=(replace(i.jobs[0], **kw),))


def test_linear_jobs_score_as_before():
    i = inst(None)
    job = i.jobs[0]
    tasks = {"m0": (3, 1)}
    assert job_rate(i, job, tasks) == 3 / job.batch_time(50)
    assert slot_batches(i, job, tasks, None) == 3 * 10 / job.batch_time(50)


@pytest.mark.parametrize("speed, where, why", [
    ({"local": [1, 2], "spread": [1, 2, 3]}, "jobs[0].speed.local", "needs 3"),
    ({"local": [1, -2, 3], "spread": [1, 2, 3]}, "jobs[0].speed.local[1]", "must be > 0"),
    ({"local": [1, 2, 3], "spread": [1, 0, 3]}, "jobs[0].speed.spread[1]", "must be > 0"),
    ({"local": [1, 2, float("nan")], "spread": [1, 2, 3]}, "jobs[0].speed.local[2]", "finite"),
    ({"local": [1, 2, 3]}, "jobs[0].speed.spread", "missing"),
    ({"local": [1, 2, 3], "spread": {"3": [1, 2, 3]}}, "jobs[0].speed.spread", '"2"'),
    ({"local": [1, 2, 3], "spread": {"x": [1, 2, 3]}}, "jobs[0].speed.spread.x", "machine counts"),
    ({"local": [1, 2, 3], "spread": [1, 2, 3], "fast": 1}, "jobs[0].speed.fast", "unknown key"),
    ({"local": "fast", "spread": [1, 2, 3]}, "jobs[0].speed.local", "list"),
    ({"base": 1e300, "local": [1e-300, 1e-300, 1e300], "spread": [1, 2, 3]}, "jobs[0].speed.local[2]", "finite"),
    ({"local": [1, 2, 1e12], "spread": [1, 2, 3]}, "jobs[0].speed.local[2]", "<= 1e+10"),  # docs/limits.md
])
def test_a_malformed_table_is_a_located_error(speed, where, why):
    with pytest.raises(InstanceError) as err:
        inst(speed)
    assert err.value.path == where and why in err.value.reason


def test_the_cli_reports_a_malformed_table_in_one_line(tmp_path, capsys):
    bad = document({"local": [1, 2], "spread": [1, 2, 3]})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "jobs[0].speed.local" in err and "bad.json" in err


def test_a_table_must_cover_the_jobs_worker_counts():
    table = SpeedTable(1, (1.0, 2.0), ((2, (1.0, 2.0)),))
    i = inst(None)
    with pytest.raises(InstanceError, match="covers W = 1..2"):
        replace_job(i, speed=table)


def tiny_table_instance(seed: int) -> Instance:
    """<= 2 jobs with concave tables on star:1 or star:2, <= 3 slots."""
    rng = random.Random(seed)
    n = rng.choice([1, 2])
    topo = star(n, capacity={"gpu": 2, "cpu": 2, "mem": 8}, local_gbps=50, link_gbps=rng.choice([1, 4, 8]))
    jobs = []
    for k in range(rng.choice([1, 2])):
        one = rng.uniform(5, 20)
        local = [one, one * rng.uniform(1.2, 1.9)]
        spread = [one * rng.uniform(0.6, 1.0), local[1] * rng.uniform(0.5, 1.0)]
        jobs.append(Job(id=f"j{k}", arrival=rng.choice([0, 0, 1]), work_batches=round(rng.uniform(0.4, 2.0) * one * 10, 1),
                        batch_seconds=0.1, worker={"gpu": 1}, ps={"cpu": 1}, max_workers=2, worker_gbps=1,
                        ps_gbps=rng.choice([1, 2]), weight=rng.choice([1, 2]),
                        speed=SpeedTable(1, tuple(local), ((2, tuple(spread)),))))
    return Instance(slot_seconds=10.0, horizon=rng.choice([2, 3]), resources=RESOURCES, topology=topo,
                    jobs=tuple(jobs), name=f"table{seed}")


def test_lp_values_stay_lower_bounds_with_tables():
    checked = 0
    for seed in range(25):
        i = tiny_table_instance(seed)
        try:
            best, _, _ = BF.optimum(i, limit=3000)
        except ValueError:
            continue
        for model in (formulate_per_machine, formulate_aggregated):
            lp = solve_lp(model(i)[0])
            assert lp.objective <= best * (1 + 1e-7), (seed, model.__name__)
        exact = solve_ilp(i, time_limit=30)
        assert exact.bound <= best * (1 + 1e-7) and exact.objective >= best * (1 - 1e-9)
        checked += 1
    assert checked >= 10


def test_solvers_return_valid_schedules_with_tables():
    for seed in range(6):
        i = tiny_table_instance(seed)
        for solver in ("rounding", "greedy"):
            solution = solve(i, solver=solver, trials=4)
            assert validate(i, solution.schedule) == []
            assert solution.certificate.lower_bound <= solution.objective * (1 + 1e-9)
        exact = solve(i, solver="exact")
        assert validate(i, exact.schedule) == [] and exact.certificate.exact is True
        assert exact.certificate.lower_bound <= exact.objective * (1 + 1e-9)


def test_configuration_lp_is_a_lower_bound_at_least_the_aggregated_one():
    """Linear and table jobs: aggregated LP <= configuration LP <= brute-force optimum."""
    checked = 0
    for seed in range(30):
        i = tiny_table_instance(seed) if seed % 2 else _tiny_linear(seed)
        try:
            best, _, _ = BF.optimum(i, limit=3000)
        except ValueError:
            continue
        config = solve_lp(formulate_configuration(i)[0]).objective
        assert config <= best * (1 + 1e-7), seed
        if seed % 2 == 0:
            assert solve_lp(formulate_aggregated(i)[0]).objective <= config * (1 + 1e-7), seed
        checked += 1
    assert checked >= 12


def _tiny_linear(seed: int) -> Instance:
    from dataclasses import replace
    i = tiny_table_instance(seed)
    return replace(i, jobs=tuple(replace(j, speed=None, gradient_mb=5 * (k + 1)) for k, j in enumerate(i.jobs)))


def test_configuration_rounding_carries_a_guarantee_and_a_valid_schedule():
    for seed in range(4):
        i = tiny_table_instance(seed)
        solution = solve(i, solver="rounding", model="configuration", trials=8)
        assert validate(i, solution.schedule) == []
        assert solution.certificate.guarantee is not None
        assert solution.certificate.lower_bound <= solution.objective * (1 + 1e-9)


def test_powers_keep_few_counts():
    from placement.formulation.configuration import worker_counts
    job = Job(id="j", arrival=0, work_batches=1, batch_seconds=1, worker={"gpu": 1}, ps={}, min_workers=3,
              max_workers=20, worker_gbps=1, ps_gbps=20)
    assert worker_counts(job, 64, "powers") == [3, 4, 8, 16, 20]
    assert worker_counts(job, 10, "powers") == [3, 4, 8, 10]
    assert worker_counts(job, 2, "all") == []
    assert worker_counts(job, 5, "all") == [3, 4, 5]
