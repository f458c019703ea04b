"""The project's greedy (placement.offline.greedy) as an online policy: the floor baseline.

Each slot it runs exactly the slot builder of :func:`placement.slots.rules.build_schedule` with an
empty plan (rules c and d: SRPT/Smith order, keep a running job's tasks unless another
placement finishes it in fewer slots despite the restart, local first, trim on
completion) on the View's instance, with a :class:`~placement.model.progress.ProgressTracker`
rebuilt from what the scheduler reports. So when the reports are the model's own progress,
the online run makes the offline greedy's decisions slot for slot. GPU types (MODEL.md 8)
are the slot rules': a job's workers on one type, the one that finishes it soonest.
"""
from __future__ import annotations

from placement.online.policy import TaskDict, View
from placement.slots.rules import decide_slot

__all__ = ["GreedyPolicy"]


class GreedyPolicy:
    """Greedy slot by slot (module docstring); stateless, so checkpoints need nothing."""

    name = "greedy"

    def decide(self, view: View) -> dict[str, TaskDict]:
        return decide_slot(view.instance, view.tracker(), view.t, fill=True, trim=view.lengths_known)
