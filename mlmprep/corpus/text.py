""".txt files: one document per line, or per paragraph with --doc-sep blank. A file is read as bytes and decoded
about READ_BYTES of whole lines at a time (a compressed one through streams.stream_blocks); a block holding
undecodable bytes is decoded line by line, so --on-decode-error can replace, skip or refuse one bad line. Also
the line and paragraph boundaries a byte range is aligned to, the place a message names, and the hard-wrapped
prose hint."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

from mlmprep.corpus.files import SNIFF_BYTES, CorpusStats, ReadOptions, check_text, file_format, undecodable
from mlmprep.corpus.streams import READ_BYTES, open_corpus_file, stream_blocks

WRAP_COLUMNS = 100  # a hard-wrapped line is at most this long ...
SENTENCE_ENDS = ".!?;:…。！？"  # ... and does not end in one of these (closing quotes and brackets aside)
CLOSERS = "\"'”’»)]*`"
CODE = re.compile(r"[=_{}<>#@\\|;\[\]]")  # ... nor holds characters source code is made of and prose rarely is
WRAPPED_SHARE = 0.5  # a .txt file looks like hard-wrapped prose when at least this share of its lines do,
BLANK_SHARE = 0.01  # at least this share of its lines are blank (paragraphs: what --doc-sep blank would keep),
WRAPPED_MIN_LINES = 20  # and it has at least this many non-blank lines

Blocks = Iterator[tuple[int, list[str | None]]]  # (byte offset, lines) as line_blocks gives them


def line_blocks(path: Path, stats: CorpusStats, policy: str, start: int = 0, end: int | None = None,
                paragraphs: bool = False, resume: str = "") -> Blocks:
    """(byte offset, lines) for the lines that start in bytes [start, end) of the file (`start` a line start),
    about READ_BYTES at a time: each line decoded and without its line end, None for an undecodable line that
    `policy` skips. A block whose last line runs on is completed by one buffered readline, so a 50 MB line
    is read in linear time and held once. A compressed file's part is read by streams.stream_blocks, whose `start`
    and `end` are offsets in its text that it aligns itself (and `resume` lets it go on from an earlier part)."""
    if file_format(path)[1]:
        for offset, data in stream_blocks(path, stats, policy, start, end, paragraphs, resume):
            yield offset, _decode_lines(data, offset, path, stats, policy)
        return
    with open_corpus_file(path) as f:
        check_text(path, f.read(SNIFF_BYTES))
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
                lines.append(undecodable(raw, stats, policy, where))
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


def read_txt(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None,
             resume: str = "") -> Iterator[str]:
    """One document per line, or per paragraph (lines joined by "\\n") when doc_sep is "blank"."""
    blocks = line_blocks(path, stats, opts.on_decode_error, start, end, opts.doc_sep == "blank", resume)
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


# ------------------------------------------------------------------------------------------ boundaries and places


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


# --------------------------------------------------------------------------------------------- hard-wrapped prose


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


def _counted(blocks: Blocks, stats: CorpusStats) -> Blocks:
    """`blocks`, their hard-wrapped lines counted in stats.wrapped_lines."""
    for offset, lines in blocks:
        stats.wrapped_lines += wrapped_count(lines)
        yield offset, lines


__all__ = ["line_boundary", "looks_wrapped", "paragraph_boundary", "read_txt"]
