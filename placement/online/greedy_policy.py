"""The project's greedy (placement.greedy) as an online policy: the floor baseline.

Each slot it runs exactly the slot builder of :func:`placement.realise.realise` with an
empty plan (rules c and d: SRPT/Smith order, keep a running job's tasks unless another
placement finishes it in fewer slots despite the restart, local first, trim on
completion) on the View's instance, with a :class:`~placement.progress.ProgressTracker`
rebuilt from what the scheduler reports. So when the reports are the model's own progress,
the online run makes the offline greedy's decisions slot for slot.
"""
from __future__ import annotations

from placement.online.policy import TaskDict, View
from placement.progress import ProgressTracker
# realise has no public one-slot entry point yet; _SlotBuilder is that entry point.
from placement.realise import _SlotBuilder

__all__ = ["GreedyPolicy", "tracker_from_view"]


def tracker_from_view(view: View) -> ProgressTracker:
    """The progress a slot builder needs, from the scheduler's reports: batches done and
    last slot's task sets; a job reported complete (but not yet finished) counts as done."""
    done = {j: s.done for j, s in view.jobs.items()}
    last = {j: dict(s.previous) for j, s in view.jobs.items() if s.previous}
    completed = {j: view.t - 1 for j, s in view.jobs.items()
                 if s.done >= s.job.work_batches * (1 - 1e-9)}
    return ProgressTracker(view.instance, done=done, last=last, completed=completed)


class GreedyPolicy:
    """Greedy slot by slot (module docstring); stateless, so checkpoints need nothing."""

    name = "greedy"

    def decide(self, view: View) -> dict[str, TaskDict]:
        builder = _SlotBuilder(view.instance, tracker_from_view(view), view.residual(), view.t)
        return builder.build({}, fill=True)
