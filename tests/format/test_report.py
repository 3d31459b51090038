"""The summary's MLM line says why the masked share of all tokens is below --mlm-probability: special tokens
(the frame, the </s> between documents) are never chosen."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlmprep.format.load import read_manifest
from mlmprep.format.report import build_summary
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
