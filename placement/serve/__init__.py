"""``placement serve``: the online scheduler as an HTTP JSON service (docs/serve.md), and
:func:`serve`, the command that runs it until Ctrl-C or SIGTERM.

Importing this package needs neither FastAPI nor uvicorn (the optional extra
``placement[serve]``): :func:`serve` imports them when it runs, and says in one line how to
install them when they are missing.

Everything that can be refused is refused before the first request, as one ValueError
line naming the flag or file (the command line prints it, exit 2): FastAPI or uvicorn
missing, an address that cannot be listened on (a port in use), then the cluster, the
policy, the numbers and the state file (:meth:`Service.open`).

Stopping: on SIGINT or SIGTERM the server stops taking requests and lets the ones in
flight finish (each has written its checkpoint before answering); then, with the command
line's handlers back in place, the signal is raised again, so Ctrl-C ends the command as
everywhere else in ``placement``: ``placement: interrupted``, exit 130; SIGTERM:
``placement: terminated``, exit 143 (:mod:`placement.deadline`). ``serve`` returns 0 only
when the server stops by itself. uvicorn catches both signals while it serves and raises
them again when done; :func:`_signals_stop` covers the moments before and after, when a
signal would otherwise interrupt uvicorn half started (a KeyboardInterrupt inside asyncio's
start-up can leave the server running).
"""
from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from placement.serve.service import Service

__all__ = ["serve"]


def serve(*, cluster: str, host: str = "127.0.0.1", port: int = 8000, state: str | Path = "placement-state.json",
          policy: str = "lp-rounding", information: str = "oracle", lookahead: int = 8,
          slot_seconds: float | None = None) -> int:
    """Serve the online scheduler of ``cluster`` over HTTP on ``host``:``port`` (0: any free
    port; the address is printed), checkpointing to ``state`` (module docstring)."""
    try:
        import uvicorn

        from placement.serve.app import create_app
    except ImportError as exc:
        raise ValueError(f"placement serve needs FastAPI and uvicorn ({exc.name or exc} is not installed): "
                         "pip install \"placement[serve]\"") from None
    listener = _listen(host, port)
    try:
        service = Service.open(cluster=cluster, state=state, policy=policy, information=information,
                               lookahead=lookahead, slot_seconds=slot_seconds)
        try:
            config = uvicorn.Config(create_app(service), log_level="warning", access_log=False, lifespan="off")
            print(f"placement: serving {_url(listener)} ({_describe(service)}); Ctrl-C stops", file=sys.stderr,
                  flush=True)
            server = uvicorn.Server(config)
            with _signals_stop(server):
                server.run(sockets=[listener])
        finally:
            service.close()
    finally:
        listener.close()
    return 0


@contextmanager
def _signals_stop(server: Any) -> Iterator[None]:
    """SIGINT and SIGTERM stop ``server`` (a second SIGINT: at once), and are raised again
    once it has stopped and the handlers in place before are back (module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def stop(signum: int, frame: object) -> None:
        if server.should_exit and signum == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True
        caught.append(signum)
    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    if caught:
        signal.raise_signal(caught[0])


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host``:``port``; ValueError naming the flag when it cannot."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"--port {port}: must be an integer in 0..65535 (0: any free port)")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ValueError(f"--host {host}: cannot resolve it: {getattr(exc, 'strerror', None) or exc}") from None
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise ValueError(f"--port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return listener


def _url(listener: socket.socket) -> str:
    host, port = listener.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _describe(service: Service) -> str:
    document = service.document
    state = document["scheduler"]
    now = (f"resumed at slot {state['last_slot']}" if state["last_slot"] is not None else "no slot stepped yet")
    return (f"cluster {document['cluster']['spec']}, policy {document['policy']}, information "
            f"{state['information']}; state {service.state_path}: {now}, {len(state['jobs'])} open jobs")
