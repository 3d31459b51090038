"""Scratch directories named after their process and host (mlmprep-PID-HOST.*), so that the next build removes
those of builds that were killed (no `finally` ran): a remote build's inputs and stage, megabytes to gigabytes, and
the directory of the workers' server's socket. Standard library only: the driver sets this up before it starts the
workers' server, ahead of its own heavier imports."""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.util
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` runs on this machine (one of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


SCRATCH = re.compile(r"mlmprep-(\d+)-(.*)\.[a-z0-9_]+")


@contextlib.contextmanager
def scratch_directory() -> Iterator[str]:
    """A temporary directory, removed after; first those that processes of this host no longer running left."""
    remove_dead_scratch(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=scratch_prefix()) as tmp:
        yield tmp


def scratch_prefix() -> str:
    """The start of this process's scratch directories' names (SCRATCH)."""
    return f"mlmprep-{os.getpid()}-{scratch_host()}."


def scratch_host() -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())


def multiprocessing_in_scratch() -> None:
    """Have multiprocessing keep this process's files (the workers' server's socket) in a scratch directory of this
    process, for its lifetime, rather than in a pymp-* directory that no one removes when a build is killed
    outright: the next build removes it with the rest of the dead scratch. Left to multiprocessing once it has a
    directory, or where TMPDIR is so long that a socket's path in it would not fit (108 bytes)."""
    config = multiprocessing.current_process()._config  # noqa: SLF001 (what multiprocessing.util.get_temp_dir reads)
    root = tempfile.gettempdir()
    socket_path = os.path.join(root, scratch_prefix() + "x" * 8, "listener-" + "x" * 8)  # as mkdtemp, mktemp name
    if config.get("tempdir") is not None or len(socket_path.encode()) > 107:
        return
    path = tempfile.mkdtemp(prefix=scratch_prefix(), dir=root)
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(path, True), exitpriority=-100)
    config["tempdir"] = path


def remove_dead_scratch(root: Path) -> list[Path]:
    """Remove the scratch directories under `root` of this user whose process (on this host) is gone."""
    host = scratch_host()
    removed = []
    for path in root.glob("mlmprep-*"):
        named = SCRATCH.fullmatch(path.name)
        with contextlib.suppress(OSError):
            if (named and named[2] == host and not pid_alive(int(named[1])) and not path.is_symlink()
                    and path.is_dir() and path.stat().st_uid == os.getuid()):
                shutil.rmtree(path)
                removed.append(path)
    return removed
