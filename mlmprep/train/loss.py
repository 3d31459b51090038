"""The training loss: logits over the label positions and their cross-entropy, summed over the batch or per row;
masked diffusion (mdlm) weighs each row's by 1/t, its masking rate (MDLM's bound)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mlmprep.format.rows import IGNORE

NOT_INPUTS = ("labels", "rate", "denoiser")  # batch entries the model is not given


def logits_of(model, mb: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, L, V] logits over the label positions (decoder for T5, encoder for BERT)."""
    return model(**{k: v for k, v in mb.items() if k not in NOT_INPUTS}).logits


def summed_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over labels != -100. Autocast computes it in float32 on CUDA; on CPU it keeps
    the model's dtype (float64 in the exact-gradient test)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum")


def row_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over each row's labels != -100, [B]: a mixture's loss per source."""
    per_token = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="none")
    return per_token.view(labels.shape).sum(1)


def batch_loss(logits: torch.Tensor, mb: dict[str, torch.Tensor], summed=summed_loss) -> torch.Tensor:
    """A microbatch's summed loss: `summed` (cross-entropy over labels != -100, maybe compiled), or with rates (mdlm)
    MDLM's weighted sum, each row's masked tokens' cross-entropy times 1/t; the step divides it by the batch's
    tokens, so its mean is MDLM's bound per token."""
    if "rate" in mb:
        return (row_losses(logits, mb["labels"]) / mb["rate"].to(logits.dtype)).sum()
    return summed(logits, mb["labels"])
