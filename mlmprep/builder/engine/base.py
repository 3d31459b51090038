"""The engine interface: where a build's independent tasks run (one class per engine: local.LocalEngine,
ray.RayEngine), and what every engine shares: TaskRun, which gives the results as each task finishes (or all of them
in task order), and the task's own wrapping (attempt), which turns a failure into one line.

Tasks must be idempotent: a task may run again after its worker died (Ray retries it), so it writes to
deterministic paths in the staging directory through a temporary name and os.replace, and a rerun
overwrites whatever a dead attempt left; or it returns what it made as a Shipped payload, which on Ray stays in
the cluster's object store for the tasks that read it. A task bounds its own memory (the caller sizes tasks), so the
build's peak memory is about `workers` tasks' worth whatever the corpus size.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from mlmprep.config import MAX_SHARD_BYTES
from mlmprep.errors import DISK_REASONS, CacheError, ConfigError, MlmprepError

TASKS_PER_WORKER = 24  # reading tasks per worker (at most): the last round, uneven, leaves a core idle for 1/24 of it
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20  # bytes: an allocation this large is mapped from the system, and unmapped when freed


class TaskFailed(RuntimeError):
    """A build stopped by something other than its input (a worker died, a task hit a bug): exit code 1."""


@dataclass(frozen=True)
class Engine(ABC):
    """Where build tasks run. Callers ask it what they need to know (shares_disk, worker_threads, put), never
    which engine it is."""

    workers: int = 0  # local processes (0: all cores; 1: in the driver, in order); on Ray, tasks in flight (0: 2 a CPU)
    # whether every worker sees the driver's own disk (its scratch directory, local copies of corpus objects);
    # else the workers see only what they share: URLs, or a disk every node mounts at the same path
    shares_disk: ClassVar[bool]

    def __post_init__(self) -> None:
        if self.workers < 0:
            raise ConfigError(f"--workers must be at least 0, got {self.workers}")

    @abstractmethod
    def describe(self) -> str:
        """The engine as the build's log names it."""

    @abstractmethod
    def parallelism(self) -> int:
        """How many tasks run at once, for planning."""

    @abstractmethod
    def worker_threads(self, threads: int, tasks: int) -> int:
        """Tokenizer and masking threads inside one worker, for `tasks` tasks, given --threads (0: unset)."""

    @abstractmethod
    def prestart(self, input_bytes: int, shard_bytes: int, module: str, tokenizer: str | None = None) -> None:
        """Start what the workers need for reading `input_bytes` before the first task, so that it overlaps the
        caller's own start-up (`module`: the tasks' module, `tokenizer`: --tokenizer); safe to call again."""

    @abstractmethod
    def session(self) -> AbstractContextManager[None]:
        """Keep the engine's workers (or cluster connection) across several runs of tasks: a build's phases."""

    @abstractmethod
    def results(self, run: TaskRun, in_driver: Callable[[Any], Any] | None) -> Iterator[tuple[int, Any]]:
        """(index, result) of each of the run's calls (at least one) as it finishes, with those added meanwhile."""

    def shard_bytes(self, input_bytes: int, given: int = 0) -> int:
        """Input bytes per reading task: `given` (--shard-bytes), or TASKS_PER_WORKER tasks per worker, so that the
        last round of uneven shards leaves workers idle briefly (with one process there is no last round to even out:
        as few tasks as can be); at least 256 KiB (every task has a fixed cost of its own) and at most MAX_SHARD_BYTES
        (a task's memory grows with its shard)."""
        parallelism = self.parallelism()
        even = input_bytes // (TASKS_PER_WORKER * parallelism if parallelism > 1 else 1)
        return given or int(min(MAX_SHARD_BYTES, max(256 << 10, even)))

    def driver_threads(self, threads: int) -> int:
        """The driver's tokenizer threads for --threads `threads` (0: all cores)."""
        return threads

    def put(self, value: Any) -> Any:
        """`value` as tasks are given it (see fetched): the value itself, where tasks see the driver's memory."""
        return value


@dataclass(frozen=True)
class Shipped:
    """What a task returns when it made data for later tasks: its `result`, which goes to the driver, and the
    `payload`, parts(task) objects (a tuple), each of which on Ray stays in the cluster's object store as a return of
    its own (TaskRun.payloads holds references to them; see fetched), so that a later task fetches only the parts it
    reads; `names`, the names each part holds, are sent along. `files`, data of its own that only the driver reads,
    goes to the driver with the result."""

    result: Any
    payload: tuple
    names: tuple[tuple[str, ...], ...] = ()
    files: dict[str, bytes] = field(default_factory=dict)


def parts(task: Any) -> int:
    """The objects a task's payload is shipped as: its `parts` where it says (a Shipped's payload has that many),
    else one."""
    return getattr(task, "parts", 1)


def fetched(payload: Any) -> Any:
    """A payload (see Shipped, Engine.put) itself: on Ray, got from the object store of the node asking."""
    if type(payload).__module__.startswith("ray"):  # a Ray object reference: Ray is loaded
        return sys.modules["ray"].get(payload)
    return payload


class TaskRun:
    """fn(task) for every task on the engine's workers. Iterating gives (index, result) as each task finishes,
    in completion order, and `results` holds them by index; `add` queues more tasks while the loop runs, ahead
    of the tasks not started yet (on Ray, not submitted yet): a next phase can start as soon as the results it
    needs are in. Use it in a `with` block: leaving the block before the end stops the tasks still running.

    A MlmprepError from a task re-raises as itself (exit 2); any other failure, a dead worker included, raises
    TaskFailed naming the task, and the remaining tasks are cancelled. Functions and tasks must pickle (module
    level functions). Inside `engine.session()` the local engine's workers stay up from one run to the next.
    `in_driver`, a function giving fn's result in the driver process: while local workers are starting, the
    driver runs tasks of the first list itself with it (see submit_first)."""

    def __init__(self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, engine: Engine,
                 in_driver: Callable[[Any], Any] | None = None):
        self.calls = [(fn, task) for task in tasks]  # (function, task) by index: those given, then those added
        self.results: list = []  # by index; None for a call not finished
        self.new: list[int] = []  # calls added since the engine last took them
        self.payloads: dict[int, Shipped] = {}  # by index: a Shipped result, less its result
        self.finished = finish_calls(self, engine, in_driver)

    def add(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> None:
        """Queue fn(task) for each task, in order, ahead of the calls not started; indices len(calls) on."""
        first = len(self.calls)
        self.calls += [(fn, task) for task in tasks]
        self.new += range(first, len(self.calls))

    def added(self) -> list[int]:
        """The indices of the calls added since the last look, which the engine runs next."""
        new, self.new = self.new, []
        return new

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return self

    def __next__(self) -> tuple[int, Any]:
        index, result = next(self.finished)
        if isinstance(result, Shipped):
            self.payloads[index] = replace(result, result=None)
            result = result.result
        self.results += [None] * (len(self.calls) - len(self.results))
        self.results[index] = result
        return index, result

    def __enter__(self) -> TaskRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finished.close()  # an engine stopped early stops its tasks


def run_tasks(fn: Callable[[Any], Any], tasks: Iterable[Any], *, engine: Engine,
              in_driver: Callable[[Any], Any] | None = None) -> list:
    """fn(task) for every task (see TaskRun); the results in task order."""
    with TaskRun(fn, tasks, engine=engine, in_driver=in_driver) as run:
        for _ in run:
            pass
    return run.results


def finish_calls(run: TaskRun, engine: Engine, in_driver: Callable[[Any], Any] | None) -> Iterator[tuple[int, Any]]:
    """(index, result) of each of the run's calls as it finishes, on the engine that runs them."""
    if run.calls:
        yield from engine.results(run, in_driver)


def attempt(fn: Callable[[Any], Any], task: Any) -> Any:
    """Run one task wherever it is; an unexpected exception becomes one TaskFailed line naming the task
    and the innermost source line, so that it survives pickling back to the driver."""
    steady_heap()
    try:
        return fn(task)
    except MlmprepError:
        raise
    except Exception as exc:
        message = str(exc).splitlines()[0] if str(exc) else ""
        if isinstance(exc, OSError) and exc.errno in DISK_REASONS:  # the place's fault, not the code's
            raise CacheError(f"{name(task)}: cannot write its output ({DISK_REASONS[exc.errno]}: {message}); free "
                             "some space or give a writable place; nothing was published") from None
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
        raise TaskFailed(f"{name(task)} failed: {type(exc).__name__}: {message} (at {where}); "
                         "nothing was published") from exc


@functools.cache
def steady_heap() -> None:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD in a process that runs tasks (once). Left to itself, glibc
    raises it to the size of the MiB blocks a reader decodes as soon as one is freed; later blocks then come
    from the heap, which fragments and grows with the text read; above a fixed threshold each block goes back
    to the system when freed. A no-op without mallopt."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, TypeError):  # not glibc (macOS: no mallopt)
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def name(task: Any) -> str:
    """How a task is named in messages: its describe() if it has one, else str()."""
    describe = getattr(task, "describe", None)
    return describe() if callable(describe) else str(task)
