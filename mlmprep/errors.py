"""Errors a user can fix (the CLI prints each as one line and exits with code 2), and how a name is shown in them."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


class MlmprepError(Exception):
    """Base class: the message names the file or option at fault and what to do."""


class ConfigError(MlmprepError, ValueError):
    """An option value or option combination that cannot work."""


class CorpusError(MlmprepError):
    """A corpus file or dataset that cannot be read as asked."""


class TokenizerError(MlmprepError):
    """A tokenizer that is missing, unreadable or lacks the special tokens mlmprep needs."""


class CacheError(MlmprepError):
    """A build output directory that is missing, foreign, locked or built with other options."""

# what an OSError's errno says of the place a file was to be written
DISK_REASONS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
                errno.EROFS: "a read-only file system", errno.EACCES: "no permission to write there",
                errno.EPERM: "no permission to write there"}


def disk_error(path: str | Path, exc: BaseException, fix: str) -> CacheError | None:
    """A failed write of `path` as one line when the place cannot take it (a full disk, a read-only file
    system, no permission), else None. A library that says so in its own words (torch: a RuntimeError) is
    judged by what a probe written beside `path` meets now."""
    problem = exc if isinstance(exc, OSError) and exc.errno in DISK_REASONS else write_probe(Path(path).parent)
    if problem is None:
        return None
    return CacheError(f"{printable(path)}: cannot be written ({DISK_REASONS[problem.errno]}); {fix}")


def write_probe(directory: Path) -> OSError | None:
    """The OSError that writing (and syncing) 1 MiB in `directory` raises, if one of DISK_REASONS; the probe
    is never left behind."""
    try:
        with tempfile.TemporaryFile(dir=directory) as f:
            f.write(bytes(1 << 20))
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        return exc if exc.errno in DISK_REASONS else None
    return None


def printable(path: str | Path) -> str:
    """A path (or any text) as text that encodes as UTF-8, for JSON files and the summary: bytes of a name that
    are not UTF-8 (which Python holds as lone surrogates) as \\xNN escapes, other lone surrogates as \\uXXXX."""
    try:
        return os.fsencode(path).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return os.fspath(path).encode("utf-8", "backslashreplace").decode("utf-8")


def most_common_fields(keys: dict[str, int], n: int = 5) -> dict[str, int]:
    """The `n` most common field names of `keys` (name -> records), most common first, then by name."""
    return dict(sorted(keys.items(), key=lambda item: (-item[1], item[0]))[:n])


def common_fields(keys: dict[str, int]) -> str:
    """The most common field names of `keys`, with their counts: "title (6,975), id (6,975)"."""
    return ", ".join(f"{name} ({count:,})" for name, count in most_common_fields(keys).items()) or "none"
