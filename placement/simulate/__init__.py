"""Trace-driven simulation: a job stream played slot by slot through an
:class:`~placement.online.scheduler.OnlineScheduler`, as a cluster manager would.

- :mod:`placement.simulate.loop`: :func:`simulate` and :func:`default_horizon`, the slot
  loop and the cluster's truth (its docstring says what a run does and checks);
- :mod:`placement.simulate.events`: machine failures, repairs and additions, restarts;
- :mod:`placement.simulate.result`: :class:`SimulationResult`, what a run measured;
- :mod:`placement.simulate.plots`: JCT CDF and utilisation pictures of several runs.
"""
from placement.simulate.events import (AddMachine, Event, RemoveMachine, RepairMachine, Restart,
                                       parse_event)
from placement.simulate.loop import default_horizon, simulate
from placement.simulate.plots import jct_axis_is_log, plot_simulation
from placement.simulate.result import SimulationResult

__all__ = ["AddMachine", "Event", "RemoveMachine", "RepairMachine", "Restart", "SimulationResult",
           "default_horizon", "jct_axis_is_log", "parse_event", "plot_simulation", "simulate"]
