"""A persistent child interpreter for backends that must not load in this process (OR-Tools).

OR-Tools' wheel bundles an older HiGHS under the same SONAME (``libhighs.so.1``) as highspy, and
whichever of the two loads first makes the other fail to import (google/or-tools#5246).  HiGHS runs
in-process; OR-Tools runs only through :func:`run_isolated`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from solvers.finish import RawSolution
from solvers.result import Status

__all__ = ["run_isolated"]

# Extra wall-clock seconds granted to an isolated worker beyond the solver's own time limit.
_WATCHDOG_SLACK = 60.0


class _Worker:
    """A persistent child interpreter that runs module-level functions sent over a pipe.

    A plain ``python -c`` child (not multiprocessing) so callers' scripts are never re-imported,
    and the protocol uses its own pipes so solver chatter on stdout cannot corrupt it.
    """

    def __init__(self) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "import solvers.isolation as m; m._serve_fds()", str(down_r), str(up_w)],
            pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
        )
        os.close(down_r)
        os.close(up_w)
        self.send = Connection(down_w, readable=False)
        self.recv = Connection(up_r, writable=False)

    def stop(self) -> None:
        self.send.close()
        self.recv.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


def _serve_fds() -> None:
    """Child side of :class:`_Worker`: answer requests until the parent closes the pipe."""
    inbox = Connection(int(sys.argv[1]), writable=False)
    outbox = Connection(int(sys.argv[2]), readable=False)
    while True:
        try:
            fn, args = inbox.recv()
        except EOFError:
            return
        try:
            outbox.send((True, fn(*args)))
        except Exception as exc:  # report, keep serving
            outbox.send((False, f"{type(exc).__name__}: {exc}"))


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def run_isolated(fn: Callable[..., RawSolution], *args: Any, time_limit: float | None) -> RawSolution:
    """Run ``fn(*args)`` in the OR-Tools worker process (started on first use, reused afterwards).

    A crash or a run exceeding ``time_limit`` + a grace period kills the worker and returns ERROR/TIME_LIMIT.
    """
    global _worker
    with _worker_lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
        worker = _worker
        timeout = None if time_limit is None else time_limit + _WATCHDOG_SLACK
        try:
            worker.send.send((fn, args))
            if not worker.recv.poll(timeout):
                worker.stop()
                _worker = None
                return RawSolution(Status.TIME_LIMIT, None, None, "", "worker exceeded the time limit; killed")
            ok, value = worker.recv.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            worker.stop()
            _worker = None
            return RawSolution(Status.ERROR, None, None, "", f"solver worker died: {exc!r}")
    if not ok:
        return RawSolution(Status.ERROR, None, None, "", f"solver raised {value}")
    return value
