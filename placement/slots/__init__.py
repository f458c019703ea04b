"""The slot rules: an intent (what a solver wants per slot and job) made into a valid
schedule, slot by slot, re-using the capacity the intent leaves free (``rules``).

One slot's free capacity is a :class:`~placement.slots.residual.Residual` (``residual``),
with the tree tables its cluster shares (``residual_tables``), the search for spread
placements (``spread_search``) and the per-machine room arithmetic (``room``).
"""
