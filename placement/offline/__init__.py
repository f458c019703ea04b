"""Offline solving of a whole instance: ``solve`` (rounding, greedy, exact, lp-bound; one
entry point, one result type), the ``certificate`` it returns, the ``greedy`` chain, and the
exact time-indexed ILP (``ilp``)."""
