"""Where a batch's instances are solved: in this process, a local process pool, or Dask.

The pool's workers end with the batch: they ignore Ctrl-C (the client decides), are
terminated when the client leaves the pool by an exception (Ctrl-C, SIGTERM through the
command line's handler), and each watches its parent, ending itself within half a second
once the client is gone however it went (SIGKILL included).
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "dask")


class ExecutorError(ValueError):
    """An executor that cannot start (Dask missing or unreachable); the message says why."""


DASK_HINT = 'the dask executor needs dask.distributed: pip install "placement[dask]"'


class InProcess(Executor):
    """Run each task at submission, in this process (batch workers=1, an LP policy with one
    partition or one thread): no pickling, easy to debug."""

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
        yield InProcess(), 1
    else:
        # spawn, not fork: a forked child would inherit the parent's HiGHS thread pool state
        with math_threads(max(1, (os.cpu_count() or 1) // workers)):
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=worker_start, initargs=(os.getpid(),))
            try:
                yield pool, 2 * workers
            except BaseException:
                _terminate(pool)
                raise
            finally:
                pool.shutdown(wait=True, cancel_futures=True)


#: the variables BLAS and OpenMP read once, when they load, for their thread counts
MATH_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def math_threads(count: int) -> Iterator[None]:
    """Workers started meanwhile get ``count`` BLAS/OpenMP threads each (unless the user set
    the variables): N workers each spinning up a thread per core oversubscribe the cores, and
    on 2 cores that alone cost 0.1 core of the speed-up (docs/batch.md). Spawned workers copy
    the environment when they start, so it is set for the pool's lifetime and then restored."""
    saved = {name: os.environ.get(name) for name in MATH_THREAD_VARIABLES}
    for name, value in saved.items():
        if value is None:
            os.environ[name] = str(count)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)


def worker_start(parent: int) -> None:
    """In each pool worker: leave Ctrl-C to the client, and end when the client is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), name="watch-parent", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """End the workers now (their tasks are abandoned: the batch is stopping)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())   # no public way to reach them
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(timeout=2)


@contextmanager
def _dask(address: str | None, workers: int) -> Iterator[tuple[Executor, int]]:
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ExecutorError(DASK_HINT) from None
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
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
    try:
        threads = sum(client.nthreads().values())
        logger.info("dask: %s, %d worker threads", client.scheduler.address, threads)
        yield client.get_executor(pure=False), max(2, 2 * threads)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
