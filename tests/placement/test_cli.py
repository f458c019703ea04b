"""The CLI: exit codes 0 valid / 1 invalid / 2 bad input, one clear line, no traceback."""
import json
import re
import subprocess
import sys

import pytest

from placement.cli import main

from .conftest import EXAMPLES, TINY, write


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_valid_and_invalid(capsys):
    code, out, _ = run(capsys, "validate", str(EXAMPLES / "local.json"), str(EXAMPLES / "local.valid.json"))
    assert code == 0 and out.startswith("VALID") and "weighted JCT      480 s" in out
    code, out, _ = run(capsys, "validate", str(EXAMPLES / "local.json"), str(EXAMPLES / "local.invalid.json"))
    assert code == 1 and "INVALID: 2 violation(s)" in out and "rule 2 (life), slot 0, job b" in out


def test_validate_json(capsys):
    code, out, _ = run(capsys, "validate", "--json", str(EXAMPLES / "bottleneck.json"),
                       str(EXAMPLES / "bottleneck.invalid.json"))
    doc = json.loads(out)
    assert code == 1 and doc["valid"] is False and len(doc["violations"]) == 4
    assert doc["violations"][0]["name"] == "network" and doc["report"]["instance"] == "bottleneck"


def test_max_violations(capsys):
    code, out, _ = run(capsys, "validate", "--max-violations", "1", str(EXAMPLES / "bottleneck.json"),
                       str(EXAMPLES / "bottleneck.invalid.json"))
    assert code == 1 and "... 3 more" in out


def test_show(capsys):
    code, out, _ = run(capsys, "show", "--jobs", str(EXAMPLES / "racks.json"))
    assert code == 0 and "machines   4 (capacity: gpu 8, cpu 64, mem 256)" in out
    assert "root spine, depth 2" in out and "\nx " in out


def test_schedule_naming_another_instance_is_noted(capsys, tmp_path):
    doc = json.loads((EXAMPLES / "local.valid.json").read_text())
    doc["instance"] = "other"
    code, _, err = run(capsys, "validate", str(EXAMPLES / "local.json"), str(write(tmp_path, "s.json", doc)))
    assert code == 0 and "names instance 'other'" in err


BAD = {
    "truncated": ('{"name": "tiny", "slot_seconds": 60, "hor', "not valid JSON"),
    "unknown key": (dict(TINY, colour="red"), "colour: unknown key"),
    "nan": (json.dumps(TINY).replace('"batch_seconds": 0.05', '"batch_seconds": NaN'),
            "jobs[0].batch_seconds: must be finite, got nan"),
    "cyclic": ({**TINY, "topology": {**TINY["topology"], "links": TINY["topology"]["links"]
                                     + [{"a": "m0", "b": "m1", "gbps": 1}]}},
               "topology.links: the links form a cycle: "),
    "negative": (json.dumps(TINY).replace('"gbps": 25', '"gbps": -25', 1),
                 "topology.links[0].gbps: must be > 0, got -25"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_instance_one_line_exit_2(capsys, tmp_path, case):
    doc, expected = BAD[case]
    path = write(tmp_path, "inst.json", doc)
    for argv in (["show", str(path)], ["validate", str(path), str(EXAMPLES / "local.valid.json")]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.startswith(f"placement: error: {path}: ") and expected in err
        assert err.count("\n") == 1


def test_bad_schedule_exit_2(capsys, tmp_path):
    path = write(tmp_path, "s.json", {"slots": [{"t": 0, "allocations": [
        {"job": "a", "machine": "m0", "workers": 2.0, "ps": 1}]}]})
    code, _, err = run(capsys, "validate", str(EXAMPLES / "local.json"), str(path))
    assert code == 2 and "slots[0].allocations[0].workers: must be an integer, got 2.0" in err


def test_missing_file_exit_2(capsys, tmp_path):
    code, _, err = run(capsys, "show", str(tmp_path / "nope.json"))
    assert code == 2 and "nope.json: no such file" in err


def test_console_script_no_traceback(tmp_path):
    path = write(tmp_path, "inst.json", "{")
    proc = subprocess.run([sys.executable, "-m", "placement.cli", "show", str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("placement: error:")


def test_generate_writes_a_valid_instance(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert main(["generate", "--jobs", "5", "--cluster", "racks:2x2", "--seed", "3", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    from placement.model.instance import Instance
    assert len(Instance.load(out).jobs) == 5
    assert main(["generate", "--jobs", "5", "--cluster", "racks:0x2"]) == 2
    assert "racks" in capsys.readouterr().err


def test_simulate_policies_side_by_side(tmp_path, capsys):
    out, plots = tmp_path / "sim.json", tmp_path / "plots"
    code = main(["simulate", "--trace", str(EXAMPLES / "racks.json"), "--policy", "lp-rounding",
                 "--policy", "fifo", "--out", str(out), "--plot", str(plots)])
    text = capsys.readouterr().out
    assert code == 0 and "lp-rounding" in text and "fifo" in text and "avg JCT" in text
    assert set(json.loads(out.read_text())) == {"lp-rounding", "fifo"}
    assert (plots / "jct_cdf.png").exists()


@pytest.mark.parametrize("argv, message", [
    (["--policy", "nope"], "unknown policy 'nope'"),
    (["--event", "x:remove"], ""),
])
def test_simulate_bad_input(capsys, argv, message):
    assert main(["simulate", "--trace", str(EXAMPLES / "racks.json"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_simulate_job_list_needs_a_cluster(tmp_path, capsys):
    from placement.model.instance import Instance
    from placement.traces import write_joblist
    path = tmp_path / "jobs.csv"
    write_joblist(Instance.load(EXAMPLES / "racks.json").jobs, path)
    assert main(["simulate", "--trace", str(path)]) == 2
    assert "needs a cluster" in capsys.readouterr().err
    assert main(["simulate", "--trace", str(path), "--cluster", "racks:2x2", "--policy", "greedy"]) == 0


def test_python_dash_m_placement_is_the_command():
    """``python -m placement`` runs the same CLI as the ``placement`` script."""
    out = subprocess.run([sys.executable, "-m", "placement", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "usage: placement" in out.stdout


def test_simulate_prints_lower_bounds_that_no_run_beats(capsys):
    code = main(["simulate", "--trace", str(EXAMPLES.parent / "traces" / "philly-30-s3.csv"),
                 "--cluster", "racks:1x1", "--policy", "greedy", "--policy", "fifo", "--bound"])
    text = capsys.readouterr().out
    assert code == 0
    line = next(x for x in text.splitlines() if x.startswith("lower bounds on the average JCT"))
    floor, pooled = (float(v) for v in re.findall(r"(?:floor|LP) ([0-9.e+]+) s", line))
    assert pooled > floor   # 30 jobs on 8 GPUs queue: the pooled bound sees it, the floor does not
    above = {m[1]: float(m[2]) for m in re.finditer(r"^\s+(\S+)\s+(-?[0-9.]+)% above", text, re.M)}
    assert set(above) == {"greedy", "fifo"} and min(above.values()) >= 0


def test_simulate_bound_skips_a_pooled_model_over_the_size_limit(capsys, monkeypatch):
    monkeypatch.setattr("placement.bounds.pooled_bound.MAX_CONFIGURATIONS", 10)
    code = main(["simulate", "--trace", str(EXAMPLES / "racks.json"), "--policy", "greedy", "--bound"])
    text = capsys.readouterr().out
    assert code == 0 and "pooled LP skipped (" in text and "more than 10)" in text
    assert re.search(r"greedy\s+-?[0-9.]+% above the larger bound", text)


def test_simulate_bound_does_not_hold_a_run_with_unfinished_jobs_to_the_floor(tmp_path, capsys):
    """One job of 300 batches, 10 a second, losing 50 of its first 60-s slot to the restart: cut at
    one slot it is charged 80 s (MODEL.md), below the floor of 120 s that only finished runs meet."""
    doc = {"slot_seconds": 60, "horizon": 4, "resources": ["gpu", "cpu"],
           "topology": {"machines": [{"id": "m0", "capacity": {"gpu": 1, "cpu": 1}, "local_gbps": 100}]},
           "jobs": [{"id": "j0", "arrival": 0, "work_batches": 300, "batch_seconds": 0.1, "worker": {"gpu": 1},
                     "ps": {"cpu": 1}, "max_workers": 1, "worker_gbps": 1, "ps_gbps": 1, "restart_seconds": 50}]}
    path = write(tmp_path, "one.json", doc)
    assert main(["simulate", "--trace", str(path), "--policy", "greedy", "--horizon", "1", "--bound"]) == 0
    text = capsys.readouterr().out
    assert "floor 120 s" in text and "1 unfinished, so the floor does not hold" in text
    above = float(re.search(r"greedy\s+(-?[0-9.]+)% above", text)[1])
    assert above >= 0
