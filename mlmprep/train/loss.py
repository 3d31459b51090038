"""The training loss: logits over the label positions and their cross-entropy, summed over the batch or per row."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mlmprep.format.rows import IGNORE


def logits_of(model, mb: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, L, V] logits over the label positions (decoder for T5, encoder for BERT)."""
    return model(**{k: v for k, v in mb.items() if k != "labels"}).logits


def summed_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over labels != -100. Autocast computes it in float32 on CUDA; on CPU it keeps
    the model's dtype (float64 in the exact-gradient test)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum")


def row_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over each row's labels != -100, [B]: a mixture's loss per source."""
    per_token = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="none")
    return per_token.view(labels.shape).sum(1)
