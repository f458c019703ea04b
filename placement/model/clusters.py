"""Cluster builders: a star, racks under a spine, and the real Alibaba PAI machine list.

Each returns a :class:`~placement.model.topology.Topology` whose machines use the resources
``gpu``, ``cpu`` and ``mem`` (cores and GB), so it can be dropped into an Instance with
``resources=RESOURCES``.
"""
from __future__ import annotations

import csv
from importlib import resources as package_files
from pathlib import Path

from placement.model.topology import Link, Machine, Switch, Topology

RESOURCES = ("gpu", "cpu", "mem")
DEFAULT_CAPACITY = {"gpu": 8, "cpu": 64, "mem": 512}


def star(n: int, *, capacity: dict[str, float] | None = None, local_gbps: float = 400,
         link_gbps: float = 100, prefix: str = "m") -> Topology:
    """``n`` identical machines under one switch ``sw`` (every link ``link_gbps``)."""
    _positive(n=n)
    machines = tuple(Machine(f"{prefix}{i}", dict(capacity or DEFAULT_CAPACITY), local_gbps)
                     for i in range(n))
    links = tuple(Link(m.id, "sw", link_gbps) for m in machines)
    return Topology(machines, (Switch("sw"),), links, "sw")


def racks(n_racks: int, per_rack: int, *, capacity: dict[str, float] | None = None,
          local_gbps: float = 400, machine_gbps: float = 25, rack_gbps: float = 100) -> Topology:
    """``n_racks`` top-of-rack switches ``tor{r}`` under a ``spine``, ``per_rack`` identical
    machines ``r{r}m{i}`` each; machine-ToR links ``machine_gbps``, ToR-spine ``rack_gbps``."""
    _positive(n_racks=n_racks, per_rack=per_rack)
    machines, switches, links = [], [Switch("spine")], []
    for r in range(n_racks):
        tor = f"tor{r}"
        switches.append(Switch(tor))
        links.append(Link(tor, "spine", rack_gbps))
        for i in range(per_rack):
            m = Machine(f"r{r}m{i}", dict(capacity or DEFAULT_CAPACITY), local_gbps)
            machines.append(m)
            links.append(Link(m.id, tor, machine_gbps))
    return Topology(tuple(machines), tuple(switches), tuple(links), "spine")


def pai_machines(path: str | Path | None = None) -> list[dict]:
    """Rows of the PAI machine list (the packaged copy unless ``path`` is given)."""
    if path is None:
        text = package_files.files("placement.data").joinpath("pai_machine_spec.csv").read_text()
    else:
        text = Path(path).read_text()
    rows = []
    for machine, gpu_type, cpu, mem, gpu in csv.reader(text.splitlines()):
        rows.append({"id": machine, "type": gpu_type, "cpu": float(cpu), "mem": float(mem),
                     "gpu": int(gpu)})
    return rows


def pai(n: int | None = None, *, per_rack: int = 16, gpu_only: bool = False,
        oversubscription: float = 2.0, path: str | Path | None = None) -> Topology:
    """A cluster of real PAI machines (Alibaba cluster-trace-gpu-v2020, 1,897 machines).

    The trace gives machines only, so the network is an assumption, stated here:
    - ``n`` machines are drawn without randomness, in proportion to each GPU type's share
      of the trace (largest remainders), in file order within a type; ``None`` takes all.
    - Racks are homogeneous by GPU type (as datacenters deploy them): consecutive machines
      of one type, at most ``per_rack`` to a rack, ToR switches ``tor{k}`` under ``spine``.
    - Machine NICs: 100 Gbps for 8-GPU machines (V100/MISC servers), 25 Gbps otherwise.
    - ToR uplink: the sum of its machines' NICs divided by ``oversubscription`` (2:1).
    - ``local_gbps``: 400 on 8-GPU machines (NVLink class), 100 otherwise (PCIe / memory).
    - Resources: ``gpu`` (count), ``cpu`` (cores), ``mem`` (GB), as in the trace.
    """
    rows = pai_machines(path)
    if gpu_only:
        rows = [r for r in rows if r["gpu"] > 0]
    if n is not None:
        _positive(n=n)
        if n > len(rows):
            raise ValueError(f"n={n} is more than the {len(rows)} machines available")
        rows = _proportional(rows, n)
    machines, switches, links = [], [Switch("spine")], []
    by_type: dict[str, list[dict]] = {}
    for r in rows:
        by_type.setdefault(r["type"], []).append(r)
    rack = 0
    for group in by_type.values():
        for start in range(0, len(group), per_rack):
            tor = f"tor{rack}"
            rack += 1
            switches.append(Switch(tor))
            uplink = 0.0
            for r in group[start:start + per_rack]:
                big = r["gpu"] >= 8
                nic = 100.0 if big else 25.0
                uplink += nic
                machines.append(Machine(r["id"], {"gpu": r["gpu"], "cpu": r["cpu"], "mem": r["mem"]},
                                        400.0 if big else 100.0))
                links.append(Link(r["id"], tor, nic))
            links.append(Link(tor, "spine", uplink / oversubscription))
    return Topology(tuple(machines), tuple(switches), tuple(links), "spine")


def _proportional(rows: list[dict], n: int) -> list[dict]:
    """``n`` rows keeping each type's share (largest-remainder apportionment)."""
    by_type: dict[str, list[dict]] = {}
    for r in rows:
        by_type.setdefault(r["type"], []).append(r)
    quotas = {t: n * len(g) / len(rows) for t, g in by_type.items()}
    take = {t: int(q) for t, q in quotas.items()}
    for t in sorted(quotas, key=lambda t: (-(quotas[t] - take[t]), t))[: n - sum(take.values())]:
        take[t] += 1
    return [r for t, g in by_type.items() for r in g[: take[t]]]


def _positive(**counts: int) -> None:
    for name, v in counts.items():
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
