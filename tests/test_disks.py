"""A full disk or a read-only place under a checkpoint, `inspect --html` and `remask`: one line naming the file
and the reason, exit 2, no temporary file left and nothing half-written. The disks are real where the tests
may mount them (root: a tmpfs of a few hundred kB, a read-only bind mount; root ignores chmod); the checkpoint's
read-only case is an OSError planted in torch.save."""

from __future__ import annotations

import contextlib
import errno
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_build import run_cli


@contextlib.contextmanager
def mounted(where: Path, *options: str):
    """`mount OPTIONS where`, undone after; skips where mounting is not allowed."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", *options, str(where)], capture_output=True, text=True) \
        if shutil.which("mount") else None
    if done is None or done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() if done else 'no mount'}); needs root")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def full_disk(where: Path, size: str):
    return mounted(where, "-t", "tmpfs", "-o", f"size={size}", "tmpfs")


def read_only(source: Path, where: Path):
    return mounted(where, "--bind", "-o", "ro", str(source))


def one_error_line(result: subprocess.CompletedProcess, *mentions: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()  # train's progress comes first: the error is the one last line
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:] and "Traceback" not in result.stderr, result.stderr
    for words in mentions:
        assert words in errors[0]


def hidden(root: Path) -> list[str]:
    """Temporary and partial files under `root` (names starting with a dot)."""
    return [str(p.relative_to(root)) for p in root.rglob(".*")]


def test_a_full_disk_at_a_checkpoint_is_one_line_and_leaves_no_temporary(tmp_path, tiny_build):
    with full_disk(tmp_path / "disk", "1500k") as disk:
        result = run_cli("train", tiny_build, "--model", "tiny", "--out", disk / "run", "--max-steps", "2",
                         "--save-every", "1", "--warmup-steps", "0")
        one_error_line(result, f"{disk / 'run' / 'checkpoint-1'}: cannot be written (the disk is full)", "--resume")
        assert hidden(disk) == [] and not list((disk / "run").glob("checkpoint-*"))


def test_a_read_only_place_at_a_checkpoint_is_one_line(monkeypatch, tmp_path, tiny_build):
    import torch

    from mlmprep.cli import app

    def refused(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"partial")  # some of it was written, as a real failure leaves it
        raise OSError(errno.EROFS, "Read-only file system", str(f))

    monkeypatch.setattr(torch, "save", refused)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(tiny_build), "--model", "tiny", "--out", str(run),
                                      "--max-steps", "1", "--warmup-steps", "0"])
    assert result.exit_code == 2, result.output
    assert f"{run / 'checkpoint-1'}: cannot be written (a read-only file system)" in result.stderr
    assert hidden(run) == [] and not list(run.glob("checkpoint-*"))


def test_html_into_a_full_disk_or_a_read_only_place_is_one_line(tmp_path, tiny_build):
    with full_disk(tmp_path / "disk", "24k") as disk:
        one_error_line(run_cli("inspect", tiny_build, "--html", disk / "r.html"),
                       f"{disk / 'r.html'}: cannot be written (the disk is full)", "--html")
        assert list(disk.iterdir()) == []
    (tmp_path / "ro").mkdir()
    with read_only(tmp_path / "ro", tmp_path / "mnt") as place:
        one_error_line(run_cli("inspect", tiny_build, "--html", place / "r.html"),
                       f"{place / 'r.html'}: cannot be written (a read-only file system)")


def test_remask_into_a_full_disk_or_a_read_only_place_is_one_line_and_changes_nothing(tmp_path, tiny_build):
    files = [f for f in tiny_build.rglob("*") if f.is_file()]
    room = sum(-(-f.stat().st_size // 4096) * 4 + 4 for f in files) + 64  # kB of tmpfs pages, and a little more
    with full_disk(tmp_path / "disk", f"{room}k") as disk:
        build = Path(shutil.copytree(tiny_build, disk / "data"))
        before = {str(p.relative_to(build)): p.read_bytes() for p in build.rglob("*") if p.is_file()}
        one_error_line(run_cli("remask", build, "--seeds", "30"), "cannot write its output (the disk is full",
                       "nothing was published")
        assert {str(p.relative_to(build)): p.read_bytes() for p in build.rglob("*") if p.is_file()} == before
        assert hidden(disk) == []
    shutil.copytree(tiny_build, tmp_path / "ro" / "data")
    with read_only(tmp_path / "ro", tmp_path / "mnt") as place:
        one_error_line(run_cli("remask", place / "data", "--seeds", "3"),
                       f"{place / '.data.lock'}: cannot be written (a read-only file system)")
    assert json.loads((tmp_path / "ro" / "data" / "manifest.json").read_text())["config"]["seeds"] == 2
