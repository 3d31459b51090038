"""Models from `transformers`, built from a config (never downloaded): T5 for span data, BERT for mlm data.

`--model` is a preset (`tiny`, `t5-small`, `t5-base`, `t5-v1_1-small`, `t5-v1_1-base`), a config.json, or a local
pretrained checkpoint directory (a transformers `save_pretrained` directory, or an mlmprep
`RUN/checkpoint-{step}`). The vocabulary and special ids always follow the build's tokenizer
(the manifest's tokenizer record).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from mlmprep.config import SEQ2SEQ
from mlmprep.errors import ConfigError
from mlmprep.format.manifest import TokenizerRecord

# T5 shapes (the t5-small / t5-base checkpoints of Raffel et al.); mlm data gets a BERT of the same width
# and depth (t5-base -> exactly bert-base). Dropout is off, as in nanoT5 and T5 v1.1 pretraining.
PRESETS = {
    "tiny": dict(d_model=64, d_ff=256, d_kv=16, num_heads=4, num_layers=2),  # a CPU smoke run in seconds
    "t5-small": dict(d_model=512, d_ff=2048, d_kv=64, num_heads=8, num_layers=6),  # ~60M parameters
    "t5-base": dict(d_model=768, d_ff=3072, d_kv=64, num_heads=12, num_layers=12),  # ~220M parameters
    # T5 v1.1 (google/t5-v1_1-*), the models nanoT5 pretrains: gated-GELU feed-forward, untied input and
    # output embeddings, no dropout in pretraining (HF's configs say 0.1, for fine-tuning)
    "t5-v1_1-small": dict(d_model=512, d_ff=1024, d_kv=64, num_heads=6, num_layers=8),  # ~77M parameters
    "t5-v1_1-base": dict(d_model=768, d_ff=2048, d_kv=64, num_heads=12, num_layers=12),  # ~248M parameters
}
V1_1 = dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
VOCAB_MULTIPLE = 128  # embedding rows are padded to a multiple of this, for faster matmuls


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def preset_config(name: str, objective: str, tokenizer: TokenizerRecord, max_length: int):
    """The transformers config of a preset, sized for the build's tokenizer and longest row."""
    from transformers import BertConfig, T5Config

    shape, v1_1 = PRESETS[name], name.startswith("t5-v1_1")
    vocab = round_up(tokenizer.vocab_size, VOCAB_MULTIPLE)
    if objective in SEQ2SEQ:
        return T5Config(
            vocab_size=vocab, **shape, **(V1_1 if v1_1 else {}), dropout_rate=0.0, pad_token_id=tokenizer.pad_id,
            eos_token_id=tokenizer.eos_id, decoder_start_token_id=tokenizer.decoder_start_id,
        )
    return BertConfig(
        vocab_size=vocab, hidden_size=shape["d_model"], intermediate_size=shape["d_ff"],
        num_attention_heads=shape["d_model"] // shape["d_kv"],  # heads fill d_model
        num_hidden_layers=shape["num_layers"],
        max_position_embeddings=round_up(max(max_length, 512), VOCAB_MULTIPLE),
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=tokenizer.pad_id,
        tie_word_embeddings=not v1_1,
    )


def file_config(path: Path):
    """A transformers config from a config.json (its `model_type` picks the class)."""
    from transformers import AutoConfig

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return AutoConfig.for_model(data.pop("model_type"), **data)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"--model {path}: not a transformers config.json with a model_type ({exc})") from None


def auto_class(objective: str):
    from transformers import AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    return AutoModelForSeq2SeqLM if objective in SEQ2SEQ else AutoModelForMaskedLM


def check_model_spec(spec: str) -> None:
    """Refuse a --model that is not a preset, a config.json or a directory with one (an mlmprep checkpoint's too)."""
    path = Path(spec)
    if (spec in PRESETS or path.is_file() or (path / "config.json").is_file()
            or (path / "model" / "config.json").is_file()):
        return
    raise ConfigError(
        f"--model {spec}: not a preset ({', '.join(PRESETS)}), a config.json file or a directory with config.json"
    )


def build_model(spec: str, objective: str, tokenizer: TokenizerRecord, *, max_length: int = 512):
    """A float32 model for `objective` (span, ul2, prefix: a seq2seq LM; mlm, mdlm: a masked LM) from a preset name, a
    config.json or a local checkpoint directory; `tokenizer` is the manifest's tokenizer entry."""
    import torch

    check_model_spec(spec)
    path = Path(spec)
    if (path / "model" / "config.json").is_file():  # an mlmprep checkpoint-{step} directory
        path = path / "model"
    if spec in PRESETS:
        source = preset_config(spec, objective, tokenizer, max_length)
    elif path.is_file():
        source = file_config(path)
        source.vocab_size = round_up(tokenizer.vocab_size, VOCAB_MULTIPLE)
        source.pad_token_id = tokenizer.pad_id
    else:  # a directory with config.json
        source = str(path)
    cls = auto_class(objective)
    logging.getLogger("transformers.modeling_utils").addFilter(untied_head_is_right)
    try:
        if isinstance(source, str):
            model = cls.from_pretrained(source, local_files_only=True, dtype=torch.float32)
        else:
            model = cls.from_config(source)
    except ValueError as exc:  # e.g. a BERT config for span data
        kind = "a seq2seq model (e.g. T5)" if objective in SEQ2SEQ else "a masked-LM model (e.g. BERT)"
        raise ConfigError(f"--model {spec}: {objective} data needs {kind} ({str(exc).splitlines()[0]})") from None
    if objective in SEQ2SEQ and not getattr(model.config, "scale_decoder_outputs", model.config.tie_word_embeddings):
        untie_output_embedding(model)
    rows = model.get_input_embeddings().weight.shape[0]
    if rows < tokenizer.vocab_size:
        raise ConfigError(
            f"--model {spec}: {rows} embedding rows, fewer than the build's tokenizer vocabulary "
            f"({tokenizer.vocab_size}); use a model built for this tokenizer"
        )
    if objective in SEQ2SEQ:
        model.config.decoder_start_token_id = tokenizer.decoder_start_id
    return model.float()


def untie_output_embedding(model) -> None:
    """Give a T5 v1.1 (untied, unscaled logits) its own lm_head weights. transformers 5's T5Config always
    ties T5's embeddings and keeps only the logit scale off; a saved checkpoint holds both weights and
    loads untied. The head is initialised as transformers initialises an untied one."""
    import torch

    shared = model.get_input_embeddings().weight
    if model.lm_head.weight is not shared:
        return  # transformers 4 honours tie_word_embeddings=False, and a loaded checkpoint is already untied
    model.lm_head.weight = torch.nn.Parameter(torch.empty_like(shared).normal_(0.0, model.config.initializer_factor))
    getattr(model, "all_tied_weights_keys", {}).pop("lm_head.weight", None)


def untied_head_is_right(record: logging.LogRecord) -> bool:
    """Drop transformers 5's warning, on loading a T5 v1.1 checkpoint, that its lm_head is kept apart from
    the shared embedding: that is what v1.1 is (see untie_output_embedding)."""
    return "tie shared.weight to lm_head.weight" not in record.getMessage()


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())
