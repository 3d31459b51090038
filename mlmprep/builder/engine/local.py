"""The local engine: a build's tasks on worker processes of this machine, forked from a forkserver that loaded
the pipeline once, with the driver running tasks itself while they start; a dead worker or a Ctrl-C stops them all."""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.connection
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing, contextmanager
from dataclasses import dataclass
from multiprocessing import forkserver, resource_tracker
from typing import Any, ClassVar

import psutil

import mlmprep
from mlmprep.builder.engine.base import Engine, TaskFailed, TaskRun, attempt, name
from mlmprep.format.scratch import multiprocessing_in_scratch

AHEAD_PER_WORKER = 2  # local tasks submitted per worker, running or queued: the rest wait in the driver, added first
WATCH_S = 1.0  # how often the driver looks for a dead local worker itself, while no task finishes


@dataclass(frozen=True)
class LocalEngine(Engine):
    """`workers` worker processes on this machine (0: one per core; 1: every task in the driver, in order)."""

    shares_disk: ClassVar[bool] = True

    def describe(self) -> str:
        return "in-process" if self.processes(2) == 1 else f"local, {self.processes(1 << 30)} workers"

    def processes(self, n_tasks: int) -> int:
        """How many local worker processes `n_tasks` tasks get; 1 means run them in the driver."""
        cores = self.workers or len(os.sched_getaffinity(0))
        return max(1, min(cores, n_tasks))

    def parallelism(self) -> int:
        return self.processes(1 << 30)

    def worker_threads(self, threads: int, tasks: int) -> int:
        """--threads, at most the cores (more would only wait for each other); unset, the cores shared among the
        workers (0, all of them, for tasks that run in the driver)."""
        cores = len(os.sched_getaffinity(0))
        if threads:
            return min(threads, cores)
        return 0 if self.processes(tasks) == 1 else max(1, cores // self.processes(tasks))

    def driver_threads(self, threads: int) -> int:
        """The cores the workers share, since the driver tokenizes while they start."""
        return min(threads * self.processes(1 << 30), len(os.sched_getaffinity(0))) if threads else threads

    def prestart(self, input_bytes: int, shard_bytes: int, module: str, tokenizer: str | None = None) -> None:
        """When reading `input_bytes` (in tasks of shard_bytes(input_bytes, shard_bytes)) will run on worker
        processes, start their forkserver now, so that its imports, Numba's warm-up and the loading of `tokenizer`
        overlap the caller's own start-up rather than delay the first task. Safe to call again."""
        if self.processes(-(-input_bytes // self.shard_bytes(input_bytes, shard_bytes))) > 1:
            start_forkserver(module, tokenizer)

    @contextmanager
    def session(self) -> Iterator[None]:
        """The workers stay up from one run to the next, keeping what their tasks loaded (a tokenizer, say), and
        are stopped at the end."""
        if self in POOLS:  # already open
            yield
            return
        POOLS[self] = None
        try:
            yield
        finally:
            pool = POOLS.pop(self, None)
            if pool is not None:
                pool.close()

    def results(self, run: TaskRun, in_driver: Callable[[Any], Any] | None) -> Iterator[tuple[int, Any]]:
        """In the driver, in order, when one process is all the run gets and the session has no workers up (tasks
        added go before the rest); else on the open session's pool, or on a pool of the run's own."""
        if self.processes(len(run.calls)) == 1 and POOLS.get(self) is None:
            waiting = deque(range(len(run.calls)))
            while waiting:
                index = waiting.popleft()
                yield index, attempt(*run.calls[index])
                waiting.extendleft(reversed(run.added()))  # before the rest of the first tasks
            return
        if self in POOLS:  # inside a session: its pool, started by the first run that needs one
            if POOLS[self] is not None:  # its workers are up: the driver has nothing to wait for
                yield from run_local(run, POOLS[self], None)
                return
            pool = POOLS[self] = LocalPool(self.processes(1 << 30), run.calls[0][0].__module__)
            yield from run_local(run, pool, in_driver)
            return
        with closing(LocalPool(self.processes(len(run.calls)), run.calls[0][0].__module__)) as pool:
            yield from run_local(run, pool, in_driver)


def start_forkserver(module: str, tokenizer: str | None = None) -> Any:
    """The forkserver context, its server started now if it is not running yet: a fresh interpreter that
    imports `module` once (the workers it forks have it) while this process goes on with its own work; the
    module finds `tokenizer` (a file to load once for every worker) in the PRELOAD_TOKENIZER variable.
    Forkserver, not fork: never fork a driver whose tokenizer and Numba threads are running."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__, module])  # no effect on a server already running
    # Ctrl-C is the driver's to handle: the server starts with SIGINT blocked (a child keeps its parent's
    # mask), so a Ctrl-C during its imports cannot kill it with a traceback, nor reach the workers it forks.
    # The resource tracker goes first: starting it unblocks SIGINT in this thread.
    multiprocessing_in_scratch()  # the server's socket: where the next build finds it if this one is killed
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    if tokenizer:
        os.environ[PRELOAD_TOKENIZER] = tokenizer  # the server starts with this process's environment
    try:
        forkserver.ensure_running()
    finally:
        os.environ.pop(PRELOAD_TOKENIZER, None)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return context


PRELOAD_TOKENIZER = "MLMPREP_FORKSERVER_TOKENIZER"  # set only while the workers' server starts

class LocalPool:
    """Up to `processes` worker processes (spawned as tasks come) with what run_local needs to name a dead
    worker's task: each worker reports (pid, task index) as it starts a task. Workers ignore Ctrl-C; the
    driver stops them itself, so none outlives it."""

    def __init__(self, processes: int, module: str):
        self.ahead = AHEAD_PER_WORKER * processes  # tasks in the executor at a time (run_local keeps it full)
        context = start_forkserver(module)
        # Their locks are named semaphores, each registered with the resource tracker and then given its clean-up:
        # a Ctrl-C between the two would leave one for the tracker to warn of at exit, so it waits for both.
        with ctrl_c_held():
            self.started = context.SimpleQueue()  # unbuffered: a killed worker loses none of its reports
            self.executor = ProcessPoolExecutor(processes, mp_context=context, initializer=init_pool_worker,
                                                initargs=(os.getpid(), self.started))
        self.workers: dict = {}  # pid -> process, every one the pool spawned

    def submit(self, call: tuple, index: int) -> Any:
        """The future of call (fn, task) on a worker, reported as task `index`; a worker the executor spawns for
        it is registered at once, so that terminate stops it."""
        future = self.executor.submit(run_in_worker, *call, index)
        self.workers.update(self.executor._processes or {})  # noqa: SLF001
        return future

    def terminate(self) -> None:
        """Stop running tasks now, not at their end."""
        self.workers.update(self.executor._processes or {})  # noqa: SLF001
        for process in list(self.workers.values()):
            process.terminate()  # a no-op for one already gone

    def lost_a_worker(self, wait: float = 0) -> bool:
        """Whether a worker has died (its sentinel is readable), seen within `wait` seconds and without reading
        its exit status."""
        return bool(multiprocessing.connection.wait([p.sentinel for p in self.workers.values()], timeout=wait))

    def close(self) -> None:
        self.executor.shutdown(wait=True, cancel_futures=True)


DEATH_SHOWS_S = 5.0  # how long an OSError met while spawning a worker waits for a worker's death to show

POOLS: dict[LocalEngine, LocalPool | None] = {}  # the pool of each open local session (None: none needed yet)


def run_local(run: TaskRun, pool: LocalPool, in_driver: Callable[[Any], Any] | None) -> Iterator[tuple[int, Any]]:
    """The run's calls on the pool's workers (and on the driver while they start, given `in_driver`), with
    those added as results come in; on any failure, or when the run is left early, the pool's workers are
    stopped and it is dropped."""
    running: dict[int, int] = {}  # pid -> index of the task it started last
    drain(pool.started, {})  # reports of an earlier run's tasks
    futures: dict = {}  # future -> call index
    try:
        waiting = yield from submit_first(run, pool, futures, in_driver)
        queue, pending = deque(waiting), set(futures)  # not submitted yet: tasks added first, in order

        def top_up() -> None:
            while queue and len(pending) < pool.ahead:
                index = queue.popleft()
                future = pool.submit(run.calls[index], index)
                futures[future] = index
                pending.add(future)

        top_up()
        while pending:
            done, pending = wait(pending, timeout=WATCH_S, return_when=FIRST_COMPLETED)
            drain(pool.started, running)
            for future in sorted(done, key=futures.get):
                yield futures.pop(future), future.result()  # the result is the caller's alone to keep
                queue.extendleft(reversed(run.added()))
            top_up()
            if not done and pool.lost_a_worker():
                # The executor marks its pool broken itself, but a worker dying while tasks are still being
                # submitted can leave it joining a worker spawned after its clean-up, and this wait never ends.
                raise BrokenProcessPool
    except BaseException as exc:
        # a worker's death shows as BrokenProcessPool, or, when it comes while tasks are being submitted, as
        # whatever the executor's spawning of a replacement hits (OSError: a closed pipe): look before stopping
        # (the executor's own OSError can come a moment before the death shows: give it a little time)
        died = isinstance(exc, BrokenProcessPool) or (isinstance(exc, Exception) and pool.lost_a_worker(
            DEATH_SHOWS_S if isinstance(exc, OSError) else 0))
        pool.terminate()  # the others, so that the executor's own clean-up can join them
        message = dead_worker(pool.workers, pool.started, running, [task for _, task in run.calls]) if died else None
        drop(pool)
        if died:
            raise TaskFailed(message) from None
        raise


def submit_first(run: TaskRun, pool: LocalPool, futures: dict,
                 in_driver: Callable[[Any], Any] | None) -> Generator[tuple[int, Any], None, list[int]]:
    """Submit the first pool.ahead calls to the pool in order, from a thread, into `futures` ({future: call
    index}): the first submit waits until the forkserver is ready (its imports and Numba's warm-up), the rest
    are quick. Meanwhile the driver, given `in_driver` (its stand-in for the calls' function), runs calls from
    the end of the first list, yielding (index, result), until the submitter is done. Returns the indices still
    to run: the calls added meanwhile, then those neither took, in order."""
    bounds = [0, len(run.calls)]  # calls [bounds[0], bounds[1]) are still to take: the pool's from the front
    lock, failed, later = threading.Lock(), [], []

    def submit() -> None:
        try:
            while True:
                with lock:
                    if bounds[0] >= min(bounds[1], pool.ahead):
                        return
                    index = bounds[0]
                    bounds[0] += 1
                futures[pool.submit(run.calls[index], index)] = index
        except BaseException as exc:  # noqa: BLE001 - a worker died while the rest were being submitted
            failed.append(exc)

    # submit spawns the workers: each is registered (so stopped) before a Ctrl-C acts
    with ctrl_c_held() as pressed:
        submitter = threading.Thread(target=submit, name="mlmprep-submit", daemon=True)
        submitter.start()
        try:
            while in_driver is not None and not pressed and submitter.is_alive():
                with lock:
                    if bounds[1] <= bounds[0]:
                        break
                    bounds[1] -= 1
                    index = bounds[1]
                yield index, attempt(in_driver, run.calls[index][1])
                later += run.added()
        except BaseException:
            with lock:
                bounds[1] = bounds[0]  # the submitter stops after the submit it is in
            raise
        finally:
            submitter.join()
    if failed:
        raise failed[0]
    return later + list(range(*bounds))


HELD = (signal.SIGINT, signal.SIGTERM)  # what ctrl_c_held holds: Ctrl-C, and SIGTERM, which the CLI treats alike


@contextmanager
def ctrl_c_held() -> Iterator[list]:
    """Hold a Ctrl-C (or a SIGTERM) until the block ends, then act on it; the block is given a list that is not
    empty once one came. Interrupted while the forkserver is still forking it, a worker would start after the
    pool it belongs to was shut down, and fail with a traceback of its own. Only the main thread receives
    signals, so elsewhere there is nothing to hold."""
    pressed: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return
    previous = {signum: signal.signal(signum, lambda signum, frame: pressed.append(signum)) for signum in HELD}
    try:
        yield pressed
    finally:
        for signum, handler in previous.items():
            default = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
            signal.signal(signum, default if handler is None else handler)
    if pressed:
        handler = previous[pressed[0]]
        if callable(handler):
            handler(pressed[0], None)  # Python's default SIGINT handler raises KeyboardInterrupt
        elif handler == signal.SIG_DFL:
            signal.raise_signal(pressed[0])  # what it would have done: a SIGTERM ends the process


def drop(pool: LocalPool) -> None:
    """Shut a failed pool down, and out of its session: a later call starts afresh."""
    for engine in [e for e, p in POOLS.items() if p is pool]:
        del POOLS[engine]
    pool.close()


def init_pool_worker(driver: int, started: Any) -> None:
    """A pool worker's start-up: ignore Ctrl-C (the driver stops the workers itself), end with the driver even if it
    is killed (a pool's workers would wait for work forever), keep the task-start queue."""
    global STARTED
    # What the server loaded lives as long as the worker: frozen, it is left out of every collection (which would
    # walk it, and copy its pages from the server's); the collector the server kept off is turned on.
    gc.freeze()
    gc.set_threshold(mlmprep.GC_YOUNG, *gc.get_threshold()[1:])
    gc.enable()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.excepthook = sys.__excepthook__  # not the server's
    # Numba's threading layer takes a lock from the default context as it starts. A "fork" one is anonymous;
    # a forkserver one is a named semaphore, which a worker killed afterwards leaves to the resource tracker,
    # and the tracker warns of it at exit, below the build's one error line.
    multiprocessing.set_start_method("fork", force=True)
    threading.Thread(target=exit_with, args=(driver,), daemon=True).start()
    STARTED = started


def exit_with(pid: int) -> None:
    """Wait for process `pid` to end, then end this process at once."""
    if hasattr(os, "pidfd_open"):  # Linux: woken the moment it ends
        try:
            select.select([os.pidfd_open(pid)], [], [])
        except ProcessLookupError:
            pass
    else:
        while psutil.pid_exists(pid):
            time.sleep(1)
    os._exit(1)


STARTED: Any = None  # in a worker: the queue its task starts go to

def run_in_worker(fn: Callable[[Any], Any], task: Any, index: int) -> Any:
    STARTED.put((os.getpid(), index))
    return attempt(fn, task)


def drain(started: Any, running: dict[int, int]) -> None:
    """Note which task each worker started last."""
    while not started.empty():
        pid, index = started.get()
        running[pid] = index


def dead_worker(workers: dict, started: Any, running: dict[int, int], tasks: list) -> str:
    """One line for a worker that died: its signal and the task it was running."""
    drain(started, running)
    for process in workers.values():
        process.join(timeout=5)
    ended = [p for p in workers.values() if p.exitcode not in (0, None)]  # None: its end not known yet
    # the pool SIGTERMs the others, and others may exit of themselves once the pool breaks: a kill tells most
    killed = [p for p in ended if p.exitcode < 0 and p.exitcode != -signal.SIGTERM]
    dead = killed or [p for p in ended if p.exitcode != -signal.SIGTERM] or ended
    if not dead:
        return "a build worker died; nothing was published"
    process = dead[0]
    how = f"signal {-process.exitcode}" if process.exitcode < 0 else f"exit code {process.exitcode}"
    task = f" while running {name(tasks[running[process.pid]])}" if process.pid in running else ""
    return f"a build worker died ({how}){task}; nothing was published"


def in_forkserver() -> bool:
    """Whether this process is the local engine's forkserver, which preloads the tasks' modules once and forks
    every worker from itself (multiprocessing.forkserver.main is on the stack)."""
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "multiprocessing.forkserver":
            return True
        frame = frame.f_back
    return False


def quiet_when_hung_up(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    """The forkserver's last words: none when a driver hung up in the middle of asking for a worker (a worker
    died, or Ctrl-C came, while the next was being started), since that driver reports the failure itself."""
    if not issubclass(kind, EOFError):
        sys.__excepthook__(kind, value, tb)


if in_forkserver():
    sys.excepthook = quiet_when_hung_up
    # The server imports the tasks' module next (Numba, PyArrow, tokenizers), objects that live as long as the
    # workers: with the collector off, its full collections do not walk them again and again as they load,
    # before the first worker can start. Each worker turns it on (init_pool_worker).
    gc.disable()
