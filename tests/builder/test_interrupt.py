"""Ctrl-C stops `mlmprep build` promptly in every stage, exit code 130, with nothing left under the output name;
SIGTERM to the build's process alone (`kill`, `timeout`, a scheduler) does the same, exit code 143.

Each build runs as a real process in its own process group, and the group gets SIGINT (what Ctrl-C at a terminal
sends: the build and its worker processes) once its staging directory `.DIR.partial` shows the stage:
  training     the stage exists and holds no tokenizer.json yet, a couple of seconds in (the tokenizers trainer
               is then in its Rust EM loop, which holds the thread that called it for a minute on this corpus);
  tokenizing   `seed-0/` exists and no data file yet (as in test_crash);
  writing      `windows/` holds data.
The only bound on time is a generous one on the wait for the process to end after the signal.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from tests.builder.test_crash import POLL_S, big_corpus, stage_of, tokenizing, writing  # noqa: F401 (big_corpus: a fixture)
from tests.cli.test_build import build_args, cli_command, cli_env, leftovers

EXIT_BOUND_S = 30  # the process must end within this after SIGINT (the fix ends it within a second)
INTERRUPTED_LINE = "interrupted; nothing was left under the output name"
TERMINATED_LINE = "terminated; nothing was left under the output name"
TRAINING_WAIT_S = 2.0  # into training before the signal: the corpus is read, the EM loop runs
TRAINER_GONE_S = 2.0  # the tokenizer trainer's child process is gone this soon after the command ends
TRAINER_CPU_S = 1.0  # the trainer's CPU seconds before Ctrl-C: past loading the sample, in its native training


@pytest.fixture(scope="module")
def slow_to_train(tmp_path_factory) -> Path:
    """6 MB of random letter-words: far more distinct pieces than the tiny corpus, about ten seconds of
    Unigram training on 2 cores (most of it in one native call, in the trainer's child process)."""
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 10))) for _ in range(200_000)]
    path = tmp_path_factory.mktemp("interrupt") / "random.txt"
    path.write_text("\n".join(" ".join(rng.choices(words, k=20)) for _ in range(40_000)) + "\n", encoding="utf-8")
    return path


def training(stage: Path) -> bool:
    return stage.is_dir() and not (stage / "tokenizer.json").exists()


def start(args: list) -> subprocess.Popen:
    """The CLI as a real process in a new process group, as a shell runs a foreground job."""
    return subprocess.Popen(cli_command(*args), env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


@contextmanager
def running(args: list) -> Iterator[subprocess.Popen]:
    """The CLI as a real process (see start); what is left of its process group when the block ends (the test
    failed) is killed."""
    proc = start(args)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def ctrl_c(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    """Press Ctrl-C (SIGINT to the whole process group, as a terminal does); the process's result, with `pid`
    its process group's id."""
    os.killpg(proc.pid, signal.SIGINT)
    return ended(proc)


def terminate(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    """SIGTERM to the command's process alone, as `kill PID` or a job scheduler sends it (its workers get none);
    its result as ctrl_c's."""
    os.kill(proc.pid, signal.SIGTERM)
    return ended(proc)


def ended(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = proc.communicate(timeout=EXIT_BOUND_S)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    result.pid = proc.pid
    return result


def interrupt_when(args: list, out: Path, point: Callable[[Path], bool], settle_s: float = 0.0,
                   stop: Callable[[subprocess.Popen], subprocess.CompletedProcess] = ctrl_c
                   ) -> subprocess.CompletedProcess:
    """Run a build, press Ctrl-C (or `stop` it) once `point(stage)` holds (and still holds `settle_s` later); return
    its result."""
    stage = stage_of(out)
    with running(args) as proc:
        while not point(stage):
            assert proc.poll() is None, f"the build ended before {point.__name__}: {proc.stderr.read()}"
            time.sleep(POLL_S)
        time.sleep(settle_s)
        assert point(stage), f"past {point.__name__} before the signal"
        return stop(proc)


def group_gone(pgid: int, bound_s: float = EXIT_BOUND_S) -> bool:
    """No process of the group is left (the build's workers included), waiting up to bound_s."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


PROGRESS_LINE = re.compile(r"[A-Za-z ,:]+: [\d.,]+ of [\d.,]+ [A-Za-z]+ \(\d+%, \d+ s\)")  # every 10 s, off a terminal


def assert_interrupted(result: subprocess.CompletedProcess, out: Path, code: int = 130,
                       expected: str = INTERRUPTED_LINE) -> None:
    assert result.returncode == code, result.stderr
    # no traceback, no warning, no abort from a thread; a build slowed by a loaded machine logs its progress too
    assert [line for line in result.stderr.splitlines() if not PROGRESS_LINE.match(line)] == [expected]
    assert leftovers(out) == []  # no DIR, no .DIR.partial, no .DIR.lock
    assert group_gone(result.pid), "processes of the build are still running"


def test_ctrl_c_while_the_tokenizer_trains_stops_the_build(tmp_path, slow_to_train):
    out = tmp_path / "out"
    args = ["build", slow_to_train, "--out", out, "--vocab-size", "8000", "--input-length", "32", "--seeds", "1"]
    assert_interrupted(interrupt_when(args, out, training, settle_s=TRAINING_WAIT_S), out)


@pytest.mark.parametrize("point", [tokenizing, writing], ids=lambda p: p.__name__)
def test_ctrl_c_while_tokenizing_or_writing_stops_the_build(tmp_path, big_corpus, tok, point):  # noqa: F811 (a fixture)
    out = tmp_path / "out"
    # one line: the workers stopped mid-task leave no semaphore for multiprocessing's resource tracker to warn of
    assert_interrupted(interrupt_when(build_args(big_corpus, out, tok), out, point), out)


@pytest.mark.parametrize("point", [tokenizing, writing], ids=lambda p: p.__name__)
def test_sigterm_to_the_build_alone_stops_it_and_its_workers_as_ctrl_c_does(tmp_path, big_corpus, tok,  # noqa: F811
                                                                            point):
    out = tmp_path / "out"
    result = interrupt_when(build_args(big_corpus, out, tok), out, point, stop=terminate)
    assert_interrupted(result, out, code=143, expected=TERMINATED_LINE)  # the workers too: none is left running


def trainer_process(proc: subprocess.Popen) -> psutil.Process | None:
    """The tokenizer trainer's child process of `proc`, if it has started."""
    for child in psutil.Process(proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "mlmprep.tokenizer.unigram" in child.cmdline():
                return child
    return None


def cpu_s(process: psutil.Process) -> float:
    with contextlib.suppress(psutil.NoSuchProcess):
        times = process.cpu_times()
        return times.user + times.system
    return 0.0


def test_ctrl_c_while_tokenizer_train_runs_leaves_no_file(tmp_path, slow_to_train):
    out = tmp_path / "tok.json"
    with running(["tokenizer", "train", slow_to_train, "--out", out, "--vocab-size", "8000"]) as proc:
        deadline = time.monotonic() + EXIT_BOUND_S
        while (trainer := trainer_process(proc)) is None or cpu_s(trainer) < TRAINER_CPU_S:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.05)
        # Frozen, the trainer stands for one deep in a native call that will not look at a signal (nor write
        # the log line whose broken pipe would end it) for a long while: the command must end it itself.
        trainer.suspend()
        result = ctrl_c(proc)
        assert result.returncode == 130, result.stderr
        assert result.stderr.splitlines() == [INTERRUPTED_LINE] and group_gone(proc.pid, TRAINER_GONE_S)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
