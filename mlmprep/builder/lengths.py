"""The row geometry of a build (window, target, the MLM frame, rows per output file), derived once from the
options and the tokenizer and handed to every stage that needs it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mlmprep.builder import mask
from mlmprep.builder.denoisers import Mixture
from mlmprep.builder.windows import MIN_ROW
from mlmprep.config import BuildConfig
from mlmprep.errors import ConfigError, TokenizerError
from mlmprep.tokenizer.load import frame_ids

FILE_TOKENS = 1 << 19  # an output file holds about this many tokens of windows (a whole number of 1000s of rows)


def window_and_target(objective: str, input_length: int, noise_density: float,
                      mean_span_length: float, mixture: Mixture | None = None) -> tuple[int, int]:
    """(window length before masking, label length) the options give: exact for token windows, maxima for
    ragged rows. MLM and MDLM mask in place (both are --input-length); span corruption sizes its windows so the
    corrupted input is --input-length (mask.compute_input_and_target_lengths); ul2 and prefix store the stream in
    windows of --input-length tokens, each seed cutting its own rows from it, whose longest label is the target."""
    if objective == "span":
        return mask.compute_input_and_target_lengths(input_length, noise_density, mean_span_length)
    if mixture is not None:
        return input_length, mixture.longest_target
    return input_length, input_length


@dataclass(frozen=True)
class Lengths:
    """A build's row lengths: `window` tokens per window as masked (frame included), `target` label tokens,
    `prefix`/`suffix` the MLM frame around every row, `doc_eos` the token that ends each document in the
    windows (None: --pack doc rows end themselves), `rows_per_file` windows per output file."""

    window: int
    target: int
    rows_per_file: int
    prefix: tuple[int, ...] = ()
    suffix: tuple[int, ...] = ()
    doc_eos: int | None = None
    modes: tuple[int, ...] = ()  # ul2: each denoiser's mode token id (-1: none)

    @property
    def content(self) -> int:
        """Tokens of text per window, inside the frame."""
        return self.window - len(self.prefix) - len(self.suffix)

    @classmethod
    def of_options(cls, cfg: BuildConfig) -> Lengths:
        """The lengths the options alone give, checked before any work: exact span-corruption token windows
        must reach --input-length exactly."""
        mixture = Mixture.of(cfg.objective, cfg.denoisers, cfg.denoiser_weights, cfg.input_length) if (
            cfg.objective in ("ul2", "prefix")) else None
        window, target = window_and_target(cfg.objective, cfg.input_length, cfg.noise_density, cfg.mean_span_length,
                                           mixture)
        if cfg.objective == "span" and cfg.method == "tokens" and cfg.pack == "stream":  # rows exactly input_length
            mask.check_input_length_reached(cfg.input_length, window, cfg.noise_density, cfg.mean_span_length)
        return cls(window, target, cfg.rows_per_file or 1000 * max(1, FILE_TOKENS // (window * 1000)))

    def with_tokenizer(self, cfg: BuildConfig, tok, ids) -> Lengths:
        """These lengths with the tokenizer's part: its MLM frame and document end, checked against what the
        objective needs of it (a mask token; sentinels enough for the longest window)."""
        if cfg.objective in ("mlm", "mdlm"):
            if ids.mask is None:
                raise TokenizerError(f"--objective {cfg.objective} needs a <mask> or [MASK] token in the tokenizer")
        elif cfg.objective == "span":
            mask.check_span_settings(self.window, cfg.noise_density, cfg.mean_span_length, len(ids.sentinels))
        elif cfg.objective == "ul2":
            check_denoiser_sentinels(Mixture.of(cfg.objective, cfg.denoisers, cfg.denoiser_weights,
                                                cfg.input_length), len(ids.sentinels))
        prefix, suffix = mlm_frame(cfg, tok, self.window)
        return dataclasses.replace(self, prefix=tuple(prefix.tolist()), suffix=tuple(suffix.tolist()),
                                   doc_eos=document_eos(cfg, ids, suffix), modes=mode_ids(cfg, tok))


def mlm_frame(cfg: BuildConfig, tok, window_length: int) -> tuple[np.ndarray, np.ndarray]:
    """(prefix, suffix) around every row: for MLM the tokenizer's own frame of one sequence ([CLS] … [SEP]),
    counted inside --input-length; none for span corruption, whose kernel ends each row with </s>."""
    empty = np.zeros(0, dtype=np.int32)
    if cfg.objective not in ("mlm", "mdlm"):
        return empty, empty
    prefix, suffix = frame_ids(tok)
    if window_length - len(prefix) - len(suffix) < MIN_ROW:
        raise ConfigError(f"--input-length {cfg.input_length} leaves no room for text inside the tokenizer's "
                          f"{len(prefix) + len(suffix)} frame tokens; raise it")
    return prefix, suffix


def document_eos(cfg: BuildConfig, ids, suffix: np.ndarray) -> int | None:
    """The token that ends each document in the windows: EOS, except with --pack doc where the row's own end
    marks it (span corruption's </s>, an MLM frame's [SEP]), so the end of a document is never masked as text."""
    if cfg.pack == "doc" and (cfg.objective == "span" or len(suffix)):
        return None
    return ids.eos


def check_denoiser_sentinels(mixture: Mixture, n_sentinels: int) -> None:
    """Fail before any work if a span denoiser's rows need more noise spans than the tokenizer has sentinels."""
    for denoiser, raw in zip(mixture.denoisers, mixture.raw):
        if denoiser.kind != "span":
            continue
        spans = int(mask.span_counts([raw], denoiser.noise_density, denoiser.mean_span_length, exact_t5=True)[1][0])
        if spans > n_sentinels:
            raise ConfigError(f"denoiser {denoiser.name}: rows of {raw} tokens need {spans} noise spans but the "
                              f"tokenizer has {n_sentinels} sentinels; leave out --tokenizer (a ul2 build trains one "
                              f"with the sentinels it needs), lower --input-length or drop {denoiser.name}")


def mode_ids(cfg: BuildConfig, tok) -> tuple[int, ...]:
    """Each denoiser's mode token id in `tok` (-1: it has none, as the prefix objective's), for ul2 and prefix."""
    if cfg.objective not in ("ul2", "prefix"):
        return ()
    mixture = Mixture.of(cfg.objective, cfg.denoisers, cfg.denoiser_weights, cfg.input_length)
    out = []
    for d in mixture.denoisers:
        idx = tok.token_to_id(d.mode) if d.mode else -1
        if idx is None:
            raise TokenizerError(f"the tokenizer has no {d.mode} token, the mode token of denoiser {d.name}")
        out.append(idx)
    return tuple(out)
