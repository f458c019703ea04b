"""Typed instances for the GPU-type tests of the slot rules and the online policies
(docs/model.md 'GPU types'): a hand-made one in the shape of
tests/placement/model/test_gpu_types.py, and random ones drawn from
:func:`placement.traces.generate.generate` with machine types and per-type tables added."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from placement.model.instance import Instance, InstanceError, Job
from placement.model.speed import SpeedTable, TypedSpeed
from placement.traces.generate import generate


def small(jobs: list[dict] | None = None, horizon: int = 6) -> Instance:
    """Two A100 machines of 2 GPUs and one T4 machine of 4 under one switch; by default one
    job 'bert' of up to 2 workers, 3x faster on A100."""
    machines = [{"id": "a1", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "a2", "capacity": {"gpu": 2}, "local_gbps": 100, "gpu_type": "a100"},
                {"id": "t1", "capacity": {"gpu": 4}, "local_gbps": 100, "gpu_type": "t4"}]
    return Instance.from_dict({
        "name": "typed-small", "slot_seconds": 60, "horizon": horizon, "resources": ["gpu"],
        "topology": {"root": "s", "machines": machines, "switches": [{"id": "s"}],
                     "links": [{"a": "s", "b": m["id"], "gbps": 100} for m in machines]},
        "jobs": jobs if jobs is not None else [typed_job("bert")]})


def typed_job(id: str, *, arrival: int = 0, work: float = 1000, workers: int = 2, min_workers: int = 1,
              a100: float = 3.0, t4: float | None = 1.0) -> dict:
    """A job document whose rate per worker is ``a100`` on A100 and ``t4`` on T4 (no T4
    table when None), spread 20% slower."""
    ws = range(min_workers, workers + 1)
    by_type = {g: {"local": [r * w for w in ws], "spread": [0.8 * r * w for w in ws]}
               for g, r in (("a100", a100), ("t4", t4)) if r is not None}
    return {"id": id, "arrival": arrival, "work_batches": work, "batch_seconds": 1, "worker": {"gpu": 1},
            "ps": {}, "min_workers": min_workers, "max_workers": workers, "worker_gbps": 1, "ps_gbps": 2,
            "speed": {"by_type": by_type}}


def random_typed(seed: int, *, jobs: int = 24, cluster: str = "racks:2x4",
                 types: tuple[str, ...] = ("a100", "v100", "t4"), by_rack: bool = False) -> Instance:
    """A generated instance whose machines take ``types`` in turn (per machine, or per rack
    with ``by_rack``); about half the jobs get a per-type table (a random speed-up per
    type, some types left out), a quarter one table for every type, the rest stay linear."""
    inst = generate(jobs=jobs, cluster=cluster, seed=seed)
    rng = np.random.default_rng(seed)
    topo = inst.topology
    racks = {m.id: topo.ancestors(m.id)[1] if by_rack else m.id for m in topo.machines}
    order = list(dict.fromkeys(racks.values()))
    machines = tuple(replace(m, gpu_type=types[order.index(racks[m.id]) % len(types)]) for m in topo.machines)
    topo = replace(topo, machines=machines)
    out = []
    for job in inst.jobs:
        coin = rng.random()
        if coin < 0.5:
            table = _linear_table(inst, job, 1.0)
            by_type = [(g, _scaled(table, float(rng.uniform(0.3, 3.0)))) for g in types if rng.random() < 0.8]
            candidate = replace(job, speed=TypedSpeed(tuple(sorted(by_type)))) if by_type else job
        elif coin < 0.75:
            candidate = replace(job, speed=_linear_table(inst, job, 1.0))
        else:
            candidate = job
        out.append(candidate if _runs(inst, topo, candidate) else job)
    return replace(inst, topology=topo, jobs=tuple(out), name=f"typed-{seed}")


def _linear_table(inst: Instance, job: Job, factor: float) -> SpeedTable:
    ws = range(job.min_workers, job.max_workers + 1)
    local = tuple(factor * w / job.batch_time(inst.best_local_gbps) for w in ws)
    spread = tuple(factor * w / job.batch_time(job.worker_gbps) for w in ws)
    return SpeedTable(job.min_workers, local, ((2, spread),))


def _scaled(table: SpeedTable, factor: float) -> SpeedTable:
    return SpeedTable(table.min_workers, tuple(factor * r for r in table.local),
                      tuple((c, tuple(factor * r for r in row)) for c, row in table.spread))


def _runs(inst: Instance, topo, job: Job) -> bool:
    """Does the typed cluster accept ``job`` (its types can hold it)?"""
    try:
        Instance(inst.slot_seconds, inst.horizon, inst.resources, topo, (job,))
    except InstanceError:
        return False
    return True
