"""The Kubernetes scheduler extender's ``filter`` and ``prioritize`` verbs, answered from the
service's last step, so kube-scheduler keeps each pod of job J to the nodes of J's
allocation (the gang placement the scheduler decided; docs/serve.md, "Scheduler extender").

kube-scheduler sends ``ExtenderArgs``: ``{"Pod": <v1.Pod>, "Nodes": <v1.NodeList>}`` or,
with ``nodeCacheCapable: true``, ``{"Pod": ..., "NodeNames": [...]}``. A pod names its job
by the label :data:`JOB_LABEL`; node names are our machine ids (a skeleton imported with
``placement import-topology kueue|volcano`` uses the nodes' names).

- ``filter`` answers ``ExtenderFilterResult``: a pod of a job placed in the last step
  passes the nodes that hold the job's workers or PSs, every other node fails with the
  reason; a pod of a job the last step left waiting fails everywhere (it stays pending
  until a step places its job: a gang starts whole); a pod without the label, or of a job
  the service does not know, passes every node (not ours to decide).
- ``prioritize`` answers a ``HostPriorityList``: on each node, the job's tasks there
  scaled to 0..:data:`MAX_SCORE` (the most-loaded node of the allocation scores the most),
  0 elsewhere and for pods that are not ours.

Reads only the published document (no lock), as every read endpoint does.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placement.serve.errors import Rejected

__all__ = ["JOB_LABEL", "MAX_SCORE", "filter_nodes", "prioritize"]

#: the pod label naming the job a pod belongs to
JOB_LABEL = "placement/job"
#: kube-scheduler's MaxExtenderPriority
MAX_SCORE = 10


def filter_nodes(document: Mapping[str, Any], args: Any) -> dict[str, Any]:
    """``POST /extender/filter`` (module docstring)."""
    job, nodes, names = _read(args)
    tasks = _allocation(document, job)
    if tasks is None:
        keep, failed = names, {}
    else:
        where = ", ".join(sorted(tasks)) or "no node"
        slot = document["last_step"]["t"] if document["last_step"] else None
        reason = (f"job {job} runs on {where} in slot {slot}" if tasks else
                  f"job {job} waits: the last step (slot {slot}) placed none of its tasks")
        keep = [n for n in names if n in tasks]
        failed = {n: reason for n in names if n not in tasks}
    out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
    if nodes is None:
        out["NodeNames"] = keep
    else:
        kept = set(keep)
        out["Nodes"] = {**nodes, "items": [n for n in nodes["items"] if n["metadata"]["name"] in kept]}
    return out


def prioritize(document: Mapping[str, Any], args: Any) -> list[dict[str, Any]]:
    """``POST /extender/prioritize`` (module docstring)."""
    job, _, names = _read(args)
    tasks = _allocation(document, job) or {}
    most = max((sum(t) for t in tasks.values()), default=0)
    return [{"Host": n, "Score": round(MAX_SCORE * sum(tasks[n]) / most) if n in tasks and most else 0}
            for n in names]


def _allocation(document: Mapping[str, Any], job: str | None) -> dict[str, list[int]] | None:
    """Node -> [workers, ps] of ``job`` in the last step; ``{}`` when the step left it waiting;
    None when the pod is not ours (no label, a job never submitted or already ended)."""
    if job is None or not any(raw["job"]["id"] == job for raw in document["scheduler"]["jobs"]):
        return None
    step = document["last_step"]
    return dict(step["allocations"].get(job, {})) if step else {}


def _read(args: Any) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """(the pod's job, the NodeList if sent, the node names) from ``ExtenderArgs``; a 422
    naming the field for anything else."""
    if not isinstance(args, dict):
        raise Rejected(422, "the body must be ExtenderArgs: a JSON object with Pod and Nodes or NodeNames")
    pod = args.get("Pod")
    if not isinstance(pod, dict):
        raise Rejected(422, "Pod: missing, or not an object (a v1.Pod)", "Pod")
    metadata = pod.get("metadata", {})
    if not isinstance(metadata, dict):
        raise Rejected(422, "Pod.metadata: not an object", "Pod.metadata")
    labels = metadata.get("labels") or {}
    if not isinstance(labels, dict):
        raise Rejected(422, "Pod.metadata.labels: not an object", "Pod.metadata.labels")
    job = labels.get(JOB_LABEL)
    if job is not None and not isinstance(job, str):
        raise Rejected(422, f"Pod.metadata.labels.{JOB_LABEL}: not a string", f"Pod.metadata.labels.{JOB_LABEL}")
    nodes, names = args.get("Nodes"), args.get("NodeNames")
    if nodes is not None:
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if not isinstance(items, list) or not all(
                isinstance(n, dict) and isinstance(n.get("metadata"), dict)
                and isinstance(n["metadata"].get("name"), str) for n in items):
            raise Rejected(422, "Nodes: not a NodeList (items, each with metadata.name)", "Nodes")
        return job, nodes, [n["metadata"]["name"] for n in items]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise Rejected(422, "NodeNames: missing (and no Nodes), or not a list of names", "NodeNames")
    return job, None, names
