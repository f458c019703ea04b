"""Volcano network topology: HyperNodes (``topology.volcano.sh/v1alpha1``; each a switch
whose members are nodes or other HyperNodes) read with the node list that gives the nodes'
capacities and the labels ``labelMatch`` selects on.

Selection follows Volcano's scheduler (pkg/scheduler/api/hyper_node_info.go, GetMembers):
``exactMatch`` names one node or HyperNode; ``regexMatch`` takes the nodes whose name the
pattern matches *anywhere* (Go's ``regexp.MatchString``; read here with RE2, the engine and
syntax of Go's regexp, so a pattern runs in linear time and one Go refuses is refused:
anchor with ``^...$`` to match whole names);
``labelMatch`` is a Kubernetes label selector (``matchLabels`` and ``matchExpressions``
with In, NotIn, Exists, DoesNotExist), an empty one selecting nothing. Volcano's rules are
errors here: one selector per member, HyperNode members by ``exactMatch`` only, no
HyperNode with both kinds of member, at most one parent, no cycle; and a member HyperNode's
``spec.tier`` must be below its parent's. The tree's link speeds come from its shape
(tree.py), not from ``spec.tier``. Nodes that no HyperNode selects are left out.
"""
from __future__ import annotations

import re2
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

from placement.managers.nodelist import NO_GPU, Node, capacity, documents, field, read_nodes
from placement.managers.tree import Tiers, Tree, Where
from placement.model.topology import Topology

API_GROUP = "topology.volcano.sh/"
SELECTORS = ("exactMatch", "regexMatch", "labelMatch")
#: RE2 that reports a bad pattern by its exception alone (by default it also logs to stderr)
_QUIET = re2.Options()
_QUIET.log_errors = False
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def read_volcano(hypernodes: str, nodes: str, tiers: Tiers = Tiers()) -> Topology:
    """The tree of the HyperNodes in ``hypernodes`` over the node list ``nodes``."""
    found = [_hypernode(where, obj) for where, obj in documents(hypernodes)]
    if not found:
        Where(str(hypernodes)).fail("no HyperNode objects")
    listed = _Nodes(read_nodes(nodes))
    tree = Tree(Path(nodes).name, NO_GPU, switch_word="HyperNode")
    tier: dict[str, int] = {}
    machines: set[str] = set()
    for name, where, level, _ in found:
        tree.switch(name, where)
        tier[name] = level
    for name, where, level, members in found:
        for at, kind, choose in members:
            if kind == "HyperNode":
                child = choose(listed)[0]
                if child in tier and tier[child] >= level:
                    at.fail(f"HyperNode {child} has tier {tier[child]}, not below this HyperNode's tier {level}")
                tree.attach(child, name, at, switch=True)
                continue
            for chosen in choose(listed):
                node = listed.by_name.get(chosen)
                if node is not None and chosen not in machines:
                    machines.add(chosen)
                    tree.machine(chosen, capacity(node), node.where)
                tree.attach(chosen, name, at)
    return tree.build(tiers, Where(str(hypernodes)))


class _Nodes:
    """The node list, by name and (found once, when first asked) by label: labelMatch over
    thousands of racks stays linear in the nodes."""

    def __init__(self, nodes: list[Node]):
        self.all = nodes
        self.by_name = {node.name: node for node in nodes}
        self._by_label: dict[tuple[str, str], list[Node]] | None = None

    def labelled(self, key: str, value: str) -> list[Node]:
        if self._by_label is None:
            self._by_label = {}
            for node in self.all:
                for pair in node.labels.items():
                    self._by_label.setdefault(pair, []).append(node)
        return self._by_label.get((key, value), [])


Member = tuple[Where, str, Callable[[_Nodes], list[str]]]


def _hypernode(where: Where, obj: Mapping[str, Any]) -> tuple[str, Where, int, list[Member]]:
    """One HyperNode, checked: (name, place, tier, members as (place, type, chooser))."""
    if obj.get("kind") != "HyperNode":
        where.fail(f"kind {obj.get('kind')!r}, expected HyperNode")
    version = obj.get("apiVersion")
    if not isinstance(version, str) or not version.startswith(API_GROUP):
        where.at("apiVersion").fail(f"expected {API_GROUP}v1alpha1, got {version!r}")
    where = Where(where.path, f"{where.place} (HyperNode {field(obj, 'metadata.name', where)})")
    tier = field(obj, "spec.tier", where, (int, str))
    if isinstance(tier, str):  # the first API had a string tier
        if not tier.isdigit():
            where.at("spec.tier").fail(f"must be a whole number >= 0, got {tier!r}")
        tier = int(tier)
    if tier < 0:
        where.at("spec.tier").fail(f"must be >= 0, got {tier}")
    members = field(obj, "spec.members", where, list)
    if not members:
        where.at("spec.members").fail("must list at least one member")
    out = [_member(where.at(f"spec.members[{i}]"), m) for i, m in enumerate(members)]
    kinds = {kind for _, kind, _ in out}
    if len(kinds) > 1:
        where.at("spec.members").fail("has both Node and HyperNode members (a HyperNode holds one kind)")
    return obj["metadata"]["name"], where, tier, out


def _member(at: Where, member: Any) -> Member:
    if not isinstance(member, Mapping):
        at.fail("must be a mapping with type and selector")
    kind = field(member, "type", at)
    if kind not in ("Node", "HyperNode"):
        at.at("type").fail(f"expected Node or HyperNode, got {kind!r}")
    selector = field(member, "selector", at, dict)
    given = [s for s in SELECTORS if s in selector]
    if len(given) != 1:
        at.at("selector").fail(f"give exactly one of {', '.join(SELECTORS)}, got {len(given)}")
    how, spec = given[0], selector[given[0]]
    at = at.at(f"selector.{how}")
    if not isinstance(spec, Mapping):
        at.fail("must be a mapping")
    if kind == "HyperNode" and how != "exactMatch":
        at.fail("a HyperNode member is chosen by exactMatch only (Volcano)")
    if how == "exactMatch":
        name = field(spec, "name", at)
        return at, kind, lambda nodes: [name]
    if how == "regexMatch":
        pattern = field(spec, "pattern", at)
        try:   # RE2, as Volcano's Go regexp: linear time, and Go's syntax (no lookaround, no backreference)
            compiled = re2.compile(pattern, _QUIET)
        except re2.error as exc:
            why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
            at.at("pattern").fail(f"not an RE2 regular expression (Volcano's Go syntax): {why}")
        return at, kind, lambda nodes: [n.name for n in nodes.all if compiled.search(n.name)]
    return at, kind, _label_chooser(spec, at)


def _label_chooser(spec: Mapping[str, Any], at: Where) -> Callable[[_Nodes], list[str]]:
    """A Kubernetes label selector as a chooser of nodes (an empty one chooses none)."""
    labels = field(spec, "matchLabels", at, dict, required=False) or {}
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            at.at("matchLabels").fail(f"labels are strings, got {key!r}: {value!r}")
    rules = []
    for i, rule in enumerate(field(spec, "matchExpressions", at, list, required=False) or []):
        where = at.at(f"matchExpressions[{i}]")
        if not isinstance(rule, Mapping):
            where.fail("must be a mapping with key, operator and values")
        key, operator = field(rule, "key", where), field(rule, "operator", where)
        values = field(rule, "values", where, list, required=False) or []
        if operator not in OPERATORS:
            where.at("operator").fail(f"expected one of {', '.join(OPERATORS)}, got {operator!r}")
        if (operator in ("In", "NotIn")) != bool(values) or not all(isinstance(v, str) for v in values):
            where.at("values").fail(f"{operator} takes " + ("a list of strings" if operator in ("In", "NotIn")
                                                           else "no values"))
        rules.append((key, operator, set(values)))
    if not labels and not rules:
        return lambda nodes: []

    def test(node_labels: dict[str, str]) -> bool:
        if any(node_labels.get(k) != v for k, v in labels.items()):
            return False
        for key, operator, values in rules:
            present = key in node_labels
            ok = {"In": present and node_labels.get(key) in values,
                  "NotIn": not present or node_labels[key] not in values,
                  "Exists": present, "DoesNotExist": not present}[operator]
            if not ok:
                return False
        return True

    def choose(nodes: _Nodes) -> list[str]:
        candidates = min((nodes.labelled(k, v) for k, v in labels.items()), key=len) if labels else nodes.all
        return [n.name for n in candidates if test(n.labels)]
    return choose
