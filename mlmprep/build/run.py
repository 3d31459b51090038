"""`build`: corpus -> clean -> tokenize -> windows -> mask (N seeds) -> write, into a staging directory
that is renamed into place at the end. The same inputs, options and seed give byte-identical output.

The work runs as the tasks of mlmprep.build.pipeline on mlmprep.build.engine (local processes or Ray); this
module is the driver: it trains or loads the tokenizer, plans the tasks (an output file's as soon as the shards
it reads are done), sums their counts, finishes the splits and writes the manifest last.
"""

from __future__ import annotations

import contextlib
import glob
import heapq
import itertools
import math
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import mlmprep
from mlmprep import storage
from mlmprep.build import mask
from mlmprep.build.dedup import exact_keys
from mlmprep.build.engine import make_engine
from mlmprep.build.engine.base import Engine, TaskRun, fetched, run_tasks
from mlmprep.build.engine.local import LocalEngine
from mlmprep.build.masker import Masker
from mlmprep.build.pipeline import (
    SEGMENT_TASK_CHARS,
    VALIDATION_SLOT,
    Detached,
    RemaskTask,
    SegmentTask,
    TokenizeTask,
    WriteTask,
    cleaned_batches,
    remask_file,
    run_detached,
    segment_text,
    split_names,
    tokenize_shard,
    tokenize_shard_in_driver,
    write_file,
)
from mlmprep.build.selection import EXCERPT_CHARS, SIDES, Selection
from mlmprep.build.side_rows import Plan
from mlmprep.build.staged import STAGING, Layout, adopt_tokenizer
from mlmprep.build.windows import MIN_ROW, WindowStats, doc_rows_per_document, segment_chars
from mlmprep.config import MAX_SEEDS, TOKENIZER_TYPES, BuildConfig, check_range
from mlmprep.corpus.documents import Corpus, open_corpus
from mlmprep.corpus.files import CorpusStats, ReadOptions, file_format
from mlmprep.corpus.jsonl import missing_field_error, no_text_error
from mlmprep.corpus.shards import read_shard
from mlmprep.corpus.sources import remote_sources
from mlmprep.corpus.streams import let_go_streams
from mlmprep.corpus.text import looks_wrapped
from mlmprep.errors import ConfigError, CorpusError, MlmprepError, TokenizerError, most_common_fields
from mlmprep.format.manifest import Manifest
from mlmprep.format.publish import (
    build_directory,
    build_lock,
    check_output_path,
    commit_remote,
    fetched_build,
    publish,
    read_existing,
    read_existing_remote,
    remote_contents,
    remote_lock,
    scratch_directory,
    staging_dir,
)
from mlmprep.format.write import (
    MANIFEST,
    damaged,
    data_files,
    file_rows,
    finish_split,
    format_version,
    manifest_path,
    part_path,
    strict,
    write_hf_tokenizer,
    write_json,
)
from mlmprep.progress import Stages
from mlmprep.tokenize import (
    frame_ids,
    load_tokenizer,
    special_ids,
    tokenizer_sha256,
    train_tokenizer,
    word_tables,
)

__all__ = ["BuildResult", "build", "cleaned_documents", "remask", "train_tokenizer_file"]

STREAMS_PER_WORKER = 2  # parts of one compressed file per worker: a second round evens out the later parts' skips
FILE_TOKENS = 1 << 19  # an output file holds about this many tokens of windows (a whole number of 1000s of rows)


@dataclass(frozen=True)
class BuildResult:
    out: Path
    manifest: Manifest
    up_to_date: bool


def say(line: str) -> None:
    """A note that stays on stderr whoever reads it (not progress): a lock taken over from another build."""
    print(f"note: {line}", file=sys.stderr, flush=True)


def build(cfg: BuildConfig, *, log: Callable[[str], None] = print) -> BuildResult:
    """Build `cfg.out` (a directory, or a prefix on object storage), or report it up to date when it already
    holds this build of this corpus."""
    options = storage.parse_options(cfg.storage_options)
    remote = storage.is_url(cfg.out)
    if remote:  # before reading the corpus or training a tokenizer
        storage.preflight(cfg.out, options, "--out")
    else:
        check_output_path(Path(cfg.out), directory=True)
    if cfg.objective == "span" and cfg.method == "tokens" and cfg.pack == "stream":  # rows exactly input_length
        window_length, _ = mask.compute_input_and_target_lengths(cfg.input_length, cfg.noise_density,
                                                                 cfg.mean_span_length)
        mask.check_input_length_reached(cfg.input_length, window_length, cfg.noise_density, cfg.mean_span_length)
    out = cfg.out.rstrip("/") if remote else build_directory(cfg.out)
    if not remote:
        check_outside_corpus(out, cfg.corpus)
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(scratch_directory())  # remote inputs and stage
        stack.callback(let_go_streams)  # the compressed streams the tasks run here kept open
        engine = make_engine(cfg.engine, cfg.workers, cfg.ray_address)
        # Corpus objects: copied to this machine's disk first (one transfer each, several at once), except where the
        # workers see no copy of the driver's (Ray nodes): there each task reads its shard of an object in place.
        paths, copies = (list(cfg.corpus), {}) if not engine.shares_disk else fetch_sources(
            cfg.corpus, Path(scratch, "corpus"), options)
        stack.enter_context(named_as(copies))
        corpus = open_corpus(
            paths,
            dataset=cfg.dataset,
            dataset_split=cfg.dataset_split,
            text_column=cfg.text_column,
            doc_sep=cfg.doc_sep,
            on_decode_error=cfg.on_decode_error,
            storage_options=options,
        )
        for record in corpus.files:  # the manifest names what the user named
            record["path"] = copies.get(record["path"], record["path"])
        tokenizer = fetch_tokenizer(cfg.tokenizer, Path(scratch, "tokenizer"), options)
        set_tokenizer_threads(cfg.threads, engine)
        # The workers' server starts now, to overlap what follows, unless a build there may be up to date: one
        # started for nothing costs a core-second and keeps this process's stdout open that long after it exits.
        if cfg.force or not (storage.exists(storage.join(out, MANIFEST), options) if remote
                             else manifest_path(out).exists()):
            engine.prestart(corpus.bytes, cfg.shard_bytes, tokenize_shard.__module__, tokenizer)
        given_tokenizer = load_tokenizer(tokenizer) if tokenizer else None
        log(f"corpus: {corpus.description}")
        with remote_lock(out, options, force=cfg.force, log=say) if remote else build_lock(out):
            tokenizer_sha = tokenizer_sha256(given_tokenizer) if given_tokenizer else None
            if remote:
                present = remote_contents(out, options)
                existing = read_existing_remote(out, present, options, strict(cfg.identity()), corpus.fingerprint,
                                                tokenizer_sha=tokenizer_sha, force=cfg.force)
            else:
                existing = read_existing(out, strict(cfg.identity()), corpus.fingerprint, tokenizer_sha=tokenizer_sha,
                                         force=cfg.force)
            if existing is not None:
                return BuildResult(out, existing, up_to_date=True)
            engine.prestart(corpus.bytes, cfg.shard_bytes, tokenize_shard.__module__, tokenizer)  # no-op if started
            # one Ray connection (or local instance, or local pool) for all the build's phases
            stage_dir = staging_dir(Path(scratch, "build")) if remote else staging_dir(out)
            with stage_dir as stage, engine.session():
                manifest = write_build(cfg, corpus, given_tokenizer, stage, log, engine)
                if remote:
                    commit_remote(stage, out, present, options)
                else:
                    publish(stage, out)
    return BuildResult(out, manifest, up_to_date=False)


def fetch_sources(patterns: Iterable[str], directory: Path, options: dict) -> tuple[list[str], dict[str, str]]:
    """The corpus paths with every URL among them replaced by local copies of the files it names, in `directory`
    (streamed to disk by fsspec, never held in memory, several at once); and each copy's URL by its path."""
    paths: list[str] = []
    copies: dict[str, str] = {}
    for pattern in patterns:
        if not storage.is_url(pattern):
            paths.append(pattern)
            continue
        pairs = [(url, directory / f"{len(copies) + k:06d}" / url.rsplit("/", 1)[-1])
                 for k, url in enumerate(remote_sources(pattern, options))]
        storage.fetch(pairs, options)
        paths += [str(local) for _, local in pairs]
        copies.update((str(local), url) for url, local in pairs)
    return paths, copies


@contextlib.contextmanager
def named_as(copies: dict[str, str]) -> Iterator[None]:
    """An error that names a local copy of a corpus file names its URL instead, as the user gave it."""
    try:
        yield
    except MlmprepError as exc:
        text = str(exc)
        for local, url in copies.items():
            text = text.replace(local, url)
        if text == str(exc):
            raise
        raise type(exc)(text) from None


def fetch_tokenizer(tokenizer: str | None, directory: Path, options: dict) -> str | None:
    """--tokenizer as a local path: a URL (a tokenizer.json or a transformers directory) is copied into `directory`."""
    if not storage.is_url(tokenizer):
        return tokenizer
    name = tokenizer.rstrip("/").rsplit("/", 1)[-1]
    directory.mkdir(parents=True)
    with storage.errors(f"--tokenizer {tokenizer}", TokenizerError):
        storage.get(tokenizer, directory / name, options)
    return str(directory / name)


def check_outside_corpus(out: Path, patterns: Iterable[str]) -> None:
    """Refuse an --out inside a corpus directory (named, or matched by a glob): the next build would read it."""
    for pattern in patterns:
        matches = glob.glob(pattern, recursive=True) if not os.path.lexists(pattern) else [pattern]
        for directory in filter(os.path.isdir, matches):
            if Path(os.path.realpath(directory)) in (out, *out.parents):
                raise ConfigError(f"--out {out}: inside the corpus directory {directory}, whose files the next build "
                                  "would read as corpus; choose an --out outside it")


def set_tokenizer_threads(threads: int, engine: Engine) -> None:
    """The driver's tokenizer threads (0: all cores): --threads for a build in one process; with local workers,
    the cores they share, since the driver tokenizes while they start. The output does not depend on it. The
    tokenizer's thread pool starts on first use, so in one Python process the first call decides it."""
    threads = engine.driver_threads(threads)
    if threads:
        os.environ["RAYON_NUM_THREADS"] = str(threads)


def cleaned_documents(corpus: Corpus, cfg: BuildConfig, counts: dict) -> Iterator[str]:
    """The corpus's documents, cleaned, one by one (characters removed and documents emptied counted)."""
    return itertools.chain.from_iterable(cleaned_batches(corpus.documents(), cfg, counts))


def training_sample(corpus: Corpus, cfg: BuildConfig, used: dict) -> Iterator[str]:
    """The cleaned documents a tokenizer is trained on, a bottom-k sample: the distinct texts (by content key,
    dedup.exact_keys) with the smallest keys whose characters reach cfg.tokenizer_train_chars, in key order, the
    last one cut; the whole corpus, each text once, when it holds fewer. Keys are hashes of the texts, so the
    sample is spread over the whole corpus and depends on its documents only, never on files, compression or
    shards; the copies of a text count once. `used` counts documents and characters."""
    counts = {"characters_removed": 0, "documents_emptied": 0}
    budget = cfg.tokenizer_train_chars
    chosen: list[tuple[int, str]] = []  # (-key, text): a heap with the largest key on top
    keys: set[int] = set()  # the keys in `chosen`
    total = 0
    for batch in cleaned_batches(corpus.documents(), cfg, counts):
        for key, text in zip(exact_keys(batch).tolist(), batch):
            if key in keys or (total >= budget and key > -chosen[0][0]):
                continue
            heapq.heappush(chosen, (-key, text))
            keys.add(key)
            total += len(text)
            while total - len(chosen[0][1]) >= budget:  # enough without the largest key's text
                key, text = heapq.heappop(chosen)
                keys.discard(-key)
                total -= len(text)
    for _, text in sorted(chosen, reverse=True):
        text = text[: budget - used["characters"]]
        used["documents"] += 1
        used["characters"] += len(text)
        yield text


def logged_sample(texts: Iterator[str], bar: Stages, total: int) -> Iterator[str]:
    """`texts`, their characters counted in a progress stage of `total` (the trainer's own stages follow)."""
    bar.stage("train tokenizer: read the sample", total, "character")
    pending = 0
    for text in texts:
        yield text
        pending += len(text)
        if pending >= 1 << 20:
            bar.update(pending)
            pending = 0
    bar.update(pending)


def write_build(cfg: BuildConfig, corpus: Corpus, tok, stage: Path, log: Callable[[str], None], engine: Engine) -> dict:
    """Write every split and the manifest into `stage`; return the manifest."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    trained_on = None
    if tok is None:
        log(f"training a {TOKENIZER_TYPES[cfg.trained_tokenizer_type()]} tokenizer (vocab {cfg.vocab_size}) on at most "
            f"{cfg.tokenizer_train_chars:,} characters ...")
        trained_on = {"documents": 0, "characters": 0}
        texts = training_sample(corpus, cfg, trained_on)
        with Stages() as bar:
            tok = train_tokenizer(logged_sample(texts, bar, min(cfg.tokenizer_train_chars, corpus.bytes or
                                                                 cfg.tokenizer_train_chars)), cfg.vocab_size,
                                  kind=cfg.trained_tokenizer_type(), bar=bar)
        timings["train_tokenizer_s"] = time.perf_counter() - started
    write_hf_tokenizer(tok, stage, model_max_length=cfg.input_length)  # tokenizer.json + the transformers files
    ids = special_ids(tok)
    window_length, target_length = row_lengths(cfg, ids)
    prefix, suffix = mlm_frame(cfg, tok, window_length)
    if cfg.objective == "mlm" and cfg.whole_word:  # before any reading: the tokenizer must mark word starts
        is_special = np.isin(np.arange(ids.vocab_size), ids.all())
        mask.check_word_starts(word_tables(tok).starts_word, is_special)

    if tok.padding is None and tok.truncation is None:  # else plain_encoder would change what the manifest hashes
        adopt_tokenizer(stage / "tokenizer.json", tok)  # for the tasks this process runs
    pipeline_started = time.perf_counter()
    streams = STREAMS_PER_WORKER * engine.parallelism() if engine.parallelism() > 1 else 1  # one process: no skips
    shards = corpus.shards(engine.shard_bytes(corpus.bytes, cfg.shard_bytes), streams)
    layout = Layout(cfg, str(stage), engine.worker_threads(cfg.threads, len(shards)),
                    content_length=window_length - len(prefix) - len(suffix), window_length=window_length,
                    doc_eos=document_eos(cfg, ids, suffix), format_version=format_version(ids.vocab_size),
                    prefix=tuple(prefix.tolist()),
                    suffix=tuple(suffix.tolist()))
    (stage / STAGING).mkdir()
    # tasks on Ray nodes that share no disk with this process (which stages a build to object storage) are detached
    staging = Staging(stage, engine, detached=not engine.shares_disk and storage.is_url(cfg.out))
    log(f"{len(shards)} input shard{'s' * (len(shards) != 1)} on {engine.describe()}")
    stats = WindowStats(method=cfg.method, row_length=layout.content_length, unk_id=ids.unk)
    files = {side: OutputFiles(layout, output_rows(cfg, window_length), len(shards),
                               tuple(mask.row_seed(cfg.seed, k) for k in range(cfg.seeds)),
                               mask.row_seed(cfg.seed, VALIDATION_SLOT), side) for side in SIDES}
    selection = Selection(cfg, len(shards))
    calls: list[tuple[str, int]] = []  # (side, file) of each write task, in the order they were queued
    reading = Reading([None] * len(shards))
    # progress in stages, each of a total known when it starts: the input's bytes (shards for the sample, whose
    # size is not known up front), then the text segments (--method text), then the output files
    sizes = [shard.nbytes for shard in shards] if corpus.bytes else [1] * len(shards)
    with Stages() as bar:
        bar.stage("read, clean, tokenize", sum(sizes), "B" if corpus.bytes else "shard")
        with TaskRun(*staging.calls(tokenize_shard, [TokenizeTask(layout, shard) for shard in shards]), engine=engine,
                     in_driver=None if staging.detached else tokenize_shard_in_driver) as run:
            for index, result in run:  # as each task ends; the write tasks' indices follow the shards'
                staging.take(run, index)
                if index >= len(shards):  # an output file is written: let go the shards no file still needs
                    side, file = calls[index - len(shards)]
                    files[side].written(file)
                    staging.let_go(range(staging.released, min(f.kept for f in files.values())))
                    if reading.done:  # the write stage, which begins once every shard is read
                        bar.update(1)
                    continue
                reading.add(index, result)
                done = sum(len(f.done) for f in files.values())
                written_yet = f", {done} output files written" if done else ""
                bar.update(sizes[index], f"{reading.count}/{len(shards)} shards{written_yet}", reading.tokens)
                ready = []
                for s in selection.add(index, result):  # the shards whose documents' fates are known now
                    staging.stage_picks(s, selection)
                    if cfg.method == "tokens":  # text: no file is ready before its side's whole text is
                        ready += [task for side in SIDES for task in files[side].shard_done(
                            s, side_size(layout, reading.results[s], selection.picked(s, side))[0])]
                if reading.done and cfg.method == "tokens":  # the last shard makes every file left ready
                    ready += plan_rest(corpus, layout, files, reading.results, selection, stats, staging, bar)
                calls += [(task.plan.side, task.index) for task in ready]
                run.add(*staging.calls(write_file, ready))
        if cfg.method == "text":
            rest = plan_rest(corpus, layout, files, reading.results, selection, stats, staging, bar)
            calls += [(task.plan.side, task.index) for task in rest]
            results = counted_tasks(write_file, rest, staging, bar)
        else:
            results = run.results[len(shards):]  # one per output file, in the order queued
        timings["tokenize_s"] = reading.finished - pipeline_started
        timings["mask_and_write_s"] = time.perf_counter() - reading.finished
    written = {side: [None] * len(files[side].tasks) for side in SIDES}  # each side's results by file
    for (side, file), result in zip(calls, results):
        written[side][file] = result
    # sums the tasks' totals, in file order; masks nothing here
    masker = Masker(cfg, ids, None, layout.fixed, window_length, layout.format_version)
    for result in itertools.chain(*written.values()):
        add_counts(stats, result["windows"])
        masker.merge(result["masking"])
    token_width, token_dtype = {"tokens": window_length if layout.fixed else None}, {"tokens": masker.dtypes["tokens"]}
    splits = {}
    for side in SIDES:
        windows, masked = split_names(side, cfg.seeds)
        for name in (windows, *masked):
            splits[name] = finish_split(stage / name, *((token_width, token_dtype) if name == windows
                                                        else (masker.widths, masker.dtypes)),
                                        [(part_path(stage / name, i), result["parts"][name])
                                         for i, result in enumerate(written[side])])
    shutil.rmtree(stage / STAGING)
    timings["pipeline_s"] = time.perf_counter() - pipeline_started
    timings["total_s"] = time.perf_counter() - started
    corpus_stats = {**corpus_counts(corpus, reading.results), "wrapped_prose": wrapped_prose(shards, reading.results),
                    "dedup": dedup_stats(selection, shards, cfg)}
    return finish_manifest(cfg, corpus, tok, ids, stage, splits, files["train"].seeds, stats, masker, corpus_stats,
                           timings,
                           window_length=window_length, target_length=target_length, trained_on=trained_on,
                           rows_per_file=output_rows(cfg, window_length))


@dataclass
class Reading:
    """Phase 1 as its shards finish: each one's counts (None: not finished yet), the tokens read so far and,
    once the last shard is in, when that was."""

    results: list[dict | None]
    tokens: int = 0
    count: int = 0  # shards finished
    finished: float = 0.0  # time.perf_counter() when the last shard came in

    def add(self, index: int, result: dict) -> None:
        self.results[index] = result
        self.tokens += result["tokens"]
        self.count += 1
        if self.done:
            self.finished = time.perf_counter()

    @property
    def done(self) -> bool:
        return self.count == len(self.results)


class Staging:
    """How the tasks reach the staging directory: directly (one machine, or a disk every Ray node sees), or, when
    `detached` (Ray nodes that share no disk with the driver), through Ray's object store: each task runs as a
    pipeline.Detached, the files it stages stay in the object store as its payload until no task still to come
    reads them, and the output files it writes come back into the driver's stage."""

    def __init__(self, stage: Path, engine: Engine, detached: bool):
        self.stage, self.engine, self.detached = stage, engine, detached
        self.held: dict[str, object] = {}  # staged name -> the payload holding it (detached)
        self.released = 0  # shards before this one are let go
        if detached:
            self.held["tokenizer.json"] = engine.put((stage / "tokenizer.json").read_bytes())

    def calls(self, fn: Callable, tasks: Iterable) -> tuple[Callable, list]:
        """(function, tasks) that run fn(task) for each task where the engine runs them."""
        if not self.detached:
            return fn, list(tasks)
        return run_detached, [Detached(fn, task, dict(self.held)) for task in tasks]

    def take(self, run: TaskRun, index: int) -> None:
        """Keep what the finished task `index` staged; write the output files it made into the stage."""
        if index not in run.payloads:
            return
        names, payload = run.payloads.pop(index)
        outputs = [name for name in names if not name.startswith(f"{STAGING}/")]
        self.held.update((name, payload) for name in names if name not in outputs)
        if outputs:
            data = fetched(payload)
            for name in outputs:
                (self.stage / name).parent.mkdir(parents=True, exist_ok=True)
                (self.stage / name).write_bytes(data[name])

    def stage_picks(self, shard: int, selection: Selection) -> None:
        """Stage `shard`'s document numbers on each side (`shard-N.train`, `shard-N.validation`), which phase 2
        reads; detached, they travel as a payload of their own."""
        for side in SIDES:
            name = f"{STAGING}/shard-{shard:06d}.{side}"
            data = selection.picked(shard, side).tobytes()
            if self.detached:
                self.held[name] = self.engine.put({name: data})
            else:
                (self.stage / name).write_bytes(data)

    def let_go(self, shards: Iterable[int]) -> None:
        """Drop the staged token files of `shards`, which no output file still to write reads."""
        for shard in shards:
            for suffix in ("ids", "lens", *SIDES):
                name = f"shard-{shard:06d}.{suffix}"
                (self.stage / STAGING / name).unlink(missing_ok=True)
                self.held.pop(f"{STAGING}/{name}", None)
            self.released = max(self.released, shard + 1)


def plan_rest(corpus: Corpus, layout: Layout, files: dict[str, OutputFiles], read: list[dict], selection: Selection,
              stats: WindowStats, staging: Staging, bar) -> list[WriteTask]:
    """The barrier, once every shard is read: checks, the window statistics, the write tasks of the files not
    made yet, of both sides."""
    corpus_stats = corpus_counts(corpus, read)
    if corpus_stats["documents"] == 0:
        raise no_text_error(corpus_name(corpus), corpus_stats, layout.cfg.text_column)
    if error := missing_field_error(corpus_name(corpus), corpus_stats, layout.cfg.text_column):
        raise error
    sizes = barrier(layout, read, selection, stats, staging, bar)
    rest = [task for side in SIDES for task in files[side].rest(sizes[side])]
    if not files["train"].tasks and not files["validation"].tasks:
        raise CorpusError(f"{corpus_name(corpus)}: too little text for one window of {layout.window_length} tokens; "
                          "lower --input-length or use --pack doc")
    if files["train"].rows == 0:
        raise CorpusError(f"{corpus_name(corpus)}: every window went to validation; lower --validation-fraction "
                          "or give more documents (whole documents are held out)")
    tasks = len(files["train"].tasks) + len(files["validation"].tasks)
    bar.stage("window, mask, write", tasks, "output file", done=sum(len(f.done) for f in files.values()))
    bar.update(0, f"{files['train'].rows + files['validation'].rows:,} windows")
    return rest


def counted_tasks(fn: Callable, tasks: list, staging: Staging, bar) -> list:
    """fn(task) for every task, the progress bar counting each as it ends; the results in task order."""
    with TaskRun(*staging.calls(fn, tasks), engine=staging.engine) as run:
        for index, _ in run:
            staging.take(run, index)
            bar.update(1)
    return run.results


def output_rows(cfg: BuildConfig, window_length: int) -> int:
    """Windows per output file: --rows-per-file, or a whole number of 1000s making about FILE_TOKENS tokens."""
    return cfg.rows_per_file or 1000 * max(1, FILE_TOKENS // (window_length * 1000))


def corpus_counts(corpus: Corpus, read: list[dict]) -> dict:
    """The corpus statistics of the manifest: every shard's counts summed, and what cleaning removed; of the
    fields of records without the text field, the most common few."""
    total = CorpusStats(files=corpus.stats.files, files_skipped=corpus.stats.files_skipped,
                        files_as_text=corpus.stats.files_as_text).as_dict()
    keys = total["missing_field_keys"]
    for result in read:
        for key, value in itertools.chain(result["stats"].items(), result["clean"].items()):
            if key == "missing_field_keys":
                for name, count in value.items():
                    keys[name] = keys.get(name, 0) + count
            elif key not in ("files", "files_skipped", "files_as_text"):
                total[key] = total.get(key, 0) + value
    total["missing_field_keys"] = most_common_fields(keys)
    return total


def wrapped_prose(shards: list, read: list[dict]) -> dict:
    """The .txt files read one document per line that look like hard-wrapped prose (text.looks_wrapped), with
    their lines, documents and characters: each file's shards' counts summed first."""
    per_file: dict[str, list[int]] = {}
    for shard, result in zip(shards, read):
        if shard.kind == "file" and file_format(shard.source)[0] == ".txt":
            counts = per_file.setdefault(shard.source, [0, 0, 0, 0])
            for k, key in enumerate(("documents", "blank_skipped", "wrapped_lines", "characters")):
                counts[k] += result["stats"][key]
    flagged = [counts for counts in per_file.values() if looks_wrapped(*counts[:3])]
    return {"files": len(flagged), "lines": sum(c[0] + c[1] for c in flagged),
            "documents": sum(c[0] for c in flagged), "characters": sum(c[3] for c in flagged)}


def add_counts(stats: WindowStats, counts: dict[str, int]) -> None:
    for key, value in counts.items():
        setattr(stats, key, getattr(stats, key) + value)


def barrier(layout: Layout, read: list[dict], selection: Selection, stats: WindowStats, staging: Staging,
            bar) -> dict[str, list[int]]:
    """Once every shard is read: the window statistics of the whole stream, and, for each side, the size of each
    staged file that phase 2 cuts its windows from (see side_size). --method text runs its segmenting tasks
    here, each side's over the joined text of its documents."""
    cfg, sizes = layout.cfg, {}
    if cfg.method == "text":
        chars = segment_chars(cfg.input_length)
        per = max(1, SEGMENT_TASK_CHARS // chars)
        tasks = []
        for side in SIDES:
            char_offsets = tuple(int(x) for x in np.cumsum(
                [0] + [side_size(layout, r, selection.picked(s, side))[0] for s, r in enumerate(read)]))
            segments = math.ceil((char_offsets[-1] - 1) / chars) if char_offsets[-1] else 0
            tasks += [SegmentTask(layout, side, t, first, min(per, segments - first), char_offsets, chars)
                      for t, first in enumerate(range(0, segments, per))]
        bar.stage("cut, tokenize text segments", len(tasks), "task")
        counted = counted_tasks(segment_text, tasks, staging, bar)
        for counts in counted:
            add_counts(stats, counts)
        return {side: [c["rows"] for c, t in zip(counted, tasks) if t.side == side] for side in SIDES}
    for side in SIDES:
        sized = [side_size(layout, r, selection.picked(s, side)) for s, r in enumerate(read)]
        sizes[side] = [size for size, _ in sized]
        if cfg.pack == "stream":
            stats.tokens_dropped += sum(sizes[side]) % layout.content_length
        else:
            stats.tokens_dropped += sum(dropped for _, dropped in sized)
    return sizes


def side_size(layout: Layout, result: dict, picked: np.ndarray) -> tuple[int, int]:
    """(size in phase 2's units, tokens dropped in --pack doc tails) of a shard's documents `picked` (one side's):
    stream tokens (each document and its EOS) with --pack stream, rows with --pack doc, characters of joined
    text (each document and its space) with --method text."""
    if layout.cfg.method == "text":
        return int(result["doc_chars"][picked].sum()) + len(picked), 0
    lengths = result["doc_tokens"][picked]
    if layout.cfg.pack == "stream":
        return int(lengths.sum()) + len(lengths), 0
    rows, dropped = doc_rows_per_document(lengths, layout.content_length, layout.doc_eos is not None)
    return int(rows.sum()), dropped


def dedup_stats(selection: Selection, shards: list, cfg: BuildConfig) -> dict:
    """corpus.stats.dedup: what dedup removed and the largest clusters, each with the start of its first document
    (read again from its shard: only these few documents' texts are ever needed)."""
    summary = selection.summary()
    opts = ReadOptions(text_column=cfg.text_column, doc_sep=cfg.doc_sep, on_decode_error=cfg.on_decode_error)
    counts = {"characters_removed": 0, "documents_emptied": 0}
    for size, first in selection.largest():
        s, d = selection.locate(first)
        docs = itertools.chain.from_iterable(cleaned_batches(read_shard(shards[s], opts, CorpusStats()), cfg, counts))
        text = next(itertools.islice(docs, d, None), "")
        summary["largest_clusters"].append({"size": size, "excerpt": " ".join(text[: 4 * EXCERPT_CHARS].split())
                                            [:EXCERPT_CHARS]})
    return summary


class OutputFiles:
    """One side's write tasks (training or validation), one per output file, each made as soon as the staged
    files it reads are done and their documents' fates decided.

    A file of windows [first, first + count) of the side's stream needs every shard up to the token (--pack
    stream: one more, to tell whether its last window ends inside a word) or row where it ends; shards finish
    out of order, so only those whose predecessors are all done count. The last file waits for the whole corpus
    (`rest`), which fixes the number of rows. `written` notes a written file and says which shards no file of
    this side still reads (`kept`: the first one still read); the driver lets a shard go once neither side
    reads it."""

    def __init__(self, layout: Layout, rows_per_file: int, shards: int, seeds: tuple[int, ...], validation_seed: int,
                 side: str):
        self.layout, self.rows_per_file, self.side = layout, rows_per_file, side
        self.seeds, self.validation_seed = seeds, validation_seed
        self.sizes: list[int | None] = [None] * shards
        self.offsets = [0]  # where each shard starts, for every shard whose predecessors are all done
        self.tasks: list[WriteTask] = []
        self.rows = 0  # rows of the files made so far
        self.done: set[int] = set()  # files written
        self.unwritten = 0  # the first file not written yet
        self.kept = 0  # the first shard not let go yet

    def shard_done(self, index: int, size: int) -> list[WriteTask]:
        """Note a finished shard, of `size` in phase 2's units on this side (see side_size); the write tasks it
        made ready."""
        self.sizes[index] = size
        while len(self.offsets) <= len(self.sizes) and self.sizes[len(self.offsets) - 1] is not None:
            self.offsets.append(self.offsets[-1] + self.sizes[len(self.offsets) - 1])
        ready, plan = [], None
        while self.needs(len(self.tasks) + 1) <= self.offsets[-1]:
            plan = plan or self.plan(self.offsets)  # made only when a file is ready
            ready.append(self.add(plan, self.rows_per_file))
        return ready

    def written(self, file: int) -> list[int]:
        """Note that `file` is written; the shards that no file still to write reads, each given once. A file
        reads from its first row on (--pack stream: from the token before its first window, which says
        whether that window starts inside a word), and files after it start later."""
        self.done.add(file)
        while self.unwritten in self.done:
            self.unwritten += 1
        rows = self.unwritten * self.rows_per_file
        start = max(0, rows * self.layout.content_length - 1) if self.layout.fixed else rows
        free = []
        while self.kept + 1 < len(self.offsets) and self.offsets[self.kept + 1] <= start:
            free.append(self.kept)
            self.kept += 1
        return free

    def rest(self, sizes: list[int]) -> list[WriteTask]:
        """The files not made yet, once every staged file's size is known."""
        plan, ready = self.plan([int(x) for x in np.cumsum([0] + sizes)]), []
        while (first := len(self.tasks) * self.rows_per_file) < plan.rows:
            ready.append(self.add(plan, min(self.rows_per_file, plan.rows - first)))
        return ready

    def plan(self, offsets: list[int]) -> Plan:
        """Where each staged file starts, as far as known, and the whole windows that holds."""
        rows = offsets[-1] // self.layout.content_length if self.layout.fixed else offsets[-1]
        return Plan(self.layout, self.side, tuple(offsets), rows, self.seeds, self.validation_seed)

    def needs(self, files: int) -> int:
        """How far the known offsets must reach (in tokens or rows) before the first `files` files are whole."""
        rows = files * self.rows_per_file
        return rows * self.layout.content_length + 1 if self.layout.fixed else rows

    def add(self, plan: Plan, count: int) -> WriteTask:
        self.tasks.append(WriteTask(plan, len(self.tasks), len(self.tasks) * self.rows_per_file, count))
        self.rows += count
        return self.tasks[-1]


def corpus_name(corpus: Corpus) -> str:
    """The corpus's paths (the first three) for messages, or its description for a dataset or the sample."""
    paths = [f["path"] for f in corpus.files]
    if not paths:
        return corpus.description
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def row_lengths(cfg: BuildConfig, ids) -> tuple[int, int]:
    """(window length before masking, label length): exact for token windows, maxima for ragged rows."""
    if cfg.objective == "mlm":
        if ids.mask is None:
            raise TokenizerError("--objective mlm needs a <mask> or [MASK] token in the tokenizer")
        return cfg.input_length, cfg.input_length
    window_length, target_length = mask.compute_input_and_target_lengths(
        cfg.input_length, cfg.noise_density, cfg.mean_span_length
    )
    mask.check_span_settings(window_length, cfg.noise_density, cfg.mean_span_length, len(ids.sentinels))
    return window_length, target_length


def mlm_frame(cfg: BuildConfig, tok, window_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(prefix, suffix) around every row: for MLM the tokenizer's own frame of one sequence ([CLS] … [SEP]),
    counted inside --input-length; none for span corruption, whose kernel ends each row with </s>."""
    empty = np.zeros(0, dtype=np.int32)
    if cfg.objective != "mlm":
        return empty, empty
    prefix, suffix = frame_ids(tok)
    if window_length - len(prefix) - len(suffix) < MIN_ROW:
        raise ConfigError(f"--input-length {cfg.input_length} leaves no room for text inside the tokenizer's "
                          f"{len(prefix) + len(suffix)} frame tokens; raise it")
    return prefix, suffix


def document_eos(cfg: BuildConfig, ids, suffix: np.ndarray) -> int | None:
    """The token that ends each document in the windows: EOS, except with --pack doc where the row's own end
    marks it (span corruption's </s>, an MLM frame's [SEP]), so the end of a document is never masked as text."""
    if cfg.pack == "doc" and (cfg.objective == "span" or len(suffix)):
        return None
    return ids.eos


def finish_manifest(cfg, corpus, tok, ids, stage, splits, seeds, stats, masker, corpus_stats, timings, *,
                    window_length, target_length, trained_on, rows_per_file) -> dict:
    """Write manifest.json, last, so a directory with a manifest is a complete build."""
    from mlmprep.config import to_dict

    manifest = {
        "format_version": format_version(ids.vocab_size),
        "mlmprep_version": mlmprep.__version__,
        "config": cfg.identity(),
        # storage options may hold credentials: never written down
        "build_options": {k: v for k, v in to_dict(cfg).items() if k not in {*cfg.identity(), "storage_options"}},
        "objective": cfg.objective,
        "method": cfg.method,
        "input_length": cfg.input_length,
        "window_length": window_length,
        "target_length": target_length,
        "fixed_length": masker.widths["input_ids"] is not None,
        "rows_per_file": rows_per_file,
        "tokenizer": {
            "file": "tokenizer.json",
            "sha256": tokenizer_sha256(tok),
            "vocab_size": ids.vocab_size,
            "pad_id": ids.pad,
            "eos_id": ids.eos,
            "unk_id": ids.unk,
            "mask_id": ids.mask,
            "decoder_start_id": ids.pad,
            "sentinels": len(ids.sentinels),
            "trained_on": trained_on,  # {"documents", "characters"} of the training sample; None: --tokenizer given
            "type": cfg.trained_tokenizer_type() if trained_on else None,  # --tokenizer-type of one trained here
        },
        "corpus": {
            "description": corpus.description,
            "fingerprint": corpus.fingerprint,
            "files": corpus.files,
            "stats": corpus_stats,
        },
        "seeds": [{"split": f"seed-{k}", "seed": s} for k, s in enumerate(seeds)],
        "validation_seed": mask.row_seed(cfg.seed, VALIDATION_SLOT),
        "splits": splits,
        "statistics": {"windows": stats.as_dict(), "masking": masker.summary()},
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    typed = Manifest.from_json(strict(manifest), stage)  # as written: what the summary shows is what inspect will
    write_json(stage / "manifest.json", typed.to_json())
    return typed


def remask(out: str | Path, seeds: int, *, threads: int = 0, engine: Engine | None = None,
           storage_options: dict | None = None) -> list[str]:
    """Add splits seed-N .. seed-{seeds-1} to a build (a directory or a URL) from its stored windows, one task
    per windows data file (phase 2 without the windows); return their names."""
    from mlmprep.config import check_range, make_config
    from mlmprep.format.load import build_tokenizer, read_manifest

    check_range("--seeds", seeds, low=1, high=MAX_SEEDS)
    check_range("--threads", threads, low=0)  # before the build is read: refused even with nothing to add
    engine = engine or LocalEngine()
    if storage.is_url(out):
        return remask_remote(out, seeds, threads=threads, engine=engine, options=storage_options or {})
    out = Path(out)
    with build_lock(out):
        manifest = read_manifest(out)
        have = len(manifest.seeds)
        if seeds <= have:
            return []
        cfg = make_config(BuildConfig, BuildConfig.used(manifest.config), source=str(manifest_path(out)))
        tok = build_tokenizer(out, manifest)
        # new seeds in the build's own format: an older build keeps its int32 columns
        version = manifest.format_version
        masker = Masker(cfg, special_ids(tok), word_tables(tok), manifest.fixed, manifest.window_length, version)
        files = windows_files(out, manifest)
        firsts = np.cumsum([0] + [file_rows(path) for path, _ in files])
        layout = Layout(cfg, str(out), engine.worker_threads(threads, len(files)), 0,
                        manifest.window_length, None, version)
        names = [f"seed-{k}" for k in range(have, seeds)]
        with contextlib.ExitStack() as stack:
            stages = {name: stack.enter_context(staging_dir(out / name)) for name in names}
            new = tuple((name, str(stages[name]), mask.row_seed(cfg.seed, k))
                        for k, name in zip(range(have, seeds), names))
            tasks = [RemaskTask(layout, str(path), record, i, int(firsts[i]), new)
                     for i, (path, record) in enumerate(files)]
            masked = run_tasks(remask_file, tasks, engine=engine)
            for result in masked:
                masker.merge(result["masking"])
            published = []
            grown = manifest.to_json()
            try:  # the new splits count once the manifest lists them: until then a failure takes them back
                for (name, stage, seed) in new:
                    grown["splits"][name] = finish_split(
                        Path(stage), masker.widths, masker.dtypes,
                        [(part_path(Path(stage), i), r["parts"][name]) for i, r in enumerate(masked)])
                    publish(Path(stage), out / name)
                    published.append(out / name)
                    grown["seeds"].append({"split": name, "seed": seed})
                grown["statistics"] = {**grown.get("statistics", {}),
                                       "masking": {**manifest.masking_stats, **masker.summary()}}
                grown["config"] = {**manifest.config, "seeds": seeds}
                write_json(manifest_path(out), Manifest.from_json(strict(grown), out).to_json())
            except BaseException:
                for path in published:
                    shutil.rmtree(path, ignore_errors=True)
                raise
    return names


def remask_remote(url: str, seeds: int, *, threads: int, engine: Engine, options: dict) -> list[str]:
    """remask on object storage: under the prefix's lock, the windows are fetched, the new splits masked
    locally and uploaded, then the manifest that lists them replaces the old one in one put (the commit)."""
    url = url.rstrip("/")
    storage.preflight(url, options, "remask")
    with remote_lock(url, options, log=say), fetched_build(url, options, splits=["windows"]) as local:
        names = remask(local, seeds, threads=threads, engine=engine)
        if names:  # what a failed remask left under the new names goes first
            leftovers = {n: size for n, size in remote_contents(url, options).items() if n.split("/")[0] in names}
            commit_remote(local, url, leftovers, options, names=names)
    return names


def windows_files(out: Path, manifest: dict) -> list[tuple[Path, dict | None]]:
    """The stored windows' data files in order, each with its manifest record, which its task checks the file's
    sha256 against: here every file of windows/ must be there at its recorded size, and state.json, which lists
    them, unchanged."""
    from mlmprep.format.load import check_split_files, file_problem

    records = check_split_files(out, manifest, "windows")
    state = out / "windows" / "state.json"
    if problem := file_problem(state, records.get(state.name)):
        raise damaged(out, state, problem)
    return [(path, records.get(path.name)) for path in data_files(out / "windows")]


def train_tokenizer_file(corpus: Iterable[str], out: str | Path, *, vocab_size: int, text_column: str = "text",
                         doc_sep: str = "line", train_chars: int = BuildConfig.tokenizer_train_chars,
                         tokenizer_type: str | None = None, force: bool = False,
                         storage_options: dict | None = None) -> tuple[str, int, dict]:
    """`mlmprep tokenizer train`: train on the sample of the corpus `build --tokenizer-train-chars` would take
    (cleaned as build cleans it) and save tokenizer.json, into `out` when that is a directory or ends with a
    slash; `out` and the corpus may be URLs. Returns the file written, the vocabulary reached and the documents
    and characters trained on."""
    options = storage_options or {}
    check_tokenizer_out(out, force, options)  # before the training, which takes minutes
    check_range("--tokenizer-train-chars", train_chars, low=1)
    cfg = BuildConfig(corpus=tuple(corpus), text_column=text_column, doc_sep=doc_sep, vocab_size=vocab_size,
                      tokenizer_train_chars=train_chars, tokenizer_type=tokenizer_type)
    with scratch_directory() as scratch:
        paths, copies = fetch_sources(cfg.corpus, Path(scratch, "corpus"), options)
        with named_as(copies):
            source = open_corpus(paths, text_column=text_column, doc_sep=doc_sep)
            used = {"documents": 0, "characters": 0}
            with Stages() as bar:
                tok = train_tokenizer(logged_sample(training_sample(source, cfg, used), bar,
                                                    min(train_chars, source.bytes or train_chars)), vocab_size,
                                      kind=cfg.trained_tokenizer_type(), bar=bar)
            if used["documents"] == 0:
                raise no_text_error(corpus_name(source), source.stats.as_dict(), text_column)
        if storage.is_url(str(out)):
            url = tokenizer_out(out)
            tok.save(str(Path(scratch, "tokenizer.json")))
            storage.put([(Path(scratch, "tokenizer.json"), url)], options)  # one put: the old file or the new
            return url, tok.get_vocab_size(), used
    path = Path(tokenizer_out(out))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tok.save(str(tmp))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return str(path), tok.get_vocab_size(), used


def tokenizer_out(out: str | Path) -> str:
    """The file `tokenizer train --out` names: OUT/tokenizer.json for a directory or a name ending in a slash."""
    out = str(out)
    if storage.is_url(out):
        return storage.join(out, "tokenizer.json") if out.endswith("/") else out
    return str(Path(out, "tokenizer.json")) if out.endswith(("/", os.sep)) or Path(out).is_dir() else out


def check_tokenizer_out(out: str | Path, force: bool, options: dict) -> None:
    """Refuse a `tokenizer train --out` that cannot be written, or exists without --force."""
    target = tokenizer_out(out)
    if storage.is_url(target):
        storage.preflight(target.rsplit("/", 1)[0], options, "--out")
        exists = storage.exists(target, options)
    else:
        check_output_path(Path(target))
        if Path(target).is_dir():
            raise ConfigError(f"--out {target}: is a directory; choose a file name or another --out")
        exists = Path(target).exists()
    if exists and not force:
        raise ConfigError(f"--out {target}: exists; pass --force to overwrite it or choose another --out")
