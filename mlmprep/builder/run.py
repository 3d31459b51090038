"""`build`: corpus -> clean -> tokenize -> windows -> mask (N seeds) -> write, into a staging directory that
its Destination (destination.py) commits at the end. The same inputs, options and seed give byte-identical output.

The work runs as the tasks of mlmprep.builder.pipeline on mlmprep.builder.engine (local processes or Ray); this
module is the driver: it opens the inputs, trains or stages the tokenizer, runs the tasks (BuildTasks: an output
file's as soon as the shards it reads are done), and hands the sums to outputs.py and record.py, which finish the
splits and write the manifest last.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmprep import storage
from mlmprep.builder import contamination, dropped, mask
from mlmprep.builder.dedup_partitions import (
    PartitionTask,
    SignatureTask,
    joined_links,
    partition_links,
    partition_members,
    scratch_names,
    signature_slices,
)
from mlmprep.builder.denoisers import add_mode_tokens, mode_tokens
from mlmprep.builder.destination import build_destination
from mlmprep.builder.engine import make_engine
from mlmprep.builder.engine.base import Engine, TaskRun, run_tasks
from mlmprep.builder.filters import badwords_file
from mlmprep.builder.inputs import fetch_sources, fetch_tokenizer, named_as
from mlmprep.builder.lengths import Lengths
from mlmprep.builder.outputs import OutputFiles, Staging, counted_tasks, finish_splits, plan_rest, side_size
from mlmprep.builder.overlap import EXCLUDE_MARGIN, NGRAM, SeenLines
from mlmprep.builder.pipeline import (
    EXCLUDED,
    NORMALISED,
    VALIDATION_SLOT,
    ExcludeTask,
    HashTask,
    ScanTask,
    TokenizeTask,
    WriteTask,
    cleaned_batches,
    evaluation_sets,
    exclusion_hashes,
    hash_shard,
    reading_slices,
    scan_shard,
    tokenize_shard,
    tokenize_shard_in_driver,
    write_file,
)
from mlmprep.builder.record import corpus_counts, dedup_stats, finish_manifest, wrapped_prose
from mlmprep.builder.selection import DROPPED, SIDES, Selection
from mlmprep.builder.staged import STAGING, Layout, adopt_tokenizer, decontaminating, held_apart
from mlmprep.builder.tokenizer_file import train_for_build
from mlmprep.builder.windows import WindowStats
from mlmprep.config import BuildConfig
from mlmprep.corpus.documents import Corpus, open_corpus
from mlmprep.corpus.streams import let_go_streams
from mlmprep.format.manifest import Manifest
from mlmprep.format.rows import starts_of
from mlmprep.format.scratch import scratch_directory
from mlmprep.format.write import format_version, strict, write_hf_tokenizer
from mlmprep.progress import Stages
from mlmprep.tokenizer.encode import word_tables
from mlmprep.tokenizer.load import SpecialIds, load_tokenizer, special_ids, tokenizer_sha256

__all__ = ["BuildResult", "build", "cleaned_documents"]

STREAMS_PER_WORKER = 2  # parts of one compressed file per worker: a second round evens out the later parts' skips


@dataclass(frozen=True)
class BuildResult:
    out: Path | str
    manifest: Manifest
    up_to_date: bool


def build(cfg: BuildConfig, *, log: Callable[[str], None] = print) -> BuildResult:
    """Build `cfg.out` (a directory, or a prefix on object storage), or report it up to date when it already
    holds this build of this corpus."""
    options = storage.parse_options(cfg.storage_options)
    storage.use_corpus_options(options)  # for what the driver reads in place: corpus and --c4-badwords objects
    # the content of the files options name (with --exclude's, below) identifies the build as its options do
    option_files = {"c4_badwords": [badwords_file(cfg.c4_badwords)]} if cfg.c4_badwords else {}
    destination = build_destination(cfg.out, options)  # before reading the corpus or training a tokenizer
    lengths = Lengths.of_options(cfg)
    destination.check_outside(cfg.corpus)
    with contextlib.ExitStack() as stack:
        scratch = stack.enter_context(scratch_directory())  # remote inputs and stage
        stack.callback(let_go_streams)  # the compressed streams the tasks run here kept open
        engine = make_engine(cfg.engine, cfg.workers, cfg.ray_address)
        corpus, tokenizer, evaluation = open_inputs(cfg, engine, scratch, options, stack)
        option_files |= {"exclude": evaluation} if evaluation else {}
        set_tokenizer_threads(cfg.threads, engine)
        # The workers' server starts now, to overlap what follows, unless a build there may be up to date: one
        # started for nothing costs a core-second and keeps this process's stdout open that long after it exits.
        if cfg.force or not destination.has_build():
            engine.prestart(corpus.bytes, cfg.shard_bytes, tokenize_shard.__module__, tokenizer)
        given_tokenizer = load_tokenizer(tokenizer) if tokenizer else None
        if given_tokenizer is not None and (added := add_mode_tokens(given_tokenizer, mode_tokens(
                cfg.objective, cfg.denoisers))):
            log(f"note: added {', '.join(added)} to the tokenizer as special tokens (ids from "
                f"{given_tokenizer.get_vocab_size() - len(added)}): the mode tokens of --objective ul2")
        log(f"corpus: {corpus.description}")
        with destination.lock(force=cfg.force):
            tokenizer_sha = tokenizer_sha256(given_tokenizer) if given_tokenizer else None
            existing = destination.existing(strict(cfg.identity()), corpus.fingerprint, tokenizer_sha=tokenizer_sha,
                                            option_files=option_files, force=cfg.force)
            if existing is not None:
                return BuildResult(destination.out, existing, up_to_date=True)
            engine.prestart(corpus.bytes, cfg.shard_bytes, tokenize_shard.__module__, tokenizer)  # no-op if started
            # one Ray connection (or local instance, or local pool) for all the build's phases
            with destination.staging(scratch) as stage, engine.session():
                manifest = write_build(cfg, corpus, given_tokenizer, stage, log, engine, lengths,
                                       stages_apart=destination.stages_apart, option_files=option_files)
                destination.commit(stage)
    return BuildResult(destination.out, manifest, up_to_date=False)


def open_inputs(cfg: BuildConfig, engine: Engine, scratch: str, options: dict,
                stack: contextlib.ExitStack) -> tuple[Corpus, str | None, list[dict]]:
    """The corpus, opened (its errors, for as long as `stack` holds, naming the URLs given), --tokenizer as a
    local path, and the --exclude evaluation sets' files ({path, bytes, sha256} each)."""
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
    evaluation = []
    if cfg.exclude:  # the evaluation sets are there before any work (a worker reads them), hashed as the corpus is
        with evaluation_sets(cfg) as sets:
            evaluation = sets.files
    return corpus, fetch_tokenizer(cfg.tokenizer, Path(scratch, "tokenizer"), options), evaluation


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


def write_build(cfg: BuildConfig, corpus: Corpus, tok, stage: Path, log: Callable[[str], None], engine: Engine,
                lengths: Lengths, *, stages_apart: bool, option_files: dict) -> Manifest:
    """Write every split and the manifest into `stage`; return the manifest. `stages_apart`: the stage is on
    this machine's scratch disk, which Ray nodes do not see; `option_files`: the files options name, by option,
    recorded in corpus.stats."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    trained_on = None
    if tok is None:
        tok, trained_on = train_for_build(corpus, cfg, log)
        timings["train_tokenizer_s"] = time.perf_counter() - started
    ids, lengths = stage_tokenizer(cfg, tok, stage, lengths)
    pipeline_started = time.perf_counter()
    tasks = BuildTasks(cfg, corpus, stage, engine, ids, lengths, stages_apart)
    log(f"{len(tasks.shards)} input shard{'s' * (len(tasks.shards) != 1)} on {engine.describe()}")
    with Stages() as bar:
        results = tasks.run(bar)
        timings["tokenize_s"] = tasks.reading.finished - pipeline_started
        timings["mask_and_write_s"] = time.perf_counter() - tasks.reading.finished
    splits, masker = finish_splits(stage, tasks.layout, ids, tasks.by_file(results), cfg.seeds, tasks.stats)
    if cfg.keep_dropped:
        splits[dropped.SPLIT] = dropped.write_split(
            stage, [np.flatnonzero(fates == DROPPED) for fates in tasks.selection.fates],
            [result["documents_read"] for result in tasks.reading.results], cfg.dedup)
    shutil.rmtree(stage / STAGING)
    timings["pipeline_s"] = time.perf_counter() - pipeline_started
    timings["total_s"] = time.perf_counter() - started
    corpus_stats = tasks.corpus_stats() | ({"option_files": option_files} if option_files else {})
    return finish_manifest(cfg, corpus, tok, ids, stage, splits, tasks.files["train"].seeds, tasks.stats, masker,
                           corpus_stats, timings, lengths=lengths, version=tasks.layout.format_version,
                           trained_on=trained_on)


def stage_tokenizer(cfg: BuildConfig, tok, stage: Path, lengths: Lengths) -> tuple[SpecialIds, Lengths]:
    """Write the tokenizer into `stage` (tokenizer.json and the transformers files) and check it does what the
    options ask, before any reading; its special ids and `lengths` with its frame."""
    write_hf_tokenizer(tok, stage, model_max_length=cfg.input_length)
    ids = special_ids(tok)
    lengths = lengths.with_tokenizer(cfg, tok, ids)
    if cfg.objective == "mlm" and cfg.whole_word:  # the tokenizer must mark word starts
        is_special = np.isin(np.arange(ids.vocab_size), ids.all())
        mask.check_word_starts(word_tables(tok).starts_word, is_special)
    if tok.padding is None and tok.truncation is None:  # else plain_encoder would change what the manifest hashes
        adopt_tokenizer(stage / "tokenizer.json", tok)  # for the tasks this process runs
    return ids, lengths


class BuildTasks:
    """The build's tasks as they run: every shard read, cleaned and tokenized (phase 1), and each output file's
    write task (phase 2) queued as soon as the shards it reads are done and their documents' fates decided."""

    def __init__(self, cfg: BuildConfig, corpus: Corpus, stage: Path, engine: Engine, ids, lengths: Lengths,
                 stages_apart: bool):
        self.cfg, self.corpus, self.engine = cfg, corpus, engine
        streams = STREAMS_PER_WORKER * engine.parallelism() if engine.parallelism() > 1 else 1  # one process: no skips
        self.shards = corpus.shards(engine.shard_bytes(corpus.bytes, cfg.shard_bytes), streams)
        self.layout = Layout(cfg, str(stage), engine.worker_threads(cfg.threads, len(self.shards)),
                             content_length=lengths.content, window_length=lengths.window, doc_eos=lengths.doc_eos,
                             format_version=format_version(ids.vocab_size), prefix=lengths.prefix,
                             suffix=lengths.suffix, modes=lengths.modes,
                             partitions=contamination.partitions(cfg, corpus.bytes))
        (stage / STAGING).mkdir()
        # tasks on Ray nodes that share no disk with this process (which stages a build to object storage) are detached
        self.staging = Staging(stage, engine, detached=not engine.shares_disk and stages_apart,
                               apart=held_apart(cfg))
        self.stats = WindowStats(method=cfg.method, row_length=lengths.content, unk_id=ids.unk)
        self.files = {side: OutputFiles(self.layout, lengths.rows_per_file, len(self.shards),
                                        tuple(mask.row_seed(cfg.seed, k) for k in range(cfg.seeds)),
                                        mask.row_seed(cfg.seed, VALIDATION_SLOT), side) for side in SIDES}
        self.selection = Selection(cfg, len(self.shards), self.dedup_partitions, self.contamination_matches)
        self.paragraphs = {"threshold": cfg.paragraph_threshold, "lines": 0}  # --dedup-paragraphs: lines with words
        self.removed: list[np.ndarray | None] = [None] * len(self.shards)  # ... and each shard's lines it removes
        self.exclusion: dict | None = None  # --exclude: the evaluation sets' n-grams and documents
        self.reads: list[TokenizeTask] = []
        self.calls: list[tuple[str, int]] = []  # (side, file) of each write task, in the order they were queued
        self.writes: dict[int, int] = {}  # the run's index of a write task -> its place in calls
        self.reading = Reading([None] * len(self.shards))
        # progress in stages, each of a total known when it starts: the input's bytes (shards for the sample, whose
        # size is not known up front), then the text segments (--method text), then the output files
        self.sizes = [shard.nbytes for shard in self.shards] if corpus.bytes else [1] * len(self.shards)

    def run(self, bar: Stages) -> list[dict]:
        """Run every task; the write tasks' results in the order they were queued (see by_file)."""
        if self.cfg.dedup_paragraphs:
            self.removed = self.repeated_lines(bar)
        if self.cfg.exclude:  # the evaluation sets' n-grams, hashed on a worker
            self.exclusion = run_tasks(exclusion_hashes, [ExcludeTask(self.layout)], engine=self.engine)[0]
        bar.stage("read, clean, tokenize", sum(self.sizes), "B" if self.corpus.bytes else "shard")
        evaluation = self.exclusion["ngrams"] if self.exclusion else None
        self.reads = reads = [TokenizeTask(self.layout, shard, lines, excluded=evaluation)
                              for shard, lines in zip(self.shards, self.removed)]
        hashing: dict[int, tuple[int, dict]] = {}  # a hash_shard call -> (its shard, the shard's unhashed result)
        slices = reading_slices(self.layout)
        with TaskRun(*self.staging.calls(tokenize_shard, reads, slices), engine=self.engine,
                     in_driver=None if self.staging.detached else tokenize_shard_in_driver) as run:
            for index, result in run:  # as each task ends
                self.staging.take(run, index)
                if index in self.writes:
                    self.file_written(self.writes[index], bar)
                elif index in hashing:
                    shard, unhashed = hashing.pop(index)
                    self.staging.drop([f"shard-{shard:06d}.{NORMALISED}"])
                    self.queue(run, self.shard_read(shard, unhashed | result, bar))
                elif decontaminating(self.cfg) and "candidates" not in result:  # the driver's: hashed on a worker
                    hashing[len(run.calls)] = index, result
                    run.add(*self.staging.calls(hash_shard, [HashTask(self.layout, index, result["keys"])], slices))
                else:
                    self.queue(run, self.shard_read(index, result, bar))
        if self.cfg.method == "text":  # no file is ready before its side's whole text is
            return counted_tasks(write_file, self.rest(bar), self.staging, bar)
        return [run.results[index] for index in sorted(self.writes)]  # one per output file, in the order queued

    def queue(self, run: TaskRun, tasks: list[WriteTask]) -> None:
        """Add write tasks to the run, each call's index noted."""
        self.writes |= {len(run.calls) + k: len(self.calls) - len(tasks) + k for k in range(len(tasks))}
        run.add(*self.staging.calls(write_file, tasks))

    def repeated_lines(self, bar: Stages) -> list[np.ndarray]:
        """--dedup-paragraphs: every shard's lines hashed on the workers, then taken in corpus order by the driver
        (overlap.SeenLines); for each shard, its lines to remove."""
        bar.stage("find repeated lines", sum(self.sizes), "B" if self.corpus.bytes else "shard")
        seen, scanned, removed = SeenLines(self.cfg.paragraph_threshold), {}, []
        with TaskRun(scan_shard, [ScanTask(self.layout, shard) for shard in self.shards], engine=self.engine) as run:
            for index, result in run:
                bar.update(self.sizes[index], f"{len(scanned) + len(removed) + 1}/{len(self.shards)} shards")
                scanned[index] = result
                while len(removed) in scanned:
                    lines = scanned.pop(len(removed))
                    removed.append(seen.decide(lines["hashes"], lines["counts"]))
                    self.paragraphs["lines"] += int(np.count_nonzero(lines["counts"]))
        return removed

    def dedup_partitions(self, documents: list[int]) -> np.ndarray:
        """--dedup-partitions, every shard read (`documents` in each): the partition tasks' links, joined as they
        come in; then the files they read are deleted."""
        bases = tuple(starts_of(documents).tolist())
        tasks = [PartitionTask(self.layout, p, bases) for p in range(self.cfg.dedup_partitions)]
        if self.staging.detached and self.cfg.dedup == "near":
            self.cut_signatures(tasks)

        def taken(run: TaskRun) -> Iterator[np.ndarray]:
            for index, links in run:
                run.results[index] = None  # held once, in the join
                yield links

        with TaskRun(*self.staging.calls(partition_links, tasks, partitioned=True), engine=self.engine) as run:
            links = joined_links(taken(run), firsts=self.cfg.dedup == "exact")
        self.staging.drop(scratch_names(len(self.shards)))
        return links

    def cut_signatures(self, tasks: list[PartitionTask]) -> None:
        """Detached near dedup: each partition task's members (partition_members) found first, then each shard's
        signatures cut on a worker into the rows of each partition's members (signature_slices), which the
        partition tasks are given in place of the shards' whole signatures."""
        bases = np.asarray(tasks[0].bases)
        rows: list[list] = [[None] * len(tasks) for _ in range(len(bases) - 1)]  # [shard][partition]
        with TaskRun(*self.staging.calls(partition_members, tasks, partitioned=True), engine=self.engine) as run:
            for p, members in run:
                cuts = np.searchsorted(members, bases)
                for s in range(len(bases) - 1):
                    rows[s][p] = (members[cuts[s]:cuts[s + 1]] - bases[s]).astype(np.uint32)  # LOCAL_BITS
                run.results[p] = None
        cutting = [SignatureTask(self.layout, s, int(bases[s + 1] - bases[s]),
                                 self.staging.held[f"{STAGING}/shard-{s:06d}.sig"], tuple(rows[s]))
                   for s in range(len(bases) - 1)]
        with TaskRun(signature_slices, cutting, engine=self.engine) as run:
            for index, _ in run:
                self.staging.take(run, index)

    def contamination_matches(self, fates: list[np.ndarray]) -> Iterator[dict]:
        """--decontaminate, every fate known (`fates`, per shard): the partition tasks' answers as they finish (see
        mlmprep.builder.contamination), every fate staged for them first; then the files they read are
        deleted."""
        self.staging.stage_file(contamination.FATES, b"".join(shard.astype(np.uint8).tobytes() for shard in fates))
        bases = tuple(starts_of([len(f) for f in fates]).tolist())
        tasks = [contamination.MatchTask(self.layout, p, bases) for p in range(self.layout.partitions)]
        with TaskRun(*self.staging.calls(contamination.range_matches, tasks, partitioned=True),
                     engine=self.engine) as run:
            for index, answer in run:
                run.results[index] = None  # held once, in the sums
                yield answer
        self.staging.drop(contamination.scratch_names(len(self.shards)))

    def shard_read(self, index: int, result: dict, bar: Stages) -> list[WriteTask]:
        """Note shard `index` read; the write tasks that made ready (the last shard: every file left)."""
        self.reading.add(index, result)
        done = sum(len(f.done) for f in self.files.values())
        written_yet = f", {done} output files written" if done else ""
        bar.update(self.sizes[index], f"{self.reading.count}/{len(self.shards)} shards{written_yet}",
                   self.reading.tokens)
        ready, waits = [], self.selection.validation_waits
        sides = SIDES[:1] if waits else SIDES  # with --decontaminate, the validation side waits for the last shard
        for s in self.selection.add(index, result):  # the shards whose documents' fates are known now
            self.staging.stage_picks(s, self.selection, sides)
            if self.cfg.method == "tokens":  # text: no file is ready before its side's whole text is
                ready += [task for side in sides for task in self.files[side].shard_done(
                    s, side_size(self.layout, self.reading.results[s], self.selection.picked(s, side))[0])]
        if waits and self.reading.done:  # the moves are made: each shard's validation and moved documents
            for s in range(len(self.shards)):
                self.staging.stage_picks(s, self.selection, SIDES[1:])
        if self.reading.done and self.cfg.method == "tokens":  # the last shard makes every file left ready
            return self.queued(ready) + self.rest(bar)
        return self.queued(ready)

    def rest(self, bar: Stages) -> list[WriteTask]:
        """Once every shard is read: the write tasks of the files not made yet (outputs.plan_rest), queued."""
        return self.queued(plan_rest(self.corpus, self.layout, self.files, self.reading.results, self.selection,
                                     self.stats, self.staging, bar))

    def queued(self, tasks: list[WriteTask]) -> list[WriteTask]:
        self.calls += [(task.plan.side, task.index) for task in tasks]
        return tasks

    def file_written(self, call: int, bar: Stages) -> None:
        """Note the output file of write task `call` written; let go the shards no file still needs."""
        side, file = self.calls[call]
        self.files[side].written(file)
        self.staging.let_go(range(self.staging.released, min(f.reading_from for f in self.files.values())))
        if self.reading.done:  # the write stage, which begins once every shard is read
            bar.update(1)

    def by_file(self, results: list[dict]) -> dict[str, list[dict]]:
        """Each side's write results by file, from `results` in the order queued."""
        written = {side: [None] * len(self.files[side].tasks) for side in SIDES}
        for (side, file), result in zip(self.calls, results):
            written[side][file] = result
        return written

    def corpus_stats(self) -> dict:
        """corpus.stats of the manifest: the shards' counts, hard-wrapped prose, what dedup removed."""
        read = self.reading.results
        stats = {**corpus_counts(self.corpus, read), "wrapped_prose": wrapped_prose(self.shards, read),
                 "dedup": dedup_stats(self.selection, self.reads)}
        if self.cfg.dedup_paragraphs:
            stats["paragraphs"] = self.paragraphs | {key: sum(r["lines"][key] for r in read) for key in
                                                     ("lines_removed", "characters_removed", "documents_emptied")}
            # the first line removed in corpus order: the first shard's that has one, whatever the shards
            stats["paragraphs"]["example"] = next((r["lines"]["example"] for r in read if r["lines"]["example"]), "")
        if self.selection.contamination is not None:
            stats["contamination"] = self.selection.contamination
        if self.exclusion is not None:
            x = self.exclusion
            stats["exclusion"] = {"files": list(self.cfg.exclude), "documents": x["documents"],
                                  "documents_short": x["documents_short"], "documents_ignored": x["documents_ignored"],
                                  "min_words": self.cfg.exclude_min_words, "ngrams": len(x["ngrams"].table),
                                  "ngram": NGRAM, "margin": EXCLUDE_MARGIN,
                                  **{key: sum(r["excluded"][key] for r in read) for key in EXCLUDED},
                                  "example": next((r["excluded"]["example"] for r in read if r["excluded"]["example"]),
                                                  "")}
        return stats


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
