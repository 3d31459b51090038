"""Human-readable views of a build: the summary table and decoded examples with their masked spans."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlmprep.config import TOKENIZER_TYPES
from mlmprep.errors import common_fields
from mlmprep.format.manifest import Manifest
from mlmprep.format.write import FORMAT_VERSION, column_dtypes, format_version, iter_rows


def build_summary(out: Path, manifest: Manifest) -> str:
    """A table of splits, windows and masking statistics, and the disk the build takes."""
    w, derived = window_figures(out, manifest)
    timings = manifest.timings
    total_s = timings.get("total_s", 0.0)
    lines = [
        f"{out}: {manifest.objective} objective, method {manifest.method}, "
        f"input length {manifest.input_length} (windows of {manifest.window_length} tokens, "
        f"targets {manifest.target_length})",
        f"corpus: {manifest.corpus.description}",
        *corpus_losses(manifest.corpus.stats, manifest.option("text_column")),
        *missing_field_warning(manifest.corpus.stats, manifest.option("text_column")),
        *wrapped_prose_hint(manifest.corpus.stats),
        *dedup_lines(manifest.corpus.stats),
        *paragraph_lines(manifest.corpus.stats),
        *filter_lines(manifest.corpus.stats),
        *contamination_lines(manifest.corpus.stats),
        *exclusion_lines(manifest.corpus.stats),
        *as_text_note(manifest.corpus.stats),
        tokenizer_line(manifest),
        "  ".join(f"{label}: {figure(w[key], form)}" for key, (label, form) in WINDOW_FIGURES.items()),
        *missing_figures_note(w, derived),
        *unknown_warning(w),
        "",
        f"{'split':<20}{'rows':>10}{'MB':>10}  masking",
    ]
    for name, split in sorted(manifest.splits.items(), key=lambda item: split_order(item[0])):
        lines.append(f"{name:<20}{split.rows:>10,}{split.bytes / 1e6:>10.1f}  {masking_line(manifest, name)}")
    lines += [*denoiser_lines(manifest), "", disk_line(out, manifest)]
    if total_s:
        pipeline_s = timings.get("pipeline_s", total_s)
        trained = f"tokenizer training {timings['train_tokenizer_s']:.1f} s, " if "train_tokenizer_s" in timings else ""
        rate = "" if w["tokens_kept"] is None else f" ({w['tokens_kept'] / max(pipeline_s, 1e-9) / 1e6:.2f} M tokens/s)"
        lines += ["", f"built in {total_s:.1f} s: {trained}tokenize + mask + write {pipeline_s:.1f} s{rate}"]
    return "\n".join(lines)


def masking_line(manifest: Manifest, name: str) -> str:
    """What the masking of split `name` did, as its statistics in the manifest say."""
    m = manifest.masking_stats.get(name, {})
    if "noise_fraction" in m:
        return (f"noise {m['noise_fraction']:.3f}, mean span {m['mean_span_length']:.2f}, "
                f"spans/row {m['spans_per_row']:.1f}")
    if "masked_fraction" in m and manifest.objective == "mdlm":
        rates = [m.get(f"rate_{k}", 0) for k in range(10)]
        return (f"masked {m['masked_fraction']:.3f} of all tokens at rates t ~ U(0.001, 1]; rows per tenth of t: "
                + " ".join(f"{int(n):,}" for n in rates))
    if "masked_fraction" in m:  # of every token: special ones (the frame, </s> between documents) never are
        return f"masked {m['masked_fraction']:.3f} of all tokens, special ones never" + (
            f" (--mlm-probability {p:g} of the rest)" if (p := manifest.option("mlm_probability")) else "")
    if manifest.denoisers and m:
        return f"{len(manifest.denoisers)} denoisers: see the table by denoiser"
    if name.endswith("windows"):
        return "unmasked windows"
    if name == "dropped":
        return "text the build removed: document, reason, text"
    if manifest.splits[name].rows:
        return "masking statistics missing from the manifest"
    return "masked, no rows"  # validation at --validation-fraction 0: no statistics to give


WINDOW_FIGURES = {  # statistics.windows as the summary shows them: (label, format)
    "rows": ("rows", ","), "tokens_kept": ("tokens kept", ","), "tokens_dropped": ("dropped", ","),
    "tokens_padded": ("padded", ","), "token_utilisation": ("utilisation", ".3f"),
    "fragment_rate": ("rows cut inside a word", ".1%"), "unknown_tokens": ("unknown tokens", ","),
}
MISSING = "missing"  # how a figure the manifest lacks (and the splits cannot give) is shown: never as 0


def window_figures(out: Path, manifest: Manifest) -> tuple[dict, list[str]]:
    """The window statistics shown (WINDOW_FIGURES and unknown_fraction) and which of them were derived: each as
    the build recorded it; one the manifest lacks is counted from the splits where that is exact (rows from the
    windows splits' row counts; in the fixed layout every row holds the window's text in full, so tokens kept are
    rows x that length, none padded), else None (missing)."""
    recorded = manifest.window_stats
    w = {key: recorded.get(key) for key in (*WINDOW_FIGURES, "unknown_fraction")}
    if all(value is not None for value in w.values()):
        return w, []
    exact = {}
    if {"windows", "validation-windows"} <= manifest.splits.keys():
        exact["rows"] = manifest.splits["windows"].rows + manifest.splits["validation-windows"].rows
    rows = exact.get("rows") if w["rows"] is None else w["rows"]
    if manifest.fixed and rows is not None:
        exact |= {"tokens_kept": rows * text_length(out, manifest), "tokens_padded": 0,
                  "token_utilisation": 1.0 if rows else 0.0}
    derived = [key for key in exact if w[key] is None]
    return w | {key: exact[key] for key in derived}, derived


def text_length(out: Path, manifest: Manifest) -> int:
    """Tokens of text in a fixed-layout window: its length less the MLM frame of the build's tokenizer (span
    corruption has none)."""
    if manifest.objective != "mlm":
        return manifest.window_length
    from mlmprep.format.load import build_tokenizer
    from mlmprep.tokenizer.load import frame_ids

    prefix, suffix = frame_ids(build_tokenizer(out, manifest))
    return manifest.window_length - len(prefix) - len(suffix)


def figure(value: float | None, form: str) -> str:
    """A recorded or derived figure in its format; MISSING where there is none."""
    return MISSING if value is None else format(value, form)


def missing_figures_note(w: dict, derived: list[str]) -> list[str]:
    """A note when the manifest lacks window statistics: which figures were counted from the splits, which are
    missing."""
    missing = [label for key, (label, _) in WINDOW_FIGURES.items() if w[key] is None]
    if not missing and not derived:
        return []
    said = [f"{', '.join(WINDOW_FIGURES[key][0] for key in derived)} counted from the splits"] if derived else []
    said += [f"{', '.join(missing)} {MISSING}"] if missing else []
    return [f"note: the manifest lacks window statistics ({'; '.join(said)}); `mlmprep build ... --force` "
            "records them all"]


def denoiser_lines(manifest: Manifest) -> list[str]:
    """A ul2 or prefix build's denoisers in seed-0: each one's share of rows against its weight, its noise (target)
    fraction and mean span against its spec, and its mean encoder and decoder lengths."""
    seeds = manifest.seed_splits
    m = manifest.masking_stats.get(seeds[0], {}) if seeds else {}
    if not manifest.denoisers or not m:
        return []
    weights = denoiser_weights(manifest)
    lines = ["", f"{seeds[0]} by denoiser     mode    share (asked)   noise (asked)   mean span (asked)   "
                 "encoder  decoder"]
    for d, weight in zip(manifest.denoisers, weights):
        name = d["name"]
        span = (f"{m.get(f'{name}/mean_span_length', 0):>9.2f} ({d['mean_span_length']:g})" if d["kind"] == "span"
                else f"{'prefix':>9} {'':<5}")
        lines.append(f"  {name:<20}{d['mode'] or '-':<8}{m.get(f'{name}/share', 0):>6.3f} ({weight:.3f})   "
                     f"{m.get(f'{name}/noise_fraction', 0):>6.3f} ({d['noise_density']:g})  {span:<19}"
                     f"{m.get(f'{name}/encoder_length', 0):>8.1f}{m.get(f'{name}/decoder_length', 0):>9.1f}")
    return lines


def denoiser_weights(manifest: Manifest) -> list[float]:
    """Each denoiser's asked share of rows (--denoiser-weights renormalised; uniform when none were given)."""
    given = manifest.option("denoiser_weights") if manifest.objective == "ul2" else None
    raw = [float(w) for w in str(given).split(",")] if given else [1.0] * len(manifest.denoisers)
    total = sum(raw) or 1.0
    return [w / total for w in raw]


def disk_line(out: Path, manifest: Manifest) -> str:
    """The bytes the build takes (its splits' files as the manifest lists them, and the files beside them), the
    types its columns are stored as, and what one more seed (`remask`) adds: the bytes of one seed split. An
    int32 build whose ids fit in uint16 is told how to get the smaller format."""
    data = sum(split.bytes for split in manifest.splits.values())
    beside = sum(p.stat().st_size for p in Path(out).iterdir() if p.is_file()) if Path(out).is_dir() else 0
    dtypes = column_dtypes(manifest.format_version, manifest.objective, manifest.tokenizer.vocab_size)
    stored = (f"token ids {dtypes['input_ids']}" if dtypes["labels"] == dtypes["input_ids"]
              else f"token ids {dtypes['input_ids']}, labels {dtypes['labels']}")
    seeds = manifest.seed_splits
    seed = manifest.splits[seeds[0]].bytes if seeds else 0
    line = (f"disk: {(data + beside) / 1e6:.1f} MB ({stored}, format {manifest.format_version}); "
            f"each further seed adds {seed / 1e6:.1f} MB")
    if manifest.format_version < FORMAT_VERSION == format_version(manifest.tokenizer.vocab_size):
        line += f"; `mlmprep build ... --force` rebuilds it as format {FORMAT_VERSION}, about half the size"
    return line


def split_order(name: str) -> tuple[int, int, str]:
    """Sort key: windows, validation-windows, seed-0, seed-1, ..., seed-10 (by number), validation; the same
    order whether the manifest comes from the build (insertion order) or from disk (keys sorted as text)."""
    if name.startswith("seed-") and name[5:].isdigit():
        return 2, int(name[5:]), name
    return {"windows": 0, "validation-windows": 1, "validation": 3}.get(name, 4), 0, name


def tokenizer_line(manifest: Manifest) -> str:
    """Which tokenizer, and the vocabulary it has: for one trained here, against the --vocab-size asked."""
    reached, given = manifest.tokenizer.vocab_size, manifest.option("tokenizer")
    modes = {d["mode"]: d["mode_id"] for d in manifest.denoisers if d["mode"]}
    added = "; mode tokens " + ", ".join(f"{mode} {idx}" for mode, idx in modes.items()) + (
        " (special tokens: added to it where it had none)" if given else "") if modes else ""
    if given:
        return f"tokenizer: {given}, vocabulary {reached:,}{added}"
    name = TOKENIZER_TYPES.get(manifest.tokenizer.type, "Unigram")  # builds before the type was recorded
    return (f"tokenizer: {name} trained on the corpus, {vocabulary_reached(reached, manifest.option('vocab_size'))}"
            f"{added}")


def vocabulary_reached(reached: int, asked: int) -> str:
    """The vocabulary a trained tokenizer reached, saying so when the corpus gave fewer pieces than asked."""
    if reached >= asked:
        return f"vocabulary {reached:,}"
    return (f"vocabulary {reached:,}, short of --vocab-size {asked:,} "
            "(the trainer kept no more pieces of this corpus; more text gives more)")


UNKNOWN_WARN = 0.01  # above this fraction of unknown tokens the tokenizer does not fit the corpus


def unknown_warning(windows: dict) -> list[str]:
    """A warning line when more than UNKNOWN_WARN of the tokens kept are the tokenizer's unknown token."""
    fraction = windows.get("unknown_fraction")
    if fraction is None or fraction <= UNKNOWN_WARN:
        return []
    return [f"warning: {fraction:.1%} of the tokens are unknown (<unk>): the tokenizer does not cover this corpus's "
            "characters; train one on it (leave out --tokenizer) or check --doc-sep and cleaning"]


LOSSES = (  # corpus.stats keys that count something dropped or replaced, and how to say it
    ("blank_skipped", "blank documents skipped"),
    ("null_skipped", "null records skipped"),
    ("missing_field_skipped", "records without the {column!r} field skipped"),
    ("decode_replaced_lines", "lines with undecodable bytes replaced (U+FFFD)"),
    ("decode_skipped_lines", "lines with undecodable bytes skipped"),
    ("truncated_files", "compressed files read up to damaged data"),
    ("characters_removed", "control/non-text characters removed by cleaning"),
    ("documents_emptied", "documents emptied by cleaning"),
)


def corpus_losses(stats: dict, column: str) -> list[str]:
    """One line of everything the corpus stage dropped or replaced (nothing is lost silently); `column`: the
    text field (--text-column)."""
    parts = [f"{stats[key]:,} {what.format(column=column)}" for key, what in LOSSES if stats.get(key)]
    skipped = stats.get("files_skipped") or []
    if skipped:
        parts.append(f"{len(skipped)} files skipped ({', '.join(skipped[:3])}{', ...' if len(skipped) > 3 else ''})")
    return [f"dropped or replaced: {'; '.join(parts)}"] if parts else []


MISSING_FIELD_WARN = 0.01  # above this share of JSON records without the text field, --text-column is doubtful


def missing_field_warning(stats: dict, column: str) -> list[str]:
    """A warning line when more than MISSING_FIELD_WARN of the JSON records lack the text field, with the fields
    they have (the build refuses over half: jsonl.missing_field_error)."""
    missing, records = stats.get("missing_field_skipped", 0), stats.get("json_records", 0)
    if not records or missing <= MISSING_FIELD_WARN * records:  # no records counted: a build by an older mlmprep
        return []
    return [f"warning: {missing / records:.1%} of the JSON records ({missing:,} of {records:,}) have no {column!r} "
            f"field and were skipped (their fields: {common_fields(stats.get('missing_field_keys', {}))}); "
            "check --text-column"]


def dedup_lines(stats: dict) -> list[str]:
    """What dedup removed and how many documents were held out, then the largest clusters of duplicates, each
    with the start of its first (kept) document; none for a build made before dedup."""
    dedup = stats.get("dedup")
    counts = ("documents", "documents_dropped", "characters_dropped", "clusters", "validation_documents")
    if not (isinstance(dedup, dict) and isinstance(dedup.get("method"), str)
            and all(type(dedup.get(k)) is int for k in counts)):  # none, or another version's (an open mapping)
        return []
    clusters = dedup.get("largest_clusters")
    clusters = [c for c in clusters if isinstance(c, dict) and type(c.get("size")) is int
                and isinstance(c.get("excerpt"), str)] if isinstance(clusters, list) else []
    share = dedup["documents_dropped"] / dedup["documents"] if dedup["documents"] else 0.0
    lines = [f"dedup {dedup['method']}: {dedup['documents_dropped']:,} of {dedup['documents']:,} documents dropped "
             f"({share:.1%}; {dedup['characters_dropped']:,} characters) in {dedup['clusters']:,} clusters of "
             f"duplicates; {dedup['validation_documents']:,} documents held out whole for validation"]
    lines += [f"  {c['size']:,} copies: {c['excerpt'][:100]!r}" for c in clusters]
    return lines


def paragraph_lines(stats: dict) -> list[str]:
    """What --dedup-paragraphs removed, and the start of the first line it removed (a build of an earlier version
    has none); none for a build without it."""
    p = stats.get("paragraphs")
    if not p:
        return []
    return [f"paragraph dedup: {p['lines_removed']:,} of {p['lines']:,} lines removed (at least "
            f"{p['threshold']:.0%} of their word 13-grams in earlier lines; {p['characters_removed']:,} characters), "
            f"{p['documents_emptied']:,} documents left blank dropped",
            *([f"  first removed: {p['example'][:100]!r}"] if p.get("example") else [])]


def exclusion_lines(stats: dict) -> list[str]:
    """What --exclude cut out of the corpus, and the words of its first match (a build of an earlier version has
    none); none for a build without it."""
    x = stats.get("exclusion")
    if not x:
        return []
    grams = f"{x['ngrams']:,} distinct {x['ngram']}-word n-grams"  # a build of an earlier version: no shorter ones
    if "min_words" in x:
        short, ignored = x["documents_short"], x["documents_ignored"]
        whole = (f", and {short:,} text{'s' * (short != 1)} of {x['min_words']} to {x['ngram'] - 1} words whole"
                 if x["min_words"] < x["ngram"] else "")
        grams = (f"{x['ngrams']:,} distinct n-grams: of {x['ngram']} words{whole}; {ignored:,} "
                 f"text{'s' * (ignored != 1)} under {x['min_words']} words ignored")
    return [f"excluded: {x['documents']:,} evaluation documents ({grams}) matched {x['documents_matched']:,} "
            f"documents; {x['characters_removed']:,} characters cut out "
            f"({x['margin']} on each side of a match), {x['documents_dropped']:,} documents dropped whole, "
            f"{x['pieces']:,} pieces kept as documents",
            *([f"  first match: {x['example'][:100]!r}"] if x.get("example") else [])]


def filter_lines(stats: dict) -> list[str]:
    """What --filters removed, rule by rule: documents (dropped, or that lost lines), characters and the start of
    the first removal; none for a build without filters."""
    f = stats.get("filters")
    if not f:
        return []
    lines = [f"filters: {sum(c['characters'] for c in f.values()):,} characters removed; by rule, the documents it "
             "dropped or took lines from, the characters and the start of its first removal:"]
    width = max(map(len, f))
    lines += [f"  {rule:<{width}}  {c['documents']:>9,}  {c['characters']:>12,}  {c['example'][:70]!r}"
              for rule, c in sorted(f.items(), key=lambda item: -item[1]["characters"])]
    return lines


def contamination_lines(stats: dict) -> list[str]:
    """The validation set's contamination by training text before and after --decontaminate, in GPT-3's measure
    (documents sharing an n-gram with training) and Lee et al.'s (tokens inside a long exact match)."""
    c = stats.get("contamination")
    if not c:
        return []

    def measures(m: dict) -> str:
        docs = (f"{fraction(m['documents_with_ngram'], m['documents'])} of {m['documents']:,} documents share a "
                f"{c['ngram']}-word n-gram with training")
        if "tokens" not in m:
            return docs
        return (f"{docs}, {fraction(m['tokens_in_match'], m['tokens'])} of their tokens lie in a "
                f"{c['match_tokens']}-token exact match")

    return [f"contamination of the validation set by training text: {measures(c['before'])}",
            f"  decontaminated: {c['documents_moved']:,} documents with more than {c['threshold']:.0%} of their "
            f"n-grams in training moved to training; now {measures(c['after'])}"]


def fraction(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0%"


def wrapped_prose_hint(stats: dict) -> list[str]:
    """A hint line when .txt files read one document per line look like hard-wrapped prose (every line a short
    "document", `</s>` between them): with --doc-sep blank each paragraph is one document."""
    prose = stats.get("wrapped_prose") or {}
    if not prose.get("files"):
        return []
    files, mean = prose["files"], prose["characters"] / max(prose["documents"], 1)
    return [f"hint: {files:,} .txt file{'s' * (files != 1)} ({prose['lines']:,} lines) look{'s' * (files == 1)} "
            f"like hard-wrapped prose, read one document per line (mean {mean:,.0f} characters); "
            "--doc-sep blank (one document per paragraph) probably fits"]


def as_text_note(stats: dict) -> list[str]:
    """A note line naming the compressed files read as text for want of a known format inside their name."""
    names = stats.get("files_as_text") or []
    if not names:
        return []
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return [f"note: {len(names):,} compressed file{'s' * (len(names) != 1)} with no known format inside read as "
            f"text, one document per line ({shown}); rename to NAME.txt.gz (or .jsonl.gz, .csv.gz, ...) to say "
            "what they hold"]


def first_rows(split_dir: Path, column: str, n: int) -> list[np.ndarray]:
    """The first `n` rows (none for n <= 0) of one column of a split."""
    rows = []
    if n <= 0:
        return rows
    for chunk in iter_rows(split_dir, column):
        for i in range(len(chunk)):
            rows.append(chunk.values[chunk.offsets[i] : chunk.offsets[i + 1]])
            if len(rows) == n:
                return rows
    return rows


def show_examples(out: Path, manifest: Manifest, *, split: str = "seed-0", n: int = 3) -> str:
    """Decode the first `n` rows of `split`: model input, targets, and the text with masked spans in [[ ]]."""
    from mlmprep.errors import CacheError, ConfigError
    from mlmprep.format.load import build_tokenizer
    from mlmprep.tokenizer.load import special_ids

    if n < 0:
        raise ConfigError(f"--examples must be 0 or more, got {n}")
    if split not in manifest.splits:
        raise CacheError(f"--split {split}: not in {out}; "
                         f"splits: {', '.join(sorted(manifest.splits, key=split_order))}")
    tok = build_tokenizer(out, manifest)  # the caller has checked the split's files (load.check_splits)
    if split.endswith("windows"):  # the stored windows before masking: one `tokens` column
        return "\n".join(f"--- {split} row {i} ({len(x)} tokens)\n"
                         f"tokens:  {tok.decode(x.tolist(), skip_special_tokens=False)}"
                         for i, x in enumerate(first_rows(out / split, "tokens", n)))
    ids = special_ids(tok)
    inputs, labels = first_rows(out / split, "input_ids", n), first_rows(out / split, "labels", n)
    denoisers = [int(d[0]) for d in first_rows(out / split, "denoiser", n)] if manifest.denoisers else []
    rates = [float(r[0]) for r in first_rows(out / split, "rate", n)] if manifest.objective == "mdlm" else []
    blocks = []
    for i, (x, y) in enumerate(zip(inputs, labels)):
        about = ""
        if denoisers:
            d = manifest.denoisers[denoisers[i]]
            about = f", denoiser {d['name']}" + (f" {d['mode']}" if d["mode"] else "")
            content = x[1:] if d["mode"] else x
            shown = merge_spans_text(tok, content, y, ids.sentinels) if d["kind"] == "span" else (
                f"{tok.decode(content[:-1].tolist(), skip_special_tokens=False)} [[{tok.decode(y[:-1].tolist())}]]")
        elif manifest.objective == "span":
            shown = merge_spans_text(tok, x, y, ids.sentinels)
        else:
            shown = mlm_text(tok, x, y, ids.mask)
            about = f", rate {rates[i]:.3f}" if rates else ""
        blocks.append(
            f"--- {split} row {i} ({len(x)} input, {len(y)} label tokens{about})\n"
            f"input:   {tok.decode(x.tolist(), skip_special_tokens=False)}\n"
            f"targets: {tok.decode(y[y != -100].tolist(), skip_special_tokens=False)}\n"
            f"text:    {shown}"
        )
    if blocks and manifest.objective in ("mlm", "mdlm"):
        blocks.append("(text: [[w]] masked, [[w->r]] replaced by a random token r, [[w=]] chosen but kept)")
    return "\n".join(blocks)


def merge_spans_text(tok, enc: np.ndarray, labels: np.ndarray, sentinels: np.ndarray) -> str:
    """The original text of a span-corrupted row with each masked span shown as [[...]]."""

    tokens, noise = merge_spans(enc, labels, sentinels)
    return marked_text(tok, tokens, noise.astype(np.int8), lambda piece, _run: f"[[{piece}]]")


def mlm_text(tok, inputs: np.ndarray, labels: np.ndarray, mask_id: int | None) -> str:
    """The original text of an MLM row with each target marked: [[w]] masked, [[w->r]] replaced by the
    random token r, [[w=]] chosen but kept (BERT's 80/10/10)."""
    chosen = labels != -100
    original = np.where(chosen, labels, inputs)
    kinds = np.where(~chosen, 0, np.where(inputs == mask_id, 1, np.where(inputs == labels, 3, 2))).astype(np.int8)

    def mark(piece: str, run: slice) -> str:
        kind = kinds[run.start]
        if kind == 2:
            return f"[[{piece}->{tok.decode(inputs[run].tolist(), skip_special_tokens=False)}]]"
        return f"[[{piece}=]]" if kind == 3 else f"[[{piece}]]"

    return marked_text(tok, original, kinds, mark)


def marked_text(tok, tokens: np.ndarray, kinds: np.ndarray, mark) -> str:
    """Decode `tokens` in runs of equal `kinds`; runs of a nonzero kind are shown as mark(text, slice)."""
    change = np.flatnonzero(np.diff(kinds)) + 1
    bounds = np.concatenate([[0], change, [len(tokens)]])
    text = ""
    for start, stop in zip(bounds[:-1], bounds[1:]):
        run = slice(int(start), int(stop))
        piece = tok.decode(tokens[run].tolist(), skip_special_tokens=False)
        text += (" " if text and starts_word(tok, int(tokens[start])) else "") + (mark(piece, run) if kinds[start]
                                                                                 else piece)
    return text


def starts_word(tok, token: int) -> bool:
    """Whether a token begins a word (a space goes before it in text): a ▁ or Ġ piece, or a WordPiece one
    without ##."""
    piece = tok.id_to_token(token) or ""
    return piece.startswith(("▁", "Ġ")) or (type(tok.model).__name__ == "WordPiece" and not piece.startswith("##"))


def merge_spans(enc: np.ndarray, labels: np.ndarray, sentinels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undo span corruption of one row: (the window's tokens, True where a token was masked)."""
    tokens, span = unmask_spans(enc, labels, sentinels)
    return tokens, span >= 0


def unmask_spans(enc: np.ndarray, labels: np.ndarray, sentinels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undo span corruption of one row: (the window's tokens, per token the k of the sentinel <extra_id_k> that
    stood for it, -1 for a kept token).

    Each sentinel in `enc` is replaced by what follows the same sentinel in `labels`, up to the next one;
    the final </s> of both is dropped.
    """
    number = {int(s): k for k, s in enumerate(sentinels)}
    starts = np.flatnonzero(np.isin(labels[:-1], sentinels))
    ends = np.append(starts[1:], len(labels) - 1)
    spans = {int(labels[s]): labels[s + 1 : e] for s, e in zip(starts, ends)}
    tokens, span = [], []
    for t in enc[:-1].tolist():
        if t in spans:
            tokens.extend(spans[t].tolist())
            span.extend([number[t]] * len(spans[t]))
        else:
            tokens.append(t)
            span.append(-1)
    return np.asarray(tokens, dtype=np.int32), np.asarray(span, dtype=np.int32)
