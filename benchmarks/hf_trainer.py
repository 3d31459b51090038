"""The usual way to pretrain T5 with Hugging Face, as the baseline of `benchmarks.train_step`: the `Trainer`
fed unmasked windows, masked on the fly in DataLoader workers by the collator of transformers'
examples/flax/language-modeling/run_t5_mlm_flax.py (FlaxDataCollatorForT5MLM), ported here to NumPy and
PyTorch tensors as it stands (its random_spans_noise_mask, create_sentinel_ids and filter_input_ids).

The windows are those of an mlmprep build, un-masked (`windows_of`), so both sides train on the same text.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch


def windows_of(input_ids: list[np.ndarray], labels: list[np.ndarray], sentinels: np.ndarray, eos: int) -> np.ndarray:
    """The windows span-corrupted rows were cut from: each sentinel of input_ids replaced by its span from
    the labels, the final </s> dropped. int64 [n, window] (the rows of a token-splitting build all have one length)."""
    is_sentinel = np.zeros(int(max(sentinels.max(), max(r.max() for r in input_ids))) + 1, dtype=bool)
    is_sentinel[sentinels] = True
    out = []
    for enc, dec in zip(input_ids, labels):
        starts = np.flatnonzero(is_sentinel[dec])
        spans = np.split(dec[:-1], starts[1:])  # [sentinel, tokens...] each; the last label is </s>
        pieces, k = [], 0
        for token in enc[:-1]:
            if is_sentinel[token]:
                pieces.extend(spans[k][1:])
                k += 1
            else:
                pieces.append(token)
        out.append(pieces)
    return np.asarray(out, dtype=np.int64)


def random_spans_noise_mask(length: int, noise_density: float, mean_noise_span_length: float) -> np.ndarray:
    """run_t5_mlm_flax.py's noise mask of one window (bool [length]), on NumPy's global RNG as there."""
    orig_length = length
    num_noise_tokens = int(np.round(length * noise_density))
    num_nonnoise_tokens = length - num_noise_tokens
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(min(num_noise_tokens, num_nonnoise_tokens) / mean_noise_span_length))
    num_noise_spans = max(num_noise_spans, 1)

    def random_segmentation(num_items: int, num_segments: int) -> np.ndarray:
        mask_indices = np.arange(num_items - 1) < (num_segments - 1)
        np.random.shuffle(mask_indices)
        first_in_segment = np.pad(mask_indices, [[1, 0]])
        segment_id = np.cumsum(first_in_segment)
        _, segment_length = np.unique(segment_id, return_counts=True)
        return segment_length

    noise_span_lengths = random_segmentation(num_noise_tokens, num_noise_spans)
    nonnoise_span_lengths = random_segmentation(num_nonnoise_tokens, num_noise_spans)
    interleaved_span_lengths = np.reshape(np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1),
                                          [num_noise_spans * 2])
    span_starts = np.cumsum(interleaved_span_lengths)[:-1]
    span_start_indicator = np.zeros((length,), dtype=np.int8)
    span_start_indicator[span_starts] = True
    span_num = np.cumsum(span_start_indicator)
    is_noise = np.equal(span_num % 2, 1)
    return is_noise[:orig_length]


@dataclass
class FlaxT5Collator:
    """FlaxDataCollatorForT5MLM, returning int64 torch tensors; sentinel k is `sentinels[k]` (the flax script
    assumes <extra_id_k> = len(tokenizer) - 1 - k, which is what mlmprep's tokenizers hold too)."""

    sentinels: np.ndarray
    eos: int
    pad: int
    decoder_start: int
    input_length: int
    target_length: int
    noise_density: float = 0.15
    mean_noise_span_length: float = 3.0

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        input_ids = np.stack([np.asarray(ex["input_ids"]) for ex in examples])
        batch_size, expanded_input_length = input_ids.shape
        mask_indices = np.asarray([random_spans_noise_mask(expanded_input_length, self.noise_density,
                                                           self.mean_noise_span_length) for _ in range(batch_size)])
        labels_mask = ~mask_indices
        inputs = self.filter_input_ids(input_ids, self.create_sentinel_ids(mask_indices.astype(np.int8)))
        labels = self.filter_input_ids(input_ids, self.create_sentinel_ids(labels_mask.astype(np.int8)))
        if inputs.shape[-1] != self.input_length or labels.shape[-1] != self.target_length:
            raise ValueError(f"masked lengths {inputs.shape[-1]}/{labels.shape[-1]}, expected "
                             f"{self.input_length}/{self.target_length}")
        decoder_input_ids = np.full_like(labels, self.decoder_start)  # shift_tokens_right
        decoder_input_ids[:, 1:] = labels[:, :-1]
        return {"input_ids": torch.from_numpy(inputs), "labels": torch.from_numpy(labels),
                "decoder_input_ids": torch.from_numpy(decoder_input_ids)}

    def create_sentinel_ids(self, mask_indices: np.ndarray) -> np.ndarray:
        start_indices = mask_indices - np.roll(mask_indices, 1, axis=-1) * mask_indices
        start_indices[:, 0] = mask_indices[:, 0]
        sentinel_ids = np.where(start_indices != 0, np.cumsum(start_indices, axis=-1), start_indices)
        sentinel_ids = np.where(sentinel_ids != 0, self.sentinels[np.maximum(sentinel_ids - 1, 0)], 0)
        sentinel_ids -= mask_indices - start_indices
        return sentinel_ids

    def filter_input_ids(self, input_ids: np.ndarray, sentinel_ids: np.ndarray) -> np.ndarray:
        batch_size = input_ids.shape[0]
        input_ids_full = np.where(sentinel_ids != 0, sentinel_ids, input_ids)
        input_ids = input_ids_full[input_ids_full >= 0].reshape((batch_size, -1))
        return np.concatenate([input_ids, np.full((batch_size, 1), self.eos, dtype=np.int64)], axis=-1)


class Windows(torch.utils.data.Dataset):
    def __init__(self, windows: np.ndarray):
        self.windows = windows

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.windows[i]}


def time_trainer(model, windows: np.ndarray, collator: FlaxT5Collator, *, rows_per_step: int, rows_per_microbatch: int,
                 steps: int, warmup: int, workers: int, bf16: bool, out: str) -> dict:
    """Train `model` with the HF Trainer for `steps` optimizer steps of `rows_per_step` windows (in
    microbatches of `rows_per_microbatch`); seconds per step after `warmup` steps, and peak GPU memory."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    cuda = torch.cuda.is_available()
    marks: list[float] = []

    class Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step in (warmup, steps):
                if cuda:
                    torch.cuda.synchronize()
                marks.append(time.perf_counter())

    args = TrainingArguments(
        output_dir=out, per_device_train_batch_size=rows_per_microbatch,
        gradient_accumulation_steps=rows_per_step // rows_per_microbatch, max_steps=steps, learning_rate=1e-3,
        lr_scheduler_type="constant", warmup_steps=0, bf16=bf16 and cuda, use_cpu=not cuda, save_strategy="no",
        report_to=[], logging_strategy="no", disable_tqdm=True, dataloader_num_workers=workers,
        dataloader_pin_memory=cuda, remove_unused_columns=False, seed=0,
    )
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    Trainer(model=model, args=args, train_dataset=Windows(windows), data_collator=collator, callbacks=[Clock()]).train()
    return {"seconds_per_step": (marks[1] - marks[0]) / (steps - warmup),
            "peak_memory_gb": torch.cuda.max_memory_allocated() / 1e9 if cuda else None}
