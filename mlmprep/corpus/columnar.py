"""Columnar files: Parquet, CSV and Arrow IPC files or streams, read in record batches; the text column's values,
binary or invalid UTF-8 ones decoded like lines of text (--on-decode-error)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.files import SNIFF_BYTES, CorpusStats, ReadOptions, check_text, file_format, raw_file, undecodable
from mlmprep.corpus.streams import csv_stream, open_corpus_file
from mlmprep.errors import CorpusError

BATCH_ROWS = 1024  # rows per record batch read from Parquet files and datasets
CSV_BLOCK_BYTES = 1 << 20


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
                        value = undecodable(value, stats, opts.on_decode_error, lambda row=row: f"{source} row {row}")
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


def read_parquet(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
                 ) -> Iterator[str | None]:
    """Row groups [start, end) of a Parquet file."""
    pf = parquet_file(path)
    groups = list(range(start, pf.num_row_groups if end is None else end))
    first_row = sum(pf.metadata.row_group(g).num_rows for g in range(start))
    # lazy: the column is checked first
    batches = pf.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=[opts.text_column])
    yield from column_texts(batches, pf.schema_arrow, path, stats, opts, first_row)


def read_csv(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """The text column is read as bytes, so --on-decode-error applies to it as to lines of text; a binary or
    UTF-16 file is refused as a text file is."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if not file_format(path)[1]:  # a compressed file's first block is checked as it is read (_whole_lines)
        with open_corpus_file(path) as f:
            check_text(path, f.read(SNIFF_BYTES))

    with contextlib.ExitStack() as files:
        def reader(columns: list[str] | None):
            types = {c: pa.large_binary() for c in columns or ()}
            convert = pacsv.ConvertOptions(include_columns=columns, column_types=types)
            read = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES)
            f = files.enter_context(open_corpus_file(path))
            if file_format(path)[1]:  # damage ends the stream after the whole lines before it
                f = csv_stream(path, f, stats, opts.on_decode_error)
            return pacsv.open_csv(f, read, pacsv.ParseOptions(newlines_in_values=True), convert)

        try:
            try:
                batches = reader([opts.text_column])
            except KeyError:  # no such column: open without options so column_texts can list the columns
                batches = reader(None)
        except (pa.ArrowInvalid, OSError) as exc:
            raise CorpusError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None
        yield from column_texts(batches, batches.schema, path, stats, opts)


def read_arrow(path: Path, stats: CorpusStats, opts: ReadOptions, start: int = 0, end: int | None = None
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


__all__ = ["BATCH_ROWS", "column_texts", "read_arrow", "read_csv", "read_parquet"]
