"""Compressed corpus files as streams: opening any corpus file (decompressed where its name says so; zstd through a
reader that reports a truncated frame), the whole lines of a decompressed text up to any damage, a part of that text
by text offsets, and the streams a process keeps so that its next part of the file goes on where the last stopped.

Damaged data (a truncated file, a corrupt block) stops every reader of a file at the same byte: it is a CorpusError,
or with --on-decode-error skip the end of the file's text (the text before it is kept, its cut last line dropped).
"""

from __future__ import annotations

import contextlib
import io
import lzma
import os
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.files import SNIFF_BYTES, CorpusStats, check_magic, check_text, file_format, raw_file
from mlmprep.errors import CorpusError

READ_BYTES = 1 << 20  # bytes of a text file read and decoded at a time
STREAM_BYTES = 1 << 16  # bytes read at a time from a decompressed stream: damage keeps the text before it to this


# -------------------------------------------------------------------------------------------------- opening files


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


# ----------------------------------------------------------------------------------- whole lines up to the damage


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
                check_text(path, block[:SNIFF_BYTES])
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


def csv_stream(path: Path, f, stats: CorpusStats, policy: str) -> io.BufferedReader:
    """A compressed CSV file's decompressed stream `f` as Arrow's parser is to read it: the whole lines before any
    damage (see _csv_lines)."""
    return io.BufferedReader(_Chunks(_csv_lines(path, f, stats, policy)), READ_BYTES)


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


# --------------------------------------------------------------------------------------------- a part of the text


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


def stream_blocks(path: Path, stats: CorpusStats, policy: str, start: int, end: int | None,
                  paragraphs: bool, resume: str = "") -> Iterator[tuple[int, bytes]]:
    """(text offset, whole lines) of a compressed file's part, for text.line_blocks to decode: the lines that
    start in text offsets [start, end), both aligned
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
                yield offset + i, data[i:stop]
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


# --------------------------------------------------------------------------------- streams kept for the next part


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


__all__ = ["csv_stream", "damage_errors", "let_go_streams", "open_corpus_file", "stream_blocks"]
