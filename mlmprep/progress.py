"""Progress bars and read-ahead threads, shared by the long-running stages."""

from __future__ import annotations

import queue
import sys
import threading
import time
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


LOG_EVERY_S = 10.0  # where stderr is not a terminal, a progress line at most this often


class Stages:
    """A long job's progress in stages, each with a total known when it starts (so its percentage never falls):
    on a terminal one tqdm bar whose description changes with the stage; elsewhere (a log file, a pipe) a line to
    stderr at the first update `every` seconds after the last one: the stage, done of total, a note, and the
    tokens counted so far with their rate over the stage. A task that runs longer than `every` seconds sends no
    update, so there a heartbeat thread prints the same line when `every` seconds of real time pass without one:
    a log shows the job alive, whatever the length of its tasks."""

    def __init__(self, every: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.every = LOG_EVERY_S if every is None else every
        self.clock = clock
        self.logged = clock()
        self.bar = progress(unit_scale=False, total=0) if sys.stderr.isatty() else None
        self.desc, self.unit, self.total, self.done, self.note, self.tokens, self.began = "", "", 0, 0, "", 0, 0.0
        self.lock, self.stopped, self.printed = threading.Lock(), threading.Event(), time.monotonic()
        if self.bar is None and self.every > 0:
            threading.Thread(target=self.heartbeat, daemon=True, name="mlmprep-progress").start()

    def stage(self, desc: str, total: int, unit: str, done: int = 0) -> None:
        """Start stage `desc` of `total` `unit`s ("B": bytes, shown scaled), `done` of them done already."""
        self.desc, self.unit, self.total, self.done, self.note, self.tokens = desc, unit, total, done, "", 0
        self.began = self.clock()
        if self.bar is not None:
            self.bar.unit, self.bar.unit_scale = unit, unit == "B"
            self.bar.set_description(desc, refresh=False)
            self.bar.set_postfix_str("", refresh=False)
            self.bar.reset(total=total)  # draws the new stage at 0
            self.bar.update(done)

    def update(self, n: int = 1, note: str | None = None, tokens: int | None = None) -> None:
        """`n` more units done; `note` ("12/49 shards") and the `tokens` so far, when given, replace the last."""
        self.done += n
        self.note = self.note if note is None else note
        self.tokens = self.tokens if tokens is None else tokens
        if self.bar is not None:
            self.bar.set_postfix_str(", ".join(self.parts(rate=False)), refresh=False)
            self.bar.update(n)
        else:
            with self.lock:
                if self.clock() - self.logged >= self.every:
                    self.logged = self.clock()
                    self.print_line()

    def heartbeat(self) -> None:
        """Print the current line whenever `every` seconds of real time pass with no line printed."""
        while not self.stopped.wait(max(self.printed + self.every - time.monotonic(), 0.0)):
            with self.lock:
                if self.desc and time.monotonic() - self.printed >= self.every:
                    self.print_line()

    def print_line(self) -> None:
        self.printed = time.monotonic()
        print(self.line(), file=sys.stderr, flush=True)

    def parts(self, *, rate: bool) -> list[str]:
        """The note, and the tokens (with their rate over the stage if `rate`)."""
        parts = [self.note] if self.note else []
        if self.tokens:
            parts.append(f"{self.tokens:,} tokens")
            if rate:
                parts.append(f"{self.tokens / max(self.clock() - self.began, 1e-9):,.0f} tokens/s")
        return parts

    def line(self) -> str:
        """One log line: "read, clean, tokenize: 12.6 of 50.3 MB (25%, 6 s), 12/49 shards, 3,145,728 tokens, ...",
        the time in parentheses being the stage's so far."""
        if self.unit == "B":
            done = f"{self.done / 1e6:.1f} of {self.total / 1e6:.1f} MB"
        else:
            done = f"{self.done:,} of {self.total:,} {self.unit}{'s' * (self.total != 1)}"
        elapsed = f"{self.clock() - self.began:.0f} s"
        return ", ".join([f"{self.desc}: {done} ({self.done / max(self.total, 1):.0%}, {elapsed})",
                          *self.parts(rate=True)])

    def close(self) -> None:
        with self.lock:
            self.stopped.set()
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
