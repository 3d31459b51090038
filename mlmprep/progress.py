"""Progress bars and read-ahead threads, shared by the long-running stages."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tqdm import tqdm

T = TypeVar("T")
R = TypeVar("R")
_DONE = object()


def progress(**kwargs) -> tqdm:
    """A tqdm bar on stderr that scales units (tokens/s shows as k/M tok/s); silent when stderr is not a terminal.
    tqdm is imported here, not with the module: the build's workers, which use only the read-ahead below, are
    spared its import (25 ms, most of it finding its version), on the path to their first task."""
    from tqdm import tqdm

    kwargs.setdefault("unit_scale", True)
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("disable", None if sys.stderr.isatty() else True)
    return tqdm(**kwargs)


def prefetch(items: Iterable[T], depth: int = 2) -> Iterator[T]:
    """Iterate `items` in a background thread, started now and kept `depth` ahead, in the same order
    (reading, cleaning and tokenizing overlap masking and writing; tokenizing releases the GIL).
    An exception in the producer is re-raised in the consumer."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            q.put(exc)
            return
        q.put(_DONE)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    return _consume(q, stop, thread)


def prefetch_map(fn: Callable[[T], R], items: Iterable[T], workers: int = 2, depth: int = 8) -> Iterator[R]:
    """fn(item) for each item, in order, computed by `workers` threads started now, with at most `depth` calls
    submitted beyond the one the consumer is taking (depth=1: the next call runs while the consumer uses this
    result, and no further). For calls that release the GIL for most of their time (tokenizing): while one
    thread does the Python part of its call, another call keeps the cores busy, and a consumer busy elsewhere
    for a while (loading Numba) does not stop them."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="mlmprep-prefetch")
    slots = threading.Semaphore(depth)  # one per call submitted and not yet taken by the consumer

    def submit() -> Iterator[Future]:
        for item in items:
            slots.acquire()
            yield pool.submit(fn, item)  # after the pool's shutdown: RuntimeError, which ends the producer

    return _results(pool, prefetch(submit(), depth=depth), slots, depth)


def _results(pool: ThreadPoolExecutor, jobs: Iterator[Future], slots: threading.Semaphore, depth: int) -> Iterator:
    try:
        for job in jobs:
            slots.release()  # taken: the producer may submit one more call
            yield job.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        slots.release(depth)  # a producer waiting for a slot goes on, to the shut pool, and stops
        jobs.close()


def _consume(q: queue.Queue, stop: threading.Event, thread: threading.Thread) -> Iterator:
    try:
        while (item := q.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(0.01)
