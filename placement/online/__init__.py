"""Online scheduling: jobs arrive over time; a policy decides each slot (or at arrival).

``from placement.online import OnlineScheduler, make_policy`` is the library call a cluster
manager makes: submit jobs, report progress, finish them, and ``step(t)`` each slot.
"""
from placement.online.registry import POLICIES, make_policy
from placement.online.scheduler import OnlineScheduler

__all__ = ["OnlineScheduler", "POLICIES", "make_policy"]
