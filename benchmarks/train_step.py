"""Training-step throughput: `mlmprep train` against the Hugging Face Trainer, and token-budget batches
against a fixed batch size.

    python -m benchmarks.train_step                       # CPU: tiny T5; 2,400 rows, 40 steps per side
    python -m benchmarks.train_step --quick               # CPU, fewer steps, for CI
    python -m benchmarks.train_step --data BUILD --model t5-base   # CUDA: 128 x 512/114 rows per step

Side by side (`side_by_side`), on the same windows and shapes (exact windows of a token-splitting build,
R rows per step in microbatches of r): `mlmprep train`'s own loop (`fit`, eager, and compiled with
--compile), and the HF `Trainer` fed the same windows unmasked, masked on the fly in DataLoader workers
by run_t5_mlm_flax's collator (benchmarks.hf_trainer), bf16 on CUDA. Reported: real tokens/s, model
TFLOP/s and MFU (the same FLOP count for both sides, mlmprep.train.numerics.flop_counter), peak GPU memory.
The first steps of each side are not timed (compilation, allocator warm-up). CUDA: R = 128, r = 64;
CPU: the tiny model, R = 32, r = 16, float32, compiled side only with --compile (inductor's C++
compile of T5 takes minutes on a small CPU).

Budget against fixed batch (`run`, CPU):
Rows are span-corrupted windows (tests.fakes) whose lengths spread like text segments: log-normal, median
96 tokens, clipped to [16, 512]. Both sides run the trainer's own step (`accumulate`: every microbatch's
summed token loss over the batch's label tokens, then AdamW) on the same rows, one thread, float32:

    token budget  plan_epoch: rows sorted by length inside pools, microbatches cut at 2,048 padded
                  effective tokens (enc + 2 * dec) or 64 rows, batches filled to 8,192
    fixed batch   a shuffled epoch in batches of B rows (B = the budget plan's mean rows per batch), each
                  run as microbatches of b rows (b = the plan's mean rows per microbatch), padded to the longest

Reported per side: real tokens per second (encoder + decoder, padding excluded), padding efficiency
(real tokens / padded slots), steps and mean real tokens per step.

--write-docs writes the figures into the `train_step` section of docs/benchmarks.md (`train_step_gpu` with
--data; --section names another).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks import docs
from benchmarks.common import Figure, ratio
from mlmprep.config import TrainConfig
from mlmprep.format.load import open_epoch, read_manifest
from mlmprep.tokenizer.load import load_tokenizer, special_ids
from mlmprep.train.batch import Budget, plan_epoch, plan_stats
from mlmprep.train.collate import Collator
from mlmprep.train.epochs import row_targets
from mlmprep.train.loop import fit
from mlmprep.train.model import build_model
from mlmprep.train.numerics import flop_counter
from mlmprep.train.optim import make_optimizer
from mlmprep.train.step import accumulate
from mlmprep.train.world import World, seed_everything
from tests.fakes import write_fake_build

BUDGET = Budget(max_tokens_per_batch=8192, max_tokens_per_microbatch=2048, max_examples_per_microbatch=64)
CPU = World(rank=0, size=1, device=torch.device("cpu"))


def lengths(n: int) -> np.ndarray:
    """Window lengths that spread like text segments: log-normal around 96 tokens, clipped to [16, 512]."""
    return np.clip(np.exp(np.random.default_rng(0).normal(np.log(96), 0.7, n)), 16, 512).astype(np.int64)


def fixed_batches(n: int, batch: int, micro: int) -> list[list[np.ndarray]]:
    """The usual loader: a shuffled epoch cut into batches of `batch` rows, each into microbatches of `micro`."""
    order = np.random.default_rng(1).permutation(n)
    return [[order[i : i + batch][j : j + micro] for j in range(0, batch, micro)]
            for i in range(0, n - batch + 1, batch)]


def time_steps(steps: list[list[np.ndarray]], split, work: Path) -> dict:
    """Train the tiny T5 from the same initial weights through `steps`; real tokens/s and padding efficiency."""
    tok = read_manifest(work).tokenizer
    seed_everything(0)
    model = build_model("tiny", "span", tok)
    cfg = TrainConfig()
    optimizer = make_optimizer(model, cfg)
    collator = Collator("span", tok.pad_id, tok.decoder_start_id)
    targets = row_targets(split, collator)
    real = slots = 0.0
    first = time.perf_counter()
    for k, microbatches in enumerate(steps):
        if k == 1:  # the first step pays for allocations and lazy initialisation
            start, real, slots = time.perf_counter(), 0.0, 0.0
        n_targets = int(sum(targets[rows].sum() for rows in microbatches))
        _, sums = accumulate(model, split, collator, [(rows, False) for rows in microbatches], n_targets,
                             world=CPU, cfg=cfg)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        real, slots = real + sums[0], slots + sums[1]
    seconds = time.perf_counter() - (start if len(steps) > 1 else first)
    return {"tokens_per_s": real / seconds, "padding_efficiency": real / slots, "steps": len(steps),
            "tokens_per_step": real / max(len(steps) - 1, 1)}


PEAK_TFLOPS = {"H100": 989.5, "H200": 989.5, "A100": 312.0}  # dense bf16 tensor-core peaks


def peak_tflops() -> float | None:
    """The device's dense bf16 peak (TFLOP/s) for MFU; None on CPU or an unknown GPU."""
    if not torch.cuda.is_available():
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def mlmprep_side(data: Path, out: Path, *, model: str, compile_: bool, rows: int, micro: int, steps: int,
                 warmup: int, enc: int, dec: int) -> dict:
    """`fit` for `steps` steps of `rows` rows (microbatches of `micro`); figures of the steps after `warmup`."""
    cost = enc + 2 * dec
    cfg = TrainConfig(data=str(data), out=str(out), model=model, max_steps=steps, max_tokens_per_batch=rows * cost,
                      max_tokens_per_microbatch=micro * cost, max_examples_per_microbatch=micro, compile=compile_,
                      log_every=1, eval_every=0, save_every=0, warmup_steps=0)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    fit(cfg)
    lines = [r for r in map(json.loads, (out / "metrics.jsonl").open()) if "tokens_per_s" in r and r["step"] > warmup]
    seconds = sum(r["tokens"] / r["tokens_per_s"] for r in lines)
    tokens = sum(r["tokens"] for r in lines)
    tflops = sum(r["tflops"] * r["tokens"] / r["tokens_per_s"] for r in lines) / seconds
    return {"tokens_per_s": tokens / seconds, "tflops": tflops, "peak_memory_gb": lines[-1].get("peak_memory_gb"),
            "steps": len(lines)}


def side_by_side(data: Path, *, model: str, rows: int, micro: int, steps: int, warmup: int, compiled: bool,
                 workers: int) -> dict:
    """mlmprep eager, mlmprep compiled (if `compiled`) and the HF Trainer on the exact windows of build `data`."""
    from benchmarks.hf_trainer import FlaxT5Collator, time_trainer, windows_of

    manifest = read_manifest(data)
    tok = manifest.tokenizer
    split = open_epoch(data, 0)
    enc, dec = int(split.enc_lengths[0]), int(split.dec_lengths[0])
    if not (np.all(split.enc_lengths == enc) and np.all(split.dec_lengths == dec)):
        raise SystemExit(f"{data}: rows of several lengths; build with --method tokens for exact windows")
    need = rows * steps
    take = np.arange(min(need, len(split)))
    sentinels = special_ids(load_tokenizer(str(data / "tokenizer.json"))).sentinels
    inputs = [np.asarray(split.input_ids.row(i)) for i in take]
    labels = [np.asarray(split.labels.row(i)) for i in take]
    windows = windows_of(inputs, labels, sentinels, tok.eos_id)
    windows = np.concatenate([windows] * -(-need // len(windows)))[:need]
    results = {"model": model, "rows_per_step": rows, "rows_per_microbatch": micro, "input_length": enc,
               "target_length": dec, "timed_steps": steps - warmup, "device": torch.cuda.get_device_name()
               if torch.cuda.is_available() else "cpu", "peak_tflops": peak_tflops()}
    with tempfile.TemporaryDirectory() as tmp:
        for name, on in (("mlmprep_eager", False), ("mlmprep_compiled", True)):
            if on and not compiled:
                continue
            results[name] = mlmprep_side(data, Path(tmp) / name, model=model, compile_=on, rows=rows, micro=micro,
                                         steps=steps, warmup=warmup, enc=enc, dec=dec)
        if torch.cuda.is_available():  # the HF side runs with torch's defaults, not mlmprep's kernel choices
            torch.backends.cuda.enable_cudnn_sdp(True)
        seed_everything(0)
        hf_model = build_model(model, "span", tok, max_length=enc)
        flops = flop_counter(hf_model, "span")(np.full(rows, enc), np.full(rows, dec))
        collator = FlaxT5Collator(sentinels, tok.eos_id, tok.pad_id, tok.decoder_start_id, enc, dec)
        hf = time_trainer(hf_model, windows, collator, rows_per_step=rows, rows_per_microbatch=micro, steps=steps,
                          warmup=warmup, workers=workers, bf16=True, out=str(Path(tmp) / "hf"))
        results["hf_trainer"] = {"tokens_per_s": rows * (enc + dec) / hf["seconds_per_step"],
                                 "tflops": flops / hf["seconds_per_step"] / 1e12,
                                 "peak_memory_gb": hf["peak_memory_gb"], "steps": steps - warmup}
    for side in ("mlmprep_eager", "mlmprep_compiled", "hf_trainer"):
        if side in results and results["peak_tflops"]:
            results[side]["mfu"] = results[side]["tflops"] / results["peak_tflops"]
    return results


def print_side_by_side(r: dict) -> None:
    print(f"{r['model']} on {r['device']}: {r['rows_per_step']} rows of {r['input_length']}/{r['target_length']} "
          f"tokens per step, microbatches of {r['rows_per_microbatch']}; {r['timed_steps']} timed steps per side")
    hf = r["hf_trainer"]["tokens_per_s"]
    print(f"  {'':18}{'tokens/s':>12}{'vs HF':>8}{'TFLOP/s':>10}{'MFU':>8}{'peak GB':>9}")
    for side in ("mlmprep_eager", "mlmprep_compiled", "hf_trainer"):
        if side in r:
            x = r[side]
            mfu = f"{x['mfu']:8.1%}" if "mfu" in x else f"{'-':>8}"
            mem = f"{x['peak_memory_gb']:9.1f}" if x.get("peak_memory_gb") else f"{'-':>9}"
            print(f"  {side:18}{x['tokens_per_s']:12.0f}{x['tokens_per_s'] / hf:8.2f}{x['tflops']:10.2f}{mfu}{mem}")


def cpu_side_by_side(quick: bool, compiled: bool = False) -> dict:
    """The side-by-side comparison on CPU: the tiny T5 on a fake token-splitting build (exact windows)."""
    rows, micro, steps, warmup = (32, 16, 5, 1) if quick else (32, 16, 10, 2)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_fake_build(Path(tmp) / "data", n_rows=rows * steps, window_length=128, n_seeds=1, vocab_size=2048)
        return side_by_side(data, model="tiny", rows=rows, micro=micro, steps=steps, warmup=warmup, compiled=compiled,
                            workers=1)


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
    results["side_by_side"] = cpu_side_by_side(quick)
    return results


def print_table(r: dict) -> None:
    print(f"tiny T5 on CPU ({r['threads']} thread), {r['rows']} variable-length rows, "
          f"mean {r['mean_row_tokens']:.0f} real tokens per row; fixed side: batches of {r['fixed_batch']} rows "
          f"in microbatches of {r['fixed_microbatch']}")
    a, b = r["token_budget"], r["fixed_batch_size"]
    print(f"  {'':22}{'token budget':>14}{'fixed batch':>14}{'ratio':>8}")
    for key, fmt in (("tokens_per_s", "{:14.0f}"), ("padding_efficiency", "{:14.3f}"), ("tokens_per_step", "{:14.0f}")):
        print(f"  {key:22}" + fmt.format(a[key]) + fmt.format(b[key]) + f"{a[key] / b[key]:8.2f}")
    print(f"  timed steps: {a['steps'] - 1} and {b['steps'] - 1} (the first step of each side is not timed)")


def figures(r: dict) -> list[Figure]:
    a, b, sides = r["token_budget"], r["fixed_batch_size"], r["side_by_side"]
    return [
        Figure("tiny T5 step tokens/s: budget vs fixed batch", ratio(a["tokens_per_s"], b["tokens_per_s"])),
        Figure("padding efficiency: budget / fixed batch",
               f"{a['padding_efficiency']:.3f} / {b['padding_efficiency']:.3f}"),
        Figure("tiny T5 on CPU tokens/s: mlmprep train vs HF Trainer",
               ratio(sides["mlmprep_eager"]["tokens_per_s"], sides["hf_trainer"]["tokens_per_s"])),
    ]


def side_by_side_figures(r: dict) -> list[Figure]:
    """`side_by_side`'s figures: each side's tokens/s (and its ratio to the HF Trainer's), then model TFLOP/s,
    MFU and peak GPU memory of the sides together."""
    names = {"mlmprep_eager": ("mlmprep train, eager", "eager"),
             "mlmprep_compiled": ("mlmprep train, compiled", "compiled"),
             "hf_trainer": ("HF Trainer + run_t5_mlm_flax collator", "HF")}
    sides = [side for side in names if side in r]
    hf = r["hf_trainer"]["tokens_per_s"]
    shape = f"{r['model']}, {r['rows_per_step']} x {r['input_length']}/{r['target_length']}"
    rows = [Figure(f"{shape} tokens/s: {names[side][0]}", f"{r[side]['tokens_per_s']:,.0f}"
                   + ("" if side == "hf_trainer" else f" ({r[side]['tokens_per_s'] / hf:.2f}x HF)")) for side in sides]
    together = " / ".join(names[side][1] for side in sides)

    def each(fmt: str, key: str) -> str:
        return " / ".join("-" if r[side].get(key) is None else fmt.format(r[side][key]) for side in sides)

    return rows + [Figure(f"model TFLOP/s: {together}", each("{:.1f}", "tflops")),
                   Figure(f"MFU: {together}", each("{:.1%}", "mfu")),
                   Figure(f"peak GPU memory (GB): {together}", each("{:.1f}", "peak_memory_gb"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="300 rows, up to 10 steps per side")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: steady on a shared box)")
    parser.add_argument("--data", type=Path, help="CUDA mode: a token-splitting build (e.g. --input-length 512)")
    parser.add_argument("--model", default="t5-base", help="CUDA mode: the model preset (default t5-base)")
    parser.add_argument("--steps", type=int, default=25, help="CUDA mode: steps per side, the first 5 untimed")
    parser.add_argument("--compile", action="store_true", help="CPU: also time the compiled tiny model (minutes)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    docs.add_arguments(parser, "train_step")
    args = parser.parse_args()
    if args.data is not None:
        result = side_by_side(args.data, model=args.model, rows=128, micro=64, steps=args.steps, warmup=5,
                              compiled=True, workers=8)
        print_side_by_side(result)
        rows, section = side_by_side_figures(result), "train_step_gpu" if args.section == "train_step" else args.section
    else:
        torch.set_num_threads(args.threads)
        result = run(quick=args.quick, threads=args.threads)
        print_table(result)
        if args.compile:
            result["side_by_side"] = cpu_side_by_side(args.quick, compiled=True)
        print_side_by_side(result["side_by_side"])
        rows, section = figures(result), args.section
    if args.write_docs:
        docs.write(args.write_docs, {section: rows}, "benchmarks.train_step")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, allow_nan=False))


if __name__ == "__main__":
    main()
