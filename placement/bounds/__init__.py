"""Proven lower bounds on the optimal weighted JCT, and the plan one of them suggests.

``column_bound`` (whole-job schedules, a Lagrangian bound every round), ``pooled_bound``
(the whole horizon with the cluster as one machine: counts queueing, for online runs),
``column_plan`` (price-and-branch: one column per job, handed to the slot rules) and
``strongest`` (the one place that picks the strongest bound at hand).
"""
