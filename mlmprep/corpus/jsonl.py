""".jsonl files, and .json files of JSON lines or of one document parsed whole (a top-level array, or one object
over several lines: use JSON lines for large corpora): each record's text field, records without it counted
with the fields they have, and the error for a corpus where most lack it."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from mlmprep.corpus.files import BOM, SNIFF_BYTES, CorpusStats, ReadOptions
from mlmprep.corpus.streams import damage_errors, open_corpus_file
from mlmprep.corpus.text import line_at, line_blocks
from mlmprep.errors import CorpusError, common_fields

KEYS_KEPT = 100  # distinct field names counted per shard among records without the text field
MISSING_FIELD_REFUSED = 0.5  # a build where more than this share of the JSON records lack the text field stops


def read_jsonl(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None,
               resume: str = "") -> Iterator[str | None]:
    """One document per JSON line; blank lines between records are ignored, and so is a BOM starting a line
    (concatenated files keep theirs)."""
    for offset, lines in line_blocks(path, stats, opts.on_decode_error, start, end, resume=resume):
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


def read_json(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """JSON lines, or one document parsed whole: an array of records, or one record."""
    if not whole_json(path):
        yield from read_jsonl(path, stats, opts)
        return
    blocks = line_blocks(path, stats, opts.on_decode_error)
    text = "\n".join(line or "" for _, lines in blocks for line in lines)  # a skipped line still counts in errors
    records = json_value(text, path)
    for i, record in enumerate(records if isinstance(records, list) else [records]):
        where = functools.partial("{} record {}".format, path, i + 1)
        if _has_field(record, opts.text_column, where, stats):
            yield _record_text(record, opts.text_column, where)


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


def _record_text(record: dict, column: str, where: Callable[[], str]) -> str | None:
    """The text field of one JSON record (None if null); `where()` names the record, for a message."""
    value = record[column]
    if value is not None and not isinstance(value, str):
        kind = type(value).__name__
        raise CorpusError(f"{where()}: field {column!r} holds {kind}, not text; pass --text-column NAME")
    return value


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


def json_error(exc: json.JSONDecodeError) -> str:
    """What is wrong and the column: "Unterminated string starting at column 9" (the message of some
    errors already ends in "at")."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


# ------------------------------------------------------------------------------------- a corpus without the field


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


__all__ = ["missing_field_error", "no_text_error", "read_json", "read_jsonl", "whole_json"]
