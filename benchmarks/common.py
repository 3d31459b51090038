"""What the benchmarks share: where the real corpora are, the figure a benchmark reports, how to time a
function, and how to time and measure a child process."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"  # ../shared/corpora beside the checkout


class Figure(NamedTuple):
    """One row of a benchmark's summary: what was measured, its value, and the target it is judged against."""

    name: str
    value: str
    target: str = ""
    met: bool | None = None  # None: no target to meet, or not judged in this mode


def print_figures(figures: list[Figure]) -> None:
    """The figures as aligned rows on stdout: name, value, target and whether it is met (yes, NO), as the summary
    of every benchmark and the page show them."""
    name, value = max((len(f.name) for f in figures), default=0), max((len(f.value) for f in figures), default=0)
    for f in figures:
        met = "" if f.met is None else "yes" if f.met else "NO"
        print(f"{f.name:<{name}}  {f.value:>{value}}  {f.target}  {met}".rstrip())


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x"


def compile_bytecode() -> None:
    """Write the bytecode of mlmprep and its CLI (their __pycache__ folders), as their first import does on a
    machine that allows it. Where PYTHONDONTWRITEBYTECODE is set (these machines), every process a timed run
    starts would otherwise compile their source again: about 0.1 s of a core each, which no installed copy pays."""
    import compileall
    import importlib.util

    for package in ("mlmprep", "mlmprep.cli"):
        compileall.compile_dir(Path(importlib.util.find_spec(package).origin).parent, quiet=1)


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` timed calls, after one untimed warm-up (Numba compile or cache load, page faults)."""
    return best_of_each({"fn": fn}, repeats)["fn"]


def best_of_each(fns: dict[str, Callable[[], object]], repeats: int,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """best_seconds of each function, timed in turn (times_in_turn)."""
    return {name: min(t) for name, t in times_in_turn(fns, repeats, clock).items()}


def times_in_turn(fns: dict[str, Callable[[], object]], rounds: int,
                  clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Each function's seconds in each of `rounds` rounds, after one untimed warm-up of each, the functions timed in
    turn (a, b, a, b, ...), so that a shared machine whose speed drifts during the run slows all of them alike and
    their ratio stays fair; `clock`: wall time, or time.process_time for the CPU time of this process's threads (a
    loaded machine's wall time is noise)."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return times


def median_ratio(times: dict[str, list[float]], name: str, base: str) -> float:
    """The median over the rounds of times_in_turn of `name`'s seconds over `base`'s in the same round: a cost of a
    few percent that the best of each, taken apart, would let one lucky run hide or invent."""
    return statistics.median(a / b for a, b in zip(times[name], times[base]))


class Run(NamedTuple):
    """What `timed` measured of a child process."""

    wall_s: float
    rss_mb: float  # peak RSS of the child and all its descendants together
    cpu_s: float  # CPU time (user + system) of the child and all its descendants together


def timed(cmd: list[str], env: dict | None = None) -> Run:
    """Wall seconds, peak RSS in MB and CPU seconds of a child process and all its descendants; raises if it fails.
    RSS and each process's CPU time are sampled every 20 ms (a process's last 20 ms of CPU are missed, as on every
    side of a ratio); the tree is looked up again every 0.2 s (a scan of /proc, 1 ms of CPU: at every sample it
    would take 6% of a core from the process measured). CPU time is the figure a loaded machine changes least:
    the rusage of a child leaves out its grandchildren that another process reaps (a build's workers)."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak, root, tree, samples, cpu = 0, psutil.Process(proc.pid), [], 0, {}
    while proc.poll() is None:
        if samples % 10 == 0:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:  # the child ended while being looked up
                pass
        samples += 1
        rss = 0
        for process in tree:
            try:
                with process.oneshot():
                    rss += process.memory_info().rss
                    times = process.cpu_times()
                cpu[process.pid] = times.user + times.system
            except psutil.Error:  # a process ended while being measured
                pass
        peak = max(peak, rss)
        time.sleep(0.02)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-2000:]}")
    return Run(wall, peak / 2**20, sum(cpu.values()))
