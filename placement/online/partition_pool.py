"""Worker processes for the LP policy's partitions, on one machine.

Half of each partition's window chain is Python (building the model, rounding, decoding
it); threads run that half one at a time under the GIL, so two threads barely beat one:
the first decision at 4,000 x 2,000 took 2.49 s on 2 threads and 2.04 s on 2 processes,
at 16,000 x 8,000 11.65 s against 8.74 s (benchmarks/SCALING.md). A
:class:`PartitionPool` keeps its processes for its
whole life, and the cluster (the decision's instance without jobs, the same every slot
on a fixed cluster) reaches each worker once: it is written to a file named by the hash
of its bytes, and a worker reads it only when the name changes. So it keeps its
per-cluster tables (:func:`placement.model.instance.cluster_cache`) from slot to slot, and a
decision sends each partition only its jobs and its chain.

Use it as ``LPRoundingPolicy(executor=PartitionPool(2))`` (the caller closes it; a
``with`` block does) or ``placement simulate --executor processes``. The decisions are
those of the thread pool, partition by partition (tested).
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import shutil
import tempfile
import time
import weakref
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from placement.executors import math_threads, worker_start

__all__ = ["PartitionPool"]

#: in a worker: (hash, cluster) of the cluster it last read
_CLUSTER: tuple[str, object] | None = None


class PartitionPool:
    """``workers`` processes (default: one per core) solving partitions with the function
    each submit names (:func:`placement.online.lp_policy.solve_partition`, module docstring).
    They start here, before the first decision, and end with :meth:`close`."""

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers if workers is not None else os.cpu_count() or 1)
        self._dir = Path(tempfile.mkdtemp(prefix="placement-partitions-"))
        self._digest: str | None = None
        with math_threads(1):  # each worker one BLAS thread: the workers are the parallelism
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=worker_start, initargs=(os.getpid(),))
        self._finalizer = weakref.finalize(self, _close, self._pool, self._dir)
        # every worker up and importing now, so the first decision does not pay for it
        for future in [self._pool.submit(_ready) for _ in range(self.workers)]:
            future.result()

    def share(self, cluster) -> None:
        """Make ``cluster`` (an instance without jobs) the one the next partitions run on:
        written once per change, read once per worker (module docstring)."""
        data = pickle.dumps(cluster, protocol=pickle.HIGHEST_PROTOCOL)
        digest = hashlib.sha256(data).hexdigest()[:24]
        if digest != self._digest:
            path = self._path(digest)
            part = path.with_suffix(".part")
            part.write_bytes(data)
            part.replace(path)
            if self._digest is not None:
                self._path(self._digest).unlink(missing_ok=True)
            self._digest = digest

    def submit_partition(self, solve_partition, chain, jobs, start: int, end: int) -> "_Pending":
        """``solve_partition(chain, cluster, jobs, start, end)`` on a worker, with the
        cluster last :meth:`share`-d; ``result()`` of what it returns waits for it.
        ``solve_partition`` travels by name (a module-level function), so the pool itself
        knows nothing of the policy it serves."""
        if self._digest is None:
            raise RuntimeError("share a cluster before submitting partitions")
        return _Pending(self._pool.submit(_solve, self._digest, str(self._path(self._digest)), solve_partition,
                                          chain, jobs, start, end))

    def _path(self, digest: str) -> Path:
        return self._dir / f"cluster-{digest}.pickle"

    def close(self) -> None:
        """End the workers and remove the shared files."""
        self._finalizer()

    def __enter__(self) -> "PartitionPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Pending:
    """A submitted partition; a worker that died is one clear error, not a pool's."""

    def __init__(self, future):
        self.future = future

    def result(self):
        try:
            return self.future.result()
        except BrokenProcessPool:
            raise RuntimeError("a partition worker process died (out of memory or killed); "
                               "the decision cannot be made on this pool") from None


def _close(pool: ProcessPoolExecutor, folder: Path) -> None:
    pool.shutdown(wait=True, cancel_futures=True)
    shutil.rmtree(folder, ignore_errors=True)


def _ready() -> None:
    """In a worker: stay busy a moment so that every worker of the pool gets one of these
    tasks (unpickling it imported ``placement``, whose public names bring in the policies)."""
    time.sleep(0.05)


def _solve(digest: str, path: str, solve_partition, chain, jobs, start: int, end: int):
    """In a worker: ``solve_partition`` on the shared cluster, read from ``path`` only when
    its hash is new to this worker."""
    global _CLUSTER

    if _CLUSTER is None or _CLUSTER[0] != digest:
        with open(path, "rb") as f:
            _CLUSTER = (digest, pickle.load(f))
    return solve_partition(chain, _CLUSTER[1], jobs, start, end)
