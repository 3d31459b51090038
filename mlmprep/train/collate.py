"""Collate: rows -> padded int64 tensors a T5 (span) or BERT-style (mlm) model takes as they are.

Rows are padded to the longest row of the batch, rounded up to `pad_to_multiple_of`, so a batch's shape
is the padded cost the planner budgeted. Optional hard caps truncate longer rows; a truncated row keeps
its first cap - 1 tokens and its last token, so inputs and targets still end in </s> as every row the
model saw did (CappedSeq2SeqCollator cuts plainly; a target without </s> teaches the model not to stop).
Under mlm the labels are cut the same way as input_ids, so they stay aligned position for position.

    span: input_ids [B, L_enc], attention_mask [B, L_enc], labels [B, L_dec] (-100 = padding),
          decoder_input_ids [B, L_dec] = labels shifted right after decoder_start_id, -100 -> pad_id
    mlm:  input_ids [B, L], attention_mask [B, L], labels [B, L] (-100 = not masked or padding)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from mlmprep.config import SEQ2SEQ
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format.load import OBJECTIVES, ROW_VALUES, Split
from mlmprep.format.rows import IGNORE


@njit(cache=True, nogil=True)
def _fill(buf, starts, lengths, out_rows, out):
    """Copy row j (buf[starts[j] : starts[j] + lengths[j]]) into out[out_rows[j]]; a row longer than
    out's width keeps its first width - 1 tokens and its last. out [B, W] int64 is pre-filled with padding.
    It releases the GIL: the trainer collates the next microbatch in a thread while this one trains."""
    width = out.shape[1]
    for j in range(len(starts)):
        r = out_rows[j]
        s = starts[j]
        n = lengths[j]
        keep = n if n <= width else width - 1
        for t in range(keep):
            out[r, t] = buf[s + t]
        if n > width:
            out[r, width - 1] = buf[s + n - 1]


@dataclass(frozen=True)
class Collator:
    """Pads rows from a Split (`from_split`, the fast path) or HF-style example dicts (`__call__`).

    max_encoder_len caps input_ids (and mlm labels); max_decoder_len caps span labels and is not used by mlm.
    Caps must be multiples of pad_to_multiple_of, so a padded batch never exceeds them. With vocab_size, a
    token id outside [0, vocab_size) is refused here, in one line, rather than in the model's embedding
    (an IndexError on the CPU, a device-side assert that ends the process on CUDA).
    """

    objective: str  # one of OBJECTIVES
    pad_id: int
    decoder_start_id: int
    max_encoder_len: int | None = None
    max_decoder_len: int | None = None
    pad_to_multiple_of: int = 1
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"--objective must be one of {', '.join(OBJECTIVES)}; got {self.objective!r}")
        if self.pad_to_multiple_of < 1:
            raise ConfigError(f"--pad-to-multiple-of must be >= 1, got {self.pad_to_multiple_of}")
        for option in ("max_encoder_len", "max_decoder_len"):
            cap = getattr(self, option)
            if cap is not None and (cap < 1 or cap % self.pad_to_multiple_of):
                raise ConfigError(
                    f"--{option.replace('_', '-')} {cap} must be a positive multiple of "
                    f"--pad-to-multiple-of {self.pad_to_multiple_of}"
                )

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Collate example dicts with `input_ids` and `labels` (lists or arrays of ints), and an mdlm row's `rate` and a
        ul2 row's `denoiser`."""
        columns = []
        for name in ("input_ids", "labels"):
            rows = [np.asarray(ex[name], dtype=np.int32) for ex in examples]
            lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
            buf = np.concatenate(rows) if rows else np.zeros(0, np.int32)
            starts = np.cumsum(lengths) - lengths
            columns.append([(buf, np.arange(len(rows)), starts, lengths)])
        batch = self._collate(len(examples), *columns)
        for name, dtype in ROW_VALUES.items():
            if examples and name in examples[0]:
                batch[name] = torch.from_numpy(np.array([ex[name] for ex in examples], dtype=dtype))
        if (bad := self._out_of_vocab(batch)) is not None:
            raise ValueError(f"example {bad[0]}: token id {bad[1]} is outside the vocabulary of {self.vocab_size}")
        return batch

    def from_split(self, split: Split, rows: np.ndarray) -> dict[str, torch.Tensor]:
        """Collate `rows` of a memory-mapped split, gathering tokens straight from the mapped files."""
        rows = np.asarray(rows, dtype=np.int64)
        batch = self._collate(len(rows), list(split.input_ids.by_file(rows)), list(split.labels.by_file(rows)))
        for name in ROW_VALUES:
            if (values := getattr(split, name)) is not None:
                batch[name] = torch.from_numpy(values[rows])
        if (bad := self._out_of_vocab(batch)) is not None:
            raise CacheError(
                f"{split.path}: row {rows[bad[0]]} holds token id {bad[1]}, outside the tokenizer's "
                f"{self.vocab_size} ids (a damaged data file); run mlmprep verify {split.path.parent}, then rebuild"
            )
        return batch

    def _out_of_vocab(self, batch: dict[str, torch.Tensor]) -> tuple[int, int] | None:
        """(row, id) of the first token outside [0, vocab_size) in input_ids or labels (IGNORE aside), or None."""
        if self.vocab_size is None:
            return None
        for name in ("input_ids", "labels"):
            ids = batch[name]
            bad = (ids >= self.vocab_size) | ((ids < 0) & (ids != IGNORE) if name == "labels" else ids < 0)
            if bool(bad.any()):
                row, col = (int(i[0]) for i in torch.nonzero(bad, as_tuple=True))
                return row, int(ids[row, col])
        return None

    def _collate(self, n: int, enc_parts: list, dec_parts: list) -> dict[str, torch.Tensor]:
        """Pad both columns; each part is (buffer in the stored type, output rows [k], starts [k], lengths [k])."""
        if self.objective not in SEQ2SEQ:
            enc_len, dec_len = _lengths(n, enc_parts), _lengths(n, dec_parts)
            if not np.array_equal(enc_len, dec_len):
                bad = int(np.flatnonzero(enc_len != dec_len)[0])
                raise ValueError(f"mlm row {bad}: {enc_len[bad]} input_ids but {dec_len[bad]} labels; they must match")
        input_ids, attention_mask = self._pad(n, enc_parts, self.pad_id, self.max_encoder_len)
        dec_cap = self.max_decoder_len if self.objective in SEQ2SEQ else self.max_encoder_len
        labels, _ = self._pad(n, dec_parts, IGNORE, dec_cap)
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
        if self.objective in SEQ2SEQ:
            decoder_input_ids = np.full_like(labels, self.decoder_start_id)  # [B, L_dec]
            decoder_input_ids[:, 1:] = labels[:, :-1]
            decoder_input_ids[decoder_input_ids == IGNORE] = self.pad_id
            batch["decoder_input_ids"] = decoder_input_ids
        return {k: torch.from_numpy(v) for k, v in batch.items()}

    def _pad(self, n: int, parts: list, fill: int, cap: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(padded int64 [B, W], attention mask int64 [B, W]); W = longest row, capped, rounded up."""
        lengths = _lengths(n, parts)
        width = int(lengths.max()) if n else 0
        if cap is not None:
            width = min(width, cap)
        width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        out = np.full((n, width), fill, dtype=np.int64)
        for buf, which, starts, part_lengths in parts:
            _fill(buf, starts, part_lengths, which, out)
        mask = (np.arange(width) < np.minimum(lengths, width)[:, None]).astype(np.int64)
        return out, mask


def _lengths(n: int, parts: list) -> np.ndarray:
    """Row lengths in output order, int64 [n]."""
    lengths = np.zeros(n, dtype=np.int64)
    for _, which, _, part_lengths in parts:
        lengths[which] = part_lengths
    return lengths


__all__ = ["Collator"]
