"""What the benchmarks share: where the real corpora are, and how to time a function."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"  # ../shared/corpora beside the checkout


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` timed calls, after one untimed warm-up (Numba compile or cache load, page faults)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
