"""--out on a mount point (a Docker volume, a bind mount), which no rename can replace: the build is locked,
staged and published inside it, manifest.json last, and rebuilds, --force and refusals behave as in any
directory. A real tmpfs, or a bind mount of the same file system in a mount namespace of its own (unshare -m),
is mounted for the tests (root only; skipped where mounting is not permitted)."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from mlmprep.format import publish
from tests.builder.test_sharded import hashes
from tests.cli.test_build import build_args, cli, cli_command, cli_env, leftovers


@pytest.fixture
def mounted(tmp_path):
    """An empty tmpfs mounted at tmp_path/volume, unmounted after the test."""
    point = tmp_path / "volume"
    point.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(point)], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is None or done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no permission)")
    yield point
    subprocess.run(["umount", "-l", str(point)], check=True, timeout=30)


def test_a_build_into_a_mount_point_is_the_build_into_a_directory(mounted, tmp_path, tiny_corpus, tok):
    result = cli(*build_args(tiny_corpus, mounted, tok))
    assert result.exit_code == 0, result.stderr
    assert cli(*build_args(tiny_corpus, tmp_path / "plain", tok)).exit_code == 0
    assert hashes(mounted) == hashes(tmp_path / "plain")
    assert sorted(p.name for p in mounted.iterdir()) == sorted(p.name for p in (tmp_path / "plain").iterdir())
    again = cli(*build_args(tiny_corpus, mounted, tok))  # up to date: nothing rebuilt
    assert again.exit_code == 0 and "up to date" in again.stdout, again.stdout
    # another build replaces it only with --force, and then leaves nothing of the old one
    other = build_args(tiny_corpus, mounted, tok, "--seed", "7")
    refused = cli(*other)
    assert refused.exit_code == 2 and "--force" in refused.stderr
    forced = cli(*other, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert json.loads((mounted / "manifest.json").read_text())["config"]["seed"] == 7
    assert sorted(p.name for p in mounted.iterdir()) == sorted(p.name for p in (tmp_path / "plain").iterdir())


def test_a_mount_point_holding_other_files_is_refused_before_any_work(mounted, tiny_corpus, tok):
    (mounted / "notes.txt").write_text("mine")
    (mounted / "lost+found").mkdir()  # what a fresh ext4 holds: not counted as the user's
    result = cli(*build_args(tiny_corpus, mounted, tok, "--force"))
    assert result.exit_code == 2
    assert "exists and is not an mlmprep build" in result.stderr.splitlines()[-1]
    assert sorted(p.name for p in mounted.iterdir()) == ["lost+found", "notes.txt"]
    (mounted / "notes.txt").unlink()
    assert cli(*build_args(tiny_corpus, mounted, tok)).exit_code == 0
    assert (mounted / "lost+found").is_dir() and (mounted / "manifest.json").is_file()


def test_a_failed_build_leaves_the_mount_point_as_it_was(mounted, tmp_path, tok):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n" * 50 + b"bad \xff\n")
    result = cli(*build_args(bad, mounted, tok, "--on-decode-error", "fail"))
    assert result.exit_code == 2
    assert list(Path(mounted).iterdir()) == []


NO_MOUNT = 99  # the exit status of a namespace where mounting is not permitted


def in_mount_namespace(*lines: str) -> subprocess.CompletedProcess:
    """The shell `lines` in a mount namespace of their own (unshare -m), stopping at the first that fails; their
    mounts vanish with it. Skips where mounting is not permitted."""
    script = "\n".join(["set -e", *lines])
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], env=cli_env(), capture_output=True, text=True,
                          timeout=300) if shutil.which("unshare") else None
    if done is None or done.returncode == NO_MOUNT:
        pytest.skip(f"cannot mount in a namespace of its own here ({done.stderr.strip() if done else 'no unshare'})")
    return done


@pytest.mark.parametrize("parent", ["writable", "read-only"])
def test_a_build_into_a_bind_mount_of_the_same_file_system_is_published_inside(parent, tmp_path, tiny_corpus, tok):
    """A bind mount's device is its parent's, so only the mount table tells it is one; with the parent read-only
    (a container's root with a volume), nothing at all may be written beside it. The name holds a space, which
    the mount table writes as an escape."""
    volume, places = tmp_path / "volume", tmp_path / "places"
    out = places / "my volume"
    volume.mkdir()
    out.mkdir(parents=True)
    sh = shlex.quote
    read_only = [f"mount --bind {sh(str(places))} {sh(str(places))} || exit {NO_MOUNT}",
                 f"mount -o remount,ro,bind {sh(str(places))} || exit {NO_MOUNT}"] if parent == "read-only" else []
    done = in_mount_namespace(
        *read_only, f"mount --bind {sh(str(volume))} {sh(str(out))} || exit {NO_MOUNT}",
        shlex.join(cli_command(*build_args(tiny_corpus, out, tok, "--seed", "7"))),
        shlex.join(cli_command(*build_args(tiny_corpus, out, tok, "--force"))),  # replaces a build in place
        shlex.join(cli_command("verify", out)))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.splitlines()[-1].startswith("ok: "), done.stdout
    assert cli(*build_args(tiny_corpus, tmp_path / "plain", tok)).exit_code == 0
    assert hashes(volume) == hashes(tmp_path / "plain")
    assert sorted(os.listdir(volume)) == sorted(os.listdir(tmp_path / "plain"))  # no lock or stage left inside
    assert os.listdir(places) == ["my volume"] and os.listdir(out) == []  # nothing beside, nothing under the mount


@pytest.mark.parametrize("code", [errno.EBUSY, errno.EXDEV])
def test_a_rename_refused_as_busy_or_across_devices_publishes_inside(code, monkeypatch, tmp_path, tiny_corpus, tok):
    """Whatever makes the system refuse to rename --out so (a mount the mount table does not show), the build
    moves in as into a mount point: the same files, verified, nothing left beside or inside."""
    out = tmp_path / "out"
    rename = os.rename

    def refused(src, dst, *args, **kwargs):
        if out in (Path(src), Path(dst)):
            raise OSError(code, os.strerror(code), str(src), None, str(dst))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refused)
    monkeypatch.setattr(publish, "exchange", lambda a, b: False)  # renameat2 is refused the same way
    first = cli(*build_args(tiny_corpus, out, tok, "--seed", "7"))
    assert first.exit_code == 0, first.stderr
    assert json.loads((out / "manifest.json").read_text())["config"]["seed"] == 7
    forced = cli(*build_args(tiny_corpus, out, tok, "--force"))  # an old build there goes, file by file
    assert forced.exit_code == 0, forced.stderr
    monkeypatch.undo()
    assert cli(*build_args(tiny_corpus, tmp_path / "plain", tok)).exit_code == 0
    assert hashes(out) == hashes(tmp_path / "plain")
    assert sorted(os.listdir(out)) == sorted(os.listdir(tmp_path / "plain"))
    assert leftovers(out) == ["out"]
    verified = cli("verify", out)
    assert verified.exit_code == 0 and verified.stdout.startswith("ok: "), verified.stdout
