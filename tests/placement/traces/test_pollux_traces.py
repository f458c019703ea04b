"""The Pollux simulator's workloads and traces as jobs (placement.traces.pollux and
placement.traces.pollux_application).

``tests/data/pollux/traces/bert`` is an unchanged copy of the bert folder of the Pollux
simulator's traces (pollux-simulator, OSDI'21 artifact, Apache 2.0; 33 KB: its validation
tables have two epochs, bert's max_epochs), so these tests run without the shared copy.
The numbers below are the rows of its CSV files, written out so each rule is checked by
hand; benchmarks/check_pollux_traces.py compares the reader with the simulator's code.
"""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from placement.model.strict_json import InstanceError
from placement.integrations.measured_speed import (UNMEASURED, entry_placements, packed,
                                                   speed_table, spread_keys, useful_count)
from placement.simulate import simulate
from placement.online.registry import make_policy
from placement.traces import instance_from_jobs, pollux_cluster, read_pollux_workload
from placement.traces.pollux import LOCAL_GBPS, RESTART_SECONDS
from placement.traces.pollux_application import AppSettings, PolluxApplication

DATA = Path(__file__).resolve().parents[2] / "data" / "pollux"
TRACES = DATA / "traces"
WORKLOAD = DATA / "workload.csv"
HEADER = "name,time,application,num_replicas,batch_size\n"

# placements.csv rows of bert: placement -> local_bsz -> (step_time, sync_time)
ROWS = {
    (1,): {12: (0.9215156733989716, 0.013695754051208497)},
    (2,): {6: (0.586463674902916, 0.055930083513259884)},
    (3,): {4: (0.49704410135746, 0.078326096534729)},
    (4,): {12: (0.9571182131767273, 0.09286786985397338)},
    (1, 2): {4: (1.6960817873477936, 1.2992095260620116)},
    (2, 4): {8: (2.3712867945432663, 1.7320438232421873),
             11: (2.3917264491319656, 1.5968457107543945)},
}


@pytest.fixture(scope="module")
def bert() -> PolluxApplication:
    return PolluxApplication(TRACES / "bert")


def _workload(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "workload.csv"
    path.write_text(header + "".join(r + "\n" for r in rows))
    return path


# ----- the reader ------------------------------------------------------------------------
def test_application_defaults(bert):
    assert (bert.init_batch_size, bert.max_batch_size) == (12, 384)   # validation sizes
    assert (bert.min_local_bsz, bert.max_local_bsz) == (4, 12)         # placements.csv
    assert bert.max_epochs == 2 and bert.completion_epoch == 1


def test_iteration_time_with_accumulation_and_the_max_batch_cap(bert):
    # B 384 on (4, 2) = 6 GPUs: local 64, accum ceil(64/12)-1 = 5, atomic ceil(64/6) = 11
    # capped at floor(384 / 36) = 10; the placement is measured as its rotation "24".
    assert bert.batch_config(6, 384) == (10, 5)
    (s8, y8), (s11, y11) = ROWS[(2, 4)][8], ROWS[(2, 4)][11]
    step, sync = s8 + (s11 - s8) * 2 / 3, y8 + (y11 - y8) * 2 / 3
    assert bert.step_sync((4, 2), 10) == pytest.approx((step, sync), rel=1e-12)
    assert bert.iteration_time((4, 2), 384) == pytest.approx(step + 5 * (step - sync), rel=1e-12)
    assert bert.iteration_time((0, 2, 4), 384) == bert.iteration_time((4, 2), 384)


def test_one_gpu_accumulates_above_the_initial_batch_size():
    # With max_local_bsz 24, B 24 on one GPU would need no accumulation (local 24), but the
    # simulator accumulates at least once on one GPU above the initial batch size (12).
    app = PolluxApplication(TRACES / "bert", AppSettings(max_epochs=2, max_local_bsz=24))
    assert app.batch_config(1, 24) == (12, 1)
    step, sync = ROWS[(1,)][12]
    assert app.iteration_time((1,), 24) == pytest.approx(step + (step - sync), rel=1e-12)
    assert app.batch_config(1, 12) == (12, 0)   # at the initial batch size: none
    assert app.batch_config(2, 24) == (12, 0)


def test_unmeasured_configurations_raise(bert):
    with pytest.raises(ValueError, match="outside the 4..12 measured on placement"):
        bert.step_sync((4,), 13)
    with pytest.raises(ValueError, match="outside the measured configurations"):
        bert.step_sync((1,) * 16, 100)            # 16 nodes: interpolated, beyond the hull
    assert all(math.isfinite(v) for v in bert.step_sync((4,) * 5, 8))  # 5 nodes: interpolated


def test_total_iterations_interpolate_between_measured_batch_sizes(bert):
    # validation-*.csv, iteration at epoch 1: 12 -> 14774, 24 -> 7427, 384 -> 480
    assert bert.total_iterations(12) == 14774
    assert bert.total_iterations(384) == 480
    assert bert.total_iterations(18) == pytest.approx((14774 + 7427) / 2)
    with pytest.raises(ValueError, match="outside the measured 12..384"):
        bert.total_iterations(400)


def test_useful_count_rule(bert):
    # the largest count whose rate is at least half of count x the one-worker rate
    assert useful_count([1.0, 1.9, 2.0, 1.9, 2.6]) == 5      # 2.6 >= 0.5 x 5 x 1.0
    assert useful_count([1.0, 1.9, 1.4, 1.9, 2.4]) == 2      # 1.4 < 1.5, 1.9 < 2.0, 2.4 < 2.5
    assert useful_count([5.0]) == 1
    assert useful_count([1.0, None, 1.6]) == 3               # unmeasured counts are skipped
    with pytest.raises(ValueError, match="one-worker"):
        useful_count([None, 2.0])
    # B 12 allows 12 // 4 = 3 GPUs; rates 1/0.9215, 1/0.5865, 1/0.4970 (efficiency 0.62 at 3)
    rates = [1 / ROWS[(1,)][12][0], 1 / ROWS[(2,)][6][0], 1 / ROWS[(3,)][4][0]]
    assert [bert.rate(packed(c, 4), 12) for c in (1, 2, 3)] == pytest.approx(rates, rel=1e-12)
    assert bert.useful_count(12) == 3
    # B 384: up to 64 GPUs
    rates = [bert.rate(packed(c, 4), 384) for c in range(1, 65)]
    assert bert.useful_count(384) == max(c for c, r in enumerate(rates, 1) if r >= 0.5 * c * rates[0])
    capped = PolluxApplication(TRACES / "bert", AppSettings(max_epochs=2, optimus_max_replicas=1))
    assert capped.useful_count(384) == 1                  # ncf's single replica under Optimus


# ----- conversion ------------------------------------------------------------------------
def test_fixed_row_by_hand(bert):
    jobs = read_pollux_workload(WORKLOAD, TRACES, "fixed")
    assert [j.id for j in jobs] == ["bert-0", "bert-1", "bert-2"]
    j = jobs[0]                                   # bert-0,53,bert,6,384
    assert (j.arrival, j.min_workers, j.max_workers, j.work_batches) == (0, 6, 6, 480)
    assert (j.worker, j.ps, j.weight, j.restart_seconds) == ({"gpu": 1}, {}, 1, RESTART_SECONDS)
    # 6 GPUs on the fewest machines, (4, 2): see test_iteration_time_with_accumulation_...
    (s8, y8), (s11, y11) = ROWS[(2, 4)][8], ROWS[(2, 4)][11]
    step, sync = s8 + (s11 - s8) * 2 / 3, y8 + (y11 - y8) * 2 / 3
    packed_rate = 1 / (step + 5 * (step - sync))
    # rows: local (6 never fits one machine: its fewest machines), 2 machines, 4 machines
    assert j.speed.min_workers == 6 and [m for m, _ in j.speed.spread] == [2, 4]
    assert j.speed.local == pytest.approx((packed_rate,), rel=1e-12)
    assert j.speed.rate(6, 2) == j.speed.rate(6, 3) == pytest.approx(packed_rate, rel=1e-12)
    assert j.speed.rate(6, 4) == j.speed.rate(6, 6) == bert.rate((3, 1, 1, 1), 384)
    assert j.gradient_mb == 0 and j.batch_seconds == pytest.approx(6 / packed_rate, rel=1e-12)
    one = jobs[1]                                 # bert-1,154,bert,1,12: one GPU
    assert (one.arrival, one.work_batches, one.max_workers) == (2, 14774, 1)
    assert one.speed.local == one.speed.spread[0][1] == pytest.approx((1 / ROWS[(1,)][12][0],), rel=1e-12)
    assert jobs[2].arrival == 61                  # floor(3700 / 60)
    assert read_pollux_workload(WORKLOAD, TRACES, "fixed", slot_seconds=300)[2].arrival == 12


def test_tuned_row_by_hand(bert):
    j = read_pollux_workload(WORKLOAD, TRACES, "tuned")[1]   # bert-1, B 12: useful count 3
    assert (j.min_workers, j.max_workers, j.work_batches) == (1, 3, 14774)
    # local: (1,) at local_bsz 12, (2,) at 6, (3,) at 4, no accumulation
    assert j.speed.local == pytest.approx([1 / ROWS[(1,)][12][0], 1 / ROWS[(2,)][6][0],
                                           1 / ROWS[(3,)][4][0]], rel=1e-12)
    # spread (one row: 3 workers reach 2 machines only): (1,), (1, 1), (2, 1) = rotation "12"
    [(two, spread)] = j.speed.spread
    assert two == 2
    assert spread == pytest.approx([1 / ROWS[(1,)][12][0], bert.rate((1, 1), 12),
                                    1 / ROWS[(1, 2)][4][0]], rel=1e-12)
    assert j.ps_gbps == 3 * j.worker_gbps


@pytest.mark.parametrize("mode", ["fixed", "tuned"])
def test_tables_cover_every_count_and_equal_the_traces(bert, mode):
    """Every entry is positive, finite and the reader's rate on its placement (or, where the
    traces have nothing, UNMEASURED of the table's fastest rate)."""
    for j in read_pollux_workload(WORKLOAD, TRACES, mode):
        table, batch = j.speed, {"bert-0": 384, "bert-1": 12, "bert-2": 96}[j.id]
        assert (table.min_workers, table.max_workers) == (j.min_workers, j.max_workers)
        assert table.spread[0][0] == 2
        rows = {1: table.local, **dict(table.spread)}
        fastest = max(max(r) for r in rows.values())
        for (m, w), p in entry_placements(j.min_workers, j.max_workers, 4).items():
            entry = rows[m][w - j.min_workers]
            assert math.isfinite(entry) and entry > 0
            try:
                assert entry == bert.rate(p, batch), (j.id, m, w, p)
            except ValueError:
                assert entry == UNMEASURED * fastest
        # the job's own count on the fewest machines (its local entry when it fits one)
        assert table.rate(j.max_workers, 1) == bert.rate(packed(j.max_workers, 4), batch)
    if mode == "tuned":                           # 23 workers: rows of 2, 4, 8, 16 machines
        big = read_pollux_workload(WORKLOAD, TRACES, mode)[0]
        assert [m for m, _ in big.speed.spread] == [2, 4, 8, 16]
        assert big.speed.rate(23, 16) == bert.rate(packed(23, 4, 16), 384)
        assert big.speed.rate(9, 12) == bert.rate(packed(9, 4, 8), 384)   # row 8: 8 machines


def test_speed_table_rules():
    assert packed(9, 4) == (4, 4, 1) and packed(5, 4, 2) == (4, 1) and packed(4, 4, 3) == (2, 1, 1)
    for count, machines in ((5, 1), (3, 4)):
        with pytest.raises(ValueError, match="fit on"):
            packed(count, 4, machines)
    assert spread_keys(1) == (2,) and spread_keys(26) == (2, 4, 8, 16)
    assert spread_keys(26, nodes=6) == (2, 4)
    # (1, 1) unmeasured: a hole gets UNMEASURED x the fastest entry
    rates = {(1,): 1.0, (2,): 1.8, (3,): 2.4, (1, 1): None, (2, 1): 2.0}
    table = speed_table(rates.get, 1, 3, 4)
    assert table.local == (1.0, 1.8, 2.4)
    assert table.spread == ((2, (1.0, UNMEASURED * 2.4, 2.0)),)
    for hole in (None, 0.0, float("nan")):          # max_workers on the fewest machines
        with pytest.raises(ValueError, match=r"no measured rate for 3 workers on \(3,\)"):
            speed_table({**rates, (3,): hole}.get, 1, 3, 4)
    # a W that no machine holds is read on the fewest machines, in both classes
    gang = speed_table({(4, 1): 3.0, (2, 1, 1, 1): 2.0}.get, 5, 5, 4)
    assert gang.local == (3.0,) and gang.spread == ((2, (3.0,)), (4, (2.0,)))


@pytest.mark.parametrize("mode", ["fixed", "tuned"])
def test_all_reduce_jobs_have_one_ps_that_demands_nothing(mode):
    for j in read_pollux_workload(WORKLOAD, TRACES, mode):
        assert j.ps == {} and j.ps_gbps == j.max_workers * j.worker_gbps
        assert [j.min_ps(w) for w in range(1, j.max_workers + 1)] == [1] * j.max_workers
        assert j.min_ps(0) == 0


def test_cluster_and_a_short_simulation():
    topo = pollux_cluster(2, 4)
    assert [m.capacity for m in topo.machines] == [{"gpu": 4}] * 2
    assert all(m.local_gbps == LOCAL_GBPS for m in topo.machines)
    assert all(link.gbps == LOCAL_GBPS for link in topo.links)
    assert len(pollux_cluster().machines) == 16
    jobs = read_pollux_workload(WORKLOAD, TRACES, "tuned")[1:]   # two small jobs
    instance_from_jobs(jobs, topo, slot_seconds=60, name="pollux")  # strict checks pass
    result = simulate(jobs, topology=topo, policy=make_policy("greedy"), slot_seconds=60,
                      horizon=200)
    assert not result.unfinished


# ----- errors ----------------------------------------------------------------------------
def _error(call) -> InstanceError:
    with pytest.raises(InstanceError) as info:
        call()
    return info.value


def test_workload_errors_name_file_row_and_column(tmp_path):
    missing = tmp_path / "none.csv"
    e = _error(lambda: read_pollux_workload(missing, TRACES, "fixed"))
    assert (e.path, e.reason) == (str(missing), "no such file")
    cases = [
        ((HEADER.replace(",batch_size", ""), "a,1,bert,6"), "row 1:batch_size", "missing column"),
        ((HEADER, "a,1,bert,6,384", "b,x,bert,6,384"), "row 3:time", "must be a number"),
        ((HEADER, "a,-1,bert,6,384"), "row 2:time", "non-negative"),
        ((HEADER, "a,1,gpt,6,384"), "row 2:application", "unknown application 'gpt'"),
        ((HEADER, "a,1,bert,1.5,384"), "row 2:num_replicas", "positive integer"),
        ((HEADER, "a,1,bert,6,0"), "row 2:batch_size", "positive integer"),
        ((HEADER, "a,1,bert,6,768"), "row 2:batch_size", "outside the batch sizes 12..384"),
        ((HEADER, "a,1,bert,6,384", "a,2,bert,6,384"), "row 3:name", "duplicate job name"),
        ((HEADER, "a,1,bert,6"), "row 2", "4 cells"),
        ((HEADER, "a,1,bert,200,384"), "row 2:num_replicas", "more than the simulator's 64"),
        ((HEADER, "a,1,bert,5,12"), "row 2:num_replicas", "3 is outside the 4..12 measured"),
    ]
    for (header, *rows), where, reason in cases:
        path = _workload(tmp_path, *rows, header=header)
        e = _error(lambda: read_pollux_workload(path, TRACES, "fixed"))
        assert e.path == f"{path}:{where}" and reason in e.reason, (where, str(e))
    with pytest.raises(ValueError, match="mode must be one of"):
        read_pollux_workload(WORKLOAD, TRACES, "elastic")


def test_trace_errors_name_file_row_and_column(tmp_path):
    path = _workload(tmp_path, "a,1,bert,6,384")

    def traces(edit=None):
        root = tmp_path / f"traces{len(list(tmp_path.iterdir()))}"
        shutil.copytree(TRACES, root)
        if edit:
            edit(root / "bert")
        return root

    e = _error(lambda: read_pollux_workload(path, tmp_path / "nowhere", "fixed"))
    assert e.path == str(tmp_path / "nowhere" / "bert" / "placements.csv")
    assert e.reason.startswith("no such file") and f"{path}:row 2" in e.reason

    def drop_column(d):
        p = d / "placements.csv"
        p.write_text("\n".join(",".join(line.split(",")[:3]) for line in p.read_text().splitlines()))

    def bad_number(d):
        p = d / "scalability.csv"
        lines = p.read_text().splitlines()
        lines[4] = lines[4].replace(lines[4].split(",")[3], "fast")
        p.write_text("\n".join(lines) + "\n")

    def short_validation(d):
        p = d / "validation-96.csv"
        p.write_text("\n".join(p.read_text().splitlines()[:2]) + "\n")

    def bad_placement(d):
        p = d / "placements.csv"
        p.write_text(p.read_text() + "1x,4,1.0,0.5\n")

    def no_validation(d):
        for p in d.glob("validation-*.csv"):
            p.unlink()

    cases = [
        (drop_column, "placements.csv:row 1:sync_time", "missing column"),
        (bad_number, "scalability.csv:row 5:step_time", "must be a number, got 'fast'"),
        (short_validation, "validation-96.csv", "1 epochs, but bert runs 2"),
        (bad_placement, "placements.csv:row 542:placement", "GPUs per node as digits"),
        (no_validation, "validation-<batch size>.csv", "no such file"),
    ]
    for edit, where, reason in cases:
        root = traces(edit)
        e = _error(lambda: read_pollux_workload(path, root, "fixed"))
        assert e.path == str(root / "bert" / where) and reason in e.reason, (where, str(e))


def test_simulate_command_replays_a_pollux_workload(tmp_path, capsys):
    from placement.cli import main

    path = _workload(tmp_path, "bert-1,154,bert,1,12")
    args = ["simulate", "--trace", f"pollux:{path}", "--pollux-traces", str(TRACES),
            "--policy", "greedy", "--horizon", "400"]
    assert main(args + ["--pollux-mode", "tuned"]) == 0
    out = capsys.readouterr().out
    assert "jobs              1 (0 unfinished)" in out
    missing = tmp_path / "none.csv"
    assert main(["simulate", "--trace", f"pollux:{missing}", "--policy", "greedy"]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err
