"""`verify`: prove a build directory is what its manifest says, file by file and row by row.

Checks, in order: the manifest is strict JSON and every field has its type and range (manifest.Manifest: an
edited manifest is reported, not a traceback); every listed file resolves inside the build and exists with its
size and sha256; the tokenizer is the recorded one, with the ids the manifest gives and the transformers files
it implies; the manifest's lengths, seeds and format version follow from its options and tokenizer; every split
loads (the data files its state.json names inside the build), stores its columns in the
types its format version gives and has its recorded row count; every row (or a `sample` of
rows) of every masked split satisfies the objective's invariants against the stored unmasked window, whose
lengths are the manifest's; the observed masking statistics equal the manifest's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from mlmprep import storage
from mlmprep.builder import _kernels, dropped, mask
from mlmprep.builder.denoisers import Cursor, Mixture, row_offsets, seed_rows
from mlmprep.builder.lengths import window_and_target
from mlmprep.builder.masker import Masker
from mlmprep.builder.pipeline import VALIDATION_SLOT
from mlmprep.config import BuildConfig
from mlmprep.config_files import make_config
from mlmprep.errors import CacheError, ConfigError, TokenizerError
from mlmprep.format.load import file_problem, read_manifest
from mlmprep.format.manifest import Manifest, ManifestError, MemberError, member, read_json
from mlmprep.format.publish import fetched_build
from mlmprep.format.rows import Rows, concat_rows
from mlmprep.format.write import UINT16_IDS, column_dtypes, data_files, hf_tokenizer_files, iter_rows
from mlmprep.tokenizer.load import load_tokenizer, special_ids, tokenizer_sha256

SPAN_PROBLEMS = {
    1: "encoder length differs from the window's corrupted length",
    2: "label length differs from the window's target length",
    3: "input_ids or labels do not end with </s>",
    4: "sentinels are not <extra_id_0>, <extra_id_1>, ... in order",
    5: "input_ids and labels do not merge back to the stored window",
}
MLM_PROBLEMS = {
    1: "input_ids or labels length differs from the window's",
    2: "a label is neither -100 nor the window's token",
    3: "an unmasked position differs from the window",
    4: "the number of masked tokens differs from the exact count",
    5: "a special token (</s>, [CLS], [SEP], ...) is a target",
}
STAT_TOLERANCE = 1e-9


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    files: int = 0
    rows_checked: int = 0
    splits: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.ok:
            return f"ok: {self.splits} splits, {self.files} files hashed, {self.rows_checked:,} rows checked"
        return "\n".join([f"{len(self.problems)} problem(s):", *self.problems])


def verify(out: str | Path, *, sample: int | None = None, seed: int = 0, storage_options: dict | None = None
           ) -> Report:
    """Check `out` (a directory or a URL) against its manifest; `sample` checks that many random rows per split
    instead of all. A build on object storage is fetched whole and every byte the store serves re-hashed."""
    if storage.is_url(out):
        with fetched_build(str(out), storage_options or {}) as local:
            report = verify(local, sample=sample, seed=seed)
        report.problems = [problem.replace(str(local), str(out).rstrip("/")) for problem in report.problems]
        return report
    out = Path(out)
    report = Report()
    try:  # an edited or damaged manifest: nothing else can be read by it
        manifest = read_manifest(out)
    except (ManifestError, MemberError) as exc:
        report.problems = [f"manifest.json: {exc.problem}"]
        return report
    if missing := [key for key in NEEDED if key not in manifest.config]:
        report.problems = [f"manifest.json: config.{key} is missing" for key in missing]
        return report
    recorded = RECORDED + (("rows_per_file",) if manifest.format_version >= 2 else ())
    report.problems += [f"manifest.json: {key} is missing, which every build records" for key in recorded
                        if key not in manifest.keys]
    check_files(out, manifest, report)
    tok = check_tokenizer(out, manifest, report)
    check_manifest(manifest, report)
    splits = {name: read_split(out, name, manifest, report) for name in manifest.splits if name != dropped.SPLIT}
    if dropped.SPLIT in manifest.splits:
        report.problems += dropped.check_split(out, manifest)
    report.splits = len(manifest.splits)
    if tok is None or report.problems:
        return report  # rows cannot be trusted against damaged files
    ids = special_ids(tok)
    pairs = [(name, "windows") for name in manifest.seed_splits] + [("validation", "validation-windows")]
    rng = np.random.default_rng(seed)
    for name, windows_name in pairs:
        masked, windows = splits.get(name), splits.get(windows_name)
        if masked is None or windows is None:
            continue
        check_window_lengths(windows_name, manifest, windows["tokens"], report)
        rows = np.arange(len(masked["input_ids"] if manifest.objective in REDERIVED else windows["tokens"]))
        if sample is not None and sample < len(rows):
            rows = np.sort(rng.choice(rows, size=sample, replace=False))
        if manifest.objective in REDERIVED:
            check_rederived(name, manifest, ids, windows["tokens"], masked, rows, report, statistics=sample is None)
            report.rows_checked += len(rows)
            continue
        if len(masked["input_ids"]) != len(windows["tokens"]):  # each row is its window masked: one for one
            report.problems.append(f"{name}: {len(masked['input_ids']):,} rows, but {windows_name} has "
                                   f"{len(windows['tokens']):,}; rebuild with --force")
            continue
        check_rows(name, manifest, ids, windows["tokens"], masked, rows, report)
        report.rows_checked += len(rows)
        if sample is None:
            check_statistics(name, manifest, ids, masked, report)
    return report


SPLITS = {"windows", "validation-windows", "validation"}  # and a seed-K per seed
RECORDED = ("mlmprep_version", "method", "fixed_length", "validation_seed", "corpus", "statistics", "timings",
            "build_options")  # optional to readers, which older or hand-made builds may lack; every build writes them
NEEDED = ("input_length", "seed", "noise_density", "mean_span_length", "mlm_probability", "whole_word")  # of config


def check_files(out: Path, manifest: Manifest, report: Report) -> None:
    """Every split a build has is listed, and every file of each; every listed file inside the build, there, at its
    size and sha256."""
    kept = {dropped.SPLIT} if manifest.config.get("keep_dropped") else set()
    for name in sorted(SPLITS.union(manifest.seed_splits, kept) - manifest.splits.keys()):
        report.problems.append(f"manifest.json: lists no split {name}, which every build has")
    report.problems += [f"{p.name}/: a split directory the manifest does not list" for p in sorted(out.iterdir())
                        if p.is_dir() and p.name not in manifest.splits]
    for name, split in manifest.splits.items():
        if (out / name).is_dir() and not (out / name).is_symlink():
            listed = {f.name for f in split.files}
            report.problems += [f"{name}/{p.name}: not listed in the manifest" for p in sorted((out / name).iterdir())
                                if p.name not in listed]
        for f in split.files:
            report.files += 1
            try:
                problem = file_problem(member(out, f"{name}/{f.name}"), f)
            except MemberError as exc:
                problem = exc.problem
            if problem:
                report.problems.append(f"{name}/{f.name}: {problem}")


def check_tokenizer(out: Path, manifest: Manifest, report: Report):
    """The build's tokenizer, or None (a problem recorded): inside the build, present, the recorded one (sha256),
    its ids those the manifest gives, and the transformers files beside it those it implies."""
    record = manifest.tokenizer
    try:
        path = member(out, record.file)
    except MemberError as exc:
        report.problems.append(f"{record.file}: {exc.problem}")
        return None
    if not path.is_file():
        report.problems.append(f"{record.file}: missing")
        return None
    try:
        tok = load_tokenizer(path)
    except TokenizerError:
        report.problems.append(f"{record.file}: not a readable tokenizer.json")
        return None
    if tokenizer_sha256(tok) != record.sha256:
        report.problems.append(f"{record.file}: not the tokenizer the build used (sha256 differs)")
        return tok
    ids = special_ids(tok)
    actual = {"vocab_size": ids.vocab_size, "pad_id": ids.pad, "eos_id": ids.eos, "unk_id": ids.unk,
              "mask_id": ids.mask, "decoder_start_id": ids.pad, "sentinels": len(ids.sentinels)}
    for key, value in actual.items():
        if getattr(record, key) != value:
            report.problems.append(f"manifest.json: tokenizer {key} is {getattr(record, key)!r}, "
                                   f"the tokenizer's is {value!r}")
    if manifest.format_version >= 2:  # format 1 builds may predate these files
        for name, content in hf_tokenizer_files(tok, model_max_length=manifest.input_length).items():
            try:
                same = read_json(member(out, name)) == content
            except CacheError:
                same = None
            if not same:
                report.problems.append(
                    f"{name}: {'missing or unreadable' if same is None else 'not what the tokenizer implies'}")
    return tok


def check_manifest(manifest: Manifest, report: Report) -> None:
    """The manifest's own fields: lengths those its options give, seeds those its --seed gives."""
    vocab = manifest.tokenizer.vocab_size
    if manifest.format_version >= 3 and vocab > UINT16_IDS:
        report.problems.append(f"manifest.json: format_version {manifest.format_version} stores uint16 ids, "
                               f"but the vocabulary has {vocab:,} (at most {UINT16_IDS:,} fit)")
    try:
        check_lengths_and_seeds(manifest, report)
    except ConfigError as exc:  # an edited config no build accepts: say so, not as if the user had passed it
        report.problems.append(f"manifest.json: config holds values no build accepts ({exc})")


def check_lengths_and_seeds(manifest: Manifest, report: Report) -> None:
    option = manifest.option
    mixture = Mixture.of(manifest.objective, option("denoisers"), option("denoiser_weights"),
                         option("input_length")) if manifest.objective in ("ul2", "prefix") else None
    lengths = window_and_target(manifest.objective, option("input_length"), option("noise_density"),
                                option("mean_span_length"), mixture)
    if mixture is not None and [{k: v for k, v in d.items() if k != "mode_id"} for d in manifest.denoisers] != [
            d.as_dict() for d in mixture.denoisers]:
        report.problems.append("manifest.json: denoisers are not those its options give")
    for key in ("objective", "method"):
        if key in manifest.config and getattr(manifest, key) != manifest.config[key]:
            report.problems.append(f"manifest.json: {key} is {getattr(manifest, key)!r}, its config says "
                                   f"{manifest.config[key]!r}")
    recorded = (manifest.input_length, manifest.window_length, manifest.target_length)
    if recorded != (option("input_length"), *lengths):
        report.problems.append(f"manifest.json: input, window and target lengths {recorded}, its options give "
                               f"{(option('input_length'), *lengths)}")
    if not manifest.seeds:
        report.problems.append("manifest.json: no seeds")
    for k, entry in enumerate(manifest.seeds):
        if (entry.split, entry.seed) != (f"seed-{k}", mask.row_seed(option("seed"), k)):
            report.problems.append(f"manifest.json: seeds[{k}] is {entry.split} with seed {entry.seed}, not seed-{k} "
                                   f"from --seed {option('seed')}")
    if manifest.validation_seed != mask.row_seed(option("seed"), VALIDATION_SLOT):
        report.problems.append(f"manifest.json: validation_seed is not the one --seed {option('seed')} gives")


def check_window_lengths(name: str, manifest: Manifest, windows: Rows, report: Report) -> None:
    """Every window is window_length tokens in the fixed layout, at most that otherwise."""
    lengths, length = windows.lengths(), manifest.window_length
    bad = np.flatnonzero(lengths != length if manifest.fixed else lengths > length)
    if len(bad):
        report.problems.append(f"{name} row {bad[0]}: {lengths[bad[0]]} tokens, "
                               f"the manifest's window_length is {length}"
                               + (f" ({len(bad) - 1} more rows)" if len(bad) > 1 else ""))


def read_split(out: Path, name: str, manifest: Manifest, report: Report) -> dict[str, Rows] | None:
    """All columns of a split as Rows, or None (with a problem recorded) when it does not load."""
    extra = {"ul2": ("denoiser",), "prefix": ("denoiser",), "mdlm": ("rate",)}.get(manifest.objective, ())
    columns = ("tokens",) if name.endswith("windows") else ("input_ids", "labels", *extra)
    try:
        split = {c: concat_rows(list(iter_rows(out / name, c))) for c in columns}
        report.problems += type_problems(out, name, columns, manifest)
    except Exception as exc:  # any Arrow/JSON/IO failure means the split is damaged
        report.problems.append(f"{name}: does not load "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        return None
    rows = len(split[columns[0]])
    if rows != manifest.splits[name].rows:
        report.problems.append(f"{name}: {rows} rows, manifest says {manifest.splits[name].rows}")
    return split


def type_problems(out: Path, name: str, columns: tuple[str, ...], manifest: Manifest) -> list[str]:
    """The columns of split `name` whose stored values are not of the type its format version gives
    (write.column_dtypes), one line each."""
    expected = column_dtypes(manifest.format_version, manifest.objective, manifest.tokenizer.vocab_size)
    problems = []
    for path in data_files(out / name):
        with pa.memory_map(str(path)) as source:
            schema = pa.ipc.open_stream(source).schema
        for column in columns:
            kind = schema.field(column).type
            stored = kind.value_type if pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind) else kind
            if stored != pa.from_numpy_dtype(expected[column]):
                problems.append(f"{name}/{path.name}: column {column} holds {stored}, format_version "
                                f"{manifest.format_version} stores {expected[column]}")
    return problems


def check_rows(name, manifest, ids, windows: Rows, masked: dict[str, Rows], rows: np.ndarray, report: Report) -> None:
    option = manifest.option
    inputs, labels = masked["input_ids"], masked["labels"]
    if manifest.objective == "span":
        num_noise, num_spans = mask.span_counts(np.maximum(windows.lengths(), 2), option("noise_density"),
                                                option("mean_span_length"))
        step = int(ids.sentinels[1] - ids.sentinels[0]) if len(ids.sentinels) > 1 else 1
        codes = _kernels.check_span_rows(windows.values, windows.offsets, inputs.values, inputs.offsets, labels.values,
                                         labels.offsets, rows, num_noise, num_spans, int(ids.sentinels[0]), step,
                                         len(ids.sentinels), ids.eos)
        problems = SPAN_PROBLEMS
    else:
        expected = mask.mlm_counts(windows.values, windows.offsets, ids.all(), option("mlm_probability"))
        is_special = np.zeros(ids.vocab_size, dtype=np.bool_)
        is_special[ids.all()] = True
        codes = _kernels.check_mlm_rows(windows.values, windows.offsets, inputs.values, inputs.offsets, labels.values,
                                        labels.offsets, rows, expected, option("whole_word"), is_special)
        problems = MLM_PROBLEMS
    for row, code in zip(rows[codes > 0][:20], codes[codes > 0][:20]):
        report.problems.append(f"{name} row {row}: {problems[int(code)]}")
    if np.count_nonzero(codes) > 20:
        report.problems.append(f"{name}: {np.count_nonzero(codes) - 20} more bad rows")


def check_statistics(name: str, manifest: Manifest, ids, masked: dict[str, Rows], report: Report) -> None:
    recorded = manifest.masking_stats.get(name)
    if recorded is None:
        if len(masked["labels"]):  # an empty split (say validation at --validation-fraction 0) has none
            report.problems.append(f"{name}: the manifest has no masking statistics for it")
        return
    inputs, labels = masked["input_ids"], masked["labels"]
    if manifest.objective == "span":
        observed = mask.span_stats(labels.values, labels.offsets, inputs.offsets, ids.sentinels)
    else:
        observed = mask.mlm_stats(labels.values, labels.offsets)
    compare_statistics(name, recorded, observed, report)


def compare_statistics(name: str, recorded: dict | None, observed: dict, report: Report) -> None:
    """The masking statistics the manifest records for split `name` against those observed."""
    if recorded is None:
        if observed.get("rows"):
            report.problems.append(f"{name}: the manifest has no masking statistics for it")
        return
    if missing := sorted(observed.keys() - recorded.keys()):
        report.problems.append(f"{name}: the manifest's masking statistics lack {', '.join(missing)}")
    for key, value in recorded.items():
        if key in observed and abs(observed[key] - value) > STAT_TOLERANCE * max(1.0, abs(value)):
            report.problems.append(f"{name}: observed {key} {observed[key]:.6f}, manifest says {value:.6f}")


REDERIVED = ("ul2", "prefix", "mdlm")  # objectives whose every row verify masks again and compares


def masker_of(manifest: Manifest, ids) -> Masker:
    """A Masker of the build's options, with its denoisers' mode tokens."""
    cfg = make_config(BuildConfig, BuildConfig.used(manifest.config), source="manifest.json")
    modes = tuple(-1 if d["mode_id"] is None else d["mode_id"] for d in manifest.denoisers)
    return Masker(cfg, ids, None, manifest.fixed, manifest.window_length, manifest.format_version, modes)


def check_rederived(name: str, manifest: Manifest, ids, windows: Rows, masked: dict[str, Rows], rows: np.ndarray,
                    report: Report, *, statistics: bool) -> None:
    """ul2, prefix, mdlm: split `name` masked again from its windows and seed (ul2 and prefix: each seed's rows cut
    from the whole stream), compared column by column at `rows`; with `statistics`, its masking statistics too."""
    cfg = make_config(BuildConfig, BuildConfig.used(manifest.config), source="manifest.json")
    modes = tuple(-1 if d["mode_id"] is None else d["mode_id"] for d in manifest.denoisers)
    masker = Masker(cfg, ids, None, manifest.fixed, manifest.window_length, manifest.format_version, modes)
    seed = manifest.validation_seed if name == "validation" else manifest.seeds[int(name[5:])].seed
    if masker.mixture is not None:
        total = int(windows.offsets[-1])
        _, offsets = row_offsets(masker.mixture, seed, seed_rows(Cursor(masker.mixture, seed), 0, total, total))
        windows = Rows(windows.values, offsets)
    again = masker(windows, seed=seed, first_row=0, split=name)
    for column, stored in masked.items():
        if len(again[column]) != len(stored):
            report.problems.append(f"{name}: {len(stored)} rows, its windows and seed give {len(again[column])}")
            return
        bad = [int(r) for r in rows if not np.array_equal(
            stored.values[stored.offsets[r]:stored.offsets[r + 1]],
            again[column].values[again[column].offsets[r]:again[column].offsets[r + 1]])]
        report.problems += [f"{name} row {r}: {column} is not what its windows and seed give" for r in bad[:20]]
        if len(bad) > 20:
            report.problems.append(f"{name}: {len(bad) - 20} more bad rows")
    if statistics:
        compare_statistics(name, manifest.masking_stats.get(name), masker.summary().get(name, {}), report)
