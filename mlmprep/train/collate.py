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

from dataclasses import dataclass, field

import numpy as np
import torch
from numba import njit

from mlmprep.config import SEQ2SEQ
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format.load import OBJECTIVES, ROW_VALUES, Column, Split, locate
from mlmprep.format.rows import IGNORE, starts_of

NO_EXTRA, MASK, SHIFT = 0, 1, 2  # what _pad writes beside the padded rows


@njit(cache=True, nogil=True)
def _pad(files, offsets, chunks, rows, cap, multiple, fill, extra, start_id, pad_id, vocab, ignore_ok):
    """Rows `rows` of a column (its offsets and chunks, its files a typed list) as int64 [B, W], `fill` after each
    row's tokens; W is the longest row, at most `cap` (0: none), rounded up to `multiple`. A row longer than W keeps
    its first W - 1 tokens and its last. Beside it, int64 [B, W] for extra=MASK (the attention mask: 1 over each
    row's tokens), SHIFT (decoder inputs: each padded row shifted right after start_id, IGNORE as pad_id), or
    [0, 0] (NO_EXTRA). Then, with vocab > 0, the lowest row holding an id outside [0, vocab) (IGNORE allowed with
    ignore_ok) and that id, else (-1, 0). One call per column and microbatch, every slot written once; it releases
    the GIL, so the trainer collates the next microbatch in a thread while this one trains."""
    file, start, length = locate(offsets, chunks, rows)
    n = len(rows)
    width = 0
    for j in range(n):
        width = max(width, length[j])
    if cap > 0:
        width = min(width, cap)
    width = -(-width // multiple) * multiple
    out = np.empty((n, width), dtype=np.int64)
    beside = np.empty((n if extra != NO_EXTRA else 0, width if extra != NO_EXTRA else 0), dtype=np.int64)
    bad_row, bad_id = -1, 0
    for j in range(n):
        source = files[file[j]][start[j] : start[j] + length[j]]
        target = out[j]
        keep = min(len(source), width)
        for t in range(keep):
            target[t] = source[t]
        if len(source) > width:
            target[width - 1] = source[len(source) - 1]
        for t in range(keep, width):
            target[t] = fill
        if extra == MASK:
            for t in range(width):
                beside[j, t] = t < keep
        elif extra == SHIFT and width:
            beside[j, 0] = start_id
            for t in range(1, width):
                beside[j, t] = pad_id if target[t - 1] == IGNORE else target[t - 1]
        if vocab > 0 and bad_row < 0:
            for t in range(keep):
                if (target[t] < 0 or target[t] >= vocab) and not (ignore_ok and target[t] == IGNORE):
                    bad_row, bad_id = j, target[t]
                    break
    return out, beside, bad_row, bad_id


@njit(cache=True, nogil=True)
def _collate_rows(rows, enc_files, enc_offsets, enc_chunks, dec_files, dec_offsets, dec_chunks, enc_cap, dec_cap,
                  multiple, pad_id, start_id, seq2seq, vocab):
    """Both columns of a microbatch in one call (_pad of each): input_ids, attention_mask, labels, decoder inputs
    (seq2seq; else [0, 0]) and, with vocab > 0, the first row and id outside the vocabulary in input_ids, else in
    labels, or (-1, 0)."""
    input_ids, mask, row, value = _pad(enc_files, enc_offsets, enc_chunks, rows, enc_cap, multiple, pad_id, MASK, 0,
                                       0, vocab, False)
    labels, shifted, dec_row, dec_value = _pad(dec_files, dec_offsets, dec_chunks, rows, dec_cap, multiple, IGNORE,
                                               SHIFT if seq2seq else NO_EXTRA, start_id, pad_id, vocab, True)
    if row < 0:
        row, value = dec_row, dec_value
    return input_ids, mask, labels, shifted, row, value


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
    _settings: tuple = field(init=False, repr=False, compare=False)  # _collate_rows' arguments after the columns'

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
        seq2seq = self.objective in SEQ2SEQ
        object.__setattr__(self, "_settings", (
            self.max_encoder_len or 0, (self.max_decoder_len if seq2seq else self.max_encoder_len) or 0,
            self.pad_to_multiple_of, self.pad_id, self.decoder_start_id, seq2seq, self.vocab_size or 0))

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        """Collate example dicts with `input_ids` and `labels` (lists or arrays of ints), and an mdlm row's `rate` and a
        ul2 row's `denoiser`."""
        columns = []
        for name in ("input_ids", "labels"):
            rows = [np.asarray(ex[name], dtype=np.int32) for ex in examples]
            columns.append(Column(offsets=starts_of([len(row) for row in rows]),
                                  files=(np.concatenate(rows) if rows else np.zeros(0, np.int32),),
                                  chunks=np.zeros((1, 4), np.int64), dtype=np.dtype(np.int32)))
        if self.objective not in SEQ2SEQ and not np.array_equal(*(c.lengths() for c in columns)):
            bad = int(np.flatnonzero(columns[0].lengths() != columns[1].lengths())[0])
            raise ValueError(f"mlm row {bad}: {columns[0].lengths()[bad]} input_ids but {columns[1].lengths()[bad]} "
                             "labels; they must match")
        batch, bad = self._collate(np.arange(len(examples)), *columns)
        if bad is not None:
            raise ValueError(f"example {bad[0]}: token id {bad[1]} is outside the vocabulary of {self.vocab_size}")
        for name, dtype in ROW_VALUES.items():
            if examples and name in examples[0]:
                batch[name] = torch.from_numpy(np.array([ex[name] for ex in examples], dtype=dtype))
        return batch

    def from_split(self, split: Split, rows: np.ndarray) -> dict[str, torch.Tensor]:
        """Collate `rows` of a memory-mapped split, gathering tokens straight from the mapped files (an mlm split's
        columns have rows of equal lengths: open_split checks them), and an mdlm row's `rate`, which its loss
        weighs by. A ul2 row's `denoiser` is not made into a tensor: nothing on the device reads it, and the
        trainer groups losses by `split.denoiser[rows]`."""
        rows = np.asarray(rows, dtype=np.int64)
        batch, bad = self._collate(rows, split.input_ids, split.labels)
        if bad is not None:
            raise CacheError(
                f"{split.path}: row {rows[bad[0]]} holds token id {bad[1]}, outside the tokenizer's "
                f"{self.vocab_size} ids (a damaged data file); run mlmprep verify {split.path.parent}, then rebuild"
            )
        if split.rate is not None:
            batch["rate"] = torch.from_numpy(split.rate[rows])
        return batch

    def _collate(self, rows: np.ndarray, enc: Column, dec: Column) -> tuple[dict[str, torch.Tensor], tuple | None]:
        """Pad both columns' `rows`; the tensors and, with vocab_size, (row, id) of the first token outside
        [0, vocab_size) in input_ids, else in labels (IGNORE aside), or None."""
        input_ids, attention_mask, labels, decoder_input_ids, bad_row, bad_id = _collate_rows(
            rows, enc.buffers, enc.offsets, enc.chunks, dec.buffers, dec.offsets, dec.chunks, *self._settings)
        batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention_mask),
                 "labels": torch.from_numpy(labels)}
        if self.objective in SEQ2SEQ:
            batch["decoder_input_ids"] = torch.from_numpy(decoder_input_ids)
        return batch, None if bad_row < 0 else (bad_row, bad_id)


__all__ = ["Collator"]
