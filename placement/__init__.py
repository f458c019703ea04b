"""placement: worker/PS placement of distributed ML training jobs over a cluster topology.

The public face, enough for the README's examples::

    from placement import Instance, Schedule, solve, validate, score      # offline
    from placement import OnlineScheduler, make_policy                    # online, slot by slot

Everything else lives in the packages (README, "Packages"; docs/architecture.md).
"""

__version__ = "0.1.0"

import importlib

#: each public name and the module it lives in; imported on first use (PEP 562), so that
#: ``import placement.cli`` starts light and a Ctrl-C while the command starts up meets its
#: handler (placement.cli), not a half-imported NumPy
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

__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'placement' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
