"""The LP-rounding policy's partitions on a Dask cluster decide exactly as on the thread
pool, through the library and through ``placement simulate --executor dask``."""
import json
import logging
import sys
from pathlib import Path

import pytest

from placement.cli import main
from placement.model.clusters import racks
from placement.online.lp_policy import LPRoundingPolicy
from placement.simulate import simulate
from placement.traces import read_joblist

TRACES = Path(__file__).resolve().parents[3] / "instances" / "traces"


def run(executor=None) -> tuple[list, int]:
    """12 slots of the Philly sample's first arrivals on 4 racks, partitions of 6 jobs: the
    allocations of every slot, and the most partitions a decision had (so the test knows
    the work was split)."""
    policy = LPRoundingPolicy(jobs_per_partition=6, threads=2, executor=executor)
    most = 0
    decide = policy.decide

    def counted(view):
        nonlocal most
        placed = decide(view)
        most = max(most, int(policy.last_timings["partitions"]))
        return placed

    policy.decide = counted
    jobs = [job for job in read_joblist(TRACES / "philly-200-s1.csv") if job.arrival < 12]
    result = simulate(jobs, topology=racks(4, 4), slot_seconds=300, policy=policy, horizon=12)
    return [(slot.t, slot.allocations) for slot in result.schedule.slots], most


def test_dask_decisions_equal_the_thread_pool_slot_by_slot():
    distributed = pytest.importorskip("distributed")
    local, parts = run()
    assert parts >= 3 and sum(len(allocations) for _, allocations in local) > 0
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                  silence_logs=logging.ERROR) as cluster, distributed.Client(cluster) as client:
        on_client, _ = run(client)                                   # scatter + submit(pure=False) + gather
        on_executor, _ = run(client.get_executor(pure=False))        # the generic Executor.submit path
    for runs in (on_client, on_executor):
        assert len(runs) == len(local)
        for here, there in zip(local, runs):
            assert there == here, f"slot {here[0]} differs"


def simulate_cli(tmp_path: Path, *flags: str) -> dict:
    out = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
    code = main(["simulate", "--trace", str(TRACES / "philly-30-s3.csv"), "--cluster", "racks:4x8",
                 "--horizon", "10", "--out", str(out), *flags])
    assert code == 0
    return json.loads(out.read_text())["lp-rounding"]


def test_cli_dask_local_cluster_scores_as_local(tmp_path):
    pytest.importorskip("distributed")
    local = simulate_cli(tmp_path)
    remote = simulate_cli(tmp_path, "--executor", "dask", "--dask-workers", "2")
    for key in ("jct", "unfinished", "report", "reconfigurations", "utilisation"):
        assert remote[key] == local[key], key


def test_cli_without_dask_says_how_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)     # import distributed -> ImportError
    code = main(["simulate", "--trace", str(TRACES / "philly-30-s3.csv"), "--cluster", "racks:4x8",
                 "--horizon", "2", "--executor", "dask"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ['placement: error: --executor dask needs dask.distributed: '
                                 'pip install "placement[dask]"']


@pytest.mark.parametrize("flags, message", [
    (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler and --dask-workers need --executor dask"),
    (["--executor", "dask", "--scheduler", "tcp://127.0.0.1:1", "--dask-workers", "2"], "--dask-workers sizes"),
    (["--executor", "dask", "--dask-workers", "0"], "--dask-workers must be >= 1"),
])
def test_cli_executor_flags_that_do_not_go_together(flags, message, capsys):
    code = main(["simulate", "--trace", str(TRACES / "philly-30-s3.csv"), "--cluster", "racks:4x8",
                 "--horizon", "2", *flags])
    assert code == 2 and message in capsys.readouterr().err
