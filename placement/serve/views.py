"""What the read endpoints answer, computed from one published checkpoint document
(:attr:`placement.serve.service.Service.document`) and nothing else: a read never takes
the lock, and sees one consistent state.

A job's record: ``id``, ``status`` (``open``, ``finished``, ``cancelled``), and for an open
job ``arrival``, ``done`` (batches reported), ``attained`` (worker-seconds run), ``tasks``
(machine -> [workers, ps] in the last slot stepped), ``last_ran``, ``estimate``, ``label``
and ``job`` (its description in the instance format).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placement.serve.errors import Rejected

__all__ = ["cluster", "health", "job", "summary"]


def health(document: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /healthz``: alive, and where the schedule stands."""
    state = document["scheduler"]
    return {"status": "ok", "last_slot": state["last_slot"], "open_jobs": len(state["jobs"])}


def summary(document: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /state``: the settings, the cluster in figures, every open job's record, the
    closed jobs and the last step's answer."""
    state = document["scheduler"]
    last = state["last_slot"]
    closed = state["closed"]
    return {
        "last_slot": last, "next_slot": 0 if last is None else last + 1,
        "policy": document["policy"], "information": state["information"], "lookahead": state["lookahead"],
        "slot_seconds": state["slot_seconds"], "mode": state["mode"],
        "cluster": _cluster_figures(document),
        "counts": {"open": len(state["jobs"]), "finished": sum(1 for v in closed.values() if v == "finished"),
                   "cancelled": sum(1 for v in closed.values() if v == "cancelled")},
        "jobs": [_record(raw) for raw in state["jobs"]],
        "closed": closed,
        "drops_total": state["drops_total"],
        "last_step": document["last_step"],
    }


def job(document: Mapping[str, Any], job_id: str) -> dict[str, Any]:
    """``GET /jobs/{id}``: one job's record; 404 for an id never submitted."""
    state = document["scheduler"]
    for raw in state["jobs"]:
        if raw["job"]["id"] == job_id:
            return _record(raw)
    if job_id in state["closed"]:
        return {"id": job_id, "status": state["closed"][job_id]}
    raise Rejected(404, f"unknown job {job_id!r} (never submitted)", "job")


def cluster(document: Mapping[str, Any]) -> dict[str, Any]:
    """``GET /cluster``: the cluster now (machines added and removed), in the instance format."""
    state = document["scheduler"]
    return {"spec": document["cluster"]["spec"], "resources": state["resources"], "topology": state["topology"]}


def _cluster_figures(document: Mapping[str, Any]) -> dict[str, Any]:
    topology = document["scheduler"]["topology"]
    totals: dict[str, float] = {}
    for m in topology["machines"]:
        for r, v in m["capacity"].items():
            totals[r] = totals.get(r, 0) + v
    return {"spec": document["cluster"]["spec"], "machines": len(topology["machines"]),
            "switches": len(topology["switches"]), "capacity": totals}


def _record(raw: Mapping[str, Any]) -> dict[str, Any]:
    job_doc = raw["job"]
    return {"id": job_doc["id"], "status": "open", "arrival": job_doc["arrival"], "done": raw["done"],
            "attained": raw["attained"], "tasks": {h: [w, s] for h, w, s in raw["previous"]},
            "last_ran": raw["last_ran"], "estimate": raw.get("estimate"), "label": raw.get("label"),
            "job": job_doc}
