"""Training on ul2, prefix and mdlm builds: MDLM's 1/t-weighted loss and the per-denoiser evaluation against a
direct computation here (one row at a time, no padding), and the HF Trainer path on both."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mlmprep.format.load import open_split, read_manifest
from mlmprep.train.model import build_model
from tests.conftest import build_tiny, tiny_documents

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text("\n".join(tiny_documents(600, seed=5)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ul2(tmp_path_factory, corpus, tiny_tokenizer_path):
    return build_tiny(tmp_path_factory.mktemp("ul2") / "b", corpus, tiny_tokenizer_path, objective="ul2",
                      input_length=64, validation_fraction=0.2)


@pytest.fixture(scope="module")
def mdlm(tmp_path_factory, corpus, wordpiece_path):
    return build_tiny(tmp_path_factory.mktemp("mdlm") / "b", corpus, wordpiece_path, objective="mdlm",
                      input_length=64, validation_fraction=0.2)


def row_loss(model, row: dict, seq2seq: bool, decoder_start: int) -> tuple[float, int]:
    """(summed cross-entropy over the row's labels != -100, their count) of one row alone, no padding."""
    x = torch.as_tensor(row["input_ids"].astype(np.int64))[None]
    y = torch.as_tensor(row["labels"].astype(np.int64))[None]
    with torch.no_grad():
        if seq2seq:
            decoder = torch.cat([torch.tensor([[decoder_start]]), y[:, :-1]], 1)
            logits = model(input_ids=x, attention_mask=torch.ones_like(x), decoder_input_ids=decoder).logits
        else:
            logits = model(input_ids=x, attention_mask=torch.ones_like(x)).logits
    keep = y[0] != -100
    log_p = F.log_softmax(logits[0].double(), -1)
    return float(-log_p[keep, y[0][keep]].sum()), int(keep.sum())


def test_mdlm_loss_is_the_1_over_t_weighted_sum_over_the_batch_s_tokens(mdlm):
    from mlmprep.train.collate import Collator
    from mlmprep.train.loss import batch_loss, logits_of

    manifest = read_manifest(mdlm)
    split = open_split(mdlm / "seed-0")
    model = build_model("tiny", "mdlm", manifest.tokenizer, max_length=64).eval()
    rows = np.arange(12)
    mb = Collator("mdlm", manifest.tokenizer.pad_id, manifest.tokenizer.decoder_start_id).from_split(split, rows)
    with torch.no_grad():
        got = float(batch_loss(logits_of(model, mb).double(), mb)) / int(split.n_targets[rows].sum())
    direct, tokens = 0.0, 0
    for r in rows:
        loss, _ = row_loss(model, split.row(int(r)), False, 0)
        direct += loss / float(split.rate[r])
        tokens += len(split.row(int(r))["input_ids"])
    assert got == pytest.approx(direct / tokens, rel=1e-5)
    assert not np.allclose(split.rate[rows], split.rate[rows][0])  # the weights differ from row to row


def test_evaluation_reports_each_denoiser_s_and_each_rate_bucket_s_mean_token_loss(ul2, mdlm):
    from mlmprep.config import TrainConfig
    from mlmprep.train.collate import Collator
    from mlmprep.train.evaluation import eval_batches, evaluate
    from mlmprep.train.world import World

    for build, seq2seq in ((ul2, True), (mdlm, False)):
        manifest = read_manifest(build)
        record = manifest.tokenizer
        model = build_model("tiny", manifest.objective, record, max_length=64)
        cfg = TrainConfig(data=str(build))
        split, microbatches = eval_batches(cfg, open_split(build / "validation"))
        collator = Collator(manifest.objective, record.pad_id, record.decoder_start_id)
        metrics = evaluate(model, split, microbatches, collator, World(0, 1, torch.device("cpu")), cfg)
        model.eval()
        groups = ([f"eval/denoiser/{name}/loss" for name in manifest.denoiser_names()] if seq2seq else
                  [f"eval/rate/{k / 5:.1f}-{(k + 1) / 5:.1f}/loss" for k in range(5)])
        sums = {name: [0.0, 0] for name in groups}
        for r in range(len(split)):
            row = split.row(r)
            loss, count = row_loss(model, row, seq2seq, record.decoder_start_id)
            name = groups[int(row["denoiser"])] if seq2seq else groups[min(int(float(row["rate"]) * 5), 4)]
            sums[name][0] += loss
            sums[name][1] += count
        expected = {name: loss / count for name, (loss, count) in sums.items() if count}
        assert len(expected) >= 4
        assert {name: metrics[name] for name in expected} == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("objective", ["ul2", "mdlm"])
def test_the_hf_trainer_trains_ul2_and_mdlm_builds(tmp_path, ul2, mdlm, objective):
    from transformers import TrainingArguments

    from mlmprep.train.batch import Budget
    from mlmprep.train.hf import BudgetTrainer

    build = ul2 if objective == "ul2" else mdlm
    model = build_model("tiny", objective, read_manifest(build).tokenizer, max_length=64)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=4, gradient_accumulation_steps=2,
                             learning_rate=1e-3, use_cpu=True, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, seed=0, prediction_loss_only=True)
    trainer = BudgetTrainer(model=model, args=args, data=build,
                            budget=Budget(max_tokens_per_batch=2048, max_tokens_per_microbatch=512,
                                          max_examples_per_microbatch=8, alpha=2.0))
    trainer.train()
    assert math.isfinite(trainer.evaluate()["eval_loss"])
    if objective == "mdlm":  # the Trainer's loss of a batch is MDLM's weighted one over the batch's tokens
        split = open_split(build / "seed-0")
        batch = trainer.collator.from_split(split, np.arange(6))
        model.eval()
        with torch.no_grad():
            got = float(trainer.compute_loss(model, dict(batch)))
        direct = sum(row_loss(model, split.row(r), False, 0)[0] / float(split.rate[r]) for r in range(6))
        assert got == pytest.approx(direct / int(batch["attention_mask"].sum()), rel=1e-4)


def test_training_logs_each_denoiser_s_loss_and_they_average_to_the_step_s(tmp_path, ul2):
    import json

    from mlmprep.config import TrainConfig
    from mlmprep.format.load import open_epoch
    from mlmprep.train.loop import fit

    seen: dict[int, list] = {}
    cfg = TrainConfig(data=str(ul2), out=str(tmp_path / "run"), max_steps=2, log_every=1, eval_every=0,
                      save_every=0, max_tokens_per_batch=4096, warmup_steps=1)
    fit(cfg, hook=lambda step, k, rows, padding: None if padding else seen.setdefault(step, []).append(rows))
    split = open_epoch(ul2, 0)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    lines = [line for line in lines if "loss" in line and "lr" in line]
    assert len(lines) == 2
    for line, step in zip(lines, sorted(seen)):
        rows = np.concatenate(seen[step])
        targets = np.bincount(split.denoiser[rows], weights=split.n_targets[rows], minlength=7)
        losses = [line.get(f"train/denoiser/{name}/loss") for name in split.denoisers]
        assert [loss is not None for loss in losses] == list(targets > 0)
        mean = sum(loss * t for loss, t in zip(losses, targets) if loss is not None) / targets.sum()
        assert mean == pytest.approx(line["loss"], rel=1e-5)
