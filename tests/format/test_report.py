"""What `mlmprep inspect` prints: the summary's MLM line says why the masked share of all tokens is below
--mlm-probability (special tokens, the frame and the </s> between documents, are never chosen); --examples N rows,
each MLM target marked as masked, replaced or kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlmprep.format.load import read_manifest
from mlmprep.format.report import build_summary
from tests.cli.test_build import cli
from tests.conftest import build_tiny


def test_the_mlm_line_gives_the_share_of_all_tokens_and_says_special_ones_are_never_masked(
        tmp_path, tiny_corpus, tiny_tokenizer_path):
    """Reference: the labels read back with `datasets`, special ids from tokenizer.json itself."""
    import datasets

    data = build_tiny(tmp_path / "data", tiny_corpus, tiny_tokenizer_path, objective="mlm", mlm_probability=0.3)
    special = {t["id"] for t in json.loads((data / "tokenizer.json").read_text())["added_tokens"] if t["special"]}
    rows = datasets.load_from_disk(str(data / "seed-0"))
    labels = np.concatenate([np.asarray(x) for x in rows["labels"]])
    windows = np.concatenate([np.asarray(x) for x in datasets.load_from_disk(str(data / "windows"))["tokens"]])
    chosen = labels != -100
    assert not np.isin(windows[chosen], list(special)).any()
    maskable = ~np.isin(windows, list(special))
    assert maskable.sum() < len(windows)  # the tiny build has </s> tokens, so the two shares differ
    assert chosen.sum() / maskable.sum() == pytest.approx(0.3, abs=0.03)
    (line,) = [line for line in build_summary(data, read_manifest(data)).splitlines() if line.startswith("seed-0 ")]
    assert line.endswith(f"masked {chosen.sum() / len(labels):.3f} of all tokens, special ones never "
                         "(--mlm-probability 0.3 of the rest)")


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
