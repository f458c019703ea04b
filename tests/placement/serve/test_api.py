"""The HTTP API through FastAPI's TestClient: every endpoint, every class of bad request
(the right 4xx, a JSON body naming the field, state and file unchanged), and the answers
compared with the library scheduler fed the same calls."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")

HEADERS = {"content-type": "application/json"}


def submit(client, job, **extra):
    return client.post("/jobs", json={"job": job.to_dict(), **extra})


def test_a_session_answers_as_the_library_does(open_service, client_of, jobs, reference, wire):
    service = open_service()
    client = client_of(service)
    ref = reference()
    batch = jobs(8, arrival=0)
    for job in batch:
        r = submit(client, job)
        assert r.status_code == 201 and r.json() == {"job": job.id, "status": "open", "arrival": 0}
        assert r.headers["location"] == f"/jobs/{job.id}"
        ref.submit(job)
    for t in range(4):
        r = client.post("/step", json={}) if t % 2 else client.post("/step", json={"t": t})
        assert r.status_code == 200
        body = r.json()
        assert body["t"] == t and body["replayed"] is False and body["dropped"] == []
        assert body["allocations"] == wire(ref.step(t))
        assert r.headers["server-timing"].startswith("step;dur=")
        for job in batch[:4]:
            done = 100.0 * (t + 1)
            assert client.post(f"/jobs/{job.id}/progress", json={"done": done}).json() == \
                {"job": job.id, "status": "open", "done": done}
            ref.report(job.id, done)
    r = client.post(f"/jobs/{batch[0].id}/progress", json={"done": 999, "finished": True})
    assert r.json()["status"] == "finished"
    ref.report(batch[0].id, 999)
    ref.finish(batch[0].id)
    assert client.post(f"/jobs/{batch[1].id}/progress", json={"finished": True}).status_code == 200
    ref.finish(batch[1].id)
    assert client.delete(f"/jobs/{batch[2].id}").json() == {"job": batch[2].id, "status": "cancelled"}
    ref.cancel(batch[2].id)
    assert client.post("/step", json={}).json()["allocations"] == wire(ref.step(4))

    state = client.get("/state").json()
    assert state["last_slot"] == 4 and state["next_slot"] == 5
    assert state["counts"] == {"open": 5, "finished": 2, "cancelled": 1}
    assert [j["id"] for j in state["jobs"]] == [j.id for j in batch[3:]]
    assert state["cluster"] == {"spec": "racks:2x4", "machines": 8, "switches": 3,
                                "capacity": {"gpu": 64, "cpu": 512, "mem": 4096}}
    assert state["closed"] == {batch[0].id: "finished", batch[1].id: "finished", batch[2].id: "cancelled"}
    record = client.get(f"/jobs/{batch[3].id}").json()
    assert record["done"] == 400.0 and record["job"] == batch[3].to_dict() and record["status"] == "open"
    assert client.get(f"/jobs/{batch[0].id}").json() == {"id": batch[0].id, "status": "finished"}
    assert client.get("/healthz").json() == {"status": "ok", "last_slot": 4, "open_jobs": 5}


def test_machine_events_and_revise_reach_the_scheduler(open_service, client_of, jobs, reference, wire):
    from placement.model.topology import Machine

    client = client_of(open_service())
    ref = reference()
    batch = jobs(6, arrival=0)
    for job in batch:
        submit(client, job)
        ref.submit(job)
    assert client.post("/step", json={}).json()["allocations"] == wire(ref.step(0))
    r = client.delete("/machines/r0m1")
    assert r.status_code == 200 and r.json()["displaced"] == ref.remove_machine("r0m1")
    machine = {"id": "new0", "capacity": {"gpu": 8, "cpu": 64, "mem": 512}, "local_gbps": 400}
    r = client.post("/machines", json={"machine": machine, "parent_switch": "tor0", "gbps": 25})
    assert r.status_code == 201 and r.json()["machine"] == "new0"
    ref.add_machine(Machine("new0", machine["capacity"], 400), "tor0", 25)
    revised = {**batch[0].to_dict(), "max_workers": 2, "min_workers": 1}
    del revised["id"], revised["arrival"]    # both may be left out: the path's id, the submitted slot
    assert client.put(f"/jobs/{batch[0].id}", json={"job": revised}).status_code == 200
    from placement.model.instance import Job
    ref.revise(Job.from_dict({**revised, "id": batch[0].id, "arrival": 0}, "job"))
    assert client.post("/step", json={}).json()["allocations"] == wire(ref.step(1))
    assert [m["id"] for m in client.get("/cluster").json()["topology"]["machines"]] == \
        [m.id for m in ref.topology.machines]


def test_arrival_defaults_to_the_next_slot(open_service, client_of, jobs):
    client = client_of(open_service())
    first, second = jobs(2)
    client.post("/step", json={})
    body = first.to_dict()
    del body["arrival"]
    assert submit(client, first).status_code == 409                # arrival 0 is in the past now
    assert client.post("/jobs", json={"job": body}).json()["arrival"] == 1


def test_below_oracle_work_batches_may_be_left_out(open_service, client_of, jobs):
    client = client_of(open_service(information="estimate"))
    body = jobs(1, arrival=0)[0].to_dict()
    del body["work_batches"]
    r = client.post("/jobs", json={"job": body, "estimate": 5000, "label": "resnet"})
    assert r.status_code == 201
    record = client.get(f"/jobs/{body['id']}").json()
    assert (record["estimate"], record["label"], record["job"]["work_batches"]) == (5000, "resnet", 5000)


def test_a_retried_step_is_answered_as_before(open_service, client_of, jobs):
    service = open_service()
    client = client_of(service)
    for job in jobs(5, arrival=0):
        submit(client, job)
    first = client.post("/step", json={}).json()
    before = service.state_path.read_bytes()
    again = client.post("/step", json={"t": 0})
    assert again.status_code == 200 and again.json() == {**first, "replayed": True}
    assert service.state_path.read_bytes() == before


# ----- bad requests ---------------------------------------------------------------------
def _bad_cases(job: dict, other: dict) -> list[tuple]:
    """(method, path, body: dict | bytes, content type, status, field)."""
    j = job["id"]
    big = b'{"job": "' + b"x" * (1 << 20) + b'"}'

    def chunks():
        for _ in range(20):
            yield b" " * 65536
    return [
        ("post", "/jobs", b'{"job": ', None, 400, None),
        ("post", f"/jobs/{j}/progress", b'{"done": NaN}', None, 400, "done"),
        ("post", f"/jobs/{j}/progress", b'{"done": -Infinity}', None, 400, "done"),
        ("post", "/jobs", json.dumps({"job": other}).replace('"work_batches": ', '"work_batches": Infinity, "x": ')
         .encode(), None, 400, "job.work_batches"),
        ("post", f"/jobs/{j}/progress", b'{"done": 1, "done": 2}', None, 400, "done"),
        ("post", f"/jobs/{j}/progress", b'{"done": "\xff"}', None, 400, None),
        ("post", f"/jobs/{j}/progress", b'{"done": 1}', "text/plain", 415, None),
        ("post", "/jobs", big, None, 413, None),
        ("post", "/jobs", chunks(), None, 413, None),
        ("post", f"/jobs/{j}/progress", {"done": -1}, None, 422, "done"),
        ("post", f"/jobs/{j}/progress", {"done": "12"}, None, 422, "done"),
        ("post", f"/jobs/{j}/progress", {"done": True}, None, 422, "done"),
        ("post", f"/jobs/{j}/progress", b'{"done": 1' + b"0" * 5000 + b"}", None, 422, "done"),
        ("post", f"/jobs/{j}/progress", {"done": 1, "colour": "red"}, None, 422, "colour"),
        ("post", f"/jobs/{j}/progress", {}, None, 422, "done"),
        ("post", f"/jobs/{j}/progress", {"finished": "yes"}, None, 422, "finished"),
        ("post", f"/jobs/{j}/progress", [1, 2], None, 422, None),
        ("post", "/jobs", {"estimate": 3}, None, 422, "job"),
        ("post", "/jobs", {"job": [1]}, None, 422, "job"),
        ("post", "/jobs", {"job": {**other, "work_batches": -5}}, None, 422, "job.work_batches"),
        ("post", "/jobs", {"job": {**other, "colour": 1}}, None, 422, "job.colour"),
        ("post", "/jobs", {"job": {**other, "worker": {"gpu": 100}}}, None, 422, "job"),
        ("post", "/jobs", {"job": other, "estimate": -1}, None, 422, "estimate"),
        ("post", "/jobs", {"job": other, "label": "a\nb"}, None, 422, "label"),
        ("post", "/jobs", {"job": job}, None, 409, "job.id"),
        ("post", "/jobs", {"job": {**other, "arrival": 0}}, None, 409, "job.arrival"),
        ("put", f"/jobs/{j}", {"job": {**job, "id": "other"}}, None, 422, "job.id"),
        ("put", f"/jobs/{j}", {"job": {**job, "arrival": 7}}, None, 409, "job.arrival"),
        ("post", "/jobs/nobody/progress", {"done": 1}, None, 404, "job"),
        ("delete", "/jobs/nobody", None, None, 404, "job"),
        ("get", "/jobs/nobody", None, None, 404, "job"),
        ("post", "/jobs", {"job": {**other, "id": "x" * 254}}, None, 422, "job.id"),   # was: taken, never reachable
        ("post", "/jobs", {"job": other, "estimate": 1e300}, None, 422, "estimate"),   # was: job.work_batches
        ("post", f"/jobs/{j}/progress", {"done": 1e300}, None, 422, "done"),
        ("post", "/step", b"", "text/plain", 415, None),   # was: 200, the slot advanced from any web page
        ("post", "/step", {"t": 0}, None, 409, "t"),
        ("post", "/step", {"t": 9}, None, 409, "t"),
        ("post", "/step", {"t": -1}, None, 422, "t"),
        ("post", "/step", {"t": 2.0}, None, 422, "t"),
        ("delete", "/machines/r9m9", None, None, 404, "machine"),
        ("post", "/machines", {"machine": {"id": "r0m0", "capacity": {"gpu": 8}, "local_gbps": 400},
                               "parent_switch": "tor0", "gbps": 25}, None, 409, "machine.id"),
        ("post", "/machines", {"machine": {"id": "n", "capacity": {"gpu": 8}, "local_gbps": 400},
                               "parent_switch": "nowhere", "gbps": 25}, None, 422, "parent_switch"),
        ("post", "/machines", {"machine": {"id": "n", "capacity": {"gpu": -8}, "local_gbps": 400},
                               "parent_switch": "tor0", "gbps": 25}, None, 422, "machine.capacity.gpu"),
        ("post", "/machines", {"machine": {"id": "n", "capacity": {"gpu": 8}, "local_gbps": 400},
                               "parent_switch": "tor0", "gbps": 0}, None, 422, "gbps"),
        ("post", "/machines", {"machine": {"id": "n", "capacity": {"gpu": 8}, "local_gbps": 400},
                               "parent_switch": "tor0", "gbps": 1e9}, None, 422, "gbps"),
        ("get", "/nowhere", None, None, 404, None),
        ("put", "/healthz", None, None, 405, None),
    ]


def test_bad_requests_are_4xx_naming_the_field_and_change_nothing(open_service, client_of, jobs):
    service = open_service()
    client = client_of(service)
    batch = jobs(4, arrival=0)
    for job in batch[:3]:
        submit(client, job)
    client.post("/step", json={})
    client.post("/step", json={})
    client.post(f"/jobs/{batch[2].id}/progress", json={"finished": True})
    file_before, state_before = service.state_path.read_bytes(), client.get("/state").json()
    other = {**batch[3].to_dict(), "arrival": 2}
    for method, path, body, kind, status, field in _bad_cases(batch[0].to_dict(), other):
        kwargs = {"json": body} if isinstance(body, (dict, list)) else {"content": body} if body is not None else {}
        if body is not None and not isinstance(body, (dict, list)):
            kwargs["headers"] = {"content-type": kind or "application/json"}
        elif kind:
            kwargs["headers"] = {"content-type": kind}
        r = client.request(method.upper(), path, **kwargs)
        assert (r.status_code, r.json().get("field")) == (status, field), (method, path, r.json())
        assert set(r.json()) == {"error", "field"} and r.json()["error"]
        assert "\n" not in r.json()["error"]
    assert service.state_path.read_bytes() == file_before
    assert client.get("/state").json() == state_before
    assert submit(client, batch[3], label="ok").status_code == 409      # arrival 0 is past, still
    assert client.post("/jobs", json={"job": other}).status_code == 201   # the state still takes changes


def test_an_ended_job_is_a_conflict(open_service, client_of, jobs):
    client = client_of(open_service())
    job = jobs(1, arrival=0)[0]
    submit(client, job)
    client.delete(f"/jobs/{job.id}")
    for method, path, body in (("POST", f"/jobs/{job.id}/progress", {"done": 1}), ("DELETE", f"/jobs/{job.id}", None),
                               ("PUT", f"/jobs/{job.id}", {"job": job.to_dict()})):
        r = client.request(method, path, **({"json": body} if body else {}))
        assert r.status_code == 409 and "cancelled" in r.json()["error"]


def test_a_server_fault_is_a_json_500_and_changes_nothing(open_service, client_of, jobs, reference, wire,
                                                          monkeypatch):
    service = open_service()
    client = client_of(service, raise_server_exceptions=False)
    ref = reference()
    for job in jobs(5, arrival=0):
        submit(client, job)
        ref.submit(job)
    file_before, state_before = service.state_path.read_bytes(), client.get("/state").json()

    def broken(view):
        raise RuntimeError("policy bug")
    monkeypatch.setattr(service._scheduler.policy, "decide", broken)
    r = client.post("/step", json={})
    assert r.status_code == 500 and r.json() == {"error": "internal error, nothing changed: RuntimeError: policy bug",
                                                 "field": None}
    assert service.state_path.read_bytes() == file_before and client.get("/state").json() == state_before
    assert client.post("/step", json={}).json()["allocations"] == wire(ref.step(0))   # rebuilt from the checkpoint

    def full(document):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(service._store, "write", full)
    extra = jobs(1, seed=5, arrival=1)[0]
    r = client.post("/jobs", json={"job": {**extra.to_dict(), "id": "late"}})
    assert r.status_code == 500 and "No space left on device" in r.json()["error"]
    assert client.get("/jobs/late").status_code == 404
    monkeypatch.undo()
    assert client.post("/jobs", json={"job": {**extra.to_dict(), "id": "late"}}).status_code == 201


def test_openapi_lists_every_endpoint_and_body(open_service, client_of):
    spec = client_of(open_service()).get("/openapi.json").json()
    routes = {(m.upper(), p) for p, ops in spec["paths"].items() for m in ops}
    assert routes == {("GET", "/healthz"), ("GET", "/state"), ("GET", "/cluster"), ("GET", "/jobs/{job_id}"),
                      ("POST", "/jobs"), ("PUT", "/jobs/{job_id}"), ("POST", "/jobs/{job_id}/progress"),
                      ("DELETE", "/jobs/{job_id}"), ("POST", "/machines"), ("DELETE", "/machines/{machine_id}"),
                      ("POST", "/step"), ("POST", "/extender/filter"), ("POST", "/extender/prioritize")}
    schema = spec["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["properties"]) == {"job", "estimate", "label"} and schema["additionalProperties"] is False


def test_ids_with_a_slash_are_addressable(open_service, client_of, jobs):
    client = client_of(open_service())
    job = jobs(1, arrival=0)[0]
    assert client.post("/jobs", json={"job": {**job.to_dict(), "id": "team-a/train 1"}}).status_code == 201
    for path in ("/jobs/team-a/train%201", "/jobs/team-a%2Ftrain%201"):
        assert client.get(path).json()["id"] == "team-a/train 1"
    assert client.post("/jobs/team-a/train%201/progress", json={"done": 3}).json()["done"] == 3
    assert client.get("/jobs/team-a/train%201/progress").status_code == 404     # no such job
    assert client.delete("/jobs/team-a/train%201").json()["status"] == "cancelled"
    r = client.post("/jobs", json={"job": {**job.to_dict(), "id": "作业 7"}})
    assert r.status_code == 201 and client.get(r.headers["location"]).json()["id"] == "作业 7"
