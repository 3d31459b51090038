"""What `mlmprep inspect` shows of a build's rows: --examples N of them (0 none, a negative count refused), each MLM
target marked as masked, replaced by a random token, or kept; and of a manifest that lacks statistics, what the
splits give and what is missing, never a 0."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from tests.cli.test_build import cli
from tests.conftest import build_tiny


@pytest.fixture(scope="module")
def mlm_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path):
    return build_tiny(tmp_path_factory.mktemp("mlm") / "b", tiny_corpus, tiny_tokenizer_path, objective="mlm",
                      input_length=64, seeds=1)


def test_inspect_examples_zero_shows_none_and_negative_is_refused(mlm_build):
    shown = cli("inspect", mlm_build, "--examples", "0")
    assert shown.exit_code == 0 and "rows:" in shown.stdout and "--- seed-0 row" not in shown.stdout
    assert cli("inspect", mlm_build, "--examples", "2").stdout.count("--- seed-0 row") == 2
    refused = cli("inspect", mlm_build, "--examples", "-1")
    assert refused.exit_code == 2 and "--examples" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_inspect_marks_masked_replaced_and_kept_mlm_targets(mlm_build, tiny_tokenizer):
    """Each MLM target is shown in [[ ]]: masked, replaced by a random token (->), or kept (=)."""
    import re

    from mlmprep.format.report import mlm_text

    shown = cli("inspect", mlm_build, "--examples", "40").stdout
    texts = [line for line in shown.splitlines() if line.startswith("text:")]
    assert len(texts) == 40 and all("[[" in t for t in texts)
    marks = re.findall(r"\[\[([^\]]*)\]\]", "\n".join(texts))
    assert any("->" in m for m in marks) and any(m.endswith("=") for m in marks)
    # one row by hand: token 7 masked, token 8 replaced by 9, token 10 chosen and kept
    w = lambda i: tiny_tokenizer.decode([i])  # noqa: E731
    ids = [20, 7, 21, 8, 22, 10, 23]
    inputs = np.array([20, 3, 21, 9, 22, 10, 23])
    labels = np.array([-100, 7, -100, 8, -100, 10, -100])
    text = mlm_text(tiny_tokenizer, inputs, labels, mask_id=3)
    assert f"[[{w(7)}]]" in text and f"[[{w(8)}->{w(9)}]]" in text and f"[[{w(10)}=]]" in text
    unmarked = text.replace("[[", "").replace("]]", "").replace(f"->{w(9)}", "").replace("=", "")
    assert unmarked.split() == tiny_tokenizer.decode(ids).split()


def figures_line(shown: str) -> dict[str, str]:
    """The summary's window figures by label ("rows: 330  tokens kept: 11,220  ...")."""
    (line,) = [line for line in shown.splitlines() if line.startswith("rows: ")]
    return dict(part.split(": ", 1) for part in line.split("  "))


def html_facts(page: str) -> dict[str, str]:
    """The HTML report's facts table by row name, unescaped."""
    from html import unescape

    table = page.split('<table class="facts">', 1)[1].split("</table>", 1)[0]
    return {unescape(k): unescape(v) for k, v in re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", table)}


@pytest.mark.parametrize("tokenizer, options", [
    ("tiny_tokenizer_path", {}), ("wordpiece_path", {"objective": "mlm"}),  # mlm: a [CLS] [SEP] frame
    ("tiny_tokenizer_path", {"pack": "doc"})], ids=["span", "mlm", "ragged"])
def test_inspect_of_a_build_without_statistics_says_what_is_missing_and_counts_what_the_splits_give(
        tokenizer, options, request, tmp_path, tiny_corpus):
    """Rows, and in the fixed layout the tokens kept (none padded), come from the splits; what only the build could
    count (tokens dropped, rows cut inside a word, unknown tokens, masking) is said missing, never 0. Reference:
    the Arrow files read with pyarrow, the frame from tokenizer.json, and the statistics the build recorded."""
    import pyarrow as pa
    from tokenizers import Tokenizer

    build = build_tiny(tmp_path / "b", tiny_corpus, request.getfixturevalue(tokenizer), seeds=1, **options)
    data = json.loads((build / "manifest.json").read_text())
    recorded = data.pop("statistics")["windows"]
    (build / "manifest.json").write_text(json.dumps(data))
    lengths = np.concatenate([pa.ipc.open_stream(pa.memory_map(str(f))).read_all()["tokens"].combine_chunks()
                              .value_lengths().to_numpy()
                              for split in ("windows", "validation-windows")
                              for f in sorted((build / split).glob("*.arrow"))])
    tok = Tokenizer.from_file(str(build / "tokenizer.json"))
    frame = len(tok.encode("a").ids) - len(tok.encode("a", add_special_tokens=False).ids)
    fixed = "pack" not in options
    assert (lengths == data["window_length"]).all() == fixed  # the layout the test means
    if options.get("objective") == "mlm":
        assert frame == 2  # [CLS] and [SEP] around every row's text
    kept = int(lengths.sum()) - frame * len(lengths) if options.get("objective") == "mlm" else int(lengths.sum())
    assert recorded["rows"] == len(lengths) and recorded["tokens_kept"] == kept  # the reference agrees with the build

    shown = cli("inspect", build, "--examples", "1")
    assert shown.exit_code == 0, shown.stderr
    figures = figures_line(shown.stdout)
    assert figures["rows"] == f"{len(lengths):,}"
    expected = {"tokens kept": f"{kept:,}", "padded": "0", "utilisation": "1.000"} if fixed else \
        {"tokens kept": "missing", "padded": "missing", "utilisation": "missing"}
    assert {k: figures[k] for k in expected} == expected
    assert {figures[k] for k in ("dropped", "rows cut inside a word", "unknown tokens")} == {"missing"}
    assert "note: the manifest lacks window statistics" in shown.stdout
    masking = [line for line in shown.stdout.splitlines() if line.startswith(("seed-0 ", "validation "))]
    assert len(masking) == 2 and all(line.endswith("masking statistics missing from the manifest") for line in masking)
    assert (" M tokens/s" in shown.stdout.split("built in", 1)[1]) == fixed  # a rate only of tokens known
    verified = cli("verify", build)
    assert verified.exit_code == 1 and "statistics is missing" in verified.stdout + verified.stderr

    page = tmp_path / "report.html"
    assert cli("inspect", build, "--html", page, "--examples", "1").exit_code == 0
    facts = html_facts(page.read_text())
    assert facts["rows"] == f"{len(lengths):,} windows; rows cut inside a word missing"
    assert facts["tokens"] == (f"kept {kept:,}, dropped missing, padded 0 (utilisation 1.000)" if fixed else
                               "kept missing, dropped missing, padded missing (utilisation missing)")
    assert facts["unknown tokens"] == "missing"
    assert "masking statistics missing from the manifest" in page.read_text()
    assert "<p class=warn>note: the manifest lacks window statistics" in page.read_text()


def test_a_build_that_lacks_only_its_unknown_token_count_shows_it_missing(tmp_path, tiny_build):
    """An older build records no unknown tokens: the figure is missing, every other one as recorded."""
    build = tmp_path / "b"
    shutil.copytree(tiny_build, build)
    data = json.loads((build / "manifest.json").read_text())
    windows = data["statistics"]["windows"]
    del windows["unknown_tokens"], windows["unknown_fraction"]
    (build / "manifest.json").write_text(json.dumps(data))
    figures = figures_line(cli("inspect", build, "--examples", "0").stdout)
    assert figures == {"rows": f"{windows['rows']:,}", "tokens kept": f"{windows['tokens_kept']:,}",
                       "dropped": f"{windows['tokens_dropped']:,}", "padded": f"{windows['tokens_padded']:,}",
                       "utilisation": f"{windows['token_utilisation']:.3f}",
                       "rows cut inside a word": f"{windows['fragment_rate']:.1%}", "unknown tokens": "missing"}
