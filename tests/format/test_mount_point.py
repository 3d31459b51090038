"""--out on a mount point (a Docker volume, a bind mount), which no rename can replace: the build is locked,
staged and published inside it, manifest.json last, and rebuilds, --force and refusals behave as in any
directory. A real tmpfs is mounted for the tests (root only; skipped where mounting is not permitted)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.builder.test_sharded import hashes
from tests.cli.test_build import build_args, cli


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
