"""collate: exact padding, caps, attention masks and decoder inputs on hand-written rows; the mapped fast
path agrees with the HF-style path; the shift matches transformers' own T5 `_shift_right`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mlmprep.errors import ConfigError
from mlmprep.format.load import FEW_FILES, open_epoch
from mlmprep.train.collate import Collator
from tests.fakes import write_fake_build

S0, S1 = 99, 98  # sentinels <extra_id_0>, <extra_id_1> in these hand-written rows; 1 is </s>, 0 <pad>
SPAN_ROWS = [
    {"input_ids": [5, 6, S0, 7, 1], "labels": [S0, 11, 12, 1]},
    {"input_ids": [8, S0, 1], "labels": [S0, 13, S1, 14, 15, 1], "extra": "ignored"},
]
MLM_ROWS = [
    {"input_ids": [3, 6, 3, 9], "labels": [5, -100, 7, -100]},
    {"input_ids": [7, 3], "labels": [-100, 4]},
]


def as_lists(batch):
    assert all(t.dtype == torch.int64 for t in batch.values())
    return {k: v.tolist() for k, v in batch.items()}


def test_span_padding_and_shift_exact():
    out = as_lists(Collator("span", pad_id=0, decoder_start_id=0)(SPAN_ROWS))
    assert out == {
        "input_ids": [[5, 6, S0, 7, 1], [8, S0, 1, 0, 0]],
        "attention_mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]],
        "labels": [[S0, 11, 12, 1, -100, -100], [S0, 13, S1, 14, 15, 1]],
        "decoder_input_ids": [[0, S0, 11, 12, 1, 0], [0, S0, 13, S1, 14, 15]],
    }


def test_pad_to_multiple_and_caps_keep_the_last_token():
    out = as_lists(Collator("span", pad_id=0, decoder_start_id=0, pad_to_multiple_of=4)(SPAN_ROWS))
    assert [len(r) for r in out["input_ids"]] == [8, 8] and [len(r) for r in out["labels"]] == [8, 8]
    assert out["input_ids"][0] == [5, 6, S0, 7, 1, 0, 0, 0]
    capped = Collator("span", pad_id=0, decoder_start_id=0, max_encoder_len=4, max_decoder_len=4, pad_to_multiple_of=2)
    out = as_lists(capped(SPAN_ROWS))
    assert out["input_ids"] == [[5, 6, S0, 1], [8, S0, 1, 0]]  # over the cap: first 3 tokens, then </s>
    assert out["attention_mask"] == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert out["labels"] == [[S0, 11, 12, 1], [S0, 13, S1, 1]]
    assert out["decoder_input_ids"] == [[0, S0, 11, 12], [0, S0, 13, S1]]


def test_mlm_padding_and_aligned_caps():
    out = as_lists(Collator("mlm", pad_id=0, decoder_start_id=0)(MLM_ROWS))
    assert out == {
        "input_ids": [[3, 6, 3, 9], [7, 3, 0, 0]],
        "attention_mask": [[1, 1, 1, 1], [1, 1, 0, 0]],
        "labels": [[5, -100, 7, -100], [-100, 4, -100, -100]],
    }
    out = as_lists(Collator("mlm", pad_id=0, decoder_start_id=0, max_encoder_len=3)(MLM_ROWS))
    assert out["input_ids"] == [[3, 6, 9], [7, 3, 0]]
    assert out["labels"] == [[5, -100, -100], [-100, 4, -100]]  # cut like input_ids: positions still line up


def test_shift_matches_transformers_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=128, d_model=8, d_kv=4, d_ff=8, num_layers=1, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config)
    out = Collator("span", pad_id=0, decoder_start_id=0)(SPAN_ROWS)
    assert torch.equal(out["decoder_input_ids"], model._shift_right(out["labels"]))
    loss = model(**out).loss  # the batch goes into the model as it is
    assert torch.isfinite(loss)


@pytest.mark.parametrize("objective,lengths,shards", [("span", None, 2), ("mlm", np.arange(40) % 13 + 3, 2),
                                                      ("span", None, FEW_FILES + 2)])
def test_from_split_agrees_with_call(tmp_path, objective, lengths, shards):
    """Rows of several data files (a few: a tuple of them to the kernel; more: a typed list) as the example dicts."""
    build = write_fake_build(tmp_path, objective=objective, n_rows=40, lengths=lengths, num_shards=shards)
    split = open_epoch(build, 0)
    assert len(split.input_ids.files) == shards
    collator = Collator(objective, pad_id=0, decoder_start_id=0, max_encoder_len=16, pad_to_multiple_of=8)
    rows = np.array([39, 0, 17, 22, 5])  # across both shards, out of order
    fast = collator.from_split(split, rows)
    slow = collator([split.row(i) for i in rows])
    assert fast.keys() == slow.keys()
    for key in fast:
        assert torch.equal(fast[key], slow[key]), key
    np.testing.assert_array_equal(fast["attention_mask"].sum(1).numpy(), np.minimum(split.enc_lengths[rows], 16))


def test_bad_options_and_rows():
    with pytest.raises(ConfigError, match="span, mlm"):
        Collator("clm", pad_id=0, decoder_start_id=0)
    with pytest.raises(ConfigError, match="--max-encoder-len 10 must be a positive multiple of --pad-to-multiple-of 8"):
        Collator("span", pad_id=0, decoder_start_id=0, max_encoder_len=10, pad_to_multiple_of=8)
    with pytest.raises(ValueError, match="mlm row 1: 2 input_ids but 1 labels"):
        Collator("mlm", pad_id=0, decoder_start_id=0)([MLM_ROWS[0], {"input_ids": [1, 2], "labels": [3]}])


@pytest.mark.parametrize("objective, rows", [("span", SPAN_ROWS), ("mlm", MLM_ROWS)])
def test_vocab_size_refuses_ids_outside_it_in_either_column_and_keeps_ignored_labels(objective, rows):
    """The largest id of these rows is the edge: vocab one above it passes (-100 labels and padding too); one
    id raised to the vocab size, or made negative, is named by its example, in input_ids or in labels."""
    top = max(max(max(r["input_ids"]), max(r["labels"])) for r in rows)
    ok = Collator(objective, pad_id=0, decoder_start_id=0, vocab_size=top + 1)
    assert as_lists(ok(rows)) == as_lists(Collator(objective, pad_id=0, decoder_start_id=0)(rows))
    for column, value in (("input_ids", top + 1), ("labels", top + 1), ("input_ids", -1), ("labels", -2)):
        damaged = [dict(r) for r in rows]
        damaged[1] = {**damaged[1], column: [value, *damaged[1][column][1:]]}
        with pytest.raises(ValueError, match=rf"^example 1: token id {value} is outside the vocabulary of {top + 1}$"):
            ok(damaged)
