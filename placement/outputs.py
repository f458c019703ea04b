"""Output files: checked before any work starts, then written all or nothing.

:func:`check_outputs` refuses up front what would otherwise fail (or do harm) only after a
long solve: a target that is a directory or not a regular file, a folder path that runs
through a file or cannot be written, a target that is one of the inputs (``--out
INSTANCE``), two outputs on one path. Missing folders are fine: they are created when the
outputs are written, as ``placement batch`` does.

:class:`Staged` writes each output to a temporary file beside its target (a fresh name,
so two commands never share one) and renames them only once every one has been written,
with Ctrl-C and SIGTERM held back during the renames: a command writes everything it was
asked to or nothing, and leaves no temporary file or new empty folder behind, whatever
stops it (an error, Ctrl-C).
"""
from __future__ import annotations

import json
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["OutputError", "Staged", "check_folder", "check_outputs", "json_text", "write_text"]


class OutputError(ValueError):
    """An output path that cannot (or must not) be written; the message says which and why."""


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  inputs: Iterable[str | os.PathLike] = ()) -> dict[str, Path]:
    """``{label: path}`` of the outputs a command was asked for (None: not asked), checked
    against each other and the ``inputs``; raises :class:`OutputError` naming the option."""
    checked: dict[str, Path] = {}
    inputs = [Path(p) for p in inputs]
    for label, raw in outputs.items():
        if raw is None:
            continue
        path = Path(raw)
        where = f"{label} {raw}"
        if not str(raw).strip():
            raise OutputError(f"{label}: empty file name")
        try:    # a name too long for the file system: OSError from the first look at it
            if path.is_dir():
                raise OutputError(f"{where}: is a directory; give a file name")
            if path.exists() and not (path.is_file() or _is_stream(path)):
                raise OutputError(f"{where}: exists and is neither a regular file nor a stream (/dev/null, a pipe)")
            _check_folder(where, path.absolute().parent)
            for source in inputs:
                if _same(path, source):
                    raise OutputError(f"{where}: is the input file {source}; it would be overwritten "
                                      "(choose another name)")
        except OSError as exc:
            raise OutputError(f"{where}: {exc.strerror or exc}") from None
        for other, target in checked.items():
            if _same(path, target):
                raise OutputError(f"{where}: {other} writes the same file")
        checked[label] = path
    return checked


def check_folder(label: str, raw: str | os.PathLike, files: Mapping[str, Path] = {}) -> Path:
    """A folder a command writes its files into (``simulate --plot``), checked like
    :func:`check_outputs` checks a file: missing is fine, a file (or one of ``files``,
    the command's other outputs) is not."""
    path, where = Path(raw), f"{label} {raw}"
    if not str(raw).strip():
        raise OutputError(f"{label}: empty folder name")
    try:
        if path.exists() and not path.is_dir():
            raise OutputError(f"{where}: is a file; {label} takes a folder")
        _check_folder(where, path.absolute())
    except OSError as exc:
        raise OutputError(f"{where}: {exc.strerror or exc}") from None
    for other, target in files.items():
        if _same(path, target):
            raise OutputError(f"{where}: {other} writes that path as a file")
    return path


def _check_folder(where: str, folder: Path) -> None:
    """``folder`` (made if missing) can be written in."""
    folder = _existing_ancestor(folder)
    if not folder.is_dir():
        raise OutputError(f"{where}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{where}: cannot write in {folder} (permission denied)")


def _is_stream(path: Path) -> bool:
    """/dev/null, /dev/stdout, a named pipe: written in place, never replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _existing_ancestor(folder: Path) -> Path:
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return a.resolve() == b.resolve()


def json_text(document: Any) -> str:
    """The JSON text the project writes (as ``strict_json.write_json``)."""
    return json.dumps(document, indent=1, allow_nan=False) + "\n"


class Staged:
    """Temporary files beside their targets, renamed together by :meth:`commit`; whatever
    was not committed when the block ends is removed (module docstring)."""

    def __init__(self) -> None:
        self._files: list[tuple[Path, Path]] = []
        self._made: list[Path] = []       # folders this object created, outermost first

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.discard()

    def path(self, target: str | os.PathLike) -> Path:
        """A new empty temporary file beside ``target`` (its folder created if missing),
        to be renamed to ``target`` by :meth:`commit`."""
        target = Path(target)
        missing = []
        folder = target.absolute().parent
        while not folder.exists():
            missing.append(folder)
            folder = folder.parent
        self._made.extend(reversed(missing))
        with _naming(target):
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            os.close(fd)
            tmp = Path(name)
            self._files.append((tmp, target))
            os.chmod(tmp, _mode_for(target))
        return tmp

    def write_text(self, target: str | os.PathLike, text: str) -> None:
        tmp = self.path(target)
        with _naming(Path(target)):
            tmp.write_text(text, encoding="utf-8")

    def commit(self) -> None:
        """Rename every staged file onto its target (Ctrl-C and SIGTERM wait until done)."""
        with _signals_held():
            while self._files:
                tmp, target = self._files[0]
                with _naming(target):
                    if _is_stream(target):
                        with open(target, "wb") as sink:
                            sink.write(tmp.read_bytes())
                        tmp.unlink()
                    else:
                        os.replace(tmp, target)
                self._files.pop(0)
            self._made = []

    def discard(self) -> None:
        """Remove the files not committed, and the folders made for them if left empty."""
        for tmp, _ in self._files:
            try:
                tmp.unlink()
            except FileNotFoundError:
                pass
        self._files = []
        for folder in reversed(self._made):
            try:
                folder.rmdir()
            except OSError:
                pass
        self._made = []


def write_text(target: str | os.PathLike, text: str) -> None:
    """Write one file atomically (temporary file + rename; nothing left on failure)."""
    with Staged() as staged:
        staged.write_text(target, text)
        staged.commit()


@contextmanager
def _naming(target: Path) -> Iterator[None]:
    """An OSError inside (a full disk, /dev/full, a read-only file system, a quota) becomes
    an :class:`OutputError` naming the output, for a one-line message."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{target}: cannot write: {exc.strerror or exc}") from None


def _mode_for(target: Path) -> int:
    """The mode of the file being replaced, else the mode a new file gets under the umask."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return 0o666 & ~_UMASK


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM arriving inside the block are delivered after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        if held:
            signal.raise_signal(held[0])
