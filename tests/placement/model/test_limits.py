"""The input policy (issue 16, docs/limits.md): one regression test per class of bug the
hostile-user session found, and the limits' own settings. Each runs the command line in
process and expects exit 2 with one line naming the file, the place and the reason."""
from __future__ import annotations

import json
import re
import time
import warnings
from pathlib import Path

import pytest

from placement.model import limits
from placement.cli import main
from placement.model.instance import Instance, InstanceError
from placement.model.schedule import Schedule, ScheduleError
from placement.model.strict_json import join, read_json
from placement.traces import read_joblist

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "instances" / "examples"
TRACE = ROOT / "instances" / "traces" / "philly-30-s3.csv"


def cli(capsys, *argv: str) -> tuple[int, str]:
    start = time.monotonic()
    code = main(list(argv))
    assert time.monotonic() - start < 30, f"placement {' '.join(argv)} took too long"
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, err.strip()


def bad(capsys, place: str, reason: str, *argv: str) -> str:
    code, err = cli(capsys, *argv)
    assert code == 2 and "\n" not in err, err
    assert place in err and re.search(reason, err), err
    return err


def edited(tmp_path: Path, source: Path, edit, name: str = "x.json") -> Path:
    doc = json.loads(source.read_text())
    edit(doc)
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def csv_with(tmp_path: Path, column: str, value: str, rows: int = 3, line: int = 2) -> Path:
    lines = TRACE.read_text().splitlines()[: rows + 1]
    header = lines[0].split(",")
    cells = lines[line - 1].split(",")
    cells[header.index(column)] = value
    lines[line - 1] = ",".join(cells)
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def simulate(path: Path, *extra: str) -> list[str]:
    return ["simulate", "--trace", str(path), "--cluster", "racks:2x2", "--policy", "greedy", *extra]


# ----- numbers the loader accepted but the solver could not hold -------------------------------
@pytest.mark.parametrize("key, value, bound", [
    ("gradient_mb", 1e308, r"must be <= 1e\+09 MB"),
    ("weight", 1e308, r"must be <= 1e\+09"),
    ("worker_gbps", 1e308, r"must be <= 1e\+06 Gbps"),   # was: solve still running after 400 s
    ("batch_seconds", 1e-300, r"must be >= 1e-06 s"),
    ("work_batches", 1e300, r"must be <= 1e\+15"),
])
def test_huge_or_tiny_job_numbers_are_refused_at_load(tmp_path, capsys, key, value, bound):
    path = edited(tmp_path, EXAMPLES / "racks.json", lambda d: d["jobs"][0].update({key: value}))
    bad(capsys, f"{path}: jobs[0].{key}:", bound, "solve", str(path), "--time-limit", "5")


def test_huge_topology_numbers_are_refused(tmp_path, capsys):
    path = edited(tmp_path, EXAMPLES / "racks.json",
                  lambda d: d["topology"]["links"][0].update(gbps=1e-300))
    bad(capsys, "topology.links[0].gbps:", r">= 1e-06 Gbps", "show", str(path))
    path = edited(tmp_path, EXAMPLES / "racks.json",
                  lambda d: d["topology"]["machines"][0]["capacity"].update(gpu=1e308))
    bad(capsys, "topology.machines[0].capacity.gpu:", r"<= 1e\+09", "show", str(path))


@pytest.mark.parametrize("count", [10**30, 2**63, -(10**30)])
def test_huge_schedule_counts_are_bad_input_not_an_overflow(tmp_path, capsys, count):
    path = edited(tmp_path, EXAMPLES / "racks.valid.json",
                  lambda d: d["slots"][0]["allocations"][0].update(ps=count))
    bad(capsys, f"{path}: slots[0].allocations[0].ps:", r"must be", "validate",
        str(EXAMPLES / "racks.json"), str(path))
    path = edited(tmp_path, EXAMPLES / "racks.valid.json", lambda d: d["slots"][0].update(t=count))
    bad(capsys, "slots[0].t:", r"between -1e\+15 and 1e\+15", "validate",
        str(EXAMPLES / "racks.json"), str(path))


@pytest.mark.parametrize("column, value, reason", [
    ("gradient_mb", "1e308", r"must be <= 1e\+09 MB"),   # was: ZeroDivisionError
    ("worker_gpu", "1e308", r"must be <= 1e\+09"),       # was: OverflowError
    ("worker_gbps", "1e-300", r">= 1e-06 Gbps"),
    ("work_batches", "9" * 5000, r"must be finite, got inf"),   # was: int() digit limit, no place
    ("arrival", "9" * 4300, r"must be an integer, got inf"),
    ("max_workers", "\uff12", r"must be a number, got '\uff12'"),   # a full-width digit: not a number
])
def test_huge_job_list_numbers_name_line_and_column(tmp_path, capsys, column, value, reason):
    path = csv_with(tmp_path, column, value, line=3)
    bad(capsys, f"{path}:line 3:{column}:", reason, *simulate(path, "--horizon", "20"))


def test_extreme_but_legal_numbers_never_break_a_command(tmp_path, capsys):
    """Every number at the far end of its bound: the commands answer (0 or 1), never crash."""
    slow = dict(work_batches=1e15, batch_seconds=1e7, gradient_mb=1e9, worker_gbps=1e-6,
                ps_gbps=1e-6, weight=1e9, restart_seconds=1e9)
    fast = dict(work_batches=1e-6, batch_seconds=1e-6, gradient_mb=0, worker_gbps=1e6,
                ps_gbps=1e6, weight=1e-9)

    def extreme(d):
        d["slot_seconds"] = 1e7
        d["jobs"][0].update(slow)
        d["jobs"][1].update(fast)
        for link in d["topology"]["links"]:
            link["gbps"] = 1e6
    path = edited(tmp_path, EXAMPLES / "racks.json", extreme)
    out = tmp_path / "out.json"
    for argv in (["solve", str(path), "--solver", "greedy", "--out", str(out)],
                 ["solve", str(path), "--time-limit", "5", "--trials", "4"],
                 ["simulate", "--trace", str(path), "--policy", "oasis", "--horizon", "6"],
                 ["simulate", "--trace", str(path), "--policy", "lp-rounding", "--horizon", "6"]):
        code, err = cli(capsys, *argv)
        assert code in (0, 1), err
    code, err = cli(capsys, "validate", str(path), str(out))
    assert code in (0, 1), err


@pytest.mark.parametrize("source, edit", [
    ("bottleneck", lambda d: d["jobs"][0]["worker"].update(mem=1e-6)),   # was: int64 cast warning (lattice)
    ("bottleneck", lambda d: d["topology"]["machines"][0]["capacity"].update(mem=1e9)),
    ("racks", lambda d: (d["jobs"][0]["ps"].update(mem=1e-6),             # was: RuntimeError, the column
                         d["jobs"][1].update(work_batches=1e15, batch_seconds=1e7))),  # bound's master
])
def test_tiny_demands_and_huge_work_solve_without_warnings(tmp_path, capsys, source, edit):
    """Found by PLACEMENT_FUZZ_CASES=3000 (m_extreme): legal numbers at the ends of their bounds."""
    path = edited(tmp_path, EXAMPLES / f"{source}.json", edit)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        code, err = cli(capsys, "solve", str(path), "--time-limit", "5", "--trials", "4")
    assert code in (0, 1) and "\n" not in err, err


def test_a_job_needing_more_pss_than_the_limit_is_refused(tmp_path, capsys):
    """worker_gbps 1e6 over ps_gbps 1e-6: 8 workers would need 8e12 PSs (a schedule no file
    can hold; simulate's lp-rounding ran past 120 s)."""
    path = edited(tmp_path, EXAMPLES / "racks.json",
                  lambda d: d["jobs"][0].update(worker_gbps=1e6, ps_gbps=1e-6, ps={}))
    bad(capsys, f"{path}: jobs[0].ps_gbps:", "need 8000000000000 PSs, more than the limit 10000",
        "solve", str(path))


# ----- sizes with no limit ---------------------------------------------------------------------
@pytest.mark.parametrize("edit, place, limit", [
    (lambda d: d.update(horizon=10**9), "horizon:", "PLACEMENT_MAX_HORIZON"),
    (lambda d: d["jobs"][0].update(max_workers=10**9), "jobs[0].max_workers:", "PLACEMENT_MAX_WORKERS"),
    (lambda d: d.update(resources=[f"r{i}" for i in range(100)]), "resources:", "PLACEMENT_MAX_RESOURCES"),
])
def test_sizes_past_their_limit_are_refused_before_any_work(tmp_path, capsys, edit, place, limit):
    path = edited(tmp_path, EXAMPLES / "racks.json", edit)
    bad(capsys, f"{path}: {place}", limit, "solve", str(path))


@pytest.mark.parametrize("value, shown", [("9" * 5000, "'9999"), ("\uff12", "'\uff12'")])
def test_pollux_workload_counts_are_refused_on_their_row(tmp_path, capsys, value, shown):
    pollux = ROOT / "tests" / "data" / "pollux"
    lines = (pollux / "workload.csv").read_text().splitlines()
    lines[2] = ",".join(lines[2].split(",")[:-1] + [value])   # batch_size; was: int() digit limit, no place
    path = tmp_path / "workload.csv"
    path.write_text("\n".join(lines) + "\n")
    bad(capsys, f"{path}:row 3:batch_size:", f"must be a positive integer, got {shown}", "simulate", "--trace",
        f"pollux:{path}", "--pollux-traces", str(pollux / "traces"), "--policy", "greedy")


def test_a_far_arrival_in_a_job_list_is_refused_on_its_line(tmp_path, capsys):
    path = csv_with(tmp_path, "arrival", str(10**9))
    bad(capsys, f"{path}:line 2:arrival:", "not inside any allowed horizon.*PLACEMENT_MAX_HORIZON",
        *simulate(path))


@pytest.mark.parametrize("argv, reason", [
    (["generate", "--jobs", "1000000000"], "PLACEMENT_MAX_JOBS"),
    (["generate", "--jobs", "2", "--cluster", "star:1000000000"], "PLACEMENT_MAX_MACHINES"),
    (["generate", "--jobs", "2", "--cluster", "racks:100000x100000"], "PLACEMENT_MAX_MACHINES"),
    (["generate", "--jobs", "2", "--horizon", "1000000000"], "PLACEMENT_MAX_HORIZON"),
    (["generate", "--jobs", "2", "--slot-seconds", "1e-300"], r"slot_seconds must be >= 0\.001"),
    (["generate", "--jobs", "2", "--load", "1e-308"], r"load must be between 1e-06 and 1e\+06"),  # was: a warning
    (["generate", "--jobs", "2", "--name", "a\x1bb"], r"name: must not contain control"),  # was: unloadable
    (["simulate", "--trace", str(TRACE), "--cluster", "star:1000000000"], "PLACEMENT_MAX_MACHINES"),
    (["simulate", "--trace", str(TRACE), "--cluster", "racks:2x2", "--horizon", "1000000000"],
     "PLACEMENT_MAX_HORIZON"),
    (["simulate", "--trace", str(TRACE), "--cluster", "racks:2x2", "--lookahead", "1000000000"],
     "PLACEMENT_MAX_HORIZON"),
])
def test_command_line_sizes_are_bounded(capsys, argv, reason):
    code, err = cli(capsys, *argv)
    assert code == 2 and "\n" not in err and re.search(reason, err), err


def test_special_files_are_read_only_up_to_the_file_limit(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MAX_FILE_MB", "2")
    bad(capsys, "/dev/zero:", "larger than the limit of 2 MB", "show", "/dev/zero")   # was: MemoryError
    zeros = tmp_path / "zeros.csv"
    zeros.symlink_to("/dev/zero")
    bad(capsys, f"{zeros}:", "larger than the limit", *simulate(zeros))


def test_the_philly_log_is_read_under_the_same_policy(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MAX_FILE_MB", "2")
    philly = ["simulate", "--trace", "philly", "--cluster", "racks:2x2", "--philly-path"]
    bad(capsys, "/dev/zero:", "larger than the limit of 2 MB", *philly, "/dev/zero")   # was: read forever
    path = tmp_path / "philly.csv"
    path.write_bytes(b"timestamp,duration,num_gpus\n2017-10-03 09:00:00,1\xff0,1\n")
    bad(capsys, f"{path}: not UTF-8 text: byte 0xff at line 2 column 22", "", *philly, str(path))  # was: no place


def test_the_default_simulation_cap_is_cut_at_the_horizon_limit(capsys, monkeypatch):
    monkeypatch.setenv("PLACEMENT_MAX_HORIZON", "30")  # the derived cap would be thousands of slots
    code, _ = cli(capsys, *simulate(TRACE))
    assert code == 0


# ----- deep nesting ----------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["instance", "schedule"])
def test_deep_nesting_is_refused_with_its_line_and_column(tmp_path, capsys, which):
    path = tmp_path / "deep.json"
    path.write_text('{"slots": ' + "[" * 990 + "]" * 990 + "}")   # was: RecursionError
    argv = ["show", str(path)] if which == "instance" else ["validate", str(EXAMPLES / "racks.json"), str(path)]
    bad(capsys, f"{path}: nested deeper than 64 levels at line 1 column 74", "PLACEMENT_MAX_DEPTH", *argv)


# ----- messages --------------------------------------------------------------------------------
def test_duplicate_keys_name_their_json_path(tmp_path, capsys):
    text = (EXAMPLES / "racks.json").read_text().replace('"gpu": 1, "cpu": 2', '"gpu": 1, "gpu": 2, "cpu": 2', 1)
    path = tmp_path / "dup.json"
    path.write_text(text)
    bad(capsys, f"{path}: jobs[0].worker.gpu:", "the key 'gpu' appears twice in one object", "show", str(path))


def test_decode_errors_give_line_and_column_not_a_byte_offset(tmp_path, capsys):
    path = tmp_path / "bytes.json"
    path.write_bytes(b'{\n  "name": "r\xffacks"}')
    bad(capsys, f"{path}: not UTF-8 text: byte 0xff at line 2 column 13", "", "show", str(path))
    path.write_bytes(b'{\n  "name": "racks" "x"}')
    bad(capsys, f"{path}: not valid JSON", "at line 2 column 19", "show", str(path))
    path.write_bytes(b"\xef\xbb\xbf" + (EXAMPLES / "racks.json").read_bytes())  # a BOM is fine
    assert cli(capsys, "show", str(path))[0] == 0


def test_job_list_errors_name_the_line_not_a_job_index(tmp_path, capsys):
    path = csv_with(tmp_path, "worker_gpu", "100", rows=8, line=7)   # was: jobs[5].worker
    bad(capsys, f"{path}:line 7:worker:", "exceeds the capacity of every machine", *simulate(path))
    path = csv_with(tmp_path, "min_workers", "2", rows=8, line=6)
    cells = path.read_text()   # min_workers 2 > max_workers 1: Job's own rule, on its line
    bad(capsys, f"{path}:line 6:min_workers:", "min_workers 2 > max_workers", *simulate(path))
    assert cells


def test_a_record_over_two_lines_is_named_by_its_first(tmp_path, capsys):
    lines = TRACE.read_text().splitlines()[:4]
    first, rest = lines[1].split(",", 1)
    path = tmp_path / "jobs.csv"
    path.write_text("\n".join([lines[0], f'"{first}\n{first}",{rest}', *lines[2:]]) + "\n")
    bad(capsys, f"{path}:line 2:id:", "must not contain control characters", *simulate(path))   # was: line 3
    arrival, rest = rest.split(",", 1)    # a quoted number over two lines is fine ("0\n" is stripped)
    path.write_text("\n".join([lines[0], f'{first},"{arrival}\n",{rest}', lines[2].replace(",0,", ",-5,", 1)]) + "\n")
    bad(capsys, f"{path}:line 4:arrival:", "must be >= 0, got -5", *simulate(path))


@pytest.mark.parametrize("value", ["a\x00b", "a\x1bb", "a\u2028b"])
def test_control_characters_in_ids_are_refused_and_escaped(tmp_path, capsys, value):
    path = csv_with(tmp_path, "id", value)
    err = bad(capsys, f"{path}:line 2:id:", "must not contain control characters", *simulate(path))
    assert value not in err   # echoed escaped, never raw
    path = edited(tmp_path, EXAMPLES / "racks.json", lambda d: d["jobs"][0].update(id=value))
    bad(capsys, f"{path}: jobs[0].id:", "must not contain control characters", "show", str(path))
    path = edited(tmp_path, EXAMPLES / "racks.json", lambda d: d["resources"].__setitem__(1, value))
    bad(capsys, f"{path}: resources[1]:", "must not contain control characters", "show", str(path))


def test_control_characters_in_file_names_are_escaped(tmp_path, capsys):
    path = tmp_path / "a\nb\x1b[31m.json"   # was: the name's newline split the one-line error
    path.write_text("{")
    bad(capsys, "a\\nb\\x1b[31m.json: not valid JSON", "at line 1 column 2", "show", str(path))


@pytest.mark.parametrize("argv, reason", [
    (["generate", "--jobs", "1e9"], r"argument --jobs: invalid int value: '1e9' \(see placement generate --help\)"),
    (["solve"], r"required: instance \(see placement solve --help\)"),
    (["frob"], r"invalid choice: 'frob'"),
])
def test_argument_errors_are_one_line_too(capsys, argv, reason):
    with pytest.raises(SystemExit) as stop:   # was: the usage, then the error
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("placement: error: ")
    assert re.search(reason, err), err


def test_odd_keys_are_quoted_in_paths():
    assert join("topology", "machines") == "topology.machines"
    assert join("capacity", "gpu mem") == 'capacity["gpu mem"]'
    assert join("", "a\nb") == '["a\\nb"]'


# ----- the limits themselves -------------------------------------------------------------------
def test_limits_can_be_raised_and_lowered_by_env_and_flag(tmp_path, capsys, monkeypatch):
    racks = str(EXAMPLES / "racks.json")   # horizon 5, 2 jobs, 4 machines, 8 workers
    bad(capsys, f"{racks}: horizon:", "must be <= 4", "show", racks, "--max-horizon", "4")
    bad(capsys, f"{racks}: jobs:", "lists 2 jobs, more than the limit 1", "show", racks, "--max-jobs", "1")
    bad(capsys, f"{racks}: topology.machines:", "more than the limit 3", "show", racks, "--max-machines", "3")
    monkeypatch.setenv("PLACEMENT_MAX_WORKERS", "7")
    bad(capsys, f"{racks}: jobs[0].max_workers:", "must be <= 7", "show", racks)
    assert cli(capsys, "show", racks, "--max-workers", "8")[0] == 0   # the flag wins for one command
    assert limits.value(limits.WORKERS) == 7                          # and is undone after it
    monkeypatch.setenv("PLACEMENT_MAX_DEPTH", "3")
    bad(capsys, f"{racks}: nested deeper than 3 levels", "", "show", racks)


@pytest.mark.parametrize("setting", ["lots", "0", "-5", "1e5", "501",
                                     "9" * 5000, "\u0663"])   # was: a traceback; read as 3
def test_a_bad_limit_setting_is_one_line(capsys, monkeypatch, setting):
    monkeypatch.setenv("PLACEMENT_MAX_DEPTH", setting)
    bad(capsys, "PLACEMENT_MAX_DEPTH: must be an integer in 1..500", "", "show", str(EXAMPLES / "racks.json"))


def test_the_library_readers_follow_the_same_policy(tmp_path):
    path = edited(tmp_path, EXAMPLES / "racks.json", lambda d: d["jobs"][0].update(weight=0.5e-9))
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.weight: must be >= 1e-09"):
        Instance.load(path)
    path = tmp_path / "huge.json"
    path.write_text('{"slots": [{"t": ' + "9" * 5000 + ', "allocations": []}]}')
    with pytest.raises(ScheduleError, match=r"slots\[0\]\.t: must be an integer, got inf"):
        Schedule.load(path)
    assert read_json(EXAMPLES / "racks.valid.json", ScheduleError)["instance"] == "racks"
    with pytest.raises(InstanceError, match=r"line 2:arrival"):
        read_joblist(csv_with(tmp_path, "arrival", "3.5"))


def test_docs_list_every_bound_and_limit():
    text = (ROOT / "docs" / "limits.md").read_text()
    for key in [*limits.NUMBERS, *limits.COUNTS, *limits.ARRAYS]:
        assert f"`{key}`" in text or key in ("gbps",), key
    for lim in limits.LIMITS:
        assert lim.env in text and lim.flag in text and f"{lim.default:,}" in text, lim.env


def test_running_out_of_memory_is_one_line_not_a_traceback(capsys, monkeypatch):
    """Inside the limits an input may still not fit this machine's memory (the limits are
    per dimension): the command says so in one line."""
    def no_memory(*args, **kwargs):
        raise MemoryError()
    monkeypatch.setattr(Instance, "load", no_memory)
    code, err = cli(capsys, "show", str(EXAMPLES / "racks.json"))
    assert code == 2 and err.startswith("placement: error: out of memory") and "\n" not in err
