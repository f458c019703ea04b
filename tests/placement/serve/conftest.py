"""Fixtures of the serve tests: services on a temporary state file, jobs to submit, and
the uninterrupted in-process scheduler their answers are compared with."""
from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from placement.model.cluster_spec import parse_cluster
from placement.model.instance import Job
from placement.online.registry import make_policy
from placement.online.scheduler import OnlineScheduler
from placement.traces.generate import generate


@pytest.fixture
def open_service(tmp_path: Path) -> Iterator[Callable]:
    """``open_service(state="state.json", **flags)``: a Service on ``tmp_path / state``
    (default cluster racks:2x4, policy greedy), closed at the end of the test."""
    from placement.serve.service import Service

    made = []

    def make(state: str = "state.json", **flags):
        flags.setdefault("cluster", "racks:2x4")
        flags.setdefault("policy", "greedy")
        service = Service.open(state=tmp_path / state, **flags)
        made.append(service)
        return service
    yield make
    for service in made:
        service.close()


@pytest.fixture
def client_of() -> Callable:
    """``client_of(service, raise_server_exceptions=True)``: a TestClient of its app."""
    pytest.importorskip("fastapi")
    with warnings.catch_warnings():   # starlette's TestClient would rather have httpx2 than httpx
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    from placement.serve.app import create_app

    def make(service, raise_server_exceptions: bool = True):
        return TestClient(create_app(service), raise_server_exceptions=raise_server_exceptions)
    return make


@pytest.fixture
def jobs() -> Callable[..., list[Job]]:
    """``jobs(n, seed=0, arrival=None)``: generated jobs that fit racks:2x4 (all arriving in
    slot ``arrival`` when given)."""
    def make(n: int, seed: int = 0, arrival: int | None = None) -> list[Job]:
        out = list(generate(jobs=n, cluster="racks:2x4", seed=seed).jobs)
        return out if arrival is None else [dataclasses.replace(j, arrival=arrival) for j in out]
    return make


@pytest.fixture
def reference() -> Callable[..., OnlineScheduler]:
    """``reference(policy="greedy")``: the uninterrupted library scheduler on racks:2x4."""
    def make(policy: str = "greedy", **kw) -> OnlineScheduler:
        return OnlineScheduler(parse_cluster("racks:2x4"), policy=make_policy(policy), slot_seconds=300, **kw)
    return make


def as_json(allocations: dict) -> dict:
    """A library step's answer as the service sends it (tuples are JSON arrays)."""
    return json.loads(json.dumps(allocations))


@pytest.fixture
def wire() -> Callable[[dict], dict]:
    return as_json
