"""UL2's mixture of denoisers and the prefix LM: the denoiser specs, each row's denoiser and raw length, and where
each seed's rows fall in the token stream.

A span denoiser `R3-0.15` (mean span 3, density 0.15) corrupts a row as T5 does (noise tokens round(L * r) clamped
to [1, L - 1], spans round(noise / mean) clamped to [1, L - noise], mask.span_counts with exact_t5); the S-denoiser
`S` (or `S-0.25`) is a prefix LM: the row's first part is the input, the rest the target, no sentinels. In a ul2
build every encoder input starts with its denoiser's mode token ([NLU] for R, [NLG] for X, [S2S] for S).

Rows are cut so that every encoder input is exactly --input-length tokens: a span denoiser's rows are its raw
length, the largest L whose corrupted input (mode + kept + sentinels + EOS) is --input-length; an S row's input is
its prefix of --input-length - 2 tokens (mode, EOS) and its target takes a share s of the row drawn uniformly from
(0, 2r) (UL2's S-denoiser at r = 0.25: mosaic's sequence_mask_ratios, T5's random_prefix_noise_mask), so its raw
length is the prefix plus round(prefix * s / (1 - s)) target tokens. Row r of a seed draws its denoiser (by the
weights) and its target share from hashes of (seed, r) alone, so a seed's row lengths are a sequence known before
any token is read, and its rows tile the token stream from the first token to the last: the last row takes what is
left (a shorter row), so no token is dropped or repeated, and each seed cuts its own rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from mlmprep.builder import mask
from mlmprep.builder.randomness import stream_key
from mlmprep.errors import ConfigError
from mlmprep.format.rows import starts_of

MODE_TOKENS = {"R": "[NLU]", "X": "[NLG]", "S": "[S2S]"}
PREFIX_RATIO = 0.25  # an S-denoiser's mean target share when its spec gives none (UL2's)
SPEC = re.compile(r"(?P<kind>[RX])(?P<mean>\d+(?:\.\d*)?)-(?P<density>\d*\.?\d+)|S(?:-(?P<ratio>\d*\.?\d+))?")
PLAN_TAG = np.uint64(0xD1CE_0F_D0_5EED_0001)  # keeps the denoiser draws apart from the masks' row streams
SHARE_TAG = np.uint64(0xD1CE_0F_D0_5EED_0002)  # ... and the S rows' target shares
CHUNK_ROWS = 1 << 16  # rows planned at a time when a cursor looks for where a seed's rows reach


@dataclass(frozen=True)
class Denoiser:
    """One denoiser: `kind` span or prefix, its mean span length (0 for prefix), noise density (prefix: the mean
    target share), its mode token ("" for --objective prefix) and its name as the spec spells it."""

    name: str
    kind: str
    mean_span_length: float
    noise_density: float
    mode: str

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "mean_span_length": self.mean_span_length,
                "noise_density": self.noise_density, "mode": self.mode}


def parse_denoisers(text: str) -> tuple[Denoiser, ...]:
    """The denoisers of --denoisers (comma-separated specs: R3-0.15, X64-0.5, S, S-0.25), each named once."""
    out = []
    for spec in (s.strip() for s in str(text).split(",")):
        match = SPEC.fullmatch(spec)
        if match is None:
            raise ConfigError(f"--denoisers: {spec!r} is not a denoiser; give R<mean>-<density> or X<mean>-<density> "
                              "(a span denoiser, e.g. R3-0.15, X64-0.5) or S or S-<ratio> (the prefix LM)")
        if match["kind"]:
            mean, density = float(match["mean"]), float(match["density"])
            if not (math.isfinite(mean) and mean >= 1) or not 0 < density < 1:
                raise ConfigError(f"--denoisers: {spec}: the mean span length must be >= 1 and the density in (0, 1)")
            out.append(Denoiser(spec, "span", mean, density, MODE_TOKENS[match["kind"]]))
        else:
            ratio = float(match["ratio"]) if match["ratio"] else PREFIX_RATIO
            if not 0 < ratio < 0.5:
                raise ConfigError(f"--denoisers: {spec}: the target share must be in (0, 0.5); UL2 uses S-0.25")
            out.append(Denoiser(spec, "prefix", 0.0, ratio, MODE_TOKENS["S"]))
    names = [d.name for d in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"--denoisers {text}: a denoiser is named twice; give each once and weigh it with "
                          "--denoiser-weights")
    return tuple(out)


def parse_weights(text: str | None, n: int) -> np.ndarray:
    """--denoiser-weights as shares of rows (float64, summing to 1); None: uniform."""
    if text is None:
        return np.full(n, 1.0 / n)
    try:
        weights = np.array([float(w) for w in str(text).split(",")], dtype=np.float64)
    except ValueError:
        raise ConfigError(f"--denoiser-weights {text}: not numbers; give one weight per denoiser, e.g. "
                          "1,1,1,1,1,1,2") from None
    if len(weights) != n or not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
        raise ConfigError(f"--denoiser-weights {text}: give {n} weights >= 0 (one per denoiser), not all 0")
    return weights / weights.sum()


def build_denoisers(objective: str, denoisers: str, weights: str | None) -> tuple[tuple[Denoiser, ...], np.ndarray]:
    """The denoisers and their row shares of a ul2 build (--denoisers, --denoiser-weights) or a prefix build (the
    S-denoiser alone, without a mode token)."""
    if objective == "prefix":
        return (Denoiser("S", "prefix", 0.0, PREFIX_RATIO, ""),), np.ones(1)
    found = parse_denoisers(denoisers)
    return found, parse_weights(weights, len(found))


def mode_tokens(objective: str, denoisers: str) -> list[str]:
    """The mode tokens a build's tokenizer needs: those of ul2's denoisers, each once, in UL2's order."""
    if objective != "ul2":
        return []
    used = {d.mode for d in parse_denoisers(denoisers)}
    return [token for token in MODE_TOKENS.values() if token in used]


def sentinels_needed(objective: str, denoisers: str, weights: str | None, input_length: int) -> int:
    """The <extra_id_k> sentinels a ul2 build's longest rows need (0 for the other objectives): at a density of
    0.5 and mean span 3, a third of the input is sentinels (127 at --input-length 512, more than T5's 100)."""
    if objective != "ul2":
        return 0
    mixture = Mixture.of(objective, denoisers, weights, input_length)
    return max((int(mask.span_counts([raw], d.noise_density, d.mean_span_length, exact_t5=True)[1][0])
                for d, raw in zip(mixture.denoisers, mixture.raw) if d.kind == "span"), default=0)


def add_mode_tokens(tok, tokens: list[str]) -> list[str]:
    """Add the mode tokens `tok` lacks as special tokens (never split, never learnt as text); the ones added."""
    from tokenizers import AddedToken

    missing = [t for t in tokens if tok.token_to_id(t) is None]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in missing])
    return missing


def raw_length(denoiser: Denoiser, input_length: int) -> int:
    """A span denoiser's raw row length: the largest L whose corrupted input is exactly `input_length` tokens
    (mode token included); a prefix denoiser's prefix. ConfigError when no L gives exactly input_length."""
    mode = 1 if denoiser.mode else 0
    if denoiser.kind == "prefix":
        if input_length - mode - 1 < 1:
            raise ConfigError(f"--input-length {input_length} leaves no prefix token for {denoiser.name}; raise it")
        return input_length - mode - 1
    lengths = np.arange(2, math.ceil((input_length + 2) / (1 - denoiser.noise_density)) + 4, dtype=np.int64)
    enc = mode + encoder_lengths(lengths, denoiser)
    hits = lengths[enc == input_length]
    if hits.size == 0:
        near = sorted({int(e) for e in enc[np.abs(enc - input_length) <= 2]} - {input_length})
        raise ConfigError(f"--input-length {input_length} cannot be met exactly by denoiser {denoiser.name}: its "
                          f"encoder inputs skip from one length to the next there; use --input-length "
                          f"{' or '.join(map(str, near)) or input_length + 1}")
    return int(hits.max())


def encoder_lengths(lengths: np.ndarray, denoiser: Denoiser) -> np.ndarray:
    """Encoder tokens of span-denoised rows of `lengths` tokens, the mode token not counted (kept + sentinels + EOS)."""
    noise, spans = mask.span_counts(lengths, denoiser.noise_density, denoiser.mean_span_length, exact_t5=True)
    return lengths - noise + spans + 1


def uniform(seed: int, tag: np.uint64, rows: np.ndarray) -> np.ndarray:
    """A uniform float64 in [0, 1) per row: the top 53 bits of the row's hash under (seed, tag)."""
    with np.errstate(over="ignore"):
        key = stream_key(np.uint64(seed) ^ tag, rows.astype(np.uint64))
    return (key >> np.uint64(11)).astype(np.float64) * 2.0**-53


@dataclass(frozen=True)
class Mixture:
    """The denoisers of a ul2 or prefix build with their row shares and lengths at --input-length."""

    denoisers: tuple[Denoiser, ...]
    weights: np.ndarray  # float64 [d], summing to 1
    input_length: int
    raw: np.ndarray  # int64 [d]: each denoiser's raw row length (span) or prefix length (prefix)

    @classmethod
    def of(cls, objective: str, denoisers: str, weights: str | None, input_length: int) -> Mixture:
        """The mixture of the options, checked: every span denoiser reaches input_length exactly."""
        found, shares = build_denoisers(objective, denoisers, weights)
        return cls(found, shares, input_length,
                   np.array([raw_length(d, input_length) for d in found], dtype=np.int64))

    def targets(self) -> np.ndarray:
        """Per denoiser the most target tokens a row of it holds (its noise tokens; an S row's target is at most
        prefix * 2r / (1 - 2r), rounded), int64 [d]."""
        out = []
        for d, raw in zip(self.denoisers, self.raw):
            if d.kind == "span":
                out.append(int(mask.span_counts([raw], d.noise_density, d.mean_span_length, exact_t5=True)[0][0]))
            else:
                out.append(max(1, math.ceil(raw * 2 * d.noise_density / (1 - 2 * d.noise_density))))
        return np.array(out, dtype=np.int64)

    @property
    def longest(self) -> int:
        """The longest row any denoiser cuts."""
        is_prefix = np.array([d.kind == "prefix" for d in self.denoisers])
        return int(np.max(self.raw + np.where(is_prefix, self.targets(), 0)))

    @property
    def longest_target(self) -> int:
        """The longest label row any denoiser writes (target tokens, sentinels and EOS)."""
        out = 0
        for d, raw, target in zip(self.denoisers, self.raw, self.targets()):
            spans = mask.span_counts([raw], d.noise_density, d.mean_span_length, exact_t5=True)[1][0] if (
                d.kind == "span") else 0
            out = max(out, int(target + spans) + 1)
        return out

    def plan(self, seed: int, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(denoiser index uint8, raw length int64) of rows first..first+count-1 of the seed, full length (the
        stream's last row may be cut shorter)."""
        rows = np.arange(first, first + count, dtype=np.int64)
        bounds = np.cumsum(self.weights)
        bounds[-1] = 1.0  # float sums: the last denoiser takes the top of [0, 1)
        which = np.searchsorted(bounds, uniform(seed, PLAN_TAG, rows), side="right").astype(np.uint8)
        lengths = self.raw[which]
        is_prefix = np.array([d.kind == "prefix" for d in self.denoisers])[which]
        if is_prefix.any():
            ratio = np.array([d.noise_density for d in self.denoisers])[which[is_prefix]]
            share = 2 * ratio * uniform(seed, SHARE_TAG, rows[is_prefix])  # [0, 2r): at least one target token
            lengths[is_prefix] += np.maximum(1, np.rint(lengths[is_prefix] * share / (1 - share)).astype(np.int64))
        return which, lengths

    def prefix_lengths(self, which: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The input part of each prefix row of `lengths` tokens (the denoiser's prefix, less when the row is the
        stream's short last row: then at most all but one token); 0 for span rows."""
        raw = self.raw[which]
        is_prefix = np.array([d.kind == "prefix" for d in self.denoisers])[which]
        return np.where(is_prefix, np.minimum(raw, lengths - 1), 0)


class Cursor:
    """Where a seed's rows start in a token stream: `first_at(x)` is (the first row starting at or after token x,
    its start), computed in order of x, a chunk of rows planned at a time."""

    def __init__(self, mixture: Mixture, seed: int):
        self.mixture, self.seed = mixture, seed
        self.row, self.start = 0, 0  # the first row starting at or after the last x asked, and its start
        self.asked = 0

    def first_at(self, x: int) -> tuple[int, int]:
        if x < self.asked:
            raise ValueError(f"positions must be asked in order: {x} < {self.asked}")
        self.asked = x
        while True:
            _, lengths = self.mixture.plan(self.seed, self.row, CHUNK_ROWS)
            starts = self.start + starts_of(lengths)
            k = int(np.searchsorted(starts, x, side="left"))
            if k <= CHUNK_ROWS:
                self.row, self.start = self.row + k, int(starts[k])
                return self.row, self.start
            self.row, self.start = self.row + CHUNK_ROWS, int(starts[-1])


@dataclass(frozen=True)
class SeedRows:
    """One seed's rows in one output file: rows first..first+count-1 of the seed, tokens [start, stop) of the side's
    stream (the last row of the stream may be cut short by its end)."""

    first: int
    count: int
    start: int
    stop: int


def seed_rows(cursor: Cursor, begin: int, end: int, total: int | None) -> SeedRows:
    """The rows of `cursor`'s seed that start in tokens [begin, end) of a stream of `total` tokens (None: not known
    yet, and end is before the end)."""
    first, start = cursor.first_at(begin)
    last, stop = cursor.first_at(end) if total is None or end < total else cursor.first_at(total)
    if total is not None and end >= total:
        stop = total
    return SeedRows(first, last - first, start, stop)


def row_offsets(mixture: Mixture, seed: int, rows: SeedRows) -> tuple[np.ndarray, np.ndarray]:
    """(denoiser index per row, offsets into tokens [rows.start, rows.stop)) of a SeedRows: the planned lengths,
    the last cut at the stop."""
    which, lengths = mixture.plan(seed, rows.first, rows.count)
    offsets = starts_of(lengths)
    offsets[-1] = min(offsets[-1], rows.stop - rows.start)
    return which, offsets
