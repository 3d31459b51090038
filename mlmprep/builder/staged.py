"""What every task of a build shares: the Layout (options, stage, row geometry), the files it stages (written
atomically, read back by side: the documents of one shard that went to training or validation), and the build's
tokenizer, loaded once per process."""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlmprep.builder.engine.base import fetched
from mlmprep.config import BuildConfig
from mlmprep.errors import CacheError
from mlmprep.format.rows import span_indices, starts_of
from mlmprep.format.write import hf_tokenizer_json
from mlmprep.tokenizer.encode import plain_encoder, word_tables
from mlmprep.tokenizer.load import load_tokenizer, special_ids

STAGING = "shards"  # staging-directory subfolder of the phase-1 outputs; removed before publishing


def decontaminating(cfg: BuildConfig) -> bool:
    """Whether the build checks its validation documents against training (--decontaminate, and a validation set)."""
    return cfg.decontaminate and cfg.validation_fraction > 0


def held_apart(cfg: BuildConfig) -> bool:
    """Whether each shard's validation candidates (held_documents) are staged apart as well (`shard-N.held`, see
    held_bytes), for the validation side and the moved documents to read: with --decontaminate, those wait for the
    last shard, and so would every shard's whole staged tokens. Not with --dedup near, which waits for it anyway
    (every document a candidate), nor --method text, whose files all wait for it."""
    return decontaminating(cfg) and cfg.dedup != "near" and cfg.method == "tokens"


@dataclass(frozen=True)
class Layout:
    """What every task of one build needs: the options, where the stage is, and the row geometry."""

    cfg: BuildConfig
    stage: str
    threads: int  # tokenizer and Numba threads inside one worker (0: all cores)
    content_length: int  # tokens of text per window, inside any frame
    window_length: int  # tokens per window as masked, frame included
    doc_eos: int | None  # the token that ends each document in the stream (None: --pack doc rows end themselves)
    format_version: int  # the build's format, which decides its columns' types (write.column_dtypes)
    prefix: tuple[int, ...] = ()  # the MLM frame around every row ([CLS] ... [SEP])
    suffix: tuple[int, ...] = ()
    modes: tuple[int, ...] = ()  # ul2: each denoiser's mode token id (-1: none)
    partitions: int = 1  # --decontaminate: the partition tasks that match the validation set (contamination.partitions)

    @property
    def fixed(self) -> bool:
        return self.cfg.method == "tokens" and self.cfg.pack == "stream"

    @property
    def cut(self) -> bool:
        """Each seed cuts rows of its own lengths from the stream (ul2, prefix); the windows split keeps the whole
        stream in windows of content_length tokens, the last one shorter."""
        return self.cfg.objective in ("ul2", "prefix")

    def held(self, side: str) -> bool:
        """Whether a shard's documents on `side` (a picks name: selection.MOVED_PICKS too) are read from its
        validation candidates' file (held_apart), not from the shard's own token files."""
        return side != "train" and held_apart(self.cfg)

    def tokens(self, shard: int, side: str) -> Path:
        """The staged file that `shard`'s token ids on `side` are read from (side_documents gives where in it)."""
        return self.staged(f"shard-{shard:06d}.{HELD if self.held(side) else 'ids'}")

    def staged(self, name: str) -> Path:
        """A file of the staging subfolder; in a detached task, one it reads is fetched when first asked for."""
        path = Path(self.stage) / STAGING / name
        if (key := f"{STAGING}/{name}") in INPUTS and not path.exists():
            for file, data in fetched(INPUTS[key]).items():  # the files of the part that holds it, together
                write_fetched(Path(self.stage) / file, data)
                FETCHED.append(file)
        return path


HELD = "held"  # suffix of a shard's validation candidates' file (held_apart)
INPUTS: dict[str, Any] = {}  # in a detached task: its inputs (see Layout.staged, pipeline.run_detached)
FETCHED: list[str] = []  # ... and those it has fetched so far


def identity(path: Path) -> tuple:
    """A staged file's path and identity: a cache key that a later build writing the same path (in the
    same process, or on a reused Ray worker) does not match."""
    st = os.stat(path)
    return str(path), st.st_ino, st.st_size, st.st_mtime_ns


class WorkerTokenizer:
    """A build's tokenizer in one process: the tokenizer, its special ids and, when a task first needs them
    (phase 2, text segments), its word tables."""

    def __init__(self, tok):
        self.tok, self.ids = plain_encoder(tok), special_ids(tok)

    @functools.cached_property
    def tables(self):
        return word_tables(self.tok)


LOADED: dict[tuple, WorkerTokenizer] = {}  # identity of a staged tokenizer.json -> its tokenizer, in this process
PRELOADED: dict = {}  # from the forkserver: sha256 of the file a tokenizer is saved as -> the tokenizer


def worker_tokenizer(layout: Layout) -> WorkerTokenizer:
    """The build's tokenizer for this process's tasks, loaded once per process and build (or once for every
    worker, by the forkserver: see preload_tokenizer); first sets this process's tokenizer threads, which the
    tokenizer's first use fixes."""
    if layout.threads:
        os.environ["RAYON_NUM_THREADS"] = str(layout.threads)
    path = Path(layout.stage) / "tokenizer.json"
    key = identity(path)
    if key not in LOADED:
        preloaded = PRELOADED.get(hashlib.sha256(path.read_bytes()).hexdigest()) if PRELOADED else None
        adopt_tokenizer(path, preloaded or load_tokenizer(path))
    return LOADED[key]


def adopt_tokenizer(path: Path, tok) -> None:
    """Use `tok`, saved as `path`, for this process's tasks (it becomes a plain encoder): the driver, which
    has it loaded, so saves itself a second load before the tasks it runs. Keeps one build's."""
    LOADED.clear()
    LOADED[identity(path)] = WorkerTokenizer(tok)


def preload_tokenizer(given: str) -> None:
    """In the forkserver: load `--tokenizer` (a tokenizer.json) once, for every worker it forks, instead of in
    each (its word tables are left to the tasks that need them, off the server's serial start). Keyed by the
    bytes the driver stages it as (tokenizers' save), so a worker only takes it for a build whose staged file
    matches."""
    path = Path(given) / "tokenizer.json" if Path(given).is_dir() else Path(given)
    try:
        tok = load_tokenizer(path) if path.is_file() else None  # not a transformers directory: slow to load
    except Exception:  # noqa: BLE001 - the driver reports a bad --tokenizer itself
        return
    if tok is not None:
        PRELOADED[hashlib.sha256(hf_tokenizer_json(tok).encode("utf-8")).hexdigest()] = tok


def write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Write `chunks` to `path` through a temporary name: a task run again replaces a dead attempt's file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for chunk in chunks:
            f.write(chunk)
    os.replace(tmp, path)


def write_fetched(path: Path, data: bytes | tuple[int, tuple[tuple[int, bytes], ...]]) -> None:
    """Write a staged file a detached task fetched: whole (bytes), or a slice, (size, ((start, bytes), ...)), the
    ranges one partition task reads (see pipeline.shipped_parts): a file of the whole's size whose other bytes are a
    hole, which takes no disk, so that the task reads it as it reads the whole."""
    if isinstance(data, bytes):
        write_atomic(path, [data])
        return
    size, pieces = data
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.truncate(size)
        for start, piece in pieces:
            f.seek(start)
            f.write(piece)
    os.replace(tmp, path)


def read_array(path: Path, dtype, start: int = 0, stop: int | None = None) -> np.ndarray:
    """Items [start, stop) of a raw array file, read (not mapped) so an empty file is fine."""
    itemsize = np.dtype(dtype).itemsize
    count = -1 if stop is None else stop - start
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.fromfile(path, dtype=dtype, count=count, offset=start * itemsize)


def side_documents(layout: Layout, s: int, side: str, sizes: str) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, where each starts in the staged data file, Layout.tokens) of staged shard s's documents on `side`:
    the driver stages each side's document numbers (picks_bytes) as `shard-N.train` and `shard-N.validation` (which
    holds selection.MOVED_PICKS' too), numbers in the shard's files, or with Layout.held in its validation
    candidates' file; `sizes` names the shard's per-document sizes file (`lens`: tokens, `chars`: characters of
    --method text, each with its space)."""
    picks = identity(layout.staged(f"shard-{s:06d}.{'train' if side == 'train' else 'validation'}"))
    if layout.held(side):
        return _side_documents(identity(layout.tokens(s, side)), picks, side, True)
    return _side_documents(identity(layout.staged(f"shard-{s:06d}.{sizes}")), picks, side, False)


@functools.lru_cache(maxsize=8)
def _side_documents(sizes_key: tuple, picked_key: tuple, side: str, held: bool) -> tuple[np.ndarray, np.ndarray]:
    sizes, first = held_index(Path(sizes_key[0])) if held else (read_array(Path(sizes_key[0]), np.int64), 0)
    starts = starts_of(sizes)[:-1] + first
    picked = side_picks(Path(picked_key[0]), side, len(sizes))
    return sizes[picked], starts[picked]


def picks_bytes(first: np.ndarray, moved: np.ndarray | None = None) -> bytes:
    """A side's staged picks, int64: training's numbers as they are; validation's count, its numbers, then the
    numbers of the documents moved from it to training (`moved`), one file for both."""
    if moved is None:
        return first.astype("<i8").tobytes()
    return np.concatenate([[len(first)], first, moved]).astype("<i8").tobytes()


def side_picks(path: Path, side: str, documents: int) -> np.ndarray:
    """The numbers of one side's documents (or selection.MOVED_PICKS') in a staged picks file (picks_bytes), checked
    against the `documents` they number."""
    picks = read_array(path, "<i8")
    if side != "train":
        count = int(picks[0]) if len(picks) else -1
        if not 0 <= count < len(picks):
            raise changed(path, "its count of validation documents does not match its length")
        picks = picks[1 : 1 + count] if side == "validation" else picks[1 + count :]
    if len(picks) and (int(picks.min()) < 0 or int(picks.max()) >= documents):
        raise changed(path, f"it names a document beyond the {documents} staged")
    return picks


def held_bytes(parts: list[tuple[np.ndarray, np.ndarray]]) -> list[bytes]:
    """A shard's validation candidates' file (held_apart) from each batch's (token ids, tokens per document): their
    count and tokens (int64 each), each one's tokens (int64), then their token ids (int32); one file rather than two,
    since on a small build creating a file costs more than writing its bytes."""
    lens = np.concatenate([n for _, n in parts]).astype("<i8") if parts else np.zeros(0, "<i8")
    tokens = np.concatenate([t for t, _ in parts]).astype("<i4") if parts else np.zeros(0, "<i4")
    return [np.array([len(lens), len(tokens)], "<i8").tobytes(), lens.tobytes(), tokens.tobytes()]


def held_index(path: Path) -> tuple[np.ndarray, int]:
    """(each validation candidate's tokens, where the first one's ids start: an int32 item) of a held file
    (held_bytes), checked against its size."""
    head = read_array(path, "<i8", 0, 2)
    count, tokens = (int(head[0]), int(head[1])) if len(head) == 2 else (-1, -1)
    lengths = read_array(path, "<i8", 2, 2 + count) if count >= 0 else np.zeros(0, np.int64)
    if (count < 0 or len(lengths) != count or (count and int(lengths.min()) < 0) or int(lengths.sum()) != tokens
            or path.stat().st_size != 16 + 8 * count + 4 * tokens):
        raise changed(path, "its count, lengths and tokens of validation candidates do not match its size")
    return lengths, 4 + 2 * count


def changed(path: Path, problem: str) -> CacheError:
    """The one-line error for a staged file that is not what its task wrote."""
    return CacheError(f"{path}: {problem}; the build's staging directory was changed while the build ran (by "
                      "another process, or a failing disk); run the build again")


def gather(path: Path, dtype, sizes: np.ndarray, begins: np.ndarray, d0: int, d1: int) -> np.ndarray:
    """The items of a side's documents d0..d1 (inclusive; `sizes`, `begins` from side_documents), one after
    another, from the staged data file `path`: one read of the range they span, then the documents picked."""
    if d1 < d0:
        return np.zeros(0, dtype=dtype)
    lo, hi = int(begins[d0]), int(begins[d1] + sizes[d1])
    raw = read_array(path, dtype, lo, hi)
    sizes = sizes[d0 : d1 + 1]
    if int(sizes.sum()) == hi - lo:  # no other side's or dropped document between them
        return raw
    return raw[span_indices(begins[d0 : d1 + 1] - lo, sizes)]


def document_index(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(document lengths, where each document's tokens start: cumulative, one longer) of a staged shard."""
    return _document_index(identity(path))


@functools.lru_cache(maxsize=4)
def _document_index(key: tuple) -> tuple[np.ndarray, np.ndarray]:
    lengths = read_array(Path(key[0]), np.int64)
    return lengths, starts_of(lengths)
