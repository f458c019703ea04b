"""Keep running jobs on their machines when a plan only renames them.

A window model places a job on a domain (a machine, or a switch to spread below) and its
decoder picks the machines among *interchangeable* ones — same capacity, GPU type, local bus,
parent switch and uplink — blind to which of them the job holds now. Followed as written,
such a plan moves a running job to machines that are no faster, charging it a restart
(MODEL.md 4); and when another job's plan names the machines it holds, rule b of the slot
rules can no longer keep them. Exchanging interchangeable machines everywhere in a slot's
plan changes no job's rate and no capacity or link load. So, before the slot rules read a
slot's plan, :func:`relabel` permutes machines (each to an interchangeable one) so that each
running job whose plan has exactly its previous per-machine (workers, PSs) counts, up to
such renaming, gets its previous machines back. Jobs are taken in the slot rules' priority
order; the machines a running job held are not moved for a job after it, nor machines
several jobs held (rule b may keep a job there even when its plan differs), nor machines
the plan overpacks.

What the slot rules then decide can still move a running job to machines only renamed:
another job's plan or the fill took the machines it held, on machines several jobs share.
So, last, :func:`keep_machines` permutes interchangeable machines in the slot's *decision*
(every job on a machine moves with it: the slot stays valid as it is) to give the most
running jobs their previous machines back.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

from placement.model.instance import Instance, cluster_cache
from placement.model.intent import JobIntent
from placement.model.topology import Topology

__all__ = ["keep_machines", "relabel"]


def relabel(instance: Instance, previous: Mapping[str, Mapping[str, tuple[int, int]]],
            intents: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    """``intents`` (job id -> :class:`JobIntent`) with interchangeable machines exchanged so
    that the jobs of ``order`` (ids, first served first) that ran last slot on ``previous``
    and are planned on the same per-machine counts get those machines back (module
    docstring). Intents whose tasks are not well formed are carried along unchanged and
    never realigned."""
    topo = instance.topology
    index = topo.machine_index
    # never moved: machines the plan overpacks (the slot rules sort them out) and machines
    # several jobs held (rule b may keep one of them there whatever its plan says)
    locked = _overpacked(instance, intents) | _shared(previous)
    moved: dict[str, str] = {}  # each machine the plan names -> the machine it is given now
    named: dict[str, str] = {}  # the inverse: each machine given now -> the one the plan names
    for job_id in order:
        prev = _previous_counts(previous, job_id, index)
        tasks = _counts(intents.get(job_id), index)
        if prev and tasks is not None:
            tasks = {moved.get(h, h): v for h, v in tasks.items()}
            swap = _alignment(topo, tasks, prev, locked) if tasks != prev else None
            if swap:  # compose: only the machines it exchanges change
                updates = [(named.get(x, x), y) for x, y in swap.items()]
                for original, now in updates:
                    moved[original], named[now] = now, original
                for original, now in updates:
                    if original == now:
                        del moved[original], named[now]
        locked.update(prev)
    return {j: _renamed(v, moved) for j, v in intents.items()} if moved else dict(intents)


def _previous_counts(previous: Mapping[str, Mapping[str, tuple[int, int]]], job_id: str,
                     index: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """The non-empty per-machine (workers, PSs) job ``job_id`` had last slot, on machines still there."""
    return {h: (int(w), int(s)) for h, (w, s) in (previous.get(job_id) or {}).items() if (w or s) and h in index}


def _shared(previous: Mapping[str, Mapping[str, tuple[int, int]]]) -> set[str]:
    """The machines that held tasks of two jobs or more last slot."""
    seen: set[str] = set()
    out: set[str] = set()
    for tasks in previous.values():
        for h, (w, s) in tasks.items():
            if w or s:
                (out if h in seen else seen).add(h)
    return out


def _overpacked(instance: Instance, intents: Mapping[str, Any]) -> set[str]:
    """The machines whose planned tasks (of the well-formed intents of known jobs) exceed
    their capacity."""
    index, load = instance.topology.machine_index, {}
    for job_id, intent in intents.items():
        tasks = _counts(intent, index)
        if tasks is None or job_id not in instance.job_index:
            continue
        job = instance.jobs[instance.job_index[job_id]]
        for h, (w, s) in tasks.items():
            need = load.setdefault(h, {})
            for r, a in job.worker.items():
                need[r] = need.get(r, 0.0) + w * a
            for r, b in job.ps.items():
                need[r] = need.get(r, 0.0) + s * b
    machines = instance.topology.machines
    return {h for h, need in load.items()
            if any(v > machines[index[h]].capacity.get(r, 0.0) + 1e-9 for r, v in need.items())}


def _counts(intent: Any, index: Mapping[str, int]) -> dict[str, tuple[int, int]] | None:
    """The non-empty per-machine (workers, PSs) of a well-formed intent, else None."""
    return _task_counts(getattr(intent, "tasks", None), index)


def _task_counts(raw: Any, index: Mapping[str, int]) -> dict[str, tuple[int, int]] | None:
    """The non-empty per-machine (workers, PSs) of well-formed tasks, else None."""
    if not isinstance(raw, Mapping):
        return None
    out = {}
    for h, pair in raw.items():
        if h not in index or not isinstance(pair, (tuple, list)) or len(pair) != 2:
            return None
        w, s = pair
        if not all(isinstance(x, Integral) and not isinstance(x, bool) and x >= 0 for x in (w, s)):
            return None
        if w or s:
            out[h] = (int(w), int(s))
    return out


def _alignment(topo: Topology, planned: dict[str, tuple[int, int]], prev: dict[str, tuple[int, int]],
               locked: set[str]) -> dict[str, str] | None:
    """A permutation (machine -> machine, moved ones only) of interchangeable, unlocked
    machines taking ``planned`` to ``prev``; None if there is none of this form: each
    planned machine goes to a previous machine of the same class and counts (itself when it
    is one), the previous machines the plan does not name to the planned ones it leaves."""
    pairs = _pairing(topo, planned, prev)
    if pairs is None:
        return None
    perm = {a: b for a, b in pairs.items() if a != b}
    # complete it to a permutation: what sat on the previous machines the plan leaves goes to
    # the planned machines freed, class by class
    freed: dict[tuple, list[str]] = {}
    taken = set(perm.values())
    for h in sorted(set(perm) - taken):
        freed.setdefault(_kind(topo, h), []).append(h)
    for h in sorted(taken - set(perm)):
        spare = freed.get(_kind(topo, h))
        if not spare:
            return None
        perm[h] = spare.pop(0)
    if any(h in locked for h in perm):
        return None
    return {a: b for a, b in perm.items() if a != b} or None


def _kind(topo: Topology, h: str) -> int:
    """Machine ``h``'s class: machines of one class have the same capacity, GPU type, local
    bus, parent and uplink, so exchanging them changes no rate or load (computed once per
    cluster)."""
    cache = cluster_cache(topo)
    kinds = cache.get("relabel classes")
    if kinds is None:
        keys: dict[tuple, int] = {}
        kinds = {}
        for m in topo.machines:
            parent = topo.parent(m.id)
            uplink = tuple(topo.links[i].gbps for i in topo.path_links(m.id, parent)) if parent is not None else ()
            kinds[m.id] = keys.setdefault((tuple(sorted(m.capacity.items())), m.gpu_type, m.local_gbps, parent,
                                           uplink), len(keys))
        cache["relabel classes"] = kinds
    return kinds[h]


def _renamed(intent: Any, perm: Mapping[str, str]) -> Any:
    """``intent`` with its machines (and a machine domain) renamed by ``perm``."""
    raw, domain = getattr(intent, "tasks", None), getattr(intent, "domain", None)
    if not isinstance(raw, Mapping) or not any(isinstance(h, str) and h in perm for h in raw):
        return intent  # a well-formed intent naming a moved machine as its domain names it in its tasks too
    tasks = {perm.get(h, h) if isinstance(h, str) else h: v for h, v in raw.items()}
    return JobIntent(perm.get(domain, domain) if isinstance(domain, str) else domain, tasks)


def keep_machines(instance: Instance, previous: Mapping[str, Mapping[str, tuple[int, int]]],
                  placed: Mapping[str, Mapping[str, tuple[int, int]]]) -> dict[str, dict[str, tuple[int, int]]]:
    """The slot's decision ``placed`` (job id -> machine -> (workers, PSs)) with machines
    exchanged for interchangeable ones (:func:`_kind`) so that running jobs decided on their
    previous per-machine counts, up to such renaming, keep their machines: a permutation of
    interchangeable machines moves every job on a machine with it, so it changes no rate, no
    capacity and no link load. Jobs decided where they ran are kept first (so none of them
    moves), then the others, most workers first; a job whose machines would clash with those
    already fixed moves as decided."""
    topo = instance.topology
    index = topo.machine_index
    image: dict[str, str] = {}   # machine as decided -> machine it becomes
    source: dict[str, str] = {}  # the inverse
    running = []
    for job_id, tasks in placed.items():
        new = _task_counts(tasks, index)
        prev = _previous_counts(previous, job_id, index)
        if new and prev:
            running.append((new != prev, -sum(w for w, _ in new.values()), new, prev))
    for _, _, new, prev in sorted(running, key=lambda r: r[:2]):
        pairs = _pairing(topo, new, prev)
        if pairs is not None and all(image.get(a, b) == b and source.get(b, a) == a for a, b in pairs.items()):
            image.update(pairs)
            source.update({b: a for a, b in pairs.items()})
    if all(a == b for a, b in image.items()):
        return {j: dict(v) for j, v in placed.items()}
    # complete it to a permutation: each other machine stays where it is when it can, else
    # goes to a machine of its class left free
    free: dict[int, list[str]] = {}
    for m in topo.machines:
        if m.id not in source and m.id not in image:
            image[m.id] = source[m.id] = m.id
    for m in topo.machines:
        if m.id not in source:
            free.setdefault(_kind(topo, m.id), []).append(m.id)
    for m in topo.machines:
        if m.id not in image:
            image[m.id] = free[_kind(topo, m.id)].pop(0)
    return {j: {image.get(h, h): v for h, v in tasks.items()} for j, tasks in placed.items()}


def _pairing(topo: Topology, new: dict[str, tuple[int, int]], prev: dict[str, tuple[int, int]]) -> dict[str, str] | None:
    """Each machine of ``new`` to a machine of ``prev`` of the same class and counts (itself
    first), all of both used; None if the counts differ class by class."""
    groups: dict[tuple, tuple[list[str], list[str]]] = {}
    for h, v in new.items():
        groups.setdefault((_kind(topo, h), v), ([], []))[0].append(h)
    for h, v in prev.items():
        groups.setdefault((_kind(topo, h), v), ([], []))[1].append(h)
    out: dict[str, str] = {}
    for src, dst in groups.values():
        if len(src) != len(dst):
            return None
        same = set(src) & set(dst)
        out.update({h: h for h in same})
        out.update(zip(sorted(set(src) - same), sorted(set(dst) - same)))
    return out
