"""Token-budget batching against a fixed batch size with the same mean tokens per batch, on text-segment rows.

    python -m benchmarks.loader            # all of pydocs.txt (about 5,400 segments)
    python -m benchmarks.loader --quick    # a 1.5 MB slice, for CI

Rows are what `mlmprep build --method text` makes of pydocs.txt: 2040-character segments ((512 - 2) * 4),
tokenized with a tokenizer `train_tokenizer` trains on the corpus' first megabyte, then span-corrupted
(T5 arithmetic). Two length sets: truncated to the 568-token window as the build does, and untruncated
(how far the same segments spread). Without the shared corpus a synthetic set stands in (stated in the output).

Measured on each: padding efficiency (real tokens / padded slots, encoder and decoder together) and loader
throughput: real tokens per second through plan + collate to int64 tensors from the memory-mapped split,
one process, files in the page cache. Both sides use the same collator (pad to multiples of 8). The split is
stored as builds store it (format 3: uint16 token ids); the token-budget loader is also timed on the same rows
stored as int32 (format 2), the two timed in turn. A mixture of three builds (the same rows dealt into three, weights
0.5/0.3/0.2) is timed in turn with the one build in CPU time (both run on one thread, and a loaded machine's wall
time is mostly the other work's): plan (the mixture's chunks: taking rows from each source, picking them into one
split, planning) + collate, for the same tokens; target >= 0.9x the one build's tokens/s. The
token-budget loader is also timed in turn alone and while a training run's background check of the next epoch's
files (sha256 in a child process at the lowest CPU priority, train.epochs.hash_ahead) hashes as many bytes as the
epochs read, epochs run back to back for about a second: target >= 0.97x, the check costing at most 3% of the
loader's throughput.
--write-docs writes the figures into the `loader` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each, best_seconds, ratio
from mlmprep.format.load import open_epoch, read_manifest
from mlmprep.train.batch import Budget, plan_epoch, plan_stats
from mlmprep.train.collate import Collator
from mlmprep.train.epochs import child_digests
from mlmprep.train.mixture import open_mixture
from tests.fakes import span_lengths, write_fake_build

CORPUS = CORPORA / "pydocs.txt"
SEGMENT_CHARS = (512 - 2) * 4  # characters per segment of text segmentation (`--method text`)
WINDOW = 568  # window length the build truncates segments to (input length 512 after span corruption)
BUDGET = Budget(max_tokens_per_batch=16384, max_tokens_per_microbatch=4096, max_examples_per_microbatch=64,
                pad_to_multiple_of=8)
EPOCHS = 3  # timed epochs per side; the best is reported
PAIRED_EPOCHS = 11  # epochs per side of the uint16 / int32 pair
UINT16_TARGET = 0.95  # uint16 columns load no slower than int32 ones, give or take timing noise
MIXTURE_TARGET = 0.9  # three sources load at least this fraction of one source's tokens/s
HASHING_TARGET = 0.97  # the loader keeps this fraction of its tokens/s while the next epoch's files are hashed


def segment_lengths(quick: bool) -> tuple[np.ndarray, str]:
    """Tokens per 2040-character segment of pydocs.txt, or a synthetic stand-in when it is absent."""
    if not CORPUS.is_file():
        rng = np.random.default_rng(0)  # log-normal fitted to pydocs segments: median ~700, 10-90% ~560-920
        lengths = np.exp(rng.normal(6.56, 0.2, 600 if quick else 5400)).astype(np.int64)
        return lengths, "synthetic log-normal (no pydocs.txt)"
    from mlmprep.tokenizer.encode import encode
    from mlmprep.tokenizer.train import train_tokenizer

    text = CORPUS.read_text(encoding="utf-8")[: 1_500_000 if quick else None]
    tok = train_tokenizer(text[: 300_000 if quick else 1_000_000].splitlines(), vocab_size=2000 if quick else 8000)
    _, lengths = encode(tok, [text[i : i + SEGMENT_CHARS] for i in range(0, len(text), SEGMENT_CHARS)])
    return lengths, f"pydocs.txt {len(text) / 1e6:.1f} MB, {len(lengths)} segments"


def fixed_batches(n: int, size: int, seed: int) -> list[np.ndarray]:
    """The usual loader: shuffle, then consecutive batches of `size` rows."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i : i + size] for i in range(0, n, size)]


def padding_efficiency(batches: list[np.ndarray], enc: np.ndarray, dec: np.ndarray) -> float:
    """Real tokens / padded slots when each batch is padded to its longest row (multiples of 8)."""
    m = BUDGET.pad_to_multiple_of
    slots = sum(len(b) * (-(-enc[b].max() // m) * m + -(-dec[b].max() // m) * m) for b in batches)
    return float(enc.sum() + dec.sum()) / slots


def mixture_tokens_per_s(windows: np.ndarray, work: Path, split, collator: Collator) -> dict[str, float]:
    """Loader tokens/s over one build and over a mixture of three (its rows dealt round robin into three builds,
    stored as the one is), timed in turn in CPU time; each turn plans and collates about one epoch of the one build's
    tokens (the mixture's next steps: its plan is opened once, as a run opens it)."""
    builds = [write_fake_build(work / f"mix{k}", lengths=windows[k::3], n_seeds=1, vocab_size=8000, seed=k,
                               format_version=3) for k in range(3)]
    mix = open_mixture(builds, weights=[0.5, 0.3, 0.2])
    enc, dec = split.enc_lengths, split.dec_lengths
    wanted = float(enc.sum() + dec.sum())
    done = {}

    def one():  # counting tokens as three() does
        tokens = 0.0
        for batch in plan_epoch(enc, dec, BUDGET, seed=0, epoch=1):
            for mb in batch.ranks[0]:
                collator.from_split(split, mb.rows)
                tokens += float(enc[mb.rows].sum() + dec[mb.rows].sum())
        done["one"] = tokens

    steps = ((chunk, batch) for chunk in mix.plan(BUDGET, seed=0).chunks() for batch in chunk.plan)

    def three():  # the mixture's next steps, as training goes on from pass to pass: its chunks are planned on the way
        tokens = 0.0
        while tokens < wanted:
            chunk, batch = next(steps)
            for mb in batch.ranks[0]:
                collator.from_split(chunk.split, mb.rows)
                tokens += float(chunk.split.enc_lengths[mb.rows].sum() + chunk.split.dec_lengths[mb.rows].sum())
        done["three"] = tokens

    seconds = best_of_each({"one": one, "three": three}, PAIRED_EPOCHS, clock=time.process_time)
    return {name: done[name] / t for name, t in seconds.items()}


def with_hashing(build: Path, epoch: Callable[[], None], block_s: float = 1.0) -> dict[str, float]:
    """`epoch` run back to back for about `block_s` (a run's epochs are long: a check's fixed start-up is spread as
    it is there), alone and while the sha256 of the split those epochs read is taken once per epoch (each seed-0
    file as many times), as a training run's background check of its next epoch takes it (train.epochs.child_digests:
    a child process at the lowest CPU priority). PAIRED_EPOCHS pairs, each timed in turn (which arm goes first
    alternates, so a drift of the machine's load counts against neither), the check waited for outside the timing:
    the median of the pairs' ratios of tokens/s (hashing / alone), of the loader's own CPU time (alone / hashing: the
    check slowing the loader's work, not only taking turns on a core), and the check's CPU time over the loader's."""
    files = [build / "seed-0" / f.name for f in read_manifest(build).splits["seed-0"].files]
    start = time.perf_counter()
    epoch()
    repeats = max(1, round(block_s / max(time.perf_counter() - start, 1e-6)))

    def timed(hashing: bool) -> tuple[float, float, float]:
        """(wall, this process's CPU, the check's CPU) seconds per epoch of one block."""
        thread = threading.Thread(target=child_digests, args=(files * repeats,), daemon=True)
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        start, cpu = time.perf_counter(), time.process_time()
        if hashing:
            thread.start()
        for _ in range(repeats):
            epoch()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        if hashing:
            thread.join()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        checked = after.ru_utime + after.ru_stime - child.ru_utime - child.ru_stime
        return wall / repeats, cpu / repeats, checked / repeats

    pairs = []
    for k in range(PAIRED_EPOCHS):
        first, second = (False, True) if k % 2 == 0 else (True, False)
        a, b = timed(first), timed(second)
        pairs.append((b, a) if first else (a, b))  # (alone, hashing)
    alone, hashing = zip(*pairs, strict=True)
    return {"alone": float(np.median([t[0] for t in alone])), "hashing": float(np.median([t[0] for t in hashing])),
            "ratio": float(np.median([a[0] / h[0] for a, h in pairs])),
            "cpu_ratio": float(np.median([a[1] / h[1] for a, h in pairs])),
            "check_cpu": float(np.median([h[2] / h[1] for _, h in pairs]))}


def measure(windows: np.ndarray, work: Path) -> dict:
    """Both loaders over one span-corrupted build of rows with these window lengths (uint16 columns), and the
    token-budget loader over the same rows in int32 columns."""
    split, wide = (open_epoch(write_fake_build(work / f"v{v}", lengths=windows, n_seeds=1, vocab_size=8000,
                                               format_version=v), 0) for v in (3, 2))
    enc, dec = split.enc_lengths, split.dec_lengths
    collator = Collator("span", pad_id=0, decoder_start_id=0, pad_to_multiple_of=BUDGET.pad_to_multiple_of)
    tokens = float(enc.sum() + dec.sum())

    plan = plan_epoch(enc, dec, BUDGET, seed=0, epoch=0)
    stats = plan_stats(plan, enc, dec, BUDGET)
    size = max(1, round(stats["tokens_per_batch"] / (tokens / len(split))))  # same mean tokens per batch
    fixed = fixed_batches(len(split), size, seed=0)

    def budget_epoch(source=split):
        for batch in plan_epoch(enc, dec, BUDGET, seed=0, epoch=1):
            for mb in batch.ranks[0]:
                collator.from_split(source, mb.rows)

    def fixed_epoch():
        for rows in fixed_batches(len(split), size, seed=1):
            collator.from_split(split, rows)

    def hf_epoch():  # the HF-Trainer path: example dicts, as a map-style dataset hands them over
        for rows in fixed:
            collator([split[int(i)] for i in rows])

    plan_seconds = best_seconds(lambda: plan_epoch(enc, dec, BUDGET, seed=0, epoch=1), EPOCHS)
    return {
        "rows": len(split),
        "mean_window": float(windows.mean()),
        "fixed_batch_size": size,
        "tokens_per_batch": {"budget": stats["tokens_per_batch"], "fixed": tokens / len(fixed)},
        "batches": {"budget": stats["batches"], "fixed": len(fixed)},
        "padding_efficiency": {"budget": stats["padding_efficiency"], "fixed": padding_efficiency(fixed, enc, dec)},
        "tokens_per_s": {"budget": tokens / best_seconds(budget_epoch, EPOCHS),
                         "fixed": tokens / best_seconds(fixed_epoch, EPOCHS)},
        "plan_tokens_per_s": tokens / plan_seconds,
        "columns_tokens_per_s": {k: tokens / t for k, t in best_of_each(
            {"uint16": budget_epoch, "int32": lambda: budget_epoch(wide)}, PAIRED_EPOCHS).items()},
        "hf_call_tokens_per_s": tokens / best_seconds(hf_epoch, EPOCHS),
        "mixture_tokens_per_s": mixture_tokens_per_s(windows, work, split, collator),
        "hashing": with_hashing(work / "v3", budget_epoch),
    }


def run(quick: bool = False) -> dict:
    lengths, source = segment_lengths(quick)
    noise, spans = span_lengths(WINDOW)
    results = {"source": source, "budget": vars(BUDGET), "window": WINDOW,
               "input_length": int(WINDOW - noise + spans + 1)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, windows in (("truncated", np.minimum(lengths, WINDOW)), ("untruncated", lengths)):
            results[name] = measure(windows.astype(np.int64), Path(tmp) / name)
    return results


def print_table(r: dict) -> None:
    print(f"rows: {r['source']}; budget {r['budget']}")
    for name in ("truncated", "untruncated"):
        m = r[name]
        title = f"truncated to {r['window']} tokens" if name == "truncated" else "untruncated"
        print(f"\n{title}: {m['rows']} rows, mean window {m['mean_window']:.0f}, "
              f"fixed batch size {m['fixed_batch_size']}")
        print(f"  {'':28}{'token budget':>14}{'fixed batch':>14}{'ratio':>8}")
        for key, fmt in (("tokens_per_batch", "{:14.0f}"), ("batches", "{:14d}"),
                         ("padding_efficiency", "{:14.3f}"), ("tokens_per_s", "{:14.3g}")):
            a, b = m[key]["budget"], m[key]["fixed"]
            print(f"  {key:28}" + fmt.format(a) + fmt.format(b) + f"{a / b:8.2f}")
        print(f"  plan alone: {m['plan_tokens_per_s']:.3g} tokens/s; HF-style __call__ path: "
              f"{m['hf_call_tokens_per_s']:.3g} tokens/s")
        print(f"  token budget over uint16 / int32 columns, timed in turn: "
              f"{m['columns_tokens_per_s']['uint16']:.3g} / {m['columns_tokens_per_s']['int32']:.3g} tokens/s "
              f"({tps_ratio(m):.2f})")
        hashed = m["hashing"]
        print(f"  token budget while the next epoch's files are hashed / alone, {PAIRED_EPOCHS} pairs timed in turn, "
              f"medians: tokens/s {hashing_ratio(m):.3f}, the loader's CPU time {hashed['cpu_ratio']:.3f} (alone / "
              f"hashing); the check's CPU {hashed['check_cpu']:.2f}x the loader's ({hashed['alone']:.3g} s an epoch "
              "alone)")
        mixed = m["mixture_tokens_per_s"]
        print(f"  one build / a mixture of three (0.5/0.3/0.2), timed in turn: {mixed['one']:.3g} / "
              f"{mixed['three']:.3g} tokens/s ({mixture_ratio(m):.2f})")


def tps_ratio(m: dict) -> float:
    """Token-budget loader throughput over uint16 columns / over int32 columns."""
    return m["columns_tokens_per_s"]["uint16"] / m["columns_tokens_per_s"]["int32"]


def hashing_ratio(m: dict) -> float:
    """Loader tokens/s while the background check hashes / alone: the median of pairs timed in turn."""
    return m["hashing"]["ratio"]


def mixture_ratio(m: dict) -> float:
    """Loader tokens/s over a mixture of three builds / over one build."""
    return m["mixture_tokens_per_s"]["three"] / m["mixture_tokens_per_s"]["one"]


def figures(r: dict) -> list[Figure]:
    rows = []
    for name in ("truncated", "untruncated"):
        m = r[name]
        pad, tps = m["padding_efficiency"], m["tokens_per_s"]
        rows += [
            Figure(f"padding efficiency, {name} rows: budget / fixed", f"{pad['budget']:.3f} / {pad['fixed']:.3f}"),
            Figure(f"loader tokens/s, {name} rows: budget vs fixed", ratio(tps["budget"], tps["fixed"])),
            Figure(f"loader tokens/s, {name} rows: uint16 vs int32 columns", f"{tps_ratio(m):.2f}x",
                   f">= {UINT16_TARGET}x", tps_ratio(m) >= UINT16_TARGET),
            Figure(f"loader tokens/s, {name} rows: three sources vs one", f"{mixture_ratio(m):.2f}x",
                   f">= {MIXTURE_TARGET}x", mixture_ratio(m) >= MIXTURE_TARGET),
            Figure(f"loader tokens/s, {name} rows: while the next epoch is hashed vs alone", f"{hashing_ratio(m):.3f}x",
                   f">= {HASHING_TARGET}x", hashing_ratio(m) >= HASHING_TARGET),
            Figure(f"loader CPU time, {name} rows: alone vs while the next epoch is hashed",
                   f"{m['hashing']['cpu_ratio']:.3f}x (the check's CPU {m['hashing']['check_cpu']:.2f}x the loader's)"),
        ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1.5 MB slice of the corpus")
    docs.add_arguments(parser, "loader")
    args = parser.parse_args()
    result = run(quick=args.quick)
    print_table(result)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.loader")


if __name__ == "__main__":
    main()
