"""How the trainer keeps a GPU busy: TF32 matmuls, torch.compile of the model and the loss,
fused AdamW, and microbatches collated one ahead in a thread into pinned memory, so the copy to the device
is asynchronous and the host never waits for the device inside a step's microbatch loop.

Compiling is per input shape (dynamic=False): exact windows give one shape; ragged widths give one graph
per (rows, width) met, which `--pad-to-multiple-of` keeps few. The log says when a new shape compiles.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from mlmprep.progress import prefetch_map
from mlmprep.train.collate import Collator

RECOMPILE_LIMIT = 64  # graphs per compiled function before dynamo falls back to eager
BACKEND = "inductor"  # tests set "aot_eager": the same tracing and autograd graphs, without code generation


def setup_device(device: torch.device) -> None:
    """TF32 for float32 matmuls and convolutions on CUDA (what bf16 autocast leaves in float32), and no cuDNN
    attention: on an H100 (torch 2.11, bf16, T5's learned position bias as the attention mask) its backward
    gave NaN gradients for whole microbatches now and then (loss finite), while float32 and HF's eager
    attention stayed finite on the same weights and rows; with it off the same runs met none."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.enable_cudnn_sdp(False)


@contextmanager
def deterministic_kernels(on: bool) -> Iterator[None]:
    """--deterministic: deterministic CUDA kernels (cuBLAS's fixed workspace, inductor's deterministic mode, no
    atomic-add reductions), so a rerun or a resume on a GPU gives the same bits; on the CPU our runs already
    do. The previous settings are restored on exit."""
    if not on:
        yield
        return
    import torch._inductor.config as inductor

    before = (torch.are_deterministic_algorithms_enabled(), os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
              getattr(inductor, "deterministic", None))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    if before[2] is not None:
        inductor.deterministic = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        if before[1] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        if before[2] is not None:
            inductor.deterministic = before[2]


DEFAULT_MAX_SHAPES = 16  # unset --compile compiles on CUDA only if an epoch's plan has at most this many shapes


def compile_wanted(option: bool | None, device: torch.device, shapes: int) -> bool:
    """--compile/--no-compile; unset: on for CUDA when the plan has few microbatch shapes (each compiles its
    own graph, tens of seconds each), off for CPU (a CPU compile costs more than it saves)."""
    if option is not None:
        return option
    return device.type == "cuda" and shapes <= DEFAULT_MAX_SHAPES


def plan_shapes(plan, enc_lengths: np.ndarray, dec_lengths: np.ndarray, rank: int, collator: Collator) -> int:
    """Distinct padded (rows, encoder width, decoder width) of this rank's microbatches in a plan, as
    `collator` pads them: the graphs a compiled step needs for the epoch."""
    def width(lengths: np.ndarray, cap: int | None) -> int:
        w = min(int(lengths.max()), cap or int(lengths.max()))
        return -(-w // collator.pad_to_multiple_of) * collator.pad_to_multiple_of

    return len({(len(mb.rows), width(enc_lengths[mb.rows], collator.max_encoder_len),
                 width(dec_lengths[mb.rows], collator.max_decoder_len)) for batch in plan for mb in batch.ranks[rank]})


def compile_model_and_loss(model, loss: Callable) -> Callable:
    """Compile `model` in place (its weights and state_dict keys stay as they are) and return the compiled
    `loss`; one graph per shape, with room for the shapes token-budget batches meet."""
    import torch._dynamo

    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, RECOMPILE_LIMIT)
    if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
        torch._dynamo.config.accumulated_cache_size_limit = max(torch._dynamo.config.accumulated_cache_size_limit,
                                                                RECOMPILE_LIMIT * 4)
    model.compile(dynamic=False, backend=BACKEND)
    return torch.compile(loss, dynamic=False, backend=BACKEND)


def shape_key(tensors: dict[str, torch.Tensor]) -> str:
    """The shapes a compiled forward specialises on, in words: "rows x encoder width (+ decoder width)"."""
    rows, width = tensors["input_ids"].shape
    dec = f" (+ {tensors['decoder_input_ids'].shape[1]} decoder)" if "decoder_input_ids" in tensors else ""
    return f"{rows} x {width}{dec}"


def adamw_options(device: torch.device) -> dict:
    """fused=True on CUDA: one kernel for the whole update instead of several per parameter group."""
    return {"fused": True} if device.type == "cuda" else {}


def pinned(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Page-locked copies, so `.to(cuda, non_blocking=True)` is a true asynchronous copy."""
    return {name: t.pin_memory() for name, t in tensors.items()}


def peak_memory_gb(device: torch.device) -> float | None:
    """Peak GPU memory allocated since the start (GB); None on CPU."""
    return torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else None


def real_lengths(tensors: dict[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """(encoder, decoder) real tokens per row of a collated microbatch (decoder: zeros for mlm)."""
    enc = tensors["attention_mask"].sum(1).numpy()
    dec = (tensors["labels"] != -100).sum(1).numpy() if "decoder_input_ids" in tensors else np.zeros_like(enc)
    return enc, dec


@dataclass
class Forward:
    """How a microbatch's summed loss is computed: eager, or compiled per shape (`shapes`: those compiled so
    far, so the log can say when a new one compiles); `flops(enc_lengths, dec_lengths)` counts model FLOPs."""

    loss: Callable
    compiled: bool = False
    flops: Callable | None = None
    shapes: set = field(default_factory=set)


def collate_ahead(collator: Collator, split, microbatches: list[tuple[np.ndarray, bool]], forward: Forward, pin: bool):
    """Each microbatch's (tensors, [real tokens, padded slots, rows, model FLOPs]), the next one collated in a
    thread (into pinned memory on CUDA) while the device runs this one; counted on the host, so no sync."""
    def work(item):
        tensors = collator.from_split(split, item[0])  # int64 [B, L] each, on the CPU
        enc, dec = real_lengths(tensors)
        slots = sum(tensors[k].numel() for k in ("input_ids", "decoder_input_ids") if k in tensors)
        counts = [enc.sum() + dec.sum(), slots, len(item[0]), forward.flops(enc, dec) if forward.flops else 0.0]
        return (pinned(tensors) if pin else tensors), np.array(counts, dtype=np.float64)

    return prefetch_map(work, microbatches, workers=1, depth=1)  # only the next one ahead
