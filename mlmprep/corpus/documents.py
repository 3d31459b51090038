"""Corpus: files, a `datasets` dataset or the built-in sample -> a re-iterable stream of document strings.

Nothing is held whole: files are streamed by their format's reader (corpus.readers.READERS) and a dataset stays
memory-mapped in the Hugging Face cache. All that is skipped or replaced is counted in CorpusStats, which
the build writes to its manifest. Files are hashed when the corpus is opened, and a file that changes
while it is read stops the build.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.columnar import BATCH_ROWS, column_texts
from mlmprep.corpus.files import CorpusStats, ReadOptions, check_magic, file_format, read_as_text
from mlmprep.corpus.hub import load_dataset
from mlmprep.corpus.readers import READERS
from mlmprep.corpus.shards import Shard, dataset_shards, file_shards, non_blank, read_unchanged
from mlmprep.corpus.sources import remote_sources, resolve
from mlmprep.errors import ConfigError, CorpusError, printable

DOC_SEPS = ("line", "blank")
HASH_BLOCK = 16 << 20  # bytes per request while a corpus object is read through to hash it
DECODE_POLICIES = ("replace", "skip", "fail")


@dataclass
class Corpus:
    """A corpus ready to stream. `read(stats)` yields raw texts (None for nulls); `documents()` filters them."""

    description: str  # "3 files, 15.3 MB" / "dataset wikitext:wikitext-2-raw-v1 [train], 36718 rows" / ...
    fingerprint: str  # sha256 hex of the content (for a dataset: of its own fingerprint and version)
    files: list[dict]  # [{"path", "bytes", "sha256"}] for file corpora, else []
    stats: CorpusStats  # counts of the most recent pass of documents()
    read: Callable[[CorpusStats], Iterator[str | None]] = field(repr=False, compare=False)
    # (shard_bytes, streams) -> input shards; streams: at most so many of a compressed file (one per worker)
    shards: Callable[..., list[Shard]] = field(repr=False, compare=False)
    bytes: int = 0  # of the files or the dataset's Arrow data (0: the sample)

    def documents(self) -> Iterator[str]:
        """Stream the non-blank documents from the start; each call begins a new `stats`."""
        stats = self.stats = CorpusStats(files=self.stats.files, files_skipped=self.stats.files_skipped,
                                          files_as_text=self.stats.files_as_text)
        return non_blank(self.read(stats), stats)


# ------------------------------------------------------------------------------------------------ corpora


def file_digest(path: Path | str) -> tuple[int, str]:
    """(bytes read, sha256 hex) of a local file or an object read in place, the name checked against the first
    bytes (compressed or not); hashlib releases the GIL, so files hash in parallel threads."""
    if storage.is_url(path):
        with storage.errors(path, CorpusError), storage.open_corpus_url(path, block=HASH_BLOCK) as f:
            return _sha256_open(path, f)
    try:
        with open(path, "rb") as f:
            return _sha256_open(path, f)
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc}); check its permissions") from None


def _sha256_open(path: Path | str, f) -> tuple[int, str]:
    """file_digest of a file opened, local or remote."""
    check_magic(path, f.read(8))
    f.seek(0)
    digest = hashlib.file_digest(f, "sha256")
    return f.tell(), digest.hexdigest()


def _check_used(opts: ReadOptions, *, fields: bool, lines: bool) -> None:
    """Refuse --text-column where no source has fields (`fields`) and --doc-sep where none is a .txt file
    (`lines`): set to anything but its default there, it is ignored and the build differs in name only."""
    defaults = ReadOptions()
    if opts.text_column != defaults.text_column and not fields:
        raise ConfigError("--text-column applies to .jsonl, .json, .parquet, .csv and .arrow files and --dataset; "
                          "the corpus has none: leave it out")
    if opts.doc_sep != defaults.doc_sep and not lines:
        raise ConfigError("--doc-sep applies to .txt files; the corpus has none: leave it out")


def _file_corpus(paths: Sequence[str], opts: ReadOptions, storage_options: dict) -> Corpus:
    files: list[Path | str] = []  # local paths, and URLs read in place
    skipped: list[str] = []
    for remote, group in itertools.groupby(map(str, paths), storage.is_url):
        if remote:
            files += [url for pattern in group for url in remote_sources(pattern, storage_options)]
        else:
            found, passed = resolve(list(group))
            files += found
            skipped += passed
    suffixes = {file_format(path)[0] for path in files}
    _check_used(opts, fields=bool(suffixes - {".txt"}), lines=".txt" in suffixes)
    with ThreadPoolExecutor(max_workers=min(len(files), os.cpu_count() or 1)) as pool:
        digests = list(pool.map(file_digest, files))
    h = hashlib.sha256()
    for i, (size, digest) in enumerate(digests):  # order, size and content; not names or locations
        h.update(f"{i} {size} {digest}\n".encode())
    total = sum(size for size, _ in digests)

    def read(stats: CorpusStats) -> Iterator[str | None]:
        for path, (size, _) in zip(files, digests):
            yield from read_unchanged(path, size, READERS[file_format(path)[0]](path, stats, opts))

    return Corpus(
        description=f"{len(files)} file{'s' * (len(files) != 1)}, {total / 1e6:.1f} MB",
        fingerprint=h.hexdigest(),
        files=[{"path": printable(p), "bytes": size, "sha256": d} for p, (size, d) in zip(files, digests)],
        stats=CorpusStats(files=len(files), files_skipped=skipped,
                          files_as_text=[printable(p) for p in files if read_as_text(p)]),
        read=read,
        shards=lambda shard_bytes, streams=1: file_shards([(p, size) for p, (size, _) in zip(files, digests)],
                                                          shard_bytes, streams, [d for _, d in digests]),
        bytes=total,
    )


def _dataset_corpus(spec: str, split: str, opts: ReadOptions) -> Corpus:
    _check_used(opts, fields=True, lines=False)
    ds = load_dataset(spec, split)
    own = {"fingerprint": ds._fingerprint, "version": str(ds.info.version), "rows": ds.num_rows}
    identity = json.dumps({"dataset": spec, "split": split, **own}, sort_keys=True)

    def read(stats: CorpusStats) -> Iterator[str | None]:
        batches = ds.with_format("arrow").iter(batch_size=BATCH_ROWS)
        yield from column_texts(batches, ds.features.arrow_schema, f"--dataset {spec}", stats, opts)

    return Corpus(
        description=f"dataset {spec} [{split}], {ds.num_rows} rows",
        fingerprint=hashlib.sha256(identity.encode()).hexdigest(),
        files=[],
        stats=CorpusStats(),
        read=read,
        shards=lambda shard_bytes, streams=1: dataset_shards(spec, split, ds.num_rows, ds.data.nbytes, shard_bytes),
        bytes=ds.data.nbytes,
    )


def _sample_corpus() -> Corpus:
    from mlmprep.corpus.sample import sample_description, sample_documents, sample_fingerprint

    return Corpus(sample_description(), sample_fingerprint(), [], CorpusStats(), lambda stats: sample_documents(),
                  lambda shard_bytes, streams=1: [Shard(0, "sample", "the built-in sample")])


def open_corpus(
    paths: Sequence[str] = (),
    *,
    dataset: str | None = None,
    dataset_split: str = "train",
    text_column: str = "text",
    doc_sep: str = "line",
    on_decode_error: str = "replace",
    storage_options: dict | None = None,
) -> Corpus:
    """Corpus files/directories/globs, or a `datasets` NAME[:CONFIG], or (neither given) the built-in sample.

    Sources are resolved and hashed now; reading happens in `Corpus.documents()`, where a bad record
    raises CorpusError naming the file and line. The caller checks `stats.documents` for an empty corpus.
    A path may be a URL: its objects are read in place, with `storage_options` (which this process keeps for
    every corpus URL it reads).
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
        storage.use_corpus_options(storage_options or {})
        return _file_corpus(paths, opts, storage_options or {})
    _check_used(opts, fields=False, lines=False)
    return _sample_corpus()


__all__ = ["Corpus", "CorpusStats", "ReadOptions", "file_digest", "open_corpus"]
