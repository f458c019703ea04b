"""The placement models as mixed packing-covering programs (docs/formulation.md).

Each ``formulate_*`` returns ``(Problem, decoder)``: the model for ``solvers`` and its
inverse, an object with ``decode(x) -> Intent`` (the :class:`Decoder` protocol).

- :mod:`~placement.formulation.per_machine`: one worker/PS count per machine; its LP value
  bounds the weighted JCT from below (the offline default);
- :mod:`~placement.formulation.aggregated`: one count per domain; smaller, same kind of
  bound (online windows, large clusters);
- :mod:`~placement.formulation.configuration`: one choice per job-slot among (worker
  count, domain) configurations with their own rates, so the LP sizes jobs when speedups
  are concave; same kind of bound;
- :mod:`~placement.formulation.time_indexed`: the time-indexed ILP of MODEL.md (the exact solver's model).

Shared blocks: :mod:`~placement.formulation.rows` (sparse row blocks),
:mod:`~placement.formulation.domains` (where a job may run),
:mod:`~placement.formulation.tasks` (task variables, capacity/link/shape rows, decoding) and
:mod:`~placement.formulation.progress_block` (progress variables and the bound's objective).
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from placement.formulation.aggregated import formulate_aggregated
from placement.formulation.configuration import formulate_configuration
from placement.formulation.per_machine import formulate_per_machine
from placement.model.intent import Intent

__all__ = ["Decoder", "FORMULATIONS", "formulate_aggregated", "formulate_configuration", "formulate_per_machine"]


class Decoder(Protocol):
    """The inverse of a formulation: a solution vector back to what it intends. A model that can
    be exact (the time-indexed one) also says whether it is for this instance (``exact``, with a
    ``message``) and encodes a schedule as a MIP start (``encode``)."""

    def decode(self, x: np.ndarray) -> Intent:
        ...


#: the LP models by the names ``placement solve --model`` takes -> their formulate functions (the
#: time-indexed ILP, :func:`placement.formulation.time_indexed.formulate_time_indexed`, is the exact
#: solver's alone and is imported from its module)
FORMULATIONS = {"per-machine": formulate_per_machine, "aggregated": formulate_aggregated,
                "configuration": formulate_configuration}
