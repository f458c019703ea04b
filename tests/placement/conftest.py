import copy
import importlib.util
import json
import signal
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "instances" / "examples"


def default_sigint() -> None:
    """``preexec_fn`` of a child that must take Ctrl-C: in the child before exec, SIGINT as a
    terminal delivers it, even when the tests run under a runner that ignores SIGINT (a
    background job of a non-interactive shell does, and a child inherits an ignored signal,
    so Python would never raise KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def bruteforce() -> ModuleType:
    """``bruteforce.py`` beside this file, loaded once by path (tests run with --import-mode=importlib)."""
    name = "placement_test_bruteforce"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("bruteforce.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def tiny_doc() -> dict:
    """The instance document of MODEL.md section 1 (a fresh copy per test)."""
    return copy.deepcopy(TINY)


TINY = {
    "name": "tiny", "slot_seconds": 60, "horizon": 4, "resources": ["gpu", "cpu", "mem"],
    "topology": {
        "root": "spine",
        "machines": [
            {"id": "m0", "capacity": {"gpu": 4, "cpu": 32, "mem": 256}, "local_gbps": 400},
            {"id": "m1", "capacity": {"gpu": 4, "cpu": 32, "mem": 256}, "local_gbps": 400}],
        "switches": [{"id": "tor0"}, {"id": "spine"}],
        "links": [{"a": "m0", "b": "tor0", "gbps": 25}, {"a": "m1", "b": "tor0", "gbps": 25},
                  {"a": "tor0", "b": "spine", "gbps": 100}]},
    "jobs": [{"id": "j0", "arrival": 0, "work_batches": 20000, "batch_seconds": 0.05,
              "gradient_mb": 100, "worker": {"gpu": 1, "cpu": 4, "mem": 16},
              "ps": {"cpu": 4, "mem": 16}, "min_workers": 1, "max_workers": 8,
              "worker_gbps": 5, "ps_gbps": 10, "weight": 1, "restart_seconds": 10}],
}


def write(tmp_path: Path, name: str, doc) -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path
