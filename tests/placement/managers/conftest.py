import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = Path(__file__).resolve().parent / "docs"
SHIPPED = ROOT / "instances" / "managers"


def node(name: str, labels: dict | None = None, gpu: str | None = "8", cpu: str = "64",
         memory: str = "512Gi") -> dict:
    """One item of ``kubectl get nodes -o json`` (``gpu`` None: no nvidia.com/gpu)."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu is not None:
        allocatable["nvidia.com/gpu"] = gpu
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": allocatable}}


@pytest.fixture
def write(tmp_path):
    """write(name, text or JSON-able) -> the path of a new file in tmp_path (name may hold folders)."""
    def write(name: str, content) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content, indent=1))
        return str(path)
    return write


@pytest.fixture
def node_list(write):
    """node_list(items, name="nodes.json") -> the path of a NodeList file."""
    def node_list(items: list[dict], name: str = "nodes.json") -> str:
        return write(name, {"apiVersion": "v1", "kind": "NodeList", "items": items})
    return node_list
