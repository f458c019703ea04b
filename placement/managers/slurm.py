"""Slurm: ``topology.conf`` (the topology/tree plugin's switches, or the topology/block
plugin's blocks) for the tree, and ``slurm.conf``'s NodeName lines for each node's GPUs,
CPUs and memory. Hostlist expressions (``dev[0-5]``) are read by python-hostlist.

Mapping (docs/managers.md):

- **tree plugin.** A SwitchName is a switch; ``Nodes=`` and ``Switches=`` its children.
  ``LinkSpeed=`` is ignored: Slurm's units are arbitrary and Slurm itself does not use it
  (topology.conf(5)). Switches listing the very same children are parallel planes of one
  layer (the topology guide's example of four spines over the same leaves): they are one
  switch here, named after the first. A switch with both Nodes= and Switches= is refused,
  as Slurm refuses it; one with neither (an empty leaf) is dropped.
- **block plugin.** Each BlockName is a leaf switch. Slurm pairs contiguous blocks (file
  order) into aggregated blocks of 2, 4, 8, ... blocks at the levels BlockSizes enforces
  (BlockSizes=30,120: base blocks of 30 nodes and blocks of 120 = 4 base blocks; without
  it, 1 to 16 blocks); each aggregated block is a switch above the blocks (or smaller
  aggregates) it holds, named as Slurm names it (``block[1-4]``). The aggregation follows
  Slurm's own (src/plugins/topology/block/block_record.c), including its tail rule.
- **slurm.conf.** NodeName lines only (``NodeName=DEFAULT`` sets defaults for later
  lines); keys case-insensitive, ``#`` comments, ``\\`` continues a line, Include lines not
  followed. ``gpu`` = the sum of the gpu entries of ``Gres`` (``gpu:8``, ``gpu:a100:4``,
  K/M/G suffixes); ``cpu`` = ``CPUs`` (else Sockets, or Boards x SocketsPerBoard, x
  CoresPerSocket x ThreadsPerCore, as Slurm; 1 by default); ``mem`` = ``RealMemory`` (MB,
  default 1) / 1024 in GB. Nodes slurm.conf defines that topology.conf does not place are
  left out (Slurm cannot place a job across them either).
"""
from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

import hostlist

from placement.managers.tree import Tiers, Tree, Where, read_text
from placement.model import limits
from placement.model.cluster_spec import tidy
from placement.model.topology import Topology

#: Slurm's longest switch name (topology.conf(5))
MAX_SWITCH_NAME = 64
#: Slurm's deepest block level (2**15 base blocks)
MAX_BLOCK_LEVEL = 15
#: the block levels Slurm enforces without BlockSizes: 1, 2, 4, 8 and 16 blocks
DEFAULT_BLOCK_LEVELS = range(5)
GRES_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
NO_GPU = "no gpu in its Gres (every machine in the tree needs GPUs)"


def read_slurm(topology_conf: str, slurm_conf: str, tiers: Tiers = Tiers()) -> Topology:
    """The tree of ``topology_conf`` over the nodes ``slurm_conf`` defines."""
    nodes = read_slurm_conf(slurm_conf)
    tree = Tree(Path(slurm_conf).name, NO_GPU)
    for name, (capacity, where) in nodes.items():
        tree.machine(name, capacity, where)
    lines = []
    for number, text in logical_lines(topology_conf):
        where = Where(str(topology_conf), f"line {number}")
        lines.append((where, pairs(text, where)))
    plugin = None
    for where, keys in lines:
        first = next(iter(keys))
        kind = {"switchname": "tree", "blockname": "block", "blocksizes": "block"}.get(first)
        if kind is None:
            where.fail(f"{keys[first][0]}=: not a topology.conf line (expected SwitchName= for the tree plugin, "
                       "BlockName= or BlockSizes= for the block plugin)")
        if plugin not in (None, kind):
            where.fail(f"mixes the {kind} plugin's lines with the {plugin} plugin's")
        plugin = kind
    if plugin is None:
        Where(str(topology_conf)).fail("no SwitchName or BlockName line")
    (_switches if plugin == "tree" else _blocks)(lines, tree)
    return tree.build(tiers, Where(str(topology_conf)))


# ----- the format ------------------------------------------------------------------------
def logical_lines(path: str) -> list[tuple[int, str]]:
    """(number of its first line, text) of each line with its comment cut and its
    continuations (a trailing backslash) joined; blank lines skipped."""
    out, parts, first = [], [], 0
    for number, raw in enumerate(read_text(path).splitlines(), 1):
        text = raw.split("#", 1)[0].rstrip()
        first = first or number
        if text.endswith("\\"):
            parts.append(text[:-1])
            continue
        joined = " ".join(parts + [text]).strip()
        if joined:
            out.append((first, joined))
        parts, first = [], 0
    if parts and " ".join(parts).strip():
        out.append((first, " ".join(parts).strip()))
    return out


def pairs(text: str, where: Where) -> dict[str, tuple[str, str]]:
    """A line's KEY=VALUE pairs by lower-case key (Slurm's keys are case-insensitive), each
    as (key as written, value); quotes are removed."""
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        where.fail(f"cannot split into KEY=VALUE pairs: {exc}")
    out: dict[str, tuple[str, str]] = {}
    for token in tokens:
        key, eq, value = token.partition("=")
        if not eq or not key:
            where.fail(f"expected KEY=VALUE, got {token!r}")
        if key.lower() in out:
            where.fail(f"{key}= is given twice")
        out[key.lower()] = (key, value)
    return out


def expand(value: str, key: str, where: Where, most: int) -> list[str]:
    """The names of a hostlist expression (``tux[0-3,12]``), by python-hostlist, refused as
    soon as they pass ``most``: python-hostlist caps each bracketed range at 100,000 names,
    not a list of many such ranges, so the list is expanded one top-level piece at a time
    (a few hundred bytes must not stand for gigabytes of names)."""
    names: dict[str, None] = {}
    for piece in _pieces(value):
        try:
            names.update(dict.fromkeys(hostlist.expand_hostlist(piece)))
        except hostlist.BadHostlist as exc:
            where.fail(f"{key}={value}: not a hostlist expression ({exc})")
        if len(names) > most:
            lim = limits.MACHINES
            where.fail(f"{key}= lists more than {most} names (raise the machine limit with {lim.env} or "
                       f"{lim.flag}; {limits.DOC})")
    return list(names)


def _pieces(value: str) -> list[str]:
    """A hostlist split at its top-level commas (``a[1,2],b`` -> ``a[1,2]``, ``b``)."""
    pieces, depth, start = [], 0, 0
    for i, c in enumerate(value):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            pieces.append(value[start:i])
            start = i + 1
    pieces.append(value[start:])
    return pieces


class _Lists:
    """The hostlists of topology.conf, each expanded once (parallel planes repeat theirs),
    and no more names in all than a tree within the machine limit holds (one parent for
    each of at most that many machines and as many switches): a few short lines cannot
    stand for billions of names."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}
        self.names = 0

    def expand(self, key: str, value: str, where: Where) -> list[str]:
        if value not in self.seen:
            top = limits.value(limits.MACHINES)
            self.seen[value] = expand(value, key, where, 2 * top)
            self.names += len(self.seen[value])
            if self.names > 2 * top:
                lim = limits.MACHINES
                where.fail(f"{self.names} names listed, more than a tree of at most {top} machines and {top} "
                           f"switches holds (raise the limit with {lim.env} or {lim.flag}; {limits.DOC})")
        return self.seen[value]


def _allowed(keys: dict[str, tuple[str, str]], allowed: tuple[str, ...], where: Where) -> None:
    for low, (key, _) in keys.items():
        if low not in (a.lower() for a in allowed):
            takes = ", ".join(a + "=" for a in allowed[1:]) or "no other key"
            where.fail(f"unknown key {key}= (a {allowed[0]} line takes {takes})")


# ----- slurm.conf ------------------------------------------------------------------------
def read_slurm_conf(slurm_conf: str) -> dict[str, tuple[dict[str, float], Where]]:
    """Each node slurm.conf defines: its capacity (gpu, cpu, mem) and its line."""
    nodes: dict[str, tuple[dict[str, float], Where]] = {}
    defaults: dict[str, tuple[str, str]] = {}
    for number, text in logical_lines(slurm_conf):
        if not text.split(None, 1)[0].lower().startswith("nodename="):
            continue
        where = Where(str(slurm_conf), f"line {number}")
        keys = pairs(text, where)
        names = keys.pop("nodename")[1]
        if "procs" in keys:  # Slurm's older name of CPUs
            if "cpus" in keys:
                where.fail("CPUs= and Procs= are the same key: give one")
            keys["cpus"] = keys.pop("procs")
        if names.lower() == "default":
            defaults.update(keys)
            continue
        capacity = _capacity({**defaults, **keys}, where)
        for name in expand(names, "NodeName", where, limits.value(limits.MACHINES)):
            if name in nodes:
                where.fail(f"node {name} is defined twice (first at {nodes[name][1].place})")
            nodes[name] = (capacity, where)
        if len(nodes) > limits.value(limits.MACHINES):
            where.fail(limits.too_many(limits.MACHINES, len(nodes), "nodes"))
    return nodes


def _capacity(keys: dict[str, tuple[str, str]], where: Where) -> dict[str, float]:
    def count(key: str, default: int = 1) -> int:
        if key.lower() not in keys:
            return default
        written, value = keys[key.lower()]
        if not re.fullmatch(r"\d{1,12}", value) or int(value) < 1:
            where.fail(f"{written}={value}: expected a whole number >= 1")
        return int(value)

    if "cpus" in keys:
        cpus = count("CPUs")
    else:
        sockets = count("Sockets") if "sockets" in keys else count("Boards") * count("SocketsPerBoard")
        cpus = sockets * count("CoresPerSocket") * count("ThreadsPerCore")
    return {"gpu": _gres_gpus(keys.get("gres", ("Gres", ""))[1], where), "cpu": cpus,
            "mem": tidy(count("RealMemory") / 1024)}


def _gres_gpus(text: str, where: Where) -> float:
    """The GPUs of a Gres list, ``NAME[:TYPE][:no_consume]:COUNT[K|M|G|T|P]`` entries."""
    total = 0
    for entry in text.split(","):
        entry = re.sub(r"\(.*\)$", "", entry.strip())  # scontrol's socket note: gpu:4(S:0-1)
        if not entry or entry == "(null)":
            continue
        parts = entry.split(":")
        number = re.fullmatch(r"(\d{1,15})([KMGTP]?)", parts[-1], flags=re.I)
        if len(parts) < 2 or not number:
            where.fail(f"Gres={text}: {entry!r} is not NAME[:TYPE]:COUNT (e.g. gpu:8 or gpu:a100:4)")
        if parts[0].lower() == "gpu":
            total += int(number[1]) * GRES_SUFFIX[number[2].upper()]
    return total


# ----- topology.conf ---------------------------------------------------------------------
def _switches(lines: list[tuple[Where, dict[str, tuple[str, str]]]], tree: Tree) -> None:
    """The tree plugin: SwitchName lines, parallel switches merged."""
    switches, lists = [], _Lists()  # (name, where, children are switches, children)
    for where, keys in lines:
        _allowed(keys, ("SwitchName", "Switches", "Nodes", "LinkSpeed"), where)
        name = keys["switchname"][1]
        if not name or len(name) > MAX_SWITCH_NAME:
            where.fail(f"SwitchName={name}: a switch name has 1 to {MAX_SWITCH_NAME} characters")
        if "nodes" in keys and "switches" in keys:
            where.fail(f"switch {name} has both Nodes= and Switches= (Slurm refuses it too)")
        key = "switches" if "switches" in keys else "nodes"
        children = lists.expand(keys[key][0], keys[key][1], where) if key in keys else []
        tree.switch(name, where)
        switches.append((name, where, key == "switches", children))
    alias = _parallel(switches)
    for name, where, of_switches, children in switches:
        if name not in alias:
            for child in children:
                tree.attach(_resolve(alias, child) if of_switches else child, name, where, switch=of_switches)


def _parallel(switches: list[tuple[str, Where, bool, list[str]]]) -> dict[str, str]:
    """{switch: the switch it merges into} for ``Switches=`` switches whose children are the
    same as an earlier switch's (parallel planes, after merging their children: repeated to a
    fixed point). Leaf switches listing the same nodes are not merged: a node under two
    switches is an error."""
    alias: dict[str, str] = {}
    merged = True
    while merged:
        merged, first = False, {}
        for name, _, of_switches, children in switches:
            if name in alias or not children or not of_switches:   # leaves sharing nodes: two parents
                continue
            key = (of_switches, frozenset(_resolve(alias, c) for c in children) if of_switches else frozenset(children))
            if key in first:
                alias[name], merged = first[key], True
            else:
                first[key] = name
    return alias


def _resolve(alias: dict[str, str], name: str) -> str:
    while name in alias:
        name = alias[name]
    return name


def _blocks(lines: list[tuple[Where, dict[str, tuple[str, str]]]], tree: Tree) -> None:
    """The block plugin: base blocks and the aggregated blocks Slurm builds above them."""
    blocks, sizes_line, lists = [], None, _Lists()  # (name, where, nodes)
    for where, keys in lines:
        if "blocksizes" in keys:
            _allowed(keys, ("BlockSizes",), where)
            if sizes_line is not None:
                where.fail(f"a second BlockSizes line (first at {sizes_line[0].place})")
            sizes_line = (where, keys["blocksizes"][1])
            continue
        _allowed(keys, ("BlockName", "Nodes"), where)
        name = keys["blockname"][1]
        if "nodes" not in keys:
            where.fail(f"block {name} has no Nodes= (Slurm refuses it too)")
        nodes = lists.expand(keys["nodes"][0], keys["nodes"][1], where)
        if not nodes:
            where.fail(f"block {name} lists no node (Nodes= is empty)")
        blocks.append((name, where, nodes))
    if not blocks:
        sizes_line[0].fail("no BlockName line")  # lines were found, so BlockSizes was one
    base, levels = _block_levels(sizes_line, len(blocks[0][2]))
    chains = []  # per base block: it, then the aggregated blocks holding it, smallest first
    for name, where, nodes in blocks:
        if len(nodes) < base:
            why = ("BlockSizes; Slurm refuses it too" if sizes_line is not None else
                   "without BlockSizes, the first block's size")
            where.fail(f"block {name} has {len(nodes)} nodes, fewer than the base block size {base} ({why})")
        tree.switch(name, where)
        for node in nodes:
            tree.attach(node, name, where)
        chains.append([name])
    for members, _ in sorted(_aggregates(len(blocks), levels), key=lambda aggregate: aggregate[1]):
        name = hostlist.collect_hostlist([blocks[i][0] for i in members])
        tree.switch(name, blocks[members[0]][1])
        for i in members:
            chains[i].append(name)
    for (_, where, _), chain in zip(blocks, chains):
        for child, parent in zip(chain, chain[1:]):
            tree.attach(child, parent, where, switch=True)


def _block_levels(sizes_line: tuple[Where, str] | None, first_block: int) -> tuple[int, list[int]]:
    """(base block size in nodes, the block levels enforced: level k = 2**k base blocks)."""
    if sizes_line is None:
        return first_block, list(DEFAULT_BLOCK_LEVELS)
    where, text = sizes_line
    sizes = [s.strip() for s in text.split(",")]
    if not all(re.fullmatch(r"\d{1,9}", s) and int(s) > 0 for s in sizes):
        where.fail(f"BlockSizes={text}: expected node counts > 0 separated by commas (e.g. 30,120)")
    base, levels = int(sizes[0]), set()
    for size in map(int, sizes):
        level = math.log2(size / base) if size % base == 0 else -1.0
        if not level.is_integer() or not 0 <= level <= MAX_BLOCK_LEVEL:
            where.fail(f"BlockSizes={text}: {size} is not the base size {base} times a power of two "
                       f"(1 to 2**{MAX_BLOCK_LEVEL})")
        levels.add(int(level))
    return base, sorted(levels)


def _aggregates(count: int, levels: list[int]) -> list[tuple[list[int], int]]:
    """Slurm's aggregated blocks over ``count`` base blocks (file order): (the base blocks
    each holds, its index in the enforced sizes), as block_record_validate builds them."""
    sizes = []
    for level in levels:
        sizes.append(2**level)
        if sizes[-1] >= count:
            break
    out: list[tuple[list[int], int]] = []
    current: dict[int, list[int] | None] = {}
    for i in range(count):
        for j in range(1, len(sizes)):
            if i % sizes[j] == 0:
                remaining = count - i
                if sizes[j] > remaining and sizes[j - 1] >= remaining:
                    current[j] = None
                    continue
                current[j] = [i]
                out.append((current[j], j))
            elif current.get(j) is not None:
                current[j].append(i)
    return out
