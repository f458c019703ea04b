"""Strict reading of JSON values (and the opening of CSV tables): every error names the
JSON path (or file) and the reason.

Instance and schedule files are both read through these helpers, so a typo, a wrong type
or a NaN is reported the same way everywhere (``jobs[3].worker.gpu: must be >= 0``).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn


class FileFormatError(ValueError):
    """A JSON document that breaks its format; ``path`` is where, ``reason`` is why."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class InstanceError(FileFormatError):
    """An instance file or object that breaks MODEL.md section 1."""


class ScheduleError(FileFormatError):
    """A schedule file that is not well-formed (MODEL.md section 2); invalid schedules are verdicts, not errors."""


def fail(path: str, reason: str, error: type[FileFormatError] = FileFormatError) -> NoReturn:
    raise error(path, reason)


def join(path: str, key: str | int) -> str:
    """JSON path of a child: ``jobs`` + 3 -> ``jobs[3]``; ``jobs[3]`` + ``id`` -> ``jobs[3].id``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Fields:
    """Typed access to one JSON object, with unknown and missing keys reported by path."""

    def __init__(self, value: Any, path: str, error: type[FileFormatError],
                 required: tuple[str, ...], optional: tuple[str, ...] = ()):
        self.path = path
        self.error = error
        if not isinstance(value, Mapping):
            fail(path or "document", f"must be a JSON object, got {_json_type(value)}", error)
        allowed = set(required) | set(optional)
        unknown = sorted(k for k in value if k not in allowed)
        if unknown:
            fail(join(path, unknown[0]),
                 f"unknown key (allowed: {', '.join(sorted(allowed))})", error)
        for key in required:
            if key not in value:
                fail(join(path, key), "missing required key", error)
        self.value = value

    def has(self, key: str) -> bool:
        return key in self.value

    def raw(self, key: str, default: Any = None) -> Any:
        return self.value.get(key, default)

    def string(self, key: str, default: str | None = None) -> str:
        v = self.value.get(key, default)
        if not isinstance(v, str) or not v:
            fail(join(self.path, key), f"must be a non-empty string, got {_show(v)}", self.error)
        return v

    def integer(self, key: str, default: int | None = None, minimum: int | None = None) -> int:
        return integer(self.value.get(key, default), join(self.path, key), self.error, minimum)

    def number(self, key: str, default: float | None = None, *, positive: bool = False) -> float:
        return number(self.value.get(key, default), join(self.path, key), self.error, positive)

    def array(self, key: str) -> list:
        v = self.value[key]
        if not isinstance(v, list):
            fail(join(self.path, key), f"must be a JSON array, got {_json_type(v)}", self.error)
        return v

    def sub(self, key: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> "Fields":
        return Fields(self.value[key], join(self.path, key), self.error, required, optional)


def integer(v: Any, path: str, error: type[FileFormatError], minimum: int | None = None) -> int:
    """A JSON integer (``2.0`` and ``true`` are not)."""
    if isinstance(v, bool) or not isinstance(v, int):
        fail(path, f"must be an integer, got {_show(v)}", error)
    if minimum is not None and v < minimum:
        fail(path, f"must be >= {minimum}, got {v}", error)
    return v


def number(v: Any, path: str, error: type[FileFormatError], positive: bool = False) -> float:
    """A finite JSON number, >= 0 (or > 0 when ``positive``); ints stay ints for exact round-trips."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(path, f"must be a number, got {_show(v)}", error)
    if not math.isfinite(v):
        fail(path, f"must be finite, got {v}", error)
    if positive and v <= 0:
        fail(path, f"must be > 0, got {v}", error)
    if v < 0:
        fail(path, f"must be >= 0, got {v}", error)
    return v


def vector(v: Any, path: str, error: type[FileFormatError]) -> dict[str, float]:
    """A resource vector: a JSON object of finite numbers >= 0 (names are checked by the caller)."""
    if not isinstance(v, Mapping):
        fail(path, f"must be a JSON object of resource amounts, got {_json_type(v)}", error)
    return {k: number(x, join(path, k), error) for k, x in v.items()}


def _json_type(v: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(v), type(v).__name__)


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return repr(v)
    return _json_type(v)


def read_json(path: str | os.PathLike, error: type[FileFormatError]) -> Any:
    """Parse a JSON file; unreadable or malformed files raise ``error`` naming line and column."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(str(path), f"cannot read: {exc}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise error(str(path), f"not valid JSON: {exc.msg} at line {exc.lineno} column "
                    f"{exc.colno}") from None
    except _DuplicateKey as exc:
        raise error(str(path), f"not valid: the key {exc.args[0]!r} appears twice in one object") from None


def write_json(path: str | os.PathLike, document: Any) -> None:
    """Write atomically (temp file + rename), so a failure never leaves a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def open_csv(path: str | os.PathLike, expected: str) -> tuple[str, list[str], Iterator[list[str]]]:
    """A CSV file's name, its header (cells stripped) and a reader of the rows after it;
    a missing, unreadable or empty file raises :class:`InstanceError` naming the file
    (``expected`` describes the header, for that message). UTF-8, a BOM allowed."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InstanceError(name, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstanceError(name, f"cannot read: {exc}") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise InstanceError(name, f"empty file; expected the header {expected}")
    return name, [h.strip() for h in header], reader
