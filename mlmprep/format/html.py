"""The HTML report of a build and of a training run: one self-contained page (inline CSS, JS and SVG; nothing
fetched) that shows the manifest, decoded examples with their noise spans under every seed, and the charts of
mlmprep.format.charts. A large build is sampled, so the page stays small: the example rows are a few, spread
over the split, and the charts count a bounded sample."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from html import escape
from pathlib import Path

import numpy as np

from mlmprep.errors import ConfigError, disk_error
from mlmprep.format.charts import batches_with_start, build_charts, run_charts, sample_rows
from mlmprep.format.manifest import Manifest
from mlmprep.format.report import (
    contamination_lines,
    corpus_losses,
    dedup_lines,
    denoiser_lines,
    disk_line,
    exclusion_lines,
    figure,
    filter_lines,
    masking_line,
    missing_field_warning,
    missing_figures_note,
    paragraph_lines,
    split_order,
    starts_word,
    tokenizer_line,
    unknown_warning,
    unmask_spans,
    window_figures,
    wrapped_prose_hint,
)

TEMPLATE = Path(__file__).with_name("report.html")
MARK = "<!-- mlmprep report -->"  # the page's first line: a file that starts with it may be overwritten


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


def examples(build: Path, manifest: Manifest, tok, ids, rows: np.ndarray) -> dict:
    """The example rows under every seed, as piece numbers: span rows with, per token of the window, the
    sentinel that stands for it (-1: kept); mlm rows with their labels (-1: not a target)."""
    from mlmprep.format.load import open_split

    pieces, out = Pieces(tok, ids), []
    seeds = manifest.seed_splits
    splits = {name: open_split(build / name, objective=manifest.objective) for name in seeds}
    windows = {}
    if manifest.objective == "span" and "windows" in manifest.splits:
        wanted = {int(r) for r in rows}
        for start, chunk in batches_with_start(build / "windows", "tokens"):
            for r in wanted & set(range(start, start + len(chunk))):
                windows[r] = chunk.values[chunk.offsets[r - start] : chunk.offsets[r - start + 1]]
            if len(windows) == len(wanted):
                break
    if manifest.denoisers:  # each seed cuts rows of its own lengths: as many as the fewest has
        rows = rows[rows < min(len(split) for split in splits.values())] if splits else rows
    for r in rows.tolist():
        views = []
        for name in seeds:
            row = splits[name].row(r)
            x, y = (np.asarray(row[k], dtype=np.int64) for k in ("input_ids", "labels"))
            if manifest.denoisers:  # each seed cuts its own row r; its mode token first, an S row's target a span
                d = manifest.denoisers[int(row["denoiser"])]
                body = x[1:] if d["mode"] else x
                tokens, span = unmask_spans(body, y, ids.sentinels) if d["kind"] == "span" else (
                    np.concatenate([body[:-1], y[:-1]]), np.repeat([-1, 0], [len(body) - 1, len(y) - 1]))
                views.append({"split": f"{name}: {d['name']} {d['mode']}".strip(), "original": pieces(tokens),
                              "span": span.tolist(), "input": pieces(x), "labels": pieces(y), "differs": False})
            elif manifest.objective == "span":
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
    return {"objective": "span" if manifest.denoisers else manifest.objective, "texts": pieces.texts,
            "kinds": pieces.kinds, "mask": mask, "rows": out}


# ----------------------------------------------------------------------------- the page
def table(rows: list[tuple[str, str]], cls: str = "facts") -> str:
    """A two-column table of (name, value) rows; values are text, escaped here."""
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="{cls}">{body}</table>'


def summary(build: Path, manifest: Manifest) -> str:
    """The manifest as the page's first section: facts, warnings, the splits and every option."""
    (w, derived), config, tok = window_figures(build, manifest), manifest.config, manifest.tokenizer
    stats = manifest.corpus.stats
    column = manifest.option("text_column")
    notes = [*corpus_losses(stats, column), *missing_field_warning(stats, column), *wrapped_prose_hint(stats),
             *missing_figures_note(w, derived), *unknown_warning(w)]
    seeds = ", ".join(manifest.seed_splits) or "none"
    values = ", ".join(str(s.seed) for s in manifest.seeds[:4]) + (", …" if len(manifest.seeds) > 4 else "")
    facts = [
        ("build", f"{build}  (format {manifest.format_version}, mlmprep {manifest.mlmprep_version})"),
        ("objective", f"{manifest.objective}, method {manifest.method}, input length "
                      f"{manifest.input_length} (windows of {manifest.window_length} tokens, targets "
                      f"{manifest.target_length})"),
        ("corpus", manifest.corpus.description),
        *(("dedup" if k == 0 else "", line.strip()) for k, line in enumerate(dedup_lines(stats))),  # clusters beneath
        *(("paragraphs" if k == 0 else "", line.strip().removeprefix("paragraph dedup: "))
          for k, line in enumerate(paragraph_lines(stats))),
        *(("filters" if k == 0 else "", line.strip().removeprefix("filters: ")) for k, line in
          enumerate(filter_lines(stats))),
        *(("contamination" if k == 0 else "", line.strip() if k else line.split(": ", 1)[1])
          for k, line in enumerate(contamination_lines(stats))),
        *(("excluded" if k == 0 else "", line.strip().removeprefix("excluded: "))
          for k, line in enumerate(exclusion_lines(stats))),
        ("tokenizer", tokenizer_line(manifest).removeprefix("tokenizer: ") + f"; sha256 {tok.sha256[:12]}…"),
        ("rows", f"{figure(w['rows'], ',')} windows; rows cut inside a word {figure(w['fragment_rate'], '.1%')}"),
        ("tokens", f"kept {figure(w['tokens_kept'], ',')}, dropped {figure(w['tokens_dropped'], ',')}, padded "
                   f"{figure(w['tokens_padded'], ',')} (utilisation {figure(w['token_utilisation'], '.3f')})"),
        ("unknown tokens", figure(w["unknown_tokens"], ",") + ("" if w["unknown_fraction"] is None else
                                                               f" ({w['unknown_fraction']:.3%} of the tokens kept)")),
        ("seeds", f"{len(manifest.seeds)}: {seeds} (masking seeds {values}; validation "
                  f"{'-' if manifest.validation_seed is None else manifest.validation_seed})"),
        ("disk", disk_line(build, manifest).removeprefix("disk: ")),
    ]
    if total := manifest.timings.get("total_s"):
        facts.append(("built in", f"{total:.1f} s"))
    facts += [("denoisers" if k == 0 else "", line.strip()) for k, line in enumerate(denoiser_lines(manifest)[1:])]
    split_rows = []
    for name, split in sorted(manifest.splits.items(), key=lambda item: split_order(item[0])):
        split_rows.append(f"<tr><td>{escape(name)}</td><td>{split.rows:,}</td><td>{split.bytes / 1e6:,.1f}</td>"
                          f"<td>{escape(masking_line(manifest, name))}</td></tr>")
    options = table([(k, json.dumps(v)) for k, v in sorted(config.items())], "options")
    return (f"{table(facts)}{''.join(f'<p class=warn>{escape(n)}</p>' for n in notes)}"
            '<table class="splits"><tr><th>split</th><th>rows</th><th>MB</th><th>masking</th></tr>'
            f"{''.join(split_rows)}</table><details><summary>every option of the build</summary>{options}</details>")


def run_section(run: Path) -> str:
    """A training run: its options, final metrics and curves."""
    charts, final = run_charts(run)
    config_path = run / "train_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    sources = config.get("sources") or []  # a mixture: every source, and what weighs them
    data = [("sources", ", ".join(map(str, sources))), ("weights", str(config.get("weights") or config.get("mix")))] \
        if len(sources) > 1 else [("data", str(config.get("data", "-")))]
    per_set, final = source_table(final)
    shown = [(k, f"{v:.4g}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else str(v))
             for k, v in final.items()]
    facts = table([("run", str(run)), *data, ("model", str(config.get("model", "-")))] + shown)
    options = table([(k, json.dumps(v)) for k, v in sorted(config.items())], "options")
    return (f'<section id="run"><h2>Training run</h2>{facts}{per_set}<details><summary>every option of the run'
            f'</summary>{options}</details><div class="charts">{"".join(charts)}</div></section>')


def source_table(final: dict) -> tuple[str, dict]:
    """A mixture's final metrics per source (and per extra validation set) as one table, and the metrics left;
    a run of one build has no per-source metrics, so no table."""
    names = [k.removesuffix("/target") for k in final if k.endswith("/target")]
    names += [k[5:-5] for k in final if k.startswith("eval/") and k.endswith("/loss") and k[5:-5] not in names]
    if not names:
        return "", final

    def cell(value, spec: str) -> str:
        return "-" if value is None else escape(format(value, spec) if spec else str(value))

    rows = "".join(
        f"<tr><td>{escape(n)}</td><td>{cell(final.get(f'{n}/target'), '.3f')}</td>"
        f"<td>{cell(final.get(f'{n}/fraction'), '.3f')}</td><td>{cell(final.get(f'{n}/tokens'), ',')}</td>"
        f"<td>{cell(final.get(f'{n}/pass'), '')}</td><td>{cell(final.get(f'{n}/seed'), '')}</td>"
        f"<td>{cell(final.get(f'eval/{n}/loss'), '.4f')}</td><td>{cell(final.get(f'eval/{n}/accuracy'), '.4f')}</td>"
        "</tr>" for n in names)
    head = "".join(f"<th>{h}</th>" for h in ("source", "weight", "share reached", "tokens", "pass", "seed split",
                                             "validation loss", "accuracy"))
    rest = {k: v for k, v in final.items() if not any(k.startswith((f"{n}/", f"eval/{n}/")) for n in names)}
    return f'<table class="splits sources"><tr>{head}</tr>{rows}</table>', rest


def report_page(build: Path | None, run: Path | None, *, examples_shown: int = 4, first_seed: str | None = None) -> str:
    """The whole page: the build's summary, examples and charts (when `build`), a run's curves (when `run`)."""
    from mlmprep.format.load import build_tokenizer, check_splits, read_manifest
    from mlmprep.tokenizer.load import special_ids

    body, data, title = [], {}, []
    if build is not None:
        manifest = read_manifest(build)
        tok = build_tokenizer(build, manifest)
        check_splits(build, manifest)  # what the page shows of each split is what its files hold
        ids = special_ids(tok)
        seeds = manifest.seed_splits
        if first_seed is not None and first_seed not in seeds:
            raise ConfigError(f"--split {first_seed}: the HTML report shows the seed splits ({', '.join(seeds)}); "
                              "pick one of them to show first, or leave --split out")
        rows = sample_rows(min((manifest.splits[s].rows for s in seeds), default=0), examples_shown)  # in every seed
        data = examples(build, manifest, tok, ids, rows)
        data["first"] = seeds.index(first_seed) if first_seed else 0
        legend = ("Hover or click a sentinel ‹k› (or any token of a span) to light up its span in the text, "
                  "the input and the labels." if manifest.objective == "span" else
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
    return fill(TEMPLATE.read_text(encoding="utf-8"),
                {"TITLE": escape(" and ".join(title)), "BODY": "\n".join(body), "DATA": json_in_html(data)})


SLOT = re.compile(r"\{\{(TITLE|BODY|DATA|CSP)\}\}")
INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)  # the template's own code: no attributes, so not the data
STYLE_ATTRIBUTE = re.compile(r' style="([^"<>&]*)"')  # a chart legend's colour; values of the data are escaped


def fill(template: str, values: dict[str, str]) -> str:
    """The template with its slots filled in one pass (a value is never searched for slots again) and its
    Content-Security-Policy: only the template's own inline script and styles, and the charts' style
    attributes, each by hash; nothing fetched."""
    def digest(code: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(code.encode()).digest()).decode() + "'"

    allowed = {"script": [], "style": []}
    for kind, code in INLINE.findall(template):
        allowed[kind].append(digest(code))
    if attributes := sorted(set(STYLE_ATTRIBUTE.findall(values["BODY"]))):
        allowed["style"] += ["'unsafe-hashes'", *map(digest, attributes)]
    policy = (f"default-src 'none'; script-src {' '.join(allowed['script'])}; "
              f"style-src {' '.join(allowed['style'])}; base-uri 'none'; form-action 'none'")
    return SLOT.sub(lambda m: policy if m[1] == "CSP" else values[m[1]], template)


def json_in_html(data) -> str:
    """`data` as JSON that an HTML parser cannot end or open anything in: <, > and & as \\u escapes."""
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return blob.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


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
    except BaseException as exc:
        if tmp.exists():
            tmp.unlink()
        if isinstance(exc, OSError) and (problem := disk_error(path, exc, "free some space or give --html a "
                                                                          "writable place")):
            raise problem from None
        raise
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
        config = json.loads((directory / "train_config.json").read_text(encoding="utf-8"))
        data = config.get("data") if len(config.get("sources") or []) < 2 else None  # a mixture: its run section
        return (Path(data) if data and manifest_path(data).is_file() else None), directory  # names every source
    read_manifest(directory)  # not a build: refused in one line
    return directory, run


def is_run(directory: Path) -> bool:
    """Whether `directory` is a training run's (mlmprep train --out)."""
    return (Path(directory) / "train_config.json").is_file()
