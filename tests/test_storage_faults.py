"""Object-store faults, against a real S3 server (moto's, on loopback) behind a fault-injecting proxy: a store
that is not there, an outage longer than the retries, a short one, a build killed while it holds the lock.
Each is one line and exit 2 or a clean success; a lock left behind names its owner and is taken over by the next
build (on this host, once its process is gone; from elsewhere, with --force); killed builds' scratch goes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

from tests.cli.test_build import assert_refused, build_args, cli_command, cli_env, data_files
from tests.s3server import Fault
from tests.test_storage import listing, local_reference, remote_files, run  # noqa: F401 (local_reference: a fixture)

pytest.importorskip("s3fs")
pytest.importorskip("moto")

NOWHERE = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_MAX_ATTEMPTS": "1"}  # nothing listens on port 1: every connection is refused


@pytest.mark.parametrize("command", [["verify", "s3://b/x"], ["inspect", "s3://b/x"],
                                     ["inspect", "s3://b/x", "--html", "{tmp}/r.html"],
                                     ["remask", "s3://b/x", "--seeds", "3"], ["build", "--out", "s3://b/x"],
                                     ["train", "s3://b/x", "--out", "{tmp}/run"]])
def test_an_unreachable_store_is_one_line_naming_the_url(tmp_path, command):
    start = time.monotonic()
    result = run(*[a.format(tmp=tmp_path) for a in command], env=NOWHERE, timeout=120)
    assert_refused(result.returncode, result.stderr, "s3://b/x", "did not answer", "AWS_ENDPOINT_URL")
    assert time.monotonic() - start < 60  # bounded: AWS_MAX_ATTEMPTS acts
    assert list(tmp_path.iterdir()) == []


def outage(proxy, seconds: float, method: str = "PUT", where: str = "/windows/") -> Fault:
    """From the first `method` request for a path with `where` in it, every connection is reset for `seconds`."""
    began = []

    def down(m: str, path: str) -> bool:
        if not began and m == method and where in path:
            began.append(time.monotonic())
        return bool(began) and time.monotonic() - began[0] < seconds

    return proxy.add(Fault(down, kind="reset", times=10**9))


def cut_off(proxy, attempts: int, method: str = "PUT", where: str = "/windows/") -> Fault:
    """The first `method` request for a path with `where` in it and the next `attempts` - 1 requests for that path
    are reset: an outage counted in attempts, not seconds (botocore's jittered waits may all be short)."""
    first = []

    def down(m: str, path: str) -> bool:
        if not first and m == method and where in path:
            first.append((m, path))
        return first == [(m, path)]

    return proxy.add(Fault(down, kind="reset", times=attempts))


def test_a_short_outage_mid_upload_is_retried_quietly(s3, s3_proxy, tiny_corpus, tok, local_reference):  # noqa: F811
    out = f"s3://{s3.bucket()}/data"
    fault = cut_off(s3_proxy, 4)  # one upload's first 4 attempts: its fifth, the default's last, goes through
    result = run(*build_args(tiny_corpus, out, tok), env={})
    assert result.returncode == 0 and result.stderr == "", result.stderr  # no asyncio task noise either
    assert fault.hits == 4
    assert remote_files(s3, out) == data_files(local_reference)


def test_a_long_outage_is_one_line_and_the_next_build_takes_the_lock_over(s3, s3_proxy, tiny_corpus, tok,
                                                                          local_reference):  # noqa: F811
    out = f"s3://{s3.bucket()}/data"
    fault = outage(s3_proxy, 3600.0)
    failed = run(*build_args(tiny_corpus, out, tok), env={"AWS_MAX_ATTEMPTS": "2"})
    assert_refused(failed.returncode, failed.stderr, "did not answer in 2 attempts", "then run it again")
    assert ".mlmprep-lock" in listing(s3, out) and "manifest.json" not in listing(s3, out)  # left: no store
    lock = json.loads(s3.fs().cat(out.removeprefix("s3://") + "/.mlmprep-lock"))
    assert lock["host"] == socket.gethostname() and lock["since"].endswith("Z")
    fault.times = 0  # the store is back; what the failed build uploaded is an unfinished build: --force replaces it
    again = run(*build_args(tiny_corpus, out, tok, "--force"), env={})
    assert again.returncode == 0, again.stderr
    assert f"taking over the lock of pid {lock['pid']} on {lock['host']}" in again.stdout + again.stderr
    assert "no longer runs" in again.stdout + again.stderr
    assert remote_files(s3, out) == data_files(local_reference) and ".mlmprep-lock" not in listing(s3, out)


def test_a_lock_from_another_host_is_named_and_taken_over_only_with_force(s3, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    held = {"host": "elsewhere", "pid": 4242, "id": "x", "since": "2026-01-02T03:04:05Z"}
    s3.fs().pipe(out.removeprefix("s3://") + "/.mlmprep-lock", json.dumps(held).encode())
    refused = run(*build_args(tiny_corpus, out, tok), env={})
    assert_refused(refused.returncode, refused.stderr, "pid 4242 on elsewhere, since 2026-01-02T03:04:05Z",
                   "--force")
    assert listing(s3, out) == [".mlmprep-lock"]
    forced = run(*build_args(tiny_corpus, out, tok, "--force"), env={})
    assert forced.returncode == 0, forced.stderr
    assert "taking over the lock of pid 4242 on elsewhere" in forced.stdout + forced.stderr
    assert "manifest.json" in listing(s3, out) and ".mlmprep-lock" not in listing(s3, out)


def test_a_killed_builds_lock_and_scratch_are_taken_over_and_removed(s3, s3_proxy, tmp_path, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    stall = outage(s3_proxy, 3600.0)  # the build waits on its upload, lock held, scratch full
    env = {**cli_env(), "TMPDIR": str(tmp_path), "AWS_MAX_ATTEMPTS": "20"}
    build = subprocess.Popen(cli_command(*build_args(tiny_corpus, out, tok)), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not stall.hits and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(build.pid, signal.SIGKILL)
    build.wait()
    (scratch,) = tmp_path.glob(f"mlmprep-{build.pid}-*")
    assert sum(f.stat().st_size for f in scratch.rglob("*") if f.is_file()) > 10_000
    alive = tmp_path / f"mlmprep-{os.getpid()}-{scratch.name.split('-', 2)[2]}"  # a running process's: kept
    alive.mkdir()
    stall.times = 0
    again = subprocess.run(cli_command(*build_args(tiny_corpus, out, tok, "--force")), env=env, capture_output=True,
                           text=True)
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith(f"note: --out {out}: taking over the lock of pid {build.pid}")
    assert not scratch.exists() and alive.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == [alive.name]


def test_a_lock_left_on_this_host_by_a_process_that_is_gone_is_taken_over_without_force(s3, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names no process now
    held = {"host": socket.gethostname(), "pid": gone.pid, "id": "x", "since": "2026-01-02T03:04:05Z"}
    s3.fs().pipe(out.removeprefix("s3://") + "/.mlmprep-lock", json.dumps(held).encode())
    result = run(*build_args(tiny_corpus, out, tok), env={})
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"note: --out {out}: taking over the lock of pid {gone.pid} on "
                                    f"{socket.gethostname()}, since 2026-01-02T03:04:05Z (that build no longer runs)")
    assert "manifest.json" in listing(s3, out) and ".mlmprep-lock" not in listing(s3, out)


def test_an_unfinished_build_under_a_gone_builds_lock_is_replaced_without_force(s3, tiny_corpus, tok,
                                                                                 local_reference):  # noqa: F811
    """A build that failed while its store was down could not remove what it had uploaded: the next build, taking
    over its lock (its process gone), replaces those files without --force and says so; objects that are not a
    build's stay refused, lock or no lock."""
    out = f"s3://{s3.bucket()}/data"
    prefix = out.removeprefix("s3://")
    gone = subprocess.Popen(["true"])
    gone.wait()
    held = {"host": socket.gethostname(), "pid": gone.pid, "id": "x", "since": "2026-01-02T03:04:05Z"}
    s3.fs().pipe(prefix + "/.mlmprep-lock", json.dumps(held).encode())
    s3.fs().pipe(prefix + "/seed-0/data-00000-of-00001.arrow", b"half an upload")
    result = run(*build_args(tiny_corpus, out, tok), env={})
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[:2] == [
        f"note: --out {out}: taking over the lock of pid {gone.pid} on {socket.gethostname()}, since "
        "2026-01-02T03:04:05Z (that build no longer runs)",
        f"note: --out {out}: replacing the unfinished files that build left (1 objects)"]
    assert remote_files(s3, out) == data_files(local_reference) and ".mlmprep-lock" not in listing(s3, out)
    s3.fs().rm(prefix, recursive=True)
    s3.fs().pipe(prefix + "/.mlmprep-lock", json.dumps(held).encode())
    s3.fs().pipe(prefix + "/notes.txt", b"someone else's")
    refused = run(*build_args(tiny_corpus, out, tok), env={})
    assert refused.returncode == 2 and "not an mlmprep build" in refused.stderr
    assert s3.fs().cat(prefix + "/notes.txt") == b"someone else's"


MLMPREP_LINES = ("note: ", "warning: ", "error: ")  # what mlmprep itself prints on stderr


@pytest.mark.parametrize("seconds, silent", [(3, False), (15, False), (15, True),
                                             pytest.param(60, False, marks=pytest.mark.slow)])
def test_a_store_that_goes_down_mid_upload_and_comes_back_leaves_only_mlmprep_lines(
        s3, switch_proxy, tmp_path, tiny_corpus, tok, local_reference, seconds, silent):  # noqa: F811
    """Every connection reset (or, `silent`, left unanswered) at the third PUT (the probe, the lock, then the files)
    for 3, 15 or 60 s: a build that rides it out prints nothing but mlmprep's own lines (asyncio's "Task
    exception was never retrieved ... Cannot write to closing transport" for each HTTP client task that failed on a
    dropped connection, before); one that outlasts its retries (botocore's attempts, and their quota of retries
    shared by the uploads under way) is one line naming the store, no scratch left, and the next build succeeds:
    the files it could not take back while the store was away stay under its lock, which the next build takes over
    with them."""
    out = f"s3://{s3.bucket()}/data"
    switch_proxy.down_at(3, seconds, silent=silent)
    env = {"TMPDIR": str(tmp_path)}
    start = time.monotonic()
    result = run(*build_args(tiny_corpus, out, tok), env=env, timeout=900)
    assert switch_proxy.puts >= 3 and (silent or switch_proxy.cut > 0)  # the outage met the build
    if result.returncode != 0:  # botocore's waits are jittered: even 3 s can outlast its 5 attempts
        assert_refused(result.returncode, result.stderr, out, "did not answer")
        assert list(tmp_path.iterdir()) == [] and "manifest.json" not in listing(s3, out)
        time.sleep(max(0.0, start + seconds - time.monotonic()))  # the store is back
        result = run(*build_args(tiny_corpus, out, tok), env=env)
    assert result.returncode == 0, result.stderr
    assert all(line.startswith(MLMPREP_LINES) for line in result.stderr.splitlines()), result.stderr
    assert remote_files(s3, out) == data_files(local_reference) and ".mlmprep-lock" not in listing(s3, out)
    assert list(tmp_path.iterdir()) == []


def test_a_build_stopped_between_its_commit_and_its_lock_removal_leaves_a_lock_the_next_build_removes(
        s3, tiny_corpus, tok, local_reference, monkeypatch):  # noqa: F811
    """The lock records the sha256 of the manifest its build is about to commit: one left beside that manifest
    (the build killed just before its end) is removed by the next build, from any host, without --force; a lock
    whose build did not commit stays refused."""
    import hashlib

    from mlmprep import storage
    from tests.cli.test_build import cli

    out = f"s3://{s3.bucket()}/data"
    remove = storage.remove
    monkeypatch.setattr(storage, "remove", lambda urls, options=None: remove(
        [u for u in urls if not u.endswith(storage.LOCK)], options))  # the lock's removal never happens
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    monkeypatch.setattr(storage, "remove", remove)
    lock = json.loads(s3.fs().cat(out.removeprefix("s3://") + "/.mlmprep-lock"))
    manifest = s3.fs().cat(out.removeprefix("s3://") + "/manifest.json")
    assert lock["committing"] == hashlib.sha256(manifest).hexdigest()
    lock["host"] = "elsewhere"  # as if left by a build on another machine
    s3.fs().pipe(out.removeprefix("s3://") + "/.mlmprep-lock", json.dumps(lock).encode())
    again = run(*build_args(tiny_corpus, out, tok, "--force"), env={})
    assert again.returncode == 0, again.stderr
    assert "a build that finished (its manifest is there)" in again.stderr
    assert ".mlmprep-lock" not in listing(s3, out) and remote_files(s3, out) == data_files(local_reference)
    lock["committing"] = "0" * 64  # its build never committed this manifest: a live build's, for all one knows
    s3.fs().pipe(out.removeprefix("s3://") + "/.mlmprep-lock", json.dumps(lock).encode())
    refused = run(*build_args(tiny_corpus, out, tok), env={})
    assert_refused(refused.returncode, refused.stderr, "locked by a build of pid", "--force")


@pytest.mark.parametrize("lands", [1, 99])
def test_an_upload_the_store_finishes_after_its_build_gave_up_is_taken_back_or_left_under_the_lock(
        s3, tiny_corpus, tok, local_reference, monkeypatch, lands):  # noqa: F811
    """A failed upload's cancelled requests can land after the build took its files back (the store had their
    bodies): the build looks again and removes them, so nothing is left, lock included; one that keeps landing past
    the last look leaves its files under the lock, which the next build takes over with them. Either way the next
    build succeeds without --force. The late upload lands right after each removal of it, `lands` times (not after
    a wait: a loaded machine would move it before or after the build's looks)."""
    from mlmprep import storage
    from mlmprep.errors import CacheError
    from tests.cli.test_build import cli

    out = f"s3://{s3.bucket()}/data"
    put, remove, fs = storage.put, storage.remove, s3.fs()
    late: dict = {}

    def cut_short(pairs, options=None):
        if len(pairs) < 2:
            return put(pairs, options)
        put(pairs[:-1], options)
        local, late["remote"] = pairs[-1]
        late["body"], late["left"] = local.read_bytes(), lands
        raise CacheError(f"{late['remote']}: the store did not answer in 5 attempts per request (planted)")

    def removing(urls, options=None):
        remove(urls, options)
        if late and late["remote"] in urls and late["left"] > 0:  # the cancelled upload lands after all
            late["left"] -= 1
            fs.pipe(late["remote"].removeprefix("s3://"), late["body"])

    monkeypatch.setattr(storage, "put", cut_short)
    monkeypatch.setattr(storage, "remove", removing)
    failed = cli(*build_args(tiny_corpus, out, tok))
    assert failed.exit_code == 2 and "planted" in failed.stderr
    fs.invalidate_cache()
    if lands > 1:
        assert ".mlmprep-lock" in listing(s3, out) and len(listing(s3, out)) > 1
        gone = subprocess.Popen(["true"])  # the failed build's process exits, as a command's does
        gone.wait()
        lock = out.removeprefix("s3://") + "/.mlmprep-lock"
        fs.pipe(lock, json.dumps({**json.loads(fs.cat(lock)), "pid": gone.pid}).encode())
    else:
        assert listing(s3, out) == []
    monkeypatch.setattr(storage, "put", put)
    monkeypatch.setattr(storage, "remove", remove)
    again = run(*build_args(tiny_corpus, out, tok), env={})
    assert again.returncode == 0, again.stderr
    assert ("replacing the unfinished files that build left" in again.stderr) == (lands > 1)
    assert remote_files(s3, out) == data_files(local_reference) and ".mlmprep-lock" not in listing(s3, out)


def test_a_store_gone_silent_is_one_line_after_the_read_timeout(s3, switch_proxy, monkeypatch):
    """A store that accepts and reads but never answers or closes (a black hole): an upload (which would wait for
    "100 Continue" for ever) and a read each fail in one attempt of the read timeout, mlmprep's own (READ_TIMEOUT)
    or one --storage-options gives, naming the URL."""
    from mlmprep import storage
    from mlmprep.errors import CacheError

    url = f"s3://{s3.bucket()}/x"
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setattr(storage, "READ_TIMEOUT", 1)
    storage.write(url, b"there")  # the clients made (seconds on a loaded machine) before the timing
    storage.write(url, b"there", {"config_kwargs": {"read_timeout": 6}})
    switch_proxy.swallow()
    for call, timeout in [(lambda: storage.write(url, b"x" * 100_000), 1), (lambda: storage.read_bytes(url), 1),
                          (lambda: storage.write(url, b"x", {"config_kwargs": {"read_timeout": 6}}), 6)]:
        start = time.monotonic()
        error = raised_within(timeout + 10, call)  # an upload waited for ever; s3fs's own read timeout is 15 s
        assert timeout <= time.monotonic() - start  # that read timeout, once
        assert isinstance(error, CacheError) and str(error).startswith(
            f"{url}: the store did not answer in 1 attempt per request"), error
    fs, _ = storage.filesystem(url, {"config_kwargs": {"read_timeout": 6}})
    config = fs.connect().meta.config  # what botocore was given: that timeout, and mlmprep's retries kept
    assert (config.read_timeout, config.connect_timeout, config.retries) == (
        6, storage.CONNECT_TIMEOUT, {"total_max_attempts": 1, "mode": "standard"})


def raised_within(seconds: float, call):
    """What `call()` raises (None if nothing), failing the test if it still runs after `seconds` (left to run on
    in a daemon thread, so a hang fails rather than holds the suite)."""
    outcome: list = []

    def target():
        try:
            call()
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    return outcome[0]


def test_a_build_whose_store_goes_silent_mid_upload_fails_in_bounded_time_and_leaves_nothing(
        s3, switch_proxy, tmp_path, tiny_corpus, tok, local_reference):  # noqa: F811
    """The store turns into a black hole at the third PUT (the probe, the lock, then the files): the build ends
    in one line naming --out after the read timeout, its local scratch gone; once the store is back the next
    build takes the dead build's lock over and equals the local build."""
    out = f"s3://{s3.bucket()}/data"
    switch_proxy.down_at(3, 3600, silent=True)
    env = {"TMPDIR": str(tmp_path), "AWS_MAX_ATTEMPTS": "1"}
    quick = json.dumps({"config_kwargs": {"read_timeout": 3}})
    start = time.monotonic()
    failed = run(*build_args(tiny_corpus, out, tok, "--storage-options", quick), env=env, timeout=300)
    assert time.monotonic() - start < 120
    assert_refused(failed.returncode, failed.stderr, out, "did not answer in 1 attempt", "Read timeout")
    assert list(tmp_path.iterdir()) == []
    switch_proxy.start()
    assert "manifest.json" not in listing(s3, out)
    again = run(*build_args(tiny_corpus, out, tok), env=env)
    assert again.returncode == 0, again.stderr
    assert remote_files(s3, out) == data_files(local_reference) and ".mlmprep-lock" not in listing(s3, out)
    assert list(tmp_path.iterdir()) == []


def test_a_dropped_connections_failed_task_is_not_printed_and_any_other_task_failure_is(s3, caplog):
    """The file system's event loop: an HTTP client task that failed on a dropped connection and was never awaited
    (aiohttp's "Cannot write to closing transport", met while a store is down) prints nothing when it is collected,
    since its request is retried or fails as one line; a task that failed on anything else is printed as asyncio
    prints it."""
    import asyncio
    import gc
    import logging

    import aiohttp

    from mlmprep import storage

    fs, _ = storage.filesystem(f"s3://{s3.bucket()}/x")

    async def orphan(exc: BaseException) -> None:
        async def fail() -> None:
            raise exc
        task = asyncio.ensure_future(fail())
        await asyncio.sleep(0.01)  # it runs and fails; nobody awaits it
        assert task.done()

    caplog.set_level(logging.ERROR, logger="asyncio")
    for exc in (aiohttp.ClientConnectionError("Cannot write to closing transport"), ValueError("a bug of its own")):
        asyncio.run_coroutine_threadsafe(orphan(exc), fs.loop).result(10)
        gc.collect()  # the task is collected: "Task exception was never retrieved", unless the handler drops it
    printed = [record.getMessage() + repr(record.exc_info) for record in caplog.records]
    assert not any("closing transport" in line for line in printed), printed
    assert any("a bug of its own" in line for line in printed), printed
