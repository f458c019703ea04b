"""The clock of one command: a deadline that long steps check, and the guard that keeps
``placement solve`` inside ``--time-limit`` and makes Ctrl-C prompt.

``with limit(seconds):`` starts a deadline for the code inside it; when limits nest (the
command's, then ``solve(time_limit=...)``'s) the earlier end wins. :func:`check` raises
:class:`TimeLimitReached` once the deadline has passed and does nothing without one, so
the chain calls it between steps and long loops call it once per pass. The deadline lives
in a context variable: the worker threads of a pool (the online policy's) do not see it.

A check can only run between Python statements. A long C call (HiGHS presolve on a huge
model, one big NumPy step) cannot be stopped from inside, so the command line adds a
:class:`Guard`: a thread that ends the process when the main thread has not come back
``grace`` seconds after the deadline, or one second after Ctrl-C, never while outputs are
being written (:meth:`Guard.writing`).
"""
from __future__ import annotations

import argparse
import contextvars
import math
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

__all__ = ["Deadline", "Guard", "Terminated", "TimeLimitReached", "check", "command", "current", "interrupted",
           "in_time", "limit", "remaining", "seconds"]


class TimeLimitReached(Exception):
    """The deadline passed; ``where`` names the stage that noticed."""

    def __init__(self, seconds: float, where: str = ""):
        self.seconds, self.where = seconds, where
        super().__init__(f"time limit of {seconds:g} s reached" + (f" while {where}" if where else ""))


class Deadline:
    """``seconds`` from now; ``where`` is the stage that last checked the clock."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.start = time.perf_counter()
        self.at = self.start + self.seconds
        self.where = ""

    def remaining(self) -> float:
        return self.at - time.perf_counter()

    def expired(self) -> bool:
        return time.perf_counter() >= self.at

    def check(self, where: str = "") -> None:
        if where:
            self.where = where
        if time.perf_counter() >= self.at:
            raise TimeLimitReached(self.seconds, self.where)


_current: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("placement_deadline", default=None)


@contextmanager
def limit(seconds: float | None) -> Iterator[Deadline | None]:
    """A deadline ``seconds`` from now for the code inside (None: no new limit); an
    enclosing deadline that ends earlier stays in force."""
    outer = _current.get()
    if seconds is None or (outer is not None and outer.at <= time.perf_counter() + seconds):
        yield outer
        return
    token = _current.set(Deadline(seconds))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def current() -> Deadline | None:
    return _current.get()


def check(where: str = "") -> None:
    """Raise :class:`TimeLimitReached` if the current deadline has passed (no deadline: no-op)."""
    d = _current.get()
    if d is not None:
        d.check(where)


def remaining(cap: float | None = None) -> float | None:
    """Seconds left before the current deadline, at most ``cap`` (None: no limit at all);
    never below 0.01, so it can be handed to a solver as its own time limit."""
    d = _current.get()
    if d is None:
        return cap
    left = max(d.remaining(), 0.01)
    return left if cap is None else min(cap, left)


def in_time(what: str, function: Callable, *args, **kwargs):
    """``function(*args, **kwargs)`` under the current deadline, in a thread given only the time left:
    the result in hand is not lost to a model build or a solver call that cannot be interrupted (the
    thread is abandoned; its own deadline checks end it at its next step). Raises
    :class:`TimeLimitReached` naming ``what`` when the time runs out first."""
    clock = current()
    if clock is None:
        return function(*args, **kwargs)
    result: list = []
    context = contextvars.copy_context()
    worker = threading.Thread(target=lambda: result.append(_capture(context.run, function, *args, **kwargs)),
                              name=what, daemon=True)
    worker.start()
    worker.join(max(clock.remaining(), 0.0))
    if not result:
        raise TimeLimitReached(clock.seconds, what)
    value, error = result[0]
    if error is not None:
        raise error
    return value


def _capture(run, *args, **kwargs):
    try:
        return run(*args, **kwargs), None
    except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
        return None, exc


class Guard:
    """The command line's last resort (module docstring). Use as a context manager in the
    main thread around one command; ``on_timeout()`` gives the line printed when the
    deadline plus ``grace`` passes with the command still running (exit 1); Ctrl-C or
    SIGTERM that the main thread does not act on within one second prints
    ``placement: interrupted`` (exit 130) or ``placement: terminated`` (143). Inside :meth:`writing` the process is never
    ended: the guard waits for the block to finish first."""

    def __init__(self, deadline: Deadline | None, grace: float, on_timeout: Callable[[], str]):
        self.deadline, self.grace, self.on_timeout = deadline, grace, on_timeout
        self._writing = threading.Lock()
        self._done = threading.Event()
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Guard":
        if threading.current_thread() is not threading.main_thread():
            return self
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)
        self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        self._thread = threading.Thread(target=self._watch, name="placement-guard", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._old_fd)
        os.write(self._pipe[1], b"\0")    # wake the thread so it sees _done
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        for fd in self._pipe:
            os.close(fd)
        self._pipe = None

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Write the outputs inside this block; the guard then has nothing left to do."""
        with self._writing:
            try:
                yield
            finally:
                self._done.set()

    def _watch(self) -> None:
        r = self._pipe[0]
        end = None if self.deadline is None else self.deadline.at + self.grace
        interrupted_at, by = None, signal.SIGINT
        while not self._done.is_set():
            waits = [t - time.perf_counter() for t in (end, interrupted_at and interrupted_at + 1.0) if t]
            # at most an hour per wait: select() cannot wait 1e308 s (--time-limit 1e308)
            ready, _, _ = select.select([r], [], [], min(max(0.0, min(waits)), 3600.0) if waits else None)
            if self._done.is_set():
                return
            if ready:
                signums = [s for s in os.read(r, 64) if s in (signal.SIGINT, signal.SIGTERM)]
                if signums and interrupted_at is None:
                    interrupted_at, by = time.perf_counter(), signums[0]
                continue
            now = time.perf_counter()
            if interrupted_at is not None and now >= interrupted_at + 1.0:
                term = by == signal.SIGTERM      # as interrupted() says it
                self._end(f"placement: {'terminated' if term else 'interrupted'}", 143 if term else 130)
            elif end is not None and now >= end:
                self._end(self.on_timeout(), 1)
                end = None

    def _end(self, line: str, code: int) -> None:
        with self._writing:            # never in the middle of writing an output
            if self._done.is_set():
                return
            try:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
            finally:
                os._exit(code)


# ----- the command line's side -----------------------------------------------------------
class Terminated(KeyboardInterrupt):
    """SIGTERM, ended like Ctrl-C (exit 143)."""


def seconds(text: str) -> float:
    """argparse type of a time limit: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


@contextmanager
def command(limit_seconds: float | None, real: bool, guarded: bool = True) -> Iterator[Guard]:
    """One command: its deadline (None: none) and, when ``real`` (the process's own command
    line, main thread), SIGTERM raised as :class:`Terminated` and, if ``guarded``, the
    :class:`Guard`. Yields the guard, whose :meth:`Guard.writing` the command writes its
    outputs in (a no-op lock when the guard is not running)."""
    real = real and threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, _terminate) if real else None
    try:
        with limit(limit_seconds) as clock:
            grace = max(1.0, 0.1 * limit_seconds) if limit_seconds else 0.0
            guard = Guard(clock, grace, lambda: _overrun(clock, grace))
            with guard if real and guarded else nullcontext():
                yield guard
    finally:
        if real:
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)


def interrupted(exc: KeyboardInterrupt) -> int:
    """Say so on stderr; the exit code: 130 for Ctrl-C, 143 for SIGTERM."""
    terminated = isinstance(exc, Terminated)
    # CPython quirk: a KeyboardInterrupt that once escaped an exec() of a string (scipy runs
    # some at import) makes the interpreter exit by SIGINT whatever the command returns; any
    # later exec() of a string clears that flag, so the exit code below holds.
    exec("None")
    print(f"placement: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
    return 143 if terminated else 130


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def _overrun(clock: Deadline, grace: float) -> str:
    where = f" while {clock.where}" if clock.where else ""
    return (f"placement: no schedule: time limit of {clock.seconds:g} s reached{where} "
            f"(stopped {grace:g} s later, inside a call that cannot be interrupted)")
