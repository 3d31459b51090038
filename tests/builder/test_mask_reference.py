"""The masking kernels against independent references, in distribution.

`random_spans_noise_mask` below is a plain NumPy port of T5 / Hugging Face's function, written from the
algorithm of seed 000 (RANDOM_SEGMENT = shuffle s-1 segment starts among the n-1 gaps), not from mlmprep's
code. The kernel's masks are compared with it: exact noise and span counts over many settings, the full
joint distribution of span lengths (the composition) for rows of 2, 3, 5 and 6 spans, the first span's start
at T5's settings; the random roll against the exact distribution its documentation implies; the MLM kernel's
per-position rate and 80/10/10 split.

Statistical tests run at significance 1e-4 each (chi-square cutoffs by the Wilson-Hilferty approximation,
binomial z at 4.0 with a Bonferroni share), so a correct kernel fails one about once in 10,000 seeds; the
seeds are fixed, so the suite is deterministic. A biased sampler of the kind these tests exist for (one
that favours some compositions by a few percent) gives statistics tens to thousands of times the cutoff.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mlmprep.builder.mask import mlm_mask, span_corrupt

EOS = 1
BASE = 2  # token of position p is BASE + p, below every sentinel
SENTINELS = (30_000 - np.arange(1_000)).astype(np.int32)
IGNORE = -100


# ---------------------------------------------------------------------------- the reference (seed 000 / HF)


def random_segmentation(rng: np.random.Generator, num_items: int, num_segments: int, rows: int) -> np.ndarray:
    """RANDOM_SEGMENT for `rows` rows at once, [rows, num_segments]: num_items split into num_segments
    non-empty parts by shuffling num_segments - 1 segment starts among the num_items - 1 gaps (each row
    shuffled on its own), so uniformly over compositions."""
    mask_indices = np.arange(num_items - 1) < (num_segments - 1)
    shuffled = rng.permuted(np.tile(mask_indices, (rows, 1)), axis=1)
    first_in_segment = np.pad(shuffled, [[0, 0], [1, 0]])
    starts = np.nonzero(first_in_segment)[1].reshape(rows, num_segments - 1)
    return np.diff(np.pad(starts, [[0, 0], [1, 0]], constant_values=0), axis=1, append=num_items)


def noise_counts(length: int, noise_density: float, mean_noise_span_length: float) -> tuple[int, int]:
    """Step 2 of seed 000: (noise tokens, noise spans) of a row of `length` tokens."""
    num_noise_tokens = int(np.round(length * noise_density))
    num_nonnoise_tokens = length - num_noise_tokens
    num_noise_spans = int(np.round(min(num_noise_tokens, num_nonnoise_tokens) / mean_noise_span_length))
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = max(num_noise_spans, 1)
    return num_noise_tokens, num_noise_spans


def random_spans_noise_mask(rng, length: int, noise_density: float, mean_noise_span_length: float,
                            rows: int = 1) -> np.ndarray:
    """Steps 2-4 of seed 000 for `rows` rows: [rows, length] bool is_noise, kept span first, noise span last."""
    num_noise_tokens, num_noise_spans = noise_counts(length, noise_density, mean_noise_span_length)
    num_nonnoise_tokens = length - num_noise_tokens  # (HF keeps the unclamped count here; it then cuts to length)
    noise_span_lengths = random_segmentation(rng, num_noise_tokens, num_noise_spans, rows)
    nonnoise_span_lengths = random_segmentation(rng, num_nonnoise_tokens, num_noise_spans, rows)
    interleaved = np.stack([nonnoise_span_lengths, noise_span_lengths], axis=2).reshape(rows, 2 * num_noise_spans)
    span_starts = np.cumsum(interleaved, axis=1)[:, :-1]
    span_start_indicator = np.zeros((rows, length), dtype=np.int8)
    np.put_along_axis(span_start_indicator, span_starts, 1, axis=1)
    span_num = np.cumsum(span_start_indicator, axis=1)
    return np.equal(span_num % 2, 1)


def documented_roll(is_noise: np.ndarray, offset: int) -> np.ndarray:
    """docs/format.md's --random-roll: rotate to start at `offset`, moved back to the start of a noise span
    it falls inside (so no span is ever split)."""
    while is_noise[offset] and offset > 0 and is_noise[offset - 1]:
        offset -= 1
    return np.roll(is_noise, -offset)


def reference_masks(n: int, length: int, density: float, mean: float, seed: int = 0) -> np.ndarray:
    return random_spans_noise_mask(np.random.default_rng(seed), length, density, mean, rows=n)


# ---------------------------------------------------------------------------- the kernel's masks


def kernel_masks(n: int, length: int, density: float, mean: float, *, seed: int = 0, random_roll: bool = False):
    """[n, length] bool: which positions of each row the kernel made noise (read from its labels)."""
    values = np.tile(np.arange(BASE, BASE + length, dtype=np.int32), n)
    out = span_corrupt(values, np.arange(n + 1) * length, seed=seed, first_row=0, noise_density=density,
                       mean_span_length=mean, sentinels=SENTINELS, eos_id=EOS, random_roll=random_roll)
    labels = out.label_values.reshape(n, -1)
    rows, cols = np.nonzero((labels >= BASE) & (labels < SENTINELS[-1]))
    mask = np.zeros((n, length), dtype=bool)
    mask[rows, labels[rows, cols] - BASE] = True
    return mask


def runs(mask: np.ndarray) -> list[list[int]]:
    """The run lengths of each row (alternating values), from its first position."""
    out = []
    for row in mask:
        cuts = np.flatnonzero(row[1:] != row[:-1]) + 1
        out.append(np.diff(np.concatenate([[0], cuts, [row.size]])).tolist())
    return out


# ---------------------------------------------------------------------------- statistics


def chi2_cutoff(df: int, z: float = 3.719) -> float:
    """The chi-square quantile at upper tail p = 1e-4 (z = 3.719), Wilson-Hilferty (within 1% for df >= 3)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_goodness(observed: dict, expected_p: dict, n: int) -> tuple[float, int]:
    """(statistic, degrees of freedom) of observed counts against probabilities over the cells of expected_p;
    a cell observed but not expected makes it infinite."""
    if set(observed) - set(expected_p):
        return math.inf, len(expected_p) - 1
    stat = sum((observed.get(cell, 0) - n * p) ** 2 / (n * p) for cell, p in expected_p.items())
    return stat, len(expected_p) - 1


def mask_counts(masks: np.ndarray) -> dict:
    """How often each distinct row occurs, keyed by the row as a tuple of bools."""
    unique, counts = np.unique(masks, axis=0, return_counts=True)
    return {tuple(row.tolist()): int(c) for row, c in zip(unique, counts)}


def counts_of(keys) -> dict:
    out: dict = {}
    for key in keys:
        out[key] = out.get(key, 0) + 1
    return out


def compositions(total: int, parts: int):
    """Every way to write `total` as `parts` positive parts, in order."""
    for cuts in itertools.combinations(range(1, total), parts - 1):
        yield tuple(np.diff((0, *cuts, total)).tolist())


def composition_law(length: int, density: float, mean: float) -> dict:
    """The reference's law of the masks, keyed by run lengths: kept and noise parts each uniform over
    compositions, independent."""
    noise, spans = noise_counts(length, density, mean)
    law = {}
    kept_ways, noise_ways = list(compositions(length - noise, spans)), list(compositions(noise, spans))
    p = 1 / (len(kept_ways) * len(noise_ways))
    for kept in kept_ways:
        for drop in noise_ways:
            law[tuple(x for pair in zip(kept, drop) for x in pair)] = p
    return law


# ---------------------------------------------------------------------------- span corruption


def test_noise_and_span_counts_match_the_reference_over_many_settings():
    lengths = [*range(2, 41), 63, 100, 257, 568, 1000]
    repeat = 3  # rows per length, each its own draw
    offsets = np.concatenate([[0], np.cumsum(lengths * repeat)])
    values = np.concatenate([np.arange(BASE, BASE + n, dtype=np.int32) for n in lengths * repeat])
    rng = np.random.default_rng(0)
    for density in (0.01, 0.15, 0.3, 0.5, 0.99):
        for mean in (1.0, 1.5, 3.0, 7.5):
            out = span_corrupt(values, offsets, seed=1, first_row=0, noise_density=density, mean_span_length=mean,
                               sentinels=SENTINELS, eos_id=EOS)
            spans = np.diff(np.concatenate(
                [[0], np.cumsum(np.isin(out.label_values, SENTINELS))[out.label_offsets[1:] - 1]]))
            noise = np.diff(out.label_offsets) - spans - 1
            for i, length in enumerate(lengths):
                want = runs(random_spans_noise_mask(rng, length, density, mean))[0]
                got = {(int(spans[i + k * len(lengths)]), int(noise[i + k * len(lengths)])) for k in range(repeat)}
                assert got == {(len(want) // 2, sum(want[1::2]))}, (length, density, mean)


# (length, density, mean span) -> rows of 2, 3, 5 and 6 noise spans; the collision branch of a sampler that
# draws s-1 distinct cuts runs for 3 spans and up (with 2 spans it draws one value).
SETTINGS = {
    2: (12, 0.5, 3.0),  # 6 + 6 tokens, 25 compositions
    3: (16, 0.25, 4 / 3),  # 4 noise in 3 parts, 12 kept in 3: 165 compositions
    5: (12, 0.5, 1.2),  # 6 + 6 tokens in 5 parts each: 25 compositions, nearly every draw collides
    6: (16, 0.5, 4 / 3),  # 8 + 8 tokens in 6 parts each: 441 compositions
}


@pytest.mark.parametrize("spans", SETTINGS)
def test_span_lengths_follow_the_references_joint_law(spans):
    length, density, mean = SETTINGS[spans]
    law = composition_law(length, density, mean)
    assert len(next(iter(law))) == 2 * spans
    law = {tuple(np.repeat(np.arange(2 * spans) % 2 == 1, parts).tolist()): p for parts, p in law.items()}
    n = max(5_000, 60 * len(law))  # 60 to 200 rows per composition
    for name, masks in (("kernel", kernel_masks(n, length, density, mean, seed=spans)),
                        ("reference", reference_masks(n, length, density, mean, seed=spans))):
        stat, df = chi2_goodness(mask_counts(masks), law, n)
        assert stat < chi2_cutoff(df), f"{name}: chi-square {stat:.1f} >= {chi2_cutoff(df):.1f} ({df} df)"


def first_start_law(length: int, density: float, mean: float) -> dict:
    """P(the first noise token is at position a): kept part 1 of k kept tokens in s uniform parts."""
    noise, spans = noise_counts(length, density, mean)
    kept = length - noise
    ways = math.comb(kept - 1, spans - 1)
    return {a: math.comb(kept - a - 1, spans - 2) / ways for a in range(1, kept - spans + 2)}


def pooled(counts: dict, law: dict, n: int, least: float = 5.0) -> tuple[dict, dict]:
    """Cells in order, the tail pooled so that every expected count is at least `least`."""
    cells, obs, exp = sorted(law), {}, {}
    cut = next(i for i in range(len(cells)) if n * sum(law[c] for c in cells[i:]) < 2 * least)
    for i, c in enumerate(cells):
        key = min(i, cut)
        obs[key] = obs.get(key, 0) + counts.get(c, 0)
        exp[key] = exp.get(key, 0.0) + law[c]
    return obs, exp


def test_first_span_start_at_t5_settings():
    length, n = 568, 6_000  # T5's 512-token inputs: 85 noise tokens in 28 spans
    law = first_start_law(length, 0.15, 3.0)
    for name, masks in (("kernel", kernel_masks(n, length, 0.15, 3.0, seed=9)),
                        ("reference", reference_masks(n, length, 0.15, 3.0, seed=9))):
        first = np.argmax(masks, axis=1)
        obs, exp = pooled(counts_of(first.tolist()), law, n)
        stat, df = chi2_goodness(obs, exp, n)
        assert stat < chi2_cutoff(df), f"{name}: chi-square {stat:.1f} >= {chi2_cutoff(df):.1f} ({df} df)"
        assert masks[:, -1].all() and not masks[:, 0].any()  # unrolled: kept first, noise last


# ---------------------------------------------------------------------------- the random roll


def rolled_law(length: int, density: float, mean: float) -> dict:
    """The exact law of rolled masks: every composition of the reference, every offset, documented_roll."""
    law: dict = {}
    for parts, p in composition_law(length, density, mean).items():
        mask = np.repeat(np.arange(len(parts)) % 2 == 1, parts)
        for offset in range(length):
            key = tuple(documented_roll(mask, offset).tolist())
            law[key] = law.get(key, 0.0) + p / length
    return law


def test_random_roll_masks_follow_the_documented_law():
    length, density, mean = 12, 0.5, 3.0  # 2 spans: 25 compositions x 12 offsets -> 156 distinct masks
    law = rolled_law(length, density, mean)
    n = 200 * len(law)
    masks = kernel_masks(n, length, density, mean, seed=4, random_roll=True)
    stat, df = chi2_goodness(mask_counts(masks), law, n)
    assert stat < chi2_cutoff(df), f"chi-square {stat:.1f} >= {chi2_cutoff(df):.1f} ({df} df)"


def test_random_roll_noise_rate_per_position():
    """Every position's noise rate against the documented law (exact, by enumeration); the edges at the
    values docs/format.md states: the first position at the density, the last at spans / length."""
    length, density, mean = 20, 0.3, 2.0  # 6 noise tokens in 3 spans
    noise, spans = noise_counts(length, density, mean)
    law = rolled_law(length, density, mean)
    exact = sum(np.array(mask, dtype=float) * p for mask, p in law.items())
    assert exact[0] == pytest.approx(noise / length) and exact[-1] == pytest.approx(spans / length)
    n = 40_000
    rate = kernel_masks(n, length, density, mean, seed=5, random_roll=True).mean(axis=0)
    z = (rate - exact) / np.sqrt(exact * (1 - exact) / n)
    assert np.abs(z).max() < 4.5, f"positions {np.flatnonzero(np.abs(z) >= 4.5).tolist()}: z = {z.round(1).tolist()}"
    # T5's settings: interior positions at the density, the last token at spans / length (not T5's 15%)
    length, n = 568, 4_000
    noise, spans = noise_counts(length, 0.15, 3.0)
    rate = kernel_masks(n, length, 0.15, 3.0, seed=6, random_roll=True).mean(axis=0)
    interior = rate[40:-40].mean()  # 488 positions x 4,000 rows, correlated within a row: se ~0.0015
    assert abs(interior - noise / length) < 0.006
    assert abs(rate[0] - noise / length) < 4.0 * math.sqrt(0.15 * 0.85 / n)
    assert abs(rate[-1] - spans / length) < 4.0 * math.sqrt(0.05 * 0.95 / n)


# ---------------------------------------------------------------------------- BERT-style MLM

VOCAB, MASK = 50, 3
SPECIAL = np.array([0, 1, 2, 3], dtype=np.int32)


def test_mlm_per_position_rate_and_80_10_10():
    """Rows of 40 tokens with specials at fixed places: each of the 35 maskable positions is chosen with
    probability m / 35 (m = round(0.15 * 35) = 5), specials never; the chosen become <mask> 80%, a uniform
    random non-special id 10% (which may be the original), stay 10%."""
    n, length = 20_000, 40
    rng = np.random.default_rng(0)
    values = rng.integers(4, VOCAB, size=(n, length)).astype(np.int32)
    special_at = [0, 7, 8, 20, 39]
    values[:, special_at] = rng.choice(SPECIAL, size=(n, len(special_at)))
    inputs, labels = mlm_mask(values.ravel(), np.arange(n + 1) * length, seed=1, first_row=0, probability=0.15,
                              mask_id=MASK, special_ids=SPECIAL, vocab_size=VOCAB)
    inputs, labels = inputs.reshape(n, length), labels.reshape(n, length)
    chosen = labels != IGNORE
    assert not chosen[:, special_at].any() and (chosen.sum(axis=1) == 5).all()

    maskable = np.setdiff1d(np.arange(length), special_at)
    p = 5 / maskable.size
    counts = chosen[:, maskable].sum(axis=0)
    # counts of positions drawn without replacement: sum (c - np)^2 / (np(1-p)) * (k-1)/k ~ chi-square(k - 1)
    k = maskable.size
    stat = ((counts - n * p) ** 2).sum() / (n * p * (1 - p)) * (k - 1) / k
    assert stat < chi2_cutoff(k - 1), f"per-position chi-square {stat:.1f}"

    normal = VOCAB - SPECIAL.size
    original, got = values[chosen], inputs[chosen]
    law = {"mask": 0.8, "same": 0.1 + 0.1 / normal, "other": 0.1 * (normal - 1) / normal}
    kinds = np.where(got == MASK, "mask", np.where(got == original, "same", "other"))
    stat, df = chi2_goodness(counts_of(kinds.tolist()), law, got.size)
    assert stat < chi2_cutoff(df), f"80/10/10 chi-square {stat:.1f}"

    replaced = got[(got != MASK) & (got != original)]
    assert not np.isin(replaced, SPECIAL).any()
    per_id = np.bincount(replaced, minlength=VOCAB)[4:]
    # each id is drawn with 1/46, minus the draws equal to the original: nearly uniform over the 46 ids
    stat, df = chi2_goodness(dict(enumerate(per_id.tolist())), {i: 1 / normal for i in range(normal)}, replaced.size)
    assert stat < chi2_cutoff(df), f"replacement ids chi-square {stat:.1f}"
