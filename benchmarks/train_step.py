"""Training-step throughput of the `tiny` T5 on CPU: token-budget batches against a fixed batch size with
the same mean tokens per batch, on variable-length rows.

    python -m benchmarks.train_step            # 2,400 rows, 40 steps per side
    python -m benchmarks.train_step --quick    # 300 rows, up to 10 steps per side, for CI

Rows are span-corrupted windows (tests.fakes) whose lengths spread like text segments: log-normal, median
96 tokens, clipped to [16, 512]. Both sides run the trainer's own step (`accumulate`: every microbatch's
summed token loss over the batch's label tokens, then AdamW) on the same rows, one thread, float32:

    token budget  plan_epoch: rows sorted by length inside pools, microbatches cut at 2,048 padded
                  effective tokens (enc + 2 * dec) or 64 rows, batches filled to 8,192
    fixed batch   a shuffled epoch in batches of B rows (B = the budget plan's mean rows per batch), each
                  run as microbatches of b rows (b = the plan's mean rows per microbatch), padded to the longest

Reported per side: real tokens per second (encoder + decoder, padding excluded), padding efficiency
(real tokens / padded slots), steps and mean real tokens per step.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from mlmprep.batch import Budget, plan_epoch, plan_stats
from mlmprep.collate import Collator
from mlmprep.config import TrainConfig
from mlmprep.load import open_epoch, read_manifest
from mlmprep.model import build_model
from mlmprep.train import World, accumulate, make_optimizer, row_targets, seed_everything
from tests.fakes import write_fake_build

BUDGET = Budget(max_tokens_per_batch=8192, max_tokens_per_microbatch=2048, max_examples_per_microbatch=64)
CPU = World(rank=0, size=1, device=torch.device("cpu"))


def lengths(n: int) -> np.ndarray:
    """Window lengths that spread like text segments: log-normal around 96 tokens, clipped to [16, 512]."""
    return np.clip(np.exp(np.random.default_rng(0).normal(np.log(96), 0.7, n)), 16, 512).astype(np.int64)


def fixed_batches(n: int, batch: int, micro: int) -> list[list[np.ndarray]]:
    """The usual loader: a shuffled epoch cut into batches of `batch` rows, each into microbatches of `micro`."""
    order = np.random.default_rng(1).permutation(n)
    return [[order[i : i + batch][j : j + micro] for j in range(0, batch, micro)] for i in range(0, n - batch + 1, batch)]


def time_steps(steps: list[list[np.ndarray]], split, work: Path) -> dict:
    """Train the tiny T5 from the same initial weights through `steps`; real tokens/s and padding efficiency."""
    tok = read_manifest(work)["tokenizer"]
    seed_everything(0)
    model = build_model("tiny", "span", tok)
    cfg = TrainConfig()
    optimizer = make_optimizer(model, cfg)
    collator = Collator("span", tok["pad_id"], tok["decoder_start_id"])
    targets = row_targets(split, collator)
    real = slots = 0.0
    first = time.perf_counter()
    for k, microbatches in enumerate(steps):
        if k == 1:  # the first step pays for allocations and lazy initialisation
            start, real, slots = time.perf_counter(), 0.0, 0.0
        n_targets = int(sum(targets[rows].sum() for rows in microbatches))
        _, sums = accumulate(model, split, collator, [(rows, False) for rows in microbatches], n_targets, world=CPU, cfg=cfg)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        real, slots = real + sums[0], slots + sums[1]
    seconds = time.perf_counter() - (start if len(steps) > 1 else first)
    return {"tokens_per_s": real / seconds, "padding_efficiency": real / slots, "steps": len(steps),
            "tokens_per_step": real / max(len(steps) - 1, 1)}


def run(quick: bool = False, threads: int = 1) -> dict:
    torch.set_num_threads(threads)
    n_rows, n_steps = (300, 10) if quick else (2400, 40)
    with tempfile.TemporaryDirectory() as tmp:
        work = write_fake_build(Path(tmp) / "data", n_rows=n_rows, lengths=lengths(n_rows), n_seeds=1, vocab_size=2048)
        split = open_epoch(work, 0)
        enc, dec = split.enc_lengths, split.dec_lengths
        plan = plan_epoch(enc, dec, BUDGET, seed=0, epoch=0)
        stats = plan_stats(plan, enc, dec, BUDGET)
        batch = round(sum(len(mb.rows) for b in plan for mb in b.ranks[0]) / len(plan))
        micro = max(1, round(batch * stats["batches"] / stats["microbatches"]))
        budget_steps = [[mb.rows for mb in b.ranks[0]] for b in plan][:n_steps]
        fixed_steps = fixed_batches(len(split), batch, micro)[:n_steps]
        results = {"rows": n_rows, "threads": threads, "fixed_batch": batch, "fixed_microbatch": micro,
                   "mean_row_tokens": float((enc + dec).mean()), "budget": vars(BUDGET)}
        results["token_budget"] = time_steps(budget_steps, split, work)
        results["fixed_batch_size"] = time_steps(fixed_steps, split, work)
    return results


def print_table(r: dict) -> None:
    print(f"tiny T5 on CPU ({r['threads']} thread), {r['rows']} variable-length rows, mean {r['mean_row_tokens']:.0f} "
          f"real tokens per row; fixed side: batches of {r['fixed_batch']} rows in microbatches of {r['fixed_microbatch']}")
    a, b = r["token_budget"], r["fixed_batch_size"]
    print(f"  {'':22}{'token budget':>14}{'fixed batch':>14}{'ratio':>8}")
    for key, fmt in (("tokens_per_s", "{:14.0f}"), ("padding_efficiency", "{:14.3f}"), ("tokens_per_step", "{:14.0f}")):
        print(f"  {key:22}" + fmt.format(a[key]) + fmt.format(b[key]) + f"{a[key] / b[key]:8.2f}")
    print(f"  timed steps: {a['steps'] - 1} and {b['steps'] - 1} (the first step of each side is not timed)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 rows, up to 10 steps per side")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steady on a shared box)")
    args = parser.parse_args()
    print_table(run(quick=args.quick, threads=args.threads))


if __name__ == "__main__":
    main()
