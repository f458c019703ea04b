"""A block of sparse rows built as COO triplets: every model adds its rows here and
assembles them once it knows its total column count (no per-variable Python objects)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


@dataclass
class Rows:
    """COO triplets of a block of rows with bounds lo <= M x <= hi."""

    rows: list[np.ndarray] = field(default_factory=list)
    cols: list[np.ndarray] = field(default_factory=list)
    vals: list[np.ndarray] = field(default_factory=list)
    lo: list[np.ndarray] = field(default_factory=list)
    hi: list[np.ndarray] = field(default_factory=list)
    count: int = 0

    def add(self, n_rows: int, entries: list[tuple[np.ndarray, np.ndarray, np.ndarray]], lo, hi) -> None:
        """Append ``n_rows`` rows; ``entries`` are (row within block, column, value) arrays."""
        for r, c, v in entries:
            self.rows.append(self.count + np.asarray(r, dtype=np.int64))
            self.cols.append(np.asarray(c, dtype=np.int64))
            self.vals.append(np.broadcast_to(np.asarray(v, dtype=float), np.shape(c)))
        self.lo.append(np.broadcast_to(np.asarray(lo, dtype=float), (n_rows,)))
        self.hi.append(np.broadcast_to(np.asarray(hi, dtype=float), (n_rows,)))
        self.count += n_rows

    def matrix(self, n: int) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        if not self.count:
            return sp.csr_array((0, n)), np.zeros(0), np.zeros(0)
        m = sp.csr_array((np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
                         shape=(self.count, n))
        return m, np.concatenate(self.lo), np.concatenate(self.hi)


def packing_rows(keys: list[np.ndarray], cols: list[np.ndarray], vals: list[np.ndarray],
                 rhs: np.ndarray) -> tuple[Rows, np.ndarray]:
    """Packing rows ``sum vals * x[cols] <= rhs[key]`` from triplets addressed by a row key,
    one row per key that occurs (rows nothing enters are left out); returns the block and
    the keys of its rows, in order."""
    key = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
    block = Rows()
    if not len(key):
        return block, key
    used, row = np.unique(key, return_inverse=True)
    block.add(len(used), [(row, np.concatenate(cols), np.concatenate(vals))], -np.inf, rhs[used])
    return block, used
