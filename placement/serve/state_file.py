"""The ``--state`` file of ``placement serve``: its document, read and checked at start,
written after every accepted change so that ``kill -9`` at any moment leaves either the
previous document or the next one, never a mix; and locked, so two servers never share it.

The document (format :data:`SERVE_FORMAT`, one line of compact JSON)::

    {"format": "placement-serve-state/1",
     "cluster": {"spec": "racks:2x4", "topology": {...}},  # --cluster when the state began
     "policy": "lp-rounding",                              # --policy (its registry name)
     "last_step": null | {"t": 7, "allocations": {...}, "dropped": [...]},
     "scheduler": {...}}                                   # OnlineScheduler.state()

``cluster.topology`` is the cluster as the command line named it when the file was made
(machines added or removed since are in ``scheduler.topology``): a restart with another
``--cluster`` is refused rather than silently mixing two clusters. ``last_step`` is the
answer to the last step, sent again to a client that retries it. ``--information``,
``--lookahead`` and ``--slot-seconds`` are the scheduler's own fields.

Writing (:meth:`StateFile.write`): the text to ``.NAME.tmp`` beside the file (same
folder: the rename is atomic), fsync, ``os.replace``. A killed process (``kill -9``, a
crash) loses nothing it answered; a power cut loses nothing either once the rename is on
disk, which the file system's next journal commit does (ext4: at the next fsync, which the
next change makes, or within 5 s). The folder is not fsynced after each rename: that
would be a third synchronous disk commit per change, up to 4 ms more on the disk measured
(benchmarks/SERVE.md). The lock is ``flock`` on ``.NAME.lock`` beside it, released by the
kernel when the process ends, however it ends.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from placement.model.strict_json import FileFormatError, join, read_json
from placement.model.topology import Topology
from placement.outputs import check_outputs

__all__ = ["SERVE_FORMAT", "StateFile", "check_document", "make_document"]

SERVE_FORMAT = "placement-serve-state/1"


def make_document(spec: str, topology: Mapping[str, Any], policy: str, last_step: Mapping[str, Any] | None,
                  scheduler: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint document (module docstring)."""
    return {"format": SERVE_FORMAT, "cluster": {"spec": spec, "topology": topology}, "policy": policy,
            "last_step": last_step, "scheduler": scheduler}


def check_document(document: Any, where: str, *, topology: Topology, policy: str, information: str,
                   lookahead: int, slot_seconds: float) -> None:
    """Refuse (ValueError, one line starting with ``where``) a document that is not a serve
    state, or that another command line wrote: another cluster, policy, information level,
    look-ahead or slot length would not make the decisions the state's own run makes."""
    if not isinstance(document, dict) or document.get("format") != SERVE_FORMAT:
        raise ValueError(f"{where}: not a placement serve state (expected \"format\": {SERVE_FORMAT!r}); "
                         "give another --state file")
    try:
        cluster, scheduler, last = document["cluster"], document["scheduler"], document["last_step"]
        theirs = {"--policy": document["policy"], "--information": scheduler["information"],
                  "--lookahead": scheduler["lookahead"], "--slot-seconds": scheduler["slot_seconds"]}
        spec, their_topology = cluster["spec"], cluster["topology"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{where}: malformed placement serve state (no {exc})") from None
    if last is not None and not (isinstance(last, dict) and isinstance(last.get("t"), int)
                                 and isinstance(last.get("allocations"), dict)
                                 and isinstance(last.get("dropped"), list)):
        raise ValueError(f"{where}: malformed placement serve state (last_step)")
    if _canonical(topology.to_dict()) != their_topology:
        raise ValueError(f"{where}: written for another cluster ({spec}, "
                         f"{_size(their_topology)}), not this --cluster ({_size(topology.to_dict())}); "
                         "give that --cluster or another --state file")
    ours = {"--policy": policy, "--information": information, "--lookahead": lookahead,
            "--slot-seconds": slot_seconds}
    for flag, value in ours.items():
        if theirs[flag] != value:
            raise ValueError(f"{where}: written with {flag} {theirs[flag]}, not {value}; give {flag} "
                             f"{theirs[flag]} to resume it, or another --state file")


def _canonical(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparison."""
    return json.loads(json.dumps(value, allow_nan=False))


def _not_finite(document: Any) -> str | None:
    """The JSON path of the first NaN or infinity in ``document`` (Python's JSON reads them), or None."""
    todo: list[tuple[str, Any]] = [("", document)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path
        if isinstance(value, dict):
            todo.extend((join(path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((join(path, i), v) for i, v in enumerate(value))
    return None


def _size(topology: Any) -> str:
    try:
        return f"{len(topology['machines'])} machines, {len(topology['switches'])} switches"
    except (KeyError, TypeError):
        return "a malformed topology"


class StateFile:
    """The ``--state`` path: :meth:`open` (checks and locks it), :meth:`read`, :meth:`write`,
    :meth:`close` (module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.where = f"--state {self.path}"
        self._tmp = self.path.with_name(f".{self.path.name}.tmp")
        self._lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._lock_fd: int | None = None

    def open(self) -> "StateFile":
        """Check the path can be written (ValueError naming --state otherwise) and take the
        lock; a file another server holds is refused."""
        check_outputs({"--state": self.path})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise ValueError(f"{self.where}: cannot write beside it: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(f"{self.where}: in use by another placement serve (it holds "
                             f"{self._lock_path}); stop it or give another --state file") from None
        self._lock_fd = fd
        return self

    def close(self) -> None:
        """Release the lock (the lock file stays: removing it could race a starting server)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def read(self) -> Any | None:
        """The document in the file, None when there is no file yet; ValueError (one line
        naming --state) when it cannot be read or is not JSON."""
        if not self.path.exists():
            return None
        try:
            document = read_json(self.path, FileFormatError)
        except FileFormatError as exc:
            raise ValueError(f"{self.where}: {exc.reason}") from None
        where = _not_finite(document)
        if where is not None:
            raise ValueError(f"{self.where}: {where or 'the document'}: NaN or Infinity is not a JSON number")
        return document

    def write(self, document: Mapping[str, Any]) -> None:
        """Replace the file by ``document``, atomically (module docstring); OSError (a
        full disk) leaves the file as it was."""
        data = (json.dumps(document, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
        try:
            fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self._tmp, self.path)
        except OSError:
            self._tmp.unlink(missing_ok=True)
            raise
