"""The model of MODEL.md: what an instance, a schedule and a score are.

The cluster tree (``topology``), its builders (``clusters``, ``cluster_spec``), jobs and
instances (``instance``, with ``speed`` tables), schedules and intents (``schedule``,
``intent``), progress one slot at a time (``progress``), the referee (``evaluate``: validate
and score, formulation-blind), and the input discipline every file goes through
(``strict_json``, ``limits``). Nothing here knows a formulation or a solver.
"""
