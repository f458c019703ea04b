"""Run a constructor with whatever it prints from C on stdout caught, and pass on all but HiGHS' banner.

highspy prints its copyright banner from C during the first construction of a process, before any option
can be set.  Where the C library's ``stdout`` stream can be reached (glibc and musl: ``stdout``; macOS:
``__stdoutp``), it is pointed at a temporary file for the construction: Python's own writes go to file
descriptor 1 directly, so other threads' prints are neither caught nor delayed.  Elsewhere fd 1 itself is
sent to a temporary file, and what other threads wrote meanwhile is passed on, delayed but never lost.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
import tempfile
from typing import Any, Callable, TypeVar

__all__ = ["construct_without_banner", "printed_banner"]

T = TypeVar("T")

# HiGHS writes each banner line with one write() call (highsLogUser then fflush), so another writer's
# bytes can sit before or after a banner line, never inside one: removing exactly these lines loses nothing.
_BANNER_LINE = re.compile(rb"(?:Running HiGHS|Includes third-party software components)[^\n]*\n?")


def printed_banner(printed: bytes) -> bool:
    """Whether ``printed`` holds a line of HiGHS' banner."""
    return _BANNER_LINE.search(printed) is not None


def construct_without_banner(construct: Callable[[], T]) -> tuple[T, bytes]:
    """``construct()`` with its C-level stdout caught; returns the object and all it printed.

    Callers serialise calls (stdout and fd 1 are per process).  Everything caught but the banner's lines
    is written on to fd 1 afterwards.
    """
    stream = _c_stdout()
    return _construct_c_stream(construct, *stream) if stream else _construct_fd1(construct)


def _c_stdout() -> tuple[Any, ctypes.c_void_p] | None:
    """The C library and its ``FILE *stdout`` variable, when both can be reached."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # Windows: no process-wide symbol table this way
        return None
    for name in ("stdout", "__stdoutp"):
        try:
            variable = ctypes.c_void_p.in_dll(libc, name)
        except ValueError:
            continue
        if variable.value:
            libc.tmpfile.restype = ctypes.c_void_p
            for function in (libc.fflush, libc.fclose, libc.fileno):
                function.argtypes = [ctypes.c_void_p]
            return libc, variable
    return None


def _construct_c_stream(construct: Callable[[], T], libc: Any, stdout: ctypes.c_void_p) -> tuple[T, bytes]:
    """``construct()`` with the C ``stdout`` stream pointed at a temporary file."""
    caught = libc.tmpfile()
    if not caught:
        return _construct_fd1(construct)
    original = stdout.value
    libc.fflush(original)
    stdout.value = caught
    try:
        obj = construct()
    finally:
        libc.fflush(caught)
        stdout.value = original
        printed = _read_all(libc.fileno(caught))
        libc.fclose(caught)
    _write_all(1, _BANNER_LINE.sub(b"", printed))
    return obj, printed


def _construct_fd1(construct: Callable[[], T]) -> tuple[T, bytes]:
    """``construct()`` with file descriptor 1 sent to a temporary file (when C's stdout is out of reach).

    What other threads wrote meanwhile is passed on to the real fd 1 *before* fd 1 is restored, so a line
    a thread had half-written is finished after its first half; only bytes written in the last instant
    between that copy and the restore are passed on after it.
    """
    _flush_stdout()
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 at all (closed stdout): nothing can reach a terminal
        return construct(), b""
    printed = bytearray()
    try:
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 1)
            try:
                obj = construct()
            finally:
                _flush_stdout()
                while _pass_on(tmp.fileno(), printed, saved):  # until no thread adds more
                    pass
                os.dup2(saved, 1)
                _pass_on(tmp.fileno(), printed, saved)
    finally:
        os.close(saved)
    return obj, bytes(printed)


def _pass_on(source: int, printed: bytearray, fd: int) -> bool:
    """Copy what reached ``source`` since the last call to ``fd``, minus the banner; False if nothing came."""
    new = _read_all(source, start=len(printed))
    printed += new
    _write_all(fd, _BANNER_LINE.sub(b"", new))
    return bool(new)


def _read_all(fd: int, start: int = 0) -> bytes:
    """The bytes of ``fd`` from ``start`` on, by pread (fd 1 may share the file offset: never move it)."""
    out = b""
    while chunk := os.pread(fd, 1 << 16, start + len(out)):
        out += chunk
    return out


def _write_all(fd: int, data: bytes) -> None:
    while data:  # os.write may write only part
        data = data[os.write(fd, data):]


def _flush_stdout() -> None:
    """Flush Python's and C's stdout buffers, so nothing crosses a redirection of fd 1 the wrong way."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):  # a closed or broken stdout has nothing to flush
        pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C runtime reachable this way: nothing more to flush
        pass
