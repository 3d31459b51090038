"""Span corruption: the Numba kernel (one thread, all threads) against a per-example NumPy version written
the way Hugging Face's DataCollatorForFlaxT5MLM does it, on the same real windows.

    python -m benchmarks.span_corruption           # 4 MB of pydocs.txt
    python -m benchmarks.span_corruption --quick   # 1 MB, fewer repeats

Windows: pydocs.txt tokenized by a tokenizer trained on the slice with mlmprep.tokenizer.train.train_tokenizer
(nothing is cached), documents joined by </s>, cut into windows of 568 tokens, the length
compute_input_and_target_lengths(512, 0.15, 3) gives. Without the corpus: random ids, with a notice.
Speeds are input tokens per second; compilation is excluded (one warm-up pass each). The three are
timed in turn and the best of each kept, so drift on a shared machine does not bias their ratios.
--write-docs writes the figures into the `span_corruption` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import numba
import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each
from mlmprep.builder.mask import compute_input_and_target_lengths, span_corrupt

INPUT_LENGTH, DENSITY, MEAN_SPAN = 512, 0.15, 3.0
CHUNK_TOKENS = 1 << 20  # tokens per span_corrupt call: its Python set-up (~0.1 ms) stays small beside the kernel
BATCH = 64  # rows per NumPy collator call


# ---------------------------------------------------------------------------- windows


def real_windows(quick: bool, length: int) -> tuple[np.ndarray, np.ndarray, int, str]:
    """([n, length] int32 windows, sentinel ids, EOS id, source name)."""
    from mlmprep.tokenizer.encode import encode
    from mlmprep.tokenizer.load import special_ids
    from mlmprep.tokenizer.train import train_tokenizer

    path = CORPORA / "pydocs.txt"
    if not path.is_file():
        print(f"notice: {path} is absent; timing random token ids instead of real windows")
        windows = np.random.default_rng(0).integers(4, 31_900, size=(2_000, length), dtype=np.int32)
        return windows, (32_000 - 1 - np.arange(100)).astype(np.int32), 1, "synthetic"
    with open(path, encoding="utf-8") as f:
        docs = [line for line in f.read((1 if quick else 4) << 20).splitlines() if line.strip()]
    tok = train_tokenizer(docs[: len(docs) // 4], vocab_size=4_000 if quick else 8_000)
    ids = special_ids(tok)
    flat, lengths = encode(tok, docs)
    ends = np.cumsum(lengths)
    stream = np.insert(flat, ends, ids.eos)  # </s> after every document
    n = stream.size // length
    return stream[: n * length].reshape(n, length), ids.sentinels, ids.eos, path.name


# ---------------------------------------------------------------------------- the NumPy reference


def noise_mask(length: int, rng: np.random.Generator) -> np.ndarray:
    """[L] bool, one example: shuffled span starts, np.unique for span sizes, spans interleaved kept-first."""
    noise = min(max(int(np.round(length * DENSITY)), 1), length - 1)
    spans = max(int(np.round(min(noise, length - noise) / MEAN_SPAN)), 1)

    def segment(items: int) -> np.ndarray:
        starts = np.arange(items - 1) < spans - 1
        rng.shuffle(starts)
        _, sizes = np.unique(np.cumsum(np.pad(starts, [[1, 0]])), return_counts=True)
        return sizes

    interleaved = np.stack([segment(length - noise), segment(noise)], axis=1).reshape(-1)
    span_start = np.zeros(length, dtype=np.int8)
    span_start[np.cumsum(interleaved)[:-1]] = 1
    return np.cumsum(span_start) % 2 == 1


def sentinel_map(mask: np.ndarray, sentinels: np.ndarray) -> np.ndarray:
    """[B, L]: the k-th span's sentinel at its first position, -1 on the rest of it, 0 outside spans."""
    first = mask & ~np.pad(mask, ((0, 0), (1, 0)))[:, :-1]
    number = np.cumsum(first, axis=-1)
    ids = np.where(first, sentinels[np.maximum(number - 1, 0)], 0)
    return ids - (mask & ~first)


def fuse(tokens: np.ndarray, sentinel_ids: np.ndarray, eos: int) -> np.ndarray:
    """[B, L'] tokens with spans replaced by their sentinel, continuations dropped, </s> appended."""
    fused = np.where(sentinel_ids != 0, sentinel_ids, tokens)
    kept = fused[fused >= 0].reshape(len(tokens), -1)
    return np.concatenate([kept, np.full((len(tokens), 1), eos, dtype=kept.dtype)], axis=-1)


def numpy_collate(windows: np.ndarray, rng: np.random.Generator, sentinels: np.ndarray, eos: int):
    """(encoder inputs, labels) of one batch: masks per example, sentinel maps and filtering per batch."""
    mask = np.stack([noise_mask(windows.shape[1], rng) for _ in range(len(windows))])
    return fuse(windows, sentinel_map(mask, sentinels), eos), fuse(windows, sentinel_map(~mask, sentinels), eos)


# ---------------------------------------------------------------------------- timing


def numpy_pass(windows: np.ndarray, sentinels: np.ndarray, eos: int, target: int) -> Callable[[], None]:
    """One pass of the NumPy reference over `windows`, BATCH rows per collator call."""
    rng = np.random.default_rng(0)

    def once() -> None:
        for lo in range(0, len(windows), BATCH):
            enc, labels = numpy_collate(windows[lo : lo + BATCH], rng, sentinels, eos)
            assert enc.shape[1] == INPUT_LENGTH and labels.shape[1] == target

    return once


def numba_pass(windows: np.ndarray, sentinels: np.ndarray, eos: int, threads: int) -> Callable[[], None]:
    """One pass of the kernel over `windows` on `threads` threads, in chunks of CHUNK_TOKENS as a build masks."""
    n, length = windows.shape
    flat = windows.reshape(-1)
    rows = max(1, CHUNK_TOKENS // length)
    offsets = np.arange(rows + 1, dtype=np.int64) * length

    def once() -> None:
        numba.set_num_threads(threads)
        for lo in range(0, n, rows):
            hi = min(n, lo + rows)
            out = span_corrupt(flat[lo * length : hi * length], offsets[: hi - lo + 1], seed=0, first_row=lo,
                               noise_density=DENSITY, mean_span_length=MEAN_SPAN, sentinels=sentinels, eos_id=eos)
            assert out.enc_offsets[1] == INPUT_LENGTH

    return once


def run(quick: bool = False) -> dict:
    length, target = compute_input_and_target_lengths(INPUT_LENGTH, DENSITY, MEAN_SPAN)
    windows, sentinels, eos, source = real_windows(quick, length)
    reps = 8 if quick else 4  # each tiled copy of the windows is masked with its own global row numbers
    tiled = np.tile(windows, (reps, 1))
    n_numpy = min(len(windows), 128 if quick else 1_024)
    threads = numba.config.NUMBA_NUM_THREADS
    before = numba.get_num_threads()
    try:
        seconds = best_of_each({
            "numpy": numpy_pass(windows[:n_numpy], sentinels, eos, target),
            "one": numba_pass(tiled, sentinels, eos, 1),
            "every": numba_pass(tiled, sentinels, eos, threads),
        }, repeats=10)
    finally:
        numba.set_num_threads(before)
    numpy_tps = windows[:n_numpy].size / seconds["numpy"]
    one, every = tiled.size / seconds["one"], tiled.size / seconds["every"]
    result = {
        "source": source, "window_length": length, "target_length": target, "threads": threads,
        "numpy_rows": n_numpy, "numba_rows": len(tiled),
        "numpy_tokens_per_s": numpy_tps, "numba_1t_tokens_per_s": one, "numba_all_tokens_per_s": every,
        "numba_1t_vs_numpy": one / numpy_tps, "numba_all_vs_1t": every / one,
    }
    print_table(result)
    return result


def print_table(r: dict) -> None:
    print(f"\nspan corruption, {r['source']} windows of {r['window_length']} -> {INPUT_LENGTH} / {r['target_length']} "
          f"tokens (density {DENSITY}, mean span {MEAN_SPAN:g})")
    print(f"{'implementation':<28}{'rows':>8}{'Mtokens/s':>12}{'ratio':>10}")
    print(f"{'NumPy per example (HF way)':<28}{r['numpy_rows']:>8}{r['numpy_tokens_per_s'] / 1e6:>12.2f}{'1.0':>10}")
    print(f"{'Numba, 1 thread':<28}{r['numba_rows']:>8}{r['numba_1t_tokens_per_s'] / 1e6:>12.1f}"
          f"{r['numba_1t_vs_numpy']:>9.0f}x   (target >= 100x NumPy)")
    every = f"Numba, {r['threads']} threads"
    print(f"{every:<28}{r['numba_rows']:>8}{r['numba_all_tokens_per_s'] / 1e6:>12.1f}"
          f"{r['numba_all_vs_1t']:>9.2f}x   (vs 1 thread; target >= 1.7x on 2)")


def figures(r: dict) -> list[Figure]:
    return [
        Figure("Numba 1 thread vs per-example NumPy", f"{r['numba_1t_vs_numpy']:.0f}x", ">= 100x",
               r["numba_1t_vs_numpy"] >= 100),
        Figure(f"Numba {r['threads']} threads vs 1 thread", f"{r['numba_all_vs_1t']:.2f}x", ">= 1.7x on 2 cores",
               r["numba_all_vs_1t"] >= 1.7),
        Figure("Numba, all threads", f"{r['numba_all_tokens_per_s'] / 1e6:.1f} M tokens/s"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1 MB slice and fewer repeats")
    docs.add_arguments(parser, "span_corruption")
    args = parser.parse_args()
    result = run(args.quick)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.span_corruption")


if __name__ == "__main__":
    main()
