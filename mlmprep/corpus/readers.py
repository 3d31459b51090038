"""Readers: one file of a supported format -> its document texts, with what was skipped or replaced counted.

Text files are read as bytes and decoded about 1 MB of whole lines at a time; a block holding undecodable
bytes is decoded line by line, so --on-decode-error can replace, skip or refuse one bad line. Parquet, CSV
and Arrow files are read in record batches. The exception is a `.json` file holding one JSON document (a
top-level array, or one object over several lines), which is parsed whole (use JSON lines for large corpora).

Binary files: a .txt/.json/.jsonl/.csv file that starts with a UTF-16 byte-order mark, or whose first 8 KiB
hold NUL bytes and are over 1% undecodable (an image, an archive) or over 1% NUL (UTF-16 text), is refused.
Other NULs are text, dropped by the clean stage, and other undecodable bytes follow --on-decode-error (a stray
NUL beside one Latin-1 byte is still text).
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlmprep.errors import CorpusError, common_fields

SUPPORTED = (".txt", ".jsonl", ".json", ".parquet", ".csv", ".arrow")
BATCH_ROWS = 1024  # rows per record batch read from Parquet files and datasets
CSV_BLOCK_BYTES = 1 << 20
SNIFF_BYTES = 8192
READ_BYTES = 1 << 20  # bytes of a text file read and decoded at a time
BOM = b"\xef\xbb\xbf"
KEYS_KEPT = 100  # distinct field names counted per shard among records without the text field
WRAP_COLUMNS = 100  # a hard-wrapped line is at most this long ...
SENTENCE_ENDS = ".!?;:…。！？"  # ... and does not end in one of these (closing quotes and brackets aside)
CLOSERS = "\"'”’»)]*`"
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
    files_skipped: list[str] = field(default_factory=list)  # unsupported files; hidden, linked, unreadable dirs/

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ReadOptions:
    text_column: str = "text"
    doc_sep: str = "line"
    on_decode_error: str = "replace"


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


def _line_blocks(path: Path, stats: CorpusStats, policy: str, start: int = 0, end: int | None = None
                 ) -> Iterator[tuple[int, list[str | None]]]:
    """(byte offset, lines) for the lines that start in bytes [start, end) of the file (`start` a line start),
    about READ_BYTES at a time: each line decoded and without its line end, None for an undecodable line that
    `policy` skips. A block whose last line runs on is completed by one buffered readline, so a 50 MB line
    is read in linear time and held once."""
    with open(path, "rb") as f:
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
            except UnicodeDecodeError:
                lines.append(_undecodable(raw, stats, policy, functools.partial(line_where, path, at)))
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
    """line_where for line `k` (from 0) of the block that starts at byte `offset`."""
    with open(path, "rb") as f:
        f.seek(offset)
        for _ in range(k):
            f.readline()
        return line_where(path, f.tell())


def line_where(path: Path, offset: int) -> str:
    """"PATH line N (byte OFFSET)" for the line starting at byte `offset`: the line number is counted only
    here, when a message needs it, so a shard read from the middle of a file never counts lines."""
    newlines, left = 0, offset
    with open(path, "rb") as f:
        while left > 0 and (block := f.read(min(left, 1 << 20))):
            newlines += block.count(b"\n")
            left -= len(block)
    return f"{path} line {newlines + 1} (byte {offset})"


def line_boundary(path: Path, at: int) -> int:
    """The first line start at or after byte `at` (the file size if none)."""
    if at <= 0:
        return 0
    with open(path, "rb") as f:
        f.seek(at - 1)
        f.readline()
        return f.tell()


def paragraph_boundary(path: Path, at: int) -> int:
    """Just after the first blank line (ASCII whitespace only) that starts at or after byte `at`: a place
    where --doc-sep blank ends a document whatever came before (the file size if none)."""
    if at <= 0:
        return 0
    with open(path, "rb") as f:
        f.seek(line_boundary(path, at))
        for raw in f:
            if not raw.strip():
                return f.tell()
        return f.tell()


def wrapped_count(lines: list[str | None]) -> int:
    """How many of `lines` look like hard-wrapped prose: non-blank, short, and not the end of a sentence."""
    # a blank line (or one of closers only) ends in "", which `in` finds in any string: not counted
    return sum(1 for line in lines
               if line and len(line) <= WRAP_COLUMNS and line.rstrip().rstrip(CLOSERS)[-1:] not in SENTENCE_ENDS)


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


def _txt(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None) -> Iterator[str]:
    """One document per line, or per paragraph (lines joined by "\\n") when doc_sep is "blank"."""
    blocks = _line_blocks(path, stats, opts.on_decode_error, start, end)
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


def _jsonl(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
           ) -> Iterator[str | None]:
    """One document per JSON line; blank lines between records are ignored, and so is a BOM starting a line
    (concatenated files keep theirs)."""
    for offset, lines in _line_blocks(path, stats, opts.on_decode_error, start, end):
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
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES).removeprefix(BOM).lstrip()
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
        return pq.ParquetFile(path)
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

    with open(path, "rb") as f:
        _check_text(path, f.read(SNIFF_BYTES))

    def reader(columns: list[str] | None):
        types = {c: pa.large_binary() for c in columns or ()}
        convert = pacsv.ConvertOptions(include_columns=columns, column_types=types)
        read = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES)
        return pacsv.open_csv(path, read, pacsv.ParseOptions(newlines_in_values=True), convert)

    try:
        try:
            batches = reader([opts.text_column])
        except KeyError:  # no such column: open without options so column_texts can list the columns
            batches = reader(None)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorpusError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None
    yield from column_texts(batches, batches.schema, path, stats, opts)


def _arrow(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
           ) -> Iterator[str | None]:
    """An Arrow IPC file (its record batches [start, end)), or an IPC stream (what `datasets` save_to_disk
    writes; read whole)."""
    import pyarrow as pa

    first_row = 0
    with pa.memory_map(str(path)) as source:
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


READERS: dict[str, Callable[[Path, CorpusStats, ReadOptions], Iterator[str | None]]] = {
    ".txt": _txt, ".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".csv": _csv, ".arrow": _arrow,
}


__all__ = ["BATCH_ROWS", "READERS", "SUPPORTED", "CorpusStats", "ReadOptions", "column_texts"]
