"""Cluster specs: the one-word clusters of the command line (``racks:2x4``, ``star:8@10``,
``pai:50``), or the path of an instance file (any instance: its topology, e.g. a skeleton
written by ``placement import-topology``), parsed into a
:class:`~placement.model.topology.Topology`.

Kept apart from :mod:`placement.traces.generate` because the command line's ``simulate``, the
benchmarks and the tests name clusters this way without generating anything.

Grammar (:func:`parse_cluster`)
    ``star:N[@LINK]``, ``racks:RxM[@MACHINE/RACK]`` or ``pai:N`` (the builders of
    :mod:`placement.model.clusters`; link speeds in Gbps, defaults 100 for a star and 25/100
    for racks). Star and racks accept trailing options ``,gpu=G``, ``,cpu=C``,
    ``,mem=M`` (per-machine capacity; defaults 8 GPUs, 64 cores, 512 GB) and
    ``,local=L`` (``local_gbps``, default 400), e.g. ``racks:2x4@25/100,gpu=4``.
    PAI machines are real, so ``pai:N`` takes no options.

Sizes and numbers follow the input policy (docs/limits.md): at most
``PLACEMENT_MAX_MACHINES`` machines, link speeds and ``local`` in [1e-6, 1e6] Gbps,
capacities at most 1e9.
"""
from __future__ import annotations

import math
import re

from pathlib import Path

from placement.model import clusters
from placement.model import limits
from placement.model.instance import Instance
from placement.model.strict_json import FileFormatError
from placement.model.topology import Topology

__all__ = ["parse_cluster", "tidy"]

_KINDS = "star:N[@LINK], racks:RxM[@MACHINE/RACK], pai:N or an instance file"


def parse_cluster(spec: str) -> Topology:
    """Build the cluster named by ``spec`` (grammar in the module docstring), so a command
    line can say ``racks:2x4@25/100,gpu=4`` instead of writing a topology file, or name a
    file (an instance, or an imported cluster's skeleton) and take its topology."""
    if not isinstance(spec, str):
        raise ValueError(f"cluster spec must be a string like 'racks:2x4', got {spec!r}")
    head, *options = spec.strip().split(",")
    kind, colon, size = head.partition(":")
    size, at, speeds = size.partition("@")
    if not colon or kind not in ("star", "racks", "pai"):
        if spec.endswith(".json") or Path(spec).is_file():
            return _from_file(spec)
        raise ValueError(f"cluster {spec!r}: unknown kind {kind!r}; expected {_KINDS}")
    if kind == "pai":
        if at or options:
            raise ValueError(f"cluster {spec!r}: pai:N takes no link speeds or options "
                             "(its machines and network rules are fixed)")
        n = _count(spec, size, "the number of machines", limited=False)
        try:
            topology = clusters.pai(n)  # refuses more than the real machine list
        except ValueError as exc:
            raise ValueError(f"cluster {spec!r}: {exc}") from None
        _count(spec, size, "the number of machines")  # and within the machine limit
        return topology
    kwargs = _options(spec, options)
    if kind == "star":
        n = _count(spec, size, "the number of machines")
        if at:
            kwargs["link_gbps"] = _gbps(spec, speeds)
        return clusters.star(n, **kwargs)
    r, x, m = size.partition("x")
    if not x:
        raise ValueError(f"cluster {spec!r}: expected racks:RxM (R racks of M machines)")
    n_racks, per_rack = _count(spec, r, "the number of racks"), _count(spec, m, "machines per rack")
    if n_racks * per_rack > limits.value(limits.MACHINES):
        raise ValueError(f"cluster {spec!r}: {limits.too_many(limits.MACHINES, n_racks * per_rack)}")
    if at:
        machine, slash, rack = speeds.partition("/")
        if not slash:
            raise ValueError(f"cluster {spec!r}: link speeds are @MACHINE/RACK in Gbps, "
                             f"e.g. racks:2x4@25/100")
        kwargs["machine_gbps"], kwargs["rack_gbps"] = _gbps(spec, machine), _gbps(spec, rack)
    return clusters.racks(n_racks, per_rack, **kwargs)


def _from_file(path: str) -> Topology:
    """The topology of the instance file at ``path``; its errors name the file and place."""
    if Path(path).is_dir():
        raise ValueError(f"cluster {path!r}: is a directory, not an instance file")
    if not Path(path).is_file():
        raise ValueError(f"cluster {path!r}: no such file (a cluster is {_KINDS})")
    try:
        return Instance.load(path).topology
    except FileFormatError as exc:
        raise ValueError(str(exc) if exc.path == path else f"{path}: {exc}") from None


def _count(spec: str, text: str, what: str, limited: bool = True) -> int:
    """A positive integer of at most 30 digits, and (``limited``) at most the machine limit."""
    if not re.fullmatch(r"\d{1,30}", text) or int(text) < 1:
        raise ValueError(f"cluster {spec!r}: {what} must be a positive integer, got {text[:40]!r}")
    if limited and int(text) > limits.value(limits.MACHINES):
        raise ValueError(f"cluster {spec!r}: {what}: {limits.too_many(limits.MACHINES, int(text))}")
    return int(text)


def _number(spec: str, text: str, what: str, *, zero_ok: bool = False,
            bound: limits.Bound = limits.AMOUNT) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        sign = ">= 0" if zero_ok else "> 0"
        raise ValueError(f"cluster {spec!r}: {what} must be a number {sign}, got {text[:40]!r}")
    reason = bound.check(value, not zero_ok)
    if reason:
        raise ValueError(f"cluster {spec!r}: {what} {reason}")
    return tidy(value)


def _gbps(spec: str, text: str) -> float:
    return _number(spec, text, "a link speed (Gbps)", bound=limits.GBPS)


def _options(spec: str, options: list[str]) -> dict:
    capacity = dict(clusters.DEFAULT_CAPACITY)
    kwargs: dict = {}
    seen: set[str] = set()
    for opt in options:
        key, eq, value = opt.partition("=")
        if not eq or key not in ("gpu", "cpu", "mem", "local"):
            raise ValueError(f"cluster {spec!r}: unknown option {opt!r}; expected gpu=G, "
                             "cpu=C, mem=M or local=L")
        if key in seen:
            raise ValueError(f"cluster {spec!r}: option {key!r} is given twice")
        seen.add(key)
        if key == "local":
            kwargs["local_gbps"] = _number(spec, value, "local=", bound=limits.GBPS)
        else:
            capacity[key] = _number(spec, value, f"{key}=", zero_ok=key == "gpu")
    kwargs["capacity"] = capacity
    return kwargs


def tidy(x: float) -> float:
    """Whole numbers as ints, so the JSON reads ``2`` rather than ``2.0``."""
    return int(x) if float(x).is_integer() else x
