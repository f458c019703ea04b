"""The --state file: every accepted change in it before the answer, a restart from it making
the decisions an uninterrupted scheduler makes, and every start that cannot resume refused
in one line naming the flag or file."""
from __future__ import annotations

import json
import socket
import sys

import pytest

from placement.serve.state_file import SERVE_FORMAT


def test_every_accepted_change_is_in_the_file_before_the_answer(open_service, jobs):
    service = open_service()
    assert json.loads(service.state_path.read_text()) == service.document   # a new state is written at once
    on_disk = []
    for job in jobs(3, arrival=0):
        service.submit(job)
        on_disk.append(json.loads(service.state_path.read_text()))
        assert on_disk[-1] == service.document
    service.step()
    document = json.loads(service.state_path.read_text())
    assert document["format"] == SERVE_FORMAT and document["scheduler"]["last_slot"] == 0
    assert document["last_step"]["t"] == 0 and document["cluster"]["spec"] == "racks:2x4"
    assert service.state_path.read_text().count("\n") == 1        # one line of compact JSON
    assert not list(service.state_path.parent.glob(".*.tmp"))    # the temporary file was renamed


@pytest.mark.parametrize("policy", ["greedy", "tiresias", "lp-rounding"])
def test_a_restart_from_the_file_decides_as_an_uninterrupted_run(open_service, jobs, reference, wire, policy):
    ref = reference(policy)
    service = open_service(policy=policy)
    batch = jobs(14, seed=3)
    answers = []

    def slot(svc, t):
        for job in batch:
            if job.arrival == t:
                svc.submit(job)
                ref.submit(job)
        answers.append((svc.step(t).body["allocations"], wire(ref.step(t))))
        for job_id in sorted(ref.open_jobs)[:5]:
            done = 50.0 * (t + 1)
            svc.report(job_id, done=done)
            ref.report(job_id, done)
    for t in range(3):
        slot(service, t)
    service.close()
    resumed = open_service(policy=policy)     # the same command again
    assert resumed.document["scheduler"]["last_slot"] == 2
    for t in range(3, 7):
        slot(resumed, t)
    assert [ours for ours, _ in answers] == [theirs for _, theirs in answers]
    assert any(ours for ours, _ in answers[3:])


def _one_line_error(make, match: str):
    with pytest.raises(ValueError, match=match) as caught:
        make()
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_starts_that_cannot_work_are_one_line_errors(open_service, tmp_path, jobs):
    _one_line_error(lambda: open_service(cluster="racks:0x4"), "racks:0x4")
    _one_line_error(lambda: open_service(policy="nope"), "^--policy: unknown policy 'nope'")
    _one_line_error(lambda: open_service(lookahead=0), "^--lookahead")
    _one_line_error(lambda: open_service(slot_seconds=-5.0), "^--slot-seconds")
    _one_line_error(lambda: open_service(information="psychic"), "^--information")
    (tmp_path / "folder.json").mkdir()
    _one_line_error(lambda: open_service("folder.json"), "--state .*folder.json: is a directory")
    for name, text, match in (("bad.json", '{"format": ', "not valid JSON"),
                              ("nan.json", '{"format": NaN}', "format: NaN or Infinity"),
                              ("other.json", '{"format": "something else"}', "not a placement serve state"),
                              ("empty.json", "", "not valid JSON")):
        (tmp_path / name).write_text(text)
        _one_line_error(lambda: open_service(name), f"^--state .*{name}: .*({match})")

    service = open_service("taken.json")
    service.submit(jobs(1, arrival=0)[0])
    _one_line_error(lambda: open_service("taken.json"), "in use by another placement serve")
    service.close()
    _one_line_error(lambda: open_service("taken.json", cluster="racks:4x4"), "written for another cluster")
    for flag, value, match in (("policy", "fifo", "--policy greedy"), ("information", "none", "--information oracle"),
                               ("lookahead", 3, "--lookahead 8"), ("slot_seconds", 60.0, "--slot-seconds 300")):
        _one_line_error(lambda: open_service("taken.json", **{flag: value}), f"written with {match}")
    document = json.loads((tmp_path / "taken.json").read_text())
    document["scheduler"]["jobs"][0]["job"]["work_batches"] = -1
    (tmp_path / "taken.json").write_text(json.dumps(document))
    _one_line_error(lambda: open_service("taken.json"), "malformed scheduler state: jobs\\[0\\].job.work_batches")
    document["scheduler"]["jobs"][0]["job"]["work_batches"] = 100.0
    record = document["scheduler"]["jobs"][0]
    for where, value, match in (("last_slot", "x", "last_slot: expected a slot"),   # was: started, then 500s
                                ("done", -5, r"jobs\[0\].done: expected a finite number >= 0"),
                                ("previous", [["nowhere", 1, 0]], r"jobs\[0\].previous: 'nowhere' is not a machine"),
                                ("jobs", [record, record], r"jobs\[1\]: job .* is listed twice")):   # was: one lost
        bad = json.loads(json.dumps(document))
        if where in ("last_slot", "jobs"):
            bad["scheduler"][where] = value
        else:
            bad["scheduler"]["jobs"][0][where] = value
        (tmp_path / "taken.json").write_text(json.dumps(bad))
        _one_line_error(lambda: open_service("taken.json"), f"malformed scheduler state: {match}")
    del document["scheduler"]["jobs"]
    (tmp_path / "taken.json").write_text(json.dumps(document))
    _one_line_error(lambda: open_service("taken.json"), "malformed")


def test_an_instance_file_gives_the_cluster_its_resources_and_slot(open_service):
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "instances" / "examples" / "racks.json"
    service = open_service(cluster=str(example))
    assert service.document["scheduler"]["slot_seconds"] == 60
    assert open_service("b.json", cluster=str(example), slot_seconds=30.0).document["scheduler"]["slot_seconds"] == 30


def test_serve_refuses_a_port_in_use_and_says_how_to_install_what_is_missing(tmp_path, monkeypatch):
    from placement.serve import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = _one_line_error(lambda: serve(cluster="racks:2x4", port=port, state=tmp_path / "s.json"),
                                  f"^--port {port}: cannot listen on 127.0.0.1:{port}")
    assert "in use" in message
    assert not (tmp_path / "s.json").exists()           # refused before the state file was made
    _one_line_error(lambda: serve(cluster="racks:2x4", host="no such host.invalid", port=0,
                                  state=tmp_path / "s.json"), "^--host")
    for port in (-1, 65536, 99999):
        _one_line_error(lambda: serve(cluster="racks:2x4", port=port, state=tmp_path / "s.json"),
                        f"^--port {port}: must be an integer in 0..65535")
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    _one_line_error(lambda: serve(cluster="racks:2x4", state=tmp_path / "s.json"),
                    r'uvicorn is not installed\): pip install "placement\[serve\]"')


def test_the_command_line_prints_one_line_and_exits_2(tmp_path, capsys):
    from placement.cli import main

    (tmp_path / "s.json").write_text('{"format": "x"}')
    assert main(["serve", "--cluster", "racks:2x4", "--port", "0", "--state", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("placement: error: --state ") and err.count("\n") == 1
