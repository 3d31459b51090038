"""MLM masking: whole-word (`--whole-word`) against plain token masking, the same kernel on the same real
windows, printed side by side (target: whole-word masking costs at most 2x plain masking).

    python -m benchmarks.mlm_masking           # 2 MB of pydocs.txt
    python -m benchmarks.mlm_masking --quick   # 1 MB, fewer repeats

Windows: the slice tokenized by a Unigram tokenizer trained on a quarter of it (mlmprep's own
train_tokenizer), documents joined by </s>, cut into windows of 512 tokens, masked in chunks of about
1 M tokens as a build masks them. Without the corpus: random ids with random word starts, with a notice.
Both are timed in turn, one thread and all threads, the best of each kept (compilation excluded).
--write-docs writes the figures into the `mlm_masking` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numba
import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each
from mlmprep.builder.mask import mlm_mask

LENGTH, PROBABILITY = 512, 0.15
CHUNK_TOKENS = 1 << 20


def real_windows(quick: bool):
    """([n, LENGTH] int32 windows, special ids, mask id, vocabulary size, word starts per id, source name)."""
    from mlmprep.tokenizer.encode import encode, word_tables
    from mlmprep.tokenizer.load import special_ids
    from mlmprep.tokenizer.train import train_tokenizer

    path = CORPORA / "pydocs.txt"
    if not path.is_file():
        print(f"notice: {path} is absent; timing random token ids instead of real windows")
        rng = np.random.default_rng(0)
        starts = rng.random(8_000) < 0.7
        starts[:4] = True
        windows = rng.integers(4, 8_000, size=(2_000, LENGTH), dtype=np.int32)
        return windows, np.arange(4, dtype=np.int32), 3, 8_000, starts, "synthetic"
    with open(path, encoding="utf-8") as f:
        docs = [line for line in f.read((1 if quick else 2) << 20).splitlines() if line.strip()]
    tok = train_tokenizer(docs[: len(docs) // 4], vocab_size=8_000)
    ids = special_ids(tok)
    flat, lengths = encode(tok, docs)
    stream = np.insert(flat, np.cumsum(lengths), ids.eos)  # </s> after every document
    n = stream.size // LENGTH
    windows = np.ascontiguousarray(stream[: n * LENGTH].reshape(n, LENGTH))
    return windows, ids.all(), ids.mask, ids.vocab_size, word_tables(tok).starts_word, path.name


def masking_pass(windows, special, mask_id, vocab_size, word_starts, threads: int) -> Callable[[], None]:
    """One pass of mlm_mask over `windows` on `threads` threads; word_starts None: plain token masking."""
    n = len(windows)
    flat = windows.reshape(-1)
    rows = max(1, CHUNK_TOKENS // LENGTH)
    offsets = np.arange(rows + 1, dtype=np.int64) * LENGTH

    def once() -> None:
        numba.set_num_threads(threads)
        for lo in range(0, n, rows):
            hi = min(n, lo + rows)
            mlm_mask(flat[lo * LENGTH : hi * LENGTH], offsets[: hi - lo + 1], seed=0, first_row=lo,
                     probability=PROBABILITY, mask_id=mask_id, special_ids=special, vocab_size=vocab_size,
                     word_starts=word_starts)

    return once


def run(quick: bool = False) -> dict:
    windows, special, mask_id, vocab_size, starts, source = real_windows(quick)
    tiled = np.tile(windows, (4 if quick else 8, 1))
    threads = numba.config.NUMBA_NUM_THREADS
    before = numba.get_num_threads()
    try:
        seconds = best_of_each({
            f"{kind}_{t}": masking_pass(tiled, special, mask_id, vocab_size,
                                        starts if kind == "whole_word" else None, t)
            for t in sorted({1, threads}) for kind in ("plain", "whole_word")
        }, repeats=5 if quick else 10)
    finally:
        numba.set_num_threads(before)
    result = {"source": source, "tokens": int(tiled.size), "threads": threads,
              **{f"{name}_tokens_per_s": tiled.size / s for name, s in seconds.items()}}
    result["whole_word_cost_1t"] = seconds["whole_word_1"] / seconds["plain_1"]
    result["whole_word_cost"] = seconds[f"whole_word_{threads}"] / seconds[f"plain_{threads}"]
    print_table(result)
    return result


def print_table(r: dict) -> None:
    print(f"\nMLM masking, {r['source']} windows of {LENGTH} tokens ({r['tokens']:,} tokens a pass, "
          f"probability {PROBABILITY})")
    print(f"{'threads':<10}{'plain Mtok/s':>14}{'whole-word Mtok/s':>20}{'whole-word time / plain':>26}")
    for t, cost in ((1, r["whole_word_cost_1t"]), (r["threads"], r["whole_word_cost"])):
        print(f"{t:<10}{r[f'plain_{t}_tokens_per_s'] / 1e6:>14.1f}{r[f'whole_word_{t}_tokens_per_s'] / 1e6:>20.1f}"
              f"{cost:>25.2f}x   (target <= 2x)")
        if t == r["threads"]:
            break


def figures(r: dict) -> list[Figure]:
    return [
        Figure("MLM --whole-word time / plain, 1 thread", f"{r['whole_word_cost_1t']:.2f}x", "<= 2x",
               r["whole_word_cost_1t"] <= 2),
        Figure(f"MLM --whole-word time / plain, {r['threads']} threads", f"{r['whole_word_cost']:.2f}x", "<= 2x",
               r["whole_word_cost"] <= 2),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1 MB slice and fewer repeats")
    docs.add_arguments(parser, "mlm_masking")
    args = parser.parse_args()
    result = run(args.quick)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.mlm_masking")


if __name__ == "__main__":
    main()
