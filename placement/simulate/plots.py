"""Pictures of simulation results: the JCT distribution and the utilisation over time of
each policy, side by side. Needs matplotlib (``pip install "placement[plot]"``).

Kept apart from the loop because only the command line's ``--plot`` and the benchmarks draw,
and apart from :mod:`placement.plot` (one schedule's allocations) because these compare
several policies' :class:`~placement.simulate.result.SimulationResult`.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from placement.simulate.result import SimulationResult

__all__ = ["jct_axis_is_log", "plot_simulation"]


def plot_simulation(results: Mapping[str, SimulationResult], out_dir: str | os.PathLike) -> list[Path]:
    """``jct_cdf.png`` (JCT CDF per policy) and ``utilisation.png`` (each resource over
    time per policy) in ``out_dir``; each PNG is written atomically."""
    from placement.plot import PlotUnavailable
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable('plotting needs matplotlib: pip install "placement[plot]"') from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    log = jct_axis_is_log(results)
    for label, r in results.items():
        x = np.sort(np.array(list(r.jct.values()), dtype=float))
        start = x[:1] if log else np.zeros(1)
        ax.step(np.concatenate([start, x]), np.arange(len(x) + 1) / max(len(x), 1), where="post",
                label=f"{label} (mean {r.average_jct:.4g} s)")
    if log:
        ax.set_xscale("log")
    ax.set_xlabel("job completion time (s)" + (", log scale" if log else ""))
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=8)
    ax.set_title("JCT distribution")
    paths = [_save(fig, out / "jct_cdf.png", plt)]
    resources = list(dict.fromkeys(r for res in results.values() for r in res.utilisation))
    fig, axes = plt.subplots(len(resources), 1, figsize=(8, 2.2 * len(resources) + 0.8),
                             sharex=True, squeeze=False)
    for ax, res in zip(axes[:, 0], resources):
        for label, r in results.items():
            series = r.utilisation.get(res, ())
            if series:
                ax.step(np.arange(len(series) + 1), list(series) + [series[-1]], where="post", label=label)
        ax.set_ylabel(f"{res} used")
        ax.set_ylim(0, 1.05)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("slot")
    fig.suptitle("utilisation over time")
    paths.append(_save(fig, out / "utilisation.png", plt))
    return paths


def jct_axis_is_log(results: Mapping[str, SimulationResult]) -> bool:
    """Whether the JCT CDF needs a log axis: the JCTs (all positive) span more than 100x, as when
    one policy starves jobs and a linear axis would squash every other curve against zero."""
    every = np.array([v for r in results.values() for v in r.jct.values()], dtype=float)
    return bool(every.size and every.min() > 0 and every.max() / every.min() > 100)


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)
    return path
