"""Readers: one file of a supported format -> its document texts, with what was skipped or replaced counted.

Text files are read as bytes and decoded about 1 MB of whole lines at a time; a block holding undecodable
bytes is decoded line by line, so --on-decode-error can replace, skip or refuse one bad line. Parquet, CSV
and Arrow files are read in record batches. The exception is a `.json` file holding one JSON document (a
top-level array, or one object over several lines), which is parsed whole (use JSON lines for large corpora).

Compressed files: `NAME.FORMAT.gz|.bz2|.xz|.zst` (any text format) are streamed through `open_corpus_file`,
which every reader uses, and checked against their magic bytes both ways. A part of one is read by decompressing
from the start and skipping to the part, or by going on from where this process's last part of the file stopped
(see `_stream_blocks`, `_Stream`); damaged data is an error, or with --on-decode-error skip the end of the file
(the text before it is kept, its cut last line dropped).

Binary files: a .txt/.json/.jsonl/.csv file that starts with a UTF-16 byte-order mark, or whose first 8 KiB
hold NUL bytes and are over 1% undecodable (an image, an archive) or over 1% NUL (UTF-16 text), is refused.
Other NULs are text, dropped by the clean stage, and other undecodable bytes follow --on-decode-error (a stray
NUL beside one Latin-1 byte is still text).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import functools
import io
import json
import lzma
import os
import re
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlmprep import storage
from mlmprep.errors import CorpusError, common_fields

SUPPORTED = (".txt", ".jsonl", ".json", ".parquet", ".csv", ".arrow")
TEXT_FORMATS = (".txt", ".jsonl", ".json", ".csv")  # the formats read compressed too
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}  # name ending -> fsspec's compression
NOT_TEXT = (".parquet", ".arrow", ".tar", ".zip", *COMPRESSIONS)  # inner names never read as text when compressed
MAGIC = {"gzip": b"\x1f\x8b", "bz2": b"BZh", "xz": b"\xfd7zXZ\x00", "zstd": b"\x28\xb5\x2f\xfd"}
BATCH_ROWS = 1024  # rows per record batch read from Parquet files and datasets
CSV_BLOCK_BYTES = 1 << 20
SNIFF_BYTES = 8192
READ_BYTES = 1 << 20  # bytes of a text file read and decoded at a time
STREAM_BYTES = 1 << 16  # bytes read at a time from a decompressed stream: damage keeps the text before it to this
BOM = b"\xef\xbb\xbf"
KEYS_KEPT = 100  # distinct field names counted per shard among records without the text field
WRAP_COLUMNS = 100  # a hard-wrapped line is at most this long ...
SENTENCE_ENDS = ".!?;:…。！？"  # ... and does not end in one of these (closing quotes and brackets aside)
CLOSERS = "\"'”’»)]*`"
CODE = re.compile(r"[=_{}<>#@\\|;\[\]]")  # ... nor holds characters source code is made of and prose rarely is
WRAPPED_SHARE = 0.5  # a .txt file looks like hard-wrapped prose when at least this share of its lines do,
BLANK_SHARE = 0.01  # at least this share of its lines are blank (paragraphs: what --doc-sep blank would keep),
WRAPPED_MIN_LINES = 20  # and it has at least this many non-blank lines


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


# ------------------------------------------------------------------------------------------------ opening files


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


def open_corpus_file(path: Path | str):
    """A corpus file, opened for reading bytes through fsspec, decompressed as a stream when its name says it is
    compressed (the name is checked against the magic bytes first). Use it as a context manager."""
    _, compression = file_format(path)
    raw = raw_file(path)
    if not storage.is_url(path):  # an object's were checked as it was hashed: here it would cost a request
        with raw as f:
            check_magic(path, f.read(8))
    if compression == "zstd":  # fsspec's zstd reader ends a truncated frame silently
        return _ZstdOpenFile(raw)
    return raw_file(path, compression)


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


class _ZstdOpenFile:
    """A zstd file opened like fsspec's OpenFile: a context manager giving a buffered reader of every frame, which
    raises EOFError (as gzip, bz2 and lzma do) where the file ends inside a frame."""

    def __init__(self, raw):
        self.raw = raw

    def __enter__(self):
        return io.BufferedReader(_Chunks(_zstd_frames(self.raw.__enter__())), READ_BYTES)

    def __exit__(self, *exc: object) -> None:
        self.raw.__exit__(*exc)


def _zstd_frames(source) -> Iterator[bytes]:
    """The decompressed bytes of consecutive zstd frames (the `zstandard` library's decompressobj per frame)."""
    import zstandard

    new = zstandard.ZstdDecompressor().decompressobj
    frame, started = new(), False
    while data := source.read(READ_BYTES):
        while data:
            started = True
            out, data = frame.decompress(data), b""
            if frame.eof:
                data, frame, started = frame.unused_data, new(), False
            yield out
    if started:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")


class _Chunks(io.RawIOBase):
    """A readable stream of the byte strings an iterator gives."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks, self.pending = chunks, memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.pending:
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.pending = memoryview(chunk)
        n = min(len(buffer), len(self.pending))
        buffer[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def damage_errors(path: Path | str) -> tuple[type[BaseException], ...]:
    """What reading damaged data of a compressed file raises: EOFError (truncated), OSError (gzip, bz2), zlib's,
    lzma's and zstandard's errors; nothing for a plain file (`except ()` catches nothing)."""
    compression = file_format(path)[1]
    if compression == "zstd":
        import zstandard

        return EOFError, OSError, zstandard.ZstdError
    return (EOFError, OSError, zlib.error, lzma.LZMAError) if compression else ()


def damaged(path: Path | str, progress: str, exc: BaseException) -> CorpusError:
    """The error for compressed data that stops decoding after `progress` ("12 lines (345 bytes of text)")."""
    what = "truncated" if isinstance(exc, EOFError) else f"corrupt ({str(exc).splitlines()[0] if str(exc) else exc})"
    _, compression = file_format(path)
    return CorpusError(f"{path}: {compression} data {what} after {progress}; download it again, or pass "
                       "--on-decode-error skip to keep the text before the damage")


# ------------------------------------------------------------------------------------------------ text files


def _undecodable(raw: bytes, stats: CorpusStats, policy: str, where: Callable[[], str]) -> str | None:
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


def _check_text(path: Path, head: bytes) -> None:
    """Refuse a file that starts with a UTF-16 byte-order mark (UTF-16 text need hold no NUL: CJK without line
    breaks), or whose first bytes hold NULs and are over 1% NUL or over 1% undecodable bytes."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise CorpusError(f"{path}: UTF-16 data (it starts with a UTF-16 byte-order mark); convert it to UTF-8")
    if b"\0" in head:
        decoded = codecs.getincrementaldecoder("utf-8")("replace").decode(head)  # a cut last character is fine
        undecodable = decoded.count("\ufffd") - head.count("\ufffd".encode())
        if max(head.count(b"\0"), undecodable) * 100 > len(head):
            raise CorpusError(f"{path}: binary or UTF-16 data (NUL bytes in its first 8 KiB); convert it to UTF-8")


def _line_blocks(path: Path, stats: CorpusStats, policy: str, start: int = 0, end: int | None = None,
                 paragraphs: bool = False, resume: str = "") -> Blocks:
    """(byte offset, lines) for the lines that start in bytes [start, end) of the file (`start` a line start),
    about READ_BYTES at a time: each line decoded and without its line end, None for an undecodable line that
    `policy` skips. A block whose last line runs on is completed by one buffered readline, so a 50 MB line
    is read in linear time and held once. A compressed file's part is read by _stream_blocks, whose `start` and
    `end` are offsets in its text that it aligns itself (and `resume` lets it go on from an earlier part)."""
    if file_format(path)[1]:
        yield from _stream_blocks(path, stats, policy, start, end, paragraphs, resume)
        return
    with open_corpus_file(path) as f:
        _check_text(path, f.read(SNIFF_BYTES))
        f.seek(start)
        offset = start
        while end is None or offset < end:
            block = f.read(READ_BYTES if end is None else min(READ_BYTES, end - offset))
            if not block:
                return
            if not block.endswith(b"\n"):  # its last line goes on (past `end`, where that line crosses it)
                block += f.readline()
            yield offset, _decode_lines(block, offset, path, stats, policy)
            offset += len(block)


class _Damage(Exception):
    """Compressed data that stopped decoding after `offset` bytes (`lines` whole lines) of text."""

    def __init__(self, offset: int, lines: int, cause: BaseException):
        super().__init__(offset, lines, cause)
        self.offset, self.lines, self.cause = offset, lines, cause


def _whole_lines(path: Path, f) -> Iterator[tuple[int, bytes]]:
    """(offset, whole lines) of a decompressed stream, about READ_BYTES at a time (the last piece may be an
    unended last line). It is read STREAM_BYTES at a time from its start, whichever part the caller wants, so
    that damaged data stops every reader of the file at the same byte; the whole lines read before the damage
    are given, then _Damage is raised."""
    offset, lines, pending, size, errors = 0, 0, [], 0, damage_errors(path)
    while True:
        try:
            block = f.read(STREAM_BYTES)
        except errors as exc:
            damage, block = exc, None
        else:
            if offset == 0 and not pending:
                _check_text(path, block[:SNIFF_BYTES])
            pending.append(block)
            size += len(block)
            if block and size < READ_BYTES:
                continue
        data = b"".join(pending)
        cut = len(data) if block == b"" else data.rfind(b"\n") + 1  # the end: the unended last line too
        if cut:
            lines += data.count(b"\n", 0, cut)
            yield offset, data[:cut]
            offset += cut
        if block is None:
            raise _Damage(offset + len(data) - cut, lines, damage)
        if not block:
            return
        pending, size = [data[cut:]], len(data) - cut


def _line_start(data: bytes, offset: int, at: int) -> int | None:
    """The first line start at or after text offset `at` in `data` (whole lines from `offset`), or its end when
    that is the next line start; None if `data` ends the file before one."""
    if at <= offset:
        return offset
    i = data.find(b"\n", at - 1 - offset)
    return None if i < 0 else offset + i + 1


def _blank_end(data: bytes, offset: int, at: int) -> int | None:
    """Just after the first blank line (ASCII whitespace only) in `data` (whole lines from `offset`) that starts
    at or after line start `at`; None if there is none in it."""
    pos = at - offset
    while pos < len(data):
        newline = data.find(b"\n", pos)
        line_end = len(data) if newline < 0 else newline + 1
        if not data[pos:line_end].strip():
            return offset + line_end
        pos = line_end
    return None


def _stream_blocks(path: Path, stats: CorpusStats, policy: str, start: int, end: int | None,
                   paragraphs: bool, resume: str = "") -> Blocks:
    """_line_blocks of a compressed file's part: the lines that start in text offsets [start, end), both aligned
    here as shards.py aligns a plain file's range (to a line start; with `paragraphs`, to just after a blank line
    at or after it), the text before the part decompressed and skipped. Damaged data is a CorpusError, or with
    policy "skip" the end of the text: the part that reaches it keeps its lines before the damage (the cut last
    line is dropped) and counts the file in stats.truncated_files. Given `resume` (the file's sha256), the
    part goes on from a stream an earlier part of this content left at or before `start` in this process, and
    leaves its own for a later one (see _Stream)."""
    first: int | None = 0 if start <= 0 else None  # the part's first line start, once found
    blank_from: int | None = None  # with `paragraphs`: the line start after which a blank line begins the part
    tail_from: int | None = None  # the first line start at or after `end`, once reached
    stream = (resume and _resumed((str(path), resume), start)) or _Stream.open(path)
    try:
        for offset, data in stream.blocks():
            if end is not None and tail_from is None:
                tail_from = _line_start(data, offset, end)
            if first is None and blank_from is None:
                blank_from = _line_start(data, offset, start)
                first = None if paragraphs else blank_from
            if first is None and blank_from is not None:
                first = _blank_end(data, offset, max(blank_from, offset))
            if first is None:
                continue
            i, stop, done = max(first, offset) - offset, len(data), False
            if tail_from is not None and not paragraphs:  # the part ends at the first line start from `end`,
                stop, done = tail_from - offset, True
            elif tail_from is not None:  # or just after the first blank line from there (where that is the one
                closing = _blank_end(data, offset, max(tail_from, offset))  # ending at `first`: empty)
                if closing is not None:
                    stop, done = closing - offset, True
            if stop > i:
                yield offset + i, _decode_lines(data[i:stop], offset + i, path, stats, policy)
            if done:
                if resume and end is not None:
                    _keep((str(path), resume), stream, end)
                    stream = None
                return
    except _Damage as exc:
        if policy != "skip":
            raise damaged(path, f"{exc.lines:,} lines ({exc.offset:,} bytes of text)", exc.cause) from None
        if first is not None:  # the damage is in this part: its end is the text's
            stats.truncated_files += 1
    finally:
        if stream is not None:
            stream.close()


class _Stream:
    """A compressed file open as _whole_lines blocks. A worker mostly reads a file's parts in order, so the
    stream a part stops in is kept (STREAMS_KEPT in a process, keyed by path and content) for a later part
    there: one that starts at or after where that one ended (`end`) goes on from the block it stopped in,
    which gives the blocks a fresh read would after skipping, so a worker decompresses a file about once, not
    once a part. Kept streams are never shared: a part takes one out, and a forked child starts with none."""

    def __init__(self, files: contextlib.ExitStack, lines: Iterator[tuple[int, bytes]]):
        self.files, self.lines = files, lines
        self.block: tuple[int, bytes] | None = None  # the last block read
        self.end = 0

    @classmethod
    def open(cls, path: Path) -> _Stream:
        files = contextlib.ExitStack()
        f = files.enter_context(open_corpus_file(path))
        return cls(files, _whole_lines(path, f))

    def blocks(self) -> Iterator[tuple[int, bytes]]:
        """The blocks from the one the last part stopped in."""
        if self.block is not None:
            yield self.block
        for block in self.lines:
            self.block = block
            yield block

    def close(self) -> None:
        self.lines.close()
        self.files.close()


STREAMS_KEPT = 2  # open compressed streams a process keeps for its next parts (each holds a block and a decoder)
_KEPT: list[tuple[tuple[str, str], _Stream]] = []  # (path and sha256, stream), oldest first
_KEPT_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_KEPT.clear)


def _keep(key: tuple[str, str], stream: _Stream, end: int) -> None:
    """Keep `stream`, which ended a part at text offset `end`, for a later part; the oldest beyond STREAMS_KEPT
    are closed."""
    stream.end = end
    with _KEPT_LOCK:
        _KEPT.append((key, stream))
        dropped = _KEPT[:-STREAMS_KEPT]
        del _KEPT[:-STREAMS_KEPT]
    for _, old in dropped:
        old.close()


def let_go_streams() -> None:
    """Close the streams this process keeps (a build's driver, at its end: its corpus copies go with it)."""
    with _KEPT_LOCK:
        kept = [stream for _, stream in _KEPT]
        _KEPT.clear()
    for stream in kept:
        stream.close()


def _resumed(key: tuple[str, str], start: int) -> _Stream | None:
    """The kept stream of `key` furthest on that stopped at or before `start` (taken out), if any."""
    with _KEPT_LOCK:
        fits = [i for i, (kept, stream) in enumerate(_KEPT) if kept == key and stream.end <= start]
        return _KEPT.pop(max(fits, key=lambda i: _KEPT[i][1].end))[1] if fits else None


def _decode_lines(data: bytes, offset: int, path: Path, stats: CorpusStats, policy: str) -> list[str | None]:
    """The lines of `data` (whole lines, read from byte `offset`), decoded in one call; a block holding
    undecodable bytes is decoded line by line, each bad line following `policy`. A line end is "\n" or
    "\r\n"; a lone "\r" is text (cleaning re-spells it); a BOM starting the file is dropped."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        lines, ends = [], [offset]
        *whole, last = data.split(b"\n")  # `last`: b"" after a line end, else the file's unended last line
        for raw in whole:
            ends.append(ends[-1] + len(raw) + 1)
        for raw, at in zip([raw.removesuffix(b"\r") for raw in whole] + ([last] if last else []), ends):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                where = functools.partial(line_where, path, at, at + exc.start)
                lines.append(_undecodable(raw, stats, policy, where))
    else:
        *lines, last = text.split("\n")
        if "\r" in text:
            lines = [line.removesuffix("\r") for line in lines]
        if last:
            lines.append(last)
    if offset == 0 and lines and lines[0] is not None and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


def _decoded(blocks: Iterator[tuple[int, list[str | None]]]) -> Iterator[str]:
    """The lines of `blocks`, less those skipped as undecodable."""
    for _, lines in blocks:
        yield from ([line for line in lines if line is not None] if None in lines else lines)


def line_at(path: Path, offset: int, k: int) -> str:
    """line_where for line `k` (from 0) of the block that starts at byte `offset` (of the text, when compressed)."""
    with open_corpus_file(path) as f:
        if file_format(path)[1]:  # a zstd stream cannot seek: read up to there
            left = offset
            while left > 0 and (block := f.read(min(left, READ_BYTES))):
                left -= len(block)
        else:
            f.seek(offset)
        at = offset + sum(len(f.readline()) for _ in range(k))
    return line_where(path, at)


def line_where(path: Path, offset: int, byte: int | None = None) -> str:
    """"PATH line N (byte B)" for the line starting at byte `offset`, B that offset or the `byte` a message is
    about (a bad one): the line number is counted only here, when a message needs it, so a shard read from the
    middle of a file never counts lines."""
    newlines, left = 0, offset
    with open_corpus_file(path) as f:
        while left > 0 and (block := f.read(min(left, 1 << 20))):
            newlines += block.count(b"\n")
            left -= len(block)
    return f"{path} line {newlines + 1} (byte {offset if byte is None else byte})"


def line_boundary(path: Path, at: int) -> int:
    """The first line start at or after byte `at` (the file size if none)."""
    if at <= 0:
        return 0
    with open_corpus_file(path) as f:
        f.seek(at - 1)
        f.readline()
        return f.tell()


def paragraph_boundary(path: Path, at: int) -> int:
    """Just after the first blank line (ASCII whitespace only) that starts at or after byte `at`: a place
    where --doc-sep blank ends a document whatever came before (the file size if none)."""
    if at <= 0:
        return 0
    with open_corpus_file(path) as f:
        f.seek(line_boundary(path, at))
        for raw in f:
            if not raw.strip():
                return f.tell()
        return f.tell()


def wrapped_count(lines: list[str | None]) -> int:
    """How many of `lines` look like hard-wrapped prose: non-blank, short, not indented, free of code's characters
    (source code is short lines and blank lines too), and not the end of a sentence."""
    # a blank line (or one of closers only) ends in "", which `in` finds in any string: not counted
    return sum(1 for line in lines
               if line and len(line) <= WRAP_COLUMNS and not line[0].isspace() and not CODE.search(line)
               and line.rstrip().rstrip(CLOSERS)[-1:] not in SENTENCE_ENDS)


def looks_wrapped(documents: int, blank: int, wrapped: int) -> bool:
    """Whether a .txt file read one document per line (`documents` non-blank lines, `blank` blank ones,
    `wrapped` of them hard-wrapped) is prose wrapped into paragraphs, which --doc-sep blank reads whole."""
    lines = documents + blank
    return documents >= WRAPPED_MIN_LINES and blank >= BLANK_SHARE * lines and wrapped >= WRAPPED_SHARE * documents


Blocks = Iterator[tuple[int, list[str | None]]]  # (byte offset, lines) as _line_blocks gives them


def _counted(blocks: Blocks, stats: CorpusStats) -> Blocks:
    """`blocks`, their hard-wrapped lines counted in stats.wrapped_lines."""
    for offset, lines in blocks:
        stats.wrapped_lines += wrapped_count(lines)
        yield offset, lines


def _txt(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None,
         resume: str = "") -> Iterator[str]:
    """One document per line, or per paragraph (lines joined by "\\n") when doc_sep is "blank"."""
    blocks = _line_blocks(path, stats, opts.on_decode_error, start, end, opts.doc_sep == "blank", resume)
    if opts.doc_sep == "line":
        yield from _decoded(_counted(blocks, stats))
        return
    lines = _decoded(blocks)
    paragraph: list[str] = []
    for text in lines:
        if text and not text.isspace():
            paragraph.append(text)
        elif paragraph:
            yield "\n".join(paragraph)
            paragraph = []
    if paragraph:
        yield "\n".join(paragraph)


def _has_field(record: Any, column: str, where: Callable[[], str], stats: CorpusStats) -> bool:
    """Whether a JSON record has the text field; records without it are counted, with the fields they have,
    and skipped (a corpus where over half lack it is refused after reading: see missing_field_error)."""
    if not isinstance(record, dict):
        raise CorpusError(f"{where()}: expected a JSON object with a {column!r} field, got {type(record).__name__}")
    stats.json_records += 1
    if column not in record:
        stats.missing_field_skipped += 1
        keys = stats.missing_field_keys
        for key in record:
            if key in keys or len(keys) < KEYS_KEPT:
                keys[key] = keys.get(key, 0) + 1
        return False
    return True


MISSING_FIELD_REFUSED = 0.5  # a build where more than this share of the JSON records lack the text field stops




def missing_field_error(source: str, stats: dict, column: str) -> CorpusError | None:
    """The error for a corpus where over MISSING_FIELD_REFUSED of the JSON records lack the text field (a
    misspelt --text-column), naming the fields they have; None for any other corpus."""
    missing, records = stats.get("missing_field_skipped", 0), stats.get("json_records", 0)
    if missing <= MISSING_FIELD_REFUSED * records:
        return None
    which = (f"none of its {records:,} records has a" if missing == records
             else f"{missing:,} of its {records:,} records lack the")
    fields = common_fields(stats.get("missing_field_keys", {}))
    return CorpusError(f"{source}: {which} {column!r} field; pass --text-column NAME (their fields: {fields})")


def no_text_error(source: str, stats: dict, column: str) -> CorpusError:
    """The error for a corpus that gave no document; when its records lack the text field, it says so."""
    return missing_field_error(source, stats, column) or CorpusError(
        f"{source}: the corpus has no text (no non-blank documents); check the path")


def _record_text(record: dict, column: str, where: Callable[[], str]) -> str | None:
    """The text field of one JSON record (None if null); `where()` names the record, for a message."""
    value = record[column]
    if value is not None and not isinstance(value, str):
        kind = type(value).__name__
        raise CorpusError(f"{where()}: field {column!r} holds {kind}, not text; pass --text-column NAME")
    return value


def json_error(exc: json.JSONDecodeError) -> str:
    """What is wrong and the column: "Unterminated string starting at column 9" (the message of some
    errors already ends in "at")."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def json_value(text: str, where: Callable[[], str] | Path) -> Any:
    """json.loads(text), any failure a CorpusError naming the record (`where()`), or the file and the line of
    the error: besides bad JSON, Python's parser refuses nesting deeper than its recursion limit and integers
    of over 4,300 digits."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        line, problem = exc.lineno, f"not valid JSON ({json_error(exc)})"
    except RecursionError:
        line, problem = None, "JSON nested too deeply to parse"
    except ValueError as exc:  # an integer too long for int()
        line, problem = None, f"cannot parse its JSON ({str(exc).split(':')[0]})"
    place = where() if callable(where) else f"{where} line {line}" if line else str(where)
    raise CorpusError(f"{place}: {problem}; remove or fix that record")


def _jsonl(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None,
           resume: str = "") -> Iterator[str | None]:
    """One document per JSON line; blank lines between records are ignored, and so is a BOM starting a line
    (concatenated files keep theirs)."""
    for offset, lines in _line_blocks(path, stats, opts.on_decode_error, start, end, resume=resume):
        for k, text in enumerate(lines):
            text = text and text.removeprefix("\ufeff")
            if not text or text.isspace():  # blank, or skipped as undecodable (None)
                continue
            where = functools.partial(line_at, path, offset, k)
            record = json_value(text, where)
            if _has_field(record, opts.text_column, where, stats):
                yield _record_text(record, opts.text_column, where)


def whole_json(path: Path) -> bool:
    """Whether a .json file is one JSON document, parsed whole, rather than JSON lines: a top-level array, or
    one object spread over lines (its first line is an object cut short where the line ends, which no JSON
    line is)."""
    try:
        with open_corpus_file(path) as f:
            head = f.read(SNIFF_BYTES).removeprefix(BOM).lstrip()
    except damage_errors(path):  # damage in its first bytes: read as JSON lines, whose reader reports it
        return False
    if head.startswith(b"["):
        return True
    first, newline, _ = head.partition(b"\n")
    if not (first.startswith(b"{") and newline):  # a first line longer than the head is a JSON line
        return False
    first_line = first.decode("utf-8", "replace").rstrip()
    try:
        json.loads(first_line)
    except json.JSONDecodeError as exc:
        return exc.pos == len(first_line)
    return False


def _json(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """JSON lines, or one document parsed whole: an array of records, or one record."""
    if not whole_json(path):
        yield from _jsonl(path, stats, opts)
        return
    blocks = _line_blocks(path, stats, opts.on_decode_error)
    text = "\n".join(line or "" for _, lines in blocks for line in lines)  # a skipped line still counts in errors
    records = json_value(text, path)
    for i, record in enumerate(records if isinstance(records, list) else [records]):
        where = functools.partial("{} record {}".format, path, i + 1)
        if _has_field(record, opts.text_column, where, stats):
            yield _record_text(record, opts.text_column, where)


# ------------------------------------------------------------------------------------------------ columnar files


def column_texts(batches: Iterable, schema, source: str | Path, stats: CorpusStats, opts: ReadOptions,
                 first_row: int = 0):
    """The text column of Arrow record batches (or tables); binary values, and string values that are not valid
    UTF-8, are decoded like lines of text (--on-decode-error). Rows are numbered in messages from `first_row` + 1
    (a part read from the middle of a file)."""
    import pyarrow as pa

    column = opts.text_column
    _check_text_column(schema, column, source)
    row = first_row
    try:
        for batch in batches:
            for value in _python_values(batch.column(column)):
                row += 1
                if isinstance(value, bytes):
                    try:
                        value = value.decode("utf-8")
                    except UnicodeDecodeError:
                        value = _undecodable(value, stats, opts.on_decode_error, lambda row=row: f"{source} row {row}")
                        if value is None:  # skipped: counted as a decode error, not as a null
                            continue
                yield value
    except (pa.ArrowException, OSError) as exc:  # damage found part way through the file
        raise CorpusError(f"{source} after row {row}: cannot read ({str(exc).splitlines()[0]})") from None


def _check_text_column(schema, column: str, source: str | Path) -> None:
    """Refuse a schema without exactly one column `column` of a text type (string, binary or null: a column
    of nulls only, as pandas writes one, is read as nulls)."""
    import pyarrow as pa

    count = schema.names.count(column)
    if not count:
        names = ", ".join(schema.names)
        raise CorpusError(f"{source}: no column {column!r}; pass --text-column NAME (columns here: {names})")
    if count > 1:
        raise CorpusError(f"{source}: {count} columns are named {column!r}; rename one, or pass --text-column NAME")
    kind = schema.field(column).type
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    checks = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view, pa.types.is_binary,
              pa.types.is_large_binary, pa.types.is_null)
    if not any(check(kind) for check in checks):
        raise CorpusError(f"{source}: column {column!r} holds {kind}, not text; pass --text-column NAME")


def _python_values(array) -> list:
    """The values of a text column's batch: str, or bytes for the caller to decode one by one where the column
    is binary or is a string column holding invalid UTF-8 (Arrow writers do not check it): only such a batch
    is converted twice. A batch is validated first: a memory-mapped Arrow file is read without checks, and
    the offsets of a damaged one would crash the conversion (ArrowInvalid here: a CorpusError in column_texts)."""
    import pyarrow as pa

    try:
        array.validate(full=True)
    except pa.ArrowInvalid:  # invalid UTF-8, or damage
        array.cast(pa.large_binary()).validate(full=True)  # damage: ArrowInvalid again (a cast is cheap: offsets)
        return array.cast(pa.large_binary()).to_pylist()
    return array.to_pylist()


def parquet_file(path: Path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(raw_file(path).open() if storage.is_url(path) else path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise CorpusError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None


def _parquet(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
             ) -> Iterator[str | None]:
    """Row groups [start, end) of a Parquet file."""
    pf = parquet_file(path)
    groups = list(range(start, pf.num_row_groups if end is None else end))
    first_row = sum(pf.metadata.row_group(g).num_rows for g in range(start))
    # lazy: the column is checked first
    batches = pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=[opts.text_column])
    yield from column_texts(batches, pf.schema_arrow, path, stats, opts, first_row)


def _csv(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """The text column is read as bytes, so --on-decode-error applies to it as to lines of text; a binary or
    UTF-16 file is refused as a text file is."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if not file_format(path)[1]:  # a compressed file's first block is checked as it is read (_whole_lines)
        with open_corpus_file(path) as f:
            _check_text(path, f.read(SNIFF_BYTES))

    with contextlib.ExitStack() as files:
        def reader(columns: list[str] | None):
            types = {c: pa.large_binary() for c in columns or ()}
            convert = pacsv.ConvertOptions(include_columns=columns, column_types=types)
            read = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES)
            f = files.enter_context(open_corpus_file(path))
            if file_format(path)[1]:  # damage ends the stream after the whole lines before it (see _csv_lines)
                f = io.BufferedReader(_Chunks(_csv_lines(path, f, stats, opts.on_decode_error)), READ_BYTES)
            return pacsv.open_csv(f, read, pacsv.ParseOptions(newlines_in_values=True), convert)

        try:
            try:
                batches = reader([opts.text_column])
            except KeyError:  # no such column: open without options so column_texts can list the columns
                batches = reader(None)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CorpusError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None
        yield from column_texts(batches, batches.schema, path, stats, opts)


def _csv_lines(path: Path, f, stats: CorpusStats, policy: str) -> Iterator[bytes]:
    """The whole lines of a compressed CSV file for Arrow's parser, which reads ahead in threads: damage is the
    error of text files, or with policy "skip" the end of the file after the whole lines before it (a quoted
    value the damage cuts is then a parse error), wherever the parser's threads were."""
    try:
        for _, data in _whole_lines(path, f):
            yield data
    except _Damage as exc:
        if policy != "skip":
            raise damaged(path, f"{exc.lines:,} lines ({exc.offset:,} bytes of text)", exc.cause) from None
        stats.truncated_files += 1


def _arrow(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
           ) -> Iterator[str | None]:
    """An Arrow IPC file (its record batches [start, end)), or an IPC stream (what `datasets` save_to_disk
    writes; read whole)."""
    import pyarrow as pa

    first_row = 0
    with arrow_source(path) as source:
        try:
            reader = pa.ipc.open_file(source)
            first_row = sum(reader.get_batch(i).num_rows for i in range(start))  # zero-copy batches
            batches = (reader.get_batch(i) for i in range(start, reader.num_record_batches if end is None else end))
        except pa.ArrowInvalid:
            source.seek(0)
            try:
                reader = batches = pa.ipc.open_stream(source)
            except pa.ArrowInvalid as exc:
                raise CorpusError(f"{path}: not an Arrow IPC file or stream ({str(exc).splitlines()[0]})") from None
        yield from column_texts(batches, reader.schema, path, stats, opts, first_row)


def arrow_source(path: Path | str):
    """An Arrow file to read from: mapped into memory on disk, read in ranges from a URL."""
    import pyarrow as pa

    return raw_file(path).open() if storage.is_url(path) else pa.memory_map(str(path))


READERS: dict[str, Callable[[Path, CorpusStats, ReadOptions], Iterator[str | None]]] = {
    ".txt": _txt, ".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".csv": _csv, ".arrow": _arrow,
}


__all__ = ["BATCH_ROWS", "READERS", "SUPPORTED", "CorpusStats", "ReadOptions", "column_texts"]
