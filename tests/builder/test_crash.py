"""SIGKILL at any point of `mlmprep build` never leaves a half-written directory under the output name, and
re-running the same command cleans up after it and writes the same bytes as an uninterrupted build.

mlmprep has no test hook, so each kill point is found by watching the staging directory `.DIR.partial`:
  tokenizing   `shards/` exists (the reading tasks write their token ids there) and no data file has been
               written yet;
  writing      `windows/` holds a data file: the output files are being masked and written, no split is closed;
  publishing   `manifest.json` exists in the stage: everything is written and only the swap is left, or
               the swap is done and the stage now holds the old build being removed.
The swap itself is one atomic rename, so that run rebuilds (--force) over an older build padded with
thousands of files: removing them after the swap leaves time to kill in.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_build import build_args, cli, cli_command, cli_env, comparable, data_files, leftovers, manifest
from tests.conftest import tiny_documents

CORPUS_BYTES = 3_000_000  # a build of a few seconds: about a second of tokenizing, then masking and writing
OLD_FILES = 6000  # padding the old build: ~0.2 s of removal right after the swap
POLL_S = 0.002


@pytest.fixture(scope="module")
def big_corpus(tmp_path_factory) -> Path:
    text = ("\n".join(tiny_documents()) + "\n").encode()
    path = tmp_path_factory.mktemp("crash") / "big.txt"
    path.write_bytes(text * (CORPUS_BYTES // len(text)))
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory, big_corpus, tok) -> Path:
    """The uninterrupted build every interrupted one must end up equal to."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert cli(*build_args(big_corpus, out, tok)).exit_code == 0
    return out


def stage_of(out: Path) -> Path:
    return out.parent / f".{out.name}.partial"


def split_files(stage: Path, pattern: str) -> list[Path]:
    return list(stage.glob(f"*/{pattern}"))


def tokenizing(stage: Path) -> bool:
    return (stage / "shards").is_dir() and not split_files(stage, "*.arrow")


def writing(stage: Path) -> bool:
    return any(p.stat().st_size > 0 for p in (stage / "windows").glob("part-*.arrow"))


def publishing(stage: Path) -> bool:
    """Written and about to swap, or swapped and removing the old build (padded with `padding/`)."""
    return (stage / "manifest.json").is_file() or (stage / "padding").is_dir()


def assert_complete_or_absent(out: Path) -> None:
    """What anyone may see under the output name: nothing, or a build with its manifest."""
    try:
        names = os.listdir(out)
    except FileNotFoundError:
        return
    assert "manifest.json" in names, f"half-written {out}: {sorted(names)}"


def kill_when(args: list, out: Path, point: Callable[[Path], bool], env: dict | None = None) -> int:
    """Run a build as a real process (with `env` added), SIGKILL it once `point(stage)` holds, checking `out` all
    the while; its pid."""
    proc = subprocess.Popen(cli_command(*args), env={**cli_env(), **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    stage = stage_of(out)
    try:
        while proc.poll() is None:
            assert_complete_or_absent(out)
            try:
                reached = point(stage)
            except OSError:  # a file renamed or removed between listing and stat
                reached = False
            if reached:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(POLL_S)
        assert proc.wait(60) == -signal.SIGKILL, f"the build ended before the kill point {point.__name__}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert point(stage), f"killed past {point.__name__}"  # the process is dead: its stage is frozen
    assert_complete_or_absent(out)
    return proc.pid


def finish(args: list, out: Path, reference: Path) -> None:
    """Re-run the same command over the leftovers: it builds (never 'up to date' from a stage), cleans up
    the stage, the lock and any .DIR.old, and writes exactly the reference's bytes."""
    assert {f".{out.name}.partial", f".{out.name}.lock"} <= set(leftovers(out))  # what the kill left
    result = cli(*args)
    assert result.exit_code == 0, result.stderr
    assert "up to date" not in result.stdout
    assert leftovers(out) == [out.name] and not (out.parent / f".{out.name}.old").exists()
    assert data_files(out) == data_files(reference)
    assert comparable(manifest(out)) == comparable(manifest(reference))


def test_a_fresh_build_killed_while_tokenizing_or_writing_leaves_nothing(tmp_path, big_corpus, tok, reference):
    out = tmp_path / "out"
    args = build_args(big_corpus, out, tok)
    kill_when(args, out, tokenizing)
    assert not out.exists() and (stage_of(out) / "tokenizer.json").is_file()
    kill_when(args, out, writing)  # over the first kill's stage and lock
    assert not out.exists() and not split_files(stage_of(out), "state.json")
    finish(args, out, reference)


def test_a_rebuild_killed_while_publishing_shows_the_old_or_the_new_build_whole(tmp_path, big_corpus, tok, reference,
                                                                                tiny_corpus):
    out = tmp_path / "out"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    padding = out / "padding"
    padding.mkdir()
    for k in range(OLD_FILES):
        (padding / f"f{k}").write_bytes(b"")
    old = data_files(out)
    args = [*build_args(big_corpus, out, tok), "--force"]
    kill_when(args, out, publishing)
    assert out.is_dir()  # never missing: the publish is an atomic swap
    assert data_files(out) in (old, data_files(reference))  # one build whole, not a mix
    inspected = cli("inspect", out, "--examples", "1")
    assert inspected.exit_code == 0
    finish(args, out, reference)


def test_a_worker_killed_mid_build_fails_in_one_line_and_publishes_nothing(tmp_path, big_corpus, tok):
    """SIGKILL one worker process of a --workers 2 build while its tasks read and tokenize."""
    import psutil

    out = tmp_path / "out"
    args = [*build_args(big_corpus, out, tok), "--workers", "2", "--shard-bytes", "200000"]
    proc = subprocess.Popen(cli_command(*args), env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    killed = None
    try:
        while proc.poll() is None and killed is None:
            if tokenizing(stage_of(out)):
                workers = [p for p in psutil.Process(proc.pid).children(recursive=True) if p.ppid() != proc.pid]
                if workers:  # the forkserver is the driver's child; the workers are its children
                    killed = workers[0]
                    killed.send_signal(signal.SIGKILL)
            time.sleep(POLL_S)
        stderr = proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert killed is not None, "the build ended before a worker could be killed"
    assert len(stderr.splitlines()) == 1, stderr  # under load the kill can come while tasks are still submitted
    line = stderr.strip()
    assert line.startswith("error: ") and "worker died" in line and "signal 9" in line, line
    assert proc.returncode != 0 and not out.exists()
    assert leftovers(out) == []


def test_a_killed_builds_temporary_files_go_with_the_next_build(tmp_path, big_corpus, tok, reference):
    """A --workers 2 build killed outright leaves its workers' socket directory in TMPDIR (multiprocessing's
    pymp-* before, which no one removed); the next build removes it, and leaves nothing there itself."""
    import shutil
    import socket
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="mt", dir="/tmp"))  # short: a socket's path in it must fit in 108 bytes
    try:
        out = tmp_path / "out"
        args = [*build_args(big_corpus, out, tok), "--workers", "2"]
        pid = kill_when(args, out, tokenizing, {"TMPDIR": str(tmp)})
        left = sorted(p.name for p in tmp.iterdir())
        assert left and all(name.startswith(f"mlmprep-{pid}-{socket.gethostname()}.") for name in left), left
        again = subprocess.run(cli_command(*args), env={**cli_env(), "TMPDIR": str(tmp)}, capture_output=True,
                               text=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert list(tmp.iterdir()) == []
        assert data_files(out) == data_files(reference)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def partitions_staged(stage: Path) -> bool:
    """--dedup-partitions: a reading task has staged its keys for the partition tasks."""
    return any((stage / "shards").glob("shard-*.dedup"))


def test_a_build_killed_with_dedup_partitions_staged_leaves_nothing_and_reruns_to_the_in_driver_bytes(
        tmp_path, big_corpus, tok, reference):
    """The partitions' files live in the stage: a kill leaves them there, and the next run removes them with it
    and writes the bytes of the build that deduplicated in the driver."""
    out = tmp_path / "out"
    args = [*build_args(big_corpus, out, tok), "--dedup-partitions", "3", "--shard-bytes", "200000"]
    kill_when(args, out, partitions_staged)
    assert not out.exists()
    finish(args, out, reference)
