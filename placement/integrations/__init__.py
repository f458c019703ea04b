"""Bridges to other people's schedulers and simulators (the peer arena).

- :mod:`placement.integrations.linear_speed`: a measured speed written in MODEL.md's
  linear rate (the one rule the adapter and the workload converter share);
- :mod:`placement.integrations.pollux_adapter`: our online policies as policies of the
  Pollux paper's simulator (imported from the user's checkout, never copied);
- :mod:`placement.integrations.pollux`: the runner that plays one workload there with
  one policy (``python -m placement.integrations.pollux``).
"""
