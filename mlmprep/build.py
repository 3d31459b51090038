"""`build`: corpus -> clean -> tokenize -> windows -> mask (N seeds) -> write, into a staging directory
that is renamed into place at the end. The same inputs, options and seed give byte-identical output."""

from __future__ import annotations

import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import mlmprep
from mlmprep import mask
from mlmprep.clean import clean_texts
from mlmprep.config import BuildConfig
from mlmprep.corpus import Corpus, open_corpus
from mlmprep.errors import ConfigError, CorpusError, TokenizerError
from mlmprep.progress import prefetch, prefetch_map, progress
from mlmprep.readers import no_text_error
from mlmprep.tokenize import (
    encode,
    frame_ids,
    load_tokenizer,
    special_ids,
    tokenizer_sha256,
    train_tokenizer,
    word_tables,
)
from mlmprep.windows import (
    MIN_ROW,
    Rows,
    WindowStats,
    frame_rows,
    segment_chars,
    segment_rows,
    text_segments,
    token_windows,
)
from mlmprep.write import (
    FORMAT_VERSION,
    SplitWriter,
    build_lock,
    iter_rows,
    manifest_path,
    publish,
    read_existing,
    staging_dir,
    write_hf_tokenizer,
    write_json,
)

VALIDATION_SLOT = 1 << 20  # the validation split is masked once, with the seed of this (never trained) slot
HOLDOUT_SALT = 0x5EED_0F_0A1D  # keys the held-out choice apart from the mask seeds
MASK_TOKENS = 1 << 20  # at most this many tokens (or one longer row) are masked and written at a time


@dataclass(frozen=True)
class BuildResult:
    out: Path
    manifest: dict
    up_to_date: bool


def build(cfg: BuildConfig, *, log: Callable[[str], None] = print) -> BuildResult:
    """Build `cfg.out`, or report it up to date when it already holds this build of this corpus."""
    set_tokenizer_threads(cfg.threads)
    out = Path(cfg.out)
    corpus = open_corpus(
        cfg.corpus,
        dataset=cfg.dataset,
        dataset_split=cfg.dataset_split,
        text_column=cfg.text_column,
        doc_sep=cfg.doc_sep,
        on_decode_error=cfg.on_decode_error,
    )
    given_tokenizer = load_tokenizer(cfg.tokenizer) if cfg.tokenizer else None
    log(f"corpus: {corpus.description}")
    with build_lock(out):
        tokenizer_sha = tokenizer_sha256(given_tokenizer) if given_tokenizer else None
        existing = read_existing(out, cfg.identity(), corpus.fingerprint, tokenizer_sha=tokenizer_sha, force=cfg.force)
        if existing is not None:
            return BuildResult(out, existing, up_to_date=True)
        with staging_dir(out) as stage:
            manifest = write_build(cfg, corpus, given_tokenizer, stage, log)
            publish(stage, out)
    return BuildResult(out, manifest, up_to_date=False)


def set_tokenizer_threads(threads: int) -> None:
    """Tokenize on `threads` cores (0: all); the output does not depend on it. The tokenizer's thread pool
    starts on first use, so in one Python process the first call decides it."""
    if threads:
        os.environ["RAYON_NUM_THREADS"] = str(threads)


def cleaned_batches(corpus: Corpus, cfg: BuildConfig, counts: dict) -> Iterator[list[str]]:
    """The corpus's documents, cleaned, in lists of about cfg.chunk_chars characters (see `batched`);
    characters removed and documents left blank are counted in `counts`."""
    for batch in batched(corpus.documents(), cfg.chunk_chars):
        texts, removed = clean_texts(batch, normalize_whitespace=cfg.normalize_whitespace, nfkc=cfg.nfkc)
        counts["characters_removed"] += removed
        kept = [text for text in texts if text and not text.isspace()]
        counts["documents_emptied"] += len(texts) - len(kept)
        if kept:
            yield kept


def cleaned_documents(corpus: Corpus, cfg: BuildConfig, counts: dict) -> Iterator[str]:
    """The corpus's documents, cleaned, one by one."""
    return itertools.chain.from_iterable(cleaned_batches(corpus, cfg, counts))


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


def write_build(cfg: BuildConfig, corpus: Corpus, tok, stage: Path, log: Callable[[str], None]) -> dict:
    """Write every split and the manifest into `stage`; return the manifest."""
    timings: dict[str, float] = {}
    clean_counts = {"characters_removed": 0, "documents_emptied": 0}
    started = time.perf_counter()
    if tok is None:
        log(f"training a Unigram tokenizer (vocab {cfg.vocab_size}) on the corpus ...")
        docs = cleaned_documents(corpus, cfg, dict(clean_counts))
        tok = train_tokenizer(docs, cfg.vocab_size, show_progress=sys.stderr.isatty())
        timings["train_tokenizer_s"] = time.perf_counter() - started
    write_hf_tokenizer(tok, stage, model_max_length=cfg.input_length)  # tokenizer.json + the transformers files
    tok.encode_special_tokens = True  # as encode() sets it, but now: the tokenizing threads must not write it
    ids = special_ids(tok)
    window_length, target_length = row_lengths(cfg, ids)
    prefix, suffix = mlm_frame(cfg, tok, window_length)
    content_length = window_length - len(prefix) - len(suffix)

    pipeline_started = time.perf_counter()
    # Reading and cleaning run in one thread and tokenizing in two more (so one call's ids are turned into
    # arrays while the other call keeps the cores busy); they start now, overlapping the set-up below, and
    # hand over whole chunks. This thread windows, masks and writes; tokenizing and masking release the GIL.
    doc_batches = prefetch(cleaned_batches(corpus, cfg, clean_counts))
    chunks = prefetch_map(functools.partial(encode, tok), doc_batches) if cfg.method == "tokens" else None
    tables = word_tables(tok)
    stats = WindowStats(method=cfg.method, row_length=content_length, unk_id=ids.unk)
    if chunks is not None:
        rows_iter = token_windows(chunks, length=content_length, eos_id=document_eos(cfg, ids, suffix), pack=cfg.pack,
                                  tables=tables, stats=stats)
    else:
        docs = itertools.chain.from_iterable(doc_batches)
        rows_iter = text_method_rows(tok, docs, segment_chars(cfg.input_length), content_length, tables, stats,
                                     cfg.chunk_chars)
    rows_iter = (frame_rows(rows, prefix, suffix) for rows in rows_iter)

    # One long document is one chunk upstream; masking and writing take chunks in pieces, so memory stays bounded.
    rows_iter = itertools.chain.from_iterable(rows.pieces(MASK_TOKENS) for rows in rows_iter)
    # Numba loads (about a second of one core, holding the GIL) once the first windows are out, so that it
    # does not slow the reading the tokenizer threads wait on at the start.
    first = list(itertools.islice(rows_iter, 1))
    rows_iter = itertools.chain(first, rows_iter)
    mask.set_threads(cfg.threads)
    fixed = cfg.method == "tokens" and cfg.pack == "stream"
    seeds = [mask.row_seed(cfg.seed, k) for k in range(cfg.seeds)]
    masker = Masker(cfg, ids, tables, fixed, window_length)
    writers = {
        "windows": SplitWriter(stage / "windows", {"tokens": window_length if fixed else None}),
        "validation-windows": SplitWriter(stage / "validation-windows", {"tokens": window_length if fixed else None}),
        "validation": SplitWriter(stage / "validation", masker.widths),
        **{f"seed-{k}": SplitWriter(stage / f"seed-{k}", masker.widths) for k in range(cfg.seeds)},
    }
    n_train = n_val = 0
    timings["mask_and_write_s"] = 0.0
    with progress(desc="tokenize, mask, write", unit="tok") as bar:
        for rows in rows_iter:
            held = held_out(n_train + n_val, len(rows), cfg.validation_fraction, cfg.seed)
            train, val = rows.take(np.flatnonzero(~held)), rows.take(np.flatnonzero(held))
            writers["windows"].write({"tokens": train})
            writers["validation-windows"].write({"tokens": val})
            t0 = time.perf_counter()
            for k, seed in enumerate(seeds):
                writers[f"seed-{k}"].write(masker(train, seed=seed, first_row=n_train, split=f"seed-{k}"))
            writers["validation"].write(
                masker(val, seed=mask.row_seed(cfg.seed, VALIDATION_SLOT), first_row=n_val, split="validation")
            )
            timings["mask_and_write_s"] += time.perf_counter() - t0
            n_train += len(train)
            n_val += len(val)
            bar.update(int(rows.offsets[-1]))
    if corpus.stats.documents == 0:
        raise no_text_error(corpus_name(corpus), corpus.stats.as_dict(), cfg.text_column)
    if stats.rows == 0:
        raise CorpusError(
            f"{corpus_name(corpus)}: too little text for one window of {window_length} tokens; "
            "lower --input-length or use --pack doc"
        )
    if n_train == 0:
        raise CorpusError(f"{corpus_name(corpus)}: every window went to validation; lower --validation-fraction")
    splits = {name: writer.close() for name, writer in writers.items()}
    timings["pipeline_s"] = time.perf_counter() - pipeline_started
    timings["total_s"] = time.perf_counter() - started
    return finish_manifest(cfg, corpus, tok, ids, stage, splits, seeds, stats, masker, clean_counts, timings,
                           window_length=window_length, target_length=target_length)


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


def text_method_rows(tok, docs: Iterable[str], chars: int, window_length: int, tables, stats: WindowStats,
                     chunk_chars: int) -> Iterator[Rows]:
    """The naive baseline: character segments, tokenized, truncated to the window length."""
    segments = text_segments(docs, chars)
    previous_cut = False
    while batch := list(itertools.islice(segments, max(1, chunk_chars // chars))):
        flat, lengths = encode(tok, [text for text, _ in batch])
        cut_after = np.array([cut for _, cut in batch], dtype=bool)
        yield segment_rows(flat, lengths, cut_after, previous_cut, length=window_length, tables=tables, stats=stats)
        previous_cut = bool(cut_after[-1])


def held_out(first: int, n: int, fraction: float, seed: int) -> np.ndarray:
    """Which of windows first..first+n-1 are held out for validation: a pure function of (seed, index)."""
    if fraction <= 0.0:
        return np.zeros(n, dtype=bool)
    x = (np.arange(first, first + n, dtype=np.uint64) + np.uint64(HOLDOUT_SALT)) ^ np.uint64(seed & (2**64 - 1))
    with np.errstate(over="ignore"):  # SplitMix64 finaliser: wrapping uint64 arithmetic is the point
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53 < fraction


class Masker:
    """Masks row chunks for one objective and keeps running totals of what it produced."""

    def __init__(self, cfg: BuildConfig, ids, tables, fixed: bool, window_length: int):
        self.cfg, self.ids, self.tables = cfg, ids, tables
        if cfg.objective == "span":
            enc, lab = mask.corrupted_lengths(np.array([window_length]), cfg.noise_density, cfg.mean_span_length)
            self.widths = {"input_ids": int(enc[0]), "labels": int(lab[0])} if fixed else {"input_ids": None, "labels": None}
        else:
            self.widths = {"input_ids": window_length if fixed else None, "labels": window_length if fixed else None}
        self.totals: dict[str, dict[str, float]] = {}

    def __call__(self, rows: Rows, *, seed: int, first_row: int, split: str) -> dict[str, Rows]:
        cfg = self.cfg
        if cfg.objective == "span":
            out = mask.span_corrupt(
                rows.values, rows.offsets, seed=seed, first_row=first_row, noise_density=cfg.noise_density,
                mean_span_length=cfg.mean_span_length, sentinels=self.ids.sentinels, eos_id=self.ids.eos,
                random_roll=cfg.random_roll,
            )
            stats = mask.span_stats(out.label_values, out.label_offsets, out.enc_offsets, self.ids.sentinels)
            result = {"input_ids": Rows(out.enc_values, out.enc_offsets), "labels": Rows(out.label_values, out.label_offsets)}
        else:
            inputs, labels = mask.mlm_mask(
                rows.values, rows.offsets, seed=seed, first_row=first_row, probability=cfg.mlm_probability,
                mask_id=self.ids.mask, special_ids=self.ids.all(), vocab_size=self.ids.vocab_size,
                word_starts=self.tables.starts_word if cfg.whole_word else None,
            )
            stats = mask.mlm_stats(labels, rows.offsets)
            result = {"input_ids": Rows(inputs, rows.offsets), "labels": Rows(labels, rows.offsets)}
        self._add(split, stats, tokens=int(rows.offsets[-1]))
        return result

    def _add(self, split: str, stats: dict[str, float], tokens: int) -> None:
        """Accumulate rows/tokens-weighted sums so the split's statistics are exact, not chunk means."""
        rows = stats.get("rows", 0)
        if not rows:
            return
        t = self.totals.setdefault(split, {"rows": 0, "tokens": 0, "noise": 0.0, "spans": 0.0, "masked": 0.0})
        t["rows"] += rows
        t["tokens"] += tokens
        if "noise_fraction" in stats:
            t["noise"] += stats["noise_fraction"] * tokens
            t["spans"] += stats["spans_per_row"] * rows
        else:
            t["masked"] += stats["masked_fraction"] * tokens

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for split, t in self.totals.items():
            if self.cfg.objective == "span":
                out[split] = {
                    "rows": t["rows"],
                    "noise_fraction": t["noise"] / t["tokens"],
                    "mean_span_length": t["noise"] / t["spans"] if t["spans"] else 0.0,
                    "spans_per_row": t["spans"] / t["rows"],
                }
            else:
                out[split] = {"rows": t["rows"], "masked_fraction": t["masked"] / t["tokens"]}
        return out


def finish_manifest(cfg, corpus, tok, ids, stage, splits, seeds, stats, masker, clean_counts, timings, *,
                    window_length, target_length) -> dict:
    """Write manifest.json, last, so a directory with a manifest is a complete build."""
    from mlmprep.config import to_dict

    manifest = {
        "format_version": FORMAT_VERSION,
        "mlmprep_version": mlmprep.__version__,
        "config": cfg.identity(),
        "build_options": {k: v for k, v in to_dict(cfg).items() if k not in cfg.identity()},
        "objective": cfg.objective,
        "method": cfg.method,
        "input_length": cfg.input_length,
        "window_length": window_length,
        "target_length": target_length,
        "fixed_length": masker.widths["input_ids"] is not None,
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
        },
        "corpus": {
            "description": corpus.description,
            "fingerprint": corpus.fingerprint,
            "files": corpus.files,
            "stats": {**corpus.stats.as_dict(), **clean_counts},
        },
        "seeds": [{"split": f"seed-{k}", "seed": s} for k, s in enumerate(seeds)],
        "validation_seed": mask.row_seed(cfg.seed, VALIDATION_SLOT),
        "splits": splits,
        "statistics": {"windows": stats.as_dict(), "masking": masker.summary()},
        "timings": {k: round(v, 3) for k, v in timings.items()},
    }
    write_json(stage / "manifest.json", manifest)
    return manifest


def remask(out: str | Path, seeds: int, *, threads: int = 0) -> list[str]:
    """Add splits seed-N .. seed-{seeds-1} to a build from its stored windows; return their names."""
    from mlmprep.config import check_range, make_config
    from mlmprep.load import read_manifest

    check_range("--seeds", seeds, low=1)
    mask.set_threads(threads)
    out = Path(out)
    with build_lock(out):
        manifest = read_manifest(out)
        have = len(manifest["seeds"])
        if seeds <= have:
            return []
        cfg = make_config(BuildConfig, manifest["config"], source=str(manifest_path(out)))
        tok = load_tokenizer(out / manifest["tokenizer"]["file"])
        ids, tables = special_ids(tok), word_tables(tok)
        masker = Masker(cfg, ids, tables, manifest["fixed_length"], manifest["window_length"])
        added = []
        for k in range(have, seeds):
            name, seed = f"seed-{k}", mask.row_seed(cfg.seed, k)
            with staging_dir(out / name) as stage:
                writer, first = SplitWriter(stage, masker.widths), 0
                for rows in iter_rows(out / "windows", "tokens"):
                    writer.write(masker(rows, seed=seed, first_row=first, split=name))
                    first += len(rows)
                manifest["splits"][name] = writer.close()
                publish(stage, out / name)
            manifest["seeds"].append({"split": name, "seed": seed})
            added.append(name)
        manifest["statistics"]["masking"].update(masker.summary())
        manifest["config"]["seeds"] = seeds
        write_json(manifest_path(out), manifest)
    return added


def train_tokenizer_file(corpus: Iterable[str], out: Path, *, vocab_size: int, text_column: str = "text",
                         doc_sep: str = "line", force: bool = False) -> Path:
    """`mlmprep tokenizer train`: train on a corpus (cleaned as build cleans it) and save tokenizer.json."""
    from mlmprep.errors import ConfigError

    out = Path(out)
    if out.exists() and not force:
        raise ConfigError(f"--out {out}: exists; pass --force to overwrite it or choose another --out")
    cfg = BuildConfig(corpus=tuple(corpus), text_column=text_column, doc_sep=doc_sep, vocab_size=vocab_size)
    source = open_corpus(cfg.corpus, text_column=text_column, doc_sep=doc_sep)
    tok = train_tokenizer(cleaned_documents(source, cfg, {"characters_removed": 0, "documents_emptied": 0}), vocab_size)
    if source.stats.documents == 0:
        raise no_text_error(corpus_name(source), source.stats.as_dict(), text_column)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tok.save(str(tmp))
    os.replace(tmp, out)
    return out
