"""A build trained by the Hugging Face `Trainer`: BudgetTrainer feeds it mlmprep's token-budget plan.

What it bounds: each Trainer batch is one microbatch of `plan_epoch`, so its padded cost is within
max_tokens_per_microbatch (a lone row costlier than that trains alone, as in `mlmprep train`) and it holds at
most max_examples_per_microbatch rows. An optimizer step is `gradient_accumulation_steps` such microbatches,
not max_tokens_per_batch (the Trainer counts batches, not tokens); max_tokens_per_batch only groups the
plan's microbatches, whose order it sets. The loss is the sum over the step's label tokens divided by their
count (the Trainer's num_items_in_batch), the exact per-token gradient `mlmprep train` takes, for the step
the Trainer makes; for mdlm, MDLM's 1/t-weighted sum over the step's tokens, as `mlmprep train` takes it. Epoch e
trains on seed-{e % N} (the Trainer calls the sampler's set_epoch). One process
only: under several, use `mlmprep train`. The Trainer sizes every epoch by epoch 0's plan, which differs
from later epochs' only for ragged builds (then a longer epoch is cut short by the Trainer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import Trainer

from mlmprep.errors import ConfigError
from mlmprep.format.load import epoch_split, open_epoch, open_split, read_manifest
from mlmprep.format.rows import IGNORE
from mlmprep.train.batch import Budget, plan_epoch, split_microbatches
from mlmprep.train.collate import Collator
from mlmprep.train.loss import row_losses


@dataclass(frozen=True, eq=False)
class Rows:
    """One Trainer batch: rows of split `split` (seed-k or validation) of the build."""

    split: str
    rows: np.ndarray  # int64 [B]


class BuildRows(torch.utils.data.Dataset):
    """A build's rows for a DataLoader whose batch sampler yields `Rows`: each is collated whole by
    `Collator.from_split`, straight from the memory-mapped split (opened once per process)."""

    def __init__(self, data: str | Path, collator: Collator, split: str):
        self.data, self.collator, self.split = Path(data), collator, split
        self.splits: dict[str, object] = {}

    def __len__(self) -> int:  # the rows of `split`, for the Trainer's logs
        return read_manifest(self.data).splits[self.split].rows

    def __getitems__(self, batch: Rows) -> dict[str, torch.Tensor]:
        if batch.split not in self.splits:
            self.splits[batch.split] = open_split(self.data / batch.split)
        return self.collator.from_split(self.splits[batch.split], batch.rows)


class EpochMicrobatches(torch.utils.data.Sampler):
    """Batch sampler: the microbatches of epoch `epoch`'s plan over its split (seed-{epoch % N}), in order."""

    def __init__(self, data: str | Path, budget: Budget, *, seed: int, epoch: int = 0):
        self.data, self.budget, self.seed = Path(data), budget, seed
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        split = open_epoch(self.data, epoch)
        self.epoch, self.split = epoch, split.path.name
        plan = plan_epoch(split.enc_lengths, split.dec_lengths, self.budget, seed=self.seed, epoch=epoch)
        self.microbatches = [mb.rows for batch in plan for mb in batch.ranks[0]]

    def __len__(self) -> int:
        return len(self.microbatches)

    def __iter__(self):
        for rows in self.microbatches:
            yield Rows(self.split, rows)


def collated(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The DataLoader's collate_fn: BuildRows has collated the batch already."""
    return batch


def token_loss(outputs, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """Cross-entropy summed over label tokens, divided by the optimizer step's label tokens (the Trainer's
    num_items_in_batch; in evaluation, where it gives none, this batch's)."""
    logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
    total = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten().to(logits.device), ignore_index=IGNORE,
                            reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else (labels != IGNORE).sum()
    return total / max(int(count), 1)


class BudgetTrainer(Trainer):
    """`transformers.Trainer` on an mlmprep build: train batches are the microbatches of mlmprep's token-budget
    plan (the module docstring says what that bounds), evaluation batches the validation split's, both
    collated by `Collator`, and the loss is token_loss. `data` is the build directory; `budget` its caps;
    `seed` (default: args.seed) seeds the plan. Other arguments are the Trainer's."""

    def __init__(self, *args, data: str | Path, budget: Budget, seed: int | None = None, **kwargs):
        self.data, self.budget = Path(data), budget
        manifest = read_manifest(self.data)
        record = manifest.tokenizer
        self.collator = Collator(objective=manifest.objective, pad_id=record.pad_id,
                                 decoder_start_id=record.decoder_start_id,
                                 pad_to_multiple_of=budget.pad_to_multiple_of, vocab_size=record.vocab_size)
        kwargs.setdefault("train_dataset", BuildRows(self.data, self.collator, epoch_split(manifest, 0)))
        kwargs.setdefault("eval_dataset", BuildRows(self.data, self.collator, "validation"))
        kwargs.setdefault("compute_loss_func", token_loss)
        super().__init__(*args, **kwargs)
        if self.args.world_size > 1:
            raise ConfigError(f"BudgetTrainer runs one process, not {self.args.world_size}; "
                              "use mlmprep train for several")
        self.plan_seed = self.args.seed if seed is None else seed

    def get_batch_samples(self, epoch_iterator, num_batches: int, device: torch.device):
        """The Trainer's step of `num_batches` microbatches and its loss denominator: its label tokens, or for mdlm
        every token of its rows (MDLM's bound is a mean over the sequence, as in `mlmprep train`)."""
        batches, items = super().get_batch_samples(epoch_iterator, num_batches, device)
        if batches and "rate" in batches[0]:
            items = torch.tensor(sum(int(b["attention_mask"].sum()) for b in batches), device=device)
        return batches, items

    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):
        """The Trainer's loss without the columns the model does not take (a ul2 row's denoiser); an mdlm
        batch's is MDLM's, each row's masked tokens' cross-entropy times 1/t over the step's tokens."""
        inputs = {k: v for k, v in inputs.items() if k != "denoiser"}
        if "rate" not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        rate, labels = inputs.pop("rate"), inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
        summed = (row_losses(logits.float(), labels.to(logits.device)) / rate.to(logits.device).float()).sum()
        count = num_items_in_batch if num_items_in_batch is not None else inputs["attention_mask"].sum()
        loss = summed / max(int(count), 1)
        return (loss, outputs) if return_outputs else loss

    def loader(self, dataset: BuildRows, batches) -> torch.utils.data.DataLoader:
        """A DataLoader of `batches`; memory is pinned only where a GPU takes the batches (torch warns on a CPU)."""
        return self.accelerator.prepare(torch.utils.data.DataLoader(
            dataset, batch_sampler=batches, collate_fn=collated, num_workers=self.args.dataloader_num_workers,
            pin_memory=self.args.dataloader_pin_memory and torch.cuda.is_available()))

    def get_train_dataloader(self) -> torch.utils.data.DataLoader:
        return self.loader(self.train_dataset, EpochMicrobatches(self.data, self.budget, seed=self.plan_seed))

    def get_eval_dataloader(self, eval_dataset=None) -> torch.utils.data.DataLoader:
        dataset = eval_dataset if isinstance(eval_dataset, BuildRows) else self.eval_dataset
        split = open_split(self.data / dataset.split)
        rows = split_microbatches(np.arange(len(split)), split.enc_lengths, split.dec_lengths, self.budget)
        return self.loader(dataset, [Rows(dataset.split, r) for r in rows])


__all__ = ["BudgetTrainer", "BuildRows", "EpochMicrobatches", "Rows", "token_loss"]
