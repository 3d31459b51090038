"""Corpus: files, a `datasets` dataset or the built-in sample -> a re-iterable stream of document strings.

Nothing is held whole: text files are read as bytes and decoded line by line (so --on-decode-error can
replace, skip or refuse one bad line), Parquet/CSV/Arrow files in record batches, and a dataset stays
memory-mapped in the Hugging Face cache. The exception is a `.json` file holding one top-level array,
which is parsed whole (use JSON lines for large corpora). All that is skipped or replaced is counted in
CorpusStats, which the build writes to its manifest.

Binary files: a .txt/.json/.jsonl file whose first 8 KiB hold NUL bytes and are over 1% undecodable (an
image, an archive) or over 1% NUL (UTF-16 text) is refused. Other NULs are text, dropped by the clean stage,
and other undecodable bytes follow --on-decode-error (a stray NUL beside one Latin-1 byte is still text).
"""

from __future__ import annotations

import codecs
import dataclasses
import glob
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlmprep.errors import ConfigError, CorpusError

SUPPORTED = (".txt", ".jsonl", ".json", ".parquet", ".csv", ".arrow")
DOC_SEPS = ("line", "blank")
DECODE_POLICIES = ("replace", "skip", "fail")
BATCH_ROWS = 1024  # rows per record batch read from Parquet files and datasets
CSV_BLOCK_BYTES = 1 << 20
HASH_CHUNK_BYTES = 1 << 20
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


@dataclass
class Corpus:
    """A corpus ready to stream. `read(stats)` yields raw texts (None for nulls); `documents()` filters them."""

    description: str  # "3 files, 15.3 MB" / "dataset wikitext:wikitext-2-raw-v1 [train], 36718 rows" / ...
    fingerprint: str  # sha256 hex of the content (for a dataset: of its own fingerprint and version)
    files: list[dict]  # [{"path", "bytes", "sha256"}] for file corpora, else []
    stats: CorpusStats  # counts of the most recent pass of documents()
    read: Callable[[CorpusStats], Iterator[str | None]] = field(repr=False, compare=False)

    def documents(self) -> Iterator[str]:
        """Stream the non-blank documents from the start; each call begins a new `stats`."""
        stats = self.stats = CorpusStats(files=self.stats.files, files_skipped=self.stats.files_skipped)
        for text in self.read(stats):
            if text is None:
                stats.null_skipped += 1
            elif not text or text.isspace():
                stats.blank_skipped += 1
            else:
                stats.documents += 1
                stats.characters += len(text)
                yield text


# ------------------------------------------------------------------------------------------------ sources


def resolve_sources(patterns: Sequence[str]) -> list[Path]:
    """Files, directories (searched recursively, sorted) and globs -> the corpus files, each once."""
    return _resolve(patterns)[0]


def _resolve(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    """(files to read, entries skipped in directories and globs); a path named explicitly must be readable."""
    patterns = [str(p) for p in patterns]  # Path objects are welcome too
    found: list[Path] = []
    skipped: list[str] = []
    for pattern in patterns:
        path = Path(pattern)
        if not os.path.lexists(path) and any(c in pattern for c in "*?["):
            matches = sorted(Path(m) for m in glob.glob(pattern, recursive=True))
            if not matches:
                raise CorpusError(f"{pattern}: the glob matches nothing; check it (and quote it from the shell)")
            for match in matches:
                _add_member(match, found, skipped)
        elif path.is_symlink() and not path.exists():
            raise CorpusError(f"{path}: broken symbolic link; point it at a corpus file or remove it")
        elif not path.exists():
            raise CorpusError(f"{path}: no such file or directory; corpus paths are files, directories or globs")
        elif path.is_dir():
            _walk(path, found, skipped)
        elif path.suffix.lower() not in SUPPORTED:
            kind = path.suffix or "(no extension)"
            raise CorpusError(f"{path}: unsupported file type {kind}; use one of {', '.join(SUPPORTED)}")
        else:
            found.append(path)
    if not found:
        raise CorpusError(f"{', '.join(patterns)}: no corpus files ({', '.join(SUPPORTED)}) found")
    unique: dict[Path, Path] = {}
    for path in found:  # a file named twice (itself and in its directory) is read once, where first named
        unique.setdefault(path.resolve(), path)
    return list(unique.values()), skipped


def _walk(folder: Path, found: list[Path], skipped: list[str]) -> None:
    """Add the files under `folder` in sorted order; hidden and symlinked directories are not entered."""
    members: list[Path] = []
    for root, dirs, names in os.walk(folder, onerror=lambda exc: skipped.append(f"{exc.filename}/")):
        for d in list(dirs):
            if d.startswith(".") or Path(root, d).is_symlink():  # .git, caches; links may loop
                skipped.append(f"{Path(root, d)}/")
                dirs.remove(d)
        members.extend(Path(root, n) for n in names)
    for path in sorted(members):
        _add_member(path, found, skipped)


def _add_member(path: Path, found: list[Path], skipped: list[str]) -> None:
    if path.is_dir():
        _walk(path, found, skipped)
    elif path.is_file() and path.suffix.lower() in SUPPORTED:
        found.append(path)
    else:
        skipped.append(str(path))


# ------------------------------------------------------------------------------------------------ text files


def _undecodable(raw: bytes, stats: CorpusStats, policy: str, where: str) -> str | None:
    """A line or value that is not UTF-8: replaced (U+FFFD), skipped (None) or refused, and counted."""
    if policy == "fail":
        raise CorpusError(f"{where}: invalid UTF-8; use --on-decode-error replace|skip")
    stats.decode_errors += 1
    if policy == "skip":
        stats.decode_skipped_lines += 1
        return None
    stats.decode_replaced_lines += 1
    return raw.decode("utf-8", "replace")


def _check_text(path: Path, head: bytes) -> None:
    """Refuse a file whose first bytes hold NULs and are over 1% NUL or over 1% undecodable bytes."""
    if b"\0" in head:
        decoded = codecs.getincrementaldecoder("utf-8")("replace").decode(head)  # a cut last character is fine
        undecodable = decoded.count("\ufffd") - head.count("\ufffd".encode())
        if max(head.count(b"\0"), undecodable) * 100 > len(head):
            raise CorpusError(f"{path}: binary or UTF-16 data (NUL bytes in its first 8 KiB); convert it to UTF-8")


def _lines(path: Path, stats: CorpusStats, policy: str) -> Iterator[tuple[int, str]]:
    """(line number from 1, decoded line without its line end); skipped undecodable lines are left out."""
    with open(path, "rb") as f:
        _check_text(path, f.read(SNIFF_BYTES))
        f.seek(0)
        for lineno, raw in enumerate(f, 1):  # buffered readline: linear even for a 50 MB line
            if lineno == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if raw.endswith(b"\n"):
                raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = _undecodable(raw, stats, policy, f"{path} line {lineno}")
            if text is not None:
                yield lineno, text


def _txt(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str]:
    """One document per line, or per paragraph (lines joined by "\\n") when doc_sep is "blank"."""
    lines = (text for _, text in _lines(path, stats, opts.on_decode_error))
    if opts.doc_sep == "line":
        yield from lines
        return
    paragraph: list[str] = []
    for text in lines:
        if text and not text.isspace():
            paragraph.append(text)
        elif paragraph:
            yield "\n".join(paragraph)
            paragraph = []
    if paragraph:
        yield "\n".join(paragraph)


def _record_text(record: Any, column: str, where: str) -> str | None:
    """The text field of one JSON record (None if null)."""
    if not isinstance(record, dict):
        raise CorpusError(f"{where}: expected a JSON object with a {column!r} field, got {type(record).__name__}")
    if column not in record:
        fields = ", ".join(list(record)[:12]) or "none"
        raise CorpusError(f"{where}: no {column!r} field; pass --text-column NAME (fields here: {fields})")
    value = record[column]
    if value is not None and not isinstance(value, str):
        kind = type(value).__name__
        raise CorpusError(f"{where}: field {column!r} holds {kind}, not text; pass --text-column NAME")
    return value


def _jsonl(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """One document per JSON line; blank lines between records are ignored."""
    for lineno, text in _lines(path, stats, opts.on_decode_error):
        if not text or text.isspace():
            continue
        where = f"{path} line {lineno}"
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        yield _record_text(record, opts.text_column, where)


def _json(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """JSON lines, or one top-level array of records (parsed whole)."""
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if not head.removeprefix(BOM).lstrip().startswith(b"["):
        yield from _jsonl(path, stats, opts)
        return
    text = "\n".join(line for _, line in _lines(path, stats, opts.on_decode_error))
    try:
        records = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
    for i, record in enumerate(records):
        yield _record_text(record, opts.text_column, f"{path} record {i + 1}")


# ------------------------------------------------------------------------------------------------ columnar files


def _column_texts(batches: Iterable, schema, source: str | Path, stats: CorpusStats, opts: ReadOptions):
    """The text column of Arrow record batches (or tables); binary values are decoded like lines of text."""
    import pyarrow as pa

    column = opts.text_column
    if column not in schema.names:
        names = ", ".join(schema.names)
        raise CorpusError(f"{source}: no column {column!r}; pass --text-column NAME (columns here: {names})")
    kind = schema.field(column).type
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    is_binary = pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    if not (is_binary or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise CorpusError(f"{source}: column {column!r} holds {kind}, not text; pass --text-column NAME")
    row = 0
    try:
        for batch in batches:
            for value in batch.column(column).to_pylist():
                row += 1
                if is_binary and value is not None:
                    try:
                        value = value.decode("utf-8")
                    except UnicodeDecodeError:
                        value = _undecodable(value, stats, opts.on_decode_error, f"{source} row {row}")
                yield value
    except (pa.ArrowException, OSError) as exc:  # damage found part way through the file
        raise CorpusError(f"{source} after row {row}: cannot read ({str(exc).splitlines()[0]})") from None


def _parquet(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise CorpusError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]})") from None
    batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=[opts.text_column])  # lazy: the column is checked first
    yield from _column_texts(batches, pf.schema_arrow, path, stats, opts)


def _csv(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """The text column is read as bytes, so --on-decode-error applies to it as to lines of text."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    def reader(columns: list[str] | None):
        types = {c: pa.large_binary() for c in columns or ()}
        convert = pacsv.ConvertOptions(include_columns=columns, column_types=types)
        read = pacsv.ReadOptions(block_size=CSV_BLOCK_BYTES)
        return pacsv.open_csv(path, read, pacsv.ParseOptions(newlines_in_values=True), convert)

    try:
        try:
            batches = reader([opts.text_column])
        except KeyError:  # no such column: open without options so _column_texts can list the columns
            batches = reader(None)
    except (pa.ArrowInvalid, OSError) as exc:
        raise CorpusError(f"{path}: not a readable CSV file ({str(exc).splitlines()[0]})") from None
    yield from _column_texts(batches, batches.schema, path, stats, opts)


def _arrow(path: Path, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """An Arrow IPC file, or an IPC stream (what `datasets` save_to_disk writes)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        try:
            reader = pa.ipc.open_file(source)
            batches = (reader.get_batch(i) for i in range(reader.num_record_batches))
        except pa.ArrowInvalid:
            source.seek(0)
            try:
                reader = batches = pa.ipc.open_stream(source)
            except pa.ArrowInvalid as exc:
                raise CorpusError(f"{path}: not an Arrow IPC file or stream ({str(exc).splitlines()[0]})") from None
        yield from _column_texts(batches, reader.schema, path, stats, opts)


READERS: dict[str, Callable[[Path, CorpusStats, ReadOptions], Iterator[str | None]]] = {
    ".txt": _txt, ".jsonl": _jsonl, ".json": _json, ".parquet": _parquet, ".csv": _csv, ".arrow": _arrow,
}


# ------------------------------------------------------------------------------------------------ corpora


def _sha256_file(path: Path) -> tuple[int, str]:
    """(bytes, sha256 hex), streamed; hashlib releases the GIL, so files hash in parallel threads."""
    h = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(HASH_CHUNK_BYTES):
                h.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc}); check its permissions") from None
    return size, h.hexdigest()


def _read_unchanged(path: Path, size: int, stats: CorpusStats, opts: ReadOptions) -> Iterator[str | None]:
    """One file's texts. A file deleted, made unreadable or resized since it was hashed is a CorpusError,
    not a traceback, and never a build whose manifest hashes describe other bytes than were read."""
    fix = "keep the corpus unchanged while a build reads it, then run the command again"
    try:
        yield from READERS[path.suffix.lower()](path, stats, opts)
        now = path.stat().st_size
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read any more ({exc.strerror or exc}); {fix}") from None
    if now != size:
        raise CorpusError(f"{path}: changed during the build ({size} -> {now} bytes); {fix}")


def _file_corpus(paths: Sequence[str], opts: ReadOptions) -> Corpus:
    files, skipped = _resolve(paths)
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(_sha256_file, files))
    h = hashlib.sha256()
    for i, (size, digest) in enumerate(digests):  # order, size and content; not names or locations
        h.update(f"{i} {size} {digest}\n".encode())
    total = sum(size for size, _ in digests)

    def read(stats: CorpusStats) -> Iterator[str | None]:
        for path, (size, _) in zip(files, digests):
            yield from _read_unchanged(path, size, stats, opts)

    return Corpus(
        description=f"{len(files)} file{'s' * (len(files) != 1)}, {total / 1e6:.1f} MB",
        fingerprint=h.hexdigest(),
        files=[{"path": str(p), "bytes": size, "sha256": d} for p, (size, d) in zip(files, digests)],
        stats=CorpusStats(files=len(files), files_skipped=skipped),
        read=read,
    )


def _load_dataset(spec: str, split: str):
    """A `datasets.Dataset` from a save_to_disk directory, or load_dataset(NAME, CONFIG) (cache, then hub)."""
    import datasets

    name, _, config = spec.partition(":")
    if any((Path(name) / f).is_file() for f in ("state.json", "dataset_dict.json")):
        ds = datasets.load_from_disk(name)
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise CorpusError(f"--dataset {spec}: no split {split!r}; pass --dataset-split {'|'.join(ds)}")
            ds = ds[split]
        return ds
    # not streaming: a cached dataset is read from its memory-mapped Arrow files, which works offline
    return datasets.load_dataset(name, config or None, split=split)


def _dataset_corpus(spec: str, split: str, opts: ReadOptions) -> Corpus:
    try:
        ds = _load_dataset(spec, split)
    except CorpusError:
        raise
    except Exception as exc:  # datasets raises many types (connection, missing files, bad config or split)
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise CorpusError(
            f"--dataset {spec} [{split}]: cannot load ({reason}); offline use needs the dataset in the local "
            "Hugging Face cache (load it once online) or a save_to_disk directory"
        ) from None
    own = {"fingerprint": ds._fingerprint, "version": str(ds.info.version), "rows": ds.num_rows}
    identity = json.dumps({"dataset": spec, "split": split, **own}, sort_keys=True)

    def read(stats: CorpusStats) -> Iterator[str | None]:
        batches = ds.with_format("arrow").iter(batch_size=BATCH_ROWS)
        yield from _column_texts(batches, ds.features.arrow_schema, f"--dataset {spec}", stats, opts)

    return Corpus(
        description=f"dataset {spec} [{split}], {ds.num_rows} rows",
        fingerprint=hashlib.sha256(identity.encode()).hexdigest(),
        files=[],
        stats=CorpusStats(),
        read=read,
    )


def _sample_corpus() -> Corpus:
    from mlmprep.sample import sample_description, sample_documents, sample_fingerprint

    return Corpus(sample_description(), sample_fingerprint(), [], CorpusStats(), lambda stats: sample_documents())


def open_corpus(
    paths: Sequence[str] = (),
    *,
    dataset: str | None = None,
    dataset_split: str = "train",
    text_column: str = "text",
    doc_sep: str = "line",
    on_decode_error: str = "replace",
) -> Corpus:
    """Corpus files/directories/globs, or a `datasets` NAME[:CONFIG], or (neither given) the built-in sample.

    Sources are resolved and hashed now; reading happens in `Corpus.documents()`, where a bad record
    raises CorpusError naming the file and line. The caller checks `stats.documents` for an empty corpus.
    """
    if doc_sep not in DOC_SEPS:
        raise ConfigError(f"--doc-sep must be one of {', '.join(DOC_SEPS)}; got {doc_sep!r}")
    if on_decode_error not in DECODE_POLICIES:
        raise ConfigError(f"--on-decode-error must be one of {', '.join(DECODE_POLICIES)}; got {on_decode_error!r}")
    if paths and dataset:
        raise ConfigError("give either corpus paths or --dataset, not both")
    if isinstance(paths, (str, os.PathLike)):  # one path, not a sequence of characters
        paths = [paths]
    opts = ReadOptions(text_column=text_column, doc_sep=doc_sep, on_decode_error=on_decode_error)
    if dataset:
        return _dataset_corpus(dataset, dataset_split, opts)
    if paths:
        return _file_corpus(paths, opts)
    return _sample_corpus()


__all__ = ["Corpus", "CorpusStats", "ReadOptions", "SUPPORTED", "open_corpus", "resolve_sources"]
