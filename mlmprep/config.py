"""Typed configuration: frozen dataclasses, filled from defaults, then a JSON/YAML file, then the command line.

Unknown keys and wrong types are rejected with a message naming the key, so a typo in a config file
never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mlmprep.errors import ConfigError
from mlmprep.storage import is_url, parse_options

C = TypeVar("C")


def opt(default: Any, help: str, *, panel: str, metavar: str | None = None, flags: str | None = None,
        shown: str | None = None) -> Any:
    """A config field that is also a command-line option (mlmprep.cli.options makes the option from it): its
    default, its help text, the `--help` panel it is listed under, its metavar, its flag names (a bool's default
    to "--name/--no-name") and `shown`, words for a default its value does not explain."""
    return dataclasses.field(default=default, metadata={"help": help, "panel": panel, "metavar": metavar,
                                                        "flags": flags, "shown": shown})

STORAGE_OPTIONS_HELP = ("fsspec options for the URLs among the paths (s3://, gs://), a JSON object such as "
                        "'{\"endpoint_url\": \"http://host:9000\"}' or '{\"profile\": \"x\"}'. None: credentials "
                        "and endpoint from the environment (AWS_* variables, ~/.aws, AWS_ENDPOINT_URL).")
MAX_DEDUP_PARTITIONS = 1 << 16  # each partition task opens every shard's staged keys: more only adds their cost
MIN_SHARD_BYTES = 1024  # the smallest --shard-bytes: tests cut tiny corpora into a few KB
# The most input a reading task gets unless --shard-bytes says otherwise: a task holds its shard's staged arrays
# (tokens, keys, n-gram hashes: about 10 bytes per input byte), so this, not the corpus, sets a reader's memory.
MAX_SHARD_BYTES = 4 << 20
MIX_WEIGHT = "a source's weight is the fraction of training tokens (window tokens, before masking) it contributes"
MAX_TOKENS = 2**40  # the largest train token budget: batch planning counts tokens in int64
MAX_SEEDS = 10_000  # each seed is a whole masked copy of the training data; far more is a typo
TOKENIZER_TYPES = {"unigram": "Unigram", "wordpiece": "WordPiece", "bpe": "byte-level BPE"}  # --tokenizer-type, named
DEFAULT_DENOISERS = "R3-0.15,R8-0.15,X3-0.5,X8-0.5,X64-0.15,X64-0.5,S"  # UL2's seven (builder.denoisers)
SEQ2SEQ = ("span", "ul2", "prefix")  # objectives whose rows have an encoder input and a decoder target
MAX_VOCAB = 1 << 24  # the largest models use 256 K pieces; the Unigram trainer reserves memory per piece up front

# option -> (what it applies with, whether a build's options have that): set to anything but its default
# elsewhere, it would be ignored
APPLIES_WITH = {
    "whole_word": ("--objective mlm", lambda c: c["objective"] == "mlm"),
    "denoisers": ("--objective ul2", lambda c: c["objective"] == "ul2"),
    "denoiser_weights": ("--objective ul2", lambda c: c["objective"] == "ul2"),
    "mlm_probability": ("--objective mlm", lambda c: c["objective"] == "mlm"),
    "noise_density": ("--objective span", lambda c: c["objective"] == "span"),
    "mean_span_length": ("--objective span", lambda c: c["objective"] == "span"),
    "random_roll": ("--objective span", lambda c: c["objective"] == "span"),
    "ray_address": ("--engine ray", lambda c: c["engine"] == "ray"),
    "dataset_split": ("--dataset", lambda c: c["dataset"] is not None),
    "pack": ("--method tokens", lambda c: c["method"] == "tokens"),  # text segments: the same bytes either way
    "paragraph_threshold": ("--dedup-paragraphs", lambda c: c["dedup_paragraphs"]),
    "decontaminate_threshold": ("--decontaminate", lambda c: c["decontaminate"]),
    "exclude_min_words": ("--exclude", lambda c: bool(c["exclude"])),
    "dedup_partitions": ("--dedup exact or near, or --decontaminate",
                         lambda c: c["dedup"] != "off" or c["decontaminate"]),
    **{key: ("--dedup near", lambda c: c["dedup"] == "near")
       for key in ("dedup_threshold", "dedup_ngram", "dedup_bands", "dedup_rows")},
}

# options that name files or directories: a leading ~ is the home directory there too, since a --config file
# (or --out=~/x) never passes through the shell's expansion
PATH_OPTIONS = frozenset({"corpus", "dataset", "tokenizer", "out", "data", "sources", "validation", "model",
                          "cache_dir", "exclude", "c4_badwords"})

# train option -> (the option, the values) it applies with: set to anything but its default elsewhere, it is ignored
TRAIN_APPLIES_WITH = {
    "beta1": ("optimizer", ("adamw",)), "beta2": ("optimizer", ("adamw",)),
    "min_lr": ("schedule", ("cosine", "linear", "inverse_sqrt")), "decay_steps": ("schedule", ("cosine", "linear")),
}
# train option -> the objective of the data it applies to (the build's manifest says which the data has)
TRAIN_OBJECTIVE = {"alpha": SEQ2SEQ, "max_decoder_len": SEQ2SEQ}


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what `mlmprep build` writes (and a few things that only decide how fast). Each
    opt() field is also an option of `mlmprep build`, shown by `--help` in field order under its panel."""

    corpus: tuple[str, ...] = ()  # CORPUS: files, directories or globs; empty and no dataset: the built-in sample
    dataset: str | None = opt(None, "A `datasets` name, NAME or NAME:CONFIG (from the local cache when offline). None: "
                              "read CORPUS.", panel="Input", metavar="NAME[:CONFIG]")
    dataset_split: str = opt("train", "Split of --dataset.", panel="Input", metavar="SPLIT")
    text_column: str = opt("text", "Text field of .jsonl/.json/.parquet/.csv/.arrow records.", panel="Input",
                           metavar="FIELD")
    doc_sep: Literal["line", "blank"] = opt("line", "In .txt files a document is a 'line' or a 'blank'-line separated "
                                            "paragraph.", panel="Input")
    on_decode_error: Literal["replace", "skip", "fail"] = opt("replace", "Undecodable bytes: replace, skip the line, "
                                                              "or fail. Damaged compressed data fails, or with skip "
                                                              "ends the file's text.", panel="Input")
    normalize_whitespace: bool = opt(False, "Collapse runs of whitespace to one space.", panel="Input",
                                     flags="--normalize-whitespace/--keep-whitespace")
    nfkc: bool = opt(False, "Unicode NFKC normalisation.", panel="Input")
    storage_options: str | None = opt(None, STORAGE_OPTIONS_HELP, panel="Input", metavar="JSON")
    dedup: Literal["off", "exact", "near"] = opt("exact", "Drop duplicate documents, keeping the first in corpus "
                                                 "order: 'exact' (equal after NFC and whitespace folding), 'near' "
                                                 "(MinHash + LSH, Jaccard of word n-grams >= --dedup-threshold), or "
                                                 "'off'.", panel="Dedup")
    dedup_threshold: float = opt(0.8, "--dedup near: the word n-gram Jaccard similarity at which two documents are "
                                 "duplicates, in (0, 1].", panel="Dedup")
    dedup_ngram: int = opt(5, "--dedup near: words per shingle.", panel="Dedup")
    dedup_bands: int = opt(24, "--dedup near: LSH bands; documents equal in one band are compared (hashes: bands x "
                           "rows). 24 x 5 compares 99.99% of the pairs at Jaccard 0.8 (datatrove's 14 x 8: 92%).",
                           panel="Dedup")
    dedup_rows: int = opt(5, "--dedup near: MinHash values per LSH band.", panel="Dedup")
    dedup_paragraphs: bool = opt(False, "Also remove each line whose word 13-grams were mostly in earlier lines of the "
                                 "corpus (boilerplate inside documents that differ elsewhere); a document left blank "
                                 "is dropped. Reads the corpus twice.", panel="Dedup",
                                 flags="--dedup-paragraphs/--no-dedup-paragraphs")
    paragraph_threshold: float = opt(0.8, "--dedup-paragraphs: the share of a line's word 13-grams seen earlier at "
                                     "which it is removed, in (0, 1].", panel="Dedup")
    filters: str | None = opt(None, "Quality filters, comma-separated: 'c4' (T5's C4 rules as TFDS writes them: lines "
                              "without a terminal mark, short, or about javascript or cookies removed, citation "
                              "markers cut; pages with 'lorem ipsum' or '{', too long or of too few sentences "
                              "dropped) and 'gopher' (Gopher's quality and repetition rules). None: no filter.",
                              panel="Filters", metavar="SET,SET")
    c4_min_words: int = opt(5, "--filters c4: words a line needs to stay.", panel="Filters")
    c4_min_sentences: int = opt(3, "--filters c4: sentences a page's kept lines need.", panel="Filters")
    c4_max_word_chars: int = opt(1000, "--filters c4: a line with a longer word is removed.", panel="Filters")
    c4_max_chars: int = opt(190_000, "--filters c4: a longer page is dropped.", panel="Filters")
    c4_badwords: str | None = opt(None, "--filters c4: a file (or an object's URL) of bad words, one a line (such as "
                                  "LDNOOBW's list); a page with one in a kept line is dropped; the list's content "
                                  "identifies the build. None: no bad-words rule.",
                                  panel="Filters", metavar="FILE")
    gopher_min_words: int = opt(50, "--filters gopher: words (not only punctuation) a document needs.",
                                panel="Filters")
    gopher_max_words: int = opt(100_000, "--filters gopher: the most words a document may have.", panel="Filters")
    gopher_min_mean_word: float = opt(3.0, "--filters gopher: the shortest mean word length.", panel="Filters")
    gopher_max_mean_word: float = opt(10.0, "--filters gopher: the longest mean word length.", panel="Filters")
    gopher_max_symbols: float = opt(0.1, "--filters gopher: the most '#', and the most ellipses, per word.",
                                    panel="Filters")
    gopher_max_bullet_lines: float = opt(0.9, "--filters gopher: the largest share of lines starting with a bullet.",
                                         panel="Filters")
    gopher_max_ellipsis_lines: float = opt(0.3, "--filters gopher: the largest share of lines ending in an ellipsis.",
                                           panel="Filters")
    gopher_min_alpha_words: float = opt(0.8, "--filters gopher: the smallest share of words holding a letter.",
                                        panel="Filters")
    gopher_min_stop_words: int = opt(2, "--filters gopher: of the, be, to, of, and, that, have, with: how many a "
                                     "document must hold.", panel="Filters")
    gopher_max_dup_paragraphs: float = opt(0.3, "--filters gopher: the largest share of paragraphs repeating an "
                                           "earlier one.", panel="Filters")
    gopher_max_dup_paragraph_chars: float = opt(0.2, "--filters gopher: the largest share of characters in repeated "
                                                "paragraphs.", panel="Filters")
    gopher_max_dup_lines: float = opt(0.3, "--filters gopher: the largest share of lines repeating an earlier one.",
                                      panel="Filters")
    gopher_max_dup_line_chars: float = opt(0.2, "--filters gopher: the largest share of characters in repeated "
                                           "lines.", panel="Filters")
    gopher_top_ngrams: str = opt("2:0.2,3:0.18,4:0.16", "--filters gopher: N:SHARE, the largest share of characters "
                                 "in the most frequent word N-gram.", panel="Filters", metavar="N:SHARE,...")
    gopher_dup_ngrams: str = opt("5:0.15,6:0.14,7:0.13,8:0.12,9:0.11,10:0.1", "--filters gopher: N:SHARE, the "
                                 "largest share of characters in repeated word N-grams.", panel="Filters",
                                 metavar="N:SHARE,...")
    tokenizer: str | None = opt(None, "tokenizer.json or a transformers directory, local or a URL. None: train one "
                                "on the corpus (--tokenizer-type).", panel="Tokenizer", metavar="PATH")
    vocab_size: int = opt(32000, "Vocabulary of a trained tokenizer, sentinels included.", panel="Tokenizer")
    tokenizer_type: Literal["unigram", "wordpiece", "bpe"] | None = opt(
        None, "Type of a trained tokenizer: 'unigram' (T5's: <pad> </s> <unk> <mask>, ▁ word starts), 'wordpiece' "
        "(BERT's: [PAD] [UNK] [CLS] [SEP] [MASK], ## continuations, rows framed [CLS] ... [SEP]) or 'bpe' (byte-level, "
        "as GPT-2 and RoBERTa; T5's special tokens). Each has the sentinels too.", panel="Tokenizer",
        shown="unigram for --objective span, wordpiece for mlm")
    tokenizer_train_chars: int = opt(10_000_000, "A trained tokenizer learns from a sample of this many characters, "
                                     "spread over the whole corpus (the whole corpus if smaller).", panel="Tokenizer")
    method: Literal["tokens", "text"] = opt("tokens", "'tokens': exact token windows; 'text': naive "
                                            "(input_length-2)*4-character segments.", panel="Windows")
    pack: Literal["stream", "doc"] = opt("stream", "'stream': windows cross documents; 'doc': each document starts a "
                                         "window.", panel="Windows")
    input_length: int = opt(512, "Encoder input length after masking.", panel="Windows")
    objective: Literal["span", "mlm", "ul2", "prefix", "mdlm"] = opt(
        "span", "'span': T5 span corruption; 'mlm': BERT 80/10/10 masking; 'ul2': UL2's mixture of denoisers "
        "(--denoisers), a mode token first in each input; 'prefix': the prefix LM alone; 'mdlm': masked diffusion, "
        "each row masked at its own rate t ~ U(0.001, 1].", panel="Masking")
    denoisers: str = opt(DEFAULT_DENOISERS, "--objective ul2: the denoisers, comma-separated: R<mean>-<density> "
                         "(mode [NLU]) and X<mean>-<density> (mode [NLG]) span corruption as T5's, S or S-<ratio> "
                         "the prefix LM (mode [S2S]; target share uniform in (0, 2 * ratio), ratio 0.25 unless given).",
                         panel="Masking", metavar="SPEC,SPEC,...")
    denoiser_weights: str | None = opt(None, "--objective ul2: each denoiser's share of rows, e.g. 1,1,1,1,1,1,2 "
                                       "(renormalised). None: uniform.", panel="Masking", metavar="W,W,...")
    noise_density: float = opt(0.15, "Fraction of tokens masked, in (0, 1).", panel="Masking")
    mean_span_length: float = opt(3.0, "Mean masked span length, >= 1.", panel="Masking")
    random_roll: bool = opt(False, "Rotate each mask so the last token is not always noise.", panel="Masking")
    mlm_probability: float = opt(0.15, "Fraction of tokens masked for --objective mlm.", panel="Masking")
    whole_word: bool = opt(False, "MLM masks whole words.", panel="Masking")
    out: str = opt("mlmprep-data", "Output directory, or a prefix on object storage (s3://BUCKET/PATH, gs://...).",
                   panel="Output", metavar="DIR")
    seeds: int = opt(4, "Differently masked copies, one per epoch slot.", panel="Output")
    seed: int = opt(0, "Base seed of masks and the validation hold-out.", panel="Output")
    validation_fraction: float = opt(0.02, "Share of documents (after dedup) held out for validation, whole: no "
                                     "validation window shares a document, or a near-duplicate cluster, with "
                                     "training.", panel="Output")
    decontaminate: bool = opt(True, "Move each validation document with more than --decontaminate-threshold of "
                              "its word 13-grams in training to training, after training's documents (nothing is "
                              "lost), so validation text is not training text.", panel="Output",
                              flags="--decontaminate/--no-decontaminate")
    decontaminate_threshold: float = opt(0.2, "--decontaminate: the share of a validation document's word 13-grams "
                                         "found in training above which it moves, in [0, 1) (0: any).",
                                         panel="Output")
    exclude: tuple[str, ...] = opt((), "An evaluation set (files, directories or globs in any corpus format, read with "
                                   "the corpus's --text-column and --doc-sep) to keep out of the build, repeatable: "
                                   "the text around each of its word 13-grams found in a document is cut out, 200 "
                                   "characters on each side; pieces under 200 characters, and documents cut into "
                                   "more than 10 pieces, are dropped. Its content identifies the build.",
                                   panel="Output", metavar="FILE", shown="none")
    exclude_min_words: int = opt(8, "--exclude: an evaluation text of fewer than 13 words but at least this many is "
                                 "matched whole, by any run of as many words (Megatron's filter_ngrams); a shorter "
                                 "one is ignored. 13: only 13-grams.", panel="Output")
    keep_dropped: bool = opt(False, "Also write a `dropped` split of every text the build removed (duplicates, lines "
                             "--dedup-paragraphs removed, what --filters and --exclude removed): each row its "
                             "text, the rule and the document's number in the corpus.", panel="Output",
                             flags="--keep-dropped/--no-keep-dropped")
    force: bool = opt(False, "Rebuild even if --out is up to date or was built with other options.", panel="Output")
    rows_per_file: int = opt(0, "Windows per data file of each split (0: about 512 K tokens' worth).", panel="Output")
    # speed only: these never change the bytes written
    threads: int = opt(0, "Tokenizer and masking threads inside each worker, at most the cores (0: the cores shared "
                       "among the workers; with --workers 1, all); never changes the output.", panel="Speed")
    shard_bytes: int = opt(0, f"Input bytes per reading task, at least {MIN_SHARD_BYTES} (0: from the corpus size and "
                           f"--workers, at most {MAX_SHARD_BYTES >> 20} MiB: a task's memory grows with its shard); "
                           "never changes the output.", panel="Speed")
    workers: int = opt(0, "Build processes (0: all cores; 1: in-process, for debugging); with --engine ray, tasks in "
                       "flight on the cluster (0: two per CPU it has). Never changes the output.", panel="Speed")
    engine: Literal["local", "ray"] = opt("local", "'local' worker processes, or 'ray' tasks on a Ray cluster (pip "
                                          "install \"mlmprep[ray]\"; URLs, or absolute paths on shared storage).",
                                          panel="Speed")
    ray_address: str | None = opt(None, "Ray cluster to join with --engine ray, as `ray start --head` prints it. None: "
                                  "start or join a local instance.", panel="Speed", metavar="ADDRESS")
    dedup_partitions: int = opt(0, "--dedup exact or near: find the duplicates in this many tasks on the workers, "
                                "each over a range of keys that the reading tasks stage to disk, so that the driver "
                                "holds the duplicate pairs alone, not every document's keys (0: all in the driver; "
                                "see docs/dedup.md for memory and disk per million documents). --decontaminate "
                                "matches the validation set against training in as many tasks (0: one per 64 MB of "
                                "corpus, up to 8). Never changes the output.", panel="Speed")
    chunk_chars: int = 1 << 20  # config file only: characters of text per tokenize/mask/write chunk, bounding memory

    def __post_init__(self) -> None:
        check_range("--input-length", self.input_length, low=2)
        check_range("--workers", self.workers, low=0, high=None if self.engine == "ray" else local_workers_limit())
        check_range("--seeds", self.seeds, low=1, high=MAX_SEEDS)
        check_range("--vocab-size", self.vocab_size, low=8, high=MAX_VOCAB)
        check_range("--threads", self.threads, low=0)
        check_range("--exclude-min-words", self.exclude_min_words, low=1, high=13)
        check_range("--chunk-chars", self.chunk_chars, low=1)
        check_range("--tokenizer-train-chars", self.tokenizer_train_chars, low=1)
        check_range("--rows-per-file", self.rows_per_file, low=0)
        check_range("--shard-bytes", self.shard_bytes, low=0)
        if 0 < self.shard_bytes < MIN_SHARD_BYTES:  # tasks of a few bytes cost far more than their reading
            raise ConfigError(f"--shard-bytes must be 0 (chosen from the corpus) or at least {MIN_SHARD_BYTES}, got "
                              f"{self.shard_bytes}: each reading task costs about a millisecond of its own")
        if not 0.0 < self.noise_density < 1.0:
            raise ConfigError(f"--noise-density must be in (0, 1), got {self.noise_density}; T5 uses 0.15")
        if self.mean_span_length < 1.0:
            raise ConfigError(f"--mean-span-length must be >= 1, got {self.mean_span_length}; T5 uses 3")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(f"--mlm-probability must be in (0, 1), got {self.mlm_probability}; BERT uses 0.15")
        if not 0.0 < self.dedup_threshold <= 1.0:
            raise ConfigError(f"--dedup-threshold must be in (0, 1], got {self.dedup_threshold}; 0.8 is usual")
        check_range("--dedup-ngram", self.dedup_ngram, low=1)
        check_range("--dedup-bands", self.dedup_bands, low=1)
        check_range("--dedup-rows", self.dedup_rows, low=1)
        check_range("--dedup-partitions", self.dedup_partitions, low=0, high=MAX_DEDUP_PARTITIONS)
        if not 0.0 < self.paragraph_threshold <= 1.0:
            raise ConfigError(f"--paragraph-threshold must be in (0, 1], got {self.paragraph_threshold}; 0.8 is usual")
        if not 0.0 <= self.decontaminate_threshold < 1.0:
            raise ConfigError(f"--decontaminate-threshold must be in [0, 1), got {self.decontaminate_threshold}")
        filter_sets(self.filters)
        for name in ("c4_min_words", "c4_min_sentences", "c4_max_word_chars", "c4_max_chars", "gopher_min_words",
                     "gopher_max_words", "gopher_min_stop_words"):
            check_range("--" + name.replace("_", "-"), getattr(self, name), low=0)
        for name in ("gopher_min_mean_word", "gopher_max_mean_word", "gopher_max_symbols", "gopher_max_bullet_lines",
                     "gopher_max_ellipsis_lines", "gopher_min_alpha_words", "gopher_max_dup_paragraphs",
                     "gopher_max_dup_paragraph_chars", "gopher_max_dup_lines", "gopher_max_dup_line_chars"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise ConfigError(f"--{name.replace('_', '-')} must be a finite number >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ConfigError(f"--validation-fraction must be in [0, 1), got {self.validation_fraction}")
        if self.corpus and self.dataset:
            raise ConfigError("give either corpus paths or --dataset, not both")
        parse_options(self.storage_options)
        self.check_applies()
        if self.objective in ("ul2", "prefix"):
            if self.method != "tokens" or self.pack != "stream":
                raise ConfigError(f"--objective {self.objective} cuts its rows from the token stream; leave out "
                                  "--method text and --pack doc")
        if self.engine == "ray":  # every node must find the same files at the same paths: URLs, or shared disk
            paths = [self.out, *self.corpus, *self.exclude, *filter(None, [self.c4_badwords])]
            if self.dataset and Path(self.dataset.partition(":")[0]).exists():  # a save_to_disk directory
                paths.append(self.dataset.partition(":")[0])
            for path in paths:
                if not is_url(path) and not Path(path).is_absolute():
                    raise ConfigError(f"--engine ray: {path} is a relative path; give an absolute path on "
                                      "storage every node of the cluster sees, or a URL (s3://, gs://)")

    def check_applies(self) -> None:
        """Refuse an option set where the objective, engine or input ignores it: the build would differ in name only."""
        values = to_dict(self)
        for key, (needs, applies) in APPLIES_WITH.items():
            if getattr(self, key) != getattr(BuildConfig, key) and not applies(values):
                raise ConfigError(f"--{key.replace('_', '-')} applies to {needs} only; leave it out or use {needs}")

    @staticmethod
    def used(stored: dict[str, Any]) -> dict[str, Any]:
        """A stored build's options less those its objective ignores, which a build made before they were refused
        may record (its bytes never depended on them)."""
        values = {**{f.name: f.default for f in dataclasses.fields(BuildConfig)}, **stored}
        return {key: value for key, value in stored.items() if key not in APPLIES_WITH or APPLIES_WITH[key][1](values)}

    def trained_tokenizer_type(self) -> str:
        """--tokenizer-type, or its default for the objective: BERT's WordPiece for mlm and mdlm, T5's Unigram for the
        seq2seq objectives (span, ul2, prefix)."""
        return self.tokenizer_type or ("wordpiece" if self.objective in ("mlm", "mdlm") else "unigram")

    def identity(self) -> dict[str, Any]:
        """The options that decide the output bytes; two builds with equal identities are the same build."""
        speed_only = {"threads", "chunk_chars", "force", "out", "shard_bytes", "workers", "engine", "ray_address",
                      "storage_options", "dedup_partitions"}
        if self.objective != "ul2":  # the other objectives' identities stay what they were before ul2
            speed_only |= {"denoisers", "denoiser_weights"}
        return {k: v for k, v in to_dict(self).items() if k not in speed_only}


FILTER_SETS = ("c4", "gopher")


def applies_with_filters(name: str) -> tuple[str, Any]:
    """APPLIES_WITH's entry of an option of filter set `name`."""
    return f"--filters {name}", lambda c: name in filter_sets(c["filters"])


APPLIES_WITH.update({f.name: applies_with_filters(f.name.split("_")[0]) for f in dataclasses.fields(BuildConfig)
                     if f.name.startswith(FILTER_SETS)})


def filter_sets(filters: str | None) -> tuple[str, ...]:
    """The filter sets --filters names ("c4,gopher"), each once; () for None."""
    names = tuple(dict.fromkeys(part.strip() for part in (filters or "").split(",") if part.strip()))
    for name in names:
        if name not in FILTER_SETS:
            raise ConfigError(f"--filters: unknown filter set {name!r}; use c4, gopher or c4,gopher")
    if filters is not None and not names:
        raise ConfigError("--filters names no filter set; use c4, gopher or c4,gopher, or leave it out")
    return names


def local_workers_limit() -> int:
    """The most local build processes --workers may ask for: each holds a tokenizer (~200 MB), so far more
    than the cores is a mistake that would exhaust memory (Ray's --workers, tasks in flight, has no limit)."""
    return max(64, 8 * len(os.sched_getaffinity(0)))


def source_spec(text: str | Path) -> tuple[str, Path]:
    """(name, path) of a mixture's source given as PATH or NAME=PATH; the name defaults to the directory's."""
    text = str(text)
    if is_url(text) or is_url(text.partition("=")[2]):
        raise ConfigError(f"{text}: a mixture reads builds on local disk (a URL is read through the cache when it is "
                          "the only DATA); copy it locally first, e.g. aws s3 sync URL DIR")
    name, eq, path = text.partition("=")
    if eq and name and "/" not in name and not Path(text).exists():
        return name, Path(path)
    return Path(text).resolve().name, Path(text)


def check_range(option: str, value: int, *, low: int, high: int | None = None) -> None:
    if value < low:
        raise ConfigError(f"{option} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ConfigError(f"{option} must be at most {high:,}, got {value:,}")


SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30,
              "ti": 2**40}


def parse_size(text: str, option: str) -> int:
    """Bytes in a size as people write it: 123, 500M, 40G, 1.5TB, 64GiB (K/M/G/T powers of 1000, Ki/Mi/Gi/Ti of
    1024, a B after either optional)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kmgt]i?)?b?\s*", str(text), flags=re.IGNORECASE)
    if match is None:
        raise ConfigError(f"{option}: {text!r} is not a size; give bytes or a number with K, M, G or T (e.g. 40G)")
    return int(float(match.group(1)) * SIZE_UNITS[(match.group(2) or "").lower()])


def size_text(n: float) -> str:
    """Bytes as people read them: 812 B, 25.2 MB, 1.31 GB (powers of 1000, as parse_size reads them back)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}" if n / scale < 100 else f"{n / scale:.0f} {unit}"
    return f"{int(n)} B"


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config dataclass (tuples become lists)."""
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


SECRET = {"storage_options"}  # may hold credentials: an error names the value's type, never the value


def shown(value: Any, key: str = "") -> str:
    """A value as a config file spells it: null for None, else its repr; of a SECRET option only its type."""
    if key in SECRET and value is not None:
        return f"a {type(value).__name__} (not shown: it may hold credentials)"
    return "null" if value is None else repr(value)



@dataclass(frozen=True)
class TrainData:
    """What the run trains and evaluates on (the Data panel of `--help`)."""

    data: str = "mlmprep-data"  # a directory written by `mlmprep build` (the DATA argument); a mixture's first
    sources: tuple[str, ...] = ()  # DATA when several: the builds of a mixture, each PATH or NAME=PATH
    max_encoder_len: int | None = opt(None, "Truncate longer inputs (keeping </s>). None: keep whole rows.",
                                      panel="Data")
    max_decoder_len: int | None = opt(None, "Truncate longer span targets (keeping </s>). None: keep whole rows.",
                                      panel="Data")
    validation: tuple[str, ...] = opt((), "A split directory of another build (same tokenizer) to evaluate on; "
                                      "with a mixture, NAME=DIR, repeatable, evaluated beside each source's own.",
                                      panel="Data", metavar="[NAME=]DIR", shown="DATA/validation")
    rehash_data: bool = opt(False, "Re-hash each epoch's split files against the manifest again when the epoch "
                            "opens, beside the check made in the background while the epoch before it trained: a "
                            "pause per epoch that closes the time between the two.", panel="Data")
    seed: int = opt(0, "Seed of the model's initial weights and the batch plan.", panel="Data")


@dataclass(frozen=True)
class TrainMixture:
    """How several builds are mixed (the Mixture panel)."""

    weights: str | None = opt(None, "Mixture: a weight per DATA, e.g. 0.6,0.3,0.1: " + MIX_WEIGHT + ". None: --mix.",
                              panel="Mixture", metavar="W,W,...")
    mix: str = opt("proportional", "Mixture weights from the sources' sizes n (window tokens): proportional (n), "
                   "temperature:T (n^(1/T)) or cap:K (min(n, K)), renormalised.", panel="Mixture", metavar="STRATEGY")


@dataclass(frozen=True)
class TrainModel:
    """The model trained (the Model panel)."""

    model: str = opt("tiny", "tiny, t5-small, t5-base, t5-v1_1-small, t5-v1_1-base, a config.json, or a local "
                     "checkpoint directory. T5 for span data, BERT-like for mlm.", panel="Model", metavar="NAME|PATH")


@dataclass(frozen=True)
class TrainBatching:
    """Token budgets: a row costs enc_len + alpha * dec_len effective tokens (the Batching panel)."""

    max_tokens_per_batch: int = opt(16384, "Padded effective tokens (enc + alpha*dec) per optimizer step, all ranks.",
                                    panel="Batching")
    max_tokens_per_microbatch: int = opt(4096, "Padded effective tokens per forward/backward, at most "
                                         "--max-tokens-per-batch.", panel="Batching")
    max_examples_per_microbatch: int = opt(28, "Rows per forward/backward.", panel="Batching")
    alpha: float = opt(2.0, "Cost of a decoder token relative to an encoder token.", panel="Batching")
    pad_to_multiple_of: int = opt(1, "Pad batch widths to a multiple of this.", panel="Batching")
    eval_max_tokens_per_microbatch: int = opt(4096, "Padded effective tokens per evaluation forward.",
                                              panel="Batching")
    grow_after: int = opt(100, "After an out-of-memory error, good steps before the shrunk limits grow x1.25.",
                          panel="Batching")


@dataclass(frozen=True)
class TrainOptimizer:
    """The optimizer and the steps it skips (the Optimizer panel)."""

    optimizer: Literal["adamw", "adafactor"] = opt("adamw", "adamw or adafactor.", panel="Optimizer")
    lr: float = opt(1e-3, "Peak learning rate, reached after --warmup-steps.", panel="Optimizer")
    weight_decay: float = opt(0.0, "AdamW weight decay on matrices (not on norms and biases).", panel="Optimizer")
    beta1: float = opt(0.9, "AdamW beta1.", panel="Optimizer")
    beta2: float = opt(0.999, "AdamW beta2.", panel="Optimizer")
    grad_clip: float = opt(1.0, "Clip the global gradient norm to this (0: off).", panel="Optimizer")
    max_bad_steps: int = opt(8, "Steps with a non-finite loss or gradient are skipped; stop (exit 1) after this many "
                             "in a row.", panel="Optimizer")


@dataclass(frozen=True)
class TrainSchedule:
    """How long the run trains and the learning rate over it (the Schedule panel)."""

    epochs: int = opt(1, "Passes over the data; epoch e reads split seed-{e % N}. A mixture's sources keep their own "
                      "passes: it stops at --max-steps or --max-tokens.", panel="Schedule")
    max_steps: int = opt(0, "Exactly this many optimizer steps, whatever --epochs says (0: off).", panel="Schedule")
    max_tokens: int = opt(0, "Train until the steps taken hold this many real tokens (encoder + decoder, after "
                          "--max-encoder-len/--max-decoder-len, no padding), whatever --epochs says (0: off).",
                          panel="Schedule")
    min_lr: float = opt(1e-5, "Learning rate at the end of the decay.", panel="Schedule")
    schedule: Literal["cosine", "linear", "constant", "inverse_sqrt"] = opt(
        "cosine", "After warmup: cosine, linear or constant; or inverse_sqrt, T5's lr*sqrt(warmup/step).",
        panel="Schedule")
    warmup_steps: int = opt(100, "Linear warmup steps.", panel="Schedule")
    decay_steps: int = opt(0, "Step at which the decay reaches --min-lr (0: the last step, as nanoGPT's "
                           "lr_decay_iters).", panel="Schedule")


@dataclass(frozen=True)
class TrainOutput:
    """RUN: where the run writes, what it logs and evaluates when, its checkpoints (the Checkpoints and logs panel)."""

    out: str = opt("runs/run", "Run directory: metrics.jsonl, checkpoint-{step}/, final_metrics.json.",
                   panel="Checkpoints and logs", metavar="DIR")
    resume: bool = opt(False, "Continue the run in --out from its last checkpoint, with its saved options.",
                       panel="Checkpoints and logs")
    eval_every: int = opt(500, "Evaluate on the validation split every N steps (0: at the end only).",
                          panel="Checkpoints and logs")
    log_every: int = opt(10, "Write a metrics.jsonl line every N steps.", panel="Checkpoints and logs")
    report_to: Literal["none", "tensorboard"] = opt("none", "none, or tensorboard: event files in --out beside "
                                                    "metrics.jsonl (pip install 'mlmprep[tensorboard]').",
                                                    panel="Checkpoints and logs")
    save_every: int = opt(1000, "Write checkpoint-{step} every N steps (0: at the end only).",
                          panel="Checkpoints and logs")
    keep_checkpoints: int = opt(2, "Keep the last K checkpoints.", panel="Checkpoints and logs")


@dataclass(frozen=True)
class TrainSpeed:
    """How fast it runs on the device (the Speed panel); CPU runs ignore these."""

    bf16: bool = opt(True, "bfloat16 autocast on CUDA; CPU always runs float32.", panel="Speed")
    compile: bool | None = opt(None, "torch.compile the model and loss, one graph per microbatch shape.",
                               panel="Speed", shown="on CUDA when an epoch has at most 16 shapes; off on CPU")
    deterministic: bool = opt(False, "Deterministic CUDA kernels, so a rerun or a resume on a GPU gives the same bits "
                              "(slower); CPU runs already do.", panel="Speed")


@dataclass(frozen=True)
class TrainRemoteData:
    """A DATA URL (s3://, gs://, ...): each epoch's seed split is fetched ahead into a bounded local cache (the Remote
    data panel)."""

    cache_dir: str | None = opt(None, "Local directory that holds a DATA URL's splits while they are trained on, "
                                "shared by runs and ranks.", panel="Remote data", metavar="DIR",
                                shown="$XDG_CACHE_HOME/mlmprep, else ~/.cache/mlmprep")
    cache_limit: str | None = opt(None, "Most bytes the cache may hold for DATA, e.g. 40G; seeds it has room for stay "
                                  "for later epochs.", panel="Remote data", metavar="SIZE",
                                  shown="what the current and the prefetched seeds need")
    prefetch_epochs: int = opt(1, "Fetch the seed splits of this many coming epochs while the current one trains "
                               "(0: fetch each at its epoch boundary).", panel="Remote data")
    fetch_threads: int = opt(4, "Files downloaded at once.", panel="Remote data")
    fetch_bandwidth: str | None = opt(None, "Most bytes per second the downloads take, e.g. 200M, so the prefetch "
                                      "leaves the network to the training.", panel="Remote data", metavar="SIZE",
                                      shown="unlimited")
    storage_options: str | None = opt(None, STORAGE_OPTIONS_HELP, panel="Remote data", metavar="JSON")


@dataclass(frozen=True)
class TrainConfig(TrainRemoteData, TrainSpeed, TrainOutput, TrainSchedule, TrainOptimizer, TrainBatching, TrainModel,
                  TrainMixture, TrainData):
    """Everything `mlmprep train` needs, one section per `--help` panel (a dataclass takes its bases' fields in reverse
    order, TrainData's first). Saved in RUN/train_config.json and in every checkpoint, so that `--resume` continues
    the same run; `mlmprep.train.checkpoint.RESUMABLE` lists what may change on resume."""

    def __post_init__(self) -> None:
        if isinstance(self.validation, str) or self.validation is None:  # one DIR, as a library call may give it
            object.__setattr__(self, "validation", (self.validation,) if self.validation else ())
        self.check_mixture()
        for option, value, low, high in (  # budgets are counted in int64
            ("--epochs", self.epochs, 1, None), ("--max-steps", self.max_steps, 0, None),
            ("--max-tokens", self.max_tokens, 0, MAX_TOKENS),
            ("--max-tokens-per-batch", self.max_tokens_per_batch, 1, MAX_TOKENS),
            ("--max-tokens-per-microbatch", self.max_tokens_per_microbatch, 1, None),
            ("--max-examples-per-microbatch", self.max_examples_per_microbatch, 1, MAX_TOKENS),
            ("--warmup-steps", self.warmup_steps, 0, None), ("--decay-steps", self.decay_steps, 0, None),
            ("--eval-every", self.eval_every, 0, None),
            ("--eval-max-tokens-per-microbatch", self.eval_max_tokens_per_microbatch, 1, MAX_TOKENS),
            ("--log-every", self.log_every, 1, None), ("--save-every", self.save_every, 0, None),
            ("--keep-checkpoints", self.keep_checkpoints, 1, None), ("--grow-after", self.grow_after, 1, None),
            ("--max-bad-steps", self.max_bad_steps, 1, None), ("--prefetch-epochs", self.prefetch_epochs, 0, 64),
            ("--fetch-threads", self.fetch_threads, 1, 256),
        ):
            check_range(option, value, low=low, high=high)
        if not 1 <= self.pad_to_multiple_of <= self.max_tokens_per_microbatch:  # else one padded row outgrows memory
            raise ConfigError(f"--pad-to-multiple-of must be from 1 to --max-tokens-per-microbatch "
                              f"({self.max_tokens_per_microbatch}), got {self.pad_to_multiple_of}: one padded row "
                              "must fit a microbatch")
        for option, value in (("--cache-limit", self.cache_limit), ("--fetch-bandwidth", self.fetch_bandwidth)):
            if value is not None and parse_size(value, option) < 1:
                raise ConfigError(f"{option} must be at least 1 byte, got {value!r}")
        parse_options(self.storage_options)
        self.check_finite()
        self.check_caps()
        self.check_options_apply()
        if not 0 <= self.seed < 2**32:  # numpy's legacy seed range
            raise ConfigError(f"--seed must be in [0, 2**32), got {self.seed}")
        if self.max_steps and self.max_tokens:
            raise ConfigError(f"--max-steps {self.max_steps} and --max-tokens {self.max_tokens} both say when to stop; "
                              "give one of the two")
        if self.max_tokens_per_microbatch > self.max_tokens_per_batch:
            raise ConfigError(
                f"--max-tokens-per-microbatch ({self.max_tokens_per_microbatch}) must not exceed "
                f"--max-tokens-per-batch ({self.max_tokens_per_batch})"
            )
        if not 0.0 < self.min_lr <= self.lr:
            raise ConfigError(f"need 0 < --min-lr <= --lr, got --min-lr {self.min_lr} and --lr {self.lr}")
        if self.alpha < 0 or self.weight_decay < 0 or self.grad_clip < 0:
            raise ConfigError("--alpha, --weight-decay and --grad-clip must not be negative")
        if self.alpha > MAX_TOKENS:  # a row costs enc + alpha * dec: a huge alpha makes that infinite
            raise ConfigError(f"--alpha must be at most {MAX_TOKENS:,} (the largest token budget), got {self.alpha}; "
                              "2.0 weighs decoder tokens double")
        if self.lr * self.weight_decay >= 1:
            raise ConfigError(f"--lr {self.lr} times --weight-decay {self.weight_decay} must be below 1: each step "
                              "multiplies the weights by 1 - lr * weight_decay, which would zero or flip them")
        if not (0.0 <= self.beta1 < 1.0 and 0.0 <= self.beta2 < 1.0):
            raise ConfigError(f"--beta1 and --beta2 must be in [0, 1), got {self.beta1} and {self.beta2}")

    @property
    def mixture(self) -> bool:
        """Whether the run trains on several builds."""
        return len(self.sources) > 1

    def check_mixture(self) -> None:
        """A mixture's DATA is its first source; it stops at --max-steps or --max-tokens, since each source keeps its
        own epochs; a single build takes one --validation DIR."""
        if len(self.sources) == 1:
            raise ConfigError("sources: give two builds or more for a mixture, or one as DATA")
        if not self.mixture:
            for option, value, default in (("--weights", self.weights, None), ("--mix", self.mix, "proportional")):
                if value != default:
                    raise ConfigError(f"{option} {value}: applies to a mixture of builds; give several DATA, or "
                                      "leave it out")
            if len(self.validation) > 1:
                raise ConfigError("--validation: given several times, which applies to a mixture of builds; give "
                                  "one split directory")
            return
        object.__setattr__(self, "data", str(source_spec(self.sources[0])[1]))
        if self.epochs != 1:
            raise ConfigError(f"--epochs {self.epochs}: a mixture's builds each keep their own passes; give "
                              "--max-steps or --max-tokens instead")
        if not (self.max_steps or self.max_tokens):
            raise ConfigError(f"a mixture of {len(self.sources)} builds has no epoch to end at; give --max-steps or "
                              "--max-tokens")

    def check_finite(self) -> None:
        """Refuse NaN and infinity in every float option: a NaN --grad-clip, say, writes NaN into the weights."""
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"--{f.name.replace('_', '-')} must be a finite number, got {value}")

    def check_caps(self) -> None:
        """--max-encoder-len / --max-decoder-len: positive multiples of --pad-to-multiple-of, as the collator needs."""
        for key in ("max_encoder_len", "max_decoder_len"):
            cap = getattr(self, key)
            if cap is not None and (cap < 1 or cap % self.pad_to_multiple_of):
                raise ConfigError(f"--{key.replace('_', '-')} {cap} must be a positive multiple of "
                                  f"--pad-to-multiple-of {self.pad_to_multiple_of}")

    @staticmethod
    def used(saved: dict[str, Any]) -> dict[str, Any]:
        """A saved run's options less those its optimizer or schedule ignores (see BuildConfig.used)."""
        saved = {key: value for key, value in saved.items() if not (key == "validation" and value is None)}
        return {key: value for key, value in saved.items() if key not in TRAIN_APPLIES_WITH
                or saved.get(TRAIN_APPLIES_WITH[key][0], getattr(TrainConfig, TRAIN_APPLIES_WITH[key][0]))
                in TRAIN_APPLIES_WITH[key][1]}

    def check_options_apply(self) -> None:
        """Refuse an option set where the optimizer or schedule ignores it: the run would differ in name only."""
        for key, (owner, values) in TRAIN_APPLIES_WITH.items():
            if getattr(self, key) != getattr(TrainConfig, key) and getattr(self, owner) not in values:
                needs = f"--{owner} " + " or ".join(values)
                raise ConfigError(f"--{key.replace('_', '-')} applies to {needs} only; leave it out or use {needs}")

    def check_objective(self, objective: str) -> None:
        """Refuse an option set that `objective` data (from the build's manifest) ignores."""
        for key, needs in TRAIN_OBJECTIVE.items():
            if getattr(self, key) != getattr(TrainConfig, key) and objective not in needs:
                raise ConfigError(f"--{key.replace('_', '-')} applies to {', '.join(needs)} data only, and "
                                  f"{self.data} is {objective} data; leave it out")


# `mlmprep compare-methods` (mlmprep.compare), here so that its --help states these defaults without importing it.
# Presets: `default` runs end to end on 2 CPU cores in minutes; `quick` keeps the code path alive in CI;
# `full` is GPU-sized (t5-small shapes). A CompareConfig field given explicitly overrides its preset.
COMPARE_MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "quick": dict(max_mb=1, vocab_size=2000, tokenizer_chars=300_000, input_length=64, seeds=1,
                  steps=20, eval_every=10, warmup_steps=5, max_tokens_per_batch=4096, max_tokens_per_microbatch=4096),
    "full": dict(model="t5-small", vocab_size=32000, tokenizer_chars=50_000_000, input_length=512, seeds=4,
                 steps=4000, eval_every=250, warmup_steps=400, lr=1e-3, max_tokens_per_batch=65536,
                 max_tokens_per_microbatch=16384, max_examples_per_microbatch=64, threads=0),
}


@dataclass(frozen=True)
class CompareConfig:
    """Everything the comparison varies; the two methods differ only in `--method`. Each opt() field is also an
    option of `mlmprep compare-methods`, shown by `--help` in field order under its panel; the others, which
    the presets set too, are given in a --config file."""

    corpus: tuple[str, ...] = ()  # CORPUS: files, directories or globs; () is the built-in sample
    mode: Literal["default", "quick", "full"] = "default"  # the preset under the options (--quick, --full)
    max_mb: float = opt(0, "Use only the corpus' first documents, up to this many million characters (0: the whole "
                        "corpus).", panel="Input")
    heldout_fraction: float = opt(0.05, "Share of documents held out for the common validation set.", panel="Input")
    text_column: str = opt("text", "Text field of structured corpus files.", panel="Input", metavar="FIELD")
    doc_sep: Literal["line", "blank"] = opt("line", "In .txt files a document is a 'line' or a 'blank'-line separated "
                                            "paragraph.", panel="Input")
    # tokenizer and builds, the same for both methods
    vocab_size: int = opt(8000, "Vocabulary of the one tokenizer both methods use.", panel="Build")
    tokenizer_chars: int = 2_000_000  # the tokenizer trains on the first this-many characters of training text
    input_length: int = opt(128, "Encoder input length after masking.", panel="Build")
    seeds: int = 2
    # training, the same for both methods
    model: str = opt("tiny", "Model preset or config.json, the same for both.", panel="Training", metavar="NAME|PATH")
    steps: int = opt(400, "Optimizer steps of each run.", panel="Training")
    # also the metrics log interval, so training tokens at each eval are exact
    eval_every: int = opt(50, "Evaluate on the common validation set every N steps.", panel="Training")
    max_tokens_per_batch: int = opt(8192, "Padded effective tokens per step.", panel="Training")
    max_tokens_per_microbatch: int = 4096
    max_examples_per_microbatch: int = 28
    lr: float = 2e-3
    warmup_steps: int = 50
    seed: int = opt(0, "Seed of the hold-out, masks, weights and batch plans.", panel="Training")
    out: str = opt("bench-out", "Directory for the builds, runs, results.json, results.md and plots.", panel="Output",
                   metavar="DIR")
    force: bool = opt(False, "Replace a previous compare-methods result in --out, its build and run directories with "
                      "all they hold. An --out holding anything else is refused, with or without it.", panel="Output")
    # a tiny model runs fastest on one thread
    threads: int = opt(1, "Torch CPU threads while training (0: torch's default).", panel="Speed",
                       shown=f"1; --full: {COMPARE_MODES['full']['threads']}")

    @property
    def max_chars(self) -> int:
        """--max-mb in characters (0: the whole corpus); a tiny positive limit is not 0, the whole corpus."""
        return max(1, round(self.max_mb * 1e6)) if self.max_mb else 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_mb) and self.max_mb >= 0):
            raise ConfigError(f"--max-mb must be a number >= 0 (0: the whole corpus), got {self.max_mb}")
        if not 0.0 < self.heldout_fraction < 1.0:
            raise ConfigError(f"--heldout-fraction must be in (0, 1), got {self.heldout_fraction}")
        for option, value, low in (("--steps", self.steps, 1), ("--eval-every", self.eval_every, 1),
                                   ("--tokenizer-chars", self.tokenizer_chars, 1), ("--threads", self.threads, 0)):
            check_range(option, value, low=low)
