"""Run independent build tasks on local worker processes or a Ray cluster: results as each task finishes, or
all of them in task order.

Tasks must be idempotent: a task may run again after its worker died (Ray retries it), so it writes to
deterministic paths in the staging directory through a temporary name and os.replace, and a rerun
overwrites whatever a dead attempt left; or it returns what it made as a Shipped payload, which on Ray stays in
the cluster's object store for the tasks that read it. A task bounds its own memory (the caller sizes tasks), so the
build's peak memory is about `workers` tasks' worth whatever the corpus size.
"""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import multiprocessing.connection
import os
import select
import signal
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing import forkserver, resource_tracker
from typing import Any

import psutil

from mlmprep.errors import DISK_REASONS, CacheError, ConfigError, MlmprepError

RAY_RETRIES = 3  # attempts after the first when a Ray worker dies mid-task
TASKS_PER_WORKER = 24  # reading tasks per worker (at most): the last round, uneven, leaves a core idle for 1/24 of it
AHEAD_PER_WORKER = 2  # local tasks submitted per worker, running or queued: the rest wait in the driver, added first
RAY_AHEAD_PER_CPU = 2  # the same on Ray with --workers 0, per CPU of the cluster (looked up again every RAY_RESIZE_S)
RAY_RESIZE_S = 5.0
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (glibc's malloc.h)
MMAP_THRESHOLD = 1 << 20  # bytes: an allocation this large is mapped from the system, and unmapped when freed
WATCH_S = 1.0  # how often the driver looks for a dead local worker itself, while no task finishes


class TaskFailed(RuntimeError):
    """A build stopped by something other than its input (a worker died, a task hit a bug): exit code 1."""


@dataclass(frozen=True)
class Engine:
    """Where build tasks run: "local" worker processes, or a "ray" cluster."""

    kind: str = "local"  # "local" | "ray"
    workers: int = 0  # local processes (0: all cores; 1: in the driver, in order); on Ray, tasks in flight (0: 2 a CPU)
    ray_address: str | None = None  # None: start or join a local Ray instance

    def __post_init__(self) -> None:
        if self.kind not in ("local", "ray"):
            raise ConfigError(f"--engine must be local or ray, got {self.kind!r}")
        if self.workers < 0:
            raise ConfigError(f"--workers must be at least 0, got {self.workers}")

    def describe(self) -> str:
        if self.kind == "ray":
            return f"ray ({self.ray_address or 'local instance'})"
        return "in-process" if self.processes(2) == 1 else f"local, {self.processes(1 << 30)} workers"

    def processes(self, n_tasks: int) -> int:
        """How many local worker processes `n_tasks` tasks get; 1 means run them in the driver."""
        cores = self.workers or len(os.sched_getaffinity(0))
        return max(1, min(cores, n_tasks))

    def shard_bytes(self, input_bytes: int, given: int = 0) -> int:
        """Input bytes per reading task: `given` (--shard-bytes), or TASKS_PER_WORKER tasks per worker, so that the
        last round of uneven shards leaves workers idle briefly; 256 KiB to 64 MiB (every task has a fixed cost of
        its own)."""
        return given or int(min(64 << 20, max(256 << 10, input_bytes // (TASKS_PER_WORKER * self.parallelism()))))

    def parallelism(self) -> int:
        """How many tasks run at once, for planning: the local worker processes, or 16 on a Ray cluster."""
        return 16 if self.kind == "ray" else self.processes(1 << 30)


@dataclass(frozen=True)
class Shipped:
    """What a task returns when it made data for later tasks: its `result`, which goes to the driver, and the
    `payload`, which on Ray stays in the cluster's object store (TaskRun.payloads holds a reference to it; see
    fetched) with only the payload's `names` sent along."""

    result: Any
    payload: Any
    names: tuple[str, ...] = ()


def share(value: Any, engine: Engine) -> Any:
    """`value` as tasks are given it: on Ray, put once in the object store (see fetched)."""
    return import_ray().put(value) if engine.kind == "ray" else value


def fetched(payload: Any) -> Any:
    """A payload (see Shipped, share) itself: on Ray, got from the object store of the node asking."""
    if type(payload).__module__.startswith("ray"):
        return import_ray().get(payload)
    return payload


class TaskRun:
    """fn(task) for every task on the engine's workers. Iterating gives (index, result) as each task finishes,
    in completion order, and `results` holds them by index; `add` queues more tasks while the loop runs, ahead
    of the tasks not started yet (on Ray, not submitted yet): a next phase can start as soon as the results it
    needs are in. Use it in a `with` block: leaving the block before the end stops the tasks still running.

    A MlmprepError from a task re-raises as itself (exit 2); any other failure, a dead worker included, raises
    TaskFailed naming the task, and the remaining tasks are cancelled. Functions and tasks must pickle (module
    level functions). Inside `session(engine)` the local engine's workers stay up from one run to the next.
    `in_driver`, a function giving fn's result in the driver process: while local workers are starting, the
    driver runs tasks of the first list itself with it (see submit_first)."""

    def __init__(self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, engine: Engine,
                 in_driver: Callable[[Any], Any] | None = None):
        self.calls = [(fn, task) for task in tasks]  # (function, task) by index: those given, then those added
        self.results: list = []  # by index; None for a call not finished
        self.new: list[int] = []  # calls added since the engine last took them
        self.payloads: dict[int, tuple[tuple[str, ...], Any]] = {}  # by index: a Shipped result's (names, payload)
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
            self.payloads[index] = result.names, result.payload
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
    if not run.calls:
        return
    if engine.kind == "ray":
        yield from run_ray(run, engine)
        return
    if engine.processes(len(run.calls)) == 1:
        waiting = deque(range(len(run.calls)))
        while waiting:
            index = waiting.popleft()
            yield index, attempt(*run.calls[index])
            waiting.extendleft(reversed(run.added()))  # before the rest of the first tasks
        return
    if engine in POOLS:  # inside a session: its pool, started by the first run that needs one
        if POOLS[engine] is not None:  # its workers are up: the driver has nothing to wait for
            yield from run_local(run, POOLS[engine], None)
            return
        pool = POOLS[engine] = LocalPool(engine.processes(1 << 30), run.calls[0][0].__module__)
        yield from run_local(run, pool, in_driver)
        return
    with closing(LocalPool(engine.processes(len(run.calls)), run.calls[0][0].__module__)) as pool:
        yield from run_local(run, pool, in_driver)


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


def attempt_apart(fn: Callable[[Any], Any], task: Any) -> tuple[tuple[Any, tuple[str, ...]], Any]:
    """attempt as a Ray task of two returns: (the result and its payload's names) for the driver, and the
    payload (None without one), which stays in the object store until a task or the driver fetches it."""
    result = attempt(fn, task)
    if isinstance(result, Shipped):
        return (result.result, result.names), result.payload
    return (result, ()), None


def name(task: Any) -> str:
    """How a task is named in messages: its describe() if it has one, else str()."""
    describe = getattr(task, "describe", None)
    return describe() if callable(describe) else str(task)


def start_forkserver(module: str, tokenizer: str | None = None) -> Any:
    """The forkserver context, its server started now if it is not running yet: a fresh interpreter that
    imports `module` once (the workers it forks have it) while this process goes on with its own work; the
    module finds `tokenizer` (a file to load once for every worker) in the PRELOAD_TOKENIZER variable.
    Forkserver, not fork: never fork a driver whose tokenizer and Numba threads are running."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([module])  # no effect on a server already running
    # Ctrl-C is the driver's to handle: the server starts with SIGINT blocked (a child keeps its parent's
    # mask), so a Ctrl-C during its imports cannot kill it with a traceback, nor reach the workers it forks.
    # The resource tracker goes first: starting it unblocks SIGINT in this thread.
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


def prestart(engine: Engine, input_bytes: int, shard_bytes: int, module: str, tokenizer: str | None = None) -> None:
    """When reading `input_bytes` (in tasks of engine.shard_bytes(input_bytes, shard_bytes)) will run on local
    worker processes, start their forkserver now, so that its imports, Numba's warm-up and the loading of
    `tokenizer` overlap the caller's own start-up rather than delay the first
    task. Safe to call again."""
    tasks = -(-input_bytes // engine.shard_bytes(input_bytes, shard_bytes))
    if engine.kind == "local" and engine.processes(tasks) > 1:
        start_forkserver(module, tokenizer)


class LocalPool:
    """Up to `processes` worker processes (spawned as tasks come) with what run_local needs to name a dead
    worker's task: each worker reports (pid, task index) as it starts a task. Workers ignore Ctrl-C; the
    driver stops them itself, so none outlives it."""

    def __init__(self, processes: int, module: str):
        self.ahead = AHEAD_PER_WORKER * processes  # tasks in the executor at a time (run_local keeps it full)
        context = start_forkserver(module)
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
POOLS: dict[Engine, LocalPool | None] = {}  # the pool of each open local session (None: none needed yet)


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
                yield futures[future], future.result()
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


@contextmanager
def ctrl_c_held() -> Iterator[list]:
    """Hold a Ctrl-C until the block ends, then act on it; the block is given a list that is not empty once
    Ctrl-C was pressed. Interrupted while the forkserver is still forking it, a worker would start after the
    pool it belongs to was shut down, and fail with a traceback of its own. Only the main thread receives
    Ctrl-C, so elsewhere there is nothing to hold."""
    pressed: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield pressed
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield pressed
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
    if pressed and callable(previous):
        previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt


def drop(pool: LocalPool) -> None:
    """Shut a failed pool down, and out of its session: a later call starts afresh."""
    for engine in [e for e, p in POOLS.items() if p is pool]:
        del POOLS[engine]
    pool.close()


def init_pool_worker(driver: int, started: Any) -> None:
    """A pool worker's start-up: ignore Ctrl-C (the driver stops the workers itself), end with the driver even if it
    is killed (a pool's workers would wait for work forever), keep the task-start queue."""
    global STARTED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


@contextmanager
def session(engine: Engine) -> Iterator[None]:
    """Keep the engine's workers across several run_tasks calls (a build's phases): Ray is joined once (and
    a Ray instance started here is stopped at the end); local workers stay up, keeping what their tasks
    loaded (a tokenizer, say), and are stopped at the end."""
    if engine.kind == "local":
        if engine in POOLS:  # already open
            yield
            return
        POOLS[engine] = None
        try:
            yield
        finally:
            pool = POOLS.pop(engine, None)
            if pool is not None:
                pool.close()
        return
    ray = import_ray()
    if ray.is_initialized():
        yield
        return
    if engine.ray_address:
        check_reachable(engine.ray_address)
    local = not engine.ray_address and starts_its_own(ray)
    with loopback_only(ray) if local else nullcontext():
        try:
            ray.init(address=engine.ray_address, include_dashboard=False, log_to_driver=False,
                     logging_level="ERROR", **({"_node_ip_address": "127.0.0.1"} if local else {}))
        except (ConnectionError, ray.exceptions.AuthenticationError) as exc:
            raise ConfigError(f"--ray-address {engine.ray_address}: cannot join the Ray cluster there "
                              f"({str(exc).splitlines()[0]}); with token authentication on, set "
                              "RAY_AUTH_MODE=token and give this machine the cluster's token") from None
        try:
            yield
        finally:
            ray.shutdown()


# Ray takes a node's address from the machine's interfaces, and its servers (GCS, raylet, object manager,
# workers, runtime-env agent) listen there, unless the node is told it is no cluster: then on 127.0.0.1 only.
NOT_A_CLUSTER = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def starts_its_own(ray: Any) -> bool:
    """Whether ray.init() without an address starts a Ray instance: none runs on this machine, no RAY_ADDRESS."""
    return ray._private.services.canonicalize_bootstrap_address(None) is None


@contextmanager
def loopback_only(ray: Any) -> Iterator[None]:
    """Within: a Ray instance that ray.init starts here listens on 127.0.0.1 only (Ray's own switch, read from
    the environment when ray is imported, so its constant is set too); after, both as they were."""
    constants = ray._private.ray_constants
    before = os.environ.get(NOT_A_CLUSTER), constants.ENABLE_RAY_CLUSTER
    os.environ[NOT_A_CLUSTER], constants.ENABLE_RAY_CLUSTER = "0", False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = before[1]
        if before[0] is None:
            os.environ.pop(NOT_A_CLUSTER, None)
        else:
            os.environ[NOT_A_CLUSTER] = before[0]


def check_reachable(address: str) -> None:
    """Fail in seconds on a HOST:PORT where nothing listens: ray.init retries one for many minutes."""
    host, _, port = address.rpartition(":")
    if "://" in address or not port.isdigit():
        return  # "auto", ray://...: Ray's own forms
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as exc:
        raise ConfigError(f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); give the "
                          "address `ray start --head` printed on the head node") from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError('--engine ray needs Ray: pip install "mlmprep[ray]"') from None
    return ray


def run_ray(run: TaskRun, engine: Engine) -> Iterator[tuple[int, Any]]:
    """The run's calls as Ray tasks, each retried on another worker when its worker dies, with those added as
    results come in."""
    ray = import_ray()
    with session(engine):
        remote = ray.remote(max_retries=RAY_RETRIES, retry_exceptions=False, num_returns=2)(attempt_apart)
        payloads: dict = {}  # call index -> the reference to its payload
        index: dict = {}  # ref -> call index
        waiting: list[int] = list(range(len(run.calls)))  # not submitted yet, in order
        pending: list = []
        limit, sized = engine.workers, -RAY_RESIZE_S
        while waiting or pending:  # on an error the rest are left to Ray: a job's tasks end when its driver leaves
            # --workers N: at most N tasks in flight on the cluster; 0: two per CPU it has (a cluster that grows
            # gets more), so that tasks added go ahead of the rest rather than behind all of them
            if not engine.workers and time.monotonic() - sized >= RAY_RESIZE_S:
                limit = RAY_AHEAD_PER_CPU * max(1, int(ray.cluster_resources().get("CPU", 1)))
                sized = time.monotonic()
            while waiting and len(pending) < limit:
                i = waiting.pop(0)
                fn, task = run.calls[i]
                ref, payloads[i] = remote.options(name=f"mlmprep {name(task)}").remote(fn, task)
                index[ref] = i
                pending.append(ref)
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                task = run.calls[index[ref]][1]
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:  # the task raised, or Ray could not run it
                    if isinstance(exc.cause, (MlmprepError, TaskFailed)):
                        raise exc.cause from None
                    raise TaskFailed(f"{name(task)} failed on Ray: {type(exc.cause).__name__}: "
                                     f"{str(exc.cause).splitlines()[0]}; nothing was published") from None
                except ray.exceptions.RayError as exc:  # its worker or node died RAY_RETRIES + 1 times
                    raise TaskFailed(f"a Ray worker died while running {name(task)} "
                                     f"({RAY_RETRIES + 1} attempts; {str(exc).splitlines()[0]}); "
                                     "nothing was published") from None
                result, names = result
                payload = payloads.pop(index[ref])
                yield index[ref], Shipped(result, payload, names) if names else result
                waiting[:0] = run.added()  # ahead of the first tasks not submitted
