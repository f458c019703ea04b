"""The cluster as a tree of machines and switches (MODEL.md section 1), with the queries
placement needs: parents, ancestors, lowest common ancestors and the links on a path.

Checks on construction (the tree must be a tree: no cycle, no node off it, no duplicate
id or link), so every later query can trust the shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable

import networkx as nx
import numpy as np

from placement.model.strict_json import Fields, InstanceError, fail, join, vector

PATH = "topology"


@dataclass(frozen=True)
class Machine:
    id: str
    capacity: dict[str, float]
    local_gbps: float
    #: the GPU type of its GPUs (MODEL.md 8); None: untyped (a class of its own)
    gpu_type: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "capacity": dict(self.capacity), "local_gbps": self.local_gbps,
                **({"gpu_type": self.gpu_type} if self.gpu_type is not None else {})}


@dataclass(frozen=True)
class Switch:
    id: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id}


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    gbps: float

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "gbps": self.gbps}


@dataclass(frozen=True, eq=True)
class Topology:
    """A tree rooted at ``root``; a single-machine cluster has no switches, no links and
    its root (if given) names the machine."""

    machines: tuple[Machine, ...]
    switches: tuple[Switch, ...] = ()
    links: tuple[Link, ...] = ()
    root: str | None = None
    _parent: dict[str, str | None] = field(init=False, repr=False, compare=False)
    _parent_link: dict[str, int] = field(init=False, repr=False, compare=False)
    _depth: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "machines", tuple(self.machines))
        object.__setattr__(self, "switches", tuple(self.switches))
        object.__setattr__(self, "links", tuple(self.links))
        self._check_ids()
        root = self._check_root()
        graph = self._check_tree(root)
        parent: dict[str, str | None] = {root: None}
        parent_link: dict[str, int] = {}
        depth = {root: 0}
        link_of = {frozenset((l.a, l.b)): i for i, l in enumerate(self.links)}
        for u, v in nx.bfs_edges(graph, root):
            parent[v] = u
            parent_link[v] = link_of[frozenset((u, v))]
            depth[v] = depth[u] + 1
        object.__setattr__(self, "_parent", parent)
        object.__setattr__(self, "_parent_link", parent_link)
        object.__setattr__(self, "_depth", depth)

    # ----- construction checks -------------------------------------------------------
    def _check_ids(self) -> None:
        if not self.machines:
            fail(join(PATH, "machines"), "must list at least one machine", InstanceError)
        seen: set[str] = set()
        for kind, nodes in (("machines", self.machines), ("switches", self.switches)):
            for i, node in enumerate(nodes):
                if node.id in seen:
                    fail(join(join(join(PATH, kind), i), "id"),
                         f"duplicate id {node.id!r} (ids are unique among machines and switches)",
                         InstanceError)
                seen.add(node.id)
        pairs: set[frozenset[str]] = set()
        for i, link in enumerate(self.links):
            where = join(join(PATH, "links"), i)
            for end in ("a", "b"):
                if getattr(link, end) not in seen:
                    fail(join(where, end), f"unknown node {getattr(link, end)!r}", InstanceError)
            if link.a == link.b:
                fail(where, f"a link from {link.a!r} to itself is a cycle", InstanceError)
            pair = frozenset((link.a, link.b))
            if pair in pairs:
                fail(where, f"a second link between {link.a!r} and {link.b!r}", InstanceError)
            pairs.add(pair)

    def _check_root(self) -> str:
        switch_ids = {s.id for s in self.switches}
        if not self.switches:
            if len(self.machines) == 1 and not self.links:
                if self.root not in (None, self.machines[0].id):
                    fail(join(PATH, "root"), f"must name the only machine {self.machines[0].id!r} "
                         f"(or be omitted), got {self.root!r}", InstanceError)
                return self.machines[0].id
            fail(join(PATH, "switches"), "a cluster of several machines needs switches "
                 "(the root must be a switch)", InstanceError)
        if self.root is None:
            fail(join(PATH, "root"), "missing required key (the switch at the top of the tree)",
                 InstanceError)
        if self.root not in switch_ids:
            fail(join(PATH, "root"), f"must name a switch, got {self.root!r}", InstanceError)
        return self.root

    def _check_tree(self, root: str) -> nx.Graph:
        graph = nx.Graph()
        graph.add_nodes_from(n.id for n in (*self.machines, *self.switches))
        graph.add_edges_from((l.a, l.b) for l in self.links)
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            loop = " - ".join([u for u, _ in cycle] + [cycle[0][0]])
            fail(join(PATH, "links"), f"the links form a cycle: {loop}", InstanceError)
        reached = nx.node_connected_component(graph, root)
        for kind, nodes in (("machines", self.machines), ("switches", self.switches)):
            for i, node in enumerate(nodes):
                if node.id not in reached:
                    fail(join(join(PATH, kind), i), f"node {node.id!r} is not connected to the "
                         f"root {root!r}", InstanceError)
        return graph

    # ----- file form -----------------------------------------------------------------
    @classmethod
    def from_dict(cls, value: Any, path: str = PATH) -> "Topology":
        f = Fields(value, path, InstanceError, ("machines",), ("root", "switches", "links"))
        machines = []
        for i, m in enumerate(f.array("machines")):
            mf = Fields(m, join(join(path, "machines"), i), InstanceError,
                        ("id", "capacity", "local_gbps"), ("gpu_type",))
            machines.append(Machine(mf.string("id"),
                                    vector(m["capacity"], join(mf.path, "capacity"), InstanceError),
                                    mf.number("local_gbps", positive=True),
                                    mf.string("gpu_type") if mf.has("gpu_type") else None))
        switches = [Switch(Fields(s, join(join(path, "switches"), i), InstanceError, ("id",)).string("id"))
                    for i, s in enumerate(f.array("switches") if f.has("switches") else [])]
        links = []
        for i, l in enumerate(f.array("links") if f.has("links") else []):
            lf = Fields(l, join(join(path, "links"), i), InstanceError, ("a", "b", "gbps"))
            links.append(Link(lf.string("a"), lf.string("b"), lf.number("gbps", positive=True)))
        root = f.string("root") if f.has("root") else None
        return cls(tuple(machines), tuple(switches), tuple(links), root)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.root is not None:
            out["root"] = self.root
        out["machines"] = [m.to_dict() for m in self.machines]
        out["switches"] = [s.to_dict() for s in self.switches]
        out["links"] = [l.to_dict() for l in self.links]
        return out

    # ----- queries ---------------------------------------------------------------------
    @property
    def root_id(self) -> str:
        """The root node (the only machine for a single-machine cluster)."""
        return next(n for n, p in self._parent.items() if p is None)

    @cached_property
    def machine_index(self) -> dict[str, int]:
        return {m.id: i for i, m in enumerate(self.machines)}

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        """All node ids: machines first (same order as ``machines``), then switches."""
        return tuple(n.id for n in (*self.machines, *self.switches))

    @cached_property
    def gpu_types(self) -> tuple[str | None, ...]:
        """The GPU types of the machines, in order of first appearance (None: untyped)."""
        return tuple(dict.fromkeys(m.gpu_type for m in self.machines))

    @cached_property
    def typed(self) -> bool:
        """Does any machine declare a GPU type (MODEL.md 8)?"""
        return any(m.gpu_type is not None for m in self.machines)

    @cached_property
    def type_code(self) -> np.ndarray:
        """Per machine (topology order), the index of its type in :attr:`gpu_types` (read-only)."""
        index = {g: k for k, g in enumerate(self.gpu_types)}
        codes = np.array([index[m.gpu_type] for m in self.machines], dtype=np.int64)
        codes.flags.writeable = False
        return codes

    def graph(self) -> nx.Graph:
        """The tree as a NetworkX graph; nodes carry ``kind`` (and machine data), edges ``gbps``."""
        g = nx.Graph(root=self.root_id)
        for m in self.machines:
            g.add_node(m.id, kind="machine", capacity=dict(m.capacity), local_gbps=m.local_gbps)
        for s in self.switches:
            g.add_node(s.id, kind="switch")
        for i, l in enumerate(self.links):
            g.add_edge(l.a, l.b, gbps=l.gbps, index=i)
        return g

    def parent(self, node: str) -> str | None:
        return self._parent[node]

    def depth(self, node: str) -> int:
        return self._depth[node]

    def ancestors(self, node: str) -> list[str]:
        """``node`` and every node above it, up to the root."""
        out = [node]
        while (p := self._parent[out[-1]]) is not None:
            out.append(p)
        return out

    def lca(self, nodes: Iterable[str]) -> str:
        """Lowest common ancestor; of one node, the node itself."""
        nodes = list(nodes)
        if not nodes:
            raise ValueError("lca of no nodes")
        common = self.ancestors(nodes[0])
        for n in nodes[1:]:
            up = set(self.ancestors(n))
            common = [a for a in common if a in up]
        return common[0]

    def path_links(self, node: str, ancestor: str) -> list[int]:
        """Indices (into ``links``) of the links from ``node`` up to its ``ancestor``."""
        out = []
        while node != ancestor:
            if self._parent[node] is None:
                raise ValueError(f"{ancestor!r} is not an ancestor of the starting node")
            out.append(self._parent_link[node])
            node = self._parent[node]
        return out

    def below(self, node: str) -> list[str]:
        """Machines in the subtree of ``node`` (the node itself if it is a machine)."""
        return list(self._below[node])

    @cached_property
    def _below(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {n: [] for n in self.nodes}
        for m in self.machines:
            for a in self.ancestors(m.id):
                out[a].append(m.id)
        return {n: tuple(ms) for n, ms in out.items()}

    @cached_property
    def ancestor_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Arrays for vectorised LCA and link loads.

        Returns ``(anc, depth, up_link)``: ``anc[h, d]`` is the index (into ``nodes``) of
        machine h's ancestor at depth d (-1 below h's own depth), ``depth[h]`` machine h's
        depth, and ``up_link[n]`` the index of the link from node n to its parent (-1 at
        the root)."""
        index = {n: i for i, n in enumerate(self.nodes)}
        depth = np.array([self._depth[m.id] for m in self.machines], dtype=np.int64)
        anc = np.full((len(self.machines), int(depth.max()) + 1), -1, dtype=np.int64)
        for h, m in enumerate(self.machines):
            for a in self.ancestors(m.id):
                anc[h, self._depth[a]] = index[a]
        up_link = np.array([self._parent_link.get(n, -1) for n in self.nodes], dtype=np.int64)
        return anc, depth, up_link
