"""The output files' write tasks: planned as the shards they read finish (OutputFiles), the rest at the barrier
once every shard is read, and the splits finished from what the tasks wrote; Staging, the phase-1 files the
tasks read and when they are let go."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from mlmprep.builder.denoisers import Cursor, Mixture, seed_rows
from mlmprep.builder.engine.base import Engine, TaskRun, fetched
from mlmprep.builder.inputs import corpus_name
from mlmprep.builder.masker import Masker
from mlmprep.builder.pipeline import (
    SEGMENT_TASK_CHARS,
    Detached,
    SegmentTask,
    WriteTask,
    run_detached,
    segment_text,
    split_names,
    windows_width,
)
from mlmprep.builder.record import corpus_counts
from mlmprep.builder.selection import MOVED_PICKS, SIDES, Selection
from mlmprep.builder.side_rows import Plan
from mlmprep.builder.staged import STAGING, Layout, decontaminating, held_apart, picks_bytes
from mlmprep.builder.windows import WindowStats, doc_rows_per_document, segment_chars
from mlmprep.corpus.documents import Corpus
from mlmprep.corpus.jsonl import missing_field_error, no_text_error
from mlmprep.errors import CorpusError
from mlmprep.format.write import finish_split, part_path


class OutputFiles:
    """One side's write tasks (training or validation), one per output file, each made as soon as the staged
    files it reads are done and their documents' fates decided.

    A file of windows [first, first + count) of the side's stream needs every shard up to the token (--pack
    stream: one more, to tell whether its last window ends inside a word) or row where it ends; shards finish
    out of order, so only those whose predecessors are all done count. The last file waits for the whole corpus
    (`rest`), which fixes the number of rows; on the training side of a decontaminated build, the documents moved
    from validation follow the shards' (side_rows.piece). `written` notes a written file (`kept`: the first
    piece still read, `reading_from`: its shard); the driver lets a shard go once neither side reads it."""

    def __init__(self, layout: Layout, rows_per_file: int, shards: int, seeds: tuple[int, ...], validation_seed: int,
                 side: str):
        self.layout, self.rows_per_file, self.side = layout, rows_per_file, side
        self.seeds, self.validation_seed = seeds, validation_seed
        self.mixture = Mixture.of(layout.cfg.objective, layout.cfg.denoisers, layout.cfg.denoiser_weights,
                                  layout.cfg.input_length) if layout.cut else None
        self.cursors = [Cursor(self.mixture, seed) for seed in (seeds if side == SIDES[0] else (validation_seed,))
                        ] if layout.cut else []
        self.sizes: list[int | None] = [None] * shards
        self.shards = shards
        self.moved = side == SIDES[0] and decontaminating(layout.cfg)  # moved documents' pieces follow the shards'
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
            ready.append(self.add(plan, self.rows_per_file, None))
        return ready

    @property
    def reading_from(self) -> int:
        """The first shard whose token files a file still to write may read: with the validation candidates staged
        apart (held_apart), none of validation's and no moved document's; else, with moved documents to come, any
        until the files reach them."""
        if held_apart(self.layout.cfg):
            return self.shards if self.side == SIDES[1] else min(self.kept, self.shards)
        return max(0, self.kept - self.shards) if self.moved else self.kept

    def written(self, file: int) -> list[int]:
        """Note that `file` is written; the pieces that no file still to write reads, each given once. A file
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
            ready.append(self.add(plan, min(self.rows_per_file, plan.rows - first), plan.offsets[-1]))
        return ready

    def plan(self, offsets: list[int]) -> Plan:
        """Where each staged file starts, as far as known, and the whole windows that holds."""
        length = self.layout.content_length
        rows = (-(-offsets[-1] // length) if self.layout.cut else offsets[-1] // length) if self.layout.fixed else (
            offsets[-1])  # ul2, prefix: the stream's tail is a last, shorter window
        return Plan(self.layout, self.side, tuple(offsets), rows, self.seeds, self.validation_seed, self.shards)

    def needs(self, files: int) -> int:
        """How far the known offsets must reach (in tokens or rows) before the first `files` files are whole."""
        rows = files * self.rows_per_file
        if self.layout.cut:  # a seed's last row that starts in the file may reach this far beyond it
            return rows * self.layout.content_length + self.mixture.longest + 1
        return rows * self.layout.content_length + 1 if self.layout.fixed else rows

    def add(self, plan: Plan, count: int, total: int | None) -> WriteTask:
        """The write task of the next file, of `count` windows; ul2 and prefix: with each seed's rows that start in
        them (`total`: the side's stream length, once known)."""
        first = len(self.tasks) * self.rows_per_file
        length = self.layout.content_length
        cuts = tuple(seed_rows(cursor, first * length, (first + count) * length, total) for cursor in self.cursors)
        self.tasks.append(WriteTask(plan, len(self.tasks), first, count, cuts))
        self.rows += count
        return self.tasks[-1]


def side_pieces(layout: Layout, read: list[dict], selection: Selection, side: str) -> list[tuple[int, int]]:
    """side_size of each staged piece of `side` (side_rows.piece): every shard's documents on it, then on the
    training side of a decontaminated build every shard's moved documents."""
    picks = [side] * len(read) + ([MOVED_PICKS] * len(read) if side == SIDES[0] and selection.validation_waits else [])
    return [side_size(layout, read[p % len(read)], selection.picked(p % len(read), name)) for p, name in
            enumerate(picks)]


def side_size(layout: Layout, result: dict, picked: np.ndarray) -> tuple[int, int]:
    """(size in phase 2's units, tokens dropped in --pack doc tails) of a shard's documents `picked` (one side's):
    stream tokens (each document and its EOS) with --pack stream, rows with --pack doc, characters of joined
    text (each document and its space) with --method text."""
    if layout.cfg.method == "text":
        return int(result["doc_chars"][picked].sum(dtype=np.int64)) + len(picked), 0
    lengths = result["doc_tokens"][picked]  # int32 where they fit (selection.narrowed): sums taken as int64
    if layout.cfg.pack == "stream":
        return int(lengths.sum(dtype=np.int64)) + len(lengths), 0
    rows, dropped = doc_rows_per_document(lengths, layout.content_length, layout.doc_eos is not None)
    return int(rows.sum(dtype=np.int64)), dropped


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
                [0] + [size for size, _ in side_pieces(layout, read, selection, side)]))
            segments = math.ceil((char_offsets[-1] - 1) / chars) if char_offsets[-1] else 0
            tasks += [SegmentTask(layout, side, t, first, min(per, segments - first), char_offsets, chars, len(read))
                      for t, first in enumerate(range(0, segments, per))]
        bar.stage("cut, tokenize text segments", len(tasks), "task")
        counted = counted_tasks(segment_text, tasks, staging, bar)
        for counts in counted:
            add_counts(stats, counts)
        return {side: [c["rows"] for c, t in zip(counted, tasks) if t.side == side] for side in SIDES}
    for side in SIDES:
        sized = side_pieces(layout, read, selection, side)
        sizes[side] = [size for size, _ in sized]
        if cfg.pack == "stream" and not layout.cut:  # ul2, prefix: the tail is a row of its own
            stats.tokens_dropped += sum(sizes[side]) % layout.content_length
        else:
            stats.tokens_dropped += sum(dropped for _, dropped in sized)
    return sizes


def counted_tasks(fn: Callable, tasks: list, staging: Staging, bar) -> list:
    """fn(task) for every task, the progress bar counting each as it ends; the results in task order."""
    with TaskRun(*staging.calls(fn, tasks), engine=staging.engine) as run:
        for index, _ in run:
            staging.take(run, index)
            bar.update(1)
    return run.results


def add_counts(stats: WindowStats, counts: dict[str, int]) -> None:
    for key, value in counts.items():
        setattr(stats, key, getattr(stats, key) + value)


def finish_splits(stage: Path, layout: Layout, ids, written: dict[str, list[dict]], seeds: int,
                  stats: WindowStats) -> tuple[dict, Masker]:
    """Every split's files named in order and its metadata written, from each side's write results in file
    order; their totals summed into `stats` and a Masker (which masks nothing here). Returns the splits'
    manifest entries and that Masker."""
    masker = Masker(layout.cfg, ids, None, layout.fixed, layout.window_length, layout.format_version, layout.modes)
    for result in itertools.chain(*written.values()):
        add_counts(stats, result["windows"])
        masker.merge(result["masking"])
    token_width, token_dtype = ({"tokens": windows_width(layout)},
                                {"tokens": masker.dtypes["tokens"]})
    splits = {}
    for side in SIDES:
        windows, masked = split_names(side, seeds)
        for name in (windows, *masked):
            splits[name] = finish_split(stage / name, *((token_width, token_dtype) if name == windows
                                                        else (masker.widths, masker.dtypes)),
                                        [(part_path(stage / name, i), result["parts"][name])
                                         for i, result in enumerate(written[side])])
    return splits, masker


class Staging:
    """How the tasks reach the staging directory: directly (one machine, or a disk every Ray node sees), or, when
    `detached` (Ray nodes that share no disk with the driver), through Ray's object store: each task runs as a
    pipeline.Detached, the files it stages stay in the object store as its payload's parts until no task still to
    come reads them (a partition task is given its own partition's slices alone), and the output files it writes
    come back into the driver's stage."""

    def __init__(self, stage: Path, engine: Engine, detached: bool, apart: bool = False):
        self.stage, self.engine, self.detached = stage, engine, detached
        # a shard let go takes its token files and picks with it, but its validation candidates' files (held_apart)
        self.held: dict[str, object] = {}  # staged name -> the payload part holding it, or a tuple, one per partition
        self.suffixes = ("ids", "lens", SIDES[0]) if apart else ("ids", "lens", *SIDES)
        self.released = 0  # shards before this one are let go
        if detached:
            self.held["tokenizer.json"] = engine.put((stage / "tokenizer.json").read_bytes())

    def calls(self, fn: Callable, tasks: Iterable, slices: tuple[tuple[str, int], ...] = (),
              partitioned: bool = False) -> tuple[Callable, list]:
        """(function, tasks) that run fn(task) for each task where the engine runs them. Detached, the task ships the
        staged files `slices` names apart (pipeline.reading_slices), and a partition task (`partitioned`: it has
        a `partition`) is given its own slice of those shipped one per partition."""
        if not self.detached:
            return fn, list(tasks)
        return run_detached, [Detached(fn, task, self.inputs(task.partition if partitioned else None), slices)
                              for task in tasks]

    def inputs(self, partition: int | None) -> dict[str, object]:
        """The payloads the staged files are in, by name: those held whole, and of those held one per partition,
        the slice of `partition` (None: none)."""
        return {name: held[partition] if isinstance(held, tuple) else held for name, held in self.held.items()
                if partition is not None or not isinstance(held, tuple)}

    def take(self, run: TaskRun, index: int) -> None:
        """Keep what the finished task `index` staged (a file in one part, whole, or in one part per partition, a
        slice in each); write the output files it made, and the staged files only the driver reads (sent with its
        result), into the stage."""
        if index not in run.payloads:
            return
        shipped, parts = run.payloads.pop(index), {}
        for names, payload in zip(shipped.names, shipped.payload):
            for name in names:
                parts.setdefault(name, []).append(payload)
        outputs = [name for name in parts if not name.startswith(f"{STAGING}/")]
        self.held.update((name, held[0] if len(held) == 1 else tuple(held)) for name, held in parts.items()
                         if name not in outputs)
        data = fetched(shipped.payload[0]) if outputs else {}
        for name in outputs:
            (self.stage / name).parent.mkdir(parents=True, exist_ok=True)
            (self.stage / name).write_bytes(data[name])
        for name, content in shipped.files.items():
            (self.stage / name).write_bytes(content)

    def stage_picks(self, shard: int, selection: Selection, sides: Iterable[str] = SIDES) -> None:
        """Stage `shard`'s document numbers on `sides` (`shard-N.train`, `shard-N.validation` with the documents moved
        from validation to training: staged.picks_bytes), which phase 2 reads; detached, they travel as a payload of
        their own."""
        for side in sides:
            moved = selection.staged_picks(shard, MOVED_PICKS) if side == SIDES[1] else None
            self.stage_file(f"shard-{shard:06d}.{side}", picks_bytes(selection.staged_picks(shard, side), moved))

    def stage_file(self, name: str, data: bytes) -> None:
        """Stage a file the driver makes (a name in the staging subfolder) for tasks to read; detached, it travels as
        a payload of its own."""
        if self.detached:
            self.held[f"{STAGING}/{name}"] = self.engine.put({f"{STAGING}/{name}": data})
        else:
            (self.stage / STAGING / name).write_bytes(data)

    def let_go(self, shards: Iterable[int]) -> None:
        """Drop the staged token files of `shards`, which no output file still to write reads."""
        for shard in shards:
            self.drop([f"shard-{shard:06d}.{suffix}" for suffix in self.suffixes])
            self.released = max(self.released, shard + 1)

    def drop(self, names: Iterable[str]) -> None:
        """Delete these staged files (names in the staging subfolder), which no task still to come reads."""
        for name in names:
            (self.stage / STAGING / name).unlink(missing_ok=True)
            self.held.pop(f"{STAGING}/{name}", None)
