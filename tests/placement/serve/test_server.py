"""``python -m placement serve`` as a real process on 127.0.0.1: ``kill -9`` in the middle
of a step loses nothing and the same command again decides as an uninterrupted scheduler;
Ctrl-C and SIGTERM let the request in flight finish and end with one line; concurrent
requests are taken one at a time and reads stay consistent."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ..conftest import default_sigint

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One ``placement serve`` process; ``client`` talks to it."""

    def __init__(self, port: int, state: Path, *flags: str):
        self.command = [sys.executable, "-m", "placement", "serve", "--cluster", "racks:2x4", "--port", str(port),
                        "--state", str(state), *flags]
        self.process = subprocess.Popen(self.command, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=default_sigint)   # Ctrl-C reaches it
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)
        end = time.monotonic() + 30
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"the server ended: {self.process.stderr.read()}")
            try:
                if self.client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.05)

    def stop(self, signum: int) -> tuple[int, str]:
        self.process.send_signal(signum)
        _, err = self.process.communicate(timeout=30)
        self.client.close()
        return self.process.returncode, err


def drive(client, ref, batch, t, wire, answers):
    """Slot ``t`` for both: its arrivals submitted, the step, progress of five jobs."""
    for job in batch:
        if job.arrival == t:
            assert client.post("/jobs", json={"job": job.to_dict()}).status_code == 201
            ref.submit(job)
    answers.append((client.post("/step", json={"t": t}).json()["allocations"], wire(ref.step(t))))
    for job_id in sorted(ref.open_jobs)[:5]:
        assert client.post(f"/jobs/{job_id}/progress", json={"done": 40.0 * (t + 1)}).status_code == 200
        ref.report(job_id, 40.0 * (t + 1))


def test_kill_9_in_the_middle_of_a_step_loses_nothing(tmp_path, jobs, reference, wire):
    port, state = free_port(), tmp_path / "state.json"
    ref = reference("lp-rounding")
    batch = jobs(60, seed=1)
    answers: list = []
    server = Server(port, state)
    for t in range(3):
        drive(server.client, ref, batch, t, wire, answers)
    for job in batch:
        if job.arrival == 3:
            server.client.post("/jobs", json={"job": job.to_dict()})
            ref.submit(job)
    outcome: list = []
    in_flight = threading.Thread(target=lambda: outcome.append(_try(server.client.post, "/step", json={"t": 3})))
    in_flight.start()
    time.sleep(0.02)
    server.process.kill()                      # kill -9, the step in flight
    server.process.wait()
    in_flight.join()
    server.client.close()

    server = Server(port, state)               # the same command again
    document = json.loads(state.read_text())
    assert document["scheduler"]["last_slot"] in (2, 3)     # the step was checkpointed, or not at all
    listed = server.client.get("/state").json()
    assert [j["id"] for j in listed["jobs"]] == list(ref.open_jobs)       # no job lost
    retried = server.client.post("/step", json={"t": 3}).json()           # the client retries
    assert retried["replayed"] is (document["scheduler"]["last_slot"] == 3)
    answers.append((retried["allocations"], wire(ref.step(3))))
    for job_id in sorted(ref.open_jobs)[:5]:
        server.client.post(f"/jobs/{job_id}/progress", json={"done": 160.0})
        ref.report(job_id, 160.0)
    for t in (4, 5):
        drive(server.client, ref, batch, t, wire, answers)
    assert server.stop(signal.SIGTERM)[0] == 143
    assert [ours for ours, _ in answers] == [theirs for _, theirs in answers]


def _try(call, *args, **kwargs):
    try:
        return call(*args, **kwargs).status_code
    except httpx.TransportError as exc:
        return type(exc).__name__


@pytest.mark.parametrize("signum, code, line", [(signal.SIGINT, 130, "placement: interrupted"),
                                                (signal.SIGTERM, 143, "placement: terminated")])
def test_ctrl_c_and_sigterm_finish_the_request_in_flight_then_end(tmp_path, jobs, signum, code, line):
    state = tmp_path / "state.json"
    server = Server(free_port(), state, "--policy", "lp-rounding")
    for job in jobs(100, arrival=0):
        server.client.post("/jobs", json={"job": job.to_dict()})
    answer: list = []
    in_flight = threading.Thread(target=lambda: answer.append(server.client.post("/step", json={})))
    in_flight.start()
    time.sleep(0.03)
    returncode, err = server.stop(signum)
    in_flight.join()
    assert (returncode, err.strip().splitlines()[-1]) == (code, line)
    assert err.count("\n") == 2                # the start line, then that one line
    document = json.loads(state.read_text())   # complete, and holding the step that was answered
    assert answer[0].status_code == 200
    assert document["last_step"]["allocations"] == answer[0].json()["allocations"]
    assert len(document["scheduler"]["jobs"]) == 100


def test_concurrent_requests_are_taken_one_at_a_time(tmp_path, jobs):
    server = Server(free_port(), tmp_path / "state.json", "--policy", "greedy")
    batch = jobs(24, arrival=0)
    seen: list = []

    def work(job):
        status = server.client.post("/jobs", json={"job": job.to_dict()}).status_code
        state = server.client.get("/state").json()
        seen.append(state["counts"]["open"] == len(state["jobs"]))
        return status, server.client.post("/jobs", json={"job": job.to_dict()}).status_code
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(work, batch))
    assert results == [(201, 409)] * len(batch) and all(seen)
    assert len(server.client.get("/state").json()["jobs"]) == len(batch)
    big = server.client.post("/jobs", content=b" " * (2 << 20), headers={"content-type": "application/json"})
    assert big.status_code == 413 and big.json()["field"] is None          # refused unread, answered
    assert server.stop(signal.SIGTERM)[0] == 143
