"""Kubernetes inputs of the Kueue and Volcano importers: files of one or more objects (YAML;
a JSON file is read as JSON, so its errors name a line and column and a repeated key is
refused) and the node list (``kubectl get nodes -o json``) with each node's labels and
allocatable GPUs, CPUs and memory. Shared so both importers read nodes, and report bad
ones, the same way.

Units: ``cpu`` in cores (``95500m`` is 95.5), ``memory`` in GiB (bytes / 2**30, written
``mem`` in GB as everywhere in placement), ``nvidia.com/gpu`` a count; each a Kubernetes
quantity read by the Kubernetes client's ``parse_quantity``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from placement.managers.tree import TopologyFileError, Where, read_text
from placement.model import limits
from placement.model.cluster_spec import tidy
from placement.model.strict_json import FileFormatError, read_json

GPU = "nvidia.com/gpu"
GIB = 2**30
#: a machine's resources and the allocatable quantity each comes from
ALLOCATABLE = (("gpu", GPU), ("cpu", "cpu"), ("mem", "memory"))
NO_GPU = f"no {GPU} in status.allocatable (every machine in the tree needs GPUs)"


@dataclass(frozen=True)
class Node:
    """One item of a node list: its name, labels, allocatable quantities (unread) and place."""

    name: str
    labels: dict[str, str]
    allocatable: Mapping[str, Any]
    where: Where


def documents(path: str) -> list[tuple[Where, dict[str, Any]]]:
    """The objects of a YAML or JSON file with their places: each document of a YAML stream
    (``---``), the items of a List (``kind: List``, ``NodeList``, ``HyperNodeList``, ...)."""
    text = read_text(path)
    if text.lstrip()[:1] in ("{", "["):
        try:
            docs = [read_json(path, FileFormatError)]
        except FileFormatError as exc:  # a YAML stream of JSON documents is fine; broken JSON is JSON's error
            if not exc.reason.startswith("not valid JSON"):
                raise TopologyFileError(str(path), "", exc.reason) from None
            try:
                docs = _yaml(path, text)
            except TopologyFileError:
                raise TopologyFileError(str(path), "", exc.reason) from None
    else:
        docs = _yaml(path, text)
    docs = [d for d in docs if d is not None]
    out = []
    for k, doc in enumerate(docs):
        where = Where(str(path), f"document {k + 1}" if len(docs) > 1 else "")
        if isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            items = doc["items"]
            if not isinstance(items, list):
                where.at("items").fail("must be a list")
            out.extend((where.at(f"items[{i}]"), item) for i, item in enumerate(items))
        else:
            out.append((where if where.place else Where(str(path), "document 1"), doc))
    for where, obj in out:
        if not isinstance(obj, Mapping):
            where.fail(f"expected an object (a mapping of keys), got {_kind(obj)}")
    return out


class _NoAliases(yaml.SafeLoader):
    """Safe YAML without anchors and aliases (``*name``): Kubernetes files do not need them,
    and refusing them keeps a small file from standing for a huge one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.MarkedYAMLError(problem="aliases (*name) are not supported", problem_mark=mark)
        return super().compose_node(parent, index)


def _yaml(path: str, text: str) -> list[Any]:
    try:
        return list(yaml.load_all(text, Loader=_NoAliases))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise TopologyFileError(str(path), where, f"not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise TopologyFileError(str(path), "", f"not valid YAML: {exc}") from None
    except RecursionError:
        raise TopologyFileError(str(path), "", "not valid YAML: nested too deeply") from None


def field(obj: Mapping[str, Any], dotted: str, where: Where, kind: type | tuple[type, ...] = str,
          required: bool = True) -> Any:
    """``obj``'s value at a dotted path (``metadata.name``), checked to be of ``kind``
    (a non-empty string for ``str``); None when absent and not ``required``."""
    value: Any = obj
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    if value is None:
        if required:
            where.at(dotted).fail("missing")
        return None
    if isinstance(value, bool) and kind is not bool or not isinstance(value, kind) or value == "":
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        want = {"str": "a non-empty string", "dict": "a mapping", "list": "a list"}.get(names, names)
        where.at(dotted).fail(f"must be {want}, got {_kind(value)}")
    return value


def read_nodes(path: str) -> list[Node]:
    """The nodes of a node list (``kubectl get nodes -o json``, or YAML; a List or single
    Node objects), each named in its place for later errors."""
    nodes: list[Node] = []
    seen: dict[str, Where] = {}
    for where, obj in documents(path):
        kind = obj.get("kind", "Node")
        if kind != "Node":
            where.fail(f"kind {kind!r}, expected Node (a node list: kubectl get nodes -o json)")
        name = field(obj, "metadata.name", where)
        where = Where(where.path, f"{where.place} (node {name})")
        labels = field(obj, "metadata.labels", where, dict, required=False) or {}
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                where.at(f"metadata.labels[{key!r}]").fail(f"must be a string, got {_kind(value)}")
        allocatable = field(obj, "status.allocatable", where, dict, required=False) or {}
        if name in seen:
            where.fail(f"node {name} is listed twice (first at {seen[name].cite(where)})")
        seen[name] = where
        nodes.append(Node(name, dict(labels), allocatable, where))
        if len(nodes) > limits.value(limits.MACHINES):
            where.fail(limits.too_many(limits.MACHINES, len(nodes), "nodes"))
    if not nodes:
        Where(str(path)).fail("no nodes (expected a node list: kubectl get nodes -o json)")
    return nodes


def capacity(node: Node) -> dict[str, float]:
    """A node's ``gpu`` (0 without ``nvidia.com/gpu``), ``cpu`` (cores) and ``mem`` (GiB)."""
    out = {}
    for resource, key in ALLOCATABLE:
        if key not in node.allocatable:
            if resource == "gpu":
                out[resource] = 0
                continue
            node.where.fail(f"no {key} in status.allocatable")
        value = _quantity(node.allocatable[key], node.where.at(f"status.allocatable[{key!r}]"))
        out[resource] = tidy(value / GIB if resource == "mem" else value)
    return out


def _quantity(raw: Any, where: Where) -> float:
    from kubernetes.utils.quantity import parse_quantity  # the client loads in 0.2 s: only when needed

    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        where.fail(f"must be a quantity such as '8', '95500m' or '1056Gi', got {_kind(raw)}")
    try:
        value = float(parse_quantity(raw))
    except (ValueError, ArithmeticError) as exc:
        where.fail(f"{raw!r} is not a Kubernetes quantity ({exc})")
    if not math.isfinite(value) or value < 0:
        where.fail(f"{raw!r} is not a finite quantity >= 0")
    return value


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "nothing"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)
