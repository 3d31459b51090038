"""Evaluation: the validation split a run evaluates on (the build's, or --validation), cut under the eval budget,
and its mean token loss and accuracy, logged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from mlmprep.config import TrainConfig
from mlmprep.errors import ConfigError
from mlmprep.format import cache as remote
from mlmprep.format.load import Split, check_split_hashes, open_split, read_manifest
from mlmprep.format.manifest import Manifest
from mlmprep.format.rows import IGNORE
from mlmprep.format.write import manifest_path
from mlmprep.train import plots, reporters
from mlmprep.train.batch import Budget, split_microbatches
from mlmprep.train.collate import Collator
from mlmprep.train.loss import batch_loss, logits_of, row_losses
from mlmprep.train.state import Run
from mlmprep.train.world import World, all_sum, autocast, record, say

RATE_BUCKETS = 5  # mdlm is evaluated by masking rate in this many equal buckets of (0, 1]


@torch.no_grad()
def evaluate(model, split, microbatches: list[np.ndarray], collator: Collator, world: World, cfg: TrainConfig) -> dict:
    """Mean token loss and token accuracy on labels != -100 of the validation split; ranks share the work. mdlm:
    the loss is MDLM's bound per token (loss.batch_loss), and the mean token loss per rate bucket is logged too
    (eval/rate/LO-HI/loss); ul2 and prefix: per denoiser (eval/denoiser/NAME/loss)."""
    model.eval()
    groups, names = eval_groups(split)
    sums = torch.zeros(4, dtype=torch.float64, device=world.device)  # loss, correct, counted, loss denominator
    by_group = torch.zeros((2, len(names)), dtype=torch.float64, device=world.device)  # loss, counted per group
    for rows in microbatches[world.rank :: world.size]:
        mb = {name: t.to(world.device) for name, t in collator.from_split(split, rows).items()}
        with autocast(world, cfg):
            logits = logits_of(model, mb)
            counted = mb["labels"] != IGNORE
            correct = (logits.argmax(-1) == mb["labels"]) & counted
            tokens = mb["attention_mask"].sum() if "rate" in mb else counted.sum()
            sums += torch.stack([batch_loss(logits, mb).double(), correct.sum().double(), counted.sum().double(),
                                 tokens.double()])
            if names:
                at = torch.from_numpy(groups[rows]).to(world.device)
                by_group[0].index_add_(0, at, row_losses(logits, mb["labels"]).double())
                by_group[1].index_add_(0, at, counted.sum(1).double())
    model.train()
    loss, correct, counted, denominator = all_sum(world, sums).tolist()
    group_loss, group_counted = all_sum(world, by_group).tolist()
    return {"eval_loss": loss / max(denominator, 1), "eval_accuracy": correct / max(counted, 1),
            "eval_tokens": int(counted),
            **{name: g / c for name, g, c in zip(names, group_loss, group_counted) if c}}


def eval_groups(split) -> tuple[np.ndarray | None, list[str]]:
    """Each row's group and the groups' metric names: a ul2 or prefix split's denoisers, an mdlm split's rate
    buckets; (None, []) for the others."""
    if split.denoiser is not None and split.denoisers:
        return split.denoiser.astype(np.int64), [f"eval/denoiser/{name}/loss" for name in split.denoisers]
    if split.rate is not None:
        bucket = np.minimum((split.rate.astype(np.float64) * RATE_BUCKETS).astype(np.int64), RATE_BUCKETS - 1)
        return bucket, [f"eval/rate/{k / RATE_BUCKETS:.1f}-{(k + 1) / RATE_BUCKETS:.1f}/loss"
                        for k in range(RATE_BUCKETS)]
    return None, []


def evaluate_build(run: Run, step: int) -> dict:
    """Evaluate on the validation rows of one build and log it."""
    metrics = evaluate(run.model, *run.val, run.collator, run.world, run.cfg)
    record(run.out, run.world, step=step, **metrics)
    reporters.report(run.writer, {"step": step, **metrics})
    if run.world.main:
        plots.update(run.out)  # RUN/plots.png
    say(run.world, f"step {step}: eval loss {metrics['eval_loss']:.4f}, token accuracy {metrics['eval_accuracy']:.4f}")
    return metrics


def validation(cfg: TrainConfig, manifest: Manifest):
    """(split, microbatches under the eval budget) to evaluate on: --validation, else the build's validation
    split; None if there is none or it has no rows."""
    if cfg.validation:
        path = other_validation(cfg.validation[0], cfg, manifest)
    elif getattr(manifest.split("validation"), "rows", 0):
        path = remote.local_build(cfg.data) / "validation"
        check_split_hashes(path.parent, manifest, "validation")  # evaluated on: its bytes the recorded ones
    else:
        return None
    return eval_batches(cfg, open_split(path, objective=manifest.objective))


def eval_batches(cfg: TrainConfig, split: Split):
    """(split, its microbatches under the eval budget), or None when it has no rows."""
    if len(split) == 0:
        return None
    budget = Budget(cfg.eval_max_tokens_per_microbatch, cfg.eval_max_tokens_per_microbatch,
                    cfg.max_examples_per_microbatch, alpha=cfg.alpha, pad_to_multiple_of=cfg.pad_to_multiple_of)
    return split, split_microbatches(np.arange(len(split)), split.enc_lengths, split.dec_lengths, budget)


def other_validation(given: str, cfg: TrainConfig, manifest: Manifest) -> Path:
    """A --validation split, checked to come from a build with cfg.data's tokenizer and objective."""
    path = Path(given)
    if not (path / "state.json").is_file() or not manifest_path(path.parent).is_file():
        raise ConfigError(f"--validation {path}: not a split directory of a build; give one such as BUILD/validation")
    other = read_manifest(path.parent)
    if other.tokenizer.sha256 != manifest.tokenizer.sha256:
        raise ConfigError(f"--validation {path}: built with another tokenizer than {cfg.data}; build it with "
                          f"--tokenizer {Path(cfg.data) / 'tokenizer.json'}")
    if other.objective != manifest.objective:
        raise ConfigError(f"--validation {path}: {other.objective} data, but {cfg.data} is {manifest.objective} "
                          f"data; give a split of a --objective {manifest.objective} build")
    return path
