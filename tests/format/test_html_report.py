"""The HTML report of a build (`mlmprep inspect DIR --html FILE`): its T5 reference against an independent
simulation of T5's segmentation, its statistics against the stored rows read with `datasets`, and the page
itself opened in a real headless Chromium (driven by Playwright): no console error, no request leaving the
file, examples and charts drawn, hovering a sentinel lights up its span, the seed switch changes the example."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mlmprep.format.charts import (
    reference_span_lengths,
    sample_rows,
    span_statistics,
    t5_span_counts,
    t5_span_length_distribution,
)
from mlmprep.format.html import report_page, report_sources, write_report
from tests.conftest import build_tiny

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def t5_random_segmentation(num_items: int, num_segments: int, rng: np.random.Generator) -> np.ndarray:
    """T5's _random_segmentation (t5.data.preprocessors.random_spans_noise_mask) in NumPy: shuffle
    num_segments - 1 segment starts among the num_items - 1 gaps; the segments' lengths."""
    first_in_segment = np.pad(rng.permutation((np.arange(num_items - 1) < num_segments - 1).astype(np.int64)), [1, 0])
    return np.bincount(np.cumsum(first_in_segment), minlength=num_segments)


@pytest.mark.parametrize("noise, spans", [(85, 28), (5, 2), (13, 4), (7, 1)])
def test_the_reference_is_t5_random_segmentation(noise, spans):
    rng = np.random.default_rng(0)
    draws = np.concatenate([t5_random_segmentation(noise, spans, rng) for _ in range(4000)])
    observed = np.bincount(draws, minlength=noise + 1) / len(draws)
    expected = t5_span_length_distribution(noise, spans)
    assert expected.sum() == pytest.approx(1.0)
    assert 0.5 * np.abs(observed - expected).sum() < 0.02  # total variation distance


def test_t5_span_counts_follow_the_design_arithmetic():
    assert t5_span_counts(568, 0.15, 3.0) == (85, 28)  # docs/masking.md: input length 512 -> windows of 568
    assert t5_span_counts(10, 0.5, 1.0) == (5, 5)
    assert t5_span_counts(3, 0.01, 3.0) == (1, 1)  # at least one noise token, one span


@pytest.fixture(scope="module")
def span_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path):
    return build_tiny(tmp_path_factory.mktemp("html") / "span", tiny_corpus, tiny_tokenizer_path, seeds=3,
                      input_length=64)


@pytest.fixture(scope="module")
def mlm_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path):
    return build_tiny(tmp_path_factory.mktemp("html") / "mlm", tiny_corpus, tiny_tokenizer_path, objective="mlm",
                      input_length=48)


def stored(build: Path, split: str, column: str) -> list[np.ndarray]:
    import datasets

    return [np.asarray(x) for x in datasets.load_from_disk(str(build / split))[column]]


def test_span_statistics_count_the_stored_spans_and_follow_the_t5_reference(span_build, tiny_tokenizer):
    from mlmprep.format.load import open_split
    from mlmprep.tokenizer.load import special_ids

    sentinels = special_ids(tiny_tokenizer).sentinels
    split = open_split(span_build / "seed-0")
    rows = sample_rows(len(split), 10**6)
    lengths, windows, density = span_statistics(split, rows, sentinels)
    # reference: runs of non-sentinel tokens after each sentinel in the labels `datasets` reads back
    labels = stored(span_build, "seed-0", "labels")
    runs = []
    for y in labels:
        k = -1
        for t in y[:-1].tolist():
            if t in set(sentinels.tolist()):
                runs.append(0)
                k = 1
            elif k > 0:
                runs[-1] += 1
    assert sorted(lengths.tolist()) == sorted(runs)
    windows_rows = stored(span_build, "windows", "tokens")
    assert windows.tolist() == [len(w) for w in windows_rows]
    noise = [sum(1 for t in y[:-1] if t not in set(sentinels.tolist())) for y in labels]
    assert density == pytest.approx(np.array(noise) / windows)
    # every seed's spans together (the masks are deterministic, so is this) against T5's distribution
    lengths = np.concatenate([span_statistics(open_split(span_build / f"seed-{k}"), rows, sentinels)[0]
                              for k in range(3)])
    reference = reference_span_lengths(windows, 0.15, 3.0)
    observed = np.bincount(lengths, minlength=len(reference))[: len(reference)] / len(lengths)
    assert len(lengths) > 1000 and 0.5 * np.abs(observed - reference).sum() < 0.05


@pytest.mark.parametrize("pack", ["stream", "doc"])
def test_document_lengths_and_windows_per_document(tmp_path, tiny_corpus, tiny_tokenizer_path, tiny_tokenizer, pack):
    """Reference: every document of the corpus tokenized alone (its </s> added in a stream), laid end to end."""
    from mlmprep.format.charts import documents
    from mlmprep.format.load import read_manifest
    from tests.conftest import tiny_documents

    build = build_tiny(tmp_path / "data", tiny_corpus, tiny_tokenizer_path, seeds=1, input_length=40,
                       validation_fraction=0.0, pack=pack)
    manifest = read_manifest(build)
    window = manifest.window_length
    sizes = np.array([len(tiny_tokenizer.encode(d, add_special_tokens=False).ids) for d in tiny_documents()])
    rows = manifest.splits["windows"].rows
    tokens, spread = documents(build, manifest, rows)
    if pack == "stream":  # the first document is left out (it may have begun before the windows read)
        sizes += 1
        ends = np.cumsum(sizes)
        whole = ends <= rows * window  # the stream's tail, shorter than a window, is dropped
        expected = sizes[whole][1:]
        starts = (ends - sizes)[whole][1:]
        expected_spread = (starts + expected - 1) // window - starts // window + 1
    else:  # rows of a document: whole windows and a tail of at least 2 tokens; one that fills whole windows
        kept = sizes - np.where(sizes % window < 2, sizes % window, 0)  # reads as the start of the next document
        expected, expected_spread, carry = [], [], 0
        for n in kept.tolist():
            carry += n
            if n % window:
                expected.append(carry)
                expected_spread.append(-(-carry // window))
                carry = 0
        expected, expected_spread = np.array(expected), np.array(expected_spread)
        assert len(expected) < len(kept)  # the corpus does have such a document
    assert tokens.tolist() == expected.tolist()
    assert spread.tolist() == expected_spread.tolist()
    assert spread.max() > 1  # some documents do span windows


def test_a_report_is_one_self_contained_file(tmp_path, span_build):
    page = report_page(span_build, None)
    assert page.startswith("<!-- mlmprep report -->")
    for needle in ("http://", "https://", "<link", "src=", "@import"):
        assert needle not in page, needle
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    assert [v["split"] for v in data["rows"][0]["seeds"]] == ["seed-0", "seed-1", "seed-2"]
    assert not any(v["differs"] for row in data["rows"] for v in row["seeds"])  # input + labels give the window


def test_the_cli_writes_the_page_and_refuses_to_overwrite_another_file(tmp_path, span_build):
    def inspect(*args):
        return subprocess.run([sys.executable, "-m", "mlmprep", "inspect", *map(str, args)], capture_output=True,
                              text=True)

    out = tmp_path / "report.html"
    done = inspect(span_build, "--html", out, "--examples", 2)
    assert done.returncode == 0, done.stderr
    assert out.read_text().count('data-seed="') == 3 and '"row":' in out.read_text()
    assert inspect(span_build, "--html", out).returncode == 0  # an earlier report is replaced
    mine = tmp_path / "notes.html"
    mine.write_text("my notes")
    refused = inspect(span_build, "--html", mine)
    assert refused.returncode == 2 and "no mlmprep report" in refused.stderr and "Traceback" not in refused.stderr
    assert mine.read_text() == "my notes"
    for args, says in [(["--html", tmp_path / "missing" / "r.html"], "no directory"),
                       (["--run", tmp_path], "add --html"),
                       (["--html", tmp_path / "r.html", "--split", "validation"], "seed splits"),
                       (["--html", tmp_path / "r.html", "--run", tmp_path], "not a training run")]:
        refused = inspect(span_build, *args)
        assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    assert not (tmp_path / "r.html").exists() and not list(tmp_path.glob(".*.partial"))


def fake_run(run: Path, data: Path) -> Path:
    """A training run's files as mlmprep train writes them: its options and metrics lines."""
    run.mkdir()
    (run / "train_config.json").write_text(json.dumps({"data": str(data), "model": "tiny", "lr": 3e-4}))
    lines = [{"step": 0, "eval_loss": 9.0, "eval_accuracy": 0.01}]
    for step in range(2, 21, 2):
        lines.append({"step": step, "epoch": 0, "loss": 10.0 - step / 4, "lr": 1e-4 * step, "tokens": 100})
        if step % 10 == 0:
            lines.append({"step": step, "eval_loss": 9.0 - step / 5, "eval_accuracy": step / 100})
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_a_run_directory_shows_its_curves_and_its_build(tmp_path, span_build):
    run = fake_run(tmp_path / "run", span_build)
    page = report_page(*report_sources(run, None))
    assert 'id="run"' in page and 'id="examples"' in page
    refused = subprocess.run([sys.executable, "-m", "mlmprep", "inspect", str(run)], capture_output=True, text=True)
    assert refused.returncode == 2 and "add --html FILE" in refused.stderr
    run_part = page.split('id="run"')[1]
    assert run_part.count("<svg") == 3 and "Learning rate" in run_part
    # the validation curve has a point per evaluation: 3 of them, 11 training points
    assert run_part.count("validation at") == 3 + 3 and run_part.count("training at") == 10


# ----------------------------------------------------------------------------- in a browser
@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (the system's, through Playwright) with a fresh profile; skips where there is none."""
    sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    import tempfile

    profile = tempfile.mkdtemp(prefix="mlmprep-chromium-")
    with sync.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                                       headless=True, viewport={"width": 1280, "height": 900})
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


def open_page(context, path: Path):
    """The page at `path` with every console error and every request recorded; a request for anything but a
    file:// URL is recorded and aborted."""
    page = context.new_page()
    page.errors, page.requests = [], []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))

    def route(r):
        page.requests.append(r.request.url)
        r.continue_() if r.request.url.startswith("file://") else r.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page


def screenshot(page, tmp_path: Path, name: str) -> None:
    """Save a full-page screenshot under the test's tmp dir, and into $MLMPREP_SCREENSHOTS when set."""
    page.screenshot(path=str(tmp_path / name), full_page=True)
    if where := os.environ.get("MLMPREP_SCREENSHOTS"):
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / name, Path(where) / name)


def nonzero_boxes(page, selector: str) -> int:
    boxes = [e.bounding_box() for e in page.query_selector_all(selector)]
    assert boxes and all(b and b["width"] > 0 and b["height"] > 0 for b in boxes), selector
    return len(boxes)


def test_span_report_in_chromium(browser, tmp_path, span_build):
    path = write_report(tmp_path / "report.html", build=span_build, run=None, examples_shown=3)
    page = open_page(browser, path)
    assert nonzero_boxes(page, "#rows .example") == 3
    assert nonzero_boxes(page, "figure.chart svg") == 5
    first = page.query_selector("#rows .example")
    text, inputs, labels = first.query_selector_all(".line .toks")
    # hovering the third sentinel of the input lights up its span in the text and the labels, and nothing else
    sentinel = inputs.query_selector_all(".pill.sent")[2]
    k = sentinel.get_attribute("data-s")
    sentinel.hover()
    lit = text.query_selector_all(".hl")
    assert lit and all(e.get_attribute("data-s") == k for e in lit)
    assert len(lit) == len(text.query_selector_all(f'[data-s="{k}"]'))
    assert lit[0].evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 224, 102)"
    other = text.query_selector(f'[data-s]:not([data-s="{k}"])')
    assert "hl" not in other.get_attribute("class")
    in_labels = [e for e in labels.query_selector_all(".hl") if "pill" not in e.get_attribute("class")]
    assert "".join(e.text_content() for e in in_labels) == "".join(e.text_content() for e in lit)
    screenshot(page, tmp_path, "report-span.png")
    # the seed switch: the same window (text), masked differently (input)
    before = (text.text_content(), inputs.text_content())
    page.click('.seedbar button[data-seed="1"]')
    text, inputs, _ = page.query_selector("#rows .example").query_selector_all(".line .toks")
    assert text.text_content() == before[0] and inputs.text_content() != before[1]
    assert "seed-1" in page.query_selector("#rows .example h3").text_content()
    assert page.errors == [] and page.requests and all(u.startswith("file://") for u in page.requests)


def test_mlm_report_in_chromium(browser, tmp_path, mlm_build, tiny_tokenizer):
    from mlmprep.tokenizer.load import special_ids

    path = write_report(tmp_path / "report.html", build=mlm_build, run=None, examples_shown=2)
    page = open_page(browser, path)
    assert nonzero_boxes(page, "#rows .example") == 2
    assert nonzero_boxes(page, "figure.chart svg") == 5
    row = int(page.query_selector("#rows .example").get_attribute("data-row"))
    text, inputs, labels = page.query_selector("#rows .example").query_selector_all(".line .toks")
    x, y = stored(mlm_build, "seed-0", "input_ids")[row], stored(mlm_build, "seed-0", "labels")[row]
    mask = special_ids(tiny_tokenizer).mask
    chosen = y != -100
    assert len(inputs.query_selector_all(".m-mask")) == int((chosen & (x == mask)).sum())
    assert len(inputs.query_selector_all(".m-kept")) == int((chosen & (x == y)).sum())
    assert len(inputs.query_selector_all(".m-rand")) == int((chosen & (x != mask) & (x != y)).sum())
    assert len(labels.query_selector_all("[data-p]")) == int(chosen.sum())
    target = inputs.query_selector("[data-p]")
    target.hover()
    position = target.get_attribute("data-p")
    assert [e.get_attribute("data-p") for e in text.query_selector_all(".hl")] == [position]
    screenshot(page, tmp_path, "report-mlm.png")
    assert page.errors == [] and all(u.startswith("file://") for u in page.requests)
