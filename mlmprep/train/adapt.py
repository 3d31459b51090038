"""OOM adaptation: per length regime, microbatch limits shrink after an out-of-memory error
and creep back up after a run of good steps, never above the user's values.

A regime is the power-of-two bucket of a batch's longest effective row (enc_len + alpha * dec_len), so
an OOM on long rows does not slow the short ones. The trainer logs each change to RUN/metrics.jsonl as an
"oom" or "grow" event.

Under DDP each rank adapts on its own, without telling the others: its microbatch count may then differ
from theirs, which is safe because only a rank's last microbatch synchronises gradients. Limitations:
an OOM inside that last, synchronising microbatch is not retried (its gradient all-reduce may be under
way; the run stops with advice to lower the caps), and only rank 0's events reach metrics.jsonl (the
other ranks print theirs to stderr).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

GROW_FACTOR = 1.25


@dataclass(frozen=True)
class Limits:
    examples: int  # rows per microbatch
    tokens: int  # padded effective tokens per microbatch


def regime_of(enc_lengths: np.ndarray, dec_lengths: np.ndarray, rows: np.ndarray, alpha: float) -> int:
    """The bucket of the longest row's effective length: rows of 65..128 effective tokens are regime 7."""
    longest = float(np.max(enc_lengths[rows] + alpha * dec_lengths[rows]))
    return max(0, math.ceil(math.log2(max(longest, 1.0))))


class Adapter:
    """Microbatch limits per regime. The state is small and JSON-ready, so checkpoints carry it."""

    def __init__(self, user: Limits, *, grow_after: int):
        self.user = user
        self.grow_after = grow_after
        self.current: dict[int, Limits] = {}  # only regimes that had an OOM
        self.good_steps: dict[int, int] = {}

    def limits(self, regime: int) -> Limits:
        return self.current.get(regime, self.user)

    def shrink(self, regime: int, examples_run: int, tokens_run: float) -> Limits | None:
        """Limits after an OOM whose largest microbatch had `examples_run` rows and `tokens_run` padded
        tokens: halve the example cap if it was the binding limit, else the token cap (below what ran, so
        the re-plan changes). None when a single row did not fit: nothing is left to shrink."""
        if examples_run <= 1:
            return None
        now = self.limits(regime)
        if examples_run >= now.examples:
            new = Limits(max(1, now.examples // 2), now.tokens)
        else:
            new = Limits(now.examples, max(1, min(now.tokens, int(tokens_run)) // 2))
        self.current[regime] = new
        self.good_steps[regime] = 0
        return new

    def succeeded(self, regime: int) -> Limits | None:
        """Count a good step; after `grow_after` of them in a row, grow the limits x1.25 (capped at the
        user's) and return them. None when nothing changed."""
        if regime not in self.current:
            return None
        self.good_steps[regime] += 1
        if self.good_steps[regime] < self.grow_after:
            return None
        now = self.current[regime]
        new = Limits(
            min(self.user.examples, math.ceil(now.examples * GROW_FACTOR)),
            min(self.user.tokens, math.ceil(now.tokens * GROW_FACTOR)),
        )
        if new == self.user:
            del self.current[regime], self.good_steps[regime]
        else:
            self.current[regime] = new
            self.good_steps[regime] = 0
        return new

    def state_dict(self) -> dict:
        return {str(r): {**asdict(lim), "good_steps": self.good_steps[r]} for r, lim in self.current.items()}

    def load_state_dict(self, state: dict) -> None:
        self.current = {int(r): Limits(s["examples"], s["tokens"]) for r, s in state.items()}
        self.good_steps = {int(r): s["good_steps"] for r, s in state.items()}
