"""The solve pipeline: bounds below every schedule, validity, determinism, degenerate input."""
import json

import pytest

from placement.cli import main
from placement.model.evaluate import evaluate
from placement.traces.generate import generate
from placement.model.instance import Instance, Job
from placement.offline.solve import SolveError, solve

from ..conftest import EXAMPLES

RANDOM = [(seed, cluster) for seed in range(25) for cluster in ("star:2", "racks:2x2")]


@pytest.mark.parametrize("seed, cluster", RANDOM)
def test_lp_bound_below_every_solver_and_schedules_valid(seed, cluster):
    inst = generate(jobs=3 + seed % 3, cluster=cluster, seed=seed)
    results = {s: solve(inst, solver=s, seed=seed, trials=8) for s in ("rounding", "greedy")}
    bound = results["rounding"].certificate.lower_bound
    assert bound is not None and bound > 0
    for name, sol in results.items():
        violations, report = evaluate(inst, sol.schedule)  # re-checked here, independently
        assert violations == [], (name, violations[:1])
        assert report.objective == pytest.approx(sol.objective)
        assert bound <= sol.objective * (1 + 1e-9), (name, bound, sol.objective)
        assert sol.report.gap == pytest.approx((sol.objective - bound) / sol.objective)


@pytest.mark.parametrize("seed", range(6))
def test_both_models_bound_below_and_solve_validly(seed):
    inst = generate(jobs=5, cluster="racks:2x2", seed=seed)
    per_machine = solve(inst, model="per-machine", trials=4)
    aggregated = solve(inst, model="aggregated", trials=4)
    assert aggregated.certificate.model == "aggregated" and per_machine.certificate.model == "per-machine"
    # the aggregated model relaxes the per-machine one: its bound is never higher
    assert aggregated.certificate.lower_bound <= per_machine.certificate.lower_bound * (1 + 1e-7)
    for sol in (per_machine, aggregated):
        assert evaluate(inst, sol.schedule)[0] == []
        assert sol.certificate.lower_bound <= sol.objective * (1 + 1e-9)


def test_same_seed_same_schedule():
    inst = generate(jobs=6, cluster="racks:2x2", seed=3)
    a = solve(inst, seed=11, trials=6)
    b = solve(inst, seed=11, trials=6)
    assert a.schedule == b.schedule and a.objective == b.objective


def test_examples_reach_the_bound_where_it_is_tight():
    for name, optimum in (("racks", 240.0), ("bottleneck", 300.0)):
        sol = solve(Instance.load(EXAMPLES / f"{name}.json"))
        assert sol.objective == pytest.approx(optimum)


def test_no_jobs_gives_empty_valid_schedule(tiny_doc):
    tiny_doc["jobs"] = []
    sol = solve(Instance.from_dict(tiny_doc))
    assert sol.schedule.slots == () and sol.objective == 0


def test_job_that_cannot_finish_is_reported_unfinished(tiny_doc):
    tiny_doc["jobs"][0].update(work_batches=1e9, arrival=3)
    inst = Instance.from_dict(tiny_doc)
    for solver in ("rounding", "greedy"):
        sol = solve(inst, solver=solver)
        assert sol.report.unfinished == 1
        assert sol.certificate.lower_bound <= sol.objective


def test_lp_bound_only():
    sol = solve(Instance.load(EXAMPLES / "racks.json"), solver="lp-bound")
    assert sol.schedule is None and sol.certificate.lower_bound == pytest.approx(240)


@pytest.mark.parametrize("kwargs, message", [
    ({"solver": "magic"}, "solver must be one of"),
    ({"model": "tiny"}, "model must be one of"),
    ({"seed": -1}, "seed must be a non-negative integer"),
    ({"trials": 0}, "trials must be a positive integer"),
    ({"time_limit": 0}, "time_limit must be a positive number"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(SolveError, match=message):
        solve(Instance.load(EXAMPLES / "local.json"), **kwargs)


def test_guarantee_is_reported_per_solve():
    sol = solve(Instance.load(EXAMPLES / "bottleneck.json"), trials=4)
    g = sol.certificate.guarantee
    assert g is not None and g.trials == 4 and 0 <= g.p_success <= 1
    # the certificate prints the stronger proven bound: here the column LP's (300, the optimum) over the LP's 280
    assert g.lp_objective <= sol.certificate.lower_bound
    assert sol.certificate.bound_source.startswith("column LP") and sol.certificate.lower_bound == pytest.approx(300)
    assert "probability" in g.statement


def test_cli_solve_writes_valid_files(tmp_path, capsys):
    out = tmp_path / "s.json"
    png = tmp_path / "s.png"
    code = main(["solve", str(EXAMPLES / "racks.json"), "--out", str(out), "--csv", "--plot", str(png)])
    text = capsys.readouterr().out
    assert code == 0 and "weighted JCT      240 s" in text and "lower bound       240 s (column LP" in text
    assert json.loads(out.read_text())["solver"] == "rounding"
    assert (tmp_path / "s.csv").read_text().startswith("t,job,machine,workers,ps\n")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["validate", str(EXAMPLES / "racks.json"), str(out)]) == 0


def test_cli_solve_csv_to_stdout(capsys):
    assert main(["solve", str(EXAMPLES / "local.json"), "--solver", "greedy", "--csv"]) == 0
    assert capsys.readouterr().out.startswith("t,job,machine,workers,ps\n0,a,m0,")


def test_cli_solve_bad_input(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    assert main(["solve", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["solve", str(EXAMPLES / "local.json"), "--trials", "0"]) == 2
    assert "trials must be a positive integer" in capsys.readouterr().err
