"""What a solve returns: the validated schedule, the referee's report, and the certificate
(the strongest proven lower bound, the gap to it, the rounding guarantee, timings)."""
from __future__ import annotations

from dataclasses import dataclass, field

from placement.model.evaluate import Report
from placement.model.schedule import Schedule
from solvers.guarantee import Guarantee
from solvers.result import Status

__all__ = ["Certificate", "Solution"]


@dataclass(frozen=True)
class Certificate:
    """What a solve proves: the lower bound, the gap to it, the rounding guarantee."""

    solver: str
    status: Status                  # OPTIMAL, FEASIBLE, BOUND (lp-bound), or the solver's failure
    lower_bound: float | None = None    # a valid lower bound on the optimal weighted JCT
    bound_source: str | None = None     # "lp", "mip" or which column-LP argument gave it
    gap: float | None = None            # (objective - lower_bound) / objective
    guarantee: Guarantee | None = None  # rounding only
    timings: dict[str, float] = field(default_factory=dict)
    seed: int | None = None
    trials: int | None = None
    valid_trials: int | None = None
    model: str | None = None        # LP model used: per-machine or aggregated
    exact: bool | None = None       # exact solver: is the ILP exact for this instance
    message: str = ""

    def summary(self, verbose: bool = False) -> str:
        """The certificate as text; the rounding guarantee in three short lines, or in
        full with ``verbose``."""
        lines = [f"solver            {self.solver} ({self.status.value})"]
        if self.lower_bound is not None:
            model = f", {self.model} model" if self.model and self.bound_source == "lp" else ""
            lines.append(f"lower bound       {self.lower_bound:.6g} s ({self.bound_source}{model})")
        if self.gap is not None:
            lines.append(f"gap to bound      {self.gap:.2%}")
        if self.trials is not None:
            lines.append(f"rounding          {self.valid_trials} of {self.trials + 1} candidates through the slot rules "
                         f"({self.trials} random trials + the most likely), seed {self.seed}")
        if self.guarantee is not None:
            lines += ([f"guarantee         {self.guarantee.statement}"] if verbose
                      else _short_guarantee(self.guarantee))
        lines.append("timings           " + ", ".join(f"{k} {v:.3f}s" for k, v in self.timings.items()))
        if self.message:
            lines.append(f"note              {self.message}")
        return "\n".join(lines)


def _short_guarantee(g: Guarantee) -> list[str]:
    """What was rounded, the probability bound, what it means (``--verbose``: the full statement)."""
    objective = "" if g.objective_threshold is None else f", objective <= {g.objective_threshold:.6g}"
    return [f"guarantee         rounded the LP optimum ({g.lp_objective:.6g}): {g.rows_pack} packing and "
            f"{g.rows_cover} covering rows bounded, {g.rows_exact} choice rows kept exactly",
            f"                  P[a trial has packing <= {1 + g.delta_pack:.4g} b, covering >= "
            f"{1 - g.delta_cover:.4g} d{objective}] >= {g.p_success:.3g}; all {g.trials} trials miss <= "
            f"{g.p_all_fail:.3g}",
            "                  so some trial is near the LP before the slot rules, which then make it valid "
            "(--verbose: in full)"]


@dataclass(frozen=True)
class Solution:
    """A validated schedule (None for ``lp-bound``), its MODEL.md report and the certificate."""

    schedule: Schedule | None
    report: Report | None
    certificate: Certificate

    @property
    def objective(self) -> float | None:
        return None if self.report is None else self.report.objective
