"""Generic mixed packing-covering integer programming: LP relaxation, randomized rounding, repair, exact ILP.

Knows nothing about clusters; usable on its own (OR-Library instances, any MPC-IP).
"""
