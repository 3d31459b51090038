"""Input shards: a corpus cut into parts that independent build tasks read, in any order, on any machine.

A shard is a nominal part of one source: a byte range of a `.txt`/`.jsonl` file, row groups of a Parquet
file, record batches of an Arrow IPC file, a row range of a `datasets` dataset; CSV files, `.json` arrays,
Arrow streams and the built-in sample are one shard each. A byte range is aligned by the task that reads it,
never by reading the file before: it starts at the first document boundary at or after its nominal start and
ends where the next shard starts (a line start; with `--doc-sep blank`, just after a blank line), so the
document crossing its end belongs to it. Reading every shard in order gives exactly the documents of
reading the whole corpus in one pass, whatever the shard size, which therefore never changes a byte built.

A compressed text file cannot be entered in the middle: its shards are ranges of its decompressed text, each
read by decompressing from the start and skipping to the range (decompressing runs 10-50 times faster than
tokenizing, bz2 excepted; a process goes on from the stream its last part of the file stopped in, so it skips
about once per file), so the compressed files are cut into about `streams` shards together (the build asks
for two per worker), a gzip or zstd file into parts of at most MAX_PART_TEXT all the same. Their sizes come
from an estimate of the text's size (the ratio of its first compressed MiB); the last shard of a file reads to
its end.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.columnar import BATCH_ROWS, arrow_source, column_texts, parquet_file
from mlmprep.corpus.files import CorpusStats, ReadOptions, file_format, file_size, raw_file
from mlmprep.corpus.hub import load_dataset
from mlmprep.corpus.jsonl import whole_json
from mlmprep.corpus.readers import READERS
from mlmprep.corpus.streams import damage_errors
from mlmprep.corpus.text import line_boundary, paragraph_boundary
from mlmprep.errors import CorpusError
from mlmprep.tokenizer.encode import call_groups

BYTE_RANGED = (".txt", ".jsonl")  # and a .json file of JSON lines
ESTIMATE_BYTES = 1 << 20  # compressed bytes whose decompressed size estimates a compressed file's text size
# Output files are written as the parts they read come in: a few large parts hold them back to the end. A worker
# reading parts in order decompresses the file about once (see streams._Stream), or, taking them out of order,
# up to once a part; bzip2 and xz decompress too slowly for more than the workers ask.
MIN_STREAMS = 16
QUICK_CODECS = ("gzip", "zstd")
# ... and at most this much text a part, however many files there are: a reading task holds about 10 bytes per byte
# of its text, and a part taken by a worker new to its file decompresses the text before it (gzip decompresses
# about 100 times faster than tokenizing, so the file about parts / 2 times over costs some 5% at 300 MB of text).
MAX_PART_TEXT = 32 << 20


@dataclass(frozen=True)
class Shard:
    """One task's part of the corpus; picklable, so it travels to a worker process or a Ray node."""

    index: int
    kind: str  # "file" | "dataset" | "sample"
    source: str  # the file's path or the dataset's spec
    start: int = 0  # in the reader's units: bytes (text, nominal), row groups, record batches, dataset rows
    end: int | None = None  # None: to the end
    size: int = 0  # a file's size when it was hashed (a file that changes stops the build)
    split: str = ""  # a dataset's split
    nbytes: int = 0  # the input bytes it stands for (progress): its byte range, or its share of the file or dataset
    digest: str = ""  # a file's sha256 when it was hashed: a compressed file's parts go on from each other's streams

    def describe(self) -> str:
        fmt, compression = file_format(self.source)
        unit = {".parquet": "row groups", ".arrow": "record batches"}.get(fmt, "text bytes" if compression else "bytes")
        unit = "rows" if self.kind == "dataset" else unit
        span = "" if self.kind == "sample" else f" {unit} {self.start}-{'end' if self.end is None else self.end}"
        return f"shard {self.index} ({self.source}{span})"


def non_blank(texts: Iterator[str | None], stats: CorpusStats) -> Iterator[str]:
    """The non-blank documents of `texts`; nulls, blanks, documents and characters counted in `stats`."""
    for text in texts:
        if text is None:
            stats.null_skipped += 1
        elif not text or text.isspace():
            stats.blank_skipped += 1
        else:
            stats.documents += 1
            stats.characters += len(text)
            yield text


def read_shard(shard: Shard, opts: ReadOptions, stats: CorpusStats) -> Iterator[str]:
    """The non-blank documents of one shard, with what was read, skipped and replaced counted in `stats`."""
    if shard.kind == "sample":
        from mlmprep.corpus.sample import sample_documents

        return non_blank(sample_documents(), stats)
    if shard.kind == "dataset":
        return non_blank(_dataset_texts(shard, opts, stats), stats)
    path = shard.source if storage.is_url(shard.source) else Path(shard.source)  # a URL is read in place
    return non_blank(read_unchanged(path, shard.size, _file_texts(path, shard, opts, stats)), stats)


def _file_texts(path: Path | str, shard: Shard, opts: ReadOptions, stats: CorpusStats) -> Iterator[str | None]:
    suffix, compression = file_format(path)
    if suffix in BYTE_RANGED or (suffix == ".json" and not whole_json(path)):
        reader = READERS[".txt" if suffix == ".txt" else ".jsonl"]
        if compression:  # its reader aligns the range in the one pass it makes
            return reader(path, stats, opts, shard.start, shard.end, resume=shard.digest)
        boundary = paragraph_boundary if suffix == ".txt" and opts.doc_sep == "blank" else line_boundary
        start = boundary(path, shard.start)
        end = None if shard.end is None else boundary(path, shard.end)
        return reader(path, stats, opts, start, end)
    if shard.end is not None or shard.start:
        return READERS[suffix](path, stats, opts, shard.start, shard.end)
    return READERS[suffix](path, stats, opts)


def read_unchanged(path: Path | str, size: int, texts: Iterator[str | None]) -> Iterator[str | None]:
    """A file's texts. A file deleted, made unreadable or resized since it was hashed is a CorpusError,
    not a traceback, and never a build whose manifest hashes describe other bytes than were read."""
    fix = "keep the corpus unchanged while a build reads it, then run the command again"
    try:
        with storage.errors(str(path), CorpusError) if storage.is_url(path) else contextlib.nullcontext():
            yield from texts  # a store that keeps failing: one line naming the URL
            now = file_size(path)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot be read any more ({exc.strerror or exc}); {fix}") from None
    if now != size:
        raise CorpusError(f"{path}: changed during the build ({size} -> {now} bytes); {fix}")


# ------------------------------------------------------------------------------------------------ planning


def file_shards(files: list[tuple[Path | str, int]], shard_bytes: int, streams: int = 1,
                digests: list[str] | None = None) -> list[Shard]:
    """Shards of corpus files (path, hashed size; their sha256 `digests`, if given), in corpus order, each about
    `shard_bytes` of input; the compressed files in about `streams` shards together (each in one at least: many
    files keep the workers busy without skipping); gzip and zstd files, quick to decompress again, in MIN_STREAMS
    at least."""
    shards: list[Shard] = []
    compressed = max(1, sum(1 for path, _ in files if file_format(path)[1]))
    for (path, size), digest in zip(files, digests or [""] * len(files)):
        codec = file_format(path)[1]
        wanted = max(streams, MIN_STREAMS) if streams > 1 and codec in QUICK_CODECS else streams
        parts = (_stream_parts(path, size, shard_bytes, max(1, wanted // compressed), codec in QUICK_CODECS) if codec
                 else _file_parts(path, size, shard_bytes))
        for start, end, weight in parts:
            shards.append(Shard(len(shards), "file", str(path), start, end, size, nbytes=weight, digest=digest))
    return shards


def _stream_parts(path: Path | str, size: int, shard_bytes: int, streams: int,
                  quick: bool) -> list[tuple[int, int | None, int]]:
    """(start, end, compressed bytes) of each part of a compressed file: ranges of its text, estimated; a `quick`
    codec's in parts of MAX_PART_TEXT at most."""
    suffix, _ = file_format(path)
    if not (suffix in BYTE_RANGED or (suffix == ".json" and not whole_json(path))) or (streams <= 1 and not quick):
        return [(0, None, size)]
    text = text_estimate(path, size)
    parts = max(1, min(streams, -(-text // max(shard_bytes, 1))), -(-text // MAX_PART_TEXT) if quick else 1)
    step = -(-text // parts)
    marks = [size * k // parts for k in range(parts + 1)]
    return [(k * step, (k + 1) * step if k < parts - 1 else None, marks[k + 1] - marks[k]) for k in range(parts)]


def text_estimate(path: Path | str, size: int) -> int:
    """About how many bytes of text a compressed file of `size` bytes holds: its first ESTIMATE_BYTES decompressed
    and scaled (exact for a smaller file)."""
    from fsspec.compression import compr

    with raw_file(path) as raw:
        head = raw.read(ESTIMATE_BYTES)
    text = 0
    try:
        with compr[file_format(path)[1]](io.BytesIO(head), mode="rb") as f:
            while block := f.read(1 << 16):
                text += len(block)
    except damage_errors(path):  # where the head ends inside the data, and damage: the text up to there
        pass
    return text if len(head) >= size else text * size // max(len(head), 1)


def _file_parts(path: Path | str, size: int, shard_bytes: int) -> list[tuple[int, int | None, int]]:
    """(start, end, input bytes) of each part of a file."""
    suffix = file_format(path)[0]
    try:
        if suffix in BYTE_RANGED or (suffix == ".json" and not whole_json(path)):
            starts = range(0, max(size, 1), shard_bytes)
            return [(s, s + shard_bytes, shard_bytes) if s + shard_bytes < size else (s, None, size - s)
                    for s in starts]
        if suffix == ".parquet":
            meta = parquet_file(path).metadata
            sizes = [meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)]
            return _grouped(sizes, shard_bytes, size)
        if suffix == ".arrow":
            return _arrow_parts(path, size, shard_bytes)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc}); check its permissions") from None
    return [(0, None, size)]


def _arrow_parts(path: Path | str, size: int, shard_bytes: int) -> list[tuple[int, int | None, int]]:
    import pyarrow as pa

    with arrow_source(path) as source:
        try:
            reader = pa.ipc.open_file(source)
        except pa.ArrowInvalid:  # a stream (or not Arrow: its reader says so)
            return [(0, None, size)]
        return _grouped([reader.get_batch(i).nbytes for i in range(reader.num_record_batches)], shard_bytes, size)


def _grouped(sizes: list[int], limit: int, total: int) -> list[tuple[int, int | None, int]]:
    """Consecutive [start, end) ranges of parts whose sizes add up to about `limit`, the last ending at None, each
    with its share of the file's `total` bytes (the shares add up to it)."""
    groups = call_groups(sizes, limit) or [(0, 0)]
    before = list(itertools.accumulate(sizes, initial=0))  # the parts' sizes before each part
    marks = [0, *(total * before[stop] // max(before[-1], 1) for _, stop in groups[:-1]), total]
    return [(start, stop if k < len(groups) - 1 else None, marks[k + 1] - marks[k])
            for k, (start, stop) in enumerate(groups)]


def dataset_shards(spec: str, split: str, rows: int, nbytes: int, shard_bytes: int) -> list[Shard]:
    """Row ranges of a dataset, each about `shard_bytes` of its Arrow data."""
    per = max(1, rows * shard_bytes // max(nbytes, 1))
    starts = list(range(0, max(rows, 1), per))
    weights = [nbytes * min(s + per, rows) // max(rows, 1) - nbytes * s // max(rows, 1) for s in starts]
    return [Shard(k, "dataset", spec, s, s + per if s + per < rows else None, split=split, nbytes=weight)
            for k, (s, weight) in enumerate(zip(starts, weights))]


@functools.lru_cache(maxsize=2)
def _dataset(spec: str, split: str):
    return load_dataset(spec, split)


def _dataset_texts(shard: Shard, opts: ReadOptions, stats: CorpusStats) -> Iterator[str | None]:
    ds = _dataset(shard.source, shard.split)
    end = ds.num_rows if shard.end is None else shard.end
    table = ds.with_format("arrow")[shard.start : end]  # memory-mapped: slices, not copies
    batches = table.to_batches(max_chunksize=BATCH_ROWS)
    return column_texts(batches, ds.features.arrow_schema, f"--dataset {shard.source}", stats, opts, shard.start)


__all__ = ["Shard", "dataset_shards", "file_shards", "non_blank", "read_shard", "read_unchanged"]
