"""What the benchmarks share: where the real corpora are, and how to time a function."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"  # ../shared/corpora beside the checkout


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` timed calls, after one untimed warm-up (Numba compile or cache load, page faults)."""
    return best_of_each({"fn": fn}, repeats)["fn"]


def best_of_each(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """best_seconds of each function, timed in turn (a, b, a, b, ...), so that a shared machine whose speed
    drifts during the run slows all of them alike and their ratio stays fair."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}
