"""placement: worker/PS placement of distributed ML training jobs over a cluster topology.

The public face, enough for the README's examples::

    from placement import Instance, Schedule, solve, validate, score      # offline
    from placement import OnlineScheduler, make_policy                    # online, slot by slot

Everything else lives in the packages (README, "Packages"; docs/architecture.md).
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

#: each public name and the module it lives in; imported on first use (PEP 562), so that
#: ``python -m placement.cli`` reaches the command's own Ctrl-C guard before any heavy import
#: (a Ctrl-C while it starts up then gets its one line and exit code 130, not a traceback)
_PUBLIC = {
    "Report": "placement.model.evaluate", "Violation": "placement.model.evaluate",
    "evaluate": "placement.model.evaluate", "score": "placement.model.evaluate",
    "validate": "placement.model.evaluate",
    "Instance": "placement.model.instance", "Job": "placement.model.instance",
    "Schedule": "placement.model.schedule", "Topology": "placement.model.topology",
    "Certificate": "placement.offline.solve", "Solution": "placement.offline.solve",
    "SolveError": "placement.offline.solve", "solve": "placement.offline.solve",
    "POLICIES": "placement.online.registry", "make_policy": "placement.online.registry",
    "OnlineScheduler": "placement.online.scheduler",
}

__all__ = ["Certificate", "Instance", "Job", "OnlineScheduler", "POLICIES", "Report", "Schedule", "Solution",
           "SolveError", "Topology", "Violation", "__version__", "evaluate", "make_policy", "score", "solve",
           "validate"]

if TYPE_CHECKING:  # what editors and type checkers see; at run time, __getattr__ below
    from placement.model.evaluate import Report, Violation, evaluate, score, validate
    from placement.model.instance import Instance, Job
    from placement.model.schedule import Schedule
    from placement.model.topology import Topology
    from placement.offline.solve import Certificate, Solution, SolveError, solve
    from placement.online.registry import POLICIES, make_policy
    from placement.online.scheduler import OnlineScheduler


def __getattr__(name: str) -> object:
    """A public name, imported from its module the first time it is asked for."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'placement' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
