"""The randomness rule every build stage draws from: SplitMix64's finaliser and its keyed streams, in plain NumPy.

Masking, near-duplicate detection and the validation hold-out hash their seeds with these; the Numba kernels
(`_kernels`, `_dedup_kernels`) compile these same functions into their loops, so the driver of a build hashes
seeds without loading Numba, and the bytes hang on nothing else.
"""

from __future__ import annotations

import numpy as np

MASK64 = (1 << 64) - 1
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # SplitMix64 increment (2**64 / golden ratio)
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
U27, U30, U31 = np.uint64(27), np.uint64(30), np.uint64(31)


def mix64(z):
    """SplitMix64's finaliser: a bijection of uint64 (scalars or arrays; products wrap) whose output bits all depend
    on all input bits."""
    z = (z ^ (z >> U30)) * MIX1
    z = (z ^ (z >> U27)) * MIX2
    return z ^ (z >> U31)


def stream_key(key, index):
    """The start of stream `index` under `key` (both uint64): distinct indices give unrelated streams."""
    return mix64(mix64(key) + np.uint64(index) * GOLDEN)


__all__ = ["GOLDEN", "MASK64", "mix64", "stream_key"]
