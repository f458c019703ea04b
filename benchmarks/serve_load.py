"""Load, latency, crash and hostile-input figures of ``placement serve``; writes benchmarks/SERVE.md.

Usage: python benchmarks/serve_load.py [--clients 50] [--requests 2000] [--jobs 160] [--steps 20]
       [--hostile 500] [--load-policy lp-rounding] [--out benchmarks/SERVE.md]

Every part talks over 127.0.0.1 to a real server, ``python -m placement serve --cluster
racks:2x4 --port P --state S`` (racks:2x4: 8 machines of 8 GPUs, 64 GPUs), started by this
script with a fresh state file in a temporary folder:

1. **Load.** ``--clients`` concurrent clients (asyncio, one connection each) send
   ``--requests`` mixed requests drawn from a seeded generator: submits (jobs arrive in the
   next slot), progress reports, finishes, reads (/state, /jobs/{id}, /healthz) and steps.
   Status codes are counted per kind; the target is no 5xx and no failed connection.
2. **Step latency.** ``--jobs`` jobs (generated for racks:2x4, all arriving in slot 0, none
   finishing) are submitted, then ``--steps`` slots are stepped over HTTP, each followed by a
   progress report of every job that ran; the same sequence drives an in-process
   ``OnlineScheduler`` with the same policy, each library ``step`` timed right after the HTTP
   one, or right before it on odd slots (so both see the same machine load and neither is
   always the second run of a decision). Reported: median and p95 of the client's wall
   time of ``POST /step``, of the library call, and of their difference per slot (target:
   within 20 ms), with the server's own split (its time in ``OnlineScheduler.step`` and in
   the checkpoint write, from the ``Server-Timing`` header); the decisions must be identical.
3. **kill -9.** With the part-2 server at ``--jobs`` open jobs, a step is sent and the
   process killed 20 ms later (the step in flight); the same command is started again. No
   job may be lost (the open jobs listed equal the library's), and the retried step and the
   one after must be the library's decisions.
4. **Hostile input.** ``--hostile`` bad requests of the kinds in the table (malformed JSON,
   bodies over the 1 MiB limit declared or chunked, unknown ids, negative/NaN progress,
   duplicate submissions, wrong types, unknown fields, non-JSON content, a step back in
   time), 10 at a time: every answer must be a 4xx, and the state file byte-identical before
   and after (same SHA-256), as GET /state.
"""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import json
import os
import platform
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from importlib import metadata
from pathlib import Path

import httpx

from machine import cpu_model  # benchmarks/machine.py (scripts run from this folder)
from placement.model.cluster_spec import parse_cluster
from placement.online.registry import make_policy
from placement.online.scheduler import OnlineScheduler
from placement.traces.generate import generate

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = "racks:2x4"


class Server:
    """``python -m placement serve`` on a free port of 127.0.0.1, ready when constructed."""

    def __init__(self, state: Path, policy: str, port: int | None = None):
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "placement", "serve", "--cluster", CLUSTER, "--port", str(self.port),
                        "--state", str(state), "--policy", policy]
        start = time.perf_counter()
        self.process = subprocess.Popen(self.command, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server ended: {self.process.stderr.read()}")
            try:
                if httpx.get(self.url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.02)
        self.ready_seconds = time.perf_counter() - start

    def stop(self) -> int:
        self.process.terminate()
        self.process.communicate(timeout=60)
        return self.process.returncode


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# ----- 1. load ------------------------------------------------------------------------------
def load(url: str, clients: int, requests: int, seed: int) -> dict:
    rng = random.Random(seed)
    pool = [j.to_dict() for j in generate(jobs=requests, cluster=CLUSTER, seed=seed).jobs]
    for job in pool:
        del job["arrival"]                # the next slot, whatever it is when the submit lands
    submitted: list[str] = []
    done: dict[str, float] = defaultdict(float)
    codes: dict[str, Counter] = defaultdict(Counter)
    seconds: dict[str, list[float]] = defaultdict(list)

    def pick() -> tuple[str, str, str, dict | None]:
        roll = rng.random()
        if roll < 0.25 or not submitted:
            job = pool.pop()
            submitted.append(job["id"])
            return "submit", "POST", "/jobs", {"job": job}
        job_id = rng.choice(submitted)
        if roll < 0.60:
            done[job_id] += rng.uniform(10, 500)
            return "progress", "POST", f"/jobs/{job_id}/progress", {"done": round(done[job_id], 3)}
        if roll < 0.65:
            return "finish", "POST", f"/jobs/{job_id}/progress", {"finished": True}
        if roll < 0.95:
            path = rng.choice(["/state", f"/jobs/{job_id}", "/healthz"])
            return "read", "GET", path, None
        return "step", "POST", "/step", {}
    plan = [pick() for _ in range(requests)]

    async def run() -> float:
        queue: asyncio.Queue = asyncio.Queue()
        for item in plan:
            queue.put_nowait(item)

        async def client() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                while not queue.empty():
                    kind, method, path, body = queue.get_nowait()
                    start = time.perf_counter()
                    try:
                        r = await http.request(method, path, json=body)
                        codes[kind][str(r.status_code)] += 1
                    except httpx.TransportError as exc:
                        codes[kind][type(exc).__name__] += 1
                    seconds[kind].append(time.perf_counter() - start)
        start = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return time.perf_counter() - start
    wall = asyncio.run(run())
    return {"codes": codes, "seconds": seconds, "wall": wall}


# ----- 2 and 3. step latency, kill -9 -------------------------------------------------------
def latency(server: Server, policy: str, jobs: int, steps: int, seed: int,
            progress: dict[str, float]) -> tuple[dict, OnlineScheduler, list]:
    batch = [dataclasses.replace(j, arrival=0) for j in generate(jobs=jobs, cluster=CLUSTER, seed=seed).jobs]
    ref = OnlineScheduler(parse_cluster(CLUSTER), policy=make_policy(policy), slot_seconds=300)
    rows = []
    with httpx.Client(base_url=server.url, timeout=120) as http:
        for job in batch:
            assert http.post("/jobs", json={"job": job.to_dict()}).status_code == 201
            ref.submit(job)
        for t in range(steps):
            timed = {}
            for side in (("http", "library") if t % 2 == 0 else ("library", "http")):   # neither always second
                start = time.perf_counter()
                if side == "http":
                    r = http.post("/step", json={"t": t})
                else:
                    theirs = ref.step(t)
                timed[side] = time.perf_counter() - start
            wire, library = timed["http"], timed["library"]
            split = dict(re.findall(r"(\w+);dur=([\d.]+)", r.headers["server-timing"]))
            same = r.json()["allocations"] == json.loads(json.dumps(theirs))
            rows.append({"http": wire, "library": library, "server_step": float(split["step"]) / 1e3,
                         "checkpoint": float(split["checkpoint"]) / 1e3, "same": same})
            report(http, ref, theirs, progress)
    return {"rows": rows}, ref, batch


def report(http: httpx.Client, ref: OnlineScheduler, placed: dict, progress: dict[str, float]) -> None:
    """Progress of every job that ran, to both: 0.1% of its work per worker-slot (so none finishes)."""
    for job_id, tasks in placed.items():
        progress[job_id] = progress.get(job_id, 0.0) + 0.001 * ref.open_jobs[job_id].work_batches * sum(
            w for w, _ in tasks.values())
        assert http.post(f"/jobs/{job_id}/progress", json={"done": progress[job_id]}).status_code == 200
        ref.report(job_id, progress[job_id])


def kill_and_resume(server: Server, state: Path, policy: str, ref: OnlineScheduler, t: int,
                    progress: dict[str, float]) -> tuple[dict, Server]:
    outcome: list = []

    def step() -> None:
        try:
            outcome.append(httpx.post(server.url + "/step", json={"t": t}, timeout=120).status_code)
        except httpx.TransportError as exc:
            outcome.append(type(exc).__name__)
    in_flight = threading.Thread(target=step)
    in_flight.start()
    time.sleep(0.02)
    server.process.kill()
    server.process.wait()
    in_flight.join()
    checkpointed = json.loads(state.read_text())["scheduler"]["last_slot"]
    again = Server(state, policy, port=server.port)
    with httpx.Client(base_url=again.url, timeout=120) as http:
        listed = [j["id"] for j in http.get("/state").json()["jobs"]]
        same = []
        for slot in (t, t + 1):
            r = http.post("/step", json={"t": slot}).json()
            theirs = ref.step(slot)
            same.append(r["allocations"] == json.loads(json.dumps(theirs)))
            report(http, ref, theirs, progress)
    return {"in_flight": outcome[0], "checkpointed_slot": checkpointed, "restart_seconds": again.ready_seconds,
            "jobs_listed": len(listed), "jobs_lost": len(set(ref.open_jobs) - set(listed)),
            "same_order": listed == list(ref.open_jobs), "next_same": same}, again


# ----- 4. hostile input ---------------------------------------------------------------------
def hostile(server: Server, state: Path, count: int, seed: int, job: dict) -> dict:
    rng = random.Random(seed)
    big = b'{"job": "' + b"x" * (2 << 20) + b'"}'

    def chunked():
        for _ in range(32):
            yield b" " * 65536
    j = job["id"]
    kinds = {
        "malformed JSON": lambda: ("POST", "/jobs", b'{"job": {"id": ', "application/json"),
        "body over 1 MiB (declared)": lambda: ("POST", "/jobs", big, "application/json"),
        "body over 1 MiB (chunked)": lambda: ("POST", "/jobs", chunked(), "application/json"),
        "unknown job id": lambda: rng.choice([("POST", f"/jobs/nobody-{rng.randrange(10**6)}/progress"),
                                              ("DELETE", f"/jobs/nobody-{rng.randrange(10**6)}"),
                                              ("GET", f"/jobs/nobody-{rng.randrange(10**6)}")])
        + (b'{"done": 1}', "application/json"),
        "negative progress": lambda: ("POST", f"/jobs/{j}/progress", b'{"done": -3.5}', "application/json"),
        "NaN / Infinity progress": lambda: ("POST", f"/jobs/{j}/progress",
                                            rng.choice([b'{"done": NaN}', b'{"done": Infinity}']), "application/json"),
        "duplicate submission": lambda: ("POST", "/jobs", json.dumps({"job": job}).encode(), "application/json"),
        "wrong types": lambda: rng.choice([("POST", f"/jobs/{j}/progress", b'{"done": "12"}', "application/json"),
                                           ("POST", "/step", b'{"t": 1.5}', "application/json"),
                                           ("POST", "/jobs", b'{"job": [1, 2]}', "application/json")]),
        "unknown fields": lambda: ("POST", f"/jobs/{j}/progress", b'{"done": 1, "speed": 2}', "application/json"),
        "not JSON content": lambda: ("POST", f"/jobs/{j}/progress", b"done=1", "application/x-www-form-urlencoded"),
        "step back in time": lambda: ("POST", "/step", b'{"t": 0}', "application/json"),
    }
    names = list(kinds)
    plan = [names[i % len(names)] for i in range(count)]
    before_file = hashlib.sha256(state.read_bytes()).hexdigest()
    before_state = httpx.get(server.url + "/state").json()
    codes: dict[str, Counter] = defaultdict(Counter)
    lock = threading.Lock()

    def send(kind: str) -> None:
        method, path, body, content_type = kinds[kind]()
        try:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                r = http.request(method, path, content=body if method != "GET" else None,
                                 headers={"content-type": content_type})
                ok = r.status_code // 100 == 4 and set(r.json()) == {"error", "field"}
                code = str(r.status_code) if ok else f"{r.status_code}!"
        except httpx.TransportError as exc:
            code = type(exc).__name__
        with lock:
            codes[kind][code] += 1
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(send, plan))
    after_file = hashlib.sha256(state.read_bytes()).hexdigest()
    return {"codes": codes, "file_same": before_file == after_file, "file_sha256": after_file[:16],
            "state_same": httpx.get(server.url + "/state").json() == before_state}


# ----- the report ---------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=160)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--hostile", type=int, default=500)
    parser.add_argument("--policy", default="lp-rounding", help="the policy of parts 2 and 3")
    parser.add_argument("--load-policy", default="lp-rounding", help="the policy of part 1")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the report to this Markdown file")
    args = parser.parse_args()
    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    load_before = os.getloadavg()[0]    # other work on the machine slows the policy, not the service
    with tempfile.TemporaryDirectory() as tmp:
        say("# `placement serve` under load\n")
        say(f"Command: `python benchmarks/serve_load.py {' '.join(sys.argv[1:])}` on {datetime.now():%Y-%m-%d}, "
            f"commit {_git('rev-parse', '--short', 'HEAD')}"
            + (" plus uncommitted changes under placement/" if _git("status", "--porcelain", "--", "placement") else ""))
        say(f"\n{cpu_model()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, FastAPI "
            f"{metadata.version('fastapi')}, uvicorn {metadata.version('uvicorn')}, httpx {metadata.version('httpx')}; "
            f"server and clients on the same machine (127.0.0.1), cluster {CLUSTER} (64 GPUs)\n")

        server = Server(Path(tmp) / "load.json", args.load_policy)
        result = load(server.url, args.clients, args.requests, args.seed)
        server.stop()
        all_codes = sum(result["codes"].values(), Counter())
        fives = sum(v for k, v in all_codes.items() if not k.isdigit() or k.startswith("5"))
        say(f"## 1. Load: {args.clients} concurrent clients, {args.requests} mixed requests (policy "
            f"{args.load_policy})\n")
        say("| kind | requests | status codes | median (ms) | p95 (ms) |")
        say("|---|---:|---|---:|---:|")
        for kind in ("submit", "progress", "finish", "read", "step"):
            times = result["seconds"][kind]
            if times:
                codes = ", ".join(f"{c}: {n}" for c, n in sorted(result["codes"][kind].items()))
                say(f"| {kind} | {len(times)} | {codes} | {statistics.median(times) * 1e3:.1f} | "
                    f"{pct(times, 0.95) * 1e3:.1f} |")
        say(f"\n{sum(all_codes.values())} answers in {result['wall']:.1f} s "
            f"({sum(all_codes.values()) / result['wall']:.0f} requests/s); **5xx or failed connections: {fives}** "
            "(target 0). The load draws its reports at random among the jobs it has sent: the 404s are reports "
            "that overtook their job's submit (sent by another client), the 409s reports of jobs already "
            "finished and finishes sent twice. Changes wait for one another (one at a time, docs/serve.md): a "
            "submit or report queued behind steps, each a policy decision over the hundreds of jobs the load "
            "accumulates, waits for them; reads never wait.\n")

        state = Path(tmp) / "latency.json"
        server = Server(state, args.policy)
        progress: dict[str, float] = {}
        measured, ref, batch = latency(server, args.policy, args.jobs, args.steps, args.seed, progress)
        rows = measured["rows"]
        say(f"## 2. Step latency at {args.jobs} open jobs on {CLUSTER}, policy {args.policy}, {args.steps} slots\n")
        say("| seconds per step (ms) | median | p95 |")
        say("|---|---:|---:|")
        series = {"HTTP `POST /step` (client wall time)": [r["http"] for r in rows],
                  "library `OnlineScheduler.step`": [r["library"] for r in rows],
                  "**difference HTTP − library, per slot**": [r["http"] - r["library"] for r in rows],
                  "server: its `OnlineScheduler.step`": [r["server_step"] for r in rows],
                  "server: checkpoint write (fsync + rename)": [r["checkpoint"] for r in rows],
                  "overhead: HTTP − the server's step": [r["http"] - r["server_step"] for r in rows]}
        for name, values in series.items():
            say(f"| {name} | {statistics.median(values) * 1e3:.1f} | {pct(values, 0.95) * 1e3:.1f} |")
        state_kb = state.stat().st_size / 1024
        medians = statistics.median(series["HTTP `POST /step` (client wall time)"]) - statistics.median(
            series["library `OnlineScheduler.step`"])
        say(f"\nMedian of HTTP − median of the library: {medians * 1e3:.1f} ms. "
            f"Decisions identical to the library's: {sum(r['same'] for r in rows)}/{len(rows)} slots. "
            f"State file: {state_kb:.0f} KiB. The difference of two separately timed runs of the policy carries "
            "the policy's own run-to-run noise; the overhead row (client wall time minus the time the server "
            "spent in the same library call) is the HTTP and checkpoint cost alone. Target: within 20 ms.\n")

        crash, server = kill_and_resume(server, state, args.policy, ref, args.steps, progress)
        say(f"## 3. kill -9 in the middle of a step, then the same command again ({args.jobs} open jobs)\n")
        fate = ("checkpointed: the retry is answered as before" if crash["checkpointed_slot"] == args.steps
                else "not checkpointed: the retry decides it")
        say(f"- the step in flight got: {crash['in_flight']}; the state file's last slot: "
            f"{crash['checkpointed_slot']} (the step was {fate})")
        say(f"- restart to the first answer of /healthz: {crash['restart_seconds']:.2f} s")
        say(f"- open jobs listed after the restart: {crash['jobs_listed']}, lost: **{crash['jobs_lost']}**, "
            f"in submission order: {crash['same_order']}")
        say(f"- the retried step and the next one identical to the uninterrupted library scheduler: "
            f"**{crash['next_same']}**\n")

        out = hostile(server, state, args.hostile, args.seed, batch[0].to_dict())
        server.stop()
        total = sum(sum(c.values()) for c in out["codes"].values())
        bad = sum(n for c in out["codes"].values() for k, n in c.items() if not (k.isdigit() and k.startswith("4")))
        say(f"## 4. {total} hostile requests, 10 at a time\n")
        say("| kind | requests | status codes |")
        say("|---|---:|---|")
        for kind, codes in out["codes"].items():
            say(f"| {kind} | {sum(codes.values())} | {', '.join(f'{c}: {n}' for c, n in sorted(codes.items()))} |")
        say(f"\nNot a 4xx with a JSON `{{error, field}}` body: **{bad}**. State file byte-identical before and "
            f"after (SHA-256 {out['file_sha256']}...): **{out['file_same']}**; GET /state identical: "
            f"**{out['state_same']}**.")
        say(f"\nLoad average (1 min) before {load_before:.1f}, after {os.getloadavg()[0]:.1f}.")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    main()
