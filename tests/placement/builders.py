"""Small builders for hand-made instances and schedules in the MODEL.md tests.

Test modules import it relatively: ``from . import builders as B``.

Defaults are chosen so that a test only states what it is about:

- machines have ``{"gpu": 8, "cpu": 16}`` and ``local_gbps`` 400;
- a job arrives at 0, has huge ``work_batches`` (never finishes by accident),
  ``batch_seconds`` 1, no gradient, worker ``{"gpu": 1}``, PS ``{"cpu": 1}``,
  1..8 workers, ``worker_gbps`` = ``ps_gbps`` = 1 (kappa 1), weight 1, no restart;
- an instance has resources ``("gpu", "cpu")``, ``slot_seconds`` 10, horizon 4.
"""
from __future__ import annotations

import json
import math
import re
from typing import Callable, Iterable

from placement.model.evaluate import Violation
from placement.model.instance import Instance, Job
from placement.online.scheduler import OnlineScheduler
from placement.model.progress import ProgressTracker
from placement.model.schedule import Allocation, Schedule, Slot
from placement.model.topology import Link, Machine, Switch, Topology

RESOURCES = ("gpu", "cpu")
CAPACITY = {"gpu": 8, "cpu": 16}


def machine(id: str, local_gbps: float = 400, **capacity: float) -> Machine:
    return Machine(id, dict(capacity) if capacity else dict(CAPACITY), local_gbps)


def single(m: Machine | None = None) -> Topology:
    """A one-machine cluster (no switches, no links)."""
    return Topology((m or machine("m0"),))


def star(*machines: Machine, gbps: float | dict[str, float] = 100) -> Topology:
    """Machines (default m0, m1) under one switch ``sw``; ``gbps`` is each machine link's
    capacity, a number or ``{machine: gbps}`` (missing machines: 100)."""
    ms = machines or (machine("m0"), machine("m1"))
    per = gbps if isinstance(gbps, dict) else {m.id: gbps for m in ms}
    links = tuple(Link(m.id, "sw", per.get(m.id, 100)) for m in ms)
    return Topology(tuple(ms), (Switch("sw"),), links, "sw")


def two_racks(machine_gbps: float = 100, rack_gbps: float | tuple[float, float] = 100,
              local_gbps: float = 400) -> Topology:
    """spine -- tor0 -- {a0, a1};  spine -- tor1 -- {b0, b1}.

    Link names used in assertions: a0-tor0, a1-tor0, b0-tor1, b1-tor1, tor0-spine, tor1-spine.
    """
    r0, r1 = rack_gbps if isinstance(rack_gbps, tuple) else (rack_gbps, rack_gbps)
    ms = tuple(machine(i, local_gbps) for i in ("a0", "a1", "b0", "b1"))
    links = (Link("a0", "tor0", machine_gbps), Link("a1", "tor0", machine_gbps),
             Link("b0", "tor1", machine_gbps), Link("b1", "tor1", machine_gbps),
             Link("tor0", "spine", r0), Link("tor1", "spine", r1))
    return Topology(ms, (Switch("spine"), Switch("tor0"), Switch("tor1")), links, "spine")


def job(id: str = "j", **kw) -> Job:
    base = dict(arrival=0, work_batches=1e9, batch_seconds=1, worker={"gpu": 1}, ps={"cpu": 1},
                max_workers=8, worker_gbps=1, ps_gbps=1)
    base.update(kw)
    return Job(id=id, **base)


def instance(topology: Topology, *jobs: Job, T: int = 4, delta: float = 10,
             resources: Iterable[str] = RESOURCES, name: str = "test") -> Instance:
    return Instance(slot_seconds=delta, horizon=T, resources=tuple(resources),
                    topology=topology, jobs=tuple(jobs) or (job(),), name=name)


def sched(*slots: tuple[int, list[tuple[str, str, int, int]]]) -> Schedule:
    """``sched((0, [("j", "m0", 2, 1)]), (1, [...]))``: slots kept exactly as listed
    (duplicates too), so rule-0 cases can be written."""
    return Schedule(tuple(Slot(t, tuple(Allocation(*a) for a in allocs)) for t, allocs in slots))


def every(ts: Iterable[int], allocs: list[tuple[str, str, int, int]]) -> Schedule:
    """The same allocations in each slot of ``ts``."""
    return sched(*((t, list(allocs)) for t in ts))


# ----- assertions on violations ----------------------------------------------------------

def text(v: Violation) -> str:
    return f"{v.subject} {v.message}"


def numbers(s: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", s)]


def mentions(v: Violation, *items: str | float) -> bool:
    """Every string item occurs in the subject/message, every number occurs as a number
    (in any format: 10, 10.0, 1e1) up to a relative 1e-6."""
    s = text(v)
    found = numbers(s)
    for it in items:
        if isinstance(it, str):
            if it not in s:
                return False
        elif not any(math.isclose(x, it, rel_tol=1e-6, abs_tol=1e-12) for x in found):
            return False
    return True


def of_rule(violations: list[Violation], rule: int) -> list[Violation]:
    return [v for v in violations if v.rule == rule]


def one(violations: list[Violation], rule: int, slot: int | None) -> Violation:
    """The single violation of ``rule`` in ``slot``; fails with the full list otherwise."""
    hits = [v for v in violations if v.rule == rule and v.slot == slot]
    assert len(hits) == 1, f"expected one rule-{rule} violation in slot {slot}, got " + \
        "; ".join(map(str, violations))
    return hits[0]


def drive(inst: Instance, make_policy: Callable, *, mode: str = "reoptimise", restart_at: int | None = None,
          slots: int | None = None, **scheduler_options) -> tuple[list[dict], int]:
    """Run an OnlineScheduler like a cluster manager: submit on arrival, report the model's
    progress, finish completed jobs; restart it from its JSON state before slot ``restart_at``
    (checking the state round-trips). Returns the allocations of every slot and the number of
    decisions the scheduler dropped."""
    sched = OnlineScheduler(inst.topology, resources=inst.resources, policy=make_policy(),
                            slot_seconds=inst.slot_seconds, mode=mode, **scheduler_options)
    tracker = ProgressTracker(inst)
    out, dropped = [], 0
    for t in range(slots or inst.horizon):
        if t == restart_at:
            state = json.loads(json.dumps(sched.state()))
            sched = OnlineScheduler.from_state(state, make_policy())
            assert sched.state() == state
        for job in inst.jobs:
            if job.arrival == t:
                sched.submit(job)
        placed = sched.step(t)
        dropped += len(sched.dropped)
        out.append(placed)
        tracker.advance(t, placed)
        for j in placed:
            sched.report(j, tracker.done[j])
            if j in tracker.completed:
                sched.finish(j)
    return out, dropped
