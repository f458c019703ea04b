"""An intent: the allocations a solver *intends* per (slot, job), before repair.

Decoders of LP/rounded solutions and exact models produce intents; the slot rules
(:mod:`placement.slots.rules`) turn an intent into a schedule that keeps every MODEL.md
rule (capacity, links, shape, life).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from placement.model.schedule import Allocation, Schedule


@dataclass(frozen=True)
class JobIntent:
    """What a solver intends for one job in one slot: the domain (a machine: local; a
    switch: spread below it) and the (workers, ps) per machine."""

    domain: str
    tasks: dict[str, tuple[int, int]]

    @property
    def workers(self) -> int:
        return sum(w for w, _ in self.tasks.values())

    @property
    def ps(self) -> int:
        return sum(s for _, s in self.tasks.values())


@dataclass
class Intent:
    """``slots[t][job_id]`` is the intended placement of that job in slot t."""

    horizon: int
    slots: list[dict[str, JobIntent]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.slots:
            self.slots = [{} for _ in range(self.horizon)]

    def to_schedule(self, instance_name: str | None = None, **extra) -> Schedule:
        """The intent as it stands (no repair): for exact models whose intent is already valid."""
        return Schedule.from_allocations(
            {t: [Allocation(j, h, w, s) for j, p in sorted(slot.items())
                 for h, (w, s) in sorted(p.tasks.items()) if w or s]
             for t, slot in enumerate(self.slots)}, instance=instance_name, **extra)
