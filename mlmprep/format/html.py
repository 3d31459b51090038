"""The HTML report of a build and of a training run: one self-contained page (inline CSS, JS and SVG; nothing
fetched) that shows the manifest, decoded examples with their noise spans under every seed, and charts of what
the masking and the windowing did, checked against the T5 reference. A large build is sampled, so the page
stays small: a few example rows, statistics over at most SAMPLE_ROWS rows and TOKEN_SCAN window tokens."""

from __future__ import annotations

import json
import math
import os
from html import escape
from pathlib import Path

import numpy as np

from mlmprep.errors import ConfigError
from mlmprep.format import svg
from mlmprep.format.report import (
    corpus_losses,
    disk_line,
    missing_field_warning,
    split_order,
    starts_word,
    tokenizer_line,
    unknown_warning,
    unmask_spans,
    wrapped_prose_hint,
)
from mlmprep.format.write import iter_rows

TEMPLATE = Path(__file__).with_name("report.html")
MARK = "<!-- mlmprep report -->"  # the page's first line: a file that starts with it may be overwritten
SAMPLE_ROWS = 2000  # rows of seed-0 whose span lengths and noise density the charts count
TOKEN_SCAN = 20_000_000  # tokens of windows/ read (from the start) for document lengths and piece counts
TOP_PIECES = 20
LONGEST_SPAN = 15  # the span-length chart's last bar counts this length and longer


# ----------------------------------------------------------------------------- the T5 reference
def t5_span_counts(length: int, noise_density: float, mean_span_length: float) -> tuple[int, int]:
    """(noise tokens, noise spans) of a row of `length` tokens as T5's random_spans_noise_mask computes them
    (round half to even, noise clamped to [1, length - 1], at least one span, each kept part non-empty)."""
    noise = min(max(round(length * noise_density), 1), length - 1)
    spans = max(round(noise / mean_span_length), 1)
    return noise, min(spans, noise, length - noise)


def t5_span_length_distribution(noise: int, spans: int) -> np.ndarray:
    """P(a noise span has length j), j = 0..noise, under T5's _random_segmentation: `noise` tokens cut into
    `spans` non-empty parts, every composition equally likely. A part of length j leaves noise - j tokens to
    the other spans - 1 parts: C(noise - j - 1, spans - 2) of the C(noise - 1, spans - 1) compositions."""
    p = np.zeros(noise + 1)
    if spans == 1:
        p[noise] = 1.0
        return p
    total = math.comb(noise - 1, spans - 1)
    for j in range(1, noise - spans + 2):
        p[j] = math.comb(noise - j - 1, spans - 2) / total
    return p


def reference_span_lengths(row_lengths: np.ndarray, noise_density: float, mean_span_length: float) -> np.ndarray:
    """Expected share of spans of each length (index = length) over rows of these lengths: each row's
    distribution weighted by its number of spans."""
    expected: dict[int, np.ndarray] = {}
    for length, rows in zip(*np.unique(row_lengths, return_counts=True)):
        noise, spans = t5_span_counts(int(length), noise_density, mean_span_length)
        expected[noise] = expected.get(noise, 0) + rows * spans * t5_span_length_distribution(noise, spans)
    out = np.zeros(max(expected, default=0) + 1)
    for noise, counts in expected.items():
        out[: noise + 1] += counts
    return out / max(out.sum(), 1e-12)


# ----------------------------------------------------------------------------- what the page shows
def sample_rows(n: int, k: int) -> np.ndarray:
    """k row numbers spread evenly over 0..n-1 (all of them when n <= k), the first and the last included."""
    return np.unique(np.linspace(0, n - 1, min(n, k)).round().astype(np.int64)) if n and k > 0 else np.zeros(0, int)


class Pieces:
    """The token texts the page's examples use, numbered densely: the page carries each text once."""

    def __init__(self, tok, ids):
        self.tok, self.ids, self.index = tok, ids, {}
        self.texts: list[str] = []
        self.kinds: list[int] = []  # -1 text, -2 another special token, k >= 0 the sentinel <extra_id_k>
        self.sentinel = {int(s): k for k, s in enumerate(ids.sentinels)}
        self.special = set(ids.all().tolist())

    def __call__(self, tokens) -> list[int]:
        return [self.add(int(t)) for t in tokens]

    def add(self, token: int) -> int:
        if token not in self.index:
            self.index[token] = len(self.texts)
            if token in self.special:
                text = self.tok.id_to_token(token) or f"<{token}>"
                self.kinds.append(self.sentinel.get(token, -2))
            else:
                text = self.tok.decode([token], skip_special_tokens=False)  # "" for a lone ▁, a space
                text = " " + text if starts_word(self.tok, token) else text or (self.tok.id_to_token(token) or "")
                self.kinds.append(-1)
            self.texts.append(text)
        return self.index[token]


def examples(build: Path, manifest: dict, tok, ids, rows: np.ndarray) -> dict:
    """The example rows under every seed, as piece numbers: span rows with, per token of the window, the
    sentinel that stands for it (-1: kept); mlm rows with their labels (-1: not a target)."""
    from mlmprep.format.load import open_split

    pieces, out = Pieces(tok, ids), []
    seeds = [s["split"] for s in manifest["seeds"]]
    splits = {name: open_split(build / name, objective=manifest["objective"]) for name in seeds}
    windows = {}
    if manifest["objective"] == "span" and "windows" in manifest["splits"]:
        wanted = {int(r) for r in rows}
        for start, chunk in batches_with_start(build / "windows", "tokens"):
            for r in wanted & set(range(start, start + len(chunk))):
                windows[r] = chunk.values[chunk.offsets[r - start] : chunk.offsets[r - start + 1]]
            if len(windows) == len(wanted):
                break
    for r in rows.tolist():
        views = []
        for name in seeds:
            x, y = (np.asarray(v, dtype=np.int64) for v in splits[name].row(r).values())
            if manifest["objective"] == "span":
                tokens, span = unmask_spans(x, y, ids.sentinels)
                stored = windows.get(r)
                views.append({"split": name, "original": pieces(tokens), "span": span.tolist(), "input": pieces(x),
                              "labels": pieces(y),
                              "differs": stored is not None and not np.array_equal(stored, tokens)})
            else:
                chosen = y != -100
                views.append({"split": name, "original": pieces(np.where(chosen, y, x)), "input": pieces(x),
                              "labels": [pieces([t])[0] if c else -1 for t, c in zip(y.tolist(), chosen.tolist())]})
        out.append({"row": r, "seeds": views})
    mask = pieces.index.get(ids.mask, -1) if ids.mask is not None else -1
    return {"objective": manifest["objective"], "texts": pieces.texts, "kinds": pieces.kinds, "mask": mask,
            "rows": out}


def batches_with_start(split_dir: Path, column: str):
    """(first row number, Rows) of each record batch of a split's column, in order."""
    start = 0
    for chunk in iter_rows(split_dir, column):
        yield start, chunk
        start += len(chunk)


def span_statistics(split, rows: np.ndarray, sentinels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(span lengths, each row's window length, each row's noise density) of the given rows of a span split."""
    lengths, windows, density = [], [], []
    for r in rows.tolist():
        labels = np.asarray(split.labels.row(r), dtype=np.int64)
        starts = np.flatnonzero(np.isin(labels[:-1], sentinels))
        spans = np.diff(np.append(starts, len(labels) - 1)) - 1
        noise = int(spans.sum())
        window = len(split.input_ids.row(r)) - len(starts) - 1 + noise
        lengths.append(spans)
        windows.append(window)
        density.append(noise / window)
    return np.concatenate(lengths) if lengths else np.zeros(0, int), np.array(windows), np.array(density)


def mlm_density(split, rows: np.ndarray) -> np.ndarray:
    """The share of each row's tokens that are targets (labels != -100)."""
    return np.array([float(np.mean(np.asarray(split.labels.row(r)) != -100)) for r in rows.tolist()])


def window_scan(build: Path, manifest: dict) -> tuple[np.ndarray, int, int]:
    """(token counts by id, tokens read, rows read) over the first TOKEN_SCAN tokens of windows/."""
    counts = np.zeros(manifest["tokenizer"]["vocab_size"], dtype=np.int64)
    tokens = rows = 0
    if "windows" in manifest["splits"]:
        for _, chunk in batches_with_start(build / "windows", "tokens"):
            counts += np.bincount(chunk.values, minlength=len(counts))[: len(counts)]
            tokens, rows = tokens + len(chunk.values), rows + len(chunk)
            if tokens >= TOKEN_SCAN:
                break
    return counts, tokens, rows


def documents(build: Path, manifest: dict, rows: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(tokens per document, windows per document) of the documents that begin and end inside the first `rows`
    windows: with --pack stream a document ends at its </s>; with --pack doc at its first row shorter than a
    window (a document of a whole number of windows runs on into the next). None for --method text."""
    config = manifest["config"]
    if manifest["method"] != "tokens" or not rows:
        return None
    flat, offsets = [], [0]
    for _, chunk in batches_with_start(build / "windows", "tokens"):
        flat.append(chunk.values)
        offsets.extend((chunk.offsets[1:] + offsets[-1]).tolist())
        if len(offsets) > rows:
            break
    values, offsets = np.concatenate(flat), np.asarray(offsets[: rows + 1])
    values = values[: offsets[-1]]
    if config.get("pack", "stream") == "stream":
        ends = np.flatnonzero(values == manifest["tokenizer"]["eos_id"]) + 1  # one past each document's </s>
        starts, ends = ends[:-1], ends[1:]  # the text before the first </s> began in an earlier window
    else:
        short = np.flatnonzero(np.diff(offsets) < manifest["window_length"])
        ends = offsets[short + 1]
        starts = np.concatenate([[0], ends[:-1]])
    first = np.searchsorted(offsets, starts, side="right") - 1
    last = np.searchsorted(offsets, ends - 1, side="right") - 1
    return ends - starts, last - first + 1


# ----------------------------------------------------------------------------- charts
def histogram(values: np.ndarray, bins: int = 12) -> tuple[list[str], list[float]]:
    """(labels, shares) of `values`: one bar per distinct value when there are few, else `bins` equal bins."""
    if not len(values):
        return [], []
    distinct = np.unique(values)
    if len(distinct) <= bins:
        return [f"{v:.3g}" for v in distinct], [float(np.mean(values == v)) for v in distinct]
    counts, edges = np.histogram(values, bins=bins)
    return [f"{(a + b) / 2:.3g}" for a, b in zip(edges[:-1], edges[1:])], (counts / len(values)).tolist()


def span_chart(lengths: np.ndarray, reference: np.ndarray, rows: int, split: str) -> str:
    """Observed span lengths of a split against the T5 reference, as shares; the last bar is that length or more."""
    top = LONGEST_SPAN
    observed = np.bincount(np.minimum(lengths, top), minlength=top + 1)[1 : top + 1] / max(len(lengths), 1)
    expected = np.append(reference, np.zeros(max(0, top + 1 - len(reference))))
    expected = np.append(expected[1:top], expected[top:].sum())
    labels = [str(j) for j in range(1, top)] + [f"{top}+"]
    return svg.bars(f"Noise span lengths: {len(lengths):,} spans of {rows:,} rows of {split}", labels,
                    observed.tolist(), reference=expected.tolist(), xlabel="span length (tokens)",
                    ylabel="share of spans", names=(split, "T5 random_spans_noise_mask"), percent=True)


def mlm_kind_chart(split, rows: np.ndarray, mask_id: int | None) -> str:
    """The shares of targets masked, replaced by a random token and kept, against BERT's 80/10/10."""
    kinds = np.zeros(3)
    for r in rows.tolist():
        x, y = np.asarray(split.input_ids.row(r), np.int64), np.asarray(split.labels.row(r), np.int64)
        chosen = y != -100
        masked = chosen & (x == mask_id)
        kept = chosen & (x == y)
        kinds += [masked.sum(), (chosen & ~masked & ~kept).sum(), kept.sum()]
    return svg.bars(f"Targets by kind: {int(kinds.sum()):,} targets of {len(rows):,} rows", ["<mask>", "random",
                    "kept"], (kinds / max(kinds.sum(), 1)).tolist(), reference=[0.8, 0.1, 0.1], xlabel="target",
                    ylabel="share of targets", names=("observed", "BERT 80/10/10"), percent=True)


def log2_bins(values: np.ndarray) -> tuple[list[str], list[float]]:
    """(labels, counts) in bins [2^k, 2^(k+1))."""
    if not len(values):
        return [], []
    k = np.floor(np.log2(np.maximum(values, 1))).astype(int)
    counts = np.bincount(k)
    return [svg.number(2**i) for i in range(len(counts))], counts.tolist()


def build_charts(build: Path, manifest: dict, tok, ids) -> list[str]:
    """The build's charts: span lengths (or MLM target kinds), noise density per row, document lengths, windows
    per document and the most frequent pieces."""
    from mlmprep.format.load import open_split

    charts, config = [], manifest["config"]
    name = manifest["seeds"][0]["split"] if manifest["seeds"] else None
    if name and manifest["splits"][name]["rows"]:
        split = open_split(build / name, objective=manifest["objective"])
        rows = sample_rows(len(split), SAMPLE_ROWS)
        if manifest["objective"] == "span":
            lengths, windows, density = span_statistics(split, rows, ids.sentinels)
            reference = reference_span_lengths(windows, config["noise_density"], config["mean_span_length"])
            charts.append(span_chart(lengths, reference, len(rows), name))
            what = f"--noise-density {config['noise_density']:g}"
        else:
            charts.append(mlm_kind_chart(split, rows, ids.mask))
            density, what = mlm_density(split, rows), f"--mlm-probability {config['mlm_probability']:g}"
        labels, shares = histogram(density)
        charts.append(svg.bars(f"Noise density per row: {len(rows):,} rows of {name} ({what})", labels, shares,
                               xlabel="share of the row's tokens that are targets", ylabel="share of rows",
                               percent=True))
    counts, scanned, scanned_rows = window_scan(build, manifest)
    docs = documents(build, manifest, scanned_rows)
    total = manifest["splits"].get("windows", {}).get("rows", 0)
    of = f"the first {scanned_rows:,} windows" if scanned_rows < total else "windows/"
    if docs is not None and len(docs[0]):
        tokens, spread = docs
        labels, values = log2_bins(tokens)
        charts.append(svg.bars(f"Document lengths: {len(tokens):,} documents in {of} (median {np.median(tokens):,.0f} "
                               "tokens)", labels, values, xlabel="tokens (a bar: from its label to twice that)",
                               ylabel="documents"))
        top = 10
        per = np.bincount(np.minimum(spread, top), minlength=top + 1)[1:]
        charts.append(svg.bars("Windows per document (the windows each document's tokens fall in)",
                               [str(i) for i in range(1, top)] + [f"{top}+"], per.tolist(), xlabel="windows",
                               ylabel="documents"))
    elif manifest["method"] == "text":
        charts.append('<figure class="chart note"><figcaption>Documents</figcaption><p>--method text cuts the joined '
                      "text of every document into segments, so rows keep no document boundaries.</p></figure>")
    order = np.argsort(-counts, kind="stable")[:TOP_PIECES]
    order = order[counts[order] > 0]
    charts.append(svg.hbars(f"Most frequent pieces: {scanned:,} tokens of {of}",
                            [shown_piece(tok.id_to_token(int(t)) or str(t)) for t in order], counts[order].tolist(),
                            xlabel="occurrences"))
    return charts


def shown_piece(piece: str) -> str:
    """A vocabulary piece as a label: whitespace escaped (a newline piece shows as \\n)."""
    return piece if piece.strip() else piece.encode("unicode_escape").decode("ascii").replace(" ", "\\x20")


def run_charts(run: Path) -> tuple[list[str], dict]:
    """A training run's curves from RUN/metrics.jsonl (training and validation loss, validation accuracy,
    learning rate) and its final metrics."""
    path = run / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.is_file() else []
    train = [r for r in records if "lr" in r and r.get("loss") is not None]
    evals = [r for r in records if "eval_loss" in r]
    final_path = run / "final_metrics.json"
    final = json.loads(final_path.read_text(encoding="utf-8")) if final_path.is_file() else {}

    def series(name, colour, rows, key):
        return name, colour, [r["step"] for r in rows], [r.get(key) for r in rows]

    training, validation = ("training", svg.TRAINING, train), ("validation", svg.VALIDATION, evals)
    return [svg.lines("Loss", [series(*training, "loss"), series(*validation, "eval_loss")], xlabel="step",
                      ylabel="loss per target token"),
            svg.lines("Validation token accuracy", [series(*validation, "eval_accuracy")], xlabel="step",
                      ylabel="accuracy"),
            svg.lines("Learning rate", [series("learning rate", svg.RATE, train, "lr")], xlabel="step",
                      ylabel="learning rate")], final


# ----------------------------------------------------------------------------- the page
def table(rows: list[tuple[str, str]], cls: str = "facts") -> str:
    """A two-column table of (name, value) rows; values are text, escaped here."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def summary(build: Path, manifest: dict) -> str:
    """The manifest as the page's first section: facts, warnings, the splits and every option."""
    w, config, tok = manifest["statistics"]["windows"], manifest["config"], manifest["tokenizer"]
    stats = manifest["corpus"]["stats"]
    column = config.get("text_column", "text")
    notes = [*corpus_losses(stats, column), *missing_field_warning(stats, column), *wrapped_prose_hint(stats),
             *unknown_warning(w)]
    seeds = ", ".join(s["split"] for s in manifest["seeds"]) or "none"
    values = ", ".join(str(s["seed"]) for s in manifest["seeds"][:4]) + (", …" if len(manifest["seeds"]) > 4 else "")
    facts = [
        ("build", f"{build}  (format {manifest['format_version']}, mlmprep {manifest['mlmprep_version']})"),
        ("objective", f"{manifest['objective']}, method {manifest['method']}, input length "
                      f"{manifest['input_length']} (windows of {manifest['window_length']} tokens, targets "
                      f"{manifest['target_length']})"),
        ("corpus", manifest["corpus"]["description"]),
        ("tokenizer", tokenizer_line(manifest).removeprefix("tokenizer: ") + f"; sha256 {tok['sha256'][:12]}…"),
        ("rows", f"{w['rows']:,} windows; rows cut inside a word {w['fragment_rate']:.1%}"),
        ("tokens", f"kept {w['tokens_kept']:,}, dropped {w['tokens_dropped']:,}, padded {w['tokens_padded']:,} "
                   f"(utilisation {w['token_utilisation']:.3f})"),
        ("unknown tokens", f"{w.get('unknown_tokens', 0):,} ({w.get('unknown_fraction', 0.0):.3%} of the tokens kept)"),
        ("seeds", f"{len(manifest['seeds'])}: {seeds} (masking seeds {values}; validation "
                  f"{manifest.get('validation_seed', '-')})"),
        ("disk", disk_line(build, manifest).removeprefix("disk: ")),
    ]
    if total := manifest.get("timings", {}).get("total_s"):
        facts.append(("built in", f"{total:.1f} s"))
    masking = manifest["statistics"]["masking"]
    split_rows = []
    for name, split in sorted(manifest["splits"].items(), key=lambda item: split_order(item[0])):
        m = masking.get(name, {})
        what = (f"noise {m['noise_fraction']:.3f}, mean span {m['mean_span_length']:.2f}, spans/row "
                f"{m['spans_per_row']:.1f}" if "noise_fraction" in m else
                f"masked {m['masked_fraction']:.3f} of all tokens" if "masked_fraction" in m else
                "unmasked windows" if name.endswith("windows") else "masked, no rows")
        mb = sum(f["bytes"] for f in split["files"]) / 1e6
        split_rows.append(f"<tr><td>{escape(name)}</td><td>{split['rows']:,}</td><td>{mb:,.1f}</td>"
                          f"<td>{escape(what)}</td></tr>")
    options = table([(k, json.dumps(v)) for k, v in sorted(config.items())], "options")
    return (f"{table(facts)}{''.join(f'<p class=warn>{escape(n)}</p>' for n in notes)}"
            '<table class="splits"><tr><th>split</th><th>rows</th><th>MB</th><th>masking</th></tr>'
            f"{''.join(split_rows)}</table><details><summary>every option of the build</summary>{options}</details>")


def run_section(run: Path) -> str:
    """A training run: its options, final metrics and curves."""
    charts, final = run_charts(run)
    config_path = run / "train_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    shown = [(k, f"{v:.4g}" if isinstance(v, float) else str(v)) for k, v in final.items()]
    facts = table([("run", str(run)), ("data", str(config.get("data", "-"))), ("model", str(config.get("model", "-")))]
                  + shown)
    options = table([(k, json.dumps(v)) for k, v in sorted(config.items())], "options")
    return (f'<section id="run"><h2>Training run</h2>{facts}<details><summary>every option of the run</summary>'
            f'{options}</details><div class="charts">{"".join(charts)}</div></section>')


def report_page(build: Path | None, run: Path | None, *, examples_shown: int = 4, first_seed: str | None = None) -> str:
    """The whole page: the build's summary, examples and charts (when `build`), a run's curves (when `run`)."""
    from mlmprep.format.load import build_tokenizer, check_split_files, read_manifest
    from mlmprep.tokenize import special_ids

    body, data, title = [], {}, []
    if build is not None:
        manifest = read_manifest(build)
        tok = build_tokenizer(build, manifest)
        for name in manifest["splits"]:
            check_split_files(build, manifest, name)
        ids = special_ids(tok)
        seeds = [s["split"] for s in manifest["seeds"]]
        if first_seed is not None and first_seed not in seeds:
            raise ConfigError(f"--split {first_seed}: the HTML report shows the seed splits ({', '.join(seeds)}); "
                              "pick one of them to show first, or leave --split out")
        rows = np.zeros(0, int)
        if seeds:
            rows = sample_rows(manifest["splits"][seeds[0]]["rows"], examples_shown)
        data = examples(build, manifest, tok, ids, rows)
        data["first"] = seeds.index(first_seed) if first_seed else 0
        legend = ("Hover or click a sentinel ‹k› (or any token of a span) to light up its span in the text, "
                  "the input and the labels." if manifest["objective"] == "span" else
                  "Targets: <mask> in the input, replaced by a random token, or kept as they were; hover one to "
                  "find it in all three lines.")
        body += [f'<section id="summary"><h2>Build</h2>{summary(build, manifest)}</section>',
                 '<section id="examples"><h2>Examples</h2><div class="seedbar">'
                 + "".join(f'<button data-seed="{i}">{escape(s)}</button>' for i, s in enumerate(seeds))
                 + f'</div><p class="legend">{escape(legend)}</p><div id="rows"></div></section>',
                 f'<section id="charts"><h2>Charts</h2><div class="charts">'
                 f'{"".join(build_charts(build, manifest, tok, ids))}</div></section>']
        title.append(str(build))
    if run is not None:
        body.append(run_section(run))
        title.append(str(run))
    page = TEMPLATE.read_text(encoding="utf-8")
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return (page.replace("{{TITLE}}", escape(" and ".join(title))).replace("{{BODY}}", "\n".join(body))
            .replace("{{DATA}}", blob))


def check_report_path(path: Path) -> None:
    """Refuse an output path that cannot take the page, or a file there that is not an earlier report."""
    if path.is_dir():
        raise ConfigError(f"--html {path}: a directory; give a file name such as report.html")
    if not path.parent.is_dir():
        raise ConfigError(f"--html {path}: no directory {path.parent}; create it or give another path")
    if path.exists():
        with open(path, "rb") as f:
            if f.read(len(MARK)) != MARK.encode():
                raise ConfigError(f"--html {path}: the file exists and is no mlmprep report; give a new name "
                                  "(only an earlier report is overwritten)")


def write_report(path: Path, *, build: Path | None, run: Path | None, examples_shown: int = 4,
                 first_seed: str | None = None) -> Path:
    """Write the page to `path` (whole or not at all: a temporary file beside it, then renamed)."""
    path = Path(path)
    check_report_path(path)
    page = report_page(build, run, examples_shown=examples_shown, first_seed=first_seed)
    tmp = path.with_name(f".{path.name}.partial")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def report_sources(directory: Path, run: Path | None) -> tuple[Path | None, Path | None]:
    """(build, run) that a report of `directory` shows: a build (with --run's curves), or a training run with
    the build it trained on when that is still there."""
    from mlmprep.format.load import read_manifest
    from mlmprep.format.write import manifest_path

    directory = Path(directory)
    if run is not None and not is_run(run):
        raise ConfigError(f"--run {run}: not a training run (no train_config.json); give the --out of mlmprep train")
    if is_run(directory) and not manifest_path(directory).is_file():
        if run is not None:
            raise ConfigError(f"{directory} is a training run already; leave out --run {run}")
        data = json.loads((directory / "train_config.json").read_text(encoding="utf-8")).get("data")
        return (Path(data) if data and manifest_path(data).is_file() else None), directory
    read_manifest(directory)  # not a build: refused in one line
    return directory, run


def is_run(directory: Path) -> bool:
    """Whether `directory` is a training run's (mlmprep train --out)."""
    return (Path(directory) / "train_config.json").is_file()
