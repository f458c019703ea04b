"""What a simulation measured: :class:`SimulationResult`, its JSON form and its summary.

Kept apart from the loop (:mod:`placement.simulate.loop`) because the command line, the
plots and the benchmarks read results without running a simulation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from placement.model.evaluate import Report, Violation
from placement.model.instance import Instance
from placement.model.schedule import Schedule
from placement.online.knowledge import information_label
from placement.simulate.events import Event

__all__ = ["SimulationResult"]


@dataclass(frozen=True)
class SimulationResult:
    """What a simulation did and measured. JCTs, makespan and ``unfinished`` are the
    simulated truth; ``report`` is the MODEL.md score of the executed schedule (equal to
    the truth without progress noise)."""

    policy: str
    mode: str
    slots: int                                  # slots simulated = the schedule's horizon
    horizon: int                                # the cap the run was allowed
    jct: dict[str, float]                       # seconds per job (MODEL.md charge if unfinished)
    unfinished: tuple[str, ...]
    weighted_jct: float
    average_jct: float
    p95_jct: float
    makespan: float
    reconfigurations: int
    utilisation: dict[str, tuple[float, ...]]   # per resource, per slot: used / capacity then
    decision_seconds: tuple[float, ...]         # wall time of each step(t)
    dropped: int                                # policy decisions the scheduler refused
    progress_noise: float
    seed: int
    events: tuple[Event, ...]
    instance: Instance
    schedule: Schedule
    report: Report
    violations: tuple[Violation, ...]
    # Admission control (OASiS-like policies, which expose ``rejected`` and ``utility``):
    information: str = "oracle"                 # what the scheduler was told of job lengths
    estimate_error: float = 0.0                 # sigma of the users' lognormal estimate error
    rejected: tuple[str, ...] | None = None     # jobs the policy rejected; None: it never rejects
    utility: dict[str, float] | None = None     # f_j(completion slot) of each admitted job that completed

    @property
    def admitted(self) -> tuple[str, ...]:
        """Jobs the policy did not reject (every job for a policy without admission control)."""
        out = set(self.rejected or ())
        return tuple(j for j in self.jct if j not in out)

    @property
    def acceptance_rate(self) -> float | None:
        """Admitted / submitted jobs; None for a policy without admission control."""
        if self.rejected is None:
            return None
        return len(self.admitted) / len(self.jct) if self.jct else 1.0

    @property
    def admitted_average_jct(self) -> float | None:
        """Mean JCT over the admitted jobs only (an admitted job still unfinished at the end
        carries MODEL.md's charge); None without admission control or with none admitted.
        ``average_jct`` is over every job, a rejected one charged the whole run."""
        if self.rejected is None or not self.admitted:
            return None
        return float(np.mean([self.jct[j] for j in self.admitted]))

    @property
    def admitted_utility(self) -> float | None:
        """The paper's objective for OASiS: sum of f_j(completion) over the admitted jobs
        that completed (the policy's own utility); None if the policy has none."""
        return None if self.utility is None else float(sum(self.utility.values()))

    @property
    def decision_time(self) -> dict[str, float]:
        """Median, 95th percentile and maximum of the per-slot decision time (seconds)."""
        d = np.array(self.decision_seconds or (0.0,))
        return {"median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
                "max": float(d.max())}

    def to_dict(self, *, schedule: bool = True) -> dict[str, Any]:
        """JSON-ready: metrics, MODEL.md report, violations and (optionally) the schedule."""
        out = {"policy": self.policy, "mode": self.mode, "instance": self.instance.name,
               "slots": self.slots, "horizon": self.horizon, "jobs": len(self.jct),
               "jct": dict(self.jct), "unfinished": list(self.unfinished),
               "weighted_jct": self.weighted_jct, "average_jct": self.average_jct,
               "p95_jct": self.p95_jct, "makespan": self.makespan,
               "reconfigurations": self.reconfigurations,
               "utilisation": {r: list(v) for r, v in self.utilisation.items()},
               "decision_time": self.decision_time,
               "decision_seconds": list(self.decision_seconds), "dropped": self.dropped,
               "progress_noise": self.progress_noise, "seed": self.seed,
               "information": self.information, "estimate_error": self.estimate_error,
               "events": [str(e) for e in self.events], "report": self.report.to_dict(),
               "violations": [v.to_dict() for v in self.violations],
               "rejected": None if self.rejected is None else list(self.rejected),
               "acceptance_rate": self.acceptance_rate,
               "admitted_average_jct": self.admitted_average_jct,
               "admitted_utility": self.admitted_utility,
               "utility": None if self.utility is None else dict(self.utility)}
        if schedule:
            out["schedule"] = self.schedule.to_dict()
        return out

    def summary(self) -> str:
        d = self.decision_time
        charged = (f", {len(self.rejected)} rejected jobs charged the whole run"
                   if self.rejected else "")
        admission = [] if self.rejected is None else [
            f"admitted          {len(self.admitted)} of {len(self.jct)} jobs "
            f"(acceptance rate {self.acceptance_rate:.3f}); their average JCT "
            f"{_g(self.admitted_average_jct)} s; total admitted utility {_g(self.admitted_utility)}"]
        return "\n".join([
            f"policy            {self.policy} ({self.mode}; information "
            f"{information_label(self.information, self.estimate_error)})",
            f"jobs              {len(self.jct)} ({len(self.unfinished)} unfinished) in {self.slots} slots",
            f"average JCT       {self.average_jct:.6g} s (all jobs{charged}; p95 {self.p95_jct:.6g} s)",
            *admission,
            f"weighted JCT      {self.weighted_jct:.6g} s; MODEL.md score of the executed "
            f"schedule {self.report.objective:.6g} s",
            f"makespan          {self.makespan:.6g} s",
            f"reconfigurations  {self.reconfigurations}; dropped decisions {self.dropped}",
            f"decision time     median {d['median'] * 1e3:.3g} ms, p95 {d['p95'] * 1e3:.3g} ms, "
            f"max {d['max'] * 1e3:.3g} ms",
            f"violations        {len(self.violations)}"])


def _g(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"

