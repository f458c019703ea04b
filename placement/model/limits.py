"""The input policy (docs/limits.md): bounds on every number an input file may hold, and
size limits that a user can raise.

**Number bounds** (fixed): chosen far outside anything a real cluster or job reaches, yet
tight enough that every later product and ratio stays finite and the LP coefficients stay
well inside double range. The worst case of the quantities the solvers build from them:
a mini-batch time ``batch_seconds + 2 x gradient_mb x 0.008 / gbps`` is at most
1e7 + 1.6e13 s; a job's whole work at that pace ``work_batches x batch time`` at most
1.6e28 s; weighted, or divided by a weight (Smith's rule), at most 1.6e37; speeds
``slot_seconds / batch time`` lie in [6e-17, 1e13] batches per slot. Every one is more
than 1e270 below the largest double.

**Size limits** (raisable): :data:`HORIZON`, :data:`JOBS`, :data:`MACHINES`,
:data:`WORKERS`, :data:`RESOURCES`, :data:`DEPTH` and :data:`FILE_MB`, each read from its
environment variable (``PLACEMENT_MAX_HORIZON=200000``) or set for one command by the
matching global flag of ``placement`` (``placement --max-horizon 200000 solve ...``).

The readers of :mod:`placement.model.strict_json` apply both by key: a JSON key named in
:data:`NUMBERS`, :data:`COUNTS` or :data:`ARRAYS` is checked wherever it appears, so
instances, schedules and job lists follow one policy.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = ["ARRAYS", "AMOUNT", "COUNTS", "DEPTH", "FILE_MB", "HORIZON", "JOBS", "LIMITS",
           "LimitError", "MACHINES", "NUMBERS", "RATE", "RESOURCES", "SLOT", "SizeLimit", "Bound",
           "WORKERS", "overridden", "value"]

DOC = "docs/limits.md"


class LimitError(ValueError):
    """A size limit's own setting (environment variable or flag) is not usable."""


@dataclass(frozen=True)
class SizeLimit:
    """A size limit: ``default`` unless the environment variable ``env`` says otherwise."""

    name: str        # the flag without dashes: --max-horizon
    env: str
    default: int
    what: str        # what is counted, for messages: "slots in the horizon"
    ceiling: int     # the largest value the setting itself may take

    @property
    def flag(self) -> str:
        return f"--{self.name}"


HORIZON = SizeLimit("max-horizon", "PLACEMENT_MAX_HORIZON", 100_000,
                    "slots in a horizon", 10**9)
JOBS = SizeLimit("max-jobs", "PLACEMENT_MAX_JOBS", 100_000, "jobs", 10**9)
#: also bounds the switches and the links of a topology, each
MACHINES = SizeLimit("max-machines", "PLACEMENT_MAX_MACHINES", 100_000, "machines", 10**9)
WORKERS = SizeLimit("max-workers", "PLACEMENT_MAX_WORKERS", 10_000,
                    "workers of one job", 10**9)
RESOURCES = SizeLimit("max-resources", "PLACEMENT_MAX_RESOURCES", 64, "resources", 10**6)
#: Python's JSON parser recurses once per level (and fails near 1000): hence the ceiling.
DEPTH = SizeLimit("max-depth", "PLACEMENT_MAX_DEPTH", 64, "levels of JSON nesting", 500)
FILE_MB = SizeLimit("max-file-mb", "PLACEMENT_MAX_FILE_MB", 256, "MB in one input file",
                    10**6)
LIMITS = (HORIZON, JOBS, MACHINES, WORKERS, RESOURCES, DEPTH, FILE_MB)


def value(limit: SizeLimit) -> int:
    """The limit in force: its environment variable if set, else the default."""
    text = os.environ.get(limit.env)
    if text is None or not text.strip():
        return limit.default
    text = text.strip().replace("_", "")
    # ASCII digits, few enough for int() (5000 nines, or '٣', are not a setting)
    if not (text.isascii() and text.isdigit() and len(text) <= 12) or not 1 <= int(text) <= limit.ceiling:
        raw = os.environ[limit.env]
        raise LimitError(f"{limit.env}: must be an integer in 1..{limit.ceiling}, "
                         f"got {raw if len(raw) <= 40 else raw[:40] + '...'!r}")
    return int(text)


def too_many(limit: SizeLimit, count: int, noun: str | None = None) -> str:
    """The reason of an error for ``count`` items (``noun``, default the limit's) above ``limit``."""
    return (f"{count} {noun or limit.what}, more than the limit {value(limit)} "
            f"(raise it with {limit.env} or {limit.flag}; {DOC})")


@contextlib.contextmanager
def overridden(values: Mapping[SizeLimit, int | None]) -> Iterator[None]:
    """Set limits for the duration of a block (through their environment variables, so
    worker processes inherit them); ``None`` values are left alone."""
    saved = {lim.env: os.environ.get(lim.env) for lim, v in values.items() if v is not None}
    try:
        for lim, v in values.items():
            if v is not None:
                if not 1 <= v <= lim.ceiling:
                    raise LimitError(f"{lim.flag}: must be an integer in 1..{lim.ceiling}, got {v}")
                os.environ[lim.env] = str(v)
        yield
    finally:
        for env, old in saved.items():
            if old is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = old


# ----- number bounds -------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    """Closed interval ``[low, high]`` for a number; ``low`` applies only to values > 0
    (zero and the sign are the field's own rule: ``must be > 0`` or ``must be >= 0``)."""

    low: float
    high: float
    unit: str = ""

    def check(self, v: float, positive: bool = False) -> str | None:
        """None if ``v`` (finite, sign already checked) is inside, else the reason."""
        unit = f" {self.unit}" if self.unit else ""
        if v > self.high:
            return f"must be <= {self.high:g}{unit} (the bound in {DOC}), got {_short(v)}"
        if 0 < v < self.low:
            low = f">= {self.low:g}" if positive else f"0 or >= {self.low:g}"
            return f"must be {low}{unit} (the bound in {DOC}), got {_short(v)}"
        return None


GBPS = Bound(1e-6, 1e6, "Gbps")
SECONDS = Bound(1e-6, 1e7, "s")
#: A resource amount (a machine's capacity, a worker's or PS's demand).
AMOUNT = Bound(1e-6, 1e9)
#: slot_seconds: from a millisecond to about 116 days.
SLOT = Bound(1e-3, 1e7, "s")
#: A measured speed (a job's "speed" table, MODEL.md 8): the whole job's mini-batches per
#: second, after ``base``; the linear model's own rates lie inside (1e4 workers / 1e-6 s).
RATE = Bound(1e-12, 1e10, "mini-batches/s")

#: The bound of each numeric JSON key (instance, job list), wherever it appears.
NUMBERS: dict[str, Bound] = {
    "slot_seconds": SLOT,
    "batch_seconds": SECONDS,
    "restart_seconds": Bound(0, 1e9, "s"),
    "work_batches": Bound(1e-6, 1e15, "mini-batches"),
    "gradient_mb": Bound(0, 1e9, "MB"),
    "worker_gbps": GBPS,
    "ps_gbps": GBPS,
    "local_gbps": GBPS,
    "gbps": GBPS,
    "weight": Bound(1e-9, 1e9),
}

#: The largest count of workers or PSs in one schedule entry, and the largest |t|: far
#: beyond any cluster, small enough for exact int64 and float arithmetic on sums of them.
SCHEDULE_COUNT = 10**9
SCHEDULE_SLOT = 10**15

#: The limit of each integer JSON key: a SizeLimit (the value must be <= it; for
#: ``arrival``, < it) or a fixed maximum.
COUNTS: dict[str, SizeLimit | int] = {
    "horizon": HORIZON,
    "arrival": HORIZON,
    "max_workers": WORKERS,
    "min_workers": WORKERS,
    "workers": SCHEDULE_COUNT,
    "ps": SCHEDULE_COUNT,
    "t": SCHEDULE_SLOT,
}

#: The size limit of each JSON array key.
ARRAYS: dict[str, SizeLimit] = {
    "jobs": JOBS,
    "machines": MACHINES,
    "switches": MACHINES,
    "links": MACHINES,
    "resources": RESOURCES,
}


def count_reason(key: str, v: int) -> str | None:
    """None if the integer ``v`` of JSON key ``key`` respects its limit, else the reason."""
    limit = COUNTS.get(key)
    if limit is None:
        return None
    if isinstance(limit, SizeLimit):
        top = value(limit)
        if key == "arrival":
            if v >= top:
                return (f"arrival slot {_short(v)} is not inside any allowed horizon: the "
                        f"limit is {top} {limit.what} (raise it with {limit.env} or "
                        f"{limit.flag}; {DOC})")
            return None
        if v > top:
            return f"must be <= {top}, got {_short(v)} ({limit.what}: raise the limit with " \
                   f"{limit.env} or {limit.flag}; {DOC})"
        return None
    if abs(v) > limit:
        return f"must be between -{limit:.0e} and {limit:.0e} (the bound in {DOC}), got {_short(v)}" \
            if key == "t" else f"must be <= {limit:.0e} (the bound in {DOC}), got {_short(v)}"
    return None


def array_reason(key: str, n: int) -> str | None:
    """None if an array of ``n`` items under JSON key ``key`` respects its limit."""
    limit = ARRAYS.get(key)
    if limit is None or n <= value(limit):
        return None
    return f"lists {too_many(limit, n, key)}"


def _short(v: float) -> str:
    """A number for a message: huge integers abbreviated (a JSON file may hold 4000 digits)."""
    text = repr(v)
    if isinstance(v, int) and len(text) > 20:
        return f"{text[:6]}...({len(text.lstrip('-'))} digits)"
    return text
