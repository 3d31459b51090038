"""BudgetTrainer: the real transformers.Trainer trains a tiny T5 on a build, one plan microbatch per batch
(within the microbatch caps), epoch e on seed-{e % N}, validation for evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("transformers")
from transformers import TrainingArguments  # noqa: E402

from mlmprep.format.load import open_split, read_manifest  # noqa: E402
from mlmprep.format.rows import IGNORE  # noqa: E402
from mlmprep.train.batch import Budget  # noqa: E402
from mlmprep.train.hf import BudgetTrainer  # noqa: E402
from mlmprep.train.model import build_model  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

MICROBATCH_TOKENS, MICROBATCH_ROWS, ALPHA = 400, 8, 2.0


class Recording(BudgetTrainer):
    """Keeps every training batch's rows, unpadded, before the loss takes the labels out."""

    seen: list

    def training_step(self, model, inputs, *args, **kwargs):
        self.seen.append({k: inputs[k].clone() for k in ("input_ids", "attention_mask", "labels")})
        return super().training_step(model, inputs, *args, **kwargs)


def rows_of(batch) -> list[tuple]:
    ids, mask, labels = (batch[k].numpy() for k in ("input_ids", "attention_mask", "labels"))
    return [(tuple(ids[i][mask[i] == 1]), tuple(labels[i][labels[i] != IGNORE])) for i in range(len(ids))]


def split_rows(split) -> list[tuple]:
    return [(tuple(split.row(i)["input_ids"]), tuple(split.row(i)["labels"])) for i in range(len(split))]


def test_budget_trainer_trains_with_the_plan_and_the_round_robin_of_seeds(tmp_path, tiny_build):
    model = build_model("tiny", "span", read_manifest(tiny_build).tokenizer, max_length=64)
    budget = Budget(max_tokens_per_batch=1600, max_tokens_per_microbatch=MICROBATCH_TOKENS,
                    max_examples_per_microbatch=MICROBATCH_ROWS, alpha=ALPHA)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=20, gradient_accumulation_steps=4,
                             learning_rate=1e-3, use_cpu=True, report_to=[], save_strategy="no",
                             logging_strategy="no", disable_tqdm=True, seed=0, prediction_loss_only=True)
    trainer = Recording(model=model, args=args, data=tiny_build, budget=budget)
    trainer.seen = []
    per_epoch = len(trainer.get_train_dataloader())
    trainer.train()
    assert per_epoch < len(trainer.seen) <= 2 * per_epoch  # the run goes into epoch 1, not past it

    seeds = [split_rows(open_split(tiny_build / f"seed-{k}")) for k in (0, 1)]
    assert set(seeds[0]) != set(seeds[1])  # the seeds mask differently, so the rows tell the epochs apart
    epochs = [[row for batch in trainer.seen[e * per_epoch:(e + 1) * per_epoch] for row in rows_of(batch)]
              for e in (0, 1)]
    assert sorted(epochs[0]) == sorted(seeds[0])  # epoch 0: every row of seed-0 once
    assert epochs[1] and set(epochs[1]) <= set(seeds[1])  # epoch 1: seed-1's rows
    for batch in trainer.seen:
        rows, enc_width = batch["input_ids"].shape
        dec_width = batch["labels"].shape[1]
        assert rows <= MICROBATCH_ROWS and rows * (enc_width + ALPHA * dec_width) <= MICROBATCH_TOKENS

    metrics = trainer.evaluate()
    assert math.isfinite(metrics["eval_loss"])
    assert np.isfinite(trainer.state.log_history[-1]["eval_loss"])
