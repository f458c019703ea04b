"""The Sia arena: the runner inside the real Sia simulator (its own environment, named by
PLACEMENT_SIA_PYTHON or made by the benchmark at .sia-venv/), its one-line errors, and the
benchmark's fidelity table and bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SIMULATOR = ROOT.parent / "shared" / "peers" / "sia-simulator"
sys.path.insert(0, str(ROOT / "benchmarks"))
import peer_sia  # noqa: E402

SMALL = """name,time,application,num_replicas,batch_size
cifar10-0,0,cifar10,1,128
bert-1,30,bert,2,12
cifar10-2,60,cifar10,4,256
"""


def _sia_python() -> Path | None:
    given = os.environ.get("PLACEMENT_SIA_PYTHON")
    if given:
        return Path(given)
    made = ROOT / ".sia-venv" / "bin" / "python"
    return made if made.exists() else None


def _needs_sia() -> Path:
    if not SIMULATOR.is_dir():
        pytest.skip(f"the Sia simulator is not at {SIMULATOR} (the peers folder beside the project)")
    py = _sia_python()
    if py is None:
        pytest.skip("no environment that runs the Sia simulator: set PLACEMENT_SIA_PYTHON (docs/sia_arena.md)")
    why = peer_sia._probe(py)
    if why:
        pytest.skip(f"{py} cannot run the Sia simulator: {why}")
    return py


def _runner(py: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(py), "-m", "placement.integrations.sia", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_peer_sia_finishes_a_few_jobs_in_the_real_simulator(tmp_path):
    py = _needs_sia()
    workload = tmp_path / "small.csv"
    workload.write_text(SMALL)
    before = _tree(SIMULATOR)
    p = _runner(py, "--simulator", str(SIMULATOR), "--workload", str(workload), "--policy", "peer:sia",
                "--out", str(tmp_path / "run.json"))
    assert p.returncode == 0, p.stderr[-2000:]
    run = json.loads((tmp_path / "run.json").read_text())
    assert run == json.loads(p.stdout)
    assert run["policy"] == "peer:sia" and run["driver"] == "multi_simulator.py"
    assert "--share_max_replicas" in run["flags"] and run["config_overrides"]["sia_solver_num_threads"] == 1
    assert run["unfinished"] == [] and set(run["jcts"]) == {"cifar10-0", "bert-1", "cifar10-2"}
    assert all(0 < j < 6 * 3600 for j in run["jcts"].values())
    assert run["average_jct"] == pytest.approx(sum(run["jcts"].values()) / 3)
    assert run["p99_jct"] == max(run["jcts"].values()) and run["makespan"] >= run["p99_jct"]
    assert run["decisions"] > 0 and 0 < run["decision_median_s"] <= run["decision_p95_s"]
    assert run["simulator_hash"] == peer_sia.simulator_hash(SIMULATOR)
    assert _tree(SIMULATOR) == before  # nothing written into the user's checkout


@pytest.mark.parametrize("csv, message", [
    (None, "no such workload file"),
    ("name,time\na,1\n", "missing column(s) application, num_replicas, batch_size"),
    ("name,time,application,num_replicas,batch_size\na,1,resnet,1,32\n", "row 2:application: unknown 'resnet'"),
    ("name,time,application,num_replicas,batch_size\na,1,cifar10,0,32\n", "row 2:num_replicas: must be a whole"),
    ("name,time,application,num_replicas,batch_size\na,-5,cifar10,1,32\n", "row 2:time: must be a number >= 0"),
    ("name,time,application,num_replicas,batch_size\na,1,cifar10,1,32\na,2,bert,1,12\n", "duplicate job name 'a'"),
])
def test_runner_bad_workload_is_one_line(tmp_path, csv, message):
    py = _needs_sia()
    workload = tmp_path / "w.csv"
    if csv is not None:
        workload.write_text(csv)
    p = _runner(py, "--simulator", str(SIMULATOR), "--workload", str(workload), "--policy", "peer:gavel")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr and "Traceback" not in p.stderr


def test_runner_bad_folder_and_missing_package_are_one_line(tmp_path):
    py = _needs_sia()
    p = _runner(py, "--simulator", str(tmp_path), "--workload", str(tmp_path / "w.csv"), "--policy", "peer:sia")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not the Sia simulator folder" in p.stderr
    # an environment without cvxpy: the first import the simulator needs fails, told in one line
    code = ("import sys, builtins; real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name.split('.')[0] == 'cvxpy': raise ImportError(name=name)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp\n"
            "from placement.integrations.sia import main; sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([str(py), "-c", code, "--simulator", str(SIMULATOR), "--workload", str(tmp_path / "w.csv"),
                        "--policy", "peer:sia"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "needs cvxpy" in p.stderr and "pip install" in p.stderr


def test_benchmark_runs_caches_and_reports(tmp_path):
    py = _needs_sia()
    workload = tmp_path / "small.csv"
    workload.write_text(SMALL)
    args = ["--simulator", str(SIMULATOR), "--workload", str(workload), "--policy", "peer:gavel",
            "--peer-python", str(py), "--out", str(tmp_path / "o.json"), "--cache", str(tmp_path / "c")]
    assert peer_sia.main(args) == 0
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["ran"] == 1 and doc["runs"][0]["unfinished"] == [] and doc["fidelity"] == []
    assert "| `peer:gavel` |" in (tmp_path / "o.md").read_text()
    assert peer_sia.main(args) == 0  # the second time from the cache
    assert json.loads((tmp_path / "o.json").read_text())["cached"] == 1


@pytest.mark.parametrize("extra, message", [
    (["--policy", "peer:tiresias"], "unknown policy 'peer:tiresias'"),
    (["--max-hours", "0"], "--max-hours must be > 0"),
])
def test_benchmark_bad_input_is_one_line(tmp_path, capsys, extra, message):
    args = ["--simulator", str(SIMULATOR if SIMULATOR.is_dir() else tmp_path), "--workload", "w.csv",
            "--out", str(tmp_path / "o.json"), *extra]
    if not SIMULATOR.is_dir():
        pytest.skip(f"the Sia simulator is not at {SIMULATOR}")
    assert peer_sia.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and not (tmp_path / "o.json").exists()


def test_benchmark_rejects_a_folder_that_is_not_the_simulator(tmp_path, capsys):
    assert peer_sia.main(["--simulator", str(tmp_path), "--workload", "w.csv", "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not the Sia simulator folder" in err


def test_fidelity_against_table_3():
    def run(trace, policy, hours, unfinished=()):
        return {"workload": "workload-1", "trace": trace, "policy": policy, "average_jct": hours * 3600,
                "average_jct_h": hours, "p99_jct": 7200.0, "makespan": 36000.0, "unfinished": list(unfinished)}
    f = {(x["trace"], x["policy"]): x for x in peer_sia.fidelity(
        [run("philly", "peer:sia", 0.66), run("philly", "peer:gavel", 2.26), run("saturn", "peer:pollux", 1.0, ["j"]),
         run(None, "peer:sia", 0.5)])}
    assert f["philly", "peer:sia"]["within"] is True           # 0.7 within 0.6 +- 0.1
    assert f["philly", "peer:gavel"]["within"] is False        # 2.3 outside 1.9 +- 0.3
    assert f["saturn", "peer:pollux"]["within"] is None         # unfinished jobs: no verdict
    assert len(f) == 3                                          # a workload of no known trace: none
    assert f["philly", "peer:sia"]["ours_p99_h"] == 2.0 and f["philly", "peer:sia"]["paper_makespan_h"] == 14.2


def test_fidelity_summarizes_several_workloads_as_the_paper_does():
    # two workloads of Philly: averages 0.5 h and 0.7 h over 2 jobs each -> mean 0.6 h, std 0.1 h
    runs = [{"workload": w, "trace": "philly", "policy": "peer:sia", "unfinished": [], "jcts": jcts,
             "average_jct": sum(jcts.values()) / 2, "average_jct_h": sum(jcts.values()) / 7200,
             "p99_jct": max(jcts.values()), "makespan": mk}
            for w, jcts, mk in (("workload-1", {"a": 1800.0, "b": 1800.0}, 36000.0),
                                ("workload-2", {"a": 2520.0, "b": 2520.0}, 72000.0))]
    row = peer_sia.fidelity(runs)[-1]
    assert row["workload"] == "all 2 workloads" and row["within"] is True
    assert row["ours_h"] == pytest.approx(0.6) and row["ours_spread_h"] == pytest.approx(0.1)
    assert row["ours_p99_h"] == pytest.approx(0.7) and row["ours_makespan_h"] == pytest.approx(15.0)
    assert "| Philly | all 2 workloads | `peer:sia` | 0.60 +- 0.10 |" in peer_sia.markdown(
        {"command": "c", "date": "d", "machine": {"cpu": "x", "nproc": 2, "python": "3"}, "load_before": "0",
         "load_after": "0", "runner_version": "r", "simulator_version": "s", "ran": 0, "cached": 2,
         "runs": [{**r, "restarts": 0, "decision_median_s": None, "decision_p95_s": None, "decisions": 0,
                   "wall_s": 0.0} for r in runs], "missing": [], "fidelity": peer_sia.fidelity(runs)})
