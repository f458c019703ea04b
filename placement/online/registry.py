"""Policies by name, for the CLI and the benchmarks."""
from __future__ import annotations

from placement.online.baselines import BASELINES
from placement.online.greedy_policy import GreedyPolicy
from placement.online.lp_policy import LPAggregatedPolicy, LPNoSharePolicy, LPRoundingPolicy
from placement.online.policy import Policy

#: name -> class; each built with its defaults. ``gavel`` reads each job's speed per GPU type
#: (its throughputs, as the Sia arena's Gavel reads them from the traces) and no job length,
#: so it decides the same at every information level.
POLICIES: dict[str, type] = {"lp-rounding": LPRoundingPolicy, "lp-aggregated": LPAggregatedPolicy,
                              "lp-no-share": LPNoSharePolicy,
                              "greedy": GreedyPolicy, **BASELINES}


def make_policy(name: str) -> Policy:
    """A fresh policy by name; ValueError naming the choices otherwise."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}")
    return POLICIES[name]()
