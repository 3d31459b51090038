"""Masking a task's rows for the build's objective into one part of a split, with the totals the manifest
reports (summed over tasks in task order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlmprep.builder import mask
from mlmprep.builder.denoisers import Mixture
from mlmprep.config import BuildConfig
from mlmprep.format.rows import Rows
from mlmprep.format.write import column_dtypes, part_path, write_part


def mask_part(masker: Masker, split_dir: Path, index: int, rows: Rows, seed: int, first_row: int,
              split: str) -> dict | None:
    """Mask `rows` (numbered from `first_row` in their split) and write them as part `index` of `split_dir`."""
    if len(rows) == 0:
        return None
    masked = masker(rows, seed=seed, first_row=first_row, split=split)
    return write_part(part_path(split_dir, index), masker.widths, masker.dtypes, masked)


class Masker:
    """Masks rows for one objective, says how its columns are stored (`widths`, `dtypes`: those of format
    `version`) and keeps running totals of what it produced."""

    def __init__(self, cfg: BuildConfig, ids, tables, fixed: bool, window_length: int, version: int,
                 modes: tuple[int, ...] = ()):
        self.cfg, self.ids, self.tables = cfg, ids, tables
        self.dtypes = column_dtypes(version, cfg.objective, ids.vocab_size)
        self.mixture = Mixture.of(cfg.objective, cfg.denoisers, cfg.denoiser_weights, cfg.input_length) if (
            cfg.objective in ("ul2", "prefix")) else None
        self.modes = np.asarray(modes, dtype=np.int32)
        if self.mixture is not None:  # rows of their own lengths, the stream's last one shorter
            self.widths = {"input_ids": None, "labels": None, "denoiser": 0}
        elif cfg.objective == "mdlm":
            self.widths = {"input_ids": window_length if fixed else None, "labels": window_length if fixed else None,
                           "rate": 0}
        elif cfg.objective == "span":
            enc, lab = mask.corrupted_lengths(np.array([window_length]), cfg.noise_density, cfg.mean_span_length)
            self.widths = ({"input_ids": int(enc[0]), "labels": int(lab[0])} if fixed
                           else {"input_ids": None, "labels": None})
        else:
            self.widths = {"input_ids": window_length if fixed else None, "labels": window_length if fixed else None}
        self.totals: dict[str, dict[str, float]] = {}

    def __call__(self, rows: Rows, *, seed: int, first_row: int, split: str) -> dict[str, Rows]:
        cfg = self.cfg
        if cfg.objective == "span":
            out = mask.span_corrupt(
                rows.values, rows.offsets, seed=seed, first_row=first_row, noise_density=cfg.noise_density,
                mean_span_length=cfg.mean_span_length, sentinels=self.ids.sentinels, eos_id=self.ids.eos,
                random_roll=cfg.random_roll,
            )
            stats = mask.span_stats(out.label_values, out.label_offsets, out.enc_offsets, self.ids.sentinels)
            result = {"input_ids": Rows(out.enc_values, out.enc_offsets),
                      "labels": Rows(out.label_values, out.label_offsets)}
        elif self.mixture is not None:
            return self.denoise(rows, seed=seed, first_row=first_row, split=split)
        elif cfg.objective == "mdlm":
            inputs, labels, rates = mask.mdlm_mask(
                rows.values, rows.offsets, seed=seed, first_row=first_row, mask_id=self.ids.mask,
                special_ids=self.ids.all(), vocab_size=self.ids.vocab_size)
            stats = {**mask.mlm_stats(labels, rows.offsets),
                     **{f"rate_{k}": float(n) for k, n in enumerate(np.histogram(rates, RATE_BINS, (0.0, 1.0))[0])}}
            result = {"input_ids": Rows(inputs, rows.offsets), "labels": Rows(labels, rows.offsets),
                      "rate": Rows(rates, np.arange(len(rates) + 1, dtype=np.int64))}
        else:
            inputs, labels = mask.mlm_mask(
                rows.values, rows.offsets, seed=seed, first_row=first_row, probability=cfg.mlm_probability,
                mask_id=self.ids.mask, special_ids=self.ids.all(), vocab_size=self.ids.vocab_size,
                word_starts=self.tables.starts_word if cfg.whole_word else None,
            )
            stats = mask.mlm_stats(labels, rows.offsets)
            result = {"input_ids": Rows(inputs, rows.offsets), "labels": Rows(labels, rows.offsets)}
        self.add(split, stats, tokens=int(rows.offsets[-1]))
        return result

    def denoise(self, rows: Rows, *, seed: int, first_row: int, split: str) -> dict[str, Rows]:
        """ul2 and prefix: each row by the denoiser its seed drew for it (denoisers.Mixture.plan), counted per
        denoiser."""
        mixture, ids = self.mixture, self.ids
        lengths = rows.lengths()
        which, _ = mixture.plan(seed, first_row, len(rows))
        out = mask.denoise(rows.values, rows.offsets, seed=seed, first_row=first_row, which=which,
                           prefix=mixture.prefix_lengths(which, lengths), denoisers=mixture.denoisers,
                           mode_ids=self.modes if self.modes.size else np.full(len(mixture.denoisers), -1),
                           sentinels=ids.sentinels, eos_id=ids.eos)
        enc, dec = np.diff(out.enc_offsets), np.diff(out.label_offsets)
        mode = (self.modes[which] >= 0).astype(np.int64) if self.modes.size else np.zeros(len(rows), np.int64)
        is_prefix = np.array([d.kind == "prefix" for d in mixture.denoisers])[which]
        # labels: noise + spans + EOS; encoder: mode + kept + spans + EOS (prefix rows: no spans)
        noise = np.where(is_prefix, dec - 1, (mode + lengths - enc + dec) // 2)
        spans = np.where(is_prefix, 0, dec - noise - 1)
        t = self.totals.setdefault(split, {})
        for d, denoiser in enumerate(mixture.denoisers):
            at = which == d
            for key, values in (("rows", at), ("tokens", lengths), ("noise", noise), ("spans", spans),
                                ("encoder", enc), ("decoder", dec)):
                t[f"{denoiser.name}/{key}"] = t.get(f"{denoiser.name}/{key}", 0) + int(values[at].sum())
        return {"input_ids": Rows(out.enc_values, out.enc_offsets), "labels": Rows(out.label_values, out.label_offsets),
                "denoiser": Rows(which, np.arange(len(rows) + 1, dtype=np.int64))}

    def add(self, split: str, stats: dict[str, float], tokens: int) -> None:
        """Accumulate rows/tokens-weighted sums so the split's statistics are exact, not chunk means."""
        rows = stats.get("rows", 0)
        if not rows:
            return
        t = self.totals.setdefault(split, {"rows": 0, "tokens": 0, "noise": 0.0, "spans": 0.0, "masked": 0.0})
        t["rows"] += rows
        t["tokens"] += tokens
        if "noise_fraction" in stats:
            t["noise"] += stats["noise_fraction"] * tokens
            t["spans"] += stats["spans_per_row"] * rows
        else:
            t["masked"] += stats["masked_fraction"] * tokens
        for key in (k for k in stats if k.startswith("rate_")):
            t[key] = t.get(key, 0) + stats[key]

    def merge(self, totals: dict[str, dict[str, float]]) -> None:
        """Add another masker's totals (a task's), in task order so the sums do not depend on scheduling."""
        for split, t in totals.items():
            mine = self.totals.setdefault(split, {} if self.mixture is not None else
                                          {"rows": 0, "tokens": 0, "noise": 0.0, "spans": 0.0, "masked": 0.0})
            for key, value in t.items():
                mine[key] = mine.get(key, 0) + value

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for split, t in self.totals.items():
            if self.mixture is not None:
                out[split] = denoiser_summary(t, self.mixture)
            elif self.cfg.objective == "span":
                out[split] = {
                    "rows": t["rows"],
                    "noise_fraction": t["noise"] / t["tokens"],
                    "mean_span_length": t["noise"] / t["spans"] if t["spans"] else 0.0,
                    "spans_per_row": t["spans"] / t["rows"],
                }
            else:
                out[split] = {"rows": t["rows"], "masked_fraction": t["masked"] / t["tokens"],
                              **{key: value for key, value in t.items() if key.startswith("rate_")}}
        return out


RATE_BINS = 10  # mdlm: the rate histogram's buckets over [0, 1] (statistics.masking's rate_0 ... rate_9)


def denoiser_summary(t: dict[str, float], mixture: Mixture) -> dict[str, float]:
    """A ul2 or prefix split's statistics from its per-denoiser sums: rows, and per denoiser NAME its rows, raw
    tokens, share of rows, noise fraction (target tokens over row tokens), mean span length and mean encoder and
    decoder lengths."""
    rows = sum(t.get(f"{d.name}/rows", 0) for d in mixture.denoisers)
    out = {"rows": rows}
    for d in mixture.denoisers:
        n, tokens = t.get(f"{d.name}/rows", 0), t.get(f"{d.name}/tokens", 0)
        noise, spans = t.get(f"{d.name}/noise", 0), t.get(f"{d.name}/spans", 0)
        out[f"{d.name}/rows"] = n
        out[f"{d.name}/tokens"] = tokens
        out[f"{d.name}/share"] = n / rows if rows else 0.0
        out[f"{d.name}/noise_fraction"] = noise / tokens if tokens else 0.0
        out[f"{d.name}/mean_span_length"] = noise / spans if spans else 0.0
        out[f"{d.name}/encoder_length"] = t.get(f"{d.name}/encoder", 0) / n if n else 0.0
        out[f"{d.name}/decoder_length"] = t.get(f"{d.name}/decoder", 0) / n if n else 0.0
    return out
