"""The local task engine: results in task order, errors as the task raised them, dead workers and Ctrl-C
ending the run with one line and no process left behind."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import weakref
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pytest
import typer

import mlmprep.builder.engine.local
from mlmprep.builder.engine import make_engine
from mlmprep.builder.engine.base import TaskFailed, TaskRun, run_tasks
from mlmprep.builder.engine.local import LocalEngine
from mlmprep.builder.engine.ray import RayEngine
from mlmprep.cli._util import cli_errors
from mlmprep.config import BuildConfig
from mlmprep.errors import ConfigError, CorpusError, MlmprepError

ROOT = Path(__file__).resolve().parents[2]  # the repository: scripts import tests.builder.test_engine from it


@dataclass(frozen=True)
class Shard:
    index: int
    wait: float = 0.0
    marker: str | None = None

    def describe(self) -> str:
        return f"shard {self.index} of corpus.txt"


def cube_later(shard: Shard) -> tuple[int, int]:
    """The shard's cube and the worker's pid; later shards finish first, so finishing order is not task order."""
    time.sleep(shard.wait)
    return shard.index**3, os.getpid()


def fail_on_three(shard: Shard) -> int:
    if shard.index == 3:
        raise CorpusError(f"corpus.txt at byte {shard.index * 100}: not UTF-8; pass --on-decode-error replace")
    time.sleep(shard.wait)
    if shard.marker:
        Path(shard.marker, str(shard.index)).touch()
    return shard.index


def buggy(shard: Shard) -> int:
    return {0: 0}[shard.index]  # KeyError for every shard but 0


def test_results_come_in_task_order_with_each_index_reported_once():
    shards = [Shard(i, wait=0.05 * (6 - i)) for i in range(6)]
    with TaskRun(cube_later, shards, engine=LocalEngine(workers=2)) as run:
        seen = list(run)
    assert [cube for cube, _ in run.results] == [i**3 for i in range(6)]
    assert sorted(seen) == list(enumerate(run.results))
    cubes = [cube for cube, _ in run_tasks(cube_later, shards, engine=LocalEngine(workers=2))]
    assert cubes == [i**3 for i in range(6)]


def array_when_told(shard: Shard) -> np.ndarray:
    """An array of the shard's index, once the file `go-<index>` is in shard.marker (at most 60 s), so that the
    tasks end one at a time, in the order the caller lets them."""
    go, deadline = Path(shard.marker, f"go-{shard.index}"), time.monotonic() + 60
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return np.full(1000, shard.index)


@pytest.mark.parametrize("session", [False, True])
def test_a_result_the_caller_lets_go_is_freed_before_the_next_comes_in(tmp_path, session):
    """The engine holds no finished task's result for the rest of the run: the driver sums partition tasks' large
    answers as they come and drops each (TaskRun.results[index] = None), so one held for every task would be every
    answer at once."""
    engine = LocalEngine(workers=2)
    taken: list[weakref.ref] = []
    (tmp_path / "go-0").touch()
    with engine.session() if session else contextlib.nullcontext():
        with TaskRun(array_when_told, [Shard(i, marker=str(tmp_path)) for i in range(5)], engine=engine) as run:
            for index, result in run:
                assert [ref() for ref in taken] == [None] * len(taken)  # every earlier result freed
                assert result.tolist() == [index] * 1000
                taken.append(weakref.ref(result))
                run.results[index] = None
                del result
                (tmp_path / f"go-{index + 1}").touch()
    assert len(taken) == 5


def test_workers_run_in_at_most_n_other_processes_and_one_worker_runs_in_process():
    shards = [Shard(i, wait=0.05) for i in range(6)]
    pool_pids = {pid for _, pid in run_tasks(cube_later, shards, engine=LocalEngine(workers=2))}
    assert os.getpid() not in pool_pids and 1 <= len(pool_pids) <= 2
    assert {pid for _, pid in run_tasks(cube_later, shards, engine=LocalEngine(workers=1))} == {os.getpid()}
    assert run_tasks(cube_later, [], engine=LocalEngine(workers=2)) == []


def test_a_session_keeps_its_workers_from_one_call_to_the_next_and_stops_them_at_its_end():
    shards, engine = [Shard(i, wait=0.05) for i in range(6)], LocalEngine(workers=2)
    with engine.session():
        first = {pid for _, pid in run_tasks(cube_later, shards, engine=engine)}
        second = {pid for _, pid in run_tasks(cube_later, shards, engine=engine)}
        workers = [psutil.Process(pid) for pid in first]
    assert first == second and os.getpid() not in first
    gone, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive
    assert not {pid for _, pid in run_tasks(cube_later, shards, engine=engine)} & first  # outside: a pool of its own


def test_a_failed_call_leaves_its_session_able_to_run_the_next(tmp_path):
    engine = LocalEngine(workers=2)
    with engine.session():
        with pytest.raises(CorpusError):
            run_tasks(fail_on_three, [Shard(i) for i in range(5)], engine=engine)
        assert [cube for cube, _ in run_tasks(cube_later, [Shard(i) for i in range(4)], engine=engine)] == [0, 1, 8, 27]


class SlowToStart(ProcessPoolExecutor):
    """An executor whose first worker takes a second to spawn, as when the workers' forkserver is still
    loading its imports."""

    def submit(self, *args, **kwargs):
        if not self._processes:
            time.sleep(1.0)
        return super().submit(*args, **kwargs)


def where_and_when(index: int) -> tuple[int, int, float]:
    """(index, the pid of the process that ran it, when it started); it takes 50 ms."""
    started = time.time()
    time.sleep(0.05)
    return index, os.getpid(), started


def test_while_its_workers_start_the_driver_runs_tasks_from_the_end_of_the_list(monkeypatch):
    monkeypatch.setattr(mlmprep.builder.engine.local, "ProcessPoolExecutor", SlowToStart)
    with TaskRun(where_and_when, range(60), engine=LocalEngine(workers=2), in_driver=where_and_when) as run:
        seen = [index for index, _ in run]
    results = run.results
    assert [index for index, _, _ in results] == list(range(60)) and sorted(seen) == list(range(60))
    by_driver = [index for index, pid, _ in results if pid == os.getpid()]
    assert len(by_driver) >= 5 and by_driver == list(range(60 - len(by_driver), 60))  # the last ones
    first_on_a_worker = min(started for _, pid, started in results if pid != os.getpid())
    assert max(started for _, pid, started in results if pid == os.getpid()) < first_on_a_worker + 0.02  # it stopped
    assert os.getpid() not in {pid for _, pid, _ in run_tasks(where_and_when, range(6), engine=LocalEngine(workers=2))}


def square_then(task: tuple[str, int, float]) -> tuple[str, int, int, float, float]:
    """(phase, value, pid, start, end) of a task that takes `wait` seconds."""
    phase, value, wait = task
    started = time.time()
    time.sleep(wait)
    return phase, value * value, os.getpid(), started, time.time()


@pytest.mark.parametrize("workers", [1, 2])
def test_tasks_added_as_results_come_in_run_before_the_first_phase_ends(workers):
    """Each first-phase result makes one second-phase task ready (the last makes two): added to the run, they
    run on the workers while first-phase tasks still run, their results follow in the order given, each
    reported once."""
    first = [("read", i, 1.5 if i == 0 else 0.05) for i in range(8)]  # task 0 runs long on one worker
    seen, reads = [], []
    with TaskRun(square_then, first, engine=LocalEngine(workers=workers)) as run:
        for index, (phase, value, *_) in run:
            seen.append(index)
            if phase == "read":
                reads.append(index)
                last = [("write", -1, 0.0)] if len(reads) == len(first) else []
                run.add(square_then, [("write", value, 0.0), *last])
    results = run.results
    assert [(phase, value) for phase, value, *_ in results[:8]] == [("read", i * i) for i in range(8)]
    assert sorted(seen) == list(range(17))
    later = results[8:]
    assert sorted(value for _, value, *_ in later) == sorted([i**4 for i in range(8)] + [1])
    assert all(phase == "write" for phase, *_ in later)
    if workers == 2:  # the tasks made ready by reads 1-7 ran while read 0 still ran, on the other worker
        read_0_end = results[0][4]
        assert sum(start < read_0_end for _, _, _, start, _ in later) >= 6


@pytest.mark.parametrize("workers", [1, 2])
def test_tasks_made_ready_go_ahead_of_the_first_phase_tasks_not_started(workers):
    """A task the first result makes ready starts before most first-phase tasks, though those were all given
    first: a build's write task runs as soon as its shards are in, and the shards can be let go."""
    first = [("read", i, 0.05) for i in range(30)]
    with TaskRun(square_then, first, engine=LocalEngine(workers=workers)) as run:
        for index, _ in run:
            if index == 0:
                run.add(square_then, [("write", 7, 0.0)])
    results = run.results
    assert results[30][:2] == ("write", 49)
    write_started = results[30][3]
    assert sum(started > write_started for *_, started, _ in results[:30]) >= (29 if workers == 1 else 20)


def test_an_error_in_an_added_task_arrives_as_itself():
    with pytest.raises(CorpusError, match="^corpus.txt at byte 300"):
        with TaskRun(cube_later, [Shard(i) for i in range(4)], engine=LocalEngine(workers=2)) as run:
            for index, _ in run:
                if index == 0:
                    run.add(fail_on_three, [Shard(3)])


def test_an_error_in_a_task_the_driver_runs_stops_the_workers_tasks_too(tmp_path, monkeypatch):
    monkeypatch.setattr(mlmprep.builder.engine.local, "ProcessPoolExecutor", SlowToStart)
    shards = [Shard(i, wait=0.3, marker=str(tmp_path)) for i in [0, 1, 2, *range(4, 20)]] + [Shard(3)]  # 3 is last
    started = time.time()
    with pytest.raises(CorpusError, match="^corpus.txt at byte 300: not UTF-8"):
        run_tasks(fail_on_three, shards, engine=LocalEngine(workers=2), in_driver=fail_on_three)
    time.sleep(0.5)  # any task still running would mark its file by now
    assert len(list(tmp_path.iterdir())) < 5 and time.time() - started < 30


def test_an_error_in_the_loop_over_a_run_stops_its_workers():
    """A driver that fails on a result (a check of its own) leaves the loop: the workers running the tasks left
    are stopped, and the session's next run starts fresh ones."""
    engine = LocalEngine(workers=2)
    with engine.session():
        with pytest.raises(CorpusError, match="too little text"):
            with TaskRun(cube_later, [Shard(i, wait=0.3) for i in range(20)], engine=engine) as run:
                for _, (_, pid) in run:
                    worker = psutil.Process(pid)
                    raise CorpusError("corpus.txt: too little text")
        gone, alive = psutil.wait_procs([worker], timeout=30)
        assert not alive
        assert pid not in {pid for _, pid in run_tasks(cube_later, [Shard(i) for i in range(4)], engine=engine)}


@pytest.mark.parametrize(("threads", "engine", "driver_threads"), [
    (0, LocalEngine(workers=4), None), (1, LocalEngine(workers=1), "1"), (1, LocalEngine(workers=16), "16"),
    (4, LocalEngine(workers=2), "8"), (2, LocalEngine(workers=12), "16"), (1, RayEngine(workers=16), "1"),
])
def test_the_driver_tokenizes_on_as_many_cores_as_its_workers_share(monkeypatch, threads, engine, driver_threads):
    """--threads counts in each worker (0: all cores); the driver, which tokenizes while they start, gets
    their sum, at most the machine's cores (16 here); Ray workers are on other machines."""
    from mlmprep.builder.run import set_tokenizer_threads

    monkeypatch.setenv("RAYON_NUM_THREADS", "unset")  # restored (to absent, say) at the end
    monkeypatch.delenv("RAYON_NUM_THREADS")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    set_tokenizer_threads(threads, engine)
    assert os.environ.get("RAYON_NUM_THREADS") == driver_threads


@pytest.mark.parametrize(("threads", "engine", "tasks", "expected"), [
    (5000, LocalEngine(workers=1), 9, 16), (3, LocalEngine(workers=1), 9, 3), (0, LocalEngine(workers=1), 9, 0),
    (0, LocalEngine(workers=4), 9, 4), (0, LocalEngine(workers=4), 1, 0), (64, RayEngine(), 9, 64),
    (0, RayEngine(), 9, 1),
])
def test_each_worker_gets_the_threads_asked_for_at_most_the_cores(monkeypatch, threads, engine, tasks, expected):
    """--threads 5000 on a local build started 5000 tokenizer threads per worker (a 20 KB build took 29 s);
    unset, the cores are shared (one process: 0, all of them); a Ray node's cores are not this machine's."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert engine.worker_threads(threads, tasks) == expected


def numba_in_worker(_: int) -> tuple[bool, bool, bool, bool, bool]:
    """(whether Numba's compiler was started before this task, whether the kernels were loaded, whether
    scipy.linalg and cffi are importable as usual, whether what the first tasks would import was there,
    whether the server spared itself tqdm, which only the driver's bar uses, and froze what it loaded out of
    the worker's garbage collections, with the worker's collector on at mlmprep's threshold) in a worker."""
    import gc

    numba_loaded = "numba" in sys.modules
    first_imports = ("mlmprep.progress", "fsspec.implementations.local", "numpy.ma", "pyarrow")  # first tasks' imports
    progress_loaded = all(name in sys.modules for name in first_imports)
    import mlmprep

    no_tqdm = ("tqdm" not in sys.modules and gc.get_freeze_count() > 0 and gc.isenabled()
               and gc.get_threshold()[0] == mlmprep.GC_YOUNG)
    from mlmprep.builder import _dedup_kernels as dedup
    from mlmprep.builder import _kernels

    # the kernels of decontamination's hashing and matching, which a default build's tasks call, loaded too
    loaded = all(kernel.signatures for kernel in (_kernels.warm_up, dedup.word_hashes, dedup.shingle_hashes,
                                                  dedup.window_hashes, dedup.key_slots, dedup.mark_found))
    importable = all(sys.modules.get(name, "absent") is not None for name in ("scipy.linalg", "cffi"))
    return numba_loaded, loaded, importable, progress_loaded, no_tqdm


def test_build_workers_start_with_numba_loaded_once_in_the_forkserver():
    proc = run_script("""
        from mlmprep.builder.engine.base import run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import numba_in_worker
        if __name__ == "__main__":
            engine = LocalEngine(workers=2)
            # as a build does: the server preloads its tasks
            engine.prestart(2 << 20, 1 << 20, "mlmprep.builder.pipeline")
            print(run_tasks(numba_in_worker, [0, 1], engine=engine), "numba" in sys.modules)
    """)
    out, err = communicate(proc, timeout=120)
    assert proc.returncode == 0, err
    assert out.split() == ["[(True,", "True,", "True,", "True,", "True),",
                           "(True,", "True,", "True,", "True,", "True)]", "False"], err


def test_a_driver_hanging_up_while_asking_for_a_worker_leaves_no_traceback():
    """A worker dying (or Ctrl-C) while the next is being started makes the driver hang up on the forkserver in
    the middle of its request; the driver reports the failure in one line, and the server must add nothing."""
    proc = run_script("""
        import os, socket
        from multiprocessing import forkserver
        from mlmprep.builder.engine.local import start_forkserver
        if __name__ == "__main__":
            start_forkserver("mlmprep.builder.pipeline")
            server = forkserver._forkserver
            with socket.socket(socket.AF_UNIX) as client:  # a request that never sends its file descriptors
                client.connect(server._forkserver_address)
            print(os.waitpid(server._forkserver_pid, 0)[0] == server._forkserver_pid)  # the server ends
    """)
    out, err = communicate(proc, timeout=120)
    assert proc.returncode == 0, err
    assert out.split() == ["True"], err
    assert err == ""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_while_the_pool_is_made_leaves_no_semaphore_without_its_clean_up(monkeypatch, signum):
    """The pool's queues make named semaphores, each registered with the resource tracker and then given the
    clean-up that unregisters it; a Ctrl-C (or a SIGTERM, which the CLI turns into the same stop) landing between
    the two (here: sent to this process by the first registration) would leave one that the tracker warns of at
    exit, below the build's one line."""
    import gc
    import multiprocessing
    from multiprocessing import resource_tracker

    from mlmprep.cli._util import raise_terminated

    registered, unregistered = [], []
    register, unregister = resource_tracker.register, resource_tracker.unregister

    def register_then_ctrl_c(name, rtype):
        register(name, rtype)
        registered.append(name)
        if len(registered) == 1:
            os.kill(os.getpid(), signum)  # acted on at Python's next check, in the caller's next steps

    monkeypatch.setattr(resource_tracker, "register", register_then_ctrl_c)
    monkeypatch.setattr(resource_tracker, "unregister", lambda name, rtype: unregistered.append(name) or
                        unregister(name, rtype))
    monkeypatch.setattr(mlmprep.builder.engine.local, "start_forkserver",
                        lambda module, tokenizer=None: multiprocessing.get_context("forkserver"))
    # as the CLI has them: Ctrl-C raises KeyboardInterrupt, SIGTERM its subclass Terminated
    handler = signal.default_int_handler if signum == signal.SIGINT else raise_terminated
    previous = signal.signal(signum, handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            mlmprep.builder.engine.local.LocalPool(2, "mlmprep.builder.pipeline")
    finally:
        signal.signal(signum, previous)
    gc.collect()  # the pool never made: its queues' locks are cleaned up as they go (others' may go too)
    assert registered and set(registered) <= set(unregistered)


def tokenizer_in_worker(stage: str) -> bool:
    """Whether a worker had the tokenizer staged in `stage` without loading it."""
    from mlmprep.builder import staged
    from mlmprep.config import BuildConfig

    loads, load = [], staged.load_tokenizer
    staged.load_tokenizer = lambda path: loads.append(path) or load(path)
    try:
        staged.worker_tokenizer(staged.Layout(BuildConfig(), stage, 1, 8, 8, None, 3))
    finally:
        staged.load_tokenizer = load
    return not loads


def test_the_forkserver_loads_a_given_tokenizer_once_for_every_worker(tmp_path, tiny_tokenizer_path):
    """Workers take the server's copy for a build that staged the same tokenizer, and load any other."""
    same, other = tmp_path / "same", tmp_path / "other"
    proc = run_script(f"""
        import os
        from mlmprep.builder.engine.base import run_tasks
        from mlmprep.builder.engine.local import PRELOAD_TOKENIZER, LocalEngine
        from mlmprep.format.write import hf_tokenizer_json
        from mlmprep.tokenizer.load import load_tokenizer
        from tests.builder.test_engine import tokenizer_in_worker
        if __name__ == "__main__":
            for stage in ({str(same)!r}, {str(other)!r}):
                os.makedirs(stage)
            staged = hf_tokenizer_json(load_tokenizer({str(tiny_tokenizer_path)!r}))
            with open({str(same / "tokenizer.json")!r}, "w", encoding="utf-8") as f:
                f.write(staged)  # as the build stages it
            changed = load_tokenizer({str(tiny_tokenizer_path)!r})
            changed.add_tokens(["zebra"])
            changed.save({str(other / "tokenizer.json")!r})
            engine = LocalEngine(workers=2)
            engine.prestart(2 << 20, 1 << 20, "mlmprep.builder.pipeline", {str(tiny_tokenizer_path)!r})
            print(run_tasks(tokenizer_in_worker, [{str(same)!r}, {str(other)!r}], engine=engine),
                  PRELOAD_TOKENIZER in os.environ)
    """)
    out, err = communicate(proc, timeout=120)
    assert proc.returncode == 0, err
    assert out.split() == ["[True,", "False]", "False"], err


@pytest.mark.parametrize("from_file", [False, True])
def test_the_cli_starts_the_workers_server_before_parsing_and_its_heavy_imports(tmp_path, tiny_corpus,
                                                                                tiny_tokenizer_path, from_file):
    """Before typer parses the command line (its value checks take 0.1 s; with a config file, which only the
    parse reads, just after) and before this process imports NumPy (let alone the pipeline), so that the
    server's start overlaps the driver's; and with the preload the build's own pool asks for."""
    options = ["--tokenizer", str(tiny_tokenizer_path), "--workers=2", "--shard-bytes", "3000"]
    if from_file:
        (tmp_path / "options.json").write_text(json.dumps({"tokenizer": str(tiny_tokenizer_path), "workers": 2,
                                                            "shard_bytes": 3000}))
        options = ["--config", str(tmp_path / "options.json")]
    proc = run_script(f"""
        from mlmprep import config_files
        from mlmprep.builder.engine import local
        calls, parsed = [], []
        start, make_config = local.start_forkserver, config_files.make_config

        def spy(module, tokenizer=None):
            calls.append((module, bool(parsed), "numpy" in sys.modules, tokenizer))
            return start(module, tokenizer)

        def parse_spy(*args, **kwargs):  # the build command makes its config from what typer parsed
            parsed.append(True)
            return make_config(*args, **kwargs)

        if __name__ == "__main__":
            local.start_forkserver, config_files.make_config = spy, parse_spy
            from mlmprep.cli import main
            sys.argv = ["mlmprep", "build", {str(tiny_corpus)!r}, "--out", {str(tmp_path / "out")!r}, "--force",
                        *{options!r}]
            try:
                main()
            except SystemExit as stop:
                print(stop.code, calls)  # the last line, after the build's summary
    """)
    out, err = communicate(proc, timeout=120)
    assert out, err
    code, calls = out.splitlines()[-1].split(" ", 1)
    calls = ast.literal_eval(calls)
    assert code == "0" and calls[0] == ("mlmprep.builder.pipeline", from_file, False, str(tiny_tokenizer_path)), err
    assert {module for module, *_ in calls} == {"mlmprep.builder.pipeline"}, calls  # the server's preload is the pool's


@pytest.mark.parametrize("as_package_main", [True, False])
def test_build_workers_do_not_run_the_mlmprep_script_again(tmp_path, tiny_corpus, tiny_tokenizer_path, as_package_main):
    """multiprocessing makes each worker run its parent's main script first (the console script pip writes
    imports the whole CLI), unless that is a package's __main__: the CLI passes itself off as mlmprep.__main__."""
    script = tmp_path / "mlmprep"  # what pip writes, plus a mark left by any process that runs it not as main
    script.write_text(textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        if __name__ != "__main__":
            open(os.path.join({str(tmp_path)!r}, f"ran-again-{{os.getpid()}}"), "w").close()
        from mlmprep.cli import main
        if __name__ == "__main__":
            if not {as_package_main}:
                import mlmprep.cli
                mlmprep.cli.as_package_main = lambda: None
            sys.argv = ["mlmprep", "build", {str(tiny_corpus)!r}, "--tokenizer", {str(tiny_tokenizer_path)!r},
                        "--out", {str(tmp_path / "out")!r}, "--workers", "2", "--shard-bytes", "3000"]
            sys.exit(main())
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "out" / "manifest.json").exists(), proc.stderr
    ran_again = list(tmp_path.glob("ran-again-*"))
    assert bool(ran_again) != as_package_main, ran_again  # without it: in each worker


def test_a_build_that_may_be_up_to_date_starts_no_workers_before_its_check(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """A server started for nothing costs a core-second and holds the command's stdout open that long."""
    proc = run_script(f"""
        from mlmprep.builder.engine import local
        calls = []
        start = local.start_forkserver

        def spy(module, tokenizer=None):
            calls.append(module)
            return start(module, tokenizer)

        if __name__ == "__main__":
            local.start_forkserver = spy
            from mlmprep.cli import main
            args = ["mlmprep", "build", {str(tiny_corpus)!r}, "--tokenizer", {str(tiny_tokenizer_path)!r},
                    "--out", {str(tmp_path / "out")!r}, "--workers", "2", "--shard-bytes", "3000"]
            for more in ([], [], ["--force"]):  # built, up to date, rebuilt
                sys.argv = args + more
                before = len(calls)
                try:
                    main()
                except SystemExit as stop:
                    print("RUN", stop.code, len(calls) - before)
    """)
    out, err = communicate(proc, timeout=120)
    runs = [line.split()[1:] for line in out.splitlines() if line.startswith("RUN")]
    assert len(runs) == 3 and all(code == "0" for code, _ in runs), err
    assert "up to date" in out
    first, again, forced = (int(n) for _, n in runs)
    assert first > 0 and again == 0 and forced > 0, runs


def test_the_driver_of_a_build_on_workers_never_loads_numba_or_pyarrow(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """Numba costs the driver most of a second of one core between the phases, where the workers wait on it;
    pyarrow 0.14 s at its start (the workers write every Arrow file)."""
    proc = run_script(f"""
        from tests.conftest import build_tiny
        if __name__ == "__main__":
            build_tiny({str(tmp_path / "out")!r}, {str(tiny_corpus)!r}, {str(tiny_tokenizer_path)!r}, workers=2,
                       shard_bytes=3000, rows_per_file=40)
            print("numba" in sys.modules, "pyarrow" in sys.modules)
    """)
    out, err = communicate(proc, timeout=120)
    assert proc.returncode == 0 and out.split() == ["False", "False"], err
    assert len(list((tmp_path / "out" / "seed-0").glob("*.arrow"))) > 1  # it did run on workers, in several tasks


@pytest.mark.parametrize("workers", [1, 2])
def test_a_task_error_arrives_as_its_own_class_and_message_and_stops_the_rest(tmp_path, workers):
    shards = [Shard(i, wait=0.3, marker=str(tmp_path)) for i in range(3)] + [Shard(3)]
    shards += [Shard(i, wait=0.3, marker=str(tmp_path)) for i in range(4, 20)]
    with pytest.raises(CorpusError) as raised:
        run_tasks(fail_on_three, shards, engine=LocalEngine(workers=workers))
    assert str(raised.value) == "corpus.txt at byte 300: not UTF-8; pass --on-decode-error replace"
    time.sleep(0.5)  # any task still running would mark its file by now
    assert len(list(tmp_path.iterdir())) < 19


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bug_in_a_task_is_one_line_naming_the_task_and_the_line(workers):
    with pytest.raises(TaskFailed) as raised:
        run_tasks(buggy, [Shard(0), Shard(1)], engine=LocalEngine(workers=workers))
    message = str(raised.value)
    assert message.startswith("shard 1 of corpus.txt failed: KeyError: 1 (at test_engine.py:")
    assert "\n" not in message and not isinstance(raised.value, MlmprepError)


def run_script(body: str, **kwargs) -> subprocess.Popen:
    """A Python script running tasks from this module, in its own process group."""
    script = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kwargs)


def communicate(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Wait for a script; one still running at the timeout is killed with its whole group (and the test fails)."""
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def suicide_on_two(shard: Shard) -> int:
    if shard.index == 2:
        time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(shard.wait)
    return shard.index


# ProcessPoolExecutor's clean-up after a dead worker fails the futures it holds, but one submitted meanwhile (a
# worker killed while tasks are still being submitted) is never failed: the driver watches its workers itself.
EXECUTOR_MISSES_THE_FUTURES = """
    import concurrent.futures.process as cfp

    clean_up = cfp._ExecutorManagerThread.terminate_broken

    def misses(self, cause):  # as if every future had been submitted after the clean-up's look
        self.pending_work_items.clear()
        clean_up(self, cause)

    cfp._ExecutorManagerThread.terminate_broken = misses
"""


# Submitting beside a dead worker can fail in the executor itself: spawning a worker through the forkserver
# met a closed pipe (OSError EBADF) in a CI run, not BrokenProcessPool. Here the 4th submit meets it once shard
# 2's worker has died.
EXECUTOR_SUBMIT_FAILS = """
    import concurrent.futures.process as cfp
    import errno
    import time

    submit, calls = cfp.ProcessPoolExecutor.submit, []

    def fails_after_a_death(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 4:
            deadline = time.monotonic() + 150  # a loaded machine starts workers slowly
            while time.monotonic() < deadline and all(p.exitcode is None for p in list(self._processes.values())):
                time.sleep(0.01)
            raise OSError(errno.EBADF, "Bad file descriptor")
        return submit(self, *args, **kwargs)

    cfp.ProcessPoolExecutor.submit = fails_after_a_death
"""


@pytest.mark.parametrize("executor", ["as-is", "missing-its-futures", "submit-fails"])
def test_a_worker_killed_mid_task_fails_the_run_with_one_line_and_no_hang(executor):
    prelude = {"as-is": "", "missing-its-futures": textwrap.dedent(EXECUTOR_MISSES_THE_FUTURES),
               "submit-fails": textwrap.dedent(EXECUTOR_SUBMIT_FAILS)}[executor]
    proc = run_script(prelude + textwrap.dedent("""
        from mlmprep.builder.engine.base import TaskFailed, run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import Shard, suicide_on_two
        if __name__ == "__main__":
            try:
                run_tasks(suicide_on_two, [Shard(i, wait=0.3) for i in range(8)], engine=LocalEngine(workers=2))
            except TaskFailed as exc:
                print(exc)
    """))
    out, err = communicate(proc, timeout=240)
    assert proc.returncode == 0, err
    assert out.strip() == ("a build worker died (signal 9) while running shard 2 of corpus.txt; "
                           "nothing was published"), err


def suicide_after_masking(shard: Shard) -> int:
    """Shard 2 runs a parallel masking kernel (Numba's threading layer starts), then is killed."""
    if shard.index == 2:
        import numpy as np

        from mlmprep.builder import mask

        mask.span_corrupt(np.arange(10, 74, dtype=np.int32), np.array([0, 64]), seed=0, first_row=0, noise_density=0.15,
                          mean_span_length=3.0, sentinels=np.arange(200, 190, -1, dtype=np.int32), eos_id=1)
        os.kill(os.getpid(), signal.SIGKILL)
    return shard.index


def test_a_worker_killed_after_masking_leaves_the_resource_tracker_nothing_to_warn_about():
    """Numba's threading layer takes a multiprocessing lock as it starts; one from a worker killed afterwards
    must not be a named semaphore, which the resource tracker would report at exit below the one error line."""
    proc = run_script("""
        from mlmprep.builder.engine.base import TaskFailed, run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import Shard, suicide_after_masking
        if __name__ == "__main__":
            try:
                run_tasks(suicide_after_masking, [Shard(i) for i in range(4)], engine=LocalEngine(workers=2))
            except TaskFailed as exc:
                print(exc)
    """)
    out, err = communicate(proc, timeout=120)
    assert "a build worker died (signal 9) while running shard 2" in out
    assert proc.returncode == 0 and err == "", err


def sleep_long(shard: Shard) -> int:
    Path(shard.marker, str(shard.index)).touch()
    time.sleep(600)
    return shard.index


def test_ctrl_c_stops_the_workers_promptly(tmp_path):
    proc = run_script(f"""
        from mlmprep.builder.engine.base import run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import Shard, sleep_long
        if __name__ == "__main__":
            try:
                run_tasks(sleep_long, [Shard(i, marker={str(tmp_path)!r}) for i in range(4)],
                          engine=LocalEngine(workers=2))
            except KeyboardInterrupt:
                sys.exit(130)
    """)
    for _ in range(1200):  # both workers inside a task
        if len(list(tmp_path.iterdir())) == 2:
            break
        time.sleep(0.05)
    family = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    communicate(proc, timeout=60)
    assert proc.returncode == 130
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive


def interrupted_at_57(index: int) -> tuple[int, int, float]:
    """where_and_when, with a Ctrl-C arriving during task 57."""
    if index == 57:
        os.kill(os.getpid(), signal.SIGINT)
    return where_and_when(index)


def test_ctrl_c_stops_the_driver_running_tasks_while_its_workers_start():
    proc = run_script("""
        import mlmprep.builder.engine.local
        from mlmprep.builder.engine.base import run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import SlowToStart, interrupted_at_57, where_and_when
        if __name__ == "__main__":
            mlmprep.builder.engine.local.ProcessPoolExecutor = SlowToStart
            ran = []
            try:
                run_tasks(where_and_when, range(60), engine=LocalEngine(workers=2),
                          in_driver=lambda index: ran.append(index) or interrupted_at_57(index))
            except KeyboardInterrupt:
                print(ran)
    """)
    out, err = communicate(proc, timeout=60)
    assert proc.returncode == 0 and out.strip() == "[59, 58, 57]", err


def test_workers_end_with_a_driver_killed_by_sigkill(tmp_path):
    proc = run_script(f"""
        from mlmprep.builder.engine.base import run_tasks
        from mlmprep.builder.engine.local import LocalEngine
        from tests.builder.test_engine import Shard, sleep_long
        if __name__ == "__main__":
            run_tasks(sleep_long, [Shard(i, marker={str(tmp_path)!r}) for i in range(4)], engine=LocalEngine(workers=2))
    """)
    for _ in range(1200):  # both workers inside a task
        if len(list(tmp_path.iterdir())) == 2:
            break
        time.sleep(0.05)
    family = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)  # the driver only, as the OOM killer would
    communicate(proc, timeout=60)
    gone, alive = psutil.wait_procs(family, timeout=30)
    for process in alive:  # do not leave them behind when the test fails
        process.kill()
    assert not alive


def test_a_failed_task_exits_1_through_the_cli_and_a_user_error_2(capsys):
    def fail(exc):
        raise exc

    for exc, code in ((TaskFailed("a build worker died (signal 9)"), 1), (CorpusError("corpus.txt: bad"), 2)):
        with pytest.raises(typer.Exit) as raised:
            cli_errors(fail)(exc)
        assert raised.value.exit_code == code
        assert capsys.readouterr().err == f"error: {exc}\n"


def test_engine_options_change_no_build_identity_and_ray_needs_absolute_paths(tmp_path):
    plain = BuildConfig(out=str(tmp_path / "out"))
    scaled = BuildConfig(out=str(tmp_path / "out"), workers=7, engine="ray", ray_address="10.0.0.1:6379")
    assert plain.identity() == scaled.identity()
    with pytest.raises(ConfigError, match="--engine ray: rel/out is a relative path"):
        BuildConfig(out="rel/out", engine="ray")
    with pytest.raises(ConfigError, match="--engine ray: corpus.txt is a relative path"):
        BuildConfig(corpus=("corpus.txt",), out=str(tmp_path), engine="ray")
    with pytest.raises(ConfigError, match="--engine ray: eval.jsonl is a relative path"):  # a worker reads it
        BuildConfig(exclude=("eval.jsonl",), out=str(tmp_path), engine="ray")
    with pytest.raises(ConfigError, match="--workers must be at least 0"):
        BuildConfig(workers=-1)
    BuildConfig(corpus=("s3://bucket/corpus/",), out="gs://bucket/out", engine="ray")  # what every node reaches


def test_ray_refuses_a_dataset_directory_given_by_a_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saved").mkdir()
    with pytest.raises(ConfigError, match="--engine ray: saved is a relative path"):
        BuildConfig(dataset="saved", out=str(tmp_path / "out"), engine="ray")
    BuildConfig(dataset=str(tmp_path / "saved"), out=str(tmp_path / "out"), engine="ray")
    BuildConfig(dataset="wikitext:wikitext-2-raw-v1", out=str(tmp_path / "out"), engine="ray")  # a hub name


def test_ray_missing_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ConfigError, match=r'--engine ray needs Ray: pip install "mlmprep\[ray\]"'):
        run_tasks(cube_later, [Shard(0)], engine=RayEngine())


def test_the_engine_option_picks_the_engine_class():
    assert make_engine("local", 3) == LocalEngine(3)
    assert make_engine("ray", 5, "10.0.0.1:6379") == RayEngine(5, "10.0.0.1:6379")
    assert LocalEngine.shares_disk and not RayEngine.shares_disk  # Ray nodes see no scratch file of the driver
    with pytest.raises(ConfigError, match="--engine must be local or ray, got 'spark'"):
        make_engine("spark")


def test_describe_names_the_engine():
    assert LocalEngine(workers=1).describe() == "in-process"
    assert LocalEngine(workers=3).describe() == "local, 3 workers"
    assert RayEngine(ray_address="10.0.0.1:6379").describe() == "ray (10.0.0.1:6379)"


def test_one_process_reads_a_corpus_in_as_few_shards_as_their_memory_allows():
    """With one process there is no last round of tasks to even out among workers: each task's fixed cost is paid
    as few times as the cap on a shard's size lets it be, where workers get 24 tasks each."""
    one, two = LocalEngine(workers=1), LocalEngine(workers=2)
    assert one.shard_bytes(3_000_000) == 3_000_000 and one.shard_bytes(12_000_000) == 4 << 20
    assert one.shard_bytes(100_000) == 256 << 10 and one.shard_bytes(12_000_000, given=5000) == 5000
    assert two.shard_bytes(24_000_000) == 24_000_000 // 48


@pytest.mark.parametrize("engine", [LocalEngine(workers=2), LocalEngine(workers=16), RayEngine(workers=64)])
def test_a_large_corpus_is_read_in_shards_of_at_most_4_mib_so_a_readers_memory_is_not_set_by_the_corpus(
        tmp_path, engine):
    from mlmprep.corpus.shards import file_shards

    corpus = tmp_path / "big.txt"
    with open(corpus, "wb") as f:  # sparse: planning never reads a byte
        f.truncate(3 << 30)
    shards = file_shards([(corpus, corpus.stat().st_size)], engine.shard_bytes(corpus.stat().st_size))
    assert max(s.nbytes for s in shards) <= 4 << 20 and len(shards) == (3 << 30) // (4 << 20)
    assert sum(s.nbytes for s in shards) == 3 << 30
    small = 12_000_000  # below the cap, tasks are still shared out evenly: 24 a worker
    assert engine.shard_bytes(small) == max(256 << 10, small // (24 * engine.parallelism()))
    assert engine.shard_bytes(3 << 30, given=64 << 20) == 64 << 20  # --shard-bytes is the user's to raise
