"""The optimizer (AdamW or Adafactor) and the learning rate of each step."""

from __future__ import annotations

import math

import torch

from mlmprep.config import TrainConfig
from mlmprep.train.speed import adamw_options


def make_optimizer(model, cfg: TrainConfig):
    """AdamW with weight decay on matrices only (as nanoGPT), or Adafactor driven by lr_at."""
    groups = [
        {"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0},
    ]
    if cfg.optimizer == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=cfg.lr, scale_parameter=False, relative_step=False, warmup_init=False)
    device = next(model.parameters()).device
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **adamw_options(device))


def lr_at(step: int, cfg: TrainConfig, horizon: int) -> float:
    """Learning rate of optimizer step `step` (0-based): linear warmup to cfg.lr over warmup_steps, then
    cosine or linear decay to cfg.min_lr at step `horizon`, then min_lr; or T5's inverse square root,
    lr * sqrt(warmup_steps / (step + 1)) (as transformers' get_inverse_sqrt_schedule), floored at min_lr."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "inverse_sqrt":
        return max(cfg.min_lr, cfg.lr * math.sqrt(max(1, cfg.warmup_steps) / (step + 1)))
    done = min(1.0, (step - cfg.warmup_steps) / max(1, horizon - cfg.warmup_steps))
    coeff = 0.5 * (1.0 + math.cos(math.pi * done)) if cfg.schedule == "cosine" else 1.0 - done
    return cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)
