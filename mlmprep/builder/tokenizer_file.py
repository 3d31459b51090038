"""The tokenizer a build trains when none is given, on a bottom-k sample of the cleaned corpus; and
`mlmprep tokenizer train`, the same training saved to a file of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import compress
from pathlib import Path

import numpy as np

from mlmprep.builder.dedup import exact_keys
from mlmprep.builder.denoisers import add_mode_tokens, mode_tokens, sentinels_needed
from mlmprep.builder.destination import output_file
from mlmprep.builder.inputs import corpus_name, fetch_sources, named_as
from mlmprep.builder.pipeline import cleaned_batches
from mlmprep.config import TOKENIZER_TYPES, BuildConfig, check_range
from mlmprep.corpus.documents import Corpus, open_corpus
from mlmprep.corpus.jsonl import no_text_error
from mlmprep.format.scratch import scratch_directory
from mlmprep.progress import Stages
from mlmprep.tokenizer.load import N_SENTINELS
from mlmprep.tokenizer.train import train_tokenizer


def training_sample(corpus: Corpus, cfg: BuildConfig, used: dict) -> Iterator[str]:
    """The cleaned documents a tokenizer is trained on, a bottom-k sample: the distinct texts (by content key,
    dedup.exact_keys) with the smallest keys whose characters reach cfg.tokenizer_train_chars, in key order, the
    last one cut; the whole corpus, each text once, when it holds fewer. Keys are hashes of the texts, so the
    sample is spread over the whole corpus and depends on its documents only, never on files, compression or
    shards; the copies of a text count once. `used` counts documents and characters. Batch by batch, in NumPy:
    the texts under the smallest keys found so far are held until they hold twice the budget, then cut back to
    the shortest run of smallest keys that reaches it (smallest_keys), whose largest key then bars every larger."""
    counts = {"characters_removed": 0, "documents_emptied": 0}
    budget = cfg.tokenizer_train_chars
    keys, lengths, texts, held = [], [], [], 0  # the batches' keys and lengths, joined when cut back
    limit = None  # once the texts held reach the budget: the largest key they need
    for batch in cleaned_batches(corpus.documents(), cfg, counts):
        batch_keys = exact_keys(batch)
        batch_lengths = np.fromiter(map(len, batch), np.int64, len(batch))
        if limit is not None:
            below = batch_keys < limit
            batch_keys, batch_lengths, batch = batch_keys[below], batch_lengths[below], list(compress(batch, below))
        keys.append(batch_keys)
        lengths.append(batch_lengths)
        texts += batch
        held += int(batch_lengths.sum())
        if held >= 2 * budget:
            kept_keys, kept_lengths, texts, limit = smallest_keys(keys, lengths, texts, budget)
            keys, lengths, held = [kept_keys], [kept_lengths], int(kept_lengths.sum())
    _, _, texts, _ = smallest_keys(keys, lengths, texts, budget)
    for text in texts:
        text = text[: budget - used["characters"]]
        used["documents"] += 1
        used["characters"] += len(text)
        yield text


def smallest_keys(keys: list[np.ndarray], lengths: list[np.ndarray], texts: list[str],
                  budget: int) -> tuple[np.ndarray, np.ndarray, list[str], int | None]:
    """Of `texts` (their keys and lengths in arrays one after another), the distinct ones (the first of each key)
    in key order, as few of the smallest keys as reach `budget` characters (all when they do not): their keys,
    lengths and texts, and the largest key kept where they reach it (None where they do not)."""
    keys, first = np.unique(np.concatenate([np.zeros(0, np.uint64), *keys]), return_index=True)
    lengths = np.concatenate([np.zeros(0, np.int64), *lengths])[first]
    reach = int(np.searchsorted(np.cumsum(lengths), budget)) + 1  # the texts up to the one that reaches it
    limit = keys[reach - 1] if reach <= len(keys) else None
    return keys[:reach], lengths[:reach], list(map(texts.__getitem__, first[:reach].tolist())), limit


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


def train_on_sample(corpus: Corpus, cfg: BuildConfig):
    """(a tokenizer of --tokenizer-type and --vocab-size trained on the corpus's training_sample, the documents
    and characters it was trained on), with progress."""
    used = {"documents": 0, "characters": 0}
    with Stages() as bar:
        texts = logged_sample(training_sample(corpus, cfg, used), bar,
                              min(cfg.tokenizer_train_chars, corpus.bytes or cfg.tokenizer_train_chars))
        modes = mode_tokens(cfg.objective, cfg.denoisers)  # counted in --vocab-size, after the sentinels
        sentinels = max(N_SENTINELS, sentinels_needed(cfg.objective, cfg.denoisers, cfg.denoiser_weights,
                                                      cfg.input_length))
        tok = train_tokenizer(texts, cfg.vocab_size - len(modes), kind=cfg.trained_tokenizer_type(),
                              n_sentinels=sentinels, bar=bar)
        add_mode_tokens(tok, modes)
    return tok, used


def train_for_build(corpus: Corpus, cfg: BuildConfig, log: Callable[[str], None]):
    """The tokenizer a build without --tokenizer trains, and what it was trained on (see train_on_sample)."""
    log(f"training a {TOKENIZER_TYPES[cfg.trained_tokenizer_type()]} tokenizer (vocab {cfg.vocab_size}) on at most "
        f"{cfg.tokenizer_train_chars:,} characters ...")
    return train_on_sample(corpus, cfg)


def train_tokenizer_file(corpus: Iterable[str], out: str | Path, *, vocab_size: int, text_column: str = "text",
                         doc_sep: str = "line", train_chars: int = BuildConfig.tokenizer_train_chars,
                         tokenizer_type: str | None = None, force: bool = False,
                         storage_options: dict | None = None) -> tuple[str, int, dict]:
    """`mlmprep tokenizer train`: train on the sample of the corpus `build --tokenizer-train-chars` would take
    (cleaned as build cleans it) and save tokenizer.json, into `out` when that is a directory or ends with a
    slash; `out` and the corpus may be URLs. Returns the file written, the vocabulary reached and the documents
    and characters trained on."""
    options = storage_options or {}
    target = output_file(out, "tokenizer.json", options)
    target.check(force)  # before the training, which takes minutes
    check_range("--tokenizer-train-chars", train_chars, low=1)
    cfg = BuildConfig(corpus=tuple(corpus), text_column=text_column, doc_sep=doc_sep, vocab_size=vocab_size,
                      tokenizer_train_chars=train_chars, tokenizer_type=tokenizer_type)
    with scratch_directory() as scratch:
        paths, copies = fetch_sources(cfg.corpus, Path(scratch, "corpus"), options)
        with named_as(copies):
            source = open_corpus(paths, text_column=text_column, doc_sep=doc_sep)
            tok, used = train_on_sample(source, cfg)
            if used["documents"] == 0:
                raise no_text_error(corpus_name(source), source.stats.as_dict(), text_column)
        return target.write(tok.save, scratch), tok.get_vocab_size(), used
