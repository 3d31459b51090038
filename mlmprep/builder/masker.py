"""Masking a task's rows for the build's objective into one part of a split, with the totals the manifest
reports (summed over tasks in task order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlmprep.builder import mask
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

    def __init__(self, cfg: BuildConfig, ids, tables, fixed: bool, window_length: int, version: int):
        self.cfg, self.ids, self.tables = cfg, ids, tables
        self.dtypes = column_dtypes(version, cfg.objective, ids.vocab_size)
        if cfg.objective == "span":
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

    def merge(self, totals: dict[str, dict[str, float]]) -> None:
        """Add another masker's totals (a task's), in task order so the sums do not depend on scheduling."""
        for split, t in totals.items():
            mine = self.totals.setdefault(split, {"rows": 0, "tokens": 0, "noise": 0.0, "spans": 0.0, "masked": 0.0})
            for key, value in t.items():
                mine[key] += value

    def summary(self) -> dict[str, dict[str, float]]:
        out = {}
        for split, t in self.totals.items():
            if self.cfg.objective == "span":
                out[split] = {
                    "rows": t["rows"],
                    "noise_fraction": t["noise"] / t["tokens"],
                    "mean_span_length": t["noise"] / t["spans"] if t["spans"] else 0.0,
                    "spans_per_row": t["spans"] / t["rows"],
                }
            else:
                out[split] = {"rows": t["rows"], "masked_fraction": t["masked"] / t["tokens"]}
        return out
