"""The residual capacity of one slot agrees with the referee on rules 1 and 4, and the
placement helpers return task sets the referee accepts."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement.model.evaluate import validate
from placement.model.instance import TOL_FIT, Instance
from placement.slots.residual import Residual
from placement.model.schedule import Allocation, Schedule, Slot
from placement.model.topology import Link, Machine, Switch, Topology

from ..conftest import EXAMPLES

from .. import builders as B


def one_slot(placed: dict[str, dict[str, tuple[int, int]]]) -> Schedule:
    return Schedule((Slot(0, tuple(Allocation(j, h, w, s) for j, tasks in placed.items()
                                   for h, (w, s) in tasks.items())),))


def rules_1_4(instance: Instance, placed) -> list:
    return [v for v in validate(instance, one_slot(placed)) if v.rule in (1, 4)]


# ----- random small racks clusters and task sets ------------------------------------------
half = st.integers(1, 12).map(lambda k: k / 2)  # exact binary fractions: no boundary noise


@st.composite
def clusters(draw) -> Instance:
    n_racks = draw(st.integers(1, 3))
    machines, switches, links = [], [Switch("spine")], []
    for r in range(n_racks):
        switches.append(Switch(f"tor{r}"))
        links.append(Link(f"tor{r}", "spine", draw(half)))
        for i in range(draw(st.integers(1, 3))):
            m = Machine(f"r{r}m{i}", {"gpu": draw(st.integers(1, 4)), "cpu": draw(st.integers(2, 8))},
                        draw(st.sampled_from([50, 100, 400])))
            machines.append(m)
            links.append(Link(m.id, f"tor{r}", draw(half)))
    topo = Topology(tuple(machines), tuple(switches), tuple(links), "spine")
    jobs = []
    for k in range(draw(st.integers(1, 4))):
        jobs.append(B.job(f"j{k}", worker={"gpu": 1, "cpu": draw(st.sampled_from([0, 0.5, 1]))},
                          ps={"cpu": draw(st.sampled_from([0.5, 1, 2]))},
                          worker_gbps=draw(half), ps_gbps=draw(half),
                          max_workers=draw(st.integers(1, 8))))
    return B.instance(topo, *jobs, T=1)


@st.composite
def instance_and_tasks(draw):
    inst = draw(clusters())
    ids = [m.id for m in inst.topology.machines]
    task_sets = []
    for job in inst.jobs:
        hs = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True))
        task_sets.append((job, {h: (draw(st.integers(0, 3)), draw(st.integers(0, 3))) for h in hs}))
    return inst, task_sets


@settings(max_examples=150, deadline=None)
@given(instance_and_tasks())
def test_fits_iff_the_validator_finds_no_capacity_or_network_violation(case):
    inst, task_sets = case
    res = Residual(inst)
    placed: dict[str, dict] = {}
    for job, tasks in task_sets:
        expected = not rules_1_4(inst, {**placed, job.id: tasks})
        alone = not rules_1_4(inst, {job.id: tasks})
        assert res.fits(job, tasks) == expected
        if expected:
            res.place(job, tasks)
            placed[job.id] = tasks
        else:
            with pytest.raises(ValueError):
                res.place(job, tasks)
        # the same tasks on an empty slot: the verdict of the job alone
        assert Residual(inst).fits(job, tasks) == alone


@settings(max_examples=60, deadline=None)
@given(instance_and_tasks())
def test_remove_gives_back_exactly_what_place_took(case):
    inst, task_sets = case
    res = Residual(inst)
    placed = []
    for job, tasks in task_sets:
        if res.fits(job, tasks):
            res.place(job, tasks)
            placed.append((job, tasks))
    for job, tasks in reversed(placed):
        assert res.remove(job.id) == {h: v for h, v in tasks.items() if v[0] or v[1]}
    np.testing.assert_allclose(res.free, res.cap, atol=1e-12)
    np.testing.assert_allclose(res.link_free, res.link_cap, atol=1e-12)
    assert res.remove("never-placed") == {}


@settings(max_examples=100, deadline=None)
@given(instance_and_tasks(), st.integers(1, 8), st.data())
def test_helpers_return_placements_the_referee_accepts(case, workers, data):
    inst, task_sets = case
    res = Residual(inst)
    placed = {}
    for job, tasks in task_sets[1:]:  # fill part of the slot first
        if res.fits(job, tasks):
            res.place(job, tasks)
            placed[job.id] = tasks
    job = task_sets[0][0]
    node = data.draw(st.sampled_from([None, *inst.topology.nodes]))
    exact = res.find(job, workers, within=node)
    if exact is not None:
        assert sum(a for a, _ in exact.values()) == workers
    for tasks in (exact, res.best_local(job, workers, within=node),
                  res.best_spread(job, workers, within=node)):
        if tasks is None:
            continue
        w = sum(a for a, _ in tasks.values())
        assert job.min_workers <= w <= min(workers, job.max_workers)
        assert sum(s for _, s in tasks.values()) == job.min_ps(w)
        if node is not None:
            assert set(tasks) <= set(res.machines_below(node))
        assert res.fits(job, tasks)
        verdict = validate(inst, one_slot({**placed, job.id: tasks}))
        # the others' task sets are random (their shape may be wrong); this job's must be right
        assert [v for v in verdict if v.rule != 3 or v.subject == f"job {job.id}"] == []


# ----- hand-made cases -----------------------------------------------------------------------
def test_a_local_job_loads_no_link_even_on_a_tiny_link():
    inst = B.instance(B.star(gbps=0.001), B.job("j", worker_gbps=5, ps_gbps=5))
    res = Residual(inst)
    res.place(inst.jobs[0], {"m0": (4, 4)})
    assert (res.link_free == res.link_cap).all()
    assert not res.fits(inst.jobs[0], {"m0": (1, 0), "m1": (0, 1)})


def test_reservations_stop_at_the_actual_lca_not_higher():
    inst = B.instance(B.two_racks(machine_gbps=10, rack_gbps=1), B.job("j", worker_gbps=2, ps_gbps=3))
    res = Residual(inst)
    res.place(inst.jobs[0], {"a0": (2, 0), "a1": (1, 1)})
    links = {f"{l.a}-{l.b}": i for i, l in enumerate(inst.topology.links)}
    assert res.link_free[links["a0-tor0"]] == pytest.approx(10 - 4)
    assert res.link_free[links["a1-tor0"]] == pytest.approx(10 - 5)
    assert res.link_free[links["tor0-spine"]] == 1  # LCA is tor0: the uplink carries nothing
    res.remove("j")
    # across racks the LCA is the spine, so each rack uplink carries its tasks: 4 > 1
    assert not res.fits(inst.jobs[0], {"a0": (2, 0), "b0": (0, 1)})


def test_local_prefers_given_machine_then_fastest_then_tightest():
    ms = (B.machine("slow", 100), B.machine("fast", 400), B.machine("fast2", 400))
    j = B.job("j")
    inst = B.instance(B.star(*ms), j, B.job("other"))
    res = Residual(inst)
    res.place(inst.jobs[1], {"fast2": (3, 0)})  # fast2 now the tighter fast machine
    assert res.local(j, 2) == {"fast2": (2, 2)}
    assert res.local(j, 2, prefer="slow") == {"slow": (2, 2)}
    assert res.local(j, 6) == {"fast": (6, 6)}  # fast2 has 5 GPUs left
    assert res.local(j, 9) is None


def test_spread_uses_the_smallest_subtree_and_puts_ps_beside_workers():
    inst = Instance.load(EXAMPLES / "bottleneck.json")
    z, q = inst.jobs
    res = Residual(inst)
    assert res.local(z, 4) is None
    tasks = res.find(z, 4)
    assert inst.topology.lca(tasks) in ("tor0", "tor1")
    assert all(w == s for w, s in tasks.values())  # kappa 1: each machine carries its PSs
    res.place(q, {"r0m0": (1, 1)})  # rack 0 can no longer hold four workers
    assert set(res.find(z, 4)) == {"r1m0", "r1m1"}
    res.place(z, res.find(z, 4))
    assert res.find(z, 4) is None  # the spine links (5 Gbps) cannot carry z across racks


def test_beside_places_ps_on_worker_machines_first_then_elsewhere():
    inst = B.instance(B.two_racks(), B.job("j", ps={"cpu": 8}))
    res = Residual(inst)
    j = inst.jobs[0]
    assert res.beside(j, {"a0": 2}, within="tor0") == {"a0": (2, 2)}
    assert res.beside(j, {"a0": 3}, within="tor0") == {"a0": (3, 2), "a1": (0, 1)}
    assert res.beside(j, {"a0": 3}, within="a0") is None  # a0 holds only two 8-cpu PSs
    assert res.beside(j, {"a0": 9}, within="tor0") is None  # 9 GPUs on an 8-GPU machine


def test_max_workers_that_fit_on_a_machine_a_switch_and_the_cluster():
    fillers = [B.job(f"f{h}") for h in ("a0", "a1", "b0", "b1")]
    inst = B.instance(B.two_racks(machine_gbps=3, rack_gbps=100),
                      B.job("j", min_workers=2, max_workers=20), *fillers)
    res = Residual(inst)
    j = inst.jobs[0]
    assert res.max_workers_that_fit(j, "a0") == 8  # local: links do not matter
    # spread under tor0: each machine link carries 3 Gbps = 3 tasks (workers + PSs), so
    # spreading (at most 3 + 3 tasks) never beats one machine's 8 workers
    assert res.max_workers_that_fit(j, "tor0") == 8
    res.place(fillers[0], {"a0": (5, 0)})
    res.place(fillers[1], {"a1": (6, 0)})
    # a0 3 GPUs and a1 2 left, 3 tasks per link: 3 workers (and 3 PSs) at most
    assert res.max_workers_that_fit(j, "tor0") == 3
    for f, h in zip(fillers[2:], ("b0", "b1")):
        res.place(f, {h: (7, 0)})
    assert res.max_workers_that_fit(j, "b0") == 0  # one GPU left, min_workers 2
    # GPUs left 3, 2, 1, 1 and 3 tasks per machine link: 6 workers, e.g. a0 (3, 0),
    # a1 (2, 1), b0 (1, 2), b1 (0, 3); 7 would need 14 tasks > 12
    assert res.max_workers_that_fit(j, "spine") == 6


def test_snapshot_and_restore():
    inst = B.instance(B.two_racks(), B.job("j"))
    res = Residual(inst)
    state = res.snapshot()
    res.place(inst.jobs[0], {"a0": (1, 0), "b0": (0, 1)})
    res.restore(state)
    assert (res.free == res.cap).all() and (res.link_free == res.link_cap).all()
    assert res.held("j") is None


# ----- the kept tables (speed) answer as computing afresh would ----------------------------
third = st.integers(1, 30).map(lambda k: k / 3)  # inexact binary fractions: rounding matters


@st.composite
def fractional(draw) -> Instance:
    """A three-level tree (some machines one level up) with fractional capacities and
    demands, so sums and quotients round."""
    machines, switches, links = [], [Switch("spine")], []
    for p in range(draw(st.integers(1, 2))):
        switches.append(Switch(f"pod{p}"))
        links.append(Link(f"pod{p}", "spine", draw(third)))
        for r in range(draw(st.integers(1, 2))):
            tor = f"tor{p}{r}"
            switches.append(Switch(tor))
            links.append(Link(tor, f"pod{p}", draw(third)))
            for i in range(draw(st.integers(1, 3))):
                machines.append(Machine(f"m{p}{r}{i}", {"gpu": draw(st.integers(2, 6)), "cpu": 3 + draw(third)},
                                        draw(st.sampled_from([100, 400]))))
                links.append(Link(machines[-1].id, tor, draw(third)))
        if draw(st.booleans()):
            machines.append(Machine(f"m{p}x", {"gpu": 4, "cpu": 3 + draw(third)}, 400))
            links.append(Link(machines[-1].id, f"pod{p}", draw(third)))
    topo = Topology(tuple(machines), tuple(switches), tuple(links), "spine")
    jobs = [B.job(f"j{k}", worker={"gpu": draw(st.integers(0, 2)), "cpu": draw(third) / 4},
                  ps={"cpu": draw(third) / 4}, worker_gbps=draw(third) / 3, ps_gbps=draw(third) / 3,
                  max_workers=draw(st.integers(1, 9)))
            for k in range(draw(st.integers(2, 4)))]
    return B.instance(topo, *jobs, T=1)


def reference_best_local(res: Residual, job, cap: int, within, prefer):
    """The most workers on one machine, by trying every count from the most down."""
    room = res.worker_room(job, res._within(within))
    for w in range(min(cap, job.max_workers, int(room.max(initial=0))), job.min_workers - 1, -1):
        ps = job.min_ps(w)
        need = w * res.demand(job)[0] + ps * res.demand(job)[1]
        cand = res._within(within)
        fitting = cand[(need <= res.free[cand] + 1e-9 / 2).all(axis=1)]
        if len(fitting):
            if prefer is not None and res.instance.topology.machine_index[prefer] in fitting.tolist():
                return {prefer: (w, ps)}
            left = ((res.free[fitting] - need) / np.where(res.cap[fitting] > 0, res.cap[fitting], 1)).sum(axis=1)
            h = fitting[np.lexsort((left, -res.local_gbps[fitting]))[0]]
            return {res.machine_ids[h]: (w, ps)}
    return None


def could_hold(res, job, v: int, workers: int) -> bool:
    """The spread search's cheap necessary condition, computed afresh: room by capacity and
    by each machine's link path under node ``v`` (the oracle of its kept tables)."""
    hs = res._below[v]
    alpha, beta = res.demand(job)
    total = workers * alpha + job.min_ps(workers) * beta
    if not (total <= np.maximum(res.free[hs], 0).sum(axis=0) + TOL_FIT).all():
        return False
    room = res.worker_room(job, hs)
    by_link = np.floor((np.maximum(res._link_room(hs, v), 0) + TOL_FIT) / job.worker_gbps)
    return bool(np.minimum(room, by_link).sum() >= workers)


@settings(max_examples=80, deadline=None)
@given(fractional(), st.data())
def test_tables_kept_across_changes_answer_as_computed_afresh(inst, data):
    res = Residual(inst)
    ids = [m.id for m in inst.topology.machines]
    nodes = [None, *inst.topology.nodes]
    for _ in range(data.draw(st.integers(3, 12))):
        job = data.draw(st.sampled_from(inst.jobs))
        within = data.draw(st.sampled_from(nodes))
        prefer = data.draw(st.sampled_from([None, *ids]))
        cap = data.draw(st.integers(1, 9))
        alpha, beta = res.demand(job)
        per = np.floor((np.maximum(res.free[:, alpha > 0], 0) + 1e-9 / 2) / alpha[alpha > 0])
        if (alpha > 0).any():
            assert (res.worker_room(job) == np.minimum(per.min(axis=1), 10**9)).all()
        assert res.best_local(job, cap, within=within, prefer=prefer) == \
            reference_best_local(res, job, cap, within, prefer)
        top = None if within is None else res._node_index[within]
        for w in range(1, job.max_workers + 1):
            assert list(res._candidates(job, top, w)) == \
                [v for v in res._under(top)[0].tolist() if could_hold(res, job, v, w)]
        action = data.draw(st.sampled_from(["place", "remove", "snapshot", "clear"]))
        if action == "place" and res.held(job.id) is None:
            tasks = res.best_spread(job, cap, within=within) or res.best_local(job, cap, within=within)
            if tasks:
                res.place(job, tasks)
        elif action == "remove":
            res.remove(job.id)
        elif action == "snapshot":
            state = res.snapshot()
            other = data.draw(st.sampled_from(inst.jobs))
            if res.held(other.id) is None and (tasks := res.best_local(other, 9)):
                res.place(other, tasks)
            res.restore(state)
        else:
            res.clear()


@settings(max_examples=80, deadline=None)
@given(fractional(), st.data())
def test_plain_int_counts_take_the_same_path_as_numpy_counts(inst, data):
    """fits/place on Python ints (the Python-float path) and on NumPy ints (the array
    path) agree, and leave bit-identical free capacity and bandwidth."""
    fast, slow = Residual(inst), Residual(inst)
    ids = [m.id for m in inst.topology.machines]
    for job in inst.jobs:
        hs = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=4, unique=True))
        tasks = {h: (data.draw(st.integers(0, 3)), data.draw(st.integers(0, 2))) for h in hs}
        as_numpy = {h: (np.int64(w), np.int64(s)) for h, (w, s) in tasks.items()}
        assert fast.fits(job, tasks) == slow.fits(job, as_numpy)
        if fast.fits(job, tasks):
            fast.place(job, tasks)
            slow.place(job, as_numpy)
        assert fast.free.tobytes() == slow.free.tobytes()
        assert fast.link_free.tobytes() == slow.link_free.tobytes()


def test_the_search_sees_bandwidth_given_back_and_taken():
    inst = B.instance(B.two_racks(machine_gbps=4), B.job("j", max_workers=4, ps_gbps=2),
                      B.job("k", worker_gbps=3, ps_gbps=3))
    j, k = inst.jobs
    tor0 = Residual(inst)._node_index["tor0"]
    res = Residual(inst)
    res.place(k, {"a0": (1, 0), "a1": (0, 1)})  # 3 of each 4-Gbps machine link in rack 0
    assert res.best_spread(j, 4, within="tor0") is None
    assert list(res._candidates(j, tor0, 3)) == []
    res.remove("k")
    assert res.spread(j, 4, within="tor0") == {"a0": (2, 1), "a1": (2, 1)}  # 4 Gbps on each
    res.place(k, {"a0": (1, 0), "a1": (0, 1)})
    assert res.spread(j, 4, within="tor0") is None and list(res._candidates(j, tor0, 3)) == []


def test_try_place_takes_what_fits_in_one_pass_and_leaves_the_rest_untouched():
    inst = B.instance(B.star(), B.job("a"), B.job("b"), T=1)
    res = Residual(inst)
    a, b = inst.jobs
    assert res.try_place(a, {"m0": (6, 1)})
    free, links = res.free.copy(), res.link_free.copy()
    assert not res.try_place(b, {"m0": (3, 0)})            # 6 + 3 GPUs > 8
    assert not res.try_place(b, {"m0": (1, 0), "m1": (200, 0)})
    np.testing.assert_array_equal(res.free, free)
    np.testing.assert_array_equal(res.link_free, links)
    assert res.held("b") is None
    assert res.try_place(b, {"m0": (2, 0), "m1": (2, 1)})
    twin = Residual(inst)
    twin.place(a, {"m0": (6, 1)})
    twin.place(b, {"m0": (2, 0), "m1": (2, 1)})
    np.testing.assert_array_equal(res.free, twin.free)
    np.testing.assert_array_equal(res.link_free, twin.link_free)


@settings(max_examples=60, deadline=None)
@given(fractional(), st.data())
def test_rooms_without_a_job_are_the_rooms_after_taking_it_out(inst, data):
    """worker_rooms_without (the candidate step's bulk answer) equals, job by job, the room
    measured after really removing the job, on a subset of machines."""
    res = Residual(inst)
    for job in inst.jobs:
        if data.draw(st.booleans()):
            tasks = res.best_spread(job, data.draw(st.integers(1, 9))) or res.best_local(job, 9)
            if tasks:
                res.place(job, tasks)
    n = len(inst.topology.machines)
    hs = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1))), dtype=np.int64)
    rooms = res.worker_rooms_without(list(inst.jobs), hs)
    for row, job in enumerate(inst.jobs):
        state = res.snapshot()
        res.remove(job.id)
        assert rooms[row].tolist() == res.worker_room(job, hs).tolist()
        res.restore(state)
    assert res.worker_rooms_without([], hs).shape == (0, len(hs))
