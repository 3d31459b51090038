"""Errors a user can fix (the CLI prints each as one line and exits with code 2), and how a name is shown in them."""

from __future__ import annotations

import os
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
