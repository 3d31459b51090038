"""Models from presets: T5 and T5 v1.1 at their published shapes, a BERT of the same width and depth for MLM data,
and an untied head that stays untied through training and a checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from mlmprep.config import TrainConfig
from mlmprep.format.load import read_manifest
from mlmprep.format.manifest import TokenizerRecord
from mlmprep.train.loop import fit
from mlmprep.train.model import PRESETS, build_model
from tests.train.conftest import SMALL

pytestmark = pytest.mark.usefixtures("one_thread")


T5_VOCAB = TokenizerRecord(file="tokenizer.json", sha256="0" * 64, vocab_size=32100, pad_id=0, eos_id=1,
                            decoder_start_id=0)  # T5's tokenizer: 32128 embedding rows


@pytest.mark.parametrize("name, parameters, v1_1", [
    ("t5-small", 60_506_624, False), ("t5-base", 222_903_552, False),  # google-t5/t5-small, t5-base
    ("t5-v1_1-small", 76_961_152, True), ("t5-v1_1-base", 247_577_856, True),  # google/t5-v1_1-small, -base
])
def test_presets_have_the_published_shapes(name, parameters, v1_1):
    with torch.device("meta"):  # shapes only: no memory, no initialisation time
        model = build_model(name, "span", T5_VOCAB)
    assert sum(p.numel() for p in model.parameters()) == parameters
    ff = model.encoder.block[0].layer[1].DenseReluDense
    assert hasattr(ff, "wi_0") == v1_1 and (model.config.feed_forward_proj == "gated-gelu") == v1_1
    assert (model.lm_head.weight is model.shared.weight) != v1_1  # v1.1: untied input and output embeddings
    assert model.config.dropout_rate == 0.0  # pretraining, as nanoT5


@pytest.mark.parametrize("name, untied", [("t5-small", False), ("t5-v1_1-small", True), ("t5-v1_1-base", True)])
def test_presets_give_mlm_data_a_bert_of_their_width_and_depth(name, untied):
    with torch.device("meta"):
        model = build_model(name, "mlm", T5_VOCAB)
    t5 = PRESETS[name]
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (t5["d_model"], t5["num_layers"])
    assert (model.cls.predictions.decoder.weight is not model.bert.embeddings.word_embeddings.weight) == untied


def test_an_untied_t5_keeps_its_own_head_through_training_and_a_checkpoint(tmp_path, span_data, capfd):
    """A v1.1-style config.json: lm_head trains apart from the shared embedding, and reloads untied."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "t5", "d_model": 32, "d_ff": 64, "d_kv": 8, "num_heads": 2,
                                  "num_layers": 1, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
                                  "dropout_rate": 0.0}))
    run = tmp_path / "run"
    fit(TrainConfig(data=str(span_data), out=str(run), model=str(config), **SMALL, max_steps=2))
    tok = read_manifest(span_data).tokenizer
    capfd.readouterr()
    model = build_model(str(run / "checkpoint-2"), "span", tok)
    assert "lm_head" not in capfd.readouterr().err  # no warning that the untied head is not tied
    assert model.lm_head.weight is not model.shared.weight
    assert not torch.equal(model.lm_head.weight, model.shared.weight)
