"""What `mlmprep inspect` shows of a build's rows: --examples N of them (0 none, a negative count refused), each MLM
target marked as masked, replaced by a random token, or kept."""

from __future__ import annotations

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
