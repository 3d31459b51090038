"""The build's tasks, each a plain function of picklable arguments that any worker process or Ray node runs.

Phase 1, one task per input shard (`tokenize_shard`): read, clean and tokenize the shard; write its token ids
(int32) and document lengths (int64) to the staging directory; return its counts and each document's content key
(and MinHash signature with --dedup near); with --decontaminate, stage its documents' n-gram and token-window hashes
for the partition tasks that match the validation set against training (mlmprep.builder.contamination). With --dedup-
paragraphs a pass before it (`scan_shard`) hashes every shard's lines for the driver, which chooses in corpus order
the lines each phase-1 task then leaves out (mlmprep.builder.overlap). For `--method text` it writes the cleaned
text instead (UTF-32, so any character range is one seek). The driver then decides each document's fate
(mlmprep.builder.selection: dropped, training or validation) and stages each side's document numbers per shard.
Each side's documents make a stream of their own: the driver's prefix sums give every shard its place in each
side's stream and every window its row in its side's splits; with --method text a second set of tasks
(`segment_text`) cuts each side's joined text every (input_length - 2) * 4 characters and tokenizes the segments.
Phase 2, one task per output file of one side (`write_file`), queued as soon as the shards before its last window
are decided and done (with --method text, once the segments are): cut its windows (a window may take the tail of
one shard and the head of the next), mask (every seed, or the validation seed), write one data file into each of
its side's splits. Fates and masks are pure functions of the corpus, the options and (seed, row), so the bytes
depend on the data and the options only, never on how many tasks ran where.

What the tasks share (the Layout, the staged files, the tokenizer) is in mlmprep.builder.staged; phase 2 reads its
rows through mlmprep.builder.side_rows and masks them with mlmprep.builder.masker.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from mlmprep import storage
from mlmprep.builder import contamination, mask
from mlmprep.builder.clean import clean_texts
from mlmprep.builder.dedup_partitions import partition_ranges, partitioned, stage_keys
from mlmprep.builder.denoisers import SeedRows, row_offsets
from mlmprep.builder.dropped import DRIVER_FILES, ShardDrops
from mlmprep.builder.engine.base import Shipped, fetched
from mlmprep.builder.engine.local import PRELOAD_TOKENIZER, in_forkserver
from mlmprep.builder.filters import Removals, add_totals, filter_texts
from mlmprep.builder.masker import Masker, mask_part
from mlmprep.builder.overlap import (
    Evaluation,
    excluded,
    exclusion_table,
    line_hashes,
    text_ngrams,
    trimmed,
    window_hashes,
)
from mlmprep.builder.selection import SIDES, FirstCopies, document_keys, held_documents, to_hash
from mlmprep.builder.side_rows import Plan, doc_windows, piece, seed_stream_rows, stored_rows, stream_windows
from mlmprep.builder.staged import (
    FETCHED,
    HELD,
    INPUTS,
    STAGING,
    Layout,
    changed,
    decontaminating,
    gather,
    held_apart,
    held_bytes,
    preload_tokenizer,
    read_array,
    side_documents,
    worker_tokenizer,
    write_atomic,
)
from mlmprep.builder.windows import WindowStats, frame_rows, segment_rows
from mlmprep.config import BuildConfig
from mlmprep.corpus.documents import Corpus, open_corpus
from mlmprep.corpus.files import CorpusStats, ReadOptions
from mlmprep.corpus.shards import Shard, read_shard
from mlmprep.errors import CorpusError
from mlmprep.format.manifest import FileRecord
from mlmprep.format.rows import Rows, concat_rows, span_indices, starts_of
from mlmprep.format.write import damaged, iter_rows_of_file, part_path, write_part
from mlmprep.progress import prefetch, prefetch_map
from mlmprep.tokenizer.encode import encode

NORMALISED = "normalised"  # suffix of the texts a shard the driver tokenized stages for hash_shard
VALIDATION_SLOT = 1 << 20  # the validation split is masked once, with the seed of this (never trained) slot
SEGMENT_TASK_CHARS = 4 << 20  # characters of text per segmenting task (--method text)
# Characters per batch of the shards the driver reads itself. Its reading thread and two tokenizing threads each
# hold a few batches, and each thread's malloc arena keeps its high-water mark for the rest of the build: with
# --chunk-chars' 1 MiB the driver peaked 37 MB higher on 20 MB shards than with this, and grew with the shard size;
# the batches are only groups of documents, so the bytes are the same.
DRIVER_CHUNK_CHARS = 1 << 17


# ---------------------------------------------------------------------------------------- detached tasks


@dataclass(frozen=True)
class Detached:
    """A task for a worker that cannot see the build's staging directory (a Ray node sharing no disk with the
    driver): it runs in a staging directory of the worker's own, fetches the staged files it reads from the
    payloads of the tasks that made them (`inputs`: name in the stage -> payload, see engine.base.Shipped; the
    tokenizer's too), and returns the files it writes as its own payload, but for those only the driver reads
    (--keep-dropped's, dropped.DRIVER_FILES), which go with its result."""

    fn: Callable[[Any], Any]
    task: Any  # TokenizeTask, SegmentTask or WriteTask
    inputs: dict[str, Any]
    slices: tuple[tuple[str, int], ...] = ()  # staged files it makes that partition tasks read (see shipped_parts)

    def describe(self) -> str:
        return self.task.describe()

    @property
    def parts(self) -> int:
        """The objects its payload is shipped as (engine.base.parts): the files whole, then each of `slices`."""
        return 1 + sum(count for _, count in self.slices)


# suffix of a staged file -> the byte ranges each partition task reads of it; a suffix of reading_slices not here
# goes whole, in a part of its own
PARTITION_RANGES = {"dedup": partition_ranges, contamination.HASHES: contamination.partition_ranges}


def reading_slices(layout: Layout) -> tuple[tuple[str, int], ...]:
    """The staged files of a reading task that a detached one ships apart from its token files, by suffix, and the
    parts each goes in: one per partition task (dedup's keys, decontamination's hashes), near dedup's signatures
    whole (dedup_partitions.signature_slices cuts them for the partitions)."""
    cfg, out = layout.cfg, []
    if partitioned(cfg):
        out += [("dedup", cfg.dedup_partitions)] + ([("sig", 1)] if cfg.dedup == "near" else [])
    if decontaminating(cfg):
        out += [(contamination.HASHES, layout.partitions)]
    return tuple(out)


def shipped_parts(layout: Layout, own: Path, names: Iterable[str],
                  slices: tuple[tuple[str, int], ...]) -> tuple[dict, ...]:
    """The files `names` a detached task made in its stage `own`, as the parts of its payload, so that each later
    task fetches what it reads alone: every file whole but those `slices` names by suffix; then for each of these,
    `count` parts, the k-th holding what partition k's task reads of every such file (a slice, see
    staged.write_fetched)."""
    def suffixed(name: str) -> str | None:
        return next((suffix for suffix, _ in slices if name.endswith(f".{suffix}")), None)

    parts = [{name: (own / name).read_bytes() for name in names if suffixed(name) is None}]
    for suffix, count in slices:
        cut: list[dict] = [{} for _ in range(count)]
        for name in (name for name in names if suffixed(name) == suffix):
            path = own / name
            if suffix not in PARTITION_RANGES:
                cut[0][name] = path.read_bytes()
                continue
            with open(path, "rb") as f:
                for part, ranges in zip(cut, PARTITION_RANGES[suffix](layout, path)):
                    part[name] = (path.stat().st_size, tuple((a, os.pread(f.fileno(), b - a, a)) for a, b in ranges
                                                             if b > a))
        parts += cut
    return tuple(parts)


WORKER_STAGES: dict[str, str] = {}  # driver's stage -> this worker's own for that build (one build's at a time)


def run_detached(detached: Detached) -> Shipped:
    """Run a Detached task: the result, with the files it wrote (names relative to the stage) as payload, or as
    files for the driver."""
    task = detached.task
    layout = task.plan.layout if isinstance(task, WriteTask) else task.layout
    own = worker_stage(layout.stage, detached.inputs["tokenizer.json"])
    moved = replace(layout, stage=own)
    task = replace(task, plan=replace(task.plan, layout=moved)) if isinstance(task, WriteTask) else replace(
        task, layout=moved)
    (Path(own) / STAGING).mkdir(exist_ok=True)
    INPUTS.update(detached.inputs)
    try:
        result = detached.fn(task)
        written = sorted(p.relative_to(own).as_posix() for p in Path(own).rglob("*") if p.is_file())
        made = [name for name in written if name != "tokenizer.json" and name not in FETCHED]
        names = [name for name in made if not name.endswith(DRIVER_FILES)]
        payload = shipped_parts(moved, Path(own), names, detached.slices)
        files = {name: (Path(own) / name).read_bytes() for name in made if name not in names}
    finally:
        INPUTS.clear()
        FETCHED.clear()
        for entry in Path(own).iterdir():  # the next task starts from the tokenizer alone
            if entry.is_dir():
                shutil.rmtree(entry)
    return Shipped(result, payload, tuple(tuple(part) for part in payload), files)


def worker_stage(stage: str, tokenizer: Any) -> str:
    """This worker's staging directory for the build staged at `stage` (made, with the build's tokenizer.json,
    on its first task); another build's is removed."""
    if stage not in WORKER_STAGES:
        for old in WORKER_STAGES.values():
            shutil.rmtree(old, ignore_errors=True)
        WORKER_STAGES.clear()
        own = tempfile.mkdtemp(prefix="mlmprep-task-")
        atexit.register(shutil.rmtree, own, ignore_errors=True)  # a worker that ends normally leaves nothing
        write_atomic(Path(own) / "tokenizer.json", [fetched(tokenizer)])
        WORKER_STAGES[stage] = own
    return WORKER_STAGES[stage]


# ------------------------------------------------------------------------------------------------ phase 1


def batched(texts: Iterable[str], max_chars: int) -> Iterator[list[str]]:
    """Group texts into lists of about `max_chars` characters (one tokenizer call each). The first lists
    are smaller (1/16, 1/8, ... of it), so tokenizing starts soon after reading does."""
    batch, size, limit = [], 0, max(1, max_chars // 16)
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= limit:
            yield batch
            batch, size, limit = [], 0, min(max_chars, 2 * limit)
    if batch:
        yield batch


def cleaned_batches(documents: Iterable[str], cfg: BuildConfig, counts: dict,
                    drops: ShardDrops | None = None) -> Iterator[list[str]]:
    """Documents, cleaned and filtered (--filters), in lists of about cfg.chunk_chars characters (see `batched`);
    characters removed and documents left blank are counted in `counts`, what each filter removed in
    counts["filters"] (filters.Removals.totals). With `drops`, what the filters removed is kept there, and each
    list's document numbers (as read) queued in drops.pending."""
    for batch in batched(documents, cfg.chunk_chars):
        texts, removed = clean_texts(batch, normalize_whitespace=cfg.normalize_whitespace, nfkc=cfg.nfkc)
        counts["characters_removed"] += removed
        numbers = np.flatnonzero([bool(text) and not text.isspace() for text in texts])
        kept = [texts[k] for k in numbers.tolist()]
        counts["documents_emptied"] += len(texts) - len(kept)
        if drops is not None:
            numbers += drops.read
            drops.read += len(texts)
        if cfg.filters and kept:
            kept, numbers = filtered(kept, cfg, counts, drops, numbers)
        if kept:
            if drops is not None:
                drops.pending.append(numbers)
            yield kept


def filtered(texts: list[str], cfg: BuildConfig, counts: dict, drops: ShardDrops | None,
             numbers: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The documents --filters keeps and their numbers; what each rule removed added to counts["filters"] (and
    kept in `drops`)."""
    removals = Removals(keep=drops is not None)
    kept, index = filter_texts(texts, cfg, removals)
    add_totals(counts.setdefault("filters", {}), removals.totals())
    if drops is not None:
        drops.records += [(int(numbers[k]), rule, text) for k, rule, text in removals.kept]
    return kept, numbers[index]


@dataclass(frozen=True)
class ScanTask:
    """--dedup-paragraphs, before phase 1: one shard's lines to hash."""

    layout: Layout
    shard: Shard

    def describe(self) -> str:
        return self.shard.describe()


def read_urls_with_options(cfg: BuildConfig) -> None:
    """Read corpus URLs in this process (a worker, a Ray node) with the build's --storage-options: every task that
    reads the corpus calls this first, since a task may be the first its process runs."""
    storage.use_corpus_options(storage.parse_options(cfg.storage_options))


def scan_shard(task: ScanTask) -> dict[str, np.ndarray]:
    """One shard read and cleaned as phase 1 reads it; the word n-gram hashes of its documents' lines, which the
    driver takes in corpus order to choose the lines phase 1 removes (overlap.line_hashes)."""
    cfg = task.layout.cfg
    read_urls_with_options(cfg)
    opts = ReadOptions(text_column=cfg.text_column, doc_sep=cfg.doc_sep, on_decode_error=cfg.on_decode_error)
    clean = {"characters_removed": 0, "documents_emptied": 0}
    parts = [line_hashes(docs) for docs in cleaned_batches(read_shard(task.shard, opts, CorpusStats()), cfg, clean)]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]} if parts else line_hashes([])


@dataclass(frozen=True)
class TokenizeTask:
    layout: Layout
    shard: Shard
    removed: np.ndarray | None = None  # --dedup-paragraphs: bool per line of the shard's documents, those to remove
    hashed: bool = True  # --decontaminate: hash the documents' n-grams and token windows (the driver's shards not)
    excluded: Evaluation | None = None  # --exclude: the evaluation sets' n-grams (exclusion_hashes)

    def describe(self) -> str:
        return self.shard.describe()


def shard_documents(task: TokenizeTask, stats: CorpusStats, clean: dict, lines: dict, cut: dict,
                    drops: ShardDrops | None = None) -> Iterator[list[str]]:
    """The shard's documents as phase 1 takes them: read, cleaned and filtered, less the lines --dedup-paragraphs
    removes and the text --exclude cuts out (counted in `lines` and `cut`; with `drops`, kept there)."""
    cfg = task.layout.cfg
    opts = ReadOptions(text_column=cfg.text_column, doc_sep=cfg.doc_sep, on_decode_error=cfg.on_decode_error)
    batches = cleaned_batches(read_shard(task.shard, opts, stats), cfg, clean, drops)
    batches = batches if task.removed is None else trimmed(batches, task.removed, lines, drops)
    return batches if task.excluded is None else excluded(batches, task.excluded, cut, drops)


EXCLUDED = ("documents_matched", "documents_dropped", "pieces", "characters_removed")  # a shard's --exclude counts


@dataclass(frozen=True)
class ExcludeTask:
    """--exclude, before phase 1: the evaluation sets to hash."""

    layout: Layout

    def describe(self) -> str:
        return "--exclude " + " ".join(self.layout.cfg.exclude)


@contextlib.contextmanager
def evaluation_sets(cfg: BuildConfig) -> Iterator[Corpus]:
    """The --exclude evaluation sets, opened as a corpus; their errors, while in the block, name the option."""
    options = storage.parse_options(cfg.storage_options)
    try:
        yield open_corpus(cfg.exclude, text_column=cfg.text_column, doc_sep=cfg.doc_sep,
                          on_decode_error=cfg.on_decode_error, storage_options=options)
    except CorpusError as error:
        raise CorpusError(f"--exclude: {error}") from None


def exclusion_hashes(task: ExcludeTask) -> dict:
    """The evaluation sets read and cleaned as the corpus is: their n-grams (overlap.exclusion_table) and the
    counts of their documents; an evaluation set without text to match is an error."""
    cfg = task.layout.cfg
    with evaluation_sets(cfg) as sets:
        evaluation, counts = exclusion_table(cleaned_batches(sets.documents(), cfg, {"characters_removed": 0,
                                                                                     "documents_emptied": 0}),
                                             cfg.exclude_min_words)
    if not len(evaluation.table):
        shorter = (f", {counts['documents_ignored']} of fewer than --exclude-min-words {cfg.exclude_min_words} words"
                   if counts["documents_ignored"] else "")
        raise CorpusError(f"--exclude {' '.join(cfg.exclude)}: no text to exclude (read {sets.stats.documents} "
                          f"documents{shorter}); check the files, --text-column, --doc-sep and --exclude-min-words")
    return {"ngrams": evaluation, "documents": sets.stats.documents, **counts}


def tokenize_shard(task: TokenizeTask) -> dict:
    """Phase 1: one shard read, cleaned and tokenized into `shard-N.ids` / `shard-N.lens` (or its cleaned text
    into `shard-N.txt32` for --method text); returns its counts."""
    layout, cfg, index = task.layout, task.layout.cfg, task.shard.index
    read_urls_with_options(cfg)  # a shard on a URL is read in place
    worker = worker_tokenizer(layout)
    stats = CorpusStats()
    clean = {"characters_removed": 0, "documents_emptied": 0}
    lines = {"lines_removed": 0, "characters_removed": 0, "documents_emptied": 0, "example": ""}
    cut = {**dict.fromkeys(EXCLUDED, 0), "example": ""}
    hashed = task.hashed and decontaminating(cfg)
    later = not task.hashed and decontaminating(cfg)  # the driver's: its texts staged for a worker to hash
    # With threads to spare, reading and cleaning run in a thread of their own and two threads tokenize (one
    # call's ids become arrays while the other keeps the cores busy); a one-core worker does each in turn.
    overlap = layout.threads != 1
    described: list[dict[str, np.ndarray]] = []  # each batch's document keys and character counts
    hashing: list[np.ndarray] = []  # each batch's documents whose windows decontamination needs (selection.to_hash)
    copies = FirstCopies()
    drops = ShardDrops() if cfg.keep_dropped else None

    def described_batches() -> Iterator[list[str]]:
        for docs in shard_documents(task, stats, clean, lines, cut, drops):
            described.append(describe_documents(docs, cfg, hashed, later, copies))
            hashing.append(described[-1].pop("hashed", None))
            if drops is not None:
                drops.staged(docs, drops.pending.popleft(), keep_text=cfg.dedup != "off")
            yield docs

    batches = prefetch(described_batches()) if overlap else described_batches()
    if cfg.method == "text":
        out = stage_text(layout, index, batches)
    else:
        held = (lambda k: held_documents(described[k]["keys"], cfg.validation_fraction, cfg.seed)
                ) if held_apart(cfg) else None  # the k-th batch's validation candidates
        out = stage_ids(layout, index, batches, worker.tok, overlap, windows=hashing.__getitem__ if hashed else None,
                        held=held)
    per_doc = joined(described) if described else describe_documents([], cfg, hashed, later)
    if later:
        write_atomic(layout.staged(f"shard-{index:06d}.{NORMALISED}"),
                     [per_doc.pop("normalised_bytes").astype("<i8").tobytes(), per_doc.pop("normalised").tobytes()])
    if partitioned(cfg):
        stage_keys(layout, index, per_doc)
    stats.files, stats.files_skipped = 0, []
    if drops is not None:
        drops.write(Path(layout.stage), index)
    result = {**out, **per_doc, "stats": stats.as_dict(), "clean": clean,
              **({"lines": lines} if task.removed is not None else {}),
              **({"excluded": cut} if task.excluded is not None else {}),
              **({"documents_read": drops.read} if drops is not None else {})}
    return contamination.stage_hashes(layout, index, result) if hashed else result


def joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Each key's arrays of `parts`, joined in order."""
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


@dataclass(frozen=True)
class HashTask:
    """--decontaminate: the hashes of a shard the driver tokenized (tokenize_shard_in_driver), whose documents' keys
    it has (`keys`)."""

    layout: Layout
    index: int
    keys: np.ndarray

    def describe(self) -> str:
        return f"decontamination hashes of shard {self.index}"


def hash_shard(task: HashTask) -> dict:
    """--decontaminate, for a shard the driver tokenized without hashing (so that it never loads Numba): the n-grams
    of the texts it staged as `shard-N.normalised` (as a reading task hashes them: document_keys) and its staged
    token windows, staged for the partition tasks; what contamination.stage_hashes returns of them."""
    layout, index, documents = task.layout, task.index, len(task.keys)
    path = layout.staged(f"shard-{index:06d}.{NORMALISED}")
    data = read_array(path, np.uint8)
    sizes = np.frombuffer(data[: 8 * documents], "<i8") if len(data) >= 8 * documents else np.zeros(0, np.int64)
    if len(sizes) != documents or np.any(sizes < 0) or int(sizes.sum()) != len(data) - 8 * documents:
        raise changed(path, f"it does not hold the texts of {documents} documents")
    result, keep = {"keys": task.keys}, to_hash(task.keys, layout.cfg, FirstCopies())
    result["ngrams"], result["ngram_counts"] = text_ngrams(data[8 * documents :], starts_of(sizes), keep=keep)
    if layout.cfg.method == "tokens":
        lengths = read_array(layout.staged(f"shard-{index:06d}.lens"), np.int64)
        ids = read_array(layout.staged(f"shard-{index:06d}.ids"), np.int32)
        result["windows"], result["window_counts"] = window_hashes(ids, lengths, keep=keep)
    return {key: value for key, value in contamination.stage_hashes(layout, index, result).items()
            if key != "keys"}


def describe_documents(docs: list[str], cfg: BuildConfig, hashed: bool, normalised: bool = False,
                       copies: FirstCopies | None = None) -> dict[str, np.ndarray]:
    """What the driver's choice needs of a batch of documents: content keys (and signatures, n-gram hashes given
    `hashed`, the normalised texts given `normalised`: selection.document_keys) and characters."""
    return {**document_keys(docs, cfg, hashed, normalised, copies),
            "doc_chars": np.array([len(d) for d in docs], np.int64)}


def stage_text(layout: Layout, index: int, batches: Iterable[list[str]]) -> dict:
    """--method text: stage shard `index`'s documents as `shard-N.txt32` (joined by spaces, UTF-32) and each one's
    characters, space included, as `shard-N.chars`; returns their counts."""
    out = {"documents": 0, "tokens": 0, "chars": 0}
    chars_written: list[bytes] = []

    def text_chunks() -> Iterator[bytes]:
        for docs in batches:
            joined = "".join(f"{doc} " for doc in docs)  # the corpus's documents joined by spaces
            out["documents"] += len(docs)
            out["chars"] += len(joined)
            chars_written.append(np.array([len(doc) + 1 for doc in docs], np.int64).tobytes())
            yield joined.encode("utf-32-le")

    write_atomic(layout.staged(f"shard-{index:06d}.txt32"), text_chunks())
    write_atomic(layout.staged(f"shard-{index:06d}.chars"), chars_written)
    return out


def stage_ids(layout: Layout, index: int, batches: Iterable[list[str]], tok, overlap: bool, *,
              windows: Callable[[int], np.ndarray] | None = None,
              held: Callable[[int], np.ndarray] | None = None) -> dict:
    """Tokenize the batches (two calls at a time, given `overlap`) and stage shard `index`'s token ids as
    `shard-N.ids` and its documents' lengths as `shard-N.lens`; returns their counts and the lengths (and, given
    `windows`, the hashes of the token windows of the k-th batch's documents windows(k) marks:
    overlap.window_hashes). `held(k)`: the k-th batch's documents staged apart as well, as `shard-N.held`
    (staged.held_apart, held_bytes)."""
    out = {"documents": 0, "tokens": 0, "chars": 0}
    lengths_written: list[np.ndarray] = []
    hashed: list[tuple[np.ndarray, np.ndarray]] = []
    apart: list[tuple[np.ndarray, np.ndarray]] = []

    def id_chunks() -> Iterator[bytes]:
        tokenize = functools.partial(encode, tok)
        for k, (flat, lengths) in enumerate(prefetch_map(tokenize, batches) if overlap else map(tokenize, batches)):
            out["documents"] += len(lengths)
            out["tokens"] += len(flat)
            lengths_written.append(lengths.astype(np.int64))
            if windows is not None:
                hashed.append(window_hashes(flat, lengths, keep=windows(k)))
            if held is not None:
                picked = held(k)
                sizes = lengths_written[-1][picked]
                apart.append((flat[span_indices(starts_of(lengths_written[-1])[:-1][picked], sizes)], sizes))
            yield flat.astype(np.int32, copy=False).tobytes()

    write_atomic(layout.staged(f"shard-{index:06d}.ids"), id_chunks())
    write_atomic(layout.staged(f"shard-{index:06d}.lens"), [a.tobytes() for a in lengths_written])
    if held is not None:
        write_atomic(layout.staged(f"shard-{index:06d}.{HELD}"), held_bytes(apart))
    out["doc_tokens"] = np.concatenate(lengths_written) if lengths_written else np.zeros(0, np.int64)
    if windows is not None:
        out["windows"] = np.concatenate([h for h, _ in hashed]) if hashed else np.zeros(0, np.uint64)
        out["window_counts"] = np.concatenate([c for _, c in hashed]) if hashed else np.zeros(0, np.int64)
    return out


def tokenize_shard_in_driver(task: TokenizeTask) -> dict:
    """tokenize_shard in the driver, while its workers start (see driver_task); without --decontaminate's hashes,
    which need Numba (a worker's hash_shard adds them from the texts it stages)."""
    return tokenize_shard(replace(driver_task(task), hashed=False))


def driver_task(task: TokenizeTask) -> TokenizeTask:
    """`task` as the driver reads its shard: on the driver's own tokenizer threads (see
    build.set_tokenizer_threads), not on one worker's share of the cores, in batches of at most DRIVER_CHUNK_CHARS
    characters."""
    cfg = task.layout.cfg
    cfg = replace(cfg, chunk_chars=DRIVER_CHUNK_CHARS) if cfg.chunk_chars > DRIVER_CHUNK_CHARS else cfg
    return replace(task, layout=replace(task.layout, threads=0, cfg=cfg))


@dataclass(frozen=True)
class SegmentTask:
    """Segments [first, first + count) of one side's joined text (--method text)."""

    layout: Layout
    side: str  # "train" or "validation": the documents whose text is joined
    index: int
    first: int
    count: int
    char_offsets: tuple[int, ...]  # where each piece's text starts in the joined text (side_rows.piece); last: its
    # length + 1
    chars: int  # characters per segment
    shards: int = 0

    def describe(self) -> str:
        return f"{self.side} text segments {self.first}-{self.first + self.count}"


def read_chars(layout: Layout, side: str, char_offsets: np.ndarray, start: int, stop: int, shards: int) -> str:
    """Characters [start, stop) of the joined text of every shard's documents on `side` (pieces: side_rows.piece)."""
    parts = []
    first = max(0, int(np.searchsorted(char_offsets, start, side="right")) - 1)
    for s in range(first, len(char_offsets) - 1):
        lo, hi = char_offsets[s], char_offsets[s + 1]
        if lo >= stop:
            break
        a, b = max(start, lo) - lo, min(stop, hi) - lo
        if a < b:
            shard, picks = piece(side, s, shards)
            sizes, begins = side_documents(layout, shard, picks, "chars")
            ends = np.cumsum(sizes)
            d0, d1 = (int(np.searchsorted(ends, x, side="right")) for x in (a, b - 1))
            text = gather(layout.staged(f"shard-{shard:06d}.txt32"), "<u4", sizes, begins, d0, d1)
            base = int(ends[d0] - sizes[d0])
            parts.append(text[a - base : b - base].tobytes().decode("utf-32-le"))
    return "".join(parts)


def segment_text(task: SegmentTask) -> dict:
    """Cut, tokenize and truncate a run of text segments into rows (`segments-N.ids` / `.lens`); returns the
    window statistics of its rows. A cut splits a word where the characters on both sides are alphanumeric."""
    layout, c = task.layout, task.chars
    worker = worker_tokenizer(layout)
    tok, ids, tables = worker.tok, worker.ids, worker.tables
    offsets = np.asarray(task.char_offsets, dtype=np.int64)
    total = int(offsets[-1]) - 1  # the joined text has no space after its last document
    begin, end = task.first * c, min((task.first + task.count) * c, total)
    lo = max(begin - 1, 0)
    text = read_chars(layout, task.side, offsets, lo, min(end + 1, total), task.shards)
    segments, cut_after = [], []
    for start in range(begin, end, c):
        stop = min(start + c, total)
        segment = text[start - lo : stop - lo]
        if segment.strip():
            segments.append(segment)
            cut_after.append(stop < total and segment[-1].isalnum() and text[stop - lo].isalnum())
    cut_before = begin > 0 and text[begin - 1 - lo].isalnum() and text[begin - lo].isalnum()
    stats = WindowStats(method="text", row_length=layout.content_length, unk_id=ids.unk)
    if segments:
        flat, lengths = encode(tok, segments)
        rows = segment_rows(flat, lengths, np.array(cut_after, dtype=bool), cut_before,
                            length=layout.content_length, tables=tables, stats=stats)
    else:
        rows = Rows(np.zeros(0, np.int32), np.zeros(1, np.int64))
    write_atomic(layout.staged(f"segments-{task.side}-{task.index:06d}.ids"), [rows.values.astype(np.int32).tobytes()])
    write_atomic(layout.staged(f"segments-{task.side}-{task.index:06d}.lens"),
                 [rows.lengths().astype(np.int64).tobytes()])
    return window_counts(stats)


def window_counts(stats: WindowStats) -> dict[str, int]:
    """The additive counts of a WindowStats, which tasks return and the driver sums."""
    return {k: getattr(stats, k) for k in ("rows", "tokens_kept", "tokens_dropped", "tokens_padded",
                                           "rows_truncated", "rows_cut_in_word", "unknown_tokens")}


# ------------------------------------------------------------------------------------------------ phase 2


@dataclass(frozen=True)
class WriteTask:
    plan: Plan
    index: int  # output file number in its side's splits
    first: int  # its first window's row in its side's splits
    count: int
    cuts: tuple[SeedRows, ...] = ()  # ul2, prefix: each masked split's rows that start in these windows

    def describe(self) -> str:
        return f"{self.plan.side} output file {self.index} (windows {self.first}-{self.first + self.count})"


def write_file(task: WriteTask) -> dict:
    """Phase 2: one output file of every split; returns each part's rows, bytes and sha256, the window
    counts of its rows and the masking totals."""
    plan, layout = task.plan, task.plan.layout
    cfg = layout.cfg
    worker = worker_tokenizer(layout)
    ids, tables = worker.ids, worker.tables
    mask.set_threads(layout.threads)
    counts = {}  # --method text: the segmenting tasks counted everything
    if cfg.method == "text":
        rows = stored_rows(plan, task.first, task.count)
    else:
        window = stream_windows if cfg.pack == "stream" else doc_windows
        rows, counts["rows_cut_in_word"] = window(plan, task.first, task.count, tables)
        counts["rows"] = task.count
        counts["tokens_kept"] = int(rows.offsets[-1])
        counts["tokens_padded"] = int(layout.content_length * len(rows) - rows.offsets[-1])
        counts["unknown_tokens"] = int(np.count_nonzero(rows.values == ids.unk)) if ids.unk is not None else 0
    rows = frame_rows(rows, np.asarray(layout.prefix, np.int32), np.asarray(layout.suffix, np.int32))
    masker = Masker(cfg, ids, tables, layout.fixed, layout.window_length, layout.format_version, layout.modes)
    stage, width = Path(layout.stage), {"tokens": windows_width(layout)}
    dtype = {"tokens": masker.dtypes["tokens"]}
    windows, masked = split_names(plan.side, len(plan.seeds))
    parts = {windows: write_part(part_path(stage / windows, task.index), width, dtype, {"tokens": rows})}
    for k, (name, seed) in enumerate(zip(masked, side_seeds(plan))):
        if layout.cut:  # the seed's own rows, cut where its denoisers put them
            _, offsets = row_offsets(masker.mixture, seed, task.cuts[k])
            parts[name] = mask_part(masker, stage / name, task.index, seed_stream_rows(plan, task.cuts[k], offsets),
                                    seed, task.cuts[k].first, name)
        else:
            parts[name] = mask_part(masker, stage / name, task.index, rows, seed, task.first, name)
    return {"parts": parts, "windows": counts, "masking": masker.totals}


def side_seeds(plan: Plan) -> tuple[int, ...]:
    """The seeds of a side's masked splits: every slot's for training, the validation seed's for validation."""
    return plan.seeds if plan.side == SIDES[0] else (plan.validation_seed,)


def windows_width(layout: Layout) -> int | None:
    """The windows split's row width: the window length for fixed windows; None (ragged) otherwise, and for ul2 and
    prefix, whose last window holds the stream's tail."""
    return layout.window_length if layout.fixed and not layout.cut else None


def split_names(side: str, seeds: int) -> tuple[str, list[str]]:
    """(the windows split, the masked splits) that `side`'s files belong to."""
    if side == SIDES[0]:
        return "windows", [f"seed-{k}" for k in range(seeds)]
    return "validation-windows", ["validation"]


@dataclass(frozen=True)
class RemaskTask:
    """`remask`: one data file of a build's windows/, masked with new seeds."""

    layout: Layout
    windows_file: str
    record: FileRecord | None  # the manifest's record of windows_file (None: it lists none)
    index: int
    first_row: int
    seeds: tuple[tuple[str, str, int], ...]  # (split name, its staging directory, seed)
    cuts: tuple[SeedRows, ...] = ()  # ul2, prefix: each new seed's rows that start in this file's windows
    start: int = 0  # ... this file's first token in the stream
    following: tuple[tuple[str, FileRecord | None], ...] = ()  # ... the windows files after it that its rows reach

    def describe(self) -> str:
        return f"windows file {Path(self.windows_file).name}"


def remask_file(task: RemaskTask) -> dict:
    """Mask one stored windows file with each new seed, as part `index` of each new split, once its bytes are
    the ones the manifest records: masks of changed windows would look sound. The hash is this task's read of
    the file; the masking reads it again from the page cache."""
    # imported here: mlmprep.format.load imports Numba, which a build's start avoids
    from mlmprep.format.load import file_problem

    layout = task.layout
    files = [(task.windows_file, task.record), *task.following]
    for name, record in files:
        if problem := file_problem(Path(name), record):
            raise damaged(layout.stage, Path(name), problem)
    worker = worker_tokenizer(layout)
    ids, tables = worker.ids, worker.tables
    mask.set_threads(layout.threads)
    rows = concat_rows(list(iter_rows_of_file(Path(task.windows_file), "tokens")))
    masker = Masker(layout.cfg, ids, tables, layout.fixed, layout.window_length, layout.format_version, layout.modes)
    if not layout.cut:
        parts = {name: mask_part(masker, Path(stage), task.index, rows, seed, task.first_row, name)
                 for name, stage, seed in task.seeds}
        return {"parts": parts, "masking": masker.totals}
    stream = concat_rows([rows, *(r for name, _ in task.following for r in iter_rows_of_file(Path(name), "tokens"))])
    parts = {}
    for (name, stage, seed), cut in zip(task.seeds, task.cuts):
        _, offsets = row_offsets(masker.mixture, seed, cut)
        seed_rows = Rows(stream.values[cut.start - task.start:cut.stop - task.start], offsets)
        parts[name] = mask_part(masker, Path(stage), task.index, seed_rows, seed, cut.first, name)
    return {"parts": parts, "masking": masker.totals}


if in_forkserver():  # load tokenizers, Numba and its compiler once, for every worker
    # and what each worker's first tasks would import again: fsspec's local files (a reading task opens its corpus
    # through them; with asyncio and ssl, 0.06 s of a core), numpy.ma (Numba's typeof of an array looks it up) and
    # pyarrow (a write task's; mlmprep.format.write imports it where used, sparing the driver)
    import fsspec.implementations.local  # noqa: F401
    import numpy.ma  # noqa: F401
    import pyarrow  # noqa: F401
    import tokenizers  # noqa: F401

    from mlmprep.builder import _kernels

    # Numba's start-up probes for a BLAS by importing scipy.linalg (slow where SciPy is installed) and imports
    # cffi to type cffi functions; the kernels use neither, so here, in the processes that only run the
    # build's tasks, it finds neither.
    hidden = [name for name in ("scipy.linalg", "cffi") if name not in sys.modules]
    sys.modules.update(dict.fromkeys(hidden))  # importing them raises ImportError
    try:
        _kernels.warm_up()  # a serial kernel: no Numba thread pool is started before the server forks
        contamination.warm_up()  # what a default build's tasks call (--decontaminate is on by default)
    finally:
        for name in hidden:
            del sys.modules[name]
    if os.environ.get(PRELOAD_TOKENIZER):
        preload_tokenizer(os.environ[PRELOAD_TOKENIZER])  # loading starts no tokenizer threads
