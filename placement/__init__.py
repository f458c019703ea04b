"""placement: worker/PS placement of distributed ML training jobs over a cluster topology.

The public face, enough for the README's examples::

    from placement import Instance, Schedule, solve, validate, score      # offline
    from placement import OnlineScheduler, make_policy                    # online, slot by slot

Everything else lives in the packages (README, "Packages"; docs/architecture.md).
"""

__version__ = "0.1.0"

from placement.model.evaluate import Report, Violation, evaluate, score, validate  # noqa: E402
from placement.model.instance import Instance, Job  # noqa: E402
from placement.model.schedule import Schedule  # noqa: E402
from placement.model.topology import Topology  # noqa: E402
from placement.offline.solve import Certificate, Solution, SolveError, solve  # noqa: E402
from placement.online.registry import POLICIES, make_policy  # noqa: E402
from placement.online.scheduler import OnlineScheduler  # noqa: E402

__all__ = ["Certificate", "Instance", "Job", "OnlineScheduler", "POLICIES", "Report", "Schedule", "Solution",
           "SolveError", "Topology", "Violation", "__version__", "evaluate", "make_policy", "score", "solve",
           "validate"]
