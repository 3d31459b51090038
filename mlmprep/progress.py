"""Progress bars and a one-slot read-ahead thread, shared by the long-running stages."""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")
_DONE = object()


def progress(**kwargs) -> tqdm:
    """A tqdm bar on stderr that scales units (tokens/s shows as k/M tok/s); silent when stderr is not a terminal."""
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
