"""Pictures of a schedule: per-machine allocations over slots (one colour per job; workers
solid, parameter servers hatched) and utilisation per resource. Needs matplotlib
(``pip install "placement[plot]"``)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from placement.model.instance import Instance
from placement.outputs import Staged
from placement.model.schedule import Schedule

#: the picture formats ``plot_schedule`` writes, chosen by the file's suffix
FORMATS = ("png", "svg", "pdf", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")
#: the widest figure, in inches (a long horizon gets narrower slots, not a huge image)
MAX_WIDTH = 40.0
# a machine's row, from its top: the resource band (stacked shares), then the PS band
_TOP, _BAND, _PS = -0.4, 0.62, 0.14


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def plot_format(path: str | os.PathLike) -> str:
    """The format of a picture file, from its suffix; ValueError for an unknown one and
    :class:`PlotUnavailable` without matplotlib — so a command checks before any work."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        got = f"'.{suffix}'" if suffix else "no suffix"
        raise ValueError(f"{path}: a picture needs one of the suffixes {', '.join('.' + f for f in FORMATS)} "
                         f"(got {got})")
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotUnavailable('plotting needs matplotlib: pip install "placement[plot]"')
    return suffix


def plot_schedule(instance: Instance, schedule: Schedule, path: str | os.PathLike,
                  resource: str | None = None) -> Path:
    """Write the picture (format from the suffix, :data:`FORMATS`) atomically: top, each
    machine's ``resource`` (default: the first resource with any demand, usually gpu)
    stacked by job per slot, with a band below each machine marking its PSs; bottom,
    utilisation of every resource."""
    fmt = plot_format(path)
    with Staged() as staged:
        write_plot(instance, schedule, staged.path(path), fmt, resource)
        staged.commit()
    return Path(path)


def write_plot(instance: Instance, schedule: Schedule, target: str | os.PathLike, fmt: str,
               resource: str | None = None) -> None:
    """Draw and save to ``target`` as ``fmt`` (not atomic: callers stage ``target``)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable('plotting needs matplotlib: pip install "placement[plot]"') from exc
    fig = _draw(plt, instance, schedule, resource)
    try:
        fig.savefig(target, dpi=110, format=fmt)
    finally:
        plt.close(fig)


def _draw(plt: Any, instance: Instance, schedule: Schedule, resource: str | None) -> Any:
    machines = [m.id for m in instance.topology.machines]
    res = resource or next((r for r in instance.resources
                            if any(j.worker.get(r, 0) for j in instance.jobs)), instance.resources[0])
    T = instance.horizon
    jobs = {j.id: j for j in instance.jobs}
    row = {m: i for i, m in enumerate(machines)}
    cap = np.array([m.capacity.get(res, 0) for m in instance.topology.machines], dtype=float)
    colours = plt.get_cmap("tab20")
    colour = {j.id: colours(k % 20) for k, j in enumerate(instance.jobs)}
    fig_h = 2.5 + 0.35 * len(machines)
    fig, (ax, ax_u) = plt.subplots(2, 1, figsize=(min(MAX_WIDTH, max(8, 0.4 * T + 3)), fig_h + 2.5),
                                   gridspec_kw={"height_ratios": [fig_h, 2.5]})
    filled = np.zeros((T, len(machines)))
    used_by_res = np.zeros((T, len(instance.resources)))
    bars: dict[tuple[str, bool], list[tuple[float, float, float]]] = {}   # (job, ps?) -> (slot, top, height)
    ps_hosts: dict[tuple[int, int], list[str]] = {}                       # (slot, machine) -> jobs with PSs
    for t, a in schedule.rows():
        if a.job not in jobs or a.machine not in row or not 0 <= t < T:
            continue
        job, h = jobs[a.job], row[a.machine]
        for is_ps, amount in ((False, job.worker.get(res, 0) * a.workers), (True, job.ps.get(res, 0) * a.ps)):
            if amount > 0 and cap[h] > 0:
                share = min(amount / cap[h], max(0.0, 1 - filled[t, h]))
                bars.setdefault((a.job, is_ps), []).append((t, h + _TOP + _BAND * filled[t, h], _BAND * share))
                filled[t, h] += share
        if a.ps:
            ps_hosts.setdefault((t, h), []).append(a.job)
        for k, r in enumerate(instance.resources):
            used_by_res[t, k] += job.worker.get(r, 0) * a.workers + job.ps.get(r, 0) * a.ps
    for (job_id, is_ps), cells in bars.items():
        t, top, height = np.array(cells).T
        ax.bar(t, height, width=1.0, bottom=top, align="edge", linewidth=0.3 if not is_ps else 0.6,
               color="white" if is_ps else colour[job_id], edgecolor=colour[job_id] if is_ps else "white",
               hatch="////" if is_ps else None)
    band = _TOP + _BAND + 0.02
    marks: dict[str, list[tuple[float, float, float]]] = {}               # job -> (left, width, top)
    for (t, h), hosted in ps_hosts.items():
        for k, job_id in enumerate(hosted):
            marks.setdefault(job_id, []).append((t + k / len(hosted), 1.0 / len(hosted), h + band))
    for job_id, cells in marks.items():
        left, width, top = np.array(cells).T
        ax.bar(left, _PS, width=width, bottom=top, align="edge", color="white",
               edgecolor=colour[job_id], hatch="////", linewidth=0.6)
    ax.set_yticks(range(len(machines)), machines, fontsize=7)
    ax.set_xlim(0, T)
    ax.set_ylim(len(machines) - 0.5, -0.5)
    ax.set_xlabel("slot")
    ax.set_title(f"{instance.name}: {res} per machine and slot (bar height = share of capacity; "
                 f"hatched band below = PSs on the machine)", fontsize=9)
    shown = list(jobs)[:20]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[j]) for j in shown]
    handles += [plt.Rectangle((0, 0), 1, 1, facecolor="grey", edgecolor="white"),
                plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="grey", hatch="////")]
    labels = shown + ["workers", "parameter servers"]
    ax.legend(handles=handles, labels=labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, title="jobs")
    totals = np.array([sum(m.capacity.get(r, 0) for m in instance.topology.machines)
                       for r in instance.resources], dtype=float)
    for k, r in enumerate(instance.resources):
        if totals[k] > 0 and T > 0:
            ax_u.step(np.arange(T + 1), np.append(used_by_res[:, k] / totals[k], used_by_res[-1, k] / totals[k]),
                      where="post", label=r)
    ax_u.set_xlim(0, max(T, 1))
    ax_u.set_ylim(0, 1.05)
    ax_u.set_ylabel("utilisation")
    ax_u.set_xlabel("slot")
    ax_u.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    fig.tight_layout()
    return fig
