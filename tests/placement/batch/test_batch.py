"""Batch solving: same rows whatever the executor, failures recorded, resume, CLI exit codes."""
import csv
import json
import shutil
import sys
from pathlib import Path

import pytest

from placement.batch import run as batch
from placement.batch.run import COLUMNS, TIME_COLUMNS, BatchError, run_batch
from placement.cli import main
from placement.model.evaluate import validate
from placement.traces.generate import generate
from placement.model.instance import Instance
from placement.model.schedule import Schedule
from placement.offline.solve import solve

from ..conftest import EXAMPLES


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Four generated instances and one shipped example."""
    d = tmp_path / "inst"
    d.mkdir()
    for k in range(4):
        generate(jobs=3, cluster="star:2", seed=k).save(d / f"g{k}.json")
    shutil.copy(EXAMPLES / "local.json", d / "local.json")
    return d


def read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def stable(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rows without the timings, which differ from run to run."""
    return [{k: v for k, v in r.items() if k not in TIME_COLUMNS} for r in rows]


def go(folder: Path, out: Path, **kw):
    kw.setdefault("solver", "rounding")
    return run_batch([str(folder / "*.json")], out_csv=out, progress=False, **kw)


def test_one_and_two_workers_write_the_same_rows(folder, tmp_path):
    one = go(folder, tmp_path / "a" / "r.csv", workers=1)
    two = go(folder, tmp_path / "b" / "r.csv", workers=2)
    assert one.solved == two.solved == 5 and one.failed == two.failed == 0
    rows_a, rows_b = read(tmp_path / "a" / "r.csv"), read(tmp_path / "b" / "r.csv")
    assert list(rows_a[0]) == list(COLUMNS)
    assert stable(rows_a) == stable(rows_b)
    assert [r["instance"] for r in rows_a] == sorted(str(p.resolve()) for p in folder.glob("*.json"))
    for row in rows_a:
        assert row["status"] in ("feasible", "optimal") and row["valid"] == "true" and row["error"] == ""
        assert (row["status"] == "optimal") == (float(row["gap"]) <= 1e-9)  # optimal only when it meets the bound
        assert float(row["time_total"]) > 0 and float(row["time_lp"]) > 0
        written = Schedule.load(tmp_path / "a" / row["schedule"])
        instance = Instance.load(row["instance"])
        assert validate(instance, written) == []
        assert float(row["objective"]) == pytest.approx(solve(instance, seed=0).objective)
        assert written.to_dict() == Schedule.load(tmp_path / "b" / row["schedule"]).to_dict()


def test_bad_files_and_solver_errors_are_recorded_and_the_rest_solved(folder, tmp_path, monkeypatch):
    (folder / "broken.json").write_text("{")
    shutil.copy(EXAMPLES / "local.valid.json", folder / "schedule.json")   # a schedule, not an instance
    real_solve = batch.solve

    def flaky(instance, **kw):
        if instance.name == "star2_j3_s1":
            raise RuntimeError("boom")
        return real_solve(instance, **kw)

    monkeypatch.setattr(batch, "solve", flaky)
    summary = go(folder, tmp_path / "r.csv")
    errors = {Path(p).name: e for p, e in summary.failures}
    assert summary.solved == 4 and summary.failed == 3 and not summary.all_solved
    assert "not valid JSON" in errors["broken.json"]
    assert "unknown key" in errors["schedule.json"]
    assert errors["g1.json"] == "RuntimeError: boom"
    rows = {Path(r["instance"]).name: r for r in read(tmp_path / "r.csv")}
    assert rows["g1.json"]["status"] == "error" and rows["g1.json"]["schedule"] == ""
    assert all(rows[n]["valid"] == "true" for n in ("g0.json", "g2.json", "g3.json", "local.json"))


def test_resume_skips_done_rows_and_redoes_missing_or_cut_ones(folder, tmp_path):
    out = tmp_path / "r.csv"
    go(folder, out)
    first = read(out)
    again = go(folder, out)
    assert again.rows == () and again.skipped == 5 and read(out) == first

    # delete one row -> only that instance is solved
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in first if not r["instance"].endswith("g2.json"))
    redo = go(folder, out)
    assert [Path(r["instance"]).name for r in redo.rows] == ["g2.json"] and redo.skipped == 4
    assert stable(read(out)) == stable(first)

    # an interrupted write leaves a partial last line: that row is not done
    text = out.read_text()
    out.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 40])
    cut = go(folder, out)
    assert [Path(r["instance"]).name for r in cut.rows] == ["local.json"]
    assert stable(read(out)) == stable(first)


def test_failed_rows_are_kept_unless_retry_failed(folder, tmp_path):
    out = tmp_path / "r.csv"
    (folder / "broken.json").write_text("{")
    go(folder, out)
    kept = go(folder, out)
    assert kept.rows == () and kept.skipped_failed == 1 and not kept.all_solved
    (folder / "broken.json").unlink()
    generate(jobs=3, cluster="star:2", seed=9).save(folder / "broken.json")     # fixed in place
    retried = go(folder, out, retry_failed=True)
    assert [Path(r["instance"]).name for r in retried.rows] == ["broken.json"] and retried.all_solved
    assert [r["error"] for r in read(out)] == [""] * 6


def test_other_solvers_share_the_csv_and_same_names_get_distinct_schedules(tmp_path):
    for sub in ("x", "y"):
        (tmp_path / sub).mkdir()
        generate(jobs=3, cluster="star:2", seed=0 if sub == "x" else 5, name="same").save(tmp_path / sub / "i.json")
    out = tmp_path / "out" / "r.csv"
    run_batch([str(tmp_path / "*" / "i.json")], solver="greedy", out_csv=out, progress=False)
    run_batch([str(tmp_path / "x" / "i.json")], solver="lp-bound", out_csv=out, progress=False)
    rows = read(out)
    assert [(Path(r["instance"]).parent.name, r["solver"]) for r in rows] == [
        ("x", "greedy"), ("x", "lp-bound"), ("y", "greedy")]
    greedy = [r["schedule"] for r in rows if r["solver"] == "greedy"]
    assert greedy[0] == "schedules/same.greedy.json" and greedy[1].startswith("schedules/same-")
    bound = rows[1]
    assert bound["status"] == "bound" and bound["schedule"] == "" and float(bound["lower_bound"]) > 0
    assert bound["error"] == "" and bound["valid"] == ""


def test_dask_local_cluster_gives_the_local_objectives(folder, tmp_path):
    pytest.importorskip("distributed", reason='the dask executor needs pip install "placement[dask]"')
    local = go(folder, tmp_path / "l.csv")
    dask = go(folder, tmp_path / "d.csv", executor="dask", workers=2)
    assert dask.solved == 5
    assert stable(read(tmp_path / "d.csv")) == stable(read(tmp_path / "l.csv"))
    assert {r["instance"]: r["objective"] for r in dask.rows} == {r["instance"]: r["objective"] for r in local.rows}


def test_dask_missing_names_the_extra(folder, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(BatchError, match=r'pip install "placement\[dask\]"'):
        go(folder, tmp_path / "r.csv", executor="dask")


def test_bad_arguments(folder, tmp_path):
    with pytest.raises(BatchError, match="no file matches 'nope/"):
        run_batch([str(folder / "*.json"), "nope/*.json"], solver="greedy", out_csv=tmp_path / "r.csv")
    for kw, message in [({"workers": 0}, "workers"), ({"trials": 0}, "trials"), ({"solver": "magic"}, "solver"),
                        ({"address": "tcp://h:8786"}, "--executor dask"), ({"time_limit": -1}, "time limit")]:
        with pytest.raises(BatchError, match=message):
            go(folder, tmp_path / "r.csv", **kw)
    (tmp_path / "foreign.csv").write_text("a,b\n1,2\n")
    with pytest.raises(BatchError, match="not a batch CSV"):
        go(folder, tmp_path / "foreign.csv")
    assert not (tmp_path / "r.csv").exists()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_codes_and_summary(folder, tmp_path, capsys):
    out = str(tmp_path / "r.csv")
    code, text, _ = run(capsys, "batch", str(folder / "*.json"), "--solver", "greedy", "--out", out, "--no-progress")
    assert code == 0 and "instances  5: 5 solved, 0 failed, 0 skipped" in text and "mean gap" in text
    (folder / "broken.json").write_text(json.dumps({"name": "x"}))
    code, text, err = run(capsys, "batch", str(folder / "*.json"), "--solver", "greedy", "--out", out, "--no-progress")
    assert code == 1 and "1 failed, 5 skipped" in text and "broken.json: slot_seconds: missing required key" in err
    code, text, _ = run(capsys, "batch", str(folder / "*.json"), "--solver", "greedy", "--out", out, "--no-progress")
    assert code == 1 and "1 of them failed: --retry-failed" in text
    code, _, err = run(capsys, "batch", str(tmp_path / "none*.json"), "--solver", "greedy", "--out", out)
    assert code == 2 and err.startswith("placement: error: no file matches") and "none*.json" in err
    code, _, err = run(capsys, "batch", str(folder / "*.json"), "--solver", "greedy", "--out", out, "--workers", "0")
    assert code == 2 and "workers must be a positive integer" in err


def test_pools_get_the_largest_files_first(tmp_path):
    """Longest-processing-time first: with several workers the batch ends on small files;
    a file that vanished sorts last (its load error becomes its row)."""
    for name, size in (("a", 10), ("b", 300), ("c", 50)):
        (tmp_path / f"{name}.json").write_text("x" * size)
    files = [str(tmp_path / f"{n}.json") for n in "abc"] + [str(tmp_path / "gone.json")]
    assert [Path(f).stem for f in batch._largest_first(files)] == ["b", "c", "a", "gone"]


def _math_threads_seen() -> dict:
    import os

    return {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")}


def test_pool_workers_get_their_share_of_math_threads(monkeypatch):
    """Two workers on this machine get cpu_count // 2 BLAS threads each (at least 1); a
    user's own setting is kept, and the client's environment is restored afterwards."""
    import os

    from placement.executors import executor

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    with executor("local", None, 2) as (pool, _):
        seen = pool.submit(_math_threads_seen).result()
    assert seen == {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // 2)), "OPENBLAS_NUM_THREADS": "3"}
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["OPENBLAS_NUM_THREADS"] == "3"
