"""Bridges to other people's schedulers and simulators (the peer arena).

- :mod:`placement.integrations.measured_speed`: a measured speed (a rate per placement)
  written as a speed table, MODEL.md 8 (the one rule the adapter and the workload
  converter share);
- :mod:`placement.integrations.linear_speed`: the linear-rate approximation used before
  tables, kept as the comparison ``benchmarks/linear_speed_error.py`` measures;
- :mod:`placement.integrations.pollux_adapter`: our online policies as policies of the
  Pollux paper's simulator (imported from the user's checkout, never copied);
- :mod:`placement.integrations.pollux`: the runner that plays one workload there with
  one policy (``python -m placement.integrations.pollux``);
- :mod:`placement.integrations.sia`: the runner that plays one workload in the Sia paper's
  simulator with one of its own policies (``python -m placement.integrations.sia``; the
  peers of the Sia arena, docs/sia_arena.md).
"""
