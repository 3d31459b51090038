"""The HTML report against hostile strings: markup and script payloads in every field a user or a corpus
controls (the build's path, the corpus's file and column names, the tokenizer's path and token pieces, the
documents' text, a run's path and options) are shown as text in a real headless Chromium, no injected
handler runs, the console stays clean; and the page's Content-Security-Policy blocks a script that an escaping
bug would let in."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mlmprep.format.html import report_page, write_report
from tests.conftest import build_tiny, tiny_documents
from tests.format.test_html_report import browser, fake_run, open_page  # noqa: F401 (browser: a fixture)

# each one sets window.__pwned if the page ever treats it as markup or code
PAYLOADS = ('{{DATA}}', '</script><script>window.__pwned=1</script>', '<img src=x onerror=window.__pwned=2>',
            '"><svg onload=window.__pwned=3>', "javascript:window.__pwned=4", '<!--<script>', '{{BODY}}&amp;')
PAYLOAD = " ".join(PAYLOADS)
FILE_PAYLOAD = PAYLOAD.replace("/", "\u2215")  # one path component: no "/"
# a path whose components together spell every payload, "/" included
PATH_PARTS = ["{{DATA}} <", "script><script>window.__pwned=1<", "script><img src=x onerror=window.__pwned=2>"]


def hostile_build(root: Path, objective: str) -> Path:
    """A real build where every field a user or the corpus names carries the payloads."""
    from mlmprep.tokenizer.train import train_tokenizer

    documents = tiny_documents(120)
    documents = [f"{d} {PAYLOADS[i % len(PAYLOADS)]} {d}" for i, d in enumerate(documents)]
    corpus_dir = root.joinpath(*PATH_PARTS, "corpus")
    corpus_dir.mkdir(parents=True)
    corpus = corpus_dir / f"{FILE_PAYLOAD}.jsonl"
    corpus.write_text("".join(json.dumps({PAYLOAD: d}) + "\n" for d in documents), encoding="utf-8")
    tok = train_tokenizer(documents, vocab_size=500)
    tok.add_tokens(list(PAYLOADS))  # whole payloads as token pieces
    tokenizer = corpus_dir / f"{FILE_PAYLOAD}.json"
    tok.save(str(tokenizer))
    return build_tiny(root.joinpath(*PATH_PARTS, f"out {FILE_PAYLOAD}"), corpus, tokenizer, objective=objective,
                      text_column=PAYLOAD, input_length=48, seeds=2)


@pytest.fixture(scope="module", params=["span", "mlm"])
def hostile(request, tmp_path_factory):
    build = hostile_build(tmp_path_factory.mktemp(f"payloads-{request.param}"), request.param)
    run = fake_run(build.parent / f"run {FILE_PAYLOAD}", build)
    config = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**config, "model": PAYLOAD, PAYLOAD: PAYLOAD}))
    return build, run


def test_payloads_are_text_in_every_field(browser, tmp_path, hostile):  # noqa: F811
    build, run = hostile
    path = write_report(tmp_path / "report.html", build=build, run=run, examples_shown=4)
    html = path.read_text(encoding="utf-8")
    data = html.split('<script id="data" type="application/json">')[1].split("</script>")[0]
    assert not set("<>&") & set(data)  # the data cannot end or open an element
    assert any(p in json.loads(data)["texts"] for p in PAYLOADS)  # the token pieces do carry payloads
    page = open_page(browser, path)
    page.hover("#rows .example [data-s], #rows .example [data-p]")
    for button in page.query_selector_all(".seedbar button"):
        button.click()
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []  # no error, no CSP violation by the page's own code
    assert page.evaluate("document.scripts.length") == 2 and not page.query_selector_all("img, iframe, object")
    handlers = page.evaluate("[...document.querySelectorAll('*')].flatMap(e => [...e.attributes])"
                             ".map(a => a.name).filter(n => n.startsWith('on'))")
    assert handlers == []
    shown = page.evaluate("document.body.innerText")
    facts = dict(re.findall(r"(\w[\w ]*)\t(.*)", shown))
    assert facts["build"].startswith(str(build) + " (format")  # {{DATA}} in it stayed itself
    assert facts["run"] == str(run) and facts["model"] == PAYLOAD
    options = page.evaluate("[...document.querySelectorAll('table.options tr')]"
                            ".map(r => [r.cells[0].textContent, r.cells[1].textContent])")
    assert ["text_column", json.dumps(PAYLOAD)] in options and [PAYLOAD, json.dumps(PAYLOAD)] in options
    examples = page.evaluate("document.getElementById('rows').innerText")
    assert any(p in examples for p in PAYLOADS)  # pieces drawn by the page's script as text
    assert page.evaluate("document.title") == f"mlmprep report: {build} and {run}"


def test_the_policy_blocks_a_script_that_got_in(browser, tmp_path, tiny_build):  # noqa: F811
    """An escaping bug's consequence, planted by hand: an inline script, a handler and a fetch are all blocked
    (and reported), while the page's own script still draws the examples."""
    html = report_page(tiny_build, None)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)[1]
    assert policy.startswith("default-src 'none';") and "unsafe-inline" not in policy and "http" not in policy
    planted = ('<script>window.__pwned=1</script><img src="x" onerror="window.__pwned=2">'
               '<div style="color: red" id="styled">x</div>')
    path = tmp_path / "planted.html"
    path.write_text(html.replace("</main>", planted + "</main>"), encoding="utf-8")
    page = open_page(browser, path)
    assert page.evaluate("window.__pwned") is None
    assert page.query_selector_all("#rows .example")  # the page's own script ran
    assert page.evaluate("getComputedStyle(document.getElementById('styled')).color") != "rgb(255, 0, 0)"
    assert page.errors and all("Content Security Policy" in e for e in page.errors)
    assert not [u for u in page.requests if not u.startswith("file://")]
