"""The baseline policies the project's methods must beat, one module each.

Each is a :class:`placement.online.policy.Policy` (``OASiS`` also a
:class:`~placement.online.policy.CommittingPolicy`): ``decide(view)`` returns the tasks of
each job for slot ``view.t``, packed together into ``view.residual()`` so they are valid
together (MODEL.md rules 1, 3 and 4). Every class docstring states the rules it
implements and the paper it follows; the rules they share (queue order, stability under
restart costs) live in :mod:`placement.online.baselines._common`.
"""
from __future__ import annotations

from placement.online.baselines.drf import DRF
from placement.online.baselines.fifo import FIFO
from placement.online.baselines.gavel import Gavel
from placement.online.baselines.oasis import OASiS, OASiSAdmitAll, Offer, PriceTerms
from placement.online.baselines.optimus import Optimus
from placement.online.baselines.pollux import Pollux
from placement.online.baselines.tetris import Tetris
from placement.online.baselines.tiresias import Tiresias

__all__ = ["BASELINES", "DRF", "FIFO", "Gavel", "OASiS", "OASiSAdmitAll", "Offer", "Optimus", "Pollux",
           "PriceTerms", "Tetris", "Tiresias"]

#: name -> class, for reports and the CLI (each class built with its defaults).
#: ``oasis-admit-all`` is OASiS' pricing without its rejections, for a fair JCT comparison.
BASELINES = {"fifo": FIFO, "drf": DRF, "tetris": Tetris, "tiresias": Tiresias,
             "optimus": Optimus, "oasis": OASiS, "oasis-admit-all": OASiSAdmitAll, "gavel": Gavel,
             "pollux": Pollux}
