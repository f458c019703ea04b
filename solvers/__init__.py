"""Generic mixed packing-covering integer programming: LP relaxation, randomized rounding, repair, exact ILP.

Knows nothing about clusters; usable on its own (OR-Library instances, any MPC-IP).
Solver libraries are imported lazily inside their adapters, so importing this package never
fails because a backend is missing.
"""

from solvers.check import RowViolation, is_feasible, violations
from solvers.mip import EXACT_BACKENDS, solve_mip
from solvers.files import write_lp, write_mps
from solvers.lp import LP_BACKENDS, solve_lp
from solvers.problem import ChoiceGroup, Option, Problem, ProblemError
from solvers.result import Result, Status

__all__ = [
    "ChoiceGroup", "Option", "Problem", "ProblemError", "Result", "Status", "RowViolation",
    "violations", "is_feasible", "solve_lp", "solve_mip", "LP_BACKENDS", "EXACT_BACKENDS", "write_mps", "write_lp",
]
