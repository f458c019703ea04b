"""isolated_jct: a floor under every finished job's JCT, met exactly by a job alone that fits locally."""
from __future__ import annotations

import pytest

from placement.model.evaluate import isolated_jct, score
from placement.traces.generate import generate
from placement.offline.greedy import greedy
from placement.offline.solve import solve

from .. import builders as B


@pytest.mark.parametrize("seed", range(8))
def test_no_finished_job_beats_its_isolated_jct(seed: int) -> None:
    inst = generate(jobs=12, cluster="racks:2x2", seed=seed, load=1.5)
    for schedule in (greedy(inst), solve(inst, seed=seed, trials=4).schedule):
        report = score(inst, schedule)
        for outcome in report.jobs:
            if outcome.finished:
                job = inst.jobs[inst.job_index[outcome.id]]
                assert outcome.jct >= isolated_jct(inst, job) - 1e-9


@pytest.mark.parametrize("restart", [0.0, 4.0, 10.0])
def test_a_job_alone_on_its_best_machine_meets_the_floor(restart: float) -> None:
    # One machine, local 16 Gbps; tau 0.5 s, 500 MB gradient: theta = 0.5 + 8/16 = 1.0 s.
    # 2 workers do 2 batches per running second; 10-s slots; 45 batches need 22.5 s of running.
    topo = B.star(B.machine("m0", local_gbps=16))
    inst = B.instance(topo, B.job(batch_seconds=0.5, gradient_mb=500, work_batches=45, max_workers=2,
                                  restart_seconds=restart), T=6)
    floor = isolated_jct(inst, inst.jobs[0])
    # restart 0: 22.5 s -> 3 slots; 4: 6 + 10 + 10 >= 22.5 -> 3 slots; 10: first slot does nothing -> 4 slots.
    assert floor == {0.0: 30.0, 4.0: 30.0, 10.0: 40.0}[restart]
    assert score(inst, greedy(inst)).jobs[0].jct == floor


def test_floor_holds_when_a_long_job_ends_within_round_off_of_a_slot_boundary() -> None:
    # Found by review: 193 slots of summed progress drift ~1e-11 slots from the exact value; the floor
    # must not round the other way (the schedule completes in slot 192: JCT 1930 s).
    U, dt, restart, theta, slots = 10, 10.0, 7.001846473562871, 1.003178602992344, 193
    job = B.job(batch_seconds=theta, gradient_mb=0.0, work_batches=19169.05075241244, max_workers=U,
                restart_seconds=restart)
    inst = B.instance(B.single(B.machine("m0", gpu=16, cpu=16)), job, T=slots + 2, delta=dt)
    report = score(inst, B.every(range(slots), [("j", "m0", U, U)]))
    assert report.jobs[0].finished
    assert isolated_jct(inst, inst.jobs[0]) <= report.jobs[0].jct
