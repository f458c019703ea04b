"""Strict reading of JSON values (and the opening of CSV tables): every error names the
JSON path (or file) and the reason.

Instance and schedule files are both read through these helpers, so a typo, a wrong type
or a NaN is reported the same way everywhere (``jobs[3].worker.gpu: must be >= 0``).

They also enforce the input policy of :mod:`placement.model.limits` (docs/limits.md), by key:
a number under a key of ``limits.NUMBERS`` must lie inside its bound, an integer under a
key of ``limits.COUNTS`` and an array under a key of ``limits.ARRAYS`` inside their
limits; a file is read only up to ``PLACEMENT_MAX_FILE_MB`` and nested no deeper than
``PLACEMENT_MAX_DEPTH``; strings hold no control characters.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from placement.model import limits


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
    """JSON path of a child: ``jobs`` + 3 -> ``jobs[3]``; ``jobs[3]`` + ``id`` -> ``jobs[3].id``;
    a key that is not a plain name is quoted (``capacity["gpu mem"]``), control characters
    escaped and long keys cut, so a path is always one short line."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not _NAME.fullmatch(key):
        quoted = json.dumps(key if len(key) <= 40 else key[:40] + "...")
        return f"{path}[{quoted}]"
    return f"{path}.{key}" if path else key


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


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
        return string(self.value.get(key, default), join(self.path, key), self.error)

    def integer(self, key: str, default: int | None = None, minimum: int | None = None) -> int:
        """An integer; under a key of ``limits.COUNTS`` also inside its limit."""
        path = join(self.path, key)
        v = integer(self.value.get(key, default), path, self.error, minimum)
        reason = limits.count_reason(key, v)
        if reason:
            fail(path, reason, self.error)
        return v

    def number(self, key: str, default: float | None = None, *, positive: bool = False) -> float:
        """A finite number; under a key of ``limits.NUMBERS`` also inside its bound."""
        return number(self.value.get(key, default), join(self.path, key), self.error, positive,
                      bound=limits.NUMBERS.get(key))

    def array(self, key: str) -> list:
        """A JSON array; under a key of ``limits.ARRAYS`` no longer than its limit."""
        v = self.value[key]
        if not isinstance(v, list):
            fail(join(self.path, key), f"must be a JSON array, got {_json_type(v)}", self.error)
        reason = limits.array_reason(key, len(v))
        if reason:
            fail(join(self.path, key), reason, self.error)
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


def number(v: Any, path: str, error: type[FileFormatError], positive: bool = False,
           bound: limits.Bound | None = None) -> float:
    """A finite JSON number, >= 0 (or > 0 when ``positive``) and inside ``bound`` if given;
    ints stay ints for exact round-trips."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(path, f"must be a number, got {_show(v)}", error)
    if isinstance(v, float) and not math.isfinite(v):
        fail(path, f"must be finite, got {v}", error)
    if positive and v <= 0:
        fail(path, f"must be > 0, got {_show(v)}", error)
    if v < 0:
        fail(path, f"must be >= 0, got {_show(v)}", error)
    if isinstance(v, int) and v > 1e300:  # too large for a float: outside every bound
        fail(path, f"must be a finite number of at most about 1e300, got {_show(v)}", error)
    reason = bound.check(v, positive) if bound is not None else None
    if reason:
        fail(path, reason, error)
    return v


def string(v: Any, path: str, error: type[FileFormatError]) -> str:
    """A non-empty string without control characters (NUL, newline, escape, ...) or lone
    surrogates, which would corrupt a terminal, a CSV line or a message echoing it."""
    if not isinstance(v, str) or not v:
        fail(path, f"must be a non-empty string, got {_show(v)}", error)
    bad = _CONTROL.search(v)
    if bad is not None:
        fail(path, f"must not contain control characters, got {_show(v)} (character "
             f"U+{ord(bad.group()):04X} at position {bad.start() + 1})", error)
    return v


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def vector(v: Any, path: str, error: type[FileFormatError]) -> dict[str, float]:
    """A resource vector: a JSON object of finite numbers >= 0 inside ``limits.AMOUNT``
    (names are checked by the caller)."""
    if not isinstance(v, Mapping):
        fail(path, f"must be a JSON object of resource amounts, got {_json_type(v)}", error)
    return {k: number(x, join(path, k), error, bound=limits.AMOUNT) for k, x in v.items()}


def _json_type(v: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(v), type(v).__name__)


def _show(v: Any) -> str:
    """A value for a message: one line, at most about 60 characters, control characters
    escaped (``repr``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return limits._short(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        text = repr(v)
        return text if len(text) <= 60 else f"{text[:50]}...' ({len(v)} characters)"
    return _json_type(v)


def read_json(path: str | os.PathLike, error: type[FileFormatError]) -> Any:
    """Parse a JSON file under the input policy (module docstring): a missing, unreadable,
    too large, not UTF-8, malformed or too deeply nested file, or a key that appears twice
    in one object, raises ``error`` naming the file and the place (line and column, or the
    JSON path of the duplicate). A UTF-8 byte-order mark is allowed."""
    name = str(path)
    data = read_bytes(path, error)
    text = _decode(data, name, error)
    _check_depth(data, text, name, error)
    try:
        return parse_strict(text)
    except json.JSONDecodeError as exc:
        raise error(name, f"not valid JSON: {exc.msg} at line {exc.lineno} column "
                    f"{exc.colno}") from None
    except RecursionError:  # only when PLACEMENT_MAX_DEPTH is set near Python's own limit
        raise error(name, "nested too deeply for the JSON parser (see PLACEMENT_MAX_DEPTH, "
                    f"{limits.DOC})") from None
    except JsonFault as exc:
        raise error(name, f"{exc.path}: {exc.reason}") from None


class JsonFault(ValueError):
    """Parsed JSON that breaks the input policy: ``path`` (the JSON path) and ``reason``."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def parse_strict(text: str, *, finite: bool = False) -> Any:
    """``text`` as JSON, integers through :func:`parse_int`. A key twice in one object, and
    with ``finite`` a NaN or Infinity (Python's parser takes both), raises :class:`JsonFault`
    naming the first, depth first; text that is not JSON raises ``json.JSONDecodeError``."""
    faults: list[Any] = []

    def constant(word: str) -> _NotFinite:
        faults.append(word)
        return _NotFinite(word)

    document = json.loads(text, object_pairs_hook=lambda pairs: _pairs(pairs, faults), parse_int=parse_int,
                          **({"parse_constant": constant} if finite else {}))
    if faults:
        raise JsonFault(*_first_fault(document))
    return document


def read_bytes(path: str | os.PathLike, error: type[FileFormatError]) -> bytes:
    """A file's bytes, at most ``PLACEMENT_MAX_FILE_MB`` megabytes of them (so a special
    file such as /dev/zero is refused too, not read forever)."""
    name = str(path)
    megabytes = limits.value(limits.FILE_MB)
    most = megabytes * 1_000_000
    try:
        with open(path, "rb") as handle:
            data = handle.read(most + 1)
    except FileNotFoundError:
        raise error(name, "no such file") from None
    except IsADirectoryError:
        raise error(name, "is a directory, not a file") from None
    except OSError as exc:
        raise error(name, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > most:
        lim = limits.FILE_MB
        raise error(name, f"larger than the limit of {megabytes} MB (raise it with {lim.env} "
                    f"or {lim.flag}; {limits.DOC})")
    return data


def _decode(data: bytes, name: str, error: type[FileFormatError]) -> str:
    """UTF-8 text without its byte-order mark; a byte that is not UTF-8 is named by line
    and column (not by offset)."""
    skip = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        line_start = data.rfind(b"\n", 0, at) + 1
        line = data.count(b"\n", 0, at) + 1
        column = len(data[line_start:at].decode("utf-8", "replace")) + 1
        raise error(name, f"not UTF-8 text: byte 0x{data[at]:02x} at line {line} column "
                    f"{column}") from None


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _check_depth(data: bytes, text: str, name: str, error: type[FileFormatError]) -> None:
    """Refuse nesting deeper than PLACEMENT_MAX_DEPTH before parsing (Python's parser and
    every walk of the document recurse once per level), naming where it goes too deep."""
    top = limits.value(limits.DEPTH)
    if data.count(b"[") + data.count(b"{") <= top or _max_depth(data, text) <= top:
        return
    depth = 0
    for match in _TOKEN.finditer(text):
        c = match.group()
        if c in ("[", "{"):
            depth += 1
            if depth > top:
                at = match.start()
                line = text.count("\n", 0, at) + 1
                column = at - (text.rfind("\n", 0, at) + 1) + 1
                lim = limits.DEPTH
                raise error(name, f"nested deeper than {top} levels at line {line} column "
                            f"{column} (raise the limit with {lim.env} or {lim.flag}; "
                            f"{limits.DOC})")
        elif c in ("]", "}"):
            depth -= 1


def _max_depth(data: bytes, text: str) -> int:
    """The deepest nesting of brackets outside strings (vectorised: a large file costs a
    few tens of milliseconds)."""
    import numpy as np

    if b"\\" in data:  # escapes: drop the strings first (exact, slower)
        data = re.sub(r"[^\[\]{}]+", "", _STRING.sub("", text)).encode("ascii")
    table = np.zeros(256, dtype=bool)
    table[list(b'"[]{}')] = True
    raw = np.frombuffer(data, dtype=np.uint8)
    marks = raw[np.flatnonzero(table[raw])]
    quote = marks == ord('"')
    outside = ~quote & (np.cumsum(quote) % 2 == 0)
    step = np.where((marks == ord("[")) | (marks == ord("{")), 1, -1)[outside]
    return int(np.cumsum(step).max(initial=0))


def parse_int(text: str) -> int | float:
    """A JSON integer (or a job-list cell of digits); one too long for Python's int
    conversion (4300 digits) reads as an infinite float, which every field then refuses
    as not finite."""
    if len(text) > 4000:
        return -math.inf if text.startswith("-") else math.inf
    return int(text)


class _Duplicates(dict):
    """An object that repeated a key (the first one repeated is ``key``)."""

    key: str = ""


class _NotFinite:
    """Where the text said NaN, Infinity or -Infinity."""

    def __init__(self, word: str):
        self.word = word


def _pairs(pairs: list[tuple[str, Any]], found: list) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and not isinstance(out, _Duplicates):
            out = _Duplicates(out)
            out.key = key
            found.append(out)
        out[key] = value
    return out


def _first_fault(document: Any) -> tuple[str, str]:
    """(JSON path, reason) of the first repeated key or NaN/Infinity, depth first."""
    todo: list[tuple[str, Any]] = [("", document)]
    while todo:
        path, value = todo.pop()
        if isinstance(value, _NotFinite):
            return path, f"{value.word} is not a JSON number (numbers must be finite)"
        if isinstance(value, _Duplicates):
            return join(path, value.key), f"the key {value.key!r} appears twice in one object"
        if isinstance(value, dict):
            todo.extend((join(path, k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            todo.extend((join(path, i), v) for i, v in reversed(list(enumerate(value))))
    return "", "not strict JSON"


def write_json(path: str | os.PathLike, document: Any) -> None:
    """Write atomically (temp file + rename), so a failure never leaves a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def open_csv(path: str | os.PathLike, expected: str) -> tuple[str, list[str], "CsvRows"]:
    """A CSV file's name, its header (cells stripped) and a reader of the rows after it
    (``line_num`` is the file line of the last row read); a missing, unreadable, too large,
    not UTF-8 or empty file, and a line the CSV module cannot read, raise
    :class:`InstanceError` naming the file (and the line). ``expected`` describes the
    header, for that message. UTF-8, a BOM allowed."""
    name = str(path)
    text = _decode(read_bytes(path, InstanceError), name, InstanceError)
    reader = CsvRows(name, csv.reader(io.StringIO(text, newline="")))
    header = next(reader, None)
    if header is None:
        raise InstanceError(name, f"empty file; expected the header {expected}")
    return name, [h.strip() for h in header], reader


class CsvRows:
    """A csv.reader whose errors (a field larger than the CSV module's limit, a stray
    quote in strict dialects) become :class:`InstanceError` naming the line."""

    def __init__(self, name: str, reader: Any):
        self.name, self._reader = name, reader

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self) -> "CsvRows":
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self._reader)
        except csv.Error as exc:
            raise InstanceError(f"{self.name}:line {self._reader.line_num + 1}",
                                f"not valid CSV: {exc}") from None
