"""The manifest: the one contract between build and train, typed. `Manifest.from_json` validates every field
(types, ranges, lengths, names) and names the first wrong one in one line; `to_json` gives back the mapping
the build writes. `member` keeps every file a build names inside that build, links resolved.

Unknown keys are refused in the manifest, its tokenizer, seeds, splits and files (a field this mlmprep does not
know is one it would ignore silently); the open mappings (`config`, `build_options`, `corpus.stats`,
`statistics`, `timings`) take any keys whose values are JSON scalars or small nested lists and mappings.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path

from mlmprep.config import TOKENIZER_TYPES
from mlmprep.errors import CacheError
from mlmprep.format.regular import file_sha256, not_regular, open_regular

MANIFEST = "manifest.json"
READ_VERSIONS = (1, 2, 3)  # 1: int32, a new file every 512 MiB; all are datasets save_to_disk directories

OBJECTIVES = ("span", "mlm", "ul2", "prefix", "mdlm")
DENOISER_FIELDS = {  # a ul2 or prefix build's denoisers[k]
    "name": (lambda v: isinstance(v, str) and 0 < len(v) <= 64, "a name"),
    "kind": (lambda v: v in ("span", "prefix"), "'span' or 'prefix'"),
    "mean_span_length": (lambda v: number(v) and 0 <= v < MAX_LENGTH, "a number"),
    "noise_density": (lambda v: number(v) and 0 < v < 1, "a number in (0, 1)"),
    "mode": (lambda v: isinstance(v, str) and len(v) <= 64, "a token or ''"),
    "mode_id": (lambda v: v is None or integer(v, 0, MAX_LENGTH), "a token id or null"),
}
MAX_LENGTH = 1 << 31  # lengths and counts index int32 offsets
MAX_SEED = 1 << 64  # seeds are uint64
MAX_TEXT = 4096  # characters of one string in an open mapping
MAX_ITEMS = 10_000  # entries of one list or mapping
MAX_DEPTH = 6  # nesting of an open mapping (corpus.stats.dedup.examples[k].excerpt is 4 deep)
SPLIT_NAME = re.compile(r"(windows|validation|validation-windows|dropped|seed-(0|[1-9][0-9]{0,5}))")
FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")  # no separator, no "..", no leading dot
SHA256 = re.compile(r"[0-9a-f]{64}")


class ManifestError(CacheError):
    """A manifest field that is missing, of another type or out of range; `problem` says which, without the advice."""

    def __init__(self, message: str, problem: str = ""):
        super().__init__(message)
        self.problem = problem or message


def advice(build_dir: str | Path) -> str:
    return f"run `mlmprep verify {build_dir}` to see every problem, or rebuild it with `mlmprep build ... --force`"


def _show(value) -> str:
    return json.dumps(value, default=str)[:80]


class _Reader:
    """Reads the fields of one JSON object at `where` (a dotted path), raising ManifestError at the first bad one."""

    def __init__(self, data, where: str, fail):
        self.where, self.fail = where, fail
        if not isinstance(data, dict):
            fail(f"{where or 'the manifest'} is {_show(data)}, not an object")
        self.data = data

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def take(self, key: str, check, what: str, *, optional: bool = False):
        if key not in self.data:
            if optional:
                return None
            self.fail(f"{self.path(key)} is missing ({what})")
        value = self.data[key]
        if not check(value):
            self.fail(f"{self.path(key)} is {_show(value)}, not {what}")
        return value

    def only(self, known) -> None:
        if extra := sorted(set(self.data) - set(known)):
            self.fail(f"{self.path(extra[0])} is not a field this mlmprep knows")


def integer(value, low: int = 0, high: int = MAX_LENGTH) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value < high


def number(value) -> bool:
    return integer(value, -MAX_SEED, MAX_SEED) or isinstance(value, float) and math.isfinite(value)


def file_name(value) -> bool:
    return isinstance(value, str) and FILE_NAME.fullmatch(value) is not None


def open_value(value, depth: int = 0) -> bool:
    """A JSON value of an open mapping: scalars (finite numbers, short strings) in lists and mappings of bounded
    size and depth."""
    if value is None or isinstance(value, bool) or number(value):
        return True
    if isinstance(value, str):
        return len(value) <= MAX_TEXT
    if depth >= MAX_DEPTH:
        return False
    if isinstance(value, list):
        return len(value) <= MAX_ITEMS and all(open_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return len(value) <= MAX_ITEMS and all(isinstance(k, str) and len(k) <= 200 and open_value(v, depth + 1)
                                               for k, v in value.items())
    return False


def open_mapping(value) -> bool:
    return isinstance(value, dict) and open_value(value)


def _present(data: dict, names) -> tuple[str, ...]:
    return tuple(name for name in names if name in data)


@dataclass(frozen=True)
class FileRecord:
    """One file of a split, as the build wrote it."""

    name: str
    bytes: int
    sha256: str

    @classmethod
    def from_json(cls, data, where: str, fail) -> FileRecord:
        r = _Reader(data, where, fail)
        r.only(("name", "bytes", "sha256"))
        return cls(name=r.take("name", file_name, "a file name"),
                   bytes=r.take("bytes", lambda v: integer(v, 0, 1 << 62), "a size in bytes"),
                   sha256=r.take("sha256", lambda v: isinstance(v, str) and SHA256.fullmatch(v), "a sha256 in hex"))

    def to_json(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "sha256": self.sha256}


@dataclass(frozen=True)
class SplitRecord:
    """One split directory: its row count and its files."""

    rows: int
    files: tuple[FileRecord, ...]

    @classmethod
    def from_json(cls, data, where: str, fail) -> SplitRecord:
        r = _Reader(data, where, fail)
        r.only(("rows", "files"))
        rows = r.take("rows", integer, "a row count")
        listed = r.take("files", lambda v: isinstance(v, list) and len(v) <= MAX_ITEMS, "a list of files")
        files = tuple(FileRecord.from_json(f, f"{where}.files[{i}]", fail) for i, f in enumerate(listed))
        if len({f.name for f in files}) != len(files):
            fail(f"{where}.files lists a file twice")
        return cls(rows=rows, files=files)

    def to_json(self) -> dict:
        return {"rows": self.rows, "files": [f.to_json() for f in self.files]}

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def record(self, name: str) -> FileRecord | None:
        return next((f for f in self.files if f.name == name), None)


@dataclass(frozen=True)
class SeedRecord:
    """A masked copy: its split and the seed it was masked with."""

    split: str
    seed: int


@dataclass(frozen=True)
class TokenizerRecord:
    """The build's tokenizer file, its sha256 and the ids the build used."""

    file: str
    sha256: str
    vocab_size: int
    pad_id: int
    eos_id: int
    decoder_start_id: int
    unk_id: int | None = None
    mask_id: int | None = None
    sentinels: int = 0
    trained_on: dict | None = None
    type: str | None = None  # the --tokenizer-type of a tokenizer trained by the build; None when one was given
    keys: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data, where: str, fail) -> TokenizerRecord:
        r = _Reader(data, where, fail)
        names = [f.name for f in fields(cls) if f.name != "keys"]
        r.only(names)
        vocab = r.take("vocab_size", lambda v: integer(v, 1), "a vocabulary size")
        in_vocab = f"an id below vocab_size {vocab}"
        ids = {key: r.take(key, lambda v: integer(v, 0, vocab), in_vocab) for key in ("pad_id", "eos_id",
                                                                                      "decoder_start_id")}
        ids |= {key: r.take(key, lambda v: v is None or integer(v, 0, vocab), in_vocab + " or null", optional=True)
                for key in ("unk_id", "mask_id")}
        return cls(file=r.take("file", file_name, "a file name"),
                   sha256=r.take("sha256", lambda v: isinstance(v, str) and SHA256.fullmatch(v), "a sha256 in hex"),
                   vocab_size=vocab, **ids,
                   sentinels=r.take("sentinels", lambda v: integer(v, 0, vocab + 1), "a count of sentinels",
                                    optional=True) or 0,
                   trained_on=r.take("trained_on", lambda v: v is None or open_mapping(v), "an object or null",
                                     optional=True),
                   type=r.take("type", lambda v: v is None or v in TOKENIZER_TYPES,
                               f"one of {', '.join(TOKENIZER_TYPES)} or null", optional=True),
                   keys=_present(data, names))

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in self.keys}


@dataclass(frozen=True)
class CorpusRecord:
    """What the build read: its description, fingerprint, files and statistics (an open mapping)."""

    description: str = ""
    fingerprint: str = ""
    files: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    keys: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data, where: str, fail) -> CorpusRecord:
        r = _Reader(data, where, fail)
        names = ("description", "fingerprint", "files", "stats")
        r.only(names)
        text = (lambda v: isinstance(v, str) and len(v) <= MAX_TEXT, "a string")
        check_fields(data.get("stats") if isinstance(data.get("stats"), dict) else {}, CORPUS_STATS, f"{where}.stats",
                     fail)
        return cls(description=r.take("description", *text, optional=True) or "",
                   fingerprint=r.take("fingerprint", *text, optional=True) or "",
                   files=r.take("files", lambda v: isinstance(v, list) and open_value(v), "a list of small values",
                                optional=True) or [],
                   stats=r.take("stats", open_mapping, "an object of small values", optional=True) or {},
                   keys=_present(data, names))

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in self.keys}


CONFIG_TYPES = {  # the build options readers use, and what each must be when present
    "input_length": (lambda v: integer(v, 1), "a positive integer"),
    "seed": (lambda v: integer(v, 0, MAX_SEED), "a seed (an integer)"),
    "seeds": (lambda v: integer(v, 1), "a positive integer"),
    "vocab_size": (lambda v: integer(v, 1), "a positive integer"),
    "noise_density": (lambda v: number(v) and 0 < v < 1, "a number in (0, 1)"),
    "mean_span_length": (lambda v: number(v) and 1 <= v < MAX_LENGTH, "a number of at least 1"),
    "mlm_probability": (lambda v: number(v) and 0 < v < 1, "a number in (0, 1)"),
    "pack": (lambda v: v in ("stream", "doc"), "'stream' or 'doc'"),
    "whole_word": (lambda v: isinstance(v, bool), "true or false"),
    "text_column": (lambda v: isinstance(v, str), "a string"),
    "tokenizer": (lambda v: v is None or isinstance(v, str), "a string or null"),
}


COUNT = (lambda v: integer(v, 0, 1 << 62), "a count")
FRACTION = (number, "a finite number")
def dedup_stats(value) -> bool:
    """corpus.stats.dedup as the summary reads it: counts, a method and the largest clusters (size, excerpt)."""
    counts = ("documents", "documents_dropped", "characters_dropped", "clusters", "validation_documents")
    return (isinstance(value, dict) and all(COUNT[0](value.get(key)) for key in counts)
            and isinstance(value.get("method"), str) and isinstance(value.get("largest_clusters"), list)
            and all(isinstance(c, dict) and COUNT[0](c.get("size")) and isinstance(c.get("excerpt"), str)
                    for c in value["largest_clusters"]))


CORPUS_STATS = {  # corpus.stats fields the summary and the report read; other keys may hold any small values
    **dict.fromkeys(("blank_skipped", "characters", "characters_removed", "decode_errors", "decode_replaced_lines",
                     "decode_skipped_lines", "documents", "documents_emptied", "files", "json_records",
                     "missing_field_skipped", "null_skipped", "truncated_files", "wrapped_lines"), COUNT),
    **dict.fromkeys(("files_skipped", "files_as_text"),
                    (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings")),
    "dedup": (dedup_stats, "an object of dedup counts, a method and the largest clusters"),
    "missing_field_keys": (lambda v: isinstance(v, dict) and all(COUNT[0](x) for x in v.values()),
                           "an object of counts"),
    "wrapped_prose": (lambda v: isinstance(v, dict) and set(v) == {"characters", "documents", "files", "lines"}
                      and all(COUNT[0](x) for x in v.values()), "an object of characters, documents, files, lines"),
}
EXAMPLE = (lambda v: isinstance(v, str) and len(v) <= MAX_TEXT, "a string")
PARAGRAPHS = {"threshold": FRACTION, **dict.fromkeys(("lines", "lines_removed", "characters_removed",
                                                      "documents_emptied"), COUNT), "example": EXAMPLE}
MEASURES = dict.fromkeys(("documents", "documents_with_ngram", "tokens", "tokens_in_match"), COUNT)


def measures(value) -> bool:
    """Contamination measures: documents and those with an n-gram in training, and (with token windows) tokens and
    those inside a match; no part larger than its whole."""
    return (typed_object(value, MEASURES, required=("documents", "documents_with_ngram"))
            and ("tokens" in value) == ("tokens_in_match" in value)
            and value["documents_with_ngram"] <= value["documents"]
            and value.get("tokens_in_match", 0) <= value.get("tokens", 0))


CONTAMINATION = {"ngram": COUNT, "threshold": FRACTION, "documents_moved": COUNT, "characters_moved": COUNT,
                 "match_tokens": (lambda v: v is None or COUNT[0](v), "a count or null"),
                 "before": (measures, "measures"), "after": (measures, "measures")}
CORPUS_STATS["paragraphs"] = (lambda v: typed_object(v, PARAGRAPHS, required=set(PARAGRAPHS) - {"example"}),
                              "an object of threshold, lines, lines_removed, characters_removed, documents_emptied "
                              "and an example")
CORPUS_STATS["contamination"] = (
    lambda v: typed_object(v, CONTAMINATION, required=CONTAMINATION)
    and all(("tokens" in v[when]) == (v["match_tokens"] is not None) for when in ("before", "after")),
    "an object of ngram, match_tokens, threshold, documents_moved, characters_moved and the measures before and "
    "after (documents, documents_with_ngram, tokens, tokens_in_match)")

EXCLUSION = {"files": (lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v), "a list of strings"),
             **dict.fromkeys(("documents", "ngrams", "ngram", "margin", "documents_matched", "documents_dropped",
                              "pieces", "characters_removed", "min_words", "documents_short", "documents_ignored"),
                             COUNT), "example": EXAMPLE}
EXCLUSION_LATER = {"example", "min_words", "documents_short", "documents_ignored"}  # absent in earlier builds
CORPUS_STATS["exclusion"] = (
    lambda v: typed_object(v, EXCLUSION, required=set(EXCLUSION) - EXCLUSION_LATER)
    and v["documents_dropped"] <= v["documents_matched"]
    and v.get("documents_short", 0) + v.get("documents_ignored", 0) <= v["documents"],
    "an object of files, documents, ngrams, ngram, margin, documents_matched, documents_dropped, pieces, "
    "characters_removed, min_words, documents_short, documents_ignored and an example")

FILE_RECORD = {"path": (lambda v: isinstance(v, str) and len(v) <= MAX_TEXT, "a string"), "bytes": COUNT,
               "sha256": (lambda v: isinstance(v, str) and SHA256.fullmatch(v), "a sha256 in hex")}
CORPUS_STATS["option_files"] = (
    lambda v: isinstance(v, dict) and all(isinstance(files, list) and all(
        typed_object(f, FILE_RECORD, required=FILE_RECORD) for f in files) for files in v.values()),
    "an object of options, each a list of files (path, bytes, sha256)")

FILTER_COUNTS = {"documents": COUNT, "characters": COUNT, "example": EXAMPLE}
CORPUS_STATS["filters"] = (
    lambda v: isinstance(v, dict) and all(typed_object(c, FILTER_COUNTS, required=FILTER_COUNTS) for c in v.values()),
    "an object of rules, each an object of documents, characters and an example")


def typed_object(value, types: dict, *, required) -> bool:
    """Whether `value` is a mapping of exactly the keys of `types`, those `required` among them, each of its type."""
    return (isinstance(value, dict) and set(value) <= set(types) and set(required) <= set(value)
            and all(types[k][0](v) for k, v in value.items()))


WINDOW_STATS = {  # statistics.windows: what the summary and the report show (missing in an older build)
    **dict.fromkeys(("rows", "tokens_kept", "tokens_dropped", "tokens_padded", "unknown_tokens", "rows_truncated",
                     "row_length"), COUNT),
    **dict.fromkeys(("token_utilisation", "fragment_rate", "unknown_fraction"), FRACTION),
    "method": (lambda v: isinstance(v, str), "a string"),
}
SPAN_STATS = {"noise_fraction", "mean_span_length", "spans_per_row"}  # statistics.masking.SPLIT of a span build


def denoiser_records(data: list, fail) -> tuple[dict, ...]:
    """denoisers: each entry exactly DENOISER_FIELDS, each of its type."""
    out = []
    for k, entry in enumerate(data):
        if not isinstance(entry, dict) or set(entry) != set(DENOISER_FIELDS):
            fail(f"denoisers[{k}] is {_show(entry)}, not an object of {', '.join(DENOISER_FIELDS)}")
        check_fields(entry, DENOISER_FIELDS, f"denoisers[{k}]", fail)
        out.append(dict(entry))
    return tuple(out)


def check_fields(data: dict, types: dict, where: str, fail) -> None:
    """Each of `types`' keys present in `data` has its type."""
    for key, (check, what) in types.items():
        if key in data and not check(data[key]):
            fail(f"{where}.{key} is {_show(data[key])}, not {what}")


@dataclass(frozen=True)
class Manifest:
    """manifest.json of a build directory."""

    format_version: int
    objective: str
    input_length: int
    window_length: int
    target_length: int
    tokenizer: TokenizerRecord
    seeds: tuple[SeedRecord, ...]
    splits: dict[str, SplitRecord]
    config: dict  # the build options that define the data (open: options come and go between versions)
    mlmprep_version: str | None = None
    method: str | None = None
    fixed_length: bool | None = None
    rows_per_file: int | None = None
    validation_seed: int | None = None
    corpus: CorpusRecord = field(default_factory=CorpusRecord)
    statistics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    build_options: dict = field(default_factory=dict)
    denoisers: tuple[dict, ...] = ()  # ul2 and prefix: the `denoiser` column's values index this list
    keys: tuple[str, ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def from_json(cls, data, build_dir: str | Path = "") -> Manifest:
        """The manifest in `data` (json.loads of manifest.json); ManifestError names the first field that is
        wrong and what to run."""

        def fail(problem: str):
            raise ManifestError(f"{Path(build_dir, MANIFEST)}: {problem}; {advice(build_dir)}", problem)

        r = _Reader(data, "", fail)
        names = [f.name for f in fields(cls) if f.name != "keys"]
        version = data.get("format_version")
        if not integer(version) or version not in READ_VERSIONS:  # said before any other field: another format
            problem = (f"format_version {_show(version)}, but this mlmprep reads format_version "
                       f"{', '.join(map(str, READ_VERSIONS[:-1]))} or {READ_VERSIONS[-1]}")
            raise ManifestError(f"{Path(build_dir, MANIFEST)}: {problem}; rebuild it with `mlmprep build ... --force` "
                                "or use the mlmprep that wrote it", problem)
        r.only(names)
        length = (lambda v: integer(v, 1), "a positive integer")
        splits_data = r.take("splits", lambda v: isinstance(v, dict) and len(v) <= MAX_ITEMS, "an object of splits")
        for name in splits_data:
            if not SPLIT_NAME.fullmatch(name):
                fail(f"splits.{_show(name)} is not a split name (windows, validation, validation-windows, dropped, "
                     "seed-K)")
        splits = {name: SplitRecord.from_json(entry, f"splits.{name}", fail) for name, entry in splits_data.items()}
        seeds_data = r.take("seeds", lambda v: isinstance(v, list) and len(v) <= MAX_ITEMS, "a list of seeds")
        seeds = []
        for k, entry in enumerate(seeds_data):
            s = _Reader(entry, f"seeds[{k}]", fail)
            s.only(("split", "seed"))
            seeds.append(SeedRecord(split=s.take("split", lambda v: isinstance(v, str) and v in splits,
                                                 "a split that splits lists"),
                                    seed=s.take("seed", lambda v: integer(v, 0, MAX_SEED), "a seed (an integer)")))
        config = r.take("config", open_mapping, "an object of small values")
        check_fields(config, CONFIG_TYPES, "config", fail)
        statistics = r.take("statistics", open_mapping, "an object of small values", optional=True) or {}
        for key in ("windows", "masking"):
            if not isinstance(statistics.get(key, {}), dict):
                fail(f"statistics.{key} is {_show(statistics[key])}, not an object")
        check_fields(statistics.get("windows", {}), WINDOW_STATS, "statistics.windows", fail)
        for name, stats in statistics.get("masking", {}).items():
            if (not isinstance(stats, dict) or not all(number(v) for v in stats.values())
                    or stats.keys() & SPAN_STATS and not SPAN_STATS <= stats.keys()):
                fail(f"statistics.masking.{name} is {_show(stats)}, not an object of finite numbers")
        return cls(
            format_version=version,
            objective=r.take("objective", lambda v: v in OBJECTIVES, " or ".join(map(repr, OBJECTIVES))),
            input_length=r.take("input_length", *length),
            window_length=r.take("window_length", *length),
            target_length=r.take("target_length", *length),
            tokenizer=TokenizerRecord.from_json(r.take("tokenizer", lambda v: True, "an object"), "tokenizer", fail),
            seeds=tuple(seeds), splits=splits, config=config,
            mlmprep_version=r.take("mlmprep_version", lambda v: isinstance(v, str) and len(v) <= 64, "a version",
                                   optional=True),
            method=r.take("method", lambda v: v in ("tokens", "text"), "'tokens' or 'text'", optional=True),
            fixed_length=r.take("fixed_length", lambda v: isinstance(v, bool), "true or false", optional=True),
            rows_per_file=r.take("rows_per_file", integer, "a row count", optional=True),
            validation_seed=r.take("validation_seed", lambda v: integer(v, 0, MAX_SEED), "a seed (an integer)",
                                   optional=True),
            corpus=CorpusRecord.from_json(r.take("corpus", lambda v: True, "", optional=True) or {}, "corpus", fail),
            statistics=statistics,
            timings=r.take("timings", lambda v: isinstance(v, dict) and all(map(number, v.values())),
                           "an object of numbers", optional=True) or {},
            build_options=r.take("build_options", open_mapping, "an object of small values", optional=True) or {},
            denoisers=denoiser_records(r.take("denoisers", lambda v: isinstance(v, list) and 0 < len(v) < 256,
                                              "a list of denoisers", optional=True) or [], fail),
            keys=_present(data, names),
        )

    def denoiser_names(self) -> list[str]:
        """The names of a ul2 or prefix build's denoisers, as its `denoiser` column indexes them."""
        return [d["name"] for d in self.denoisers]

    def to_json(self) -> dict:
        """The mapping manifest.json holds (written with sorted keys: write.write_json)."""
        out = {key: getattr(self, key) for key in self.keys}
        for key in ("tokenizer", "corpus"):
            if key in out:
                out[key] = out[key].to_json()
        if "seeds" in out:
            out["seeds"] = [{"split": s.split, "seed": s.seed} for s in self.seeds]
        if "denoisers" in out:
            out["denoisers"] = [dict(d) for d in self.denoisers]
        if "splits" in out:
            out["splits"] = {name: split.to_json() for name, split in self.splits.items()}
        return out

    def option(self, name: str):
        """The build option `name` as the build recorded it (checked by CONFIG_TYPES where readers use it), or its
        default where an older build did not record it."""
        from mlmprep.config import BuildConfig

        if name in self.config:
            return self.config[name]
        return next(f.default for f in fields(BuildConfig) if f.name == name)

    @property
    def fixed(self) -> bool:
        """Every window is window_length tokens (token splitting); recorded since format 2, implied before."""
        return self.fixed_length if self.fixed_length is not None else self.method == "tokens"

    @property
    def window_stats(self) -> dict:
        """statistics.windows: only the fields the build recorded (a missing one is unknown, not 0)."""
        return {"method": self.method or "", **self.statistics.get("windows", {})}

    @property
    def masking_stats(self) -> dict:
        return self.statistics.get("masking", {})

    def split(self, name: str) -> SplitRecord | None:
        return self.splits.get(name)

    @property
    def seed_splits(self) -> list[str]:
        return [s.split for s in self.seeds]

    def identity(self, seeds: int | None = None) -> str:
        """sha256 over the recorded hashes of the files a run reads, seed-0..seeds-1 (all: None) and validation: a
        remask that adds seeds leaves it as it was, a build of other data or options, or an edit, does not."""
        names = self.seed_splits[:seeds] + ["validation"]
        files = [(name, f.name, f.sha256) for name in names for f in getattr(self.split(name), "files", ())]
        return hashlib.sha256(json.dumps(files).encode("utf-8")).hexdigest()


def member(build_dir: str | Path, relative: str | Path) -> Path:
    """`build_dir / relative`, refused in one line, before a byte is read, unless it resolves (links followed)
    inside the build directory (or, for a snapshot of the Hugging Face cache, into its repository's blobs/) and,
    when it exists, is a regular file: a build names only its own files, and nothing else is opened."""
    path = Path(build_dir, relative)
    resolved = os.path.realpath(path)
    if os.path.isabs(relative) or not any(inside(resolved, root, whole) for root, whole in build_roots(build_dir)):
        raise MemberError(path, build_dir, f"resolves outside the build {build_dir} (to {resolved}), but a build "
                          "names only its own files")
    if kind := not_regular(path):
        raise MemberError(path, build_dir, f"{kind}, not a regular file")
    return path


class MemberError(CacheError):
    """A path a build names that is outside it or not a regular file; `problem` says which, without the path."""

    def __init__(self, path: Path, build_dir: str | Path, problem: str):
        super().__init__(f"{path}: {problem}; {advice(build_dir)}")
        self.problem = problem


def build_roots(build_dir: str | Path) -> list[tuple[str, bool]]:
    """Where the files of a build may resolve: (directory, whole tree or only its own entries). The build directory;
    and when it is a snapshot of the Hugging Face cache (REPO/snapshots/REVISION, whose files are links into
    REPO/blobs/), the files directly in REPO/blobs/."""
    root = os.path.realpath(build_dir)
    roots = [(root, True)]
    parts = Path(root).parts
    if "snapshots" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("snapshots")
        blobs = os.path.join(*parts[:at], "blobs")
        if os.path.isdir(blobs) and not os.path.islink(blobs):
            roots.append((blobs, False))
    return roots


def inside(resolved: str, root: str, whole: bool) -> bool:
    """Whether `resolved` lies in `root`'s tree (`whole`), or is one of `root`'s own entries."""
    if not whole:
        return os.path.dirname(resolved) == root
    return os.path.commonpath([root, resolved]) == root


def read_json(path: Path, *, limit: int = 64 << 20):
    """The strict JSON in `path` (no NaN or Infinity), refused in one line when unreadable, not a regular file,
    larger than `limit` bytes or nested too deep to parse."""
    try:
        with open_regular(path) as f:
            if (size := os.fstat(f.fileno()).st_size) > limit:
                raise ValueError(f"{size:,} bytes, more than any mlmprep JSON file")
            data = f.read(limit + 1)
        return json.loads(data.decode("utf-8"), parse_constant=reject_constant)
    except NonFinite as exc:
        raise ManifestError(f"{path}: not strict JSON ({exc}); {advice(path.parent)}", f"not strict JSON ({exc})"
                            ) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise CacheError(f"{path}: unreadable ({(str(exc).splitlines() or [type(exc).__name__])[0]}); "
                         "rebuild with mlmprep build --force") from None


class NonFinite(ValueError):
    """NaN or Infinity in a JSON file: not strict JSON."""


def reject_constant(name: str):
    raise NonFinite(f"{name} is not a JSON number")


def data_file_names(state: Path) -> list[str]:
    """The data files a split's state.json lists (`state` inside its build), each a plain file name that resolves
    inside the split's build, refused in one line otherwise."""
    data = read_json(state, limit=16 << 20)
    entries = data.get("_data_files") if isinstance(data, dict) else None
    names = [e.get("filename") if isinstance(e, dict) else None for e in entries] if isinstance(entries, list) else []
    if not names or not all(file_name(n) for n in names):
        raise CacheError(f"{state}: not a datasets state.json (a _data_files list of file names); rebuild the split")
    for name in names:
        member(state.parent.parent, f"{state.parent.name}/{name}")
    return names


__all__ = ["MANIFEST", "READ_VERSIONS", "CorpusRecord", "FileRecord", "Manifest", "ManifestError", "MemberError",
           "SeedRecord", "SplitRecord", "TokenizerRecord", "data_file_names", "file_sha256", "member", "not_regular",
           "open_regular", "read_json"]
