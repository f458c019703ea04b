"""Candidate domains of the LP policy: the few places per job its window model may use,
so the model stays small enough to solve every slot.

*Candidate domains* per job, inside its partition: the domain it runs in now (no
reconfiguration needed), the ``local_candidates`` machines with the most room for it,
the ``spread_candidates`` smallest subtrees with the most room, and the root only when
there is one partition and no candidate rack could hold ``max_workers``. Room is
measured as if every job kept its current tasks, minus the job's own. The later
look-ahead slots, which only plan, keep two of them: the current domain (else the
roomiest machine) and the first rack.

GPU types (MODEL.md 8): room counts only the machines of the types the job runs on, the
subtrees are ranked per type by their room of that type, and every type the job runs on
keeps at least its roomiest machine and its first subtree (later slots too), so the window
model can choose the job's type. On a cluster without types this is the rule above.
"""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from placement.formulation.domains import worker_types
from placement.slots.residual import Residual
from placement.online.policy import View

__all__ = ["candidate_domains", "candidate_domains_each"]


def candidate_domains(view: View, parts: list[tuple[list[str], np.ndarray]], *, local_k: int, spread_k: int
                      ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Per job: current domain, best local machines, roomiest small subtrees, and the
    root only when unpartitioned and needed; and the two kept for the later slots
    (module docstring)."""
    out: dict[str, set[str]] = {}
    later: dict[str, set[str]] = {}
    for first, rest in candidate_domains_each(view, parts, local_k=local_k, spread_k=spread_k):
        out.update(first)
        later.update(rest)
    return out, later


def candidate_domains_each(view: View, parts: list[tuple[list[str], np.ndarray]], *, local_k: int, spread_k: int
                           ) -> Iterator[tuple[dict[str, set[str]], dict[str, set[str]]]]:
    """:func:`candidate_domains` partition by partition, in order, as each is ready (so
    a partition's window chain can start while the next one's candidates are found)."""
    inst = view.instance
    topo = inst.topology
    residual = Residual(inst)
    for state in view.jobs.values():
        if state.previous:
            residual.try_place(state.job, state.previous)
    machine_ids = [m.id for m in topo.machines]
    anc, depth, _ = topo.ancestor_table
    # subtrees that can hold a spread job: switches, by the machines below them
    switch_nodes = [i for i in range(len(machine_ids), len(topo.nodes))]
    members = {i: np.flatnonzero((anc == i).any(axis=1)) for i in switch_nodes}
    members = {i: m for i, m in members.items() if len(m) > 1}
    root = topo.nodes.index(topo.root_id)
    # per partition, the subtrees all of whose machines are in it (the root, never ranked
    # among them, is added below when there is one partition)
    group = np.full(len(machine_ids), -1, dtype=np.int64)
    for g, (_, machines) in enumerate(parts):
        group[machines] = g
    within: list[list[tuple[int, np.ndarray]]] = [[] for _ in parts]
    for i, m in members.items():
        if group[m[0]] >= 0 and (group[m] == group[m[0]]).all():
            within[group[m[0]]].append((i, m))
    for (jobs, machines), subtrees in zip(parts, within):
        subtrees = [(i, m) for i, m in subtrees if i != root]
        # each subtree as a 0/1 column over the partition's (ascending) machines
        member = np.zeros((len(machines), len(subtrees)), dtype=np.int64)
        for k, (_, m) in enumerate(subtrees):
            member[np.searchsorted(machines, m), k] = 1
        sizes = member.sum(axis=0).tolist()
        room = residual.worker_rooms_without([view.jobs[j].job for j in jobs], machines)
        code = topo.type_code[machines]
        kinds = np.unique(code).tolist()  # the GPU types of the partition
        if topo.typed:  # no room on a type the job does not run on
            room = np.where([worker_types(view.jobs[j].job, topo)[code] for j in jobs], room, 0)
        order = np.argsort(-room, axis=1, kind="stable")[:, :local_k]
        # per type, its roomiest machine and the free worker slots per subtree (exact ints)
        best = {g: np.argmax(np.where(code == g, room, -1), axis=1).tolist() for g in kinds} if topo.typed else {}
        sums = {g: (np.where(code == g, np.maximum(room, 0), 0) @ member).tolist() for g in kinds}
        out: dict[str, set[str]] = {}
        later: dict[str, set[str]] = {}
        for row, job_id in enumerate(jobs):
            state = view.jobs[job_id]
            job = state.job
            keep: list[str] = []
            if state.previous:
                keep.append(topo.lca(h for h, (w, s) in state.previous.items() if w or s))
            local = [machine_ids[machines[k]] for k in order[row].tolist() if room[row, k] >= job.min_workers]
            picked = []  # per type, its smallest subtrees with most room of that type
            for g in kinds:
                sized = sorted((n, -total, subtrees[k][0]) for k, (n, total) in enumerate(zip(sizes, sums[g][row]))
                               if total >= job.min_workers)
                picked.append(sized[:spread_k])
            keep += local[:1] if not keep else []
            keep += [topo.nodes[first[0][2]] for first in picked if first]
            chosen = set(keep)
            chosen.update(local, (topo.nodes[i] for of_type in picked for _, _, i in of_type))
            if topo.typed:
                chosen.update(machine_ids[machines[best[g][row]]] for g in kinds
                              if room[row, best[g][row]] >= job.min_workers)
            tops = [-r for of_type in picked for _, r, _ in of_type]
            if len(parts) == 1 and (not tops or max(tops) < job.max_workers):
                chosen.add(topo.root_id)
            out[job_id] = chosen
            later[job_id] = set(keep) or chosen
        yield out, later
