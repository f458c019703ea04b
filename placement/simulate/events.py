"""Cluster events of a simulation: a machine fails, is repaired or joins, or the cluster
manager restarts from its checkpoint, each at the start of a slot.

Kept apart from the loop (:mod:`placement.simulate.loop`) because they are plain values that
the command line parses (:func:`parse_event`) and a result records, without running anything.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from placement.model.topology import Machine

__all__ = ["AddMachine", "Event", "MACHINE_EVENTS", "RemoveMachine", "RepairMachine", "Restart",
           "parse_event"]


@dataclass(frozen=True)
class RemoveMachine:
    """Machine ``machine`` fails at the start of slot ``t``."""

    t: int
    machine: str

    def __str__(self) -> str:
        return f"{self.t}:remove:{self.machine}"


@dataclass(frozen=True)
class RepairMachine:
    """A machine removed earlier comes back at slot ``t``, as it was (same switch, link)."""

    t: int
    machine: str

    def __str__(self) -> str:
        return f"{self.t}:repair:{self.machine}"


@dataclass(frozen=True)
class AddMachine:
    """A new machine joins below switch ``parent`` with a ``gbps`` link at slot ``t``."""

    t: int
    machine: Machine
    parent: str
    gbps: float

    def __str__(self) -> str:
        return f"{self.t}:add:{self.machine.id}:{self.parent}:{self.gbps:g}"


@dataclass(frozen=True)
class Restart:
    """The cluster manager restarts at slot ``t``: the scheduler resumes from its JSON state."""

    t: int

    def __str__(self) -> str:
        return f"{self.t}:restart"


Event = Union[RemoveMachine, RepairMachine, AddMachine, Restart]
#: The events that change the cluster (all but a restart).
MACHINE_EVENTS = (RemoveMachine, RepairMachine, AddMachine)


def parse_event(text: str) -> Event:
    """``T:remove:MACHINE``, ``T:repair:MACHINE`` or ``T:restart`` (the CLI's form)."""
    parts = text.split(":")
    kinds = {"remove": RemoveMachine, "repair": RepairMachine}
    if len(parts) >= 2 and parts[0].isdigit():
        t = int(parts[0])
        if len(parts) == 3 and parts[1] in kinds and parts[2]:
            return kinds[parts[1]](t, parts[2])
        if len(parts) == 2 and parts[1] == "restart":
            return Restart(t)
    raise ValueError(f"event {text!r}: expected T:remove:MACHINE, T:repair:MACHINE or T:restart "
                     "(T a slot number)")

