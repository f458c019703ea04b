"""Building the window models fast (issue 18) without changing them: the configuration
model's vectorised options against the per-option loop they replace, what is shared per
cluster (and that it is shared read-only), and the Instance check's vectorised fit test."""
from __future__ import annotations

import dataclasses
import gc
import random

import numpy as np
import pytest

from placement.formulation.configuration import config_rate, formulate_configuration, worker_counts
from placement.formulation.domains import Domains, fit_table, local_gbps, subtrees
from placement.traces.generate import generate
from placement.model.instance import Instance, InstanceError, cluster_cache
from placement.model.speed import SpeedTable


def reference_options(instance, start, end, domains, later_domains, counts):
    """The configurations as the per-option loop made them before issue 18."""
    doms = Domains(instance)
    nodes = instance.topology.nodes
    out = []
    for j, job in enumerate(instance.jobs):
        if max(job.arrival, start) >= end:
            continue
        allow = None if domains is None else domains.get(job.id)
        fits = fit_table(job, instance)
        per_job = []
        for d, members in enumerate(doms.machines):
            if allow is not None and nodes[doms.node[d]] not in allow:
                continue
            local = bool(doms.is_local[d])
            if local:
                h = members[0]
                most, split = int(fits.local[h]), None
            else:
                useful = [h for h in members if fits.workers[h] >= 1 or fits.ps[h] >= 1]
                if len(useful) < 2:
                    continue
                h = useful[0]
                most = int(fits.workers[useful].sum())
                split = useful
            for w in worker_counts(job, most, counts):
                per_job.append((d, w, instance.slot_seconds * config_rate(instance, job, w, local, h), split))
        later = None if later_domains is None else later_domains.get(job.id)
        for t in range(max(job.arrival, start), end):
            for d, w, speed, split in per_job:
                if t > start and later is not None and nodes[doms.node[d]] not in later:
                    continue
                out.append((j, t, d, w, speed, split))
    return out


def with_tables(inst: Instance, seed: int) -> Instance:
    rng = random.Random(seed)
    jobs = []
    for job in inst.jobs:
        local = [rng.uniform(5, 20)]
        for _ in range(job.max_workers - job.min_workers):
            local.append(local[-1] + rng.uniform(0.5, 4))
        spread = tuple(r * rng.uniform(0.6, 1.0) for r in local)
        jobs.append(dataclasses.replace(job, speed=SpeedTable(job.min_workers, tuple(local), ((2, spread),))))
    return dataclasses.replace(inst, jobs=tuple(jobs))


@pytest.mark.parametrize("seed, tables, counts", [(0, False, "all"), (1, False, "powers"), (2, True, "powers"),
                                                  (3, True, "all")])
def test_configuration_options_are_those_of_the_per_option_loop(seed, tables, counts):
    inst = generate(jobs=12, cluster="racks:3x4", horizon=6, seed=seed)
    inst = with_tables(inst, seed) if tables else inst
    rng = random.Random(seed)
    nodes = inst.topology.nodes
    cases = [dict(start=0, end=None, domains=None, later_domains=None)]
    domains = {job.id: set(rng.sample(nodes, 5)) | {"nowhere"} for job in inst.jobs}
    later = {job.id: set(rng.sample(sorted(domains[job.id]), 2)) for job in inst.jobs}
    cases.append(dict(start=2, end=5, domains=domains, later_domains=later))
    for case in cases:
        _, dec = formulate_configuration(inst, counts=counts, **case)
        want = reference_options(inst, case["start"], case["end"] or inst.horizon, case["domains"],
                                 case["later_domains"], counts)
        got = list(zip(dec.o_job.tolist(), dec.o_slot.tolist(), dec.o_dom.tolist(), dec.o_workers.tolist()))
        assert got == [(j, t, d, w) for j, t, d, w, _, _ in want]
        # a spread option's machines that hold a task (the decoder packs into them); none for a local one
        assert [None if k < 0 else dec.splits[k].tolist() for k in dec.o_split.tolist()] == [split for *_, split in want]
        assert (dec.o_until == dec.o_slot + 1).all()  # per-slot model: each choice holds one slot
        problem, _ = formulate_configuration(inst, counts=counts, **case)
        speeds = -problem.G[:, : dec.n_opt].toarray().sum(axis=0)  # speed / remaining work, one entry each
        left = np.array([inst.jobs[j].work_batches for j, *_ in want])
        np.testing.assert_array_equal(speeds, np.array([s for *_, s, _ in want]) / left)


def test_what_depends_on_the_cluster_is_shared_read_only():
    inst = generate(jobs=6, cluster="racks:2x4", horizon=4, seed=5)
    part = dataclasses.replace(inst, jobs=inst.jobs[:3])
    assert Domains.of(part) is Domains.of(inst)
    assert subtrees(part, Domains.of(part)) is subtrees(inst, Domains.of(inst))
    assert part.capacity_matrix is inst.capacity_matrix and part.machine_kinds is inst.machine_kinds
    assert local_gbps(part.topology) is local_gbps(inst.topology)
    for arr in (inst.capacity_matrix, *inst.machine_kinds, Domains.of(inst).node, subtrees(inst, Domains.of(inst)).up,
                local_gbps(inst.topology)):
        assert not arr.flags.writeable
    fits = fit_table(inst.jobs[0], inst)
    fits.workers[:] = 0  # a caller's copy: the cached table is untouched
    assert (fit_table(inst.jobs[0], inst).workers > 0).any()
    turned = dataclasses.replace(inst, resources=inst.resources[::-1])  # a key of the cache, too
    np.testing.assert_array_equal(turned.capacity_matrix, inst.capacity_matrix[:, ::-1])


def test_a_cluster_cache_lives_as_long_as_its_topology():
    inst = generate(jobs=2, cluster="racks:2x2", horizon=2, seed=1)
    store = cluster_cache(inst.topology)
    assert cluster_cache(inst.topology) is store and "domains" not in store
    Domains.of(inst)
    assert "domains" in store
    from placement.model import instance as module
    key = id(inst.topology)
    del inst, store
    gc.collect()
    assert key not in module._CLUSTER


def test_the_vectorised_fit_check_names_the_first_job_that_cannot_run():
    inst = generate(jobs=8, cluster="racks:2x4", horizon=4, seed=2)
    jobs = list(inst.jobs)
    jobs[5] = dataclasses.replace(jobs[5], worker={"gpu": 1000})
    jobs[3] = dataclasses.replace(jobs[3], min_workers=10**4, max_workers=10**4)
    with pytest.raises(InstanceError, match=r"^jobs\[3\]\.min_workers: the whole cluster holds at most"):
        dataclasses.replace(inst, jobs=tuple(jobs))
    jobs[3] = inst.jobs[3]
    with pytest.raises(InstanceError, match=r"^jobs\[5\]\.worker: one worker"):
        dataclasses.replace(inst, jobs=tuple(jobs))
    jobs[5] = dataclasses.replace(jobs[5], worker={"gpu": 1}, ps={"cpu": 10**6})
    with pytest.raises(InstanceError, match=r"^jobs\[5\]\.ps: one ps"):
        dataclasses.replace(inst, jobs=tuple(jobs))


def reference_bound(instance, job, remaining, end):
    """job_bound over every machine, as before issue 18."""
    from placement.model.instance import COMPLETE, MB_TO_GB
    import math
    dt, machines = instance.slot_seconds, instance.topology.machines
    fits = fit_table(job, instance)
    thetas = job.batch_seconds + 2 * job.gradient_mb * MB_TO_GB / np.array([m.local_gbps for m in machines])
    ok = fits.local >= job.min_workers
    room = min(job.max_workers, int(fits.workers.sum()))
    if job.speed is not None:
        best = job.speed.best_rate(local=True, most_workers=int(fits.local.max()))
        if len(machines) > 1:
            best = max(best, job.speed.best_rate(local=False, most_workers=room))
    else:
        best = float((fits.local[ok] / thetas[ok]).max()) if ok.any() else 0.0
        if len(machines) > 1 and room >= job.min_workers:
            best = max(best, room / job.batch_time(job.worker_gbps))
    rate_cap = best * dt / remaining
    full = math.floor(COMPLETE / rate_cap) if rate_cap > 0 else 0
    packing = rate_cap * full * (full - 1) / 2 + (COMPLETE - full * rate_cap) * full
    return rate_cap, packing, end * dt + instance.unfinished_seconds(job, remaining) - full * dt


@pytest.mark.parametrize("cluster, tables", [("pai:24", False), ("pai:24", True), ("racks:2x4", False)])
def test_job_bounds_over_machine_classes_are_those_over_machines(cluster, tables):
    from placement.formulation.progress_block import job_bound
    inst = generate(jobs=15, cluster=cluster, horizon=4, seed=3)
    inst = with_tables(inst, 3) if tables else inst
    for job in inst.jobs:
        bound = job_bound(inst, job, job.work_batches * 0.7, 3)
        assert (bound.rate_cap, bound.packing, bound.overflow) == reference_bound(inst, job, job.work_batches * 0.7, 3)
