"""What the benchmarks share: where the real corpora are, how to time a function, and how to time and
measure a child process."""

from __future__ import annotations

import subprocess
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


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB of the child and all its descendants together) of a child process;
    raises if it fails."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak, tree = 0, psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [tree, *tree.children(recursive=True)]))
        except psutil.Error:  # a process ended while being measured
            pass
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-2000:]}")
    return wall, peak / 2**20
