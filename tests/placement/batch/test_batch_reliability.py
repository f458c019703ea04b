"""Issue 16, the batch's side: a results file with rows it cannot trust stops the run
(line, reason) unless --repair-results; a missing schedule file is solved again; one batch
at a time per results file; a killed batch takes its pool's workers with it."""
import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placement.batch.run import BatchError, ResultsFileError, run_batch
from placement.batch.files import ResultsLock
from placement.cli import main
from placement.traces.generate import generate
from placement.model.schedule import Schedule

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def done(tmp_path: Path) -> tuple[Path, Path]:
    """Three small instances, solved once into r.csv."""
    folder = tmp_path / "inst"
    folder.mkdir()
    for k in range(3):
        generate(jobs=2, cluster="star:2", seed=k).save(folder / f"g{k}.json")
    out = tmp_path / "r.csv"
    go(folder, out)
    return folder, out


def go(folder: Path, out: Path, **kw):
    return run_batch([str(folder / "*.json")], solver="greedy", out_csv=out, progress=False, **kw)


def rows(out: Path) -> list[dict[str, str]]:
    with out.open(newline="") as f:
        return list(csv.DictReader(f))


def spoil(out: Path, line: int, old: bytes, new: bytes) -> None:
    lines = out.read_bytes().split(b"\n")
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    out.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("old, new, reason", [
    (b"g1.json", b"g1\xff.json", "instance: bytes that are not UTF-8 text"),
    (b"g1.json", b"g1\x00.json", "instance: a NUL byte"),
    (b",feasible,", b",feasibel,", "status: unknown 'feasibel'"),
    (b",feasible,", b",feasible,abc", "objective: not a number"),
    (b",greedy,", b",greedy,x,", "26 fields, a batch row has 25"),
])
def test_a_bad_row_stops_the_run_unless_repair_results(done, capsys, old, new, reason):
    folder, out = done
    spoil(out, 3, old, new)
    spoiled = out.read_bytes()
    with pytest.raises(ResultsFileError, match=f"line 3: {reason}"):
        go(folder, out)
    code, text, err = _cli(capsys, folder, out)
    assert code == 2 and text == "" and f"line 3: {reason}" in err and "--repair-results" in err
    assert out.read_bytes() == spoiled                      # untouched
    code, text, err = _cli(capsys, folder, out, "--repair-results")
    assert code == 0 and "repaired   line 3 of" in text and "1 solved, 0 failed, 2 skipped" in text
    assert sorted(Path(r["instance"]).name for r in rows(out)) == ["g0.json", "g1.json", "g2.json"]


def _cli(capsys, folder, out, *extra):
    code = main(["batch", str(folder / "*.json"), "--solver", "greedy", "--out", str(out), "--no-progress", *extra])
    text, err = capsys.readouterr()
    return code, text, err


def test_binary_garbage_is_reported_and_repaired(done):
    folder, out = done
    with out.open("ab") as f:
        f.write(bytes(range(256)) * 3 + b"\n\x00\x00\n")
    with pytest.raises(ResultsFileError, match="line 5"):
        go(folder, out)
    again = go(folder, out, repair_results=True)
    assert again.repaired and again.rows == () and len(rows(out)) == 3


def test_a_foreign_file_is_never_repaired(done):
    folder, out = done
    out.write_text("a,b\n1,2\n")
    with pytest.raises(BatchError, match="r.csv: line 1: exists but is not a batch CSV"):
        go(folder, out, repair_results=True)
    assert out.read_text() == "a,b\n1,2\n"


def test_a_results_file_saved_by_a_spreadsheet_resumes(done):
    folder, out = done
    out.write_bytes(b"\xef\xbb\xbf" + out.read_bytes().replace(b"\n", b"\r\n"))   # a BOM and CRLF
    assert go(folder, out).skipped == 3                 # was: "not a batch CSV (its header differs)"


def test_a_lock_that_cannot_be_taken_is_one_line(done, capsys):
    folder, out = done
    out.with_name(f".{out.name}.lock").mkdir()          # was: IsADirectoryError, a traceback
    code, text, err = _cli(capsys, folder, out)
    assert code == 2 and err.startswith("placement: error: ") and "cannot take the lock" in err
    assert err.count("\n") == 1


def test_an_unusable_out_is_refused_before_anything_runs(done):
    folder, out = done
    before = (folder / "g0.json").read_bytes()
    with pytest.raises(BatchError, match="is the input file"):
        run_batch([str(folder / "*.json")], solver="greedy", out_csv=folder / "g0.json", progress=False)
    with pytest.raises(BatchError, match="is a directory"):
        run_batch([str(folder / "*.json")], solver="greedy", out_csv=folder, progress=False)
    assert (folder / "g0.json").read_bytes() == before


def test_a_missing_schedule_file_is_solved_again(done):
    folder, out = done
    schedule = out.parent / rows(out)[1]["schedule"]
    schedule.unlink()
    again = go(folder, out)
    assert again.missing_schedules == 1 and [Path(r["instance"]).name for r in again.rows] == ["g1.json"]
    assert schedule.is_file()


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff not json", b'{"allocations": "cut'])
def test_an_unreadable_schedule_file_is_solved_again(done, garbage):
    folder, out = done
    schedule = out.parent / rows(out)[0]["schedule"]
    schedule.write_bytes(garbage)
    again = go(folder, out)
    assert again.missing_schedules == 1 and [Path(r["instance"]).name for r in again.rows] == ["g0.json"]
    Schedule.load(schedule)  # written anew


def test_one_batch_at_a_time_and_a_dead_ones_lock_is_taken_over(done):
    folder, out = done
    with ResultsLock(out):
        with pytest.raises(BatchError, match=f"in use by another batch \\(pid {os.getpid()}"):
            go(folder, out)
    stale = out.with_name(f".{out.name}.lock")
    stale.write_text("999999\n")                            # left by a killed batch: no one holds it
    assert go(folder, out).skipped == 3
    assert not stale.exists() and not list(out.parent.glob("*.tmp"))


def _workers(parent: int) -> set[int]:
    """Pids of the spawned pool workers whose parent is ``parent``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"spawn_main" in cmdline:
            found.add(int(entry.name))
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(pid)
    return alive


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_batch_ends_its_pool_workers(tmp_path, how):
    for k in range(4):
        # load 3: the greedy start does not meet the bound, so each solve stays inside HiGHS
        generate(jobs=30, cluster="racks:2x4", load=3.0, seed=k).save(tmp_path / f"g{k}.json")
    p = subprocess.Popen([sys.executable, "-m", "placement.cli", "batch", str(tmp_path / "g*.json"), "--solver",
                          "exact", "--time-limit", "60", "--workers", "2", "--no-progress", "--out",
                          str(tmp_path / "r.csv")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    workers: set[int] = set()
    deadline = time.time() + 20
    while len(workers) < 2 and time.time() < deadline:
        time.sleep(0.2)
        workers = _workers(p.pid)
    assert len(workers) == 2
    p.send_signal(how)
    p.communicate(timeout=20)
    end = time.time() + 5
    while _alive(workers) and time.time() < end:
        time.sleep(0.1)
    assert _alive(workers) == set()
    assert p.returncode == (143 if how == signal.SIGTERM else -signal.SIGKILL)
