"""Where a batch's instances are solved: in this process, a local process pool, or Dask."""
from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager

from placement.batch_files import BatchError

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "dask")
DASK_HINT = 'the dask executor needs dask.distributed: pip install "placement[dask]"'


class _InProcess(Executor):
    """workers=1: run each task at submission, in this process (no pickling, easy to debug)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:  # type: ignore[override]
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@contextmanager
def executor(kind: str, address: str | None, workers: int) -> Iterator[tuple[Executor, int]]:
    """The executor and how many tasks to keep in flight (two per worker, so none idles)."""
    if kind == "dask":
        with _dask(address, workers) as pair:
            yield pair
    elif workers == 1:
        yield _InProcess(), 1
    else:
        # spawn, not fork: a forked child would inherit the parent's HiGHS thread pool state
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))
        try:
            yield pool, 2 * workers
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def _dask(address: str | None, workers: int) -> Iterator[tuple[Executor, int]]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise BatchError(DASK_HINT) from None
    cluster = None
    try:
        if address is None:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            client = Client(address, timeout=10)
    except OSError as exc:
        if cluster is not None:
            cluster.close()
        raise BatchError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        threads = sum(client.nthreads().values())
        logger.info("dask: %s, %d worker threads", client.scheduler.address, threads)
        yield client.get_executor(pure=False), max(2, 2 * threads)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
