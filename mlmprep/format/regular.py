"""Regular files only: what a path is when it is not one, opening one without ever waiting on a FIFO, and its
sha256. `python -I -S mlmprep/format/regular.py FILE...` prints their digests: a training run's background check
of its next epoch's files runs it so in a child process, which needs nothing but the standard library here and
starts in about a hundredth of a second of CPU."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from pathlib import Path

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_regular(path: str | Path) -> str | None:
    """What `path` is when it exists but is not a regular file ("a directory", "a FIFO", ...), else None: a
    reader that opened a FIFO would wait for a writer forever."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in KINDS if test(mode)), "not a file")


def open_regular(path: str | Path):
    """`path` opened for reading in binary, refused with OSError unless it is a regular file: opened without
    blocking (a FIFO would wait for a writer), then checked on the open descriptor, so a swap after a check is
    caught too."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = next((what for test, what in KINDS if test(mode)), "not a file")
            raise OSError(f"{what}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


HASH_CHUNK = 8 << 20  # bytes hashed per read: few, long stretches without the GIL


def file_sha256(path: str | Path) -> str:
    """The sha256 of a regular file (anything else is refused with OSError, never waited on), read in large chunks
    with the GIL released while each is read and hashed."""
    digest = hashlib.sha256()
    with open_regular(path) as f:
        # no larger than the file: a fresh buffer is zeroed page by page, which costs more than hashing a small file
        buffer = bytearray(max(1, min(HASH_CHUNK, os.fstat(f.fileno()).st_size)))
        view = memoryview(buffer)
        while n := f.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def main(paths: list[str]) -> None:
    """`python -I -S mlmprep/format/regular.py FILE...`: each file's sha256 on a line ("-" when it cannot be read), at
    the lowest CPU priority (nice 19, and Linux's idle class where there is one). A training run checks its next
    epoch's files so, in a child process: it shares no GIL with the loader, and the scheduler gives it only the CPU
    the run leaves."""
    with contextlib.suppress(OSError):
        os.nice(19)
    with contextlib.suppress(OSError, AttributeError):  # SCHED_IDLE: runs only on a core nothing else wants
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    for path in paths:
        try:
            print(file_sha256(path), flush=True)
        except OSError:
            print("-", flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
