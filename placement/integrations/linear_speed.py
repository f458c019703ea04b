"""A measured training speed written in MODEL.md's linear rate: the approximation the
peer arena used before speed tables (MODEL.md 8), kept as the comparison
``benchmarks/linear_speed_error.py`` measures (how far it is from the traces). The adapter
and the converter now write tables (:mod:`placement.integrations.measured_speed`).

MODEL.md section 4 runs W workers at W / theta mini-batches per second, with
theta = batch_seconds + 2 * gradient_mb * 0.008 / b and b = ``local_gbps`` when the job is
local, ``worker_gbps`` when it is spread. So a job's speed has two free numbers: the time
per mini-batch and worker on one machine (theta_L) and spread (theta_S). Measured speeds
(the Pollux simulator's traces, any profiler) are concave in W and depend on the number of
machines; this model keeps one point of each class and draws a line through the origin:

- theta_L = W_L / rate(W_L workers on one machine),
- theta_S = W_S / rate(W_S workers spread),

then picks ``batch_seconds`` and ``gradient_mb`` that give exactly these two times under
the cluster's ``local_gbps`` and the job's ``worker_gbps``. What is lost: the speed at
other counts (a line through the measured point over-states it above W and under-states
it below, where the true curve is concave), and the difference between spreading over 2
machines or 16. A spread class that is not slower per worker than the local one (it
happens when the two points are taken at different counts) cannot be written with a
non-negative ``gradient_mb``: both classes then get theta_L (spreading looks free).
"""
from __future__ import annotations

import math

from placement.model.instance import MB_TO_GB
from placement.integrations.measured_speed import packed

__all__ = ["LinearSpeed", "linear_speed", "reference_placements"]


class LinearSpeed(tuple):
    """``(batch_seconds, gradient_mb)``: the two MODEL.md fields that carry the speed."""

    __slots__ = ()

    def __new__(cls, batch_seconds: float, gradient_mb: float) -> "LinearSpeed":
        return super().__new__(cls, (batch_seconds, gradient_mb))

    @property
    def batch_seconds(self) -> float:
        return self[0]

    @property
    def gradient_mb(self) -> float:
        return self[1]


def linear_speed(local_rate: float, local_workers: int, spread_rate: float | None,
                 spread_workers: int | None, *, local_gbps: float,
                 worker_gbps: float) -> LinearSpeed:
    """MODEL.md fields giving ``local_rate`` mini-batches/s with ``local_workers`` workers
    on one machine and ``spread_rate`` with ``spread_workers`` spread (module docstring).

    ``spread_rate`` None: the job never spreads (only the local point is kept).
    ``local_gbps`` must exceed ``worker_gbps`` (a machine's own bus is the faster path)."""
    for name, v in (("local_rate", local_rate), ("local_gbps", local_gbps),
                    ("worker_gbps", worker_gbps)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    if local_workers < 1:
        raise ValueError(f"local_workers must be >= 1, got {local_workers!r}")
    if local_gbps <= worker_gbps:
        raise ValueError(f"local_gbps {local_gbps} must exceed worker_gbps {worker_gbps}")
    theta_l = local_workers / local_rate
    if spread_rate is None:
        return LinearSpeed(theta_l, 0.0)
    if not (math.isfinite(spread_rate) and spread_rate > 0) or not spread_workers or spread_workers < 1:
        raise ValueError(f"spread point must be a positive rate and count, got "
                         f"{spread_rate!r} with {spread_workers!r} workers")
    theta_s = spread_workers / spread_rate
    if theta_s <= theta_l:
        return LinearSpeed(theta_l, 0.0)
    per_mb_local = 2 * MB_TO_GB / local_gbps   # seconds per MB of gradient, local
    per_mb_spread = 2 * MB_TO_GB / worker_gbps
    gradient_mb = (theta_s - theta_l) / (per_mb_spread - per_mb_local)
    batch_seconds = theta_l - gradient_mb * per_mb_local
    if batch_seconds <= 0:
        raise ValueError(f"spreading is {theta_s / theta_l:.3g}x slower per worker than local, "
                         f"more than local_gbps / worker_gbps = {local_gbps / worker_gbps:.3g} "
                         "allows; raise local_gbps")
    return LinearSpeed(batch_seconds, gradient_mb)


def reference_placements(count: int, per_node: int, *, elastic: bool = False
                         ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """Where :func:`linear_speed`'s two points are measured for a job of up to ``count``
    workers on machines of ``per_node`` GPUs.

    The local point: min(count, per_node) workers on one machine. The spread point, None
    for a one-worker job (it never spreads); else, for a job that runs exactly ``count``
    workers (a gang), ``count`` on the fewest machines (:func:`packed`), or split over two
    machines when one would hold them; for an ``elastic`` job (any count up to ``count``),
    the first count that must spread, per_node + 1 on two machines (the step at which a
    policy decides whether to leave one machine, where a cliff between the two classes
    would stop any marginal-gain rule), or ``count`` split over two machines when one
    machine holds them all. The line through a point over-states the speed above it and
    under-states it below (speeds are concave)."""
    if count < 1 or per_node < 1:
        raise ValueError(f"count and per_node must be >= 1, got {count}, {per_node}")
    local = (min(count, per_node),)
    if count == 1:
        return local, None
    if count <= per_node:
        return local, ((count + 1) // 2, count // 2)
    return local, packed(per_node + 1 if elastic else count, per_node)

