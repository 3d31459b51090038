"""Every file of a build, manifest.json included, under one rule: it resolves inside the build (or, for a snapshot
of the Hugging Face cache, into its repository's blobs/) and is a regular file. A link out of the build, a FIFO or a
directory where a file belongs is refused in one line by the readers and reported by verify, which never waits on
a FIFO."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from tests.cli.test_build import assert_refused, cli

FILES = ("manifest.json", "tokenizer.json", "seed-0/state.json", "seed-0/data-00000-of-00001.arrow",
         "windows/data-00000-of-00001.arrow")


def copy(tiny_build: Path, tmp_path: Path) -> Path:
    build = tmp_path / "b"
    shutil.copytree(tiny_build, build)
    return build


def finishes(call, fifos: list[Path], timeout: float = 60.0):
    """call()'s result; a call still running after `timeout` s (blocked on a FIFO) fails the test once each FIFO is
    opened for writing, which lets it go on."""
    out = {}

    def target():
        try:
            out["result"] = call()
        except BaseException as exc:  # raised in the test's thread below
            out["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        for fifo in fifos:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(timeout)
        pytest.fail(f"blocked on a FIFO for {timeout:.0f} s")
    if "error" in out:
        raise out["error"]
    return out["result"]


@pytest.mark.parametrize("name", FILES)
def test_a_file_linked_out_of_the_build_is_refused_the_manifest_too(tiny_build, tmp_path, name):
    build = copy(tiny_build, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(build / name, outside / "file")
    (build / name).symlink_to(outside / "file")
    report = cli("verify", build)
    assert report.exit_code == 1 and f"{name}: resolves outside the build" in report.stdout, report.stdout
    result = cli("inspect", build, "--split", name.split("/")[0] if "/" in name else "seed-0")
    assert_refused(result.exit_code, result.stderr, f"{build}/{name}: resolves outside the build")


def hugging_face_snapshot(build: Path, repo: Path) -> Path:
    """`build` laid out as the Hugging Face cache lays out a downloaded repository: each file's bytes once in
    repo/blobs/ under their sha256, and repo/snapshots/REVISION/ a tree of relative links to them."""
    snapshot = repo / "snapshots" / "0123abcd"
    (repo / "blobs").mkdir(parents=True)
    for path in sorted(p for p in build.rglob("*") if p.is_file()):
        data = path.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / path.relative_to(build)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


def test_a_build_in_the_hugging_face_cache_reads_through_its_links_into_blobs(tiny_build, tmp_path):
    from mlmprep.format.load import open_epoch, read_manifest

    snapshot = hugging_face_snapshot(tiny_build, tmp_path / "hub" / "datasets--me--kjv")
    assert all(p.is_symlink() for p in snapshot.rglob("*") if not p.is_dir())
    report = cli("verify", snapshot)
    assert report.exit_code == 0 and report.stdout.startswith("ok:"), report.stdout
    assert cli("inspect", snapshot).exit_code == 0
    assert read_manifest(snapshot) == read_manifest(tiny_build)
    assert len(open_epoch(snapshot, 1, rehash=True)) == json.loads((tiny_build / "manifest.json").read_text()
                                                                   )["splits"]["seed-1"]["rows"]


@pytest.mark.parametrize("where", ["another-repo", "below-blobs", "outside"])
def test_a_snapshot_link_anywhere_but_its_own_blobs_is_refused(tiny_build, tmp_path, where):
    """Only the files directly in the snapshot's own repository's blobs/ count as its files."""
    repo = tmp_path / "hub" / "datasets--me--kjv"
    snapshot = hugging_face_snapshot(tiny_build, repo)
    elsewhere = {"another-repo": tmp_path / "hub" / "datasets--them--x" / "blobs",
                 "below-blobs": repo / "blobs" / "sub", "outside": tmp_path / "outside"}[where]
    elsewhere.mkdir(parents=True)
    link = snapshot / "tokenizer.json"
    shutil.copy(link, elsewhere / "tok")
    link.unlink()
    link.symlink_to(elsewhere / "tok")
    report = cli("verify", snapshot)
    assert report.exit_code == 1 and "tokenizer.json: resolves outside the build" in report.stdout, report.stdout
    assert_refused(cli("inspect", snapshot).exit_code, cli("inspect", snapshot).stderr, "resolves outside the build")


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_a_directory_for_a_file_is_reported_not_waited_on(tiny_build, tmp_path, name, kind):
    build = copy(tiny_build, tmp_path)
    (build / name).unlink()
    if kind == "fifo":
        os.mkfifo(build / name)
    else:
        (build / name).mkdir()
    what = "a FIFO" if kind == "fifo" else "a directory"
    fifos = [build / name] if kind == "fifo" else []
    report = finishes(lambda: cli("verify", build), fifos)
    assert report.exit_code == 1, report.stdout
    assert f"{name}: {what}, not a regular file" in report.stdout, report.stdout
    split = name.split("/")[0] if "/" in name else "seed-0"
    result = finishes(lambda: cli("inspect", build, "--split", split), fifos)
    assert_refused(result.exit_code, result.stderr, f"{build}/{name}: {what}, not a regular file")


def test_reading_a_fifo_is_refused_even_after_a_check_said_regular(tmp_path):
    """open_regular checks the opened descriptor: a file swapped for a FIFO after a stat is refused, not waited on."""
    from mlmprep.format.manifest import open_regular
    from mlmprep.format.write import file_sha256

    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="a FIFO, not a regular file"):
        finishes(lambda: open_regular(tmp_path / "fifo"), [tmp_path / "fifo"])
    with pytest.raises(OSError, match="a FIFO"):
        finishes(lambda: file_sha256(tmp_path / "fifo"), [tmp_path / "fifo"])
    (tmp_path / "f").write_bytes(b"abc")
    assert file_sha256(tmp_path / "f") == hashlib.sha256(b"abc").hexdigest()
