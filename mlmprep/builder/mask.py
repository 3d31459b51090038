"""Masking: T5 span corruption and BERT-style MLM over ragged rows of token ids.

Rows are `values` (flat int32) plus `offsets` (int64, n_rows + 1, offsets[0] = 0); fixed windows are
offsets = arange(n + 1) * L. A row's mask is a pure function of (seed, first_row + i), so the output
bytes do not depend on chunking or thread count. Validation, length arithmetic and allocation live
here; the loops live in mlmprep.builder._kernels.

Span corruption (T5): a row of L tokens gets `noise = round(L * density)` noise tokens,
clamped to [1, L - 1], in `spans = max(1, round(min(noise, L - noise) / mean_span))` spans. The noise
and the kept tokens are each split into `spans` non-empty parts uniformly at random and interleaved,
kept part first:

    tokens 1..13, density 0.3, mean span 2 -> noise 4, spans 2, e.g. parts [3, 1, 6, 3]
    encoder  [1 2 3 E0 5 6 7 8 9 10 E1 </s>]     length L - noise + spans + 1 = 12
    labels   [E0 4 E1 11 12 13 </s>]             length noise + spans + 1 = 7
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from mlmprep.builder.randomness import MASK64, stream_key
from mlmprep.errors import ConfigError
from mlmprep.format.rows import IGNORE, starts_of

# The kernels (mlmprep.builder._kernels) are imported where they are first called: importing Numba and loading
# its cache takes about a second of one core, which a build spends while its tokenizer already runs.

SLOT_TAG = 0x5EED_5107_D0E5_C0DE  # keeps slot seeds apart from the row streams of the base seed itself


@dataclass(frozen=True)
class SpanCorrupted:
    """Span-corrupted rows: encoder inputs and labels, each flat int32 values with int64 offsets."""

    enc_values: np.ndarray  # [sum L_enc] int32
    enc_offsets: np.ndarray  # [n_rows + 1] int64
    label_values: np.ndarray  # [sum L_label] int32
    label_offsets: np.ndarray  # [n_rows + 1] int64


# ---------------------------------------------------------------------------- length arithmetic


def _check_span_options(noise_density: float, mean_span_length: float) -> None:
    if not 0.0 < noise_density < 1.0:
        raise ConfigError(f"--noise-density must be in (0, 1), got {noise_density}; T5 uses 0.15")
    if not (math.isfinite(mean_span_length) and mean_span_length >= 1.0):
        raise ConfigError(f"--mean-span-length must be a number >= 1, got {mean_span_length}; T5 uses 3")


def span_counts(lengths, noise_density: float, mean_span_length: float, *,
                exact_t5: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(noise tokens, noise spans) per row length L, as int64 arrays; rounding is half-to-even like T5's.

    noise = round(L * density) clamped to [1, L - 1]; spans = max(1, round(min(noise, L - noise) / mean)), which
    stays defined above density 0.5. `exact_t5` (UL2's denoisers): T5's random_spans_noise_mask, spans =
    round(noise / mean) clamped to [1, L - noise] (the upper clamp only where T5's own would leave a kept part empty).
    """
    _check_span_options(noise_density, mean_span_length)
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size and lengths.min() < 2:
        raise ConfigError(f"span corruption needs rows of at least 2 tokens, got one of {lengths.min()}")
    noise = np.clip(np.rint(lengths * noise_density).astype(np.int64), 1, lengths - 1)
    if exact_t5:
        return noise, np.clip(np.rint(noise / mean_span_length).astype(np.int64), 1, lengths - noise)
    spans = np.maximum(1, np.rint(np.minimum(noise, lengths - noise) / mean_span_length).astype(np.int64))
    return noise, spans


def corrupted_lengths(lengths, noise_density: float, mean_span_length: float) -> tuple[np.ndarray, np.ndarray]:
    """(encoder length L - noise + spans + 1, label length noise + spans + 1) per row length L."""
    lengths = np.asarray(lengths, dtype=np.int64)
    noise, spans = span_counts(lengths, noise_density, mean_span_length)
    return lengths - noise + spans + 1, noise + spans + 1


def compute_input_and_target_lengths(input_length: int, noise_density: float,
                                     mean_span_length: float) -> tuple[int, int]:
    """(window length L, label length): the largest L whose encoder length is <= input_length.

    The encoder length never decreases with L, so a bisection finds it. 512, 0.15, 3 -> (568, 114).
    """
    _check_span_options(noise_density, mean_span_length)
    if input_length < 3:
        raise ConfigError(
            f"--input-length {input_length} is too small: one kept token, one sentinel and EOS need at least 3"
        )
    lo, hi = 2, math.ceil(input_length / (1.0 - noise_density)) + 2  # enc(lo) <= input_length < enc(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if corrupted_lengths(mid, noise_density, mean_span_length)[0] <= input_length:
            lo = mid
        else:
            hi = mid
    return lo, int(corrupted_lengths(lo, noise_density, mean_span_length)[1])


def check_input_length_reached(input_length: int, window_length: int, noise_density: float,
                               mean_span_length: float) -> None:
    """Exact token windows promise encoder inputs of exactly input_length; at a noise density of 0.5 or more
    the encoder length can step by 2 from one window length to the next, skipping input_length."""
    enc = corrupted_lengths([window_length, window_length + 1], noise_density, mean_span_length)[0]
    if enc[0] != input_length:
        raise ConfigError(
            f"--input-length {input_length} cannot be met exactly at --noise-density {noise_density} and "
            f"--mean-span-length {mean_span_length}: windows of {window_length} and {window_length + 1} tokens "
            f"give encoder inputs of {enc[0]} and {enc[1]}; use --input-length {enc[0]} or {enc[1]}"
        )


SPAN_TOLERANCE = 1 / 3  # a window honours the asked noise density and mean span length within a third of each


def span_warning(input_length: int, noise_density: float, mean_span_length: float) -> str | None:
    """A warning line when windows for `input_length` are too short to honour --noise-density and
    --mean-span-length (a noise token and a span at the least, each rounded), naming the smallest input length
    from which on every window does, within SPAN_TOLERANCE; None when they do."""
    window, _ = compute_input_and_target_lengths(input_length, noise_density, mean_span_length)
    limit = max(4096, math.ceil(20 * mean_span_length / min(noise_density, 1 - noise_density)))
    lengths = np.arange(2, limit + 1, dtype=np.int64)
    noise, spans = span_counts(lengths, noise_density, mean_span_length)
    density, mean = noise / lengths, np.minimum(noise, lengths - noise) / spans
    off = ((np.abs(density - noise_density) > SPAN_TOLERANCE * noise_density)
           | (np.abs(mean - mean_span_length) > SPAN_TOLERANCE * mean_span_length))
    if not off[window - 2]:
        return None
    smallest = int(corrupted_lengths([lengths[off].max() + 1], noise_density, mean_span_length)[0][0])
    k = window - 2
    n, m = int(noise[k]), int(spans[k])
    return (f"warning: --input-length {input_length} gives windows of {window} tokens with {n} noise "
            f"token{'s' * (n != 1)} in {m} span{'s' * (m != 1)}: noise density "
            f"{density[k]:.3f} and mean span length {mean[k]:.2f} where {noise_density:g} and {mean_span_length:g} "
            f"were asked; --input-length {smallest} or more honours them")


def check_span_settings(max_window_length: int, noise_density: float, mean_span_length: float,
                        n_sentinels: int) -> None:
    """Fail before any work if the longest window needs more noise spans than the tokenizer has sentinels."""
    if n_sentinels == 0:
        raise ConfigError(
            "the tokenizer has no <extra_id_k> sentinel tokens, which span corruption needs; "
            "train one with mlmprep (it adds 100) or use --objective mlm"
        )
    spans = int(span_counts([max_window_length], noise_density, mean_span_length)[1][0])
    if spans > n_sentinels:
        raise ConfigError(
            f"windows of {max_window_length} tokens at --noise-density {noise_density} and --mean-span-length "
            f"{mean_span_length} need {spans} noise spans but the tokenizer has {n_sentinels} sentinels; "
            "lower --input-length or --noise-density, or raise --mean-span-length"
        )


# ---------------------------------------------------------------------------- masking


def _check_rows(values, offsets) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous (int32 values, int64 offsets), checked to describe len(values) tokens in order."""
    values = np.ascontiguousarray(values, dtype=np.int32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != values.size:
        raise ConfigError(f"offsets must run from 0 to len(values) = {values.size}; got {offsets.size} offsets")
    if np.any(np.diff(offsets) < 0):
        raise ConfigError("offsets must not decrease")
    return values, offsets


def _check_seed(seed: int, first_row: int) -> None:
    if not 0 <= seed <= MASK64:
        raise ConfigError(f"--seed must be in [0, 2**64), got {seed}")
    if first_row < 0:
        raise ConfigError(f"first_row must be >= 0, got {first_row}")


def span_corrupt(values, offsets, *, seed: int, first_row: int, noise_density: float, mean_span_length: float,
                 sentinels: np.ndarray, eos_id: int, random_roll: bool = False) -> SpanCorrupted:
    """T5 span corruption of every row (see the module docstring); row i is keyed by (seed, first_row + i).

    `sentinels[k]` is the id of <extra_id_k>; a row's noise spans take E0, E1, ... in order. With
    `random_roll` the row's mask is rotated to start at a uniform random token (moved back to the
    start of a noise span it falls inside, so spans are never split and lengths never change): the
    last token is then not always noise, and a row may begin with a noise span.
    """
    from mlmprep.builder import _kernels

    values, offsets = _check_rows(values, offsets)
    _check_seed(seed, first_row)
    sentinels = np.ascontiguousarray(sentinels, dtype=np.int32)
    lengths = np.diff(offsets)
    noise, spans = span_counts(lengths, noise_density, mean_span_length)
    if lengths.size and spans.max() > sentinels.size:  # spans never decrease with length: the longest row decides
        check_span_settings(int(lengths.max()), noise_density, mean_span_length, sentinels.size)
    enc_offsets = starts_of(lengths - noise + spans + 1)
    label_offsets = starts_of(noise + spans + 1)
    enc_values = np.empty(enc_offsets[-1], dtype=np.int32)  # [sum L_enc]
    label_values = np.empty(label_offsets[-1], dtype=np.int32)  # [sum L_label]
    _kernels.span_corrupt_rows(
        values, offsets, noise, spans, np.uint64(seed), np.int64(first_row), sentinels, np.int32(eos_id),
        bool(random_roll), enc_offsets, label_offsets, enc_values, label_values,
    )
    return SpanCorrupted(enc_values, enc_offsets, label_values, label_offsets)


def denoise_counts(lengths, which: np.ndarray, denoisers, prefix: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                          np.ndarray]:
    """(kind 0 span / 1 prefix, noise tokens or prefix target tokens, noise spans) per row of `lengths` tokens denoised
    by denoisers[which]; `prefix` the input part of each prefix row. A span row of one token gets no noise (it stays
    whole: only the stream's last row can be that short)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    kinds = np.zeros(lengths.size, np.int8)
    noise = np.zeros(lengths.size, np.int64)
    spans = np.zeros(lengths.size, np.int64)
    for d, denoiser in enumerate(denoisers):
        rows = which == d
        if denoiser.kind == "prefix":
            kinds[rows] = 1
            noise[rows] = lengths[rows] - prefix[rows]
            continue
        rows &= lengths >= 2
        noise[rows], spans[rows] = span_counts(lengths[rows], denoiser.noise_density, denoiser.mean_span_length,
                                               exact_t5=True)
    return kinds, noise, spans


def denoise(values, offsets, *, seed: int, first_row: int, which: np.ndarray, prefix: np.ndarray, denoisers,
            mode_ids: np.ndarray, sentinels: np.ndarray, eos_id: int) -> SpanCorrupted:
    """Each row by its own denoiser (denoisers[which[i]]: span corruption as T5's, or the prefix LM with `prefix[i]`
    input tokens), its mode token mode_ids[which[i]] (-1: none) first in the encoder input; row i is keyed by
    (seed, first_row + i) as span_corrupt's rows are."""
    from mlmprep.builder import _kernels

    values, offsets = _check_rows(values, offsets)
    _check_seed(seed, first_row)
    sentinels = np.ascontiguousarray(sentinels, dtype=np.int32)
    lengths = np.diff(offsets)
    kinds, noise, spans = denoise_counts(lengths, which, denoisers, prefix)
    if lengths.size and spans.max() > sentinels.size:
        raise ConfigError(f"a row needs {spans.max()} noise spans but the tokenizer has {sentinels.size} sentinels; "
                          "lower --input-length or use denoisers of longer spans")
    modes = np.asarray(mode_ids, dtype=np.int32)[which]
    extra = (modes >= 0).astype(np.int64)
    enc_offsets = starts_of(np.where(kinds == 1, lengths - noise + 1, lengths - noise + spans + 1) + extra)
    label_offsets = starts_of(np.where(kinds == 1, noise + 1, noise + spans + 1))
    enc_values = np.empty(enc_offsets[-1], dtype=np.int32)  # [sum L_enc]
    label_values = np.empty(label_offsets[-1], dtype=np.int32)  # [sum L_label]
    _kernels.ul2_rows(values, offsets, kinds, noise, spans, modes, np.uint64(seed), np.int64(first_row), sentinels,
                      np.int32(eos_id), enc_offsets, label_offsets, enc_values, label_values)
    return SpanCorrupted(enc_values, enc_offsets, label_values, label_offsets)


MDLM_FLOOR = 1e-3  # the least masking rate: MDLM's sampling_eps, which bounds the loss weight 1/t by 1000


def mdlm_mask(values, offsets, *, seed: int, first_row: int, mask_id: int, special_ids: np.ndarray,
              vocab_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masked diffusion: (input_ids, labels, rates float32 per row). Row i draws t in (MDLM_FLOOR, 1] (uniform,
    stored as float32) and masks each non-special token with probability t, the label the original there and -100
    elsewhere."""
    from mlmprep.builder import _kernels

    values, offsets = _check_rows(values, offsets)
    _check_seed(seed, first_row)
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        raise ConfigError(f"token ids must be in [0, {vocab_size}); got {values.min()}..{values.max()}")
    is_special = np.zeros(vocab_size, dtype=np.bool_)  # [V]
    is_special[np.asarray(special_ids, dtype=np.int64)] = True
    inputs, labels = np.empty_like(values), np.empty_like(values)
    rates = np.empty(offsets.size - 1, dtype=np.float32)
    _kernels.mdlm_rows(values, offsets, np.uint64(seed), np.int64(first_row), np.float64(MDLM_FLOOR),
                       np.int32(mask_id), is_special, inputs, labels, rates)
    return inputs, labels, rates


def mlm_counts(values, offsets, special_ids, probability: float) -> np.ndarray:
    """Tokens to mask per row (int64): m = max(1, round(maskable * probability)), 0 if no token is maskable."""
    values, offsets = _check_rows(values, offsets)
    if not 0.0 < probability < 1.0:
        raise ConfigError(f"--mlm-probability must be in (0, 1), got {probability}; BERT uses 0.15")
    running = np.zeros(values.size + 1, dtype=np.int64)
    np.cumsum(~np.isin(values, special_ids), out=running[1:])
    maskable = running[offsets[1:]] - running[offsets[:-1]]
    return np.where(maskable > 0, np.maximum(1, np.rint(maskable * probability)), 0).astype(np.int64)


def mlm_mask(values, offsets, *, seed: int, first_row: int, probability: float, mask_id: int,
             special_ids: np.ndarray, vocab_size: int, word_starts: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """BERT masking: (input_ids, labels), flat int32 with the same offsets as `values`.

    Per row, mlm_counts' m of its non-special tokens are chosen without replacement: 80% become
    mask_id, 10% a random non-special id, 10% stay; labels hold the original id there and -100
    elsewhere. With `word_starts` (bool per id: the token begins a word) whole words are chosen in
    random order while the count stays <= m, and at least one word.
    """
    from mlmprep.builder import _kernels

    values, offsets = _check_rows(values, offsets)
    _check_seed(seed, first_row)
    if values.size and (values.min() < 0 or values.max() >= vocab_size):
        raise ConfigError(f"token ids must be in [0, {vocab_size}); got {values.min()}..{values.max()}")
    special_ids = np.asarray(special_ids, dtype=np.int64)
    if special_ids.size and (special_ids.min() < 0 or special_ids.max() >= vocab_size):
        raise ConfigError(f"special ids must be in [0, {vocab_size}); got {special_ids.min()}..{special_ids.max()}")
    counts = mlm_counts(values, offsets, special_ids, probability)
    is_special = np.zeros(vocab_size, dtype=np.bool_)  # [V]
    is_special[special_ids] = True
    normal_ids = np.flatnonzero(~is_special).astype(np.int32)  # the ids a random replacement draws from
    if normal_ids.size == 0 or not 0 <= mask_id < vocab_size:
        raise ConfigError(f"mask id {mask_id} and a non-special id are needed in a vocabulary of {vocab_size}")
    whole_word = word_starts is not None
    if whole_word and np.shape(word_starts) != (vocab_size,):
        raise ConfigError(f"word_starts must hold one bool per id ({vocab_size}), got shape {np.shape(word_starts)}")
    if whole_word:
        check_word_starts(word_starts, is_special)
    starts = np.ascontiguousarray(word_starts, dtype=np.bool_) if whole_word else np.zeros(0, dtype=np.bool_)
    input_ids = np.empty_like(values)
    labels = np.empty_like(values)
    _kernels.mlm_rows(
        values, offsets, counts, np.uint64(seed), np.int64(first_row), np.int32(mask_id), is_special, normal_ids,
        starts, whole_word, input_ids, labels,
    )
    return input_ids, labels


def check_word_starts(word_starts: np.ndarray, is_special: np.ndarray) -> None:
    """Refuse whole-word masking with a tokenizer that marks no word starts (no ▁ or Ġ prefix, no ##
    continuations): every run of text between special tokens would be one "word", masked whole."""
    if not np.any(np.asarray(word_starts, dtype=bool) & ~np.asarray(is_special, dtype=bool)):
        raise ConfigError("--whole-word: the tokenizer marks no word starts (no ▁ or Ġ prefixes, no ## continuations), "
                          "so its words cannot be told apart; leave out --whole-word")


# ---------------------------------------------------------------------------- threads, seeds and statistics


def set_threads(threads: int) -> None:
    """Run the masking kernels of this thread on `threads` cores (0: all); the output does not depend on it."""
    import numba

    n = threads or os.cpu_count() or 1
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def row_seed(seed: int, k: int) -> int:
    """The seed of cache slot k (directory seed-k) derived from the base seed: a 64-bit hash of (seed, k).

    Pure, so any slot can be rebuilt alone; hashing (not seed + k) keeps the slots of nearby base seeds apart.
    """
    _check_seed(seed, 0)
    if k < 0:
        raise ConfigError(f"cache slot must be >= 0, got {k}")
    with np.errstate(over="ignore"):
        return int(stream_key(np.uint64(seed ^ SLOT_TAG), np.uint64(k)))


def span_stats(label_values, label_offsets, enc_offsets, sentinels) -> dict[str, float]:
    """What span corruption did, counted from its outputs: noise fraction, mean span length, spans per row."""
    rows = len(label_offsets) - 1
    spans = int(np.isin(label_values, sentinels).sum())
    noise = len(label_values) - spans - rows  # labels are sentinels + noise tokens + one EOS per row
    tokens = noise + int(enc_offsets[-1]) - spans - rows  # plus the encoder's kept tokens
    return {
        "noise_fraction": noise / tokens if tokens else 0.0,
        "mean_span_length": noise / spans if spans else 0.0,
        "spans_per_row": spans / rows if rows else 0.0,
        "rows": float(rows),
    }


def mlm_stats(labels, offsets) -> dict[str, float]:
    """Fraction of all tokens that carry a label (were chosen for masking), and the row count."""
    labels = np.asarray(labels)
    chosen = int((labels != IGNORE).sum())
    return {"masked_fraction": chosen / labels.size if labels.size else 0.0, "rows": float(len(offsets) - 1)}


__all__ = [
    "SpanCorrupted",
    "check_span_settings",
    "check_word_starts",
    "compute_input_and_target_lengths",
    "check_input_length_reached",
    "corrupted_lengths",
    "mlm_counts",
    "mlm_mask",
    "mlm_stats",
    "row_seed",
    "set_threads",
    "span_corrupt",
    "span_counts",
    "span_stats",
]
