"""Text segmentation against token splitting on one corpus: the comparison a user reruns.

    documents ─► ~5% held out (a hash of the text) ─► heldout.jsonl ─► build --method tokens ─► validation
              └► train.jsonl ─► one tokenizer ─┬► build --method text   ─► fit tiny T5 ─┐
                                               └► build --method tokens ─► fit tiny T5 ─┴► results, plots

Both datasets come from the same training documents, tokenizer, input length, masking settings and seeds;
both models train from the same initial weights with the same budgets and steps, and are evaluated on the
same validation rows, cut by token splitting from documents neither model trains on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from mlmprep.builder.run import build, cleaned_documents
from mlmprep.builder.windows import MIN_ROW, segment_chars, text_segments
from mlmprep.config import COMPARE_MODES as MODES
from mlmprep.config import BuildConfig, CompareConfig, TrainConfig, to_dict
from mlmprep.config_files import make_config
from mlmprep.corpus.documents import open_corpus
from mlmprep.errors import CacheError, ConfigError, CorpusError
from mlmprep.format.load import build_tokenizer
from mlmprep.format.manifest import Manifest
from mlmprep.format.publish import check_output_path
from mlmprep.format.rows import Rows, concat_rows, starts_of
from mlmprep.format.write import iter_rows, write_json
from mlmprep.tokenizer.encode import WordTables, encode, word_tables
from mlmprep.tokenizer.load import special_ids
from mlmprep.tokenizer.train import check_vocab_size, train_tokenizer
from mlmprep.train.model import check_model_spec
from mlmprep.train.numerics import Diverged

METHODS = {"text": "text segmentation", "tokens": "token splitting"}
COLORS = {"text": "#d6479b", "tokens": "#1f77b4"}
# what compare-methods writes under --out; --force replaces only a directory holding nothing else
OUTPUTS = frozenset({"data", "build-validation", "build-text", "build-tokens", "run-text", "run-tokens",
                     "results.json", "results.md", "val_loss.png", "val_accuracy.png"})
PREVIOUS = ".previous"  # inside --out: the result a --force run replaces, until the run completes
SEGMENTS_PER_CALL = 4096  # text segments per tokenizer call when replaying the text method (speed only)

def compare_config(mode: str, *layers: dict[str, Any]) -> CompareConfig:
    """The preset `mode` (default, quick, full) with `layers` of options (CompareConfig fields) over it, later
    layers winning."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return make_config(CompareConfig, MODES[mode], *layers, {"mode": mode}, source="compare-methods")


# ----------------------------------------------------------------------------- documents and tokenizer
def split_documents(cfg: CompareConfig, data: Path) -> dict[str, int]:
    """Write the corpus' documents to data/train.jsonl and data/heldout.jsonl (see held_out_text); return the
    document counts."""
    corpus = open_corpus(cfg.corpus, text_column=cfg.text_column, doc_sep=cfg.doc_sep)
    docs = corpus.documents()
    if cfg.max_chars:
        docs = first_chars(docs, cfg.max_chars)
    data.mkdir(parents=True, exist_ok=True)
    counts = {"train": 0, "heldout": 0}
    train, heldout = (open(data / name, "w", encoding="utf-8") for name in ("train.jsonl", "heldout.jsonl"))
    with train, heldout:
        for doc in docs:
            held = held_out_text(doc, cfg.heldout_fraction, cfg.seed)
            # escaped: a lone surrogate (JSON can spell one) reaches the builds, which drop it when cleaning
            (heldout if held else train).write(json.dumps({"text": doc}) + "\n")
            counts["heldout" if held else "train"] += 1
    if not counts["train"] or not counts["heldout"]:
        raise CorpusError(f"{corpus.description}: {counts['train']} training and {counts['heldout']} "
                          "held-out documents; the comparison needs both (give more text or change --heldout-fraction)")
    return counts


def held_out_text(text: str, fraction: float, seed: int) -> bool:
    """Whether a document is held out: a hash of (seed, its text) below `fraction`, so that every copy of a
    text (corpora repeat headers and boilerplate) falls on the same side and no validation text is trained on."""
    digest = hashlib.blake2b(f"{seed}\0{text}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little") < fraction * 2**64


def first_chars(texts: Iterable[str], limit: int) -> Iterator[str]:
    """The texts up to and including the one that brings the character count to `limit`."""
    total = 0
    for text in texts:
        if total >= limit:
            return
        total += len(text)
        yield text


def arm_config(cfg: CompareConfig, data: Path, method: str, corpus: str, tokenizer: Path) -> BuildConfig:
    """The build of one arm: identical for both methods but for `method`; no documents are held out or dropped
    (the hold-out already put every copy of a text on one side, and the text arm's replay reads them all)."""
    return BuildConfig(corpus=(str(data / corpus),), tokenizer=str(tokenizer), method=method,
                       input_length=cfg.input_length, seeds=cfg.seeds, seed=cfg.seed, validation_fraction=0.0,
                       dedup="off", out=str(Path(cfg.out) / f"build-{method}"), force=True)


def make_tokenizer(cfg: CompareConfig, data: Path) -> Path:
    """Train one tokenizer on the cleaned training documents (their first `tokenizer_chars` characters)."""
    build_cfg = arm_config(cfg, data, "tokens", "train.jsonl", data / "tokenizer.json")
    docs = cleaned_documents(open_corpus(build_cfg.corpus), build_cfg,
                             {"characters_removed": 0, "documents_emptied": 0})
    tok = train_tokenizer(first_chars(docs, cfg.tokenizer_chars), cfg.vocab_size)
    tok.save(build_cfg.tokenizer)
    return Path(build_cfg.tokenizer)


# ----------------------------------------------------------------------------- word fragments
def fragment_spans(windows: Rows, inputs: Rows, labels: Rows, sentinels: np.ndarray, tables: WordTables,
                   begins: np.ndarray, ends: np.ndarray) -> tuple[int, int]:
    """(masked spans, spans that are word fragments) of span-corrupted rows, given their unmasked windows.

    A span is a fragment when its first token continues a word or the token after it continues the span's
    last word; at a row's edge that is `begins[row]` / `ends[row]` (the row starts / ends inside a word).
    Span positions come from walking the encoder input: a kept token covers one window position, sentinel k
    covers as many as span k has label tokens. E.g.

        window   ▁The ▁fun ction ▁is ▁here
        encoder  ▁The ▁fun E0 ▁is E1 </s>        labels  E0 ction E1 ▁here </s>

    span [ction] is a fragment (it continues ▁fun); [▁here] ends the row, so it is one iff the row ends in a word.
    """
    label_sentinels = np.flatnonzero(np.isin(labels.values, sentinels))
    marks = np.union1d(label_sentinels, labels.offsets[1:] - 1)  # sentinels and each row's closing EOS, sorted
    span_length = marks[np.searchsorted(marks, label_sentinels) + 1] - label_sentinels - 1  # tokens up to the next mark
    enc_sentinels = np.flatnonzero(np.isin(inputs.values, sentinels))
    if len(enc_sentinels) != len(span_length):
        raise CacheError(f"{len(enc_sentinels)} sentinels in input_ids but {len(span_length)} in labels; "
                         "rebuild the split")
    step = np.ones(len(inputs.values), dtype=np.int64)  # window positions each encoder token covers
    step[inputs.offsets[1:] - 1] = 0  # the appended EOS covers none
    step[enc_sentinels] = span_length
    covered = np.cumsum(step)
    if not np.array_equal(covered[inputs.offsets[1:] - 1], windows.offsets[1:]):
        raise CacheError("seed-0 rows do not cover the windows they were masked from; rebuild the build")
    start = (covered - step)[enc_sentinels]  # flat window index of each span's first token
    end = start + span_length - 1
    row = np.searchsorted(windows.offsets, start, side="right") - 1
    w = windows.values
    left = np.where(start == windows.offsets[row], begins[row], tables.cuts_word(w[np.maximum(start - 1, 0)], w[start]))
    last = windows.offsets[row + 1] - 1
    right = np.where(end == last, ends[row], tables.cuts_word(w[end], w[np.minimum(end + 1, len(w) - 1)]))
    return len(start), int(np.count_nonzero(left | right))


def stream_row_cuts(windows: Rows, tables: WordTables) -> tuple[np.ndarray, np.ndarray]:
    """(begins inside a word, ends inside a word) per row of a token-splitting build whose rows are consecutive
    pieces of one stream: a boundary cuts a word when the next row's first token continues the previous' last."""
    firsts, lasts = windows.values[windows.offsets[:-1]], windows.values[windows.offsets[1:] - 1]
    cut = tables.cuts_word(lasts[:-1], firsts[1:])  # [n - 1] bool: the boundary after row i
    return np.append(False, cut), np.append(cut, False)


def text_row_cuts(build_cfg: BuildConfig, tok, tables: WordTables, window_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(begins inside a word, ends inside a word) per row of a text-segmentation build, by replaying its
    segmentation: the tokenizer marks every segment's first word as a word start, so the text cut decides.
    A row ends inside a word where its segment's end cut one, or for a truncated row, where truncation did."""
    docs = cleaned_documents(open_corpus(build_cfg.corpus), build_cfg,
                             {"characters_removed": 0, "documents_emptied": 0})
    segments = text_segments(docs, segment_chars(build_cfg.input_length))
    begins, ends, previous = [], [], False
    while chunk := list(islice(segments, SEGMENTS_PER_CALL)):
        flat, lengths = encode(tok, [text for text, _ in chunk])
        cut_after = np.array([cut for _, cut in chunk], dtype=bool)
        starts = starts_of(lengths)[:-1]
        kept = np.minimum(lengths, window_length)
        truncated = lengths > window_length
        last = starts + kept - 1
        after = np.where(truncated, starts + kept, last)  # the token truncation removed first (else unused)
        cut_end = np.where(truncated, tables.cuts_word(flat[np.maximum(last, 0)], flat[np.maximum(after, 0)]),
                           cut_after)
        keep = kept >= MIN_ROW  # the build drops shorter segments
        begins.append(np.append(previous, cut_after[:-1])[keep])
        ends.append(cut_end[keep])
        previous = bool(cut_after[-1])
    return np.concatenate(begins), np.concatenate(ends)


def read_rows(split_dir: Path, column: str) -> Rows:
    """One int32 list column of a split, whole."""
    return concat_rows(list(iter_rows(split_dir, column)))


def fragment_share(build_cfg: BuildConfig, manifest: Manifest) -> dict[str, float]:
    """The share of rows that begin or end inside a word, the masked spans of seed-0 and the share of them
    that are word fragments."""
    out = Path(build_cfg.out)
    tok = build_tokenizer(out, manifest)
    tables, windows = word_tables(tok), read_rows(out / "windows", "tokens")
    if build_cfg.method == "tokens":
        begins, ends = stream_row_cuts(windows, tables)
    else:
        begins, ends = text_row_cuts(build_cfg, tok, tables, manifest.window_length)
    if len(begins) != len(windows):
        raise CacheError(f"{out}: replaying the segmentation gave {len(begins)} rows, the build has {len(windows)}")
    spans, fragments = fragment_spans(windows, read_rows(out / "seed-0", "input_ids"),
                                      read_rows(out / "seed-0", "labels"), special_ids(tok).sentinels, tables,
                                      begins, ends)
    return {"fragment_rate": float(np.mean(begins | ends)), "masked_spans": spans, "fragment_spans": fragments,
            "fragment_span_share": fragments / spans}


# ----------------------------------------------------------------------------- the two arms
def build_part(build_cfg: BuildConfig, documents: str, fix: str, log: Callable[[str], None]) -> Manifest:
    """Build one part of the comparison; its manifest. Too little text for a window is restated in
    compare-methods' terms (the build's own advice names --pack, an option compare-methods has not)."""
    try:
        return build(build_cfg, log=log).manifest
    except CorpusError:
        raise CorpusError(f"the {documents} documents hold too little text for one window of --input-length "
                          f"{build_cfg.input_length}; give more text, {fix} or lower --input-length") from None


def build_arm(build_cfg: BuildConfig, documents: int, log: Callable[[str], None]) -> dict:
    """Build one arm from its `documents` training documents; its build time, window statistics and fragment share."""
    started = time.perf_counter()
    manifest = build_part(build_cfg, f"{documents:,} training", "lower --heldout-fraction", log)
    seconds = time.perf_counter() - started
    windows = manifest.window_stats
    keys = ("rows", "tokens_kept", "tokens_dropped", "tokens_padded", "rows_truncated", "token_utilisation")
    # the manifest's fragment rate is fragment_share's but for the token stream's last row (it also sees the
    # dropped tail)
    return {"seconds": seconds, **{k: windows[k] for k in keys}, "manifest_fragment_rate": windows["fragment_rate"],
            **fragment_share(build_cfg, manifest)}


def arm_train_config(cfg: CompareConfig, method: str) -> TrainConfig:
    """The training run of one arm: identical for both methods but for the build it reads."""
    out = Path(cfg.out)
    return TrainConfig(
        data=str(out / f"build-{method}"), out=str(out / f"run-{method}"), model=cfg.model, max_steps=cfg.steps,
        max_tokens_per_batch=cfg.max_tokens_per_batch,
        max_tokens_per_microbatch=min(cfg.max_tokens_per_microbatch, cfg.max_tokens_per_batch),
        max_examples_per_microbatch=cfg.max_examples_per_microbatch, lr=cfg.lr, warmup_steps=cfg.warmup_steps,
        eval_every=cfg.eval_every, log_every=cfg.eval_every, save_every=0, keep_checkpoints=1, seed=cfg.seed,
        validation=str(out / "build-validation" / "seed-0"),
    )


def check_compare(cfg: CompareConfig) -> None:
    """Refuse, before any work, options that would fail only after the builds, an --out nothing can be written
    under, and one holding anything but a previous compare-methods result (that one only with --force)."""
    check_vocab_size(cfg.vocab_size)
    check_model_spec(cfg.model)
    arm_train_config(cfg, "text")  # its option checks
    out = Path(cfg.out)
    check_output_path(out, directory=True)
    names = {p.name for p in out.iterdir()} if out.is_dir() else set()
    if not names:
        return
    if names - OUTPUTS or not (out / "results.json").is_file():
        what = ", ".join(sorted(names - OUTPUTS)) or "no results.json"
        raise ConfigError(f"--out {out}: is not empty and holds no compare-methods result ({what}); "
                          "choose another --out")
    if not cfg.force:
        raise ConfigError(f"--out {out}: holds a compare-methods result; "
                          "pass --force to replace it or choose another --out")


def train_arm(cfg: CompareConfig, method: str) -> dict:
    """Fit the model on one arm's build, evaluating on the common validation set; final figures and its curve."""
    import torch

    from mlmprep.train.loop import fit

    train_cfg = arm_train_config(cfg, method)
    run = Path(train_cfg.out)
    shutil.rmtree(run, ignore_errors=True)  # a rerun (--force, checked by check_compare) starts afresh
    threads, started = torch.get_num_threads(), time.perf_counter()
    torch.set_num_threads(cfg.threads or threads)
    try:
        final, diverged = fit(train_cfg), None
    except Diverged as exc:  # reported as diverged, never as a number
        final, diverged = {}, exc.step
    finally:
        torch.set_num_threads(threads)
    seconds = time.perf_counter() - started
    curve, step_seconds = read_metrics(run / "metrics.jsonl")
    if diverged is None and not all(math.isfinite(final.get(k) or math.nan) for k in ("eval_loss", "eval_accuracy")):
        diverged = final["step"]  # trained, but its validation loss is not a number
    return {"steps": final.get("step", diverged),
            "training_tokens": final.get("tokens", sum(p["tokens"] for p in curve[-1:])),
            "examples": final.get("examples"), "seconds": seconds, "step_seconds": step_seconds,
            "final_loss": None if diverged is not None else final["eval_loss"],
            "final_accuracy": None if diverged is not None else final["eval_accuracy"], "diverged_at": diverged,
            "curve": curve}


def read_metrics(metrics: Path) -> tuple[list[dict], float]:
    """From RUN/metrics.jsonl: every evaluation with the training tokens (encoder + decoder, real) before it,
    and the seconds spent in training steps (model setup, evaluation and checkpoints excluded)."""
    tokens, seconds, curve = 0, 0.0, []
    for line in metrics.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "eval_loss" in record:
            curve.append({"step": record["step"], "tokens": tokens, "eval_loss": record["eval_loss"],
                          "eval_accuracy": record["eval_accuracy"]})
        elif "loss" in record and "event" not in record and record["tokens"]:  # a log line: steps since the last
            tokens += record["tokens"]
            seconds += record["tokens"] / record["tokens_per_s"]
    return curve, seconds


# ----------------------------------------------------------------------------- the comparison
def compare(cfg: CompareConfig, *, log: Callable[[str], None] = print) -> dict:
    """Run the comparison into cfg.out: results.json, results.md, val_loss.png and val_accuracy.png. A run that
    fails (Ctrl-C included) leaves --out as it found it: missing, empty, or holding the result it was replacing."""
    out = Path(cfg.out)
    existed, previous = out.is_dir(), out / PREVIOUS
    others = set(os.listdir(out)) - OUTPUTS if existed else set()  # none after check_compare; never touched
    try:
        set_aside(out, previous)
        results = run_comparison(cfg, log)
    except BaseException:
        restore(out, existed, previous, others)
        raise
    shutil.rmtree(previous, ignore_errors=True)
    return results


def set_aside(out: Path, previous: Path) -> None:
    """Move a previous result's files (OUTPUTS) in --out into `previous`, inside it."""
    names = [name for name in OUTPUTS if os.path.lexists(out / name)]
    if names:
        previous.mkdir()
        for name in names:
            os.replace(out / name, previous / name)


def restore(out: Path, existed: bool, previous: Path, others: set[str]) -> None:
    """After a failed run: remove what it wrote (--out itself if it made it) and move back what set_aside moved."""
    if not existed:
        shutil.rmtree(out, ignore_errors=True)
        return
    for path in out.iterdir():
        if path.name in others or path == previous:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    if previous.is_dir():
        for path in previous.iterdir():
            os.replace(path, out / path.name)
        previous.rmdir()


def run_comparison(cfg: CompareConfig, log: Callable[[str], None]) -> dict:
    """The comparison's work, into cfg.out."""
    figure = plot_backend()  # fail before the work, not after it
    out, started = Path(cfg.out), time.perf_counter()
    data = out / "data"
    documents = split_documents(cfg, data)
    log(f"documents: {documents['train']:,} for training, {documents['heldout']:,} held out")
    tokenizer = make_tokenizer(cfg, data)
    val_cfg = replace(arm_config(cfg, data, "tokens", "heldout.jsonl", tokenizer), seeds=1,
                      out=str(out / "build-validation"))
    val_manifest = build_part(val_cfg, f"{documents['heldout']:,} held-out", "raise --heldout-fraction", log)
    methods = {m: {"build": build_arm(arm_config(cfg, data, m, "train.jsonl", tokenizer), documents["train"], log)}
               for m in METHODS}
    for method in METHODS:
        log(f"training on the {METHODS[method]} build ...")
        methods[method]["train"] = train_arm(cfg, method)
    results = {
        "corpus": corpus_name(cfg),
        "settings": to_dict(cfg),
        "documents": documents,
        "window_length": val_manifest.window_length,
        "validation": {"rows": val_manifest.splits["seed-0"].rows,
                       "window_tokens": val_manifest.window_stats["tokens_kept"]},
        "methods": methods,
        "plots": plot_curves(figure, results_title(cfg), methods, out),
        "seconds": time.perf_counter() - started,
    }
    write_json(out / "results.json", results)
    (out / "results.md").write_text(results_markdown(results), encoding="utf-8")
    return results


def corpus_name(cfg: CompareConfig) -> str:
    return ", ".join(Path(p).name for p in cfg.corpus) or "built-in sample"


def results_title(cfg: CompareConfig) -> str:
    """One line of the settings, for plot titles and the table's caption."""
    return (f"{corpus_name(cfg)}: {cfg.model} T5, input length {cfg.input_length}, vocab {cfg.vocab_size}, "
            f"{cfg.steps} steps of {cfg.max_tokens_per_batch} padded tokens, seed {cfg.seed}")


# (label, section, key, format) of the results table
TABLE = (
    ("build time (s)", "build", "seconds", "{:.1f}"),
    ("windows", "build", "rows", "{:,}"),
    ("token utilisation (real tokens / row capacity)", "build", "token_utilisation", "{:.3f}"),
    ("tokens lost (truncated or dropped)", "build", "tokens_dropped", "{:,}"),
    ("rows truncated", "build", "rows_truncated", "{:,}"),
    ("fragment rate (windows starting or ending inside a word)", "build", "fragment_rate", "{:.1%}"),
    ("masked spans that are word fragments (seed-0)", "build", "fragment_span_share", "{:.1%}"),
    ("training steps", "train", "steps", "{:,}"),
    ("training tokens (encoder + decoder, real)", "train", "training_tokens", "{:,}"),
    ("training step time (s; setup and evaluation excluded)", "train", "step_seconds", "{:.0f}"),
    ("final validation loss", "train", "final_loss", "{:.4f}"),
    ("final validation token accuracy", "train", "final_accuracy", "{:.4f}"),
)


def results_markdown(results: dict) -> str:
    """The results as a Markdown table, methods side by side, with the settings and the plots."""
    s, methods = results["settings"], results["methods"]
    cfg = make_config(CompareConfig, s)
    lines = [
        f"### Text segmentation vs token splitting: {results['corpus']}",
        "",
        f"{results_title(cfg)}, mode `{s['mode']}`. Documents: {results['documents']['train']:,} for training, "
        f"{results['documents']['heldout']:,} held out; the common validation set is {results['validation']['rows']:,} "
        f"windows of {results['window_length']} tokens cut by token splitting from the held-out documents. "
        f"Total time {results['seconds']:.0f} s.",
        "",
        "| | " + " | ".join(METHODS.values()) + " |",
        "|---|" + "---:|" * len(METHODS),
    ]
    for label, section, key, fmt in TABLE:
        lines.append(f"| {label} | " + " | ".join(cell(methods[m][section], key, fmt) for m in METHODS) + " |")
    lines += ["", *(f"![{name}]({name})" for name in results["plots"]), ""]
    return "\n".join(lines)


def cell(section: dict, key: str, fmt: str) -> str:
    """A table cell: the value, or for a run that diverged "diverged at step N" in place of its results."""
    if section.get(key) is None and section.get("diverged_at") is not None:
        return f"diverged at step {section['diverged_at']}"
    return "-" if section.get(key) is None else fmt.format(section[key])


def plot_backend():
    """matplotlib's Figure (drawn with Agg, no display needed)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("the comparison draws its plots with matplotlib: pip install matplotlib") from None
    return Figure


def plot_curves(figure, title: str, methods: dict, out: Path) -> list[str]:
    """val_loss.png and val_accuracy.png: the validation curve of each method against training tokens, pink
    for text segmentation and blue for token splitting."""
    names = []
    for key, label, name in (("eval_loss", "validation loss", "val_loss.png"),
                             ("eval_accuracy", "validation token accuracy", "val_accuracy.png")):
        fig = figure(figsize=(8, 5), dpi=110)
        ax = fig.subplots()
        for method, text in METHODS.items():
            curve = methods[method]["train"]["curve"]
            ax.plot([p["tokens"] / 1e6 for p in curve], [p[key] for p in curve], marker="o", markersize=3,
                    color=COLORS[method], label=text)
        ax.set_xlabel("training tokens (millions; encoder + decoder, padding excluded)")
        ax.set_ylabel(label)
        ax.set_title(f"{label}: text segmentation vs token splitting\n{title}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name)
        names.append(name)
    return names
