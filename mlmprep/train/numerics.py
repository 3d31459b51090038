"""Numerics of a training step: the non-finite guard and model FLOPs.

A step whose loss or gradient norm is not finite is not applied: its gradients are dropped
and the optimizer never sees them, so one bad batch cannot turn every weight into NaN. `max_bad` such steps
in a row stop the run with `Diverged` (exit 1), while the weights and checkpoints are still those of the
last good step.
"""

from __future__ import annotations

from mlmprep.config import SEQ2SEQ


class Diverged(RuntimeError):
    """Too many consecutive non-finite steps, the first at `step`: the CLI prints the message and exits 1."""

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


def grad_norm(params: list, clip: float):
    """The global L2 norm of the gradients as a device tensor (no host sync), clipped to `clip` if > 0."""
    import torch

    if clip:
        return torch.nn.utils.clip_grad_norm_(params, clip)
    return torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])


class Guard:
    """Counts consecutive non-finite steps; `bad()` raises Diverged on the `max_bad`-th in a row."""

    def __init__(self, max_bad: int, run: str):
        self.max_bad, self.run = max_bad, run
        self.streak, self.first, self.last_good = 0, None, None

    def good(self, step: int) -> None:
        self.streak, self.first, self.last_good = 0, None, step

    def bad(self, step: int, what: str) -> None:
        self.streak += 1
        self.first = step if self.first is None else self.first
        if self.streak >= self.max_bad:
            kept = f"the weights are those before step {self.first}; checkpoints in {self.run} are untouched"
            raise Diverged(
                f"step {step}: {self.streak} steps in a row with a non-finite {what} (since step {self.first}); "
                f"{kept}. Try a lower --lr or a longer --warmup-steps",
                step=self.first,
            )


def flop_counter(model, objective: str):
    """A function (enc_lengths, dec_lengths) -> training FLOPs (forward + backward) of rows with those real
    lengths: 6 per weight of every Linear layer a token passes through, plus 12 * d_attn per query-key pair
    of attention (scores and mixing, forward and backward), as in the PaLM appendix's MFU count."""
    import numpy as np
    import torch

    cfg = model.config

    def linear(module) -> int:
        return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))

    if objective in SEQ2SEQ:
        enc = linear(model.get_encoder())
        dec = linear(model) - enc  # decoder blocks and the LM head
        d_attn, layers, dec_layers = cfg.num_heads * cfg.d_kv, cfg.num_layers, cfg.num_decoder_layers or cfg.num_layers

        def count(enc_len: np.ndarray, dec_len: np.ndarray) -> float:
            e, d = enc_len.astype(np.float64), dec_len.astype(np.float64)
            attention = 12 * d_attn * (layers * (e * e).sum() + dec_layers * ((d * d).sum() + (d * e).sum()))
            return float(6 * (enc * e.sum() + dec * d.sum()) + attention)
    else:
        weights, d_attn, layers = linear(model), cfg.hidden_size, cfg.num_hidden_layers

        def count(enc_len: np.ndarray, dec_len: np.ndarray) -> float:
            e = enc_len.astype(np.float64)
            return float(6 * weights * e.sum() + 12 * d_attn * layers * (e * e).sum())
    return count
