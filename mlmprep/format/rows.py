"""Ragged rows of token ids, the in-memory form of a split's columns: what the build cuts and masks, and what
the writer writes and the reader gives back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

IGNORE = -100  # label of a position the MLM loss skips (PyTorch's CrossEntropyLoss ignore_index)


def starts_of(sizes) -> np.ndarray:
    """int64 [n + 1]: where each of n runs of the given sizes starts when they lie one after another, and the end
    (the offsets of ragged rows of those lengths)."""
    starts = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    return starts


def span_indices(starts, sizes: np.ndarray) -> np.ndarray:
    """int64: the indices of the spans [starts[i], starts[i] + sizes[i]) one after another (starts 0: each span's
    own positions, 0 to sizes[i] - 1); its work is theirs, not the array's they index."""
    return np.arange(int(sizes.sum())) + np.repeat(starts - starts_of(sizes)[:-1], sizes)


class Rows(NamedTuple):
    """Ragged int32 rows: row i is values[offsets[i]:offsets[i + 1]]."""

    values: np.ndarray  # [total] int32
    offsets: np.ndarray  # [n + 1] int64

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def slice(self, start: int, stop: int) -> Rows:
        """Rows start..stop-1, as views."""
        offsets = self.offsets[start : stop + 1]
        return Rows(self.values[offsets[0] : offsets[-1]], offsets - offsets[0])

    def pieces(self, max_tokens: int) -> Iterator[Rows]:
        """The rows as consecutive views of at most `max_tokens` tokens each (one longer row alone)."""
        start = 0
        while start < len(self):
            fits = int(np.searchsorted(self.offsets, self.offsets[start] + max_tokens, side="right")) - 1
            stop = min(len(self), max(start + 1, fits))
            yield self.slice(start, stop)
            start = stop

    def take(self, index: np.ndarray) -> Rows:
        """The rows at `index` (sorted or not), as new contiguous Rows."""
        lengths = self.lengths()[index]
        offsets = starts_of(lengths)
        if len(index) and np.all(lengths == lengths[0]):  # fixed length: one fancy-index gather
            width = int(lengths[0])
            cols = self.offsets[index][:, None] + np.arange(width)
            return Rows(self.values[cols.ravel()], offsets)
        parts = [self.values[self.offsets[i] : self.offsets[i + 1]] for i in index]
        return Rows(np.concatenate(parts) if parts else np.zeros(0, np.int32), offsets)


def concat_rows(parts: list[Rows]) -> Rows:
    """One Rows holding `parts` one after another."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return Rows(np.zeros(0, np.int32), np.zeros(1, np.int64))
    return Rows(np.concatenate([p.values for p in parts]), starts_of(np.concatenate([p.lengths() for p in parts])))
