"""UL2's mixture of denoisers precomputed: the kernel per denoiser against a NumPy port of mosaic's online
collator, the corpus tokens each drops, padding under token-budget batching per denoiser, and loader tokens/s of
a ul2 build against a span build.

    python -m benchmarks.objectives           # 4 MB of pydocs.txt, input length 512
    python -m benchmarks.objectives --quick   # 1 MB

Kernel: rows of each default denoiser's raw length cut from the tokenized corpus, denoised by mask.denoise on one
thread (the build's chunks of about a million tokens), against `mosaic_row`, a NumPy port of llm-foundry's
MixtureOfDenoisersCollator noise function (noise_token_sequence: _sample_mask_array, _apply_mask for the inputs
and the labels, the mode token prefixed; its S-denoiser a sequence mask of ratio 0.25) written here, one example
per call as that collator makes them; rows per second of each, timed in turn, best of each. Dropped: the collator
truncates every example to its denoiser's max raw length from sequences of the largest one (its default
truncate_raw_tokens_to), so a row of a shorter denoiser drops the rest; a ul2 build of the slice drops none (its
rows, merged back, are the stream). Padding: enc + dec padded slots against real tokens, mlmprep's token-budget
plan on seed-0 of the build, per denoiser (each row's own padding in its microbatch) and overall. Loader: plan +
collate of epochs, real tokens per second of CPU time, the ul2 build against a span build of the same slice, in turn,
with the machine's load average; beside them each plan's real tokens per microbatch.
--write-docs writes the figures into the `objectives` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each
from mlmprep.builder import mask
from mlmprep.builder.denoisers import Mixture
from mlmprep.config import DEFAULT_DENOISERS
from mlmprep.train.batch import Budget, plan_epoch

INPUT_LENGTH = 512
CHUNK_TOKENS = 1 << 20
KERNEL_TARGET, LOADER_TARGET, PADDING_TARGET = 50.0, 0.9, 0.03
LOADER_MICROBATCHES = 600  # per timing of the loader, in whole epochs (4 MB: about 5, 1 MB: about 20)
BUDGET = Budget(max_tokens_per_batch=65536, max_tokens_per_microbatch=16384, max_examples_per_microbatch=64,
                pad_to_multiple_of=8)


# ---------------------------------------------------------------------------- mosaic's collator, in NumPy


def mosaic_mask(length: int, ratio: float, mean: float, rng: np.random.Generator) -> np.ndarray:
    """_sample_mask_array: T5's counts, span lengths from a random permutation of span markers, interleaved
    kept-first, as a float mask over the example."""
    noise = min(max(int(np.round(ratio * float(length))), 1), length - 1)
    spans = max(int(np.round(float(noise) / mean)), 1)

    def span_lengths(total: int) -> np.ndarray:
        markers = np.less(np.arange(total - 1), spans - 1)[rng.permutation(total - 1)]
        span_id = np.cumsum(np.concatenate([np.array([0]), markers])).reshape(-1, 1)
        return np.sum(span_id == np.arange(spans).reshape(1, -1), axis=0)

    interleaved = np.reshape(np.stack([span_lengths(length - noise), span_lengths(noise)], axis=1), [spans * 2])
    start = np.zeros(length)
    start[np.cumsum(interleaved)[:-1]] = 1
    return np.equal(np.mod(np.cumsum(start), 2), 1)


def mosaic_apply(tokens: np.ndarray, mask: np.ndarray, sentinels: bool, eos: int, ids: np.ndarray) -> np.ndarray:
    """_apply_mask: masked runs replaced by a sentinel each (or dropped), then </s> unless already last."""
    if not sentinels:
        out = np.array(tokens)[np.logical_not(mask)]
        return out if out[-1] == eos else np.concatenate([out, np.array([eos])])
    previous = np.concatenate([np.array([0]), mask[:-1]])
    first = np.logical_and(mask, np.logical_not(previous))
    rest = np.logical_and(mask, previous)
    index = np.minimum(len(ids), np.cumsum(first)) - 1
    out = np.where(first, ids[index], tokens)[np.logical_not(rest)]
    return out if out[-1] == eos else np.concatenate([out, np.array([eos])])


def mosaic_row(tokens: np.ndarray, ratio: float, mean: float | None, mode: int, eos: int, sentinel_ids: np.ndarray,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """noise_token_sequence for one example: (inputs, labels) as int64 tensors' worth of NumPy."""
    length = len(tokens)
    use_sentinels = mean is not None
    if mean is None:  # the sequence (prefix) denoiser: one span at the end, its share uniform in (0, 2 * ratio)
        u = rng.uniform(low=0.0, high=ratio * 2)
        mean = float(np.round(1 + u * (length - 1)))
        ratio = mean / length
    noise = mosaic_mask(length, ratio, mean, rng)
    inputs = mosaic_apply(tokens, noise, use_sentinels, eos, sentinel_ids)
    labels = mosaic_apply(tokens, 1 - noise, use_sentinels, eos, sentinel_ids)
    return np.concatenate([[mode], inputs]).astype(np.int64), labels.astype(np.int64)


# ---------------------------------------------------------------------------- data


def corpus_stream(quick: bool):
    """(token stream with </s> after each document, tokenizer, source) of a pydocs.txt slice, or random ids."""
    from mlmprep.builder.denoisers import add_mode_tokens, mode_tokens, sentinels_needed
    from mlmprep.tokenizer.encode import encode
    from mlmprep.tokenizer.train import train_tokenizer

    path = CORPORA / "pydocs.txt"
    text = path.read_text(encoding="utf-8")[: (1 if quick else 4) << 20] if path.is_file() else None
    docs_ = [line for line in text.splitlines() if line.strip()] if text else [
        " ".join(f"w{i % 997}" for i in range(k, k + 200)) for k in range(3000)]
    tok = train_tokenizer(docs_[: len(docs_) // 4], vocab_size=8000 - 3,
                          n_sentinels=sentinels_needed("ul2", DEFAULT_DENOISERS, None, INPUT_LENGTH))
    add_mode_tokens(tok, mode_tokens("ul2", DEFAULT_DENOISERS))
    flat, lengths = encode(tok, docs_)
    eos = tok.token_to_id("</s>")
    return np.insert(flat, np.cumsum(lengths), eos).astype(np.int32), tok, path.name if text else "synthetic"


def rows_of(stream: np.ndarray, length: int, n: int) -> np.ndarray:
    """n rows of `length` tokens, tiled from the stream when it is short."""
    need = n * length
    return np.resize(stream, need).reshape(n, length)


# ---------------------------------------------------------------------------- timing


def kernel_rates(stream: np.ndarray, tok, quick: bool) -> dict[str, dict[str, float]]:
    """Rows per second of mask.denoise (one thread) and of mosaic_row, for each default denoiser alone."""
    from mlmprep.tokenizer.load import special_ids

    ids = special_ids(tok)
    mixture = Mixture.of("ul2", DEFAULT_DENOISERS, None, INPUT_LENGTH)
    modes = np.array([tok.token_to_id(d.mode) for d in mixture.denoisers], np.int32)
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return {d.name: denoiser_rates(k, mixture, stream, ids, modes, quick) for k, d in enumerate(mixture.denoisers)}
    finally:
        numba.set_num_threads(before)


def denoiser_rates(d: int, mixture: Mixture, stream: np.ndarray, ids, modes: np.ndarray, quick: bool) -> dict:
    """{"ours", "theirs"}: rows per second of denoiser d alone, timed in turn (an S row: its prefix and a third more
    as target, its mean)."""
    denoiser = mixture.denoisers[d]
    length = int(mixture.raw[d]) + (int(mixture.raw[d]) // 3 if denoiser.kind == "prefix" else 0)
    n = max(1, CHUNK_TOKENS // length) * (1 if quick else 4)
    rows = rows_of(stream, length, n)
    offsets = np.arange(n + 1, dtype=np.int64) * length
    which = np.full(n, d, np.uint8)
    prefix = np.full(n, min(int(mixture.raw[d]), length - 1) if denoiser.kind == "prefix" else 0, np.int64)
    n_numpy = 100 if quick else 400
    rng = np.random.default_rng(0)
    mean = denoiser.mean_span_length if denoiser.kind == "span" else None

    def ours():
        mask.denoise(rows.reshape(-1), offsets, seed=1, first_row=0, which=which, prefix=prefix,
                     denoisers=mixture.denoisers, mode_ids=modes, sentinels=ids.sentinels, eos_id=ids.eos)

    def theirs():
        for r in range(n_numpy):
            mosaic_row(rows[r], denoiser.noise_density, mean, int(modes[d]), ids.eos, ids.sentinels, rng)

    seconds = best_of_each({"ours": ours, "theirs": theirs}, 3 if quick else 5)
    return {"ours": n / seconds["ours"], "theirs": n_numpy / seconds["theirs"]}


def mosaic_dropped(mixture: Mixture) -> float:
    """The share of corpus tokens mosaic's collator drops with uniform denoisers: examples of the largest max raw
    length, each cut to its denoiser's (the S-denoiser keeps the whole example)."""
    raw = np.where([d.kind == "span" for d in mixture.denoisers], mixture.raw, 0)
    longest = raw.max()
    kept = np.where(raw > 0, raw, longest)
    return float(1 - (mixture.weights * kept).sum() / longest)


def build_pair(corpus: Path, tokenizer: Path, work: Path) -> dict[str, Path]:
    """A ul2 and a span build of the corpus slice (one seed each, the same tokenizer)."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    out = {}
    for objective in ("ul2", "span"):
        out[objective] = work / objective
        build(BuildConfig(corpus=(str(corpus),), tokenizer=str(tokenizer), out=str(out[objective]), seeds=1,
                          objective=objective, input_length=INPUT_LENGTH, validation_fraction=0.0,
                          dedup="off"), log=lambda _: None)
    return out


def padding(split) -> dict[str, float]:
    """Padded slots over real tokens (enc + dec) under the token-budget plan, per denoiser and overall."""
    enc, dec = split.enc_lengths, split.dec_lengths
    padded, real = np.zeros(len(split)), (enc + dec).astype(np.float64)
    m = BUDGET.pad_to_multiple_of
    for batch in plan_epoch(enc, dec, BUDGET, seed=0, epoch=0):
        for mb in batch.ranks[0]:
            width_e = -(-int(enc[mb.rows].max()) // m) * m
            width_d = -(-int(dec[mb.rows].max()) // m) * m
            padded[mb.rows] = width_e - enc[mb.rows] + width_d - dec[mb.rows]
    out = {"overall": float(padded.sum() / (padded.sum() + real.sum()))}
    for d, name in enumerate(split.denoisers):
        at = split.denoiser == d
        out[name] = float(padded[at].sum() / (padded[at].sum() + real[at].sum()))
    return out


def loader_rates(builds: dict[str, Path], repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Real tokens per second through plan + collate of an epoch, ul2 and span, timed in turn in CPU time (one
    thread; a shared machine's wall time is noise), each timing epochs back to back, as many as make about
    LOADER_MICROBATCHES microbatches of the span build (a timing of a few milliseconds is noise); the tokens are
    the split's (every row is in one microbatch of rank 0's plan), counted outside the timing. Beside them, to show
    where the ratio comes from: each build's real tokens per microbatch of its plan."""
    from mlmprep.format.load import open_epoch, read_manifest
    from mlmprep.train.collate import Collator

    tokens, fns, per_microbatch, epochs = {}, {}, {}, None
    for name, path in sorted(builds.items(), key=lambda item: item[0] != "span"):  # span first: it sets the epochs
        split = open_epoch(path, 0)
        record = read_manifest(path).tokenizer
        collator = Collator(split.objective, record.pad_id, record.decoder_start_id,
                            pad_to_multiple_of=BUDGET.pad_to_multiple_of)
        plan = plan_epoch(split.enc_lengths, split.dec_lengths, BUDGET, seed=0, epoch=1)
        microbatches = sum(len(batch.ranks[0]) for batch in plan)
        epochs = epochs or max(1, round(LOADER_MICROBATCHES / microbatches))
        tokens[name] = epochs * int(split.enc_lengths.sum() + split.dec_lengths.sum())
        per_microbatch[name] = tokens[name] / epochs / microbatches

        def run(split=split, collator=collator, epochs=epochs):
            for epoch in range(1, epochs + 1):
                for batch in plan_epoch(split.enc_lengths, split.dec_lengths, BUDGET, seed=0, epoch=epoch):
                    for mb in batch.ranks[0]:
                        collator.from_split(split, mb.rows)

        fns[name] = run
    seconds = best_of_each(fns, repeats, clock=time.process_time)
    return {name: tokens[name] / seconds[name] for name in fns}, per_microbatch


def run(quick: bool = False) -> dict:
    from mlmprep.format.load import open_split, read_manifest

    stream, tok, source = corpus_stream(quick)
    rates = kernel_rates(stream, tok, quick)
    mixture = Mixture.of("ul2", DEFAULT_DENOISERS, None, INPUT_LENGTH)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        tok.save(str(work / "tokenizer.json"))
        path = CORPORA / "pydocs.txt"
        corpus = work / "corpus.txt"
        corpus.write_text(path.read_text(encoding="utf-8")[: (1 if quick else 4) << 20] if path.is_file() else
                          "\n".join(" ".join(f"w{i % 997}" for i in range(k, k + 200)) for k in range(3000)),
                          encoding="utf-8")
        builds = build_pair(corpus, work / "tokenizer.json", work)
        manifest = read_manifest(builds["ul2"])
        windows = manifest.window_stats["tokens_kept"] + manifest.window_stats["tokens_dropped"]
        seed = manifest.masking_stats["seed-0"]
        in_rows = sum(int(seed[f"{name}/tokens"]) for name in manifest.denoiser_names())
        span = read_manifest(builds["span"]).window_stats
        pads = padding(open_split(builds["ul2"] / "seed-0"))
        load = os.getloadavg()[0]
        loader, per_microbatch = loader_rates(builds, 7 if quick else 15)
        load = (load + os.getloadavg()[0]) / 2
    result = {
        "source": source, "rates": rates, "tokens": windows, "dropped_ours": windows - in_rows,
        "dropped_span_build": span["tokens_dropped"] / (span["tokens_kept"] + span["tokens_dropped"]),
        "dropped_mosaic": mosaic_dropped(mixture), "padding": pads, "loader": loader,
        "loader_ratio": loader["ul2"] / loader["span"], "per_microbatch": per_microbatch, "load": load,
    }
    print_table(result)
    return result


def print_table(r: dict) -> None:
    print(f"\nUL2 denoisers on {r['source']}, input length {INPUT_LENGTH}: rows/s, one thread")
    print(f"{'denoiser':<12}{'mlmprep':>12}{'mosaic (NumPy)':>16}{'ratio':>10}")
    for name, rate in r["rates"].items():
        print(f"{name:<12}{rate['ours']:>12,.0f}{rate['theirs']:>16,.0f}{rate['ours'] / rate['theirs']:>9.0f}x")
    print(f"corpus tokens dropped: mlmprep ul2 {r['dropped_ours']} of {r['tokens']:,}; mosaic's collator "
          f"{r['dropped_mosaic']:.1%}; a span build's stream tail {r['dropped_span_build']:.2%}")
    print("padding under token-budget batching (of enc + dec slots): " +
          ", ".join(f"{k} {v:.2%}" for k, v in r["padding"].items()))
    print(f"loader (CPU time): ul2 {r['loader']['ul2'] / 1e6:.0f} M tokens/s, span {r['loader']['span'] / 1e6:.0f} M "
          f"tokens/s ({r['loader_ratio']:.2f}x); load average {r['load']:.1f}")
    print(f"  real tokens per microbatch, ul2 / span: {r['per_microbatch']['ul2']:,.0f} / "
          f"{r['per_microbatch']['span']:,.0f} ({microbatch_ratio(r):.2f})")


def microbatch_ratio(r: dict) -> float:
    """Real tokens per microbatch of the ul2 plan / the span plan's: the loader's ratio where a microbatch's cost
    is all fixed."""
    return r["per_microbatch"]["ul2"] / r["per_microbatch"]["span"]


def figures(r: dict) -> list[Figure]:
    out = [Figure(f"kernel vs mosaic, {name} (1 thread)", f"{rate['ours'] / rate['theirs']:.0f}x",
                  f">= {KERNEL_TARGET:.0f}x", rate["ours"] / rate["theirs"] >= KERNEL_TARGET)
           for name, rate in r["rates"].items()]
    return out + [
        Figure("corpus tokens dropped per seed (ul2)", f"{r['dropped_ours']}", "0", r["dropped_ours"] == 0),
        Figure("corpus tokens mosaic's collator drops", f"{r['dropped_mosaic']:.1%}"),
        Figure("padding, token-budget plan (ul2)", f"{r['padding']['overall']:.2%}", f"<= {PADDING_TARGET:.0%}",
               r["padding"]["overall"] <= PADDING_TARGET),
        *(Figure(f"padding, {name}", f"{value:.2%}") for name, value in r["padding"].items() if name != "overall"),
        Figure("loader tokens/s, ul2 vs span build (CPU time)", f"{r['loader_ratio']:.2f}x", f">= {LOADER_TARGET}x",
               r["loader_ratio"] >= LOADER_TARGET),
        Figure("loader tokens/s, ul2 / span build", f"{r['loader']['ul2'] / 1e6:.0f} M / "
               f"{r['loader']['span'] / 1e6:.0f} M"),
        Figure("real tokens per microbatch, ul2 / span plan", f"{r['per_microbatch']['ul2']:,.0f} / "
               f"{r['per_microbatch']['span']:,.0f} ({microbatch_ratio(r):.2f})"),
        Figure("load average during the loader pair", f"{r['load']:.1f}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 1 MB slice and fewer repeats")
    docs.add_arguments(parser, "objectives")
    args = parser.parse_args()
    result = run(args.quick)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.objectives")


if __name__ == "__main__":
    main()
