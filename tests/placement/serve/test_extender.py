"""The scheduler extender's filter and prioritize: a pod of job J is kept to the nodes of J's
allocation in the last step; pods that are not ours pass untouched."""
from __future__ import annotations

import pytest

from placement.serve.extender import JOB_LABEL, MAX_SCORE

pytest.importorskip("fastapi")


def pod(job: str | None) -> dict:
    labels = {"app": "trainer"} if job is None else {"app": "trainer", JOB_LABEL: job}
    return {"metadata": {"name": "p-0", "namespace": "default", "labels": labels}, "spec": {}}


@pytest.fixture
def stepped(open_service, client_of, jobs):
    """A client after one step with more jobs than fit: (client, allocations, waiting job, machines)."""
    client = client_of(open_service())
    for job in jobs(40, arrival=0):
        assert client.post("/jobs", json={"job": job.to_dict()}).status_code == 201
    allocations = client.post("/step", json={}).json()["allocations"]
    waiting = next(j for j in (job.id for job in jobs(40, arrival=0)) if j not in allocations)
    machines = [m["id"] for m in client.get("/cluster").json()["topology"]["machines"]]
    return client, allocations, waiting, machines


def test_a_placed_jobs_pod_passes_only_its_nodes(stepped):
    client, allocations, _, machines = stepped
    job, tasks = next(iter(allocations.items()))
    out = client.post("/extender/filter", json={"Pod": pod(job), "NodeNames": machines}).json()
    assert sorted(out["NodeNames"]) == sorted(tasks)
    assert sorted(out["FailedNodes"]) == sorted(set(machines) - set(tasks)) and out["Error"] == ""
    assert all(job in reason for reason in out["FailedNodes"].values())


def test_a_node_list_comes_back_filtered_whole(stepped):
    client, allocations, _, machines = stepped
    job, tasks = next(iter(allocations.items()))
    items = [{"metadata": {"name": m, "labels": {"rack": m[:2]}}, "status": {}} for m in machines]
    out = client.post("/extender/filter", json={"Pod": pod(job), "Nodes": {"kind": "NodeList", "items": items}}).json()
    assert out["Nodes"]["kind"] == "NodeList" and "NodeNames" not in out
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == [m for m in machines if m in tasks]
    assert out["Nodes"]["items"][0]["metadata"]["labels"] == {"rack": out["Nodes"]["items"][0]["metadata"]["name"][:2]}


def test_a_waiting_jobs_pod_stays_pending(stepped):
    client, _, waiting, machines = stepped
    out = client.post("/extender/filter", json={"Pod": pod(waiting), "NodeNames": machines}).json()
    assert out["NodeNames"] == [] and sorted(out["FailedNodes"]) == sorted(machines)
    assert "waits" in out["FailedNodes"][machines[0]]


@pytest.mark.parametrize("job", [None, "never-submitted"])
def test_pods_that_are_not_ours_pass_everywhere(stepped, job):
    client, _, _, machines = stepped
    out = client.post("/extender/filter", json={"Pod": pod(job), "NodeNames": machines}).json()
    assert out["NodeNames"] == machines and out["FailedNodes"] == {}
    scores = client.post("/extender/prioritize", json={"Pod": pod(job), "NodeNames": machines}).json()
    assert scores == [{"Host": m, "Score": 0} for m in machines]


def test_prioritize_scores_the_jobs_nodes_by_its_tasks(stepped):
    client, allocations, _, machines = stepped
    job, tasks = max(allocations.items(), key=lambda kv: len(kv[1]))
    scores = {s["Host"]: s["Score"] for s in
              client.post("/extender/prioritize", json={"Pod": pod(job), "NodeNames": machines}).json()}
    most = max(sum(t) for t in tasks.values())
    assert scores == {m: round(MAX_SCORE * sum(tasks[m]) / most) if m in tasks else 0 for m in machines}
    assert max(scores.values()) == MAX_SCORE


@pytest.mark.parametrize("body, field", [({"NodeNames": ["a"]}, "Pod"),
                                         ({"Pod": pod("x")}, "NodeNames"),
                                         ({"Pod": pod("x"), "NodeNames": "a"}, "NodeNames"),
                                         ({"Pod": pod("x"), "Nodes": {"items": [{"name": "a"}]}}, "Nodes"),
                                         ({"Pod": {"metadata": []}, "NodeNames": []}, "Pod.metadata"),
                                         ({"Pod": {"metadata": {"labels": {JOB_LABEL: 3}}}, "NodeNames": []},
                                          f"Pod.metadata.labels.{JOB_LABEL}")])
def test_malformed_extender_args_are_422_naming_the_field(stepped, body, field):
    client = stepped[0]
    before = client.get("/state").json()
    for verb in ("filter", "prioritize"):
        r = client.post(f"/extender/{verb}", json=body)
        assert r.status_code == 422 and r.json()["field"] == field
    assert client.get("/state").json() == before


def test_extender_bodies_are_strict_json(stepped):
    client = stepped[0]
    r = client.post("/extender/filter", content=b'{"Pod": {}, "NodeNames": [NaN]}',
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert client.post("/extender/filter", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415
