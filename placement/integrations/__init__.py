"""Bridges to other people's schedulers and simulators (the peer arena).

- :mod:`placement.integrations.linear_speed`: a measured speed written in MODEL.md's
  linear rate (the one rule the adapter and the workload converter share);
- :mod:`placement.integrations.pollux`: our online policies as policies of the Pollux
  paper's simulator (imported from the user's checkout, never copied).
"""
