"""Property tests: instance and schedule files round-trip exactly."""
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from placement.model.clusters import racks
from placement.model.instance import Instance, Job
from placement.model.schedule import Allocation, Schedule, Slot

ids = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=6)
pos = st.one_of(st.integers(1, 10**6), st.floats(1e-3, 1e6, allow_nan=False, allow_infinity=False))
# demands <= 2 of capacities >= 8, so min_workers <= 4 always fits on one machine; a positive
# amount is at least 1e-6 (docs/limits.md)
nonneg = st.one_of(st.integers(0, 2), st.floats(1e-6, 2, allow_nan=False, allow_infinity=False))


@st.composite
def instances(draw):
    topo = racks(draw(st.integers(1, 3)), draw(st.integers(1, 3)),
                 capacity={"gpu": 8, "cpu": 64, "mem": 512})
    horizon = draw(st.integers(1, 20))
    jobs = []
    for name in draw(st.lists(ids, min_size=0, max_size=5, unique=True)):
        lo = draw(st.integers(1, 4))
        worker_gbps = draw(pos)   # PSs per worker (worker_gbps / ps_gbps) at most 1000: docs/limits.md
        jobs.append(Job(
            id=name, arrival=draw(st.integers(0, horizon - 1)), work_batches=draw(pos),
            batch_seconds=draw(pos), worker={"gpu": draw(nonneg), "cpu": draw(nonneg)},
            ps={"cpu": draw(nonneg)}, max_workers=lo + draw(st.integers(0, 4)),
            worker_gbps=worker_gbps, ps_gbps=max(draw(pos), worker_gbps / 1000), gradient_mb=draw(nonneg), min_workers=lo,
            weight=draw(pos), restart_seconds=draw(nonneg)))
    return Instance(slot_seconds=draw(pos), horizon=horizon, resources=("gpu", "cpu", "mem"),
                    topology=topo, jobs=tuple(jobs), name=draw(ids))


@settings(max_examples=60, deadline=None)
@given(instances())
def test_instance_round_trip(tmp_path_factory, inst):
    doc = inst.to_dict()
    assert Instance.from_dict(json.loads(json.dumps(doc))) == inst
    path = tmp_path_factory.mktemp("i") / "x.json"
    inst.save(path)
    again = Instance.load(path)
    assert again == inst and again.to_dict() == doc


allocs = st.builds(Allocation, ids, ids, st.integers(0, 100), st.integers(0, 100))
schedules = st.builds(
    Schedule, st.lists(st.builds(Slot, st.integers(-5, 50), st.lists(allocs, max_size=4).map(tuple)),
                       max_size=6).map(tuple),
    st.one_of(st.none(), ids),
    st.dictionaries(st.sampled_from(["solver", "objective", "seed"]), st.integers(0, 9)))


@settings(max_examples=100, deadline=None)
@given(schedules)
def test_schedule_round_trip(tmp_path_factory, sched):
    assert Schedule.from_dict(json.loads(json.dumps(sched.to_dict()))) == sched
    path = tmp_path_factory.mktemp("s") / "s.json"
    sched.save(path)
    assert Schedule.load(path) == sched
