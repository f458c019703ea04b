"""Pictures of a schedule: per-machine allocations over slots (one colour per job) and
utilisation per resource. Needs matplotlib (``pip install "placement[plot]"``)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from placement.instance import Instance
from placement.schedule import Schedule


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def plot_schedule(instance: Instance, schedule: Schedule, path: str | os.PathLike,
                  resource: str | None = None) -> Path:
    """Write a PNG: top, each machine's ``resource`` (default: the first resource with any
    demand, usually gpu) stacked by job per slot; bottom, utilisation of every resource."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotUnavailable('plotting needs matplotlib: pip install "placement[plot]"') from exc
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
    fig, (ax, ax_u) = plt.subplots(2, 1, figsize=(max(8, 0.4 * T + 3), fig_h + 2.5),
                                   gridspec_kw={"height_ratios": [fig_h, 2.5]})
    filled = np.zeros((T, len(machines)))
    used_by_res = np.zeros((T, len(instance.resources)))
    for t, a in schedule.rows():
        if a.job not in jobs or a.machine not in row or not 0 <= t < T:
            continue
        job = jobs[a.job]
        amount = job.worker.get(res, 0) * a.workers + job.ps.get(res, 0) * a.ps
        h = row[a.machine]
        if amount > 0 and cap[h] > 0:
            share = amount / cap[h]
            centre = h - 0.4 + 0.8 * (filled[t, h] + share / 2)
            ax.barh(centre, 1, left=t, height=0.8 * share, align="center",
                    color=colour[a.job], edgecolor="white", linewidth=0.3)
            filled[t, h] += share
        for k, r in enumerate(instance.resources):
            used_by_res[t, k] += job.worker.get(r, 0) * a.workers + job.ps.get(r, 0) * a.ps
    ax.set_yticks(range(len(machines)), machines, fontsize=7)
    ax.set_xlim(0, T)
    ax.set_ylim(-0.6, len(machines) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel("slot")
    ax.set_title(f"{instance.name}: {res} per machine and slot (bar height = share of capacity)")
    shown = list(jobs)[:20]
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colour[j]) for j in shown], labels=shown,
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, title="jobs")
    totals = np.array([sum(m.capacity.get(r, 0) for m in instance.topology.machines)
                       for r in instance.resources], dtype=float)
    for k, r in enumerate(instance.resources):
        if totals[k] > 0:
            ax_u.step(np.arange(T + 1), np.append(used_by_res[:, k] / totals[k], used_by_res[-1, k] / totals[k]),
                      where="post", label=r)
    ax_u.set_xlim(0, T)
    ax_u.set_ylim(0, 1.05)
    ax_u.set_ylabel("utilisation")
    ax_u.set_xlabel("slot")
    ax_u.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix or '.png'}")
    fig.savefig(tmp, dpi=110, format=(path.suffix.lstrip(".") or "png"))
    plt.close(fig)
    os.replace(tmp, path)
    return path
