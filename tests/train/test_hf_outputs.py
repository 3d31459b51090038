"""Outputs ready for `transformers`: a build directory and every checkpoint's model/
directory load with AutoTokenizer (pad/eos/unk/mask and the sentinels set) and AutoModel, offline."""

from __future__ import annotations

import json

import pytest
import torch

from mlmprep.config import TrainConfig
from mlmprep.train.loop import fit
from tests.conftest import build_tiny

pytest.importorskip("transformers")
from transformers import AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer  # noqa: E402

RUN = dict(max_tokens_per_batch=1024, max_tokens_per_microbatch=512, warmup_steps=1, eval_every=0, log_every=1,
           save_every=1, max_steps=2)


pytestmark = pytest.mark.usefixtures("one_thread")


def load_hf_tokenizer(directory):
    return AutoTokenizer.from_pretrained(str(directory), local_files_only=True)


def test_a_span_build_loads_with_autotokenizer(tiny_build):
    manifest = json.loads((tiny_build / "manifest.json").read_text())
    ids = manifest["tokenizer"]
    hf = load_hf_tokenizer(tiny_build)
    assert (hf.pad_token, hf.eos_token, hf.unk_token, hf.mask_token) == ("<pad>", "</s>", "<unk>", "<mask>")
    assert (hf.pad_token_id, hf.eos_token_id, hf.unk_token_id, hf.mask_token_id) == (
        ids["pad_id"], ids["eos_id"], ids["unk_id"], ids["mask_id"])
    sentinels = [f"<extra_id_{k}>" for k in range(ids["sentinels"])]
    assert set(sentinels) <= set(hf.all_special_tokens)
    assert hf.convert_tokens_to_ids("<extra_id_0>") == ids["vocab_size"] - 1  # T5's layout: <extra_id_0> on top
    encoded = hf("the river <extra_id_0> walked", add_special_tokens=False).input_ids
    assert ids["vocab_size"] - 1 in encoded  # a sentinel in text is one special token, not split into pieces
    assert hf.model_max_length == manifest["input_length"]
    assert len(hf) == ids["vocab_size"]


def test_an_mlm_build_with_a_wordpiece_tokenizer_keeps_its_bert_tokens(tmp_path, tiny_corpus, wordpiece_path):
    data = build_tiny(tmp_path / "data", tiny_corpus, wordpiece_path, objective="mlm", seeds=1)
    hf = load_hf_tokenizer(data)
    assert (hf.pad_token, hf.unk_token, hf.cls_token, hf.sep_token, hf.mask_token) == (
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert hf("the river").input_ids[0] == hf.cls_token_id  # the tokenizer's own post-processor is kept


def test_every_checkpoint_is_a_complete_hugging_face_model_directory(tmp_path, tiny_build):
    from mlmprep.tokenizer.load import load_tokenizer

    run = tmp_path / "run"
    fit(TrainConfig(data=str(tiny_build), out=str(run), keep_checkpoints=2, **RUN))
    build_tok = load_tokenizer(tiny_build / "tokenizer.json")
    text = "the river walked quietly"
    for step in (1, 2):
        model_dir = run / f"checkpoint-{step}" / "model"
        hf = load_hf_tokenizer(model_dir)  # the build's tokenizer, not a default one made up from config.json
        assert hf.get_vocab() == build_tok.get_vocab(with_added_tokens=True)
        assert hf(text, add_special_tokens=False).input_ids == build_tok.encode(text, add_special_tokens=False).ids
        assert (hf.pad_token, hf.eos_token) == ("<pad>", "</s>") and "<extra_id_0>" in hf.all_special_tokens
        model = AutoModelForSeq2SeqLM.from_pretrained(str(model_dir), local_files_only=True)
        enc = hf(["the river <extra_id_0> quiet"], return_tensors="pt")
        labels = hf(["<extra_id_0> walked"], return_tensors="pt").input_ids
        assert torch.isfinite(model(**enc, labels=labels).loss)
    assert ((run / "checkpoint-2" / "model" / "tokenizer.json").read_bytes()
            == (tiny_build / "tokenizer.json").read_bytes())


def test_an_mlm_checkpoint_loads_as_a_masked_lm_with_its_tokenizer(tmp_path, tiny_corpus, wordpiece_path):
    data = build_tiny(tmp_path / "data", tiny_corpus, wordpiece_path, objective="mlm", seeds=1)
    run = tmp_path / "run"
    fit(TrainConfig(data=str(data), out=str(run), **{**RUN, "max_steps": 1}))
    model_dir = run / "checkpoint-1" / "model"
    hf = load_hf_tokenizer(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(str(model_dir), local_files_only=True)
    enc = hf(["the river [MASK] quiet"], return_tensors="pt")
    logits = model(**enc).logits
    assert logits.shape[:2] == enc.input_ids.shape and hf.mask_token_id in enc.input_ids[0].tolist()
