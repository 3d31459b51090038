"""The charts of the HTML report: what the masking and the windowing did, counted in a sample of a build's rows
(span lengths against T5's own distribution, MLM target kinds against 80/10/10, noise density per row, document
lengths, windows per document, the commonest pieces) and a training run's curves, drawn as inline SVG."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from mlmprep.format import svg
from mlmprep.format.manifest import Manifest
from mlmprep.format.write import iter_rows

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


# ----------------------------------------------------------------------------- counted in the build
def sample_rows(n: int, k: int) -> np.ndarray:
    """k row numbers spread evenly over 0..n-1 (all of them when n <= k), the first and the last included."""
    return np.unique(np.linspace(0, n - 1, min(n, k)).round().astype(np.int64)) if n and k > 0 else np.zeros(0, int)


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


def window_scan(build: Path, manifest: Manifest) -> tuple[np.ndarray, int, int]:
    """(token counts by id, tokens read, rows read) over the first TOKEN_SCAN tokens of windows/."""
    counts = np.zeros(manifest.tokenizer.vocab_size, dtype=np.int64)
    tokens = rows = 0
    if "windows" in manifest.splits:
        for _, chunk in batches_with_start(build / "windows", "tokens"):
            counts += np.bincount(chunk.values, minlength=len(counts))[: len(counts)]
            tokens, rows = tokens + len(chunk.values), rows + len(chunk)
            if tokens >= TOKEN_SCAN:
                break
    return counts, tokens, rows


def documents(build: Path, manifest: Manifest, rows: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(tokens per document, windows per document) of the documents that begin and end inside the first `rows`
    windows: with --pack stream a document ends at its </s>; with --pack doc at its first row shorter than a
    window (a document of a whole number of windows runs on into the next). None for --method text."""
    if manifest.method != "tokens" or not rows:
        return None
    flat, offsets = [], [0]
    for _, chunk in batches_with_start(build / "windows", "tokens"):
        flat.append(chunk.values)
        offsets.extend((chunk.offsets[1:] + offsets[-1]).tolist())
        if len(offsets) > rows:
            break
    values, offsets = np.concatenate(flat), np.asarray(offsets[: rows + 1])
    values = values[: offsets[-1]]
    if manifest.option("pack") == "stream":
        ends = np.flatnonzero(values == manifest.tokenizer.eos_id) + 1  # one past each document's </s>
        starts, ends = ends[:-1], ends[1:]  # the text before the first </s> began in an earlier window
    else:
        short = np.flatnonzero(np.diff(offsets) < manifest.window_length)
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


def build_charts(build: Path, manifest: Manifest, tok, ids) -> list[str]:
    """The build's charts: span lengths (or MLM target kinds), noise density per row, document lengths, windows
    per document and the most frequent pieces."""
    from mlmprep.format.load import open_split

    charts, option = [], manifest.option
    name = manifest.seed_splits[0] if manifest.seeds else None
    if name and manifest.splits[name].rows:
        split = open_split(build / name, objective=manifest.objective)
        rows = sample_rows(len(split), SAMPLE_ROWS)
        if manifest.denoisers:
            charts += denoiser_charts(manifest, name)
            density = None
        elif manifest.objective == "span":
            lengths, windows, density = span_statistics(split, rows, ids.sentinels)
            reference = reference_span_lengths(windows, option("noise_density"), option("mean_span_length"))
            charts.append(span_chart(lengths, reference, len(rows), name))
            what = f"--noise-density {option('noise_density'):g}"
        elif manifest.objective == "mdlm":
            shares = np.bincount(np.minimum((split.rate * 10).astype(np.int64), 9), minlength=10) / len(split)
            charts.append(svg.bars(f"Masking rates t: {len(split):,} rows of {name} (uniform on (0.001, 1])",
                                   [f"{k / 10:.1f}" for k in range(10)], shares.tolist(), xlabel="t (a bar: a tenth)",
                                   ylabel="share of rows", reference=[0.1] * 10, names=("rows", "uniform"),
                                   percent=True))
            density, what = mlm_density(split, rows), "each row's own rate t"
        else:
            charts.append(mlm_kind_chart(split, rows, ids.mask))
            density, what = mlm_density(split, rows), f"--mlm-probability {option('mlm_probability'):g}"
        if density is not None:
            labels, shares = histogram(density)
            charts.append(svg.bars(f"Noise density per row: {len(rows):,} rows of {name} ({what})", labels, shares,
                                   xlabel="share of the row's tokens that are targets", ylabel="share of rows",
                                   percent=True))
    counts, scanned, scanned_rows = window_scan(build, manifest)
    docs = documents(build, manifest, scanned_rows)
    total = getattr(manifest.split("windows"), "rows", 0)
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
    elif manifest.method == "text":
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




def denoiser_charts(manifest: Manifest, name: str) -> list[str]:
    """A ul2 or prefix build's denoisers in split `name`: each one's share of rows against its weight, and its
    rows' target share (noise fraction) against its density."""
    from mlmprep.format.report import denoiser_weights

    m, names = manifest.masking_stats.get(name, {}), manifest.denoiser_names()
    shares = [m.get(f"{d}/share", 0.0) for d in names]
    noise = [m.get(f"{d}/noise_fraction", 0.0) for d in names]
    return [svg.bars(f"Denoisers: share of the rows of {name}", names, shares, xlabel="denoiser",
                     ylabel="share of rows", reference=denoiser_weights(manifest), names=("rows", "weight"),
                     percent=True),
            svg.bars(f"Target tokens per row token, by denoiser, in {name}", names, noise, xlabel="denoiser",
                     ylabel="target share", reference=[d["noise_density"] for d in manifest.denoisers],
                     names=("observed", "asked"), percent=True)]
