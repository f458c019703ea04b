"""Worker/PS placement as a mixed packing-covering integer program whose LP relaxation
bounds MODEL.md's weighted total JCT from below (docs/formulation.md has the proof).

``formulate_per_machine(instance)`` returns ``(Problem, TaskVariables)``: the model and its decoder
(``decode(x)`` gives the Intent of a vector). On top
of the shared task variables of :mod:`placement.formulation.tasks` it adds, per job j:

- p[j,t] in [0, r_j] for each slot t >= a_j: the fraction of j's work credited to slot t,
  with the progress row  p[j,t] <= sum_{v,h} w[j,t,v,h] * speed / B_j;
- q[j] in [0, 1]: the fraction left after the window;
- the covering row  sum_t p[j,t] + q[j] >= 1 - 1e-9 (MODEL.md's completion tolerance);
- objective  sum_j w_j (Delta * sum_t (t+1) p[j,t] + K_j q[j]) + sum_j w_j Delta (D_j - a_j).
"""
from __future__ import annotations

import numpy as np

from placement.formulation.progress_block import ProgressBlock
from placement.formulation.rows import Rows
from placement.formulation.tasks import TaskVariables
from placement.model.instance import Instance
from solvers.problem import Problem


def formulate_per_machine(instance: Instance, *, start: int = 0, end: int | None = None,
              remaining: dict[str, float] | None = None,
              domains: dict[str, set[str]] | None = None) -> tuple[Problem, TaskVariables]:
    """The placement MPC-IP over slots ``start..end-1`` (default: the whole horizon).

    ``remaining`` maps job id -> batches still to do (default: all ``work_batches``); jobs
    with nothing left, or arriving after the window, are left out. ``domains`` optionally
    limits a job (by id) to the named domains (machines or switches): a smaller model for
    online use, whose value is then no longer a lower bound."""
    progress = ProgressBlock(instance, start=start, end=end, remaining=remaining)
    jobs = progress.jobs
    allowed = None if domains is None else {
        j: set(domains[instance.jobs[j].id]) for j in jobs if instance.jobs[j].id in domains}
    core = TaskVariables(instance, jobs, start, progress.end, allowed)
    progress.place(core.n)
    n = progress.n
    cost = np.zeros(n)
    offset = progress.cost(cost)
    upper = np.concatenate([core.upper, progress.upper()])
    integer = np.concatenate([np.ones(core.n, dtype=bool), np.zeros(n - core.n, dtype=bool)])
    packing, pack_names = core.packing()
    A, _, b = packing.matrix(n)
    C, d = progress.work_rows()
    general = Rows()
    core.shape_rows(general)
    w = core.w_idx
    progress.progress_rows(general, w, core.job[w], core.slot[w], core.speed[w])
    G, g_lo, g_hi = general.matrix(n)

    problem = Problem(c=cost, sense="min", A=A, b=b, C=C, d=d, G=G, g_lo=g_lo, g_hi=g_hi,
                      upper=upper, integer=integer, groups=core.choice_groups(), offset=offset,
                      name=f"placement:{instance.name}", pack_names=pack_names)
    return problem, core
