"""The half every importer shares: what a reader found in a cluster manager's files (machines
with their capacities, switches, and which node sits under which switch, each with the
file and place it came from) checked and turned into our
:class:`~placement.model.topology.Topology`, so each reader only has to understand its
format and every format gets the same checks and the same located errors.

Choices where the formats say nothing (docs/managers.md):

- **Link speeds by tier.** None of the formats carries bandwidth, so a node's uplink takes
  its speed from its *height*: 0 for a machine, 1 + the largest height of its children for a
  switch; the link from a node of height h gets ``gbps[min(h, len(gbps) - 1)]``. Machines
  get ``local_gbps``.
- **Root.** A tree with one top switch is rooted there. Several top switches (or machines
  under no switch) go under an added switch ``root`` (``root~1``, ``root~2``, ... if a node
  already has that name), which no name in the input can then collide with.
- **Nodes outside the tree.** A defined node that no switch takes is left out (Slurm and
  Volcano describe more nodes than their tree places); a switch with no machine below it
  is dropped without an error: no job can be placed on it, and heights (hence link
  speeds) are computed after dropping it, so nothing that is kept changes.
- **Order.** Machines, switches and links are listed depth first from the root, siblings
  in natural order of their ids (``n2`` before ``n10``), whatever order the input used: one
  cluster described in two formats gives equal topologies.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NoReturn

from placement.model import limits
from placement.model.cluster_spec import tidy
from placement.model.clusters import RESOURCES
from placement.model.instance import Instance
from placement.model.strict_json import FileFormatError, InstanceError, read_bytes, string
from placement.model.topology import Link, Machine, Switch, Topology

#: the id of the switch added above several top switches (suffixed ~N if taken)
ROOT = "root"
#: the skeleton's horizon and slot length: a cluster only, jobs come from elsewhere
SKELETON_HORIZON = 1
SKELETON_SLOT_SECONDS = 300


class TopologyFileError(ValueError):
    """Input a cluster manager's file cannot give us: ``path`` (the file), ``place`` (a line,
    a document, an item; empty when the file as a whole is meant) and ``reason``."""

    def __init__(self, path: str, place: str, reason: str):
        self.path, self.place, self.reason = path, place, reason
        super().__init__(f"{path}: {place}: {reason}" if place else f"{path}: {reason}")


@dataclass(frozen=True)
class Where:
    """A place in an input file, kept with what was read there so errors can name it."""

    path: str
    place: str = ""

    def fail(self, reason: str) -> NoReturn:
        raise TopologyFileError(self.path, self.place, reason)

    def at(self, place: str) -> "Where":
        """A place inside this one (``items[3]`` + ``spec.tier``)."""
        return Where(self.path, f"{self.place}: {place}" if self.place else place)

    def cite(self, other: "Where") -> str:
        """This place as seen from an error at ``other``: the file is named if it differs."""
        return self.place if self.path == other.path else f"{self.path} {self.place}".strip()


@dataclass(frozen=True)
class Tiers:
    """Link speeds (Gbps) by tier, from the machines up (the last repeats above), and a
    machine's own bus: the formats carry no bandwidth, so the user states it."""

    gbps: tuple[float, ...] = (25.0, 100.0)
    local_gbps: float = 400.0

    def __post_init__(self) -> None:
        if isinstance(self.gbps, (str, bytes)) or not hasattr(self.gbps, "__iter__"):
            raise ValueError(f"--gbps: expected link speeds in Gbps, got {self.gbps!r}")
        gbps = tuple(self.gbps)
        if not gbps:
            raise ValueError("--gbps: give at least one link speed (Gbps)")
        object.__setattr__(self, "gbps", tuple(_speed(f"--gbps: link speed {i + 1}", g) for i, g in enumerate(gbps)))
        object.__setattr__(self, "local_gbps", _speed("--local-gbps", self.local_gbps))

    def uplink(self, height: int) -> float:
        """The speed of the link above a node of ``height`` (0: a machine)."""
        return self.gbps[min(height, len(self.gbps) - 1)]


def _speed(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} must be a number > 0 (Gbps), got {value!r}")
    reason = limits.GBPS.check(value, positive=True)
    if reason:
        raise ValueError(f"{what} {reason}")
    return tidy(value)


def read_text(path: str) -> str:
    """A file's text under the input policy (size limit, UTF-8, a BOM allowed); a missing,
    unreadable or binary file is a :class:`TopologyFileError` naming it."""
    try:
        data = read_bytes(path, FileFormatError)
    except FileFormatError as exc:
        raise TopologyFileError(str(path), "", exc.reason) from None
    data = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TopologyFileError(str(path), f"line {line}", f"not UTF-8 text (byte 0x{data[exc.start]:02x})") from None


class Tree:
    """What a reader found, in the order it found it; :meth:`build` checks it and makes the
    topology. ``nodes_file`` names the file that defines nodes (for "node X is not defined
    in FILE"), ``no_gpu`` is the reason given for a machine without GPUs, ``switch_word``
    what the format calls a switch."""

    def __init__(self, nodes_file: str, no_gpu: str, switch_word: str = "switch"):
        self.nodes_file, self.no_gpu, self.switch_word = nodes_file, no_gpu, switch_word
        self._machines: dict[str, tuple[dict[str, float], Where]] = {}
        self._switches: dict[str, Where] = {}
        self._parent: dict[str, tuple[str, Where, bool]] = {}
        self._tops: set[str] = set()

    def machine(self, name: str, capacity: dict[str, float], where: Where) -> None:
        """Define a node (it joins the tree once a switch takes it, or via :meth:`top`)."""
        self._define(name, where)
        for resource, amount in capacity.items():
            reason = limits.AMOUNT.check(amount)
            if reason:
                where.fail(f"{resource} {reason}")
        self._machines[name] = (capacity, where)

    def switch(self, name: str, where: Where) -> None:
        self._define(name, where)
        self._switches[name] = where

    def attach(self, child: str, parent: str, where: Where, switch: bool = False) -> None:
        """``child`` (a node, or a switch if ``switch``) sits under the switch ``parent``, as
        said at ``where``; saying it again is harmless, naming a second parent is not."""
        old = self._parent.get(child)
        if old is not None and old[0] != parent:
            noun = self.switch_word if switch else "node"
            where.fail(f"{noun} {child} is under two {self._switches_word}: {old[0]} ({old[1].cite(where)}) "
                       f"and {parent}")
        self._parent.setdefault(child, (parent, where, switch))

    def top(self, name: str) -> None:
        """A machine that is in the tree though no switch takes it (it goes under the root)."""
        self._tops.add(name)

    @property
    def _switches_word(self) -> str:
        return self.switch_word + ("es" if self.switch_word.endswith("ch") else "s")

    def _define(self, name: str, where: Where) -> None:
        try:
            string(name, "name", InstanceError)
        except InstanceError as exc:
            where.fail(f"name {exc.reason}")
        first = self._machines.get(name, (None, None))[1] or self._switches.get(name)
        if first is not None:
            where.fail(f"{name} is defined twice (first at {first.cite(where)}); names are unique among nodes "
                       f"and {self._switches_word}")

    # ----- build ------------------------------------------------------------------------
    def build(self, tiers: Tiers, whole: Where) -> Topology:
        """The checked topology; ``whole`` names the file for errors about the tree as a whole."""
        self._check_names()
        self._check_cycles()
        members = [m for m in self._machines if m in self._parent or m in self._tops]
        if not members:
            whole.fail(f"no node is under a {self.switch_word}: the tree holds no machine")
        for m in members:
            capacity, where = self._machines[m]
            if not capacity.get("gpu"):
                where.fail(self.no_gpu)
        children = self._children(members)
        kept_switches = [s for s in self._switches if s in children]
        tops = sorted((n for n in (*members, *kept_switches) if n not in self._parent), key=natural)
        if len(tops) == 1 and tops[0] in children:
            root = tops[0]
        else:
            root = _fresh(ROOT, self._machines.keys() | self._switches.keys())
            children[root] = tops
        switches = len(kept_switches) + (root not in kept_switches)
        for what, count in (("machines", len(members)), (self._switches_word, switches),
                            ("links", len(members) + switches - 1)):  # the limit bounds each list of the file
            if count > limits.value(limits.MACHINES):
                whole.fail(limits.too_many(limits.MACHINES, count, what))
        return self._topology(root, children, tiers)

    def _check_names(self) -> None:
        for child, (parent, where, switch) in self._parent.items():
            if parent not in self._switches:
                what = " (it is a node)" if parent in self._machines else ""
                where.fail(f"{self.switch_word} {parent} is not defined{what}")
            if switch and child not in self._switches:
                what = " (it is a node)" if child in self._machines else ""
                where.fail(f"{self.switch_word} {child} is not defined{what}")
            if not switch and child not in self._machines:
                what = f" (it is a {self.switch_word})" if child in self._switches else ""
                where.fail(f"node {child} is not defined in {self.nodes_file}{what}")

    def _check_cycles(self) -> None:
        done: set[str] = set()
        for start in self._switches:
            path: dict[str, None] = {}  # ordered, and a fast membership test
            node = start
            while node in self._parent and node not in done:
                if node in path:
                    loop = [*list(path)[list(path).index(node):], node]
                    self._parent[loop[-2]][1].fail(f"the {self._switches_word} form a cycle: {' under '.join(loop)}")
                path[node] = None
                node = self._parent[node][0]
            done.update(path)

    def _children(self, members: list[str]) -> dict[str, list[str]]:
        """The children of every switch with a machine below it, natural order."""
        children: dict[str, list[str]] = {}
        for m in members:
            node = m
            while node in self._parent:
                parent = self._parent[node][0]
                fresh = parent not in children
                children.setdefault(parent, []).append(node)
                if not fresh:
                    break
                node = parent
        for kids in children.values():
            kids.sort(key=natural)
        return children

    def _topology(self, root: str, children: dict[str, list[str]], tiers: Tiers) -> Topology:
        order, stack = [], [root]
        while stack:  # depth first, pre-order
            node = stack.pop()
            order.append(node)
            stack.extend(reversed(children.get(node, [])))
        height: dict[str, int] = {}
        for node in reversed(order):
            height[node] = 1 + max(height[c] for c in children[node]) if node in children else 0
        parent = {c: p for p, kids in children.items() for c in kids}
        machines = tuple(Machine(n, {r: self._machines[n][0].get(r, 0) for r in RESOURCES}, tiers.local_gbps)
                         for n in order if n not in children)
        switches = tuple(Switch(n) for n in order if n in children)
        links = tuple(Link(n, parent[n], tiers.uplink(height[n])) for n in order if n != root)
        return Topology(machines, switches, links, root)


def natural(name: str) -> tuple:
    """Sort key: digit runs compare as numbers (``n2`` < ``n10``), ties by the text."""
    parts = re.split(r"(\d+)", name)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), name


def _fresh(name: str, taken: set[str]) -> str:
    out, n = name, 0
    while out in taken:
        n += 1
        out = f"{name}~{n}"
    return out


def skeleton(topology: Topology, name: str) -> Instance:
    """The instance of ``topology`` with no jobs (horizon 1, 300 s slots, resources gpu, cpu,
    mem): what ``--cluster FILE`` reads."""
    string(name, "name", InstanceError)
    return Instance(slot_seconds=SKELETON_SLOT_SECONDS, horizon=SKELETON_HORIZON, resources=RESOURCES,
                    topology=topology, jobs=(), name=name)
