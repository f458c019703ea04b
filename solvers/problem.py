"""The mixed packing-covering integer program every solver in this package accepts.

Standard form::

    min/max  c.x + offset
    s.t.     A x <= b            packing rows   (A >= 0, b >= 0)
             C x >= d            covering rows  (C >= 0, d >= 0)
             g_lo <= G x <= g_hi general rows   (any sign)
             0 <= x <= upper,  x_i integer where integer[i]
             choice groups (see :class:`ChoiceGroup`)

The packing/covering sign conditions are validated because the rounding
guarantees depend on them; anything else goes into the general rows.

Empty rows: an all-zero packing row (``0 <= b``) or an all-zero covering row
with ``d == 0`` is always satisfied and is *kept*, so row indices, names and
duals stay aligned with the caller's data.  An all-zero covering row with
``d > 0`` (or an all-zero general row whose range excludes 0) can never be
satisfied and is almost always a modelling bug, so it raises
:class:`ProblemError` instead of surfacing later as "infeasible".

Choice groups come as :class:`ChoiceGroup` objects or, for models with many options, as one
:class:`FlatGroups` of arrays (no Python object per option); either way ``Problem.groups``
gives the :class:`ChoiceGroup` tuple and ``Problem.flat_groups`` the arrays.

The argument conversions live in :mod:`solvers.problem_args`; writing a Problem to an MPS or LP
file is :mod:`solvers.files`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from solvers.problem_args import (ProblemError, check_matrix, check_names, check_vector, first_entry, freeze,
                                  freeze_csr, label)

__all__ = ["ProblemError", "Option", "ChoiceGroup", "FlatGroups", "Problem"]


@dataclass(frozen=True, eq=False)
class Option:
    """One option of a choice group: its members may be non-zero only if ``x[indicator] == 1``."""

    indicator: int
    members: np.ndarray

    def __post_init__(self) -> None:
        members = np.asarray(self.members)
        if members.ndim != 1 or (members.size and not np.issubdtype(members.dtype, np.integer)):
            raise ProblemError(f"Option(indicator={self.indicator}): members must be a 1-D integer array")
        members = members.astype(np.int64, copy=True)
        members.flags.writeable = False
        object.__setattr__(self, "indicator", int(self.indicator))
        object.__setattr__(self, "members", members)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Option):
            return NotImplemented
        return self.indicator == other.indicator and np.array_equal(self.members, other.members)

    def __hash__(self) -> int:
        return hash((self.indicator, self.members.tobytes()))


@dataclass(frozen=True)
class ChoiceGroup:
    """At most one (``exact``: exactly one) of the options is chosen."""

    options: tuple[Option, ...]
    exact: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))


_NONE = freeze(np.zeros(0, dtype=np.int64))


@dataclass(frozen=True, eq=False)
class FlatGroups:
    """Choice groups as arrays: option k has indicator ``indicator[k]`` and lies in group
    ``group[k]`` (groups 0..G-1, a group's options in order of k); member i, variable
    ``members[i]``, belongs to option ``member_option[i]`` (an option's members in order of
    i); ``exact[g]`` as :attr:`ChoiceGroup.exact` (default: none; G is then max(group) + 1).
    The same groups as the :class:`ChoiceGroup` sequence :attr:`Problem.groups` gives back.
    A Problem's own (:attr:`Problem.flat_groups`) is sorted by group, then option, read-only."""

    indicator: Any
    group: Any
    members: Any = None
    member_option: Any = None
    exact: Any = None

    def __post_init__(self) -> None:
        for name in ("indicator", "group", "members", "member_option"):
            value = getattr(self, name)
            arr = _NONE if value is None else np.asarray(value)
            if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
                raise ProblemError(f"FlatGroups.{name}: must be a 1-D integer array")
            object.__setattr__(self, name, freeze(arr.astype(np.int64)))
        if self.indicator.size != self.group.size or self.members.size != self.member_option.size:
            raise ProblemError("FlatGroups: indicator and group (members and member_option) differ in length")
        if (self.group < 0).any() or ((self.member_option < 0) | (self.member_option >= self.indicator.size)).any():
            raise ProblemError("FlatGroups: a negative group, or a member_option that names no option")
        size = int(self.group.max()) + 1 if self.group.size else 0
        exact = np.zeros(size, dtype=bool) if self.exact is None else np.asarray(self.exact)
        if exact.ndim != 1 or exact.size < size or (exact.size and exact.dtype != bool):
            raise ProblemError(f"FlatGroups.exact: expected a boolean vector of at least {size} groups")
        object.__setattr__(self, "exact", freeze(exact.copy()))

    def sorted(self) -> "FlatGroups":
        """The same groups with options by group (then k) and members by option (then i)."""
        order = np.argsort(self.group, kind="stable")
        new = np.empty_like(order)
        new[order] = np.arange(order.size)
        mem_opt = new[self.member_option]
        by_opt = np.argsort(mem_opt, kind="stable")
        return FlatGroups(self.indicator[order], self.group[order], self.members[by_opt], mem_opt[by_opt], self.exact)

    @classmethod
    def of(cls, groups: Sequence["ChoiceGroup"]) -> tuple["FlatGroups", tuple["ChoiceGroup", ...]]:
        """The arrays of a :class:`ChoiceGroup` sequence (checked), and the sequence as a tuple."""
        groups = tuple(groups)
        indicators: list[int] = []
        members: list[np.ndarray] = []
        counts = np.zeros(len(groups), dtype=np.int64)
        for g, group in enumerate(groups):
            if not isinstance(group, ChoiceGroup):
                raise ProblemError(f"groups[{g}]: expected ChoiceGroup, got {type(group).__name__}")
            if not group.options:
                raise ProblemError(f"groups[{g}]: has no options")
            for k, opt in enumerate(group.options):
                if not isinstance(opt, Option):
                    raise ProblemError(f"groups[{g}].options[{k}]: expected Option, got {type(opt).__name__}")
                indicators.append(opt.indicator)
                members.append(opt.members)
            counts[g] = len(group.options)
        sizes = np.fromiter((m.size for m in members), dtype=np.int64, count=len(members))
        return cls(np.array(indicators, dtype=np.int64), np.repeat(np.arange(len(groups)), counts),
                   np.concatenate(members) if sizes.sum() else _NONE, np.repeat(np.arange(len(members)), sizes),
                   np.array([grp.exact for grp in groups], dtype=bool)), groups

    def choice_groups(self) -> tuple["ChoiceGroup", ...]:
        """As :class:`ChoiceGroup` objects (read-only members shared with these arrays)."""
        flat = self.sorted()
        starts = np.searchsorted(flat.member_option, np.arange(flat.indicator.size + 1))
        options = [_trusted_option(i, flat.members[a:b])
                   for i, a, b in zip(flat.indicator.tolist(), starts[:-1].tolist(), starts[1:].tolist())]
        cut = np.searchsorted(flat.group, np.arange(flat.exact.size + 1)).tolist()
        return tuple(ChoiceGroup(tuple(options[cut[g]:cut[g + 1]]), bool(e)) for g, e in enumerate(flat.exact.tolist()))


def _trusted_option(indicator: int, members: np.ndarray) -> Option:
    option = object.__new__(Option)  # already checked, members read-only int64
    option.__dict__.update(indicator=indicator, members=members)
    return option


class Problem:
    """min/max c.x + offset  s.t.  A x <= b (packing, A>=0, b>=0), C x >= d (covering, C>=0, d>=0),
    g_lo <= G x <= g_hi (general rows, any sign), 0 <= x <= upper, x_i integer where integer[i],
    choice groups.

    Validated once at construction and read-only afterwards, so solvers can trust it.
    """

    _frozen = False

    def __init__(self, *, c: Any, sense: str = "min", A: Any = None, b: Any = None, C: Any = None, d: Any = None,
                 G: Any = None, g_lo: Any = None, g_hi: Any = None, upper: Any = None, integer: Any = None,
                 groups: Sequence[ChoiceGroup] | FlatGroups = (), offset: float = 0.0, name: str = "problem",
                 var_names: Sequence[str] | None = None, pack_names: Sequence[str] | None = None,
                 cover_names: Sequence[str] | None = None, general_names: Sequence[str] | None = None) -> None:
        c = check_vector("c", c, None)
        if not np.isfinite(c).all():
            raise ProblemError(f"c[{int(np.flatnonzero(~np.isfinite(c))[0])}] is not finite")
        n = c.size
        if sense not in ("min", "max"):
            raise ProblemError(f"sense: must be 'min' or 'max', got {sense!r}")
        try:
            offset = float(offset)
        except (TypeError, ValueError) as exc:
            raise ProblemError(f"offset: not a number ({exc})") from exc
        if not math.isfinite(offset):
            raise ProblemError(f"offset: must be finite, got {offset}")
        self.var_names = check_names("var_names", var_names, n)

        A_, C_, G_ = check_matrix("A", A, n), check_matrix("C", C, n), check_matrix("G", G, n)
        self.pack_names = check_names("pack_names", pack_names, A_.shape[0])
        self.cover_names = check_names("cover_names", cover_names, C_.shape[0])
        self.general_names = check_names("general_names", general_names, G_.shape[0])
        b_ = self._rhs("b", b, A_, "A")
        d_ = self._rhs("d", d, C_, "C")
        for arg, mat, names in (("A", A_, self.pack_names), ("C", C_, self.cover_names), ("G", G_, self.general_names)):
            bad = ~np.isfinite(mat.data)
            if bad.any():
                r, j, v = first_entry(mat, bad)
                raise ProblemError(f"{arg}[row {label(names, r)}, column {label(self.var_names, j)}] = {v} "
                                   "is not finite")
        for arg, mat, names, kind in (("A", A_, self.pack_names, "packing"), ("C", C_, self.cover_names, "covering")):
            neg = mat.data < 0
            if neg.any():
                r, j, v = first_entry(mat, neg)
                raise ProblemError(f"{arg}[row {label(names, r)}, column {label(self.var_names, j)}] = {v} < 0: "
                                   f"{kind} coefficients must be non-negative (put signed rows in G)")
        for arg, vec, names, kind in (("b", b_, self.pack_names, "packing"), ("d", d_, self.cover_names, "covering")):
            neg = vec < 0
            if neg.any():
                r = int(np.flatnonzero(neg)[0])
                raise ProblemError(f"{arg}[row {label(names, r)}] = {vec[r]} < 0: {kind} right-hand sides must be >= 0")
        empty_cover = (np.diff(C_.indptr) == 0) & (d_ > 0)
        if empty_cover.any():
            r = int(np.flatnonzero(empty_cover)[0])
            raise ProblemError(f"C[row {label(self.cover_names, r)}] is all zero but d = {d_[r]} > 0: never satisfiable")

        m_g = G_.shape[0]
        lo_ = check_vector("g_lo", g_lo, m_g, default=-np.inf)
        hi_ = check_vector("g_hi", g_hi, m_g, default=np.inf)
        if m_g and g_lo is None and g_hi is None:
            raise ProblemError("G: given without g_lo or g_hi")
        for arg, vec, bad_val in (("g_lo", lo_, np.inf), ("g_hi", hi_, -np.inf)):
            if (vec == bad_val).any():
                r = int(np.flatnonzero(vec == bad_val)[0])
                raise ProblemError(f"{arg}[row {label(self.general_names, r)}] = {bad_val}: row can never hold")
        if (lo_ > hi_).any():
            r = int(np.flatnonzero(lo_ > hi_)[0])
            raise ProblemError(f"general row {label(self.general_names, r)}: g_lo = {lo_[r]} > g_hi = {hi_[r]}")
        empty_gen = (np.diff(G_.indptr) == 0) & ((lo_ > 0) | (hi_ < 0))
        if empty_gen.any():
            r = int(np.flatnonzero(empty_gen)[0])
            raise ProblemError(f"G[row {label(self.general_names, r)}] is all zero but 0 is outside "
                               f"[{lo_[r]}, {hi_[r]}]: never satisfiable")

        upper_ = check_vector("upper", upper, n, default=np.inf)
        if (upper_ < 0).any():
            j = int(np.flatnonzero(upper_ < 0)[0])
            raise ProblemError(f"upper[{label(self.var_names, j)}] = {upper_[j]} < 0: lower bounds are 0")
        if integer is None:
            integer_ = np.ones(n, dtype=bool)
        else:
            integer_ = np.asarray(integer)
            if integer_.shape != (n,):
                raise ProblemError(f"integer: expected shape ({n},), got {integer_.shape}")
            if integer_.dtype != bool and not np.isin(integer_, (0, 1)).all():
                raise ProblemError("integer: must be a boolean mask")
            integer_ = integer_.astype(bool)

        self.c = freeze(c)
        self.sense = sense
        self.n = n
        self.A, self.C, self.G = freeze_csr(A_), freeze_csr(C_), freeze_csr(G_)
        self.b, self.d = freeze(b_), freeze(d_)
        self.g_lo, self.g_hi = freeze(lo_), freeze(hi_)
        self.upper = freeze(upper_)
        self.integer = freeze(integer_)
        if isinstance(groups, FlatGroups):
            flat, self._groups = groups.sorted(), None
        else:
            flat, self._groups = FlatGroups.of(groups)
        #: the choice groups as arrays (:class:`FlatGroups`), sorted by group and option
        self.flat_groups = self._check_groups(flat)
        self.offset = offset
        self.name = str(name)
        self._implied = self._build_implied()
        self._frozen = True

    def __setattr__(self, key: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(f"Problem is read-only (tried to set {key!r})")
        object.__setattr__(self, key, value)

    @property
    def groups(self) -> tuple[ChoiceGroup, ...]:
        """The choice groups as given, or made from :class:`FlatGroups` on first use."""
        if self._groups is None:
            object.__setattr__(self, "_groups", self.flat_groups.choice_groups())
        return self._groups

    def __repr__(self) -> str:
        return (f"Problem({self.name!r}, {self.sense}, n={self.n}, pack={self.A.shape[0]}, cover={self.C.shape[0]}, "
                f"general={self.G.shape[0]}, groups={self.flat_groups.exact.size})")

    @staticmethod
    def _rhs(arg: str, value: Any, mat: sp.csr_array, mat_arg: str) -> np.ndarray:
        m = mat.shape[0]
        if value is None and m:
            raise ProblemError(f"{arg}: required because {mat_arg} has {m} rows")
        vec = check_vector(arg, value, m, default=0.0)
        if not np.isfinite(vec).all():
            raise ProblemError(f"{arg}[{int(np.flatnonzero(~np.isfinite(vec))[0])}] is not finite")
        return vec

    def _check_groups(self, flat: FlatGroups) -> FlatGroups:
        """Vectorised over all options (``flat`` sorted); the message names the first offending option."""
        n_groups, ind, mem, mem_opt = flat.exact.size, flat.indicator, flat.members, flat.member_option
        cut = np.searchsorted(flat.group, np.arange(n_groups + 1))
        empty = np.flatnonzero(cut[1:] == cut[:-1])
        if empty.size:
            raise ProblemError(f"groups[{empty[0]}]: has no options")
        if not ind.size:
            return flat

        def fail(o: int, reason: str) -> None:
            g = int(flat.group[o])
            raise ProblemError(f"groups[{g}].options[{o - cut[g]}]: {reason}")

        bad = np.flatnonzero((ind < 0) | (ind >= self.n))
        if bad.size:
            fail(int(bad[0]), f"indicator {ind[bad[0]]} out of range [0, {self.n})")
        bad = np.flatnonzero(~self.integer[ind] | (self.upper[ind] != 1.0))
        if bad.size:
            y = int(ind[bad[0]])
            fail(int(bad[0]), f"indicator {label(self.var_names, y)} must be integer with upper bound 1 "
                              f"(integer={bool(self.integer[y])}, upper={self.upper[y]})")
        bad = np.flatnonzero((mem < 0) | (mem >= self.n))
        if bad.size:
            fail(int(mem_opt[bad[0]]), f"member index out of range [0, {self.n})")
        bad = np.flatnonzero(~np.isfinite(self.upper[mem]))
        if bad.size:
            fail(int(mem_opt[bad[0]]), f"member {label(self.var_names, int(mem[bad[0]]))} needs a finite upper bound")
        used = np.concatenate((ind, mem))
        owner = np.concatenate((np.arange(ind.size), mem_opt))
        order = np.argsort(used, kind="stable")
        repeat = np.flatnonzero(used[order][1:] == used[order][:-1]) + 1
        if repeat.size:
            clash = order[repeat]
            first = int(clash[np.argmin(owner[clash])])
            fail(int(owner[first]), f"variable {label(self.var_names, int(used[first]))} already appears in a "
                                    "choice option (each variable may be in at most one option of one group)")
        return flat

    def _build_implied(self) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        """Group rows first (one per group), then one linking row per member, in group/option/member order."""
        flat = self.flat_groups
        n_groups, mem = flat.exact.size, flat.members
        n_link = mem.size
        link_rows = n_groups + np.arange(n_link)
        rows = np.concatenate((flat.group, link_rows, link_rows))
        cols = np.concatenate((flat.indicator, mem, flat.indicator[flat.member_option]))
        vals = np.concatenate((np.ones(flat.indicator.size), np.ones(n_link), -self.upper[mem]))
        R = sp.csr_array((vals, (rows, cols)), shape=(n_groups + n_link, self.n))
        R.sum_duplicates()
        R.eliminate_zeros()
        R.sort_indices()
        lo = np.concatenate((np.where(flat.exact, 1.0, -np.inf), np.full(n_link, -np.inf)))
        hi = np.concatenate((np.ones(n_groups), np.zeros(n_link)))
        return freeze_csr(R), freeze(lo), freeze(hi)

    def implied_rows(self) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        """The rows the choice groups imply, as general rows lo <= R x <= hi:
        sum_k y_k <= 1 (== 1 if exact), and x_i - upper_i * y_k <= 0 for each member i of option k.

        Order: one row per group, then the linking rows in group/option/member order.
        """
        return self._implied

    @property
    def row_slices(self) -> dict[str, slice]:
        """Where each row kind sits inside :meth:`all_rows` (keys pack, cover, general, implied)."""
        sizes = {"pack": self.A.shape[0], "cover": self.C.shape[0], "general": self.G.shape[0],
                 "implied": self._implied[0].shape[0]}
        out, start = {}, 0
        for kind, size in sizes.items():
            out[kind] = slice(start, start + size)
            start += size
        return out

    def all_rows(self) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        """Every constraint as lo <= M x <= hi (packing, covering, general, implied), for LP/MIP backends."""
        R, r_lo, r_hi = self._implied
        M = sp.vstack([self.A, self.C, self.G, R], format="csr", dtype=np.float64)
        M = sp.csr_array(M)
        M.sort_indices()
        lo = np.concatenate((np.full(self.A.shape[0], -np.inf), self.d, self.g_lo, r_lo))
        hi = np.concatenate((self.b, np.full(self.C.shape[0], np.inf), self.g_hi, r_hi))
        return M, lo, hi

    def row_names(self) -> list[str]:
        """A name for every row of :meth:`all_rows` (given names or generated ones)."""
        out: list[str] = []
        for prefix, names, m in (("pack", self.pack_names, self.A.shape[0]), ("cover", self.cover_names, self.C.shape[0]),
                                 ("general", self.general_names, self.G.shape[0])):
            out.extend(names if names is not None else (f"{prefix}{i}" for i in range(m)))
        n_groups = self.flat_groups.exact.size
        out.extend(f"group{g}" for g in range(n_groups))
        out.extend(f"link{i}" for i in range(self._implied[0].shape[0] - n_groups))
        return out

    def objective(self, x: Any) -> float:
        """c.x + offset, in the problem's own sense (no sign flip for max)."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.n,):
            raise ProblemError(f"x: expected shape ({self.n},), got {x.shape}")
        return float(self.c @ x + self.offset)
