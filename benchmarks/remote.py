"""Training from object storage through the seed cache against training from local disk.

    python -m benchmarks.remote            # tiny T5 on CPU; 6 seeds, 6 epochs per side, best of 2
    python -m benchmarks.remote --quick    # 4 seeds, 5 epochs, once (CI)

One build (span-corrupted windows of tests.fakes, fixed length) is trained on twice with the same options,
side by side in one process: from its directory, and from a local S3 server (moto's server mode on
loopback, in a process of its own) as `s3://bucket/build` through the cache (a fresh cache directory, so every seed
is fetched: the first one and validation before epoch 0, each next one during the epoch before it).
Reported: real training tokens per second of wall time over the whole run (set-up, fetches, epoch
boundaries and the final evaluation included; one warm-up run first pays the imports), their ratio, the
seconds the epoch boundaries waited for data (metrics.jsonl's fetch_wait_s), and the most the cache's split
directories held at any step against two seeds plus validation, whatever the number of seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks import docs
from benchmarks.common import Figure, print_figures, ratio
from mlmprep.config import TrainConfig, size_text
from mlmprep.format.cache import tree_bytes
from mlmprep.format.load import read_manifest
from mlmprep.train.loop import fit
from tests.fakes import list_metadata_files, write_fake_build
from tests.s3server import S3Server, free_port, s3_environment

OPTIONS = dict(max_tokens_per_batch=4096, max_tokens_per_microbatch=2048, max_examples_per_microbatch=64,
               warmup_steps=4, eval_every=0, log_every=10, save_every=0)


@contextlib.contextmanager
def store_process() -> Iterator[S3Server]:
    """moto's S3 server in a process of its own, as a store is: its request handling takes no turn of this
    process's interpreter from the training."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"moto's server did not start on port {port}")
            time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def disk_bound(build: Path) -> int:
    """Two seeds (the largest) plus validation: the split bytes the cache may hold."""
    manifest = read_manifest(build)
    size = {name: entry.bytes for name, entry in manifest.splits.items()}
    seeds = sorted((size[name] for name in manifest.seed_splits), reverse=True)
    return seeds[0] + seeds[1] + size["validation"]


def split_bytes(cache_dir: Path) -> int:
    """Bytes of the split directories in the cache (its manifest, tokenizer and locks left out)."""
    return sum(tree_bytes(split) for split in cache_dir.glob("*/*") if split.is_dir() and split.name != ".locks")


def measure(held: list[int], cache_dir: Path):
    """A training hook that records the cache's bytes once per step (a stat of a few files)."""

    def hook(step, k, rows, padding):
        if k == 0:
            held.append(split_bytes(cache_dir))

    return hook


def run(quick: bool) -> dict:
    seeds, epochs, rows, repeats = (4, 5, 400, 1) if quick else (6, 6, 1000, 2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model runs fastest on one thread; both sides alike
    with tempfile.TemporaryDirectory() as tmp, store_process() as server, s3_environment(server):
        work = Path(tmp)
        build = list_metadata_files(write_fake_build(work / "build", n_rows=rows, n_seeds=seeds, format_version=3))
        bucket = server.bucket()
        server.fs().put(str(build), f"{bucket}/build", recursive=True)
        cfg = TrainConfig(**OPTIONS, epochs=epochs, data=str(build))
        fit(replace(cfg, out=str(work / "warm-up"), max_steps=3))  # imports, first allocations: paid by neither side
        sides = {"local": [], "s3": []}
        waits, peak = [], 0
        for k in range(repeats):
            for side in sides:
                out, cache_dir, held = work / f"run-{side}-{k}", work / f"cache-{k}", []
                data = str(build) if side == "local" else f"s3://{bucket}/build"
                hook = measure(held, cache_dir) if side == "s3" else None  # a glob of a few files per step
                final = fit(replace(cfg, data=data, out=str(out), cache_dir=str(cache_dir)), hook=hook)
                sides[side].append(final["tokens"] / final["wall_s"])
                if side == "s3":
                    lines = [json.loads(line) for line in (out / "metrics.jsonl").open()]
                    waits.append(sum(r["fetch_wait_s"] for r in lines if r.get("event") == "fetch"))
                    peak = max(peak, *held)
                shutil.rmtree(out)
        bound, seed = disk_bound(build), seed_bytes(build)
    torch.set_num_threads(threads)
    return {"quick": quick, "seeds": seeds, "epochs": epochs, "local": max(sides["local"]), "s3": max(sides["s3"]),
            "wait_s": min(waits), "peak": peak, "bound": bound, "seed_bytes": seed}


def seed_bytes(build: Path) -> int:
    manifest = read_manifest(build)
    return manifest.splits["seed-0"].bytes


def figures(result: dict) -> list[Figure]:
    speed = result["s3"] / result["local"]
    return [
        Figure(f"tokens/s, local disk ({result['seeds']} seeds, {result['epochs']} epochs)", f"{result['local']:,.0f}"),
        Figure("tokens/s, s3:// (local server) through the cache", f"{result['s3']:,.0f}"),
        # a quick run lasts a second or two: the first fetch and the store's client are not amortised, so not judged
        Figure("s3:// / local tokens/s", ratio(result["s3"], result["local"]), ">= 0.95x",
               None if result["quick"] else speed >= 0.95),
        Figure("epoch boundaries waited for data (all epochs)", f"{result['wait_s']:.2f} s"),
        Figure(f"cache's peak split bytes / (2 seeds + validation), a seed {size_text(result['seed_bytes'])}",
               f"{result['peak'] / result['bound']:.2f}", "<= 1.00", result["peak"] <= result["bound"]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds, epochs and rows, once (CI)")
    docs.add_arguments(parser)
    args = parser.parse_args()
    found = figures(run(args.quick))
    print_figures(found)
    if args.write_docs:
        docs.write(args.write_docs, {"remote": found}, "benchmarks.remote")


if __name__ == "__main__":
    main()
