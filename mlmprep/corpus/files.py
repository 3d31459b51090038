"""A corpus file as every format's reader sees it: its format and compression by name, the checks of its first bytes
(compression, binary or UTF-16 data), its raw bytes and size, the rule for undecodable text; and what a pass over
the corpus counts (CorpusStats) and how it reads (ReadOptions)."""

from __future__ import annotations

import codecs
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlmprep import storage
from mlmprep.errors import CorpusError

SUPPORTED = (".txt", ".jsonl", ".json", ".parquet", ".csv", ".arrow")
TEXT_FORMATS = (".txt", ".jsonl", ".json", ".csv")  # the formats read compressed too
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}  # name ending -> fsspec's compression
NOT_TEXT = (".parquet", ".arrow", ".tar", ".zip", *COMPRESSIONS)  # inner names never read as text when compressed
MAGIC = {"gzip": b"\x1f\x8b", "bz2": b"BZh", "xz": b"\xfd7zXZ\x00", "zstd": b"\x28\xb5\x2f\xfd"}
SNIFF_BYTES = 8192
BOM = b"\xef\xbb\xbf"


@dataclass
class CorpusStats:
    """What one pass over the corpus read, skipped and replaced (written to the build manifest)."""

    files: int = 0
    documents: int = 0
    characters: int = 0  # in the documents, before cleaning
    blank_skipped: int = 0  # empty or whitespace-only lines / records
    null_skipped: int = 0  # null values in a text column or field
    missing_field_skipped: int = 0  # JSON records without the text field
    json_records: int = 0  # JSON records read, with the text field or without
    missing_field_keys: dict[str, int] = field(default_factory=dict)  # fields of the records without it: counts
    wrapped_lines: int = 0  # lines of .txt files read with --doc-sep line that look hard-wrapped (see wrapped_count)
    decode_errors: int = 0  # lines (CSV values) with undecodable bytes = replaced + skipped
    decode_replaced_lines: int = 0
    decode_skipped_lines: int = 0
    truncated_files: int = 0  # compressed files whose damaged end was dropped (--on-decode-error skip)
    files_as_text: list[str] = field(default_factory=list)  # compressed files of no known format inside, read as text
    files_skipped: list[str] = field(default_factory=list)  # unsupported files; hidden, linked, unreadable dirs/

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ReadOptions:
    text_column: str = "text"
    doc_sep: str = "line"
    on_decode_error: str = "replace"


# ------------------------------------------------------------------------------------------ names and first bytes


def file_format(path: Path | str) -> tuple[str, str | None]:
    """(format suffix, compression or None) of a corpus file by its name: "x.jsonl.gz" -> (".jsonl", "gzip");
    the format is "" for a name no reader takes (a ".tar.gz" archive, a ".parquet.gz"). A compressed file whose
    inner name has no known format ("changelog.gz", "changelog.Debian.gz") is read as text (see read_as_text)."""
    path = Path(path)
    compression = COMPRESSIONS.get(path.suffix.lower())
    if not compression:
        suffix = path.suffix.lower()
        return (suffix if suffix in SUPPORTED else ""), None
    inner = Path(path.stem).suffix.lower()
    if inner in TEXT_FORMATS:
        return inner, compression
    return ("" if inner in NOT_TEXT else ".txt"), compression


def read_as_text(path: Path | str) -> bool:
    """Whether file_format reads `path` as text for want of a known format inside its compression (a note says
    so, with the rename that makes it explicit)."""
    path = Path(path)
    return bool(file_format(path)[1]) and Path(path.stem).suffix.lower() not in TEXT_FORMATS + NOT_TEXT


def check_magic(path: Path | str, head: bytes) -> None:
    """Refuse a file whose first bytes disagree with its name: a `.gz` that is not gzip data, or a `.jsonl` that
    is compressed (renaming it is the fix: the name decides how every part of a build reads it)."""
    fmt, compression = file_format(path)
    if compression and not head.startswith(MAGIC[compression]):
        raise CorpusError(f"{path}: not {compression} data (its name ends in {Path(path).suffix}); check the "
                          "download, or rename it to what it holds")
    found = next((name for name, magic in MAGIC.items() if head.startswith(magic)), None)
    if not compression and found and fmt in TEXT_FORMATS:
        ending = next(end for end, name in COMPRESSIONS.items() if name == found)
        raise CorpusError(f"{path}: {found}-compressed data in a {fmt} file; rename it to {Path(path).name}{ending}")


def check_text(path: Path, head: bytes) -> None:
    """Refuse a file that starts with a UTF-16 byte-order mark (UTF-16 text need hold no NUL: CJK without line
    breaks), or whose first bytes hold NULs and are over 1% NUL or over 1% undecodable bytes."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise CorpusError(f"{path}: UTF-16 data (it starts with a UTF-16 byte-order mark); convert it to UTF-8")
    if b"\0" in head:
        decoded = codecs.getincrementaldecoder("utf-8")("replace").decode(head)  # a cut last character is fine
        undecodable = decoded.count("\ufffd") - head.count("\ufffd".encode())
        if max(head.count(b"\0"), undecodable) * 100 > len(head):
            raise CorpusError(f"{path}: binary or UTF-16 data (NUL bytes in its first 8 KiB); convert it to UTF-8")


def raw_file(path: Path | str, compression: str | None = None):
    """An fsspec OpenFile of a corpus file's bytes (decompressed given a `compression`): a local file, or an
    object read in place, in ranges, from its URL."""
    import fsspec

    if storage.is_url(path):
        return storage.open_corpus_url(path, compression)
    return fsspec.open(str(path), "rb", compression=compression)


def file_size(path: Path | str) -> int:
    """A corpus file's size now, on disk or in the store."""
    return storage.size(path) if storage.is_url(path) else os.stat(path).st_size


def undecodable(raw: bytes, stats: CorpusStats, policy: str, where: Callable[[], str]) -> str | None:
    """A line or value that is not UTF-8: replaced (U+FFFD), skipped (None) or refused, and counted.
    `where()` names the place, for the message."""
    if policy == "fail":
        raise CorpusError(f"{where()}: invalid UTF-8; use --on-decode-error replace|skip")
    stats.decode_errors += 1
    if policy == "skip":
        stats.decode_skipped_lines += 1
        return None
    stats.decode_replaced_lines += 1
    return raw.decode("utf-8", "replace")


__all__ = ["CorpusStats", "ReadOptions", "file_format"]
