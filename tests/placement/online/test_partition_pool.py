"""The LP-rounding policy's partitions on worker processes (PartitionPool) decide exactly
as on the thread pool, slot by slot; the cluster is shared once per change, and the pool
cleans up after itself."""
import json
from pathlib import Path

import pytest

from placement.cli import main
from placement.online.partition_pool import PartitionPool

from .test_lp_policy_dask import TRACES, run


def test_pool_decisions_equal_the_thread_pool_slot_by_slot():
    local, parts = run()
    assert parts >= 3 and sum(len(allocations) for _, allocations in local) > 0
    with PartitionPool(2) as pool:
        on_pool, _ = run(pool)
        again, _ = run(pool)          # a second run on the same workers: their cached cluster
        shared = list(pool._dir.iterdir())
    assert len(shared) == 1, "one cluster file at a time"
    assert not pool._dir.exists(), "closing the pool removes its files"
    for runs in (on_pool, again):
        assert len(runs) == len(local)
        for here, there in zip(local, runs):
            assert there == here, f"slot {here[0]} differs"


def test_cli_processes_scores_as_local(tmp_path: Path):
    def simulate_cli(*flags: str) -> dict:
        out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
        code = main(["simulate", "--trace", str(TRACES / "philly-30-s3.csv"), "--cluster", "racks:4x8",
                     "--horizon", "10", "--out", str(out), *flags])
        assert code == 0
        return json.loads(out.read_text())["lp-rounding"]

    local = simulate_cli()
    on_processes = simulate_cli("--executor", "processes", "--workers", "2")
    for key in ("jct", "unfinished", "report", "reconfigurations", "utilisation"):
        assert on_processes[key] == local[key], key


@pytest.mark.parametrize("flags, message", [
    (["--workers", "2"], "--workers needs --executor processes"),
    (["--executor", "processes", "--workers", "0"], "--workers must be >= 1, got 0"),
    (["--executor", "processes", "--dask-workers", "2"], "--scheduler and --dask-workers need --executor dask"),
])
def test_cli_executor_flags_that_do_not_go_together(flags, message, capsys):
    code = main(["simulate", "--trace", str(TRACES / "philly-30-s3.csv"), "--cluster", "racks:4x8",
                 "--horizon", "2", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"placement: error: {message}"]
