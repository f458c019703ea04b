"""The shipped examples: each valid schedule's score computed by hand, each invalid one's verdict."""
import pytest

from placement.model.evaluate import evaluate
from placement.model.instance import Instance
from placement.model.schedule import Schedule

from ..conftest import EXAMPLES


def run(name, kind):
    return evaluate(Instance.load(EXAMPLES / f"{name}.json"),
                    Schedule.load(EXAMPLES / f"{name}.{kind}.json"))


def test_local_valid():
    # a: 2 workers local, theta = 0.1 s -> 1200 batches/slot: slots 0,1 reach 2400 -> c=1, JCT 120.
    # b: theta = 0.2 + 2*250*0.008/100 = 0.24 s; slot 1 restarts: 2*(60-6)/0.24 = 450, then 500, 500
    #    -> 1450 at slot 3: JCT = 4*60 - 60 = 180, weight 2.
    violations, r = run("local", "valid")
    assert violations == []
    assert r.objective == pytest.approx(120 + 2 * 180)
    assert r.average_jct == pytest.approx(150) and r.makespan == pytest.approx(240)
    assert [j.completion_slot for j in r.jobs] == [1, 3]
    assert r.unfinished == 0 and r.reconfigurations == 2
    assert r.utilisation["gpu"] == pytest.approx((2 + 4 + 2 + 2) / (6 * 4))
    # cpu: a 2*2+2 = 6 in slots 0-1, b 6 in slots 1-3 -> 30 of 6*16
    assert r.utilisation["cpu"] == pytest.approx(30 / 96)


def test_local_invalid():
    violations, r = run("local", "invalid")
    assert [(v.rule, v.slot, v.subject) for v in violations] == [(2, 0, "job b"), (3, 1, "job a")]
    assert "before its arrival slot 1" in violations[0].message
    assert "no PS" in violations[1].message


def test_racks_valid():
    # x: 8 workers spread, theta = 0.1 + 2*25*0.008/2 = 0.3 -> 1600 batches/slot -> c=2, JCT 180.
    # y: arrives in slot 3, 2 local workers, theta 0.1 -> 1200 >= 600: c=3, JCT 60.
    violations, r = run("racks", "valid")
    assert violations == []
    assert r.objective == pytest.approx(240) and r.average_jct == pytest.approx(120)
    assert r.makespan == pytest.approx(240) and r.reconfigurations == 2
    assert r.utilisation["gpu"] == pytest.approx((3 * 8 + 2) / (5 * 8))


def test_racks_invalid():
    violations, r = run("racks", "invalid")
    assert [(v.rule, v.slot) for v in violations] == [(0, 7), (3, 0)]
    assert "needs 4 PS" in violations[1].message
    # scoring keeps the well-defined part: x ran slot 0 only (1600 of 4800 batches);
    # charge (5-0)*60 + 3200 * theta_local(0.1 + 2*25*0.008/100 = 0.104) / 8 = 341.6
    x = r.jobs[0]
    assert not x.finished and x.remaining_batches == pytest.approx(3200)
    assert x.jct == pytest.approx(300 + 3200 * 0.104 / 8)


def test_bottleneck_valid():
    # z: 4 workers in rack 0 (LCA tor0: no spine traffic), theta 0.1 + 2*10*0.008/2 = 0.18
    #    -> 4*60/0.18 = 1333.3/slot: c=1, JCT 120. q: local, 600 >= 500 -> c=0, JCT 60, weight 3.
    violations, r = run("bottleneck", "valid")
    assert violations == []
    assert r.objective == pytest.approx(120 + 3 * 60)
    assert r.average_jct == pytest.approx(90) and r.makespan == pytest.approx(120)
    assert r.utilisation["gpu"] == pytest.approx(9 / 24)


def test_bottleneck_invalid():
    violations, _ = run("bottleneck", "invalid")
    # z spans both racks: each ToR-spine link reserves 2*2 + 2*2 = 8 Gbps > 5, in slots 0 and 1
    assert [(v.rule, v.slot, v.subject) for v in violations] == [
        (4, 0, "link tor0-spine"), (4, 0, "link tor1-spine"),
        (4, 1, "link tor0-spine"), (4, 1, "link tor1-spine")]
    assert "reserved 8 Gbps > capacity 5 Gbps (jobs z)" in violations[0].message
