"""`mlmprep train`: pretrain T5 (span data) or a BERT-style model (mlm data) on a build. `run_fit` reads top to
bottom like nanoGPT's train.py and nanoT5's train(): check RUN and the data, set up (`start`), then loop over
`train_step` (one optimizer step) with `log_window`, `evaluate_and_log` and `save_checkpoint` each on its own
schedule, and write the final metrics. `TrainState` is the loop's position and totals (a checkpoint's
state.json), `Window` the counters of the next metrics line, `Run` what stays fixed for the whole run.

One optimizer step is one token-budget batch of the epoch's plan (mlmprep.train.batch); epoch e reads split
seed-{e % N}. Exact gradients: each microbatch's loss is its summed token cross-entropy divided by the
label tokens of the whole batch (all microbatches, all ranks), so the accumulated gradient is the gradient
of the batch's mean per-token loss, however the batch is cut. An out-of-memory error shrinks the
microbatch limits of the batch's length regime and retries the same batch (mlmprep.train.adapt).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from mlmprep.config import MAX_TOKENS, TrainConfig, source_spec
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format import cache as remote
from mlmprep.format.load import Split, check_split_files, epoch_split, open_split, read_manifest
from mlmprep.format.manifest import Manifest, TokenizerRecord
from mlmprep.format.publish import check_utf8_path
from mlmprep.format.rows import IGNORE
from mlmprep.format.write import manifest_path, strict, write_json
from mlmprep.progress import progress
from mlmprep.train import checkpoint, plots, reporters
from mlmprep.train.adapt import Adapter, Limits, regime_of
from mlmprep.train.batch import (
    Batch,
    Budget,
    padded_cost,
    plan_epoch,
    plan_stats,
    split_microbatches,
)
from mlmprep.train.collate import Collator
from mlmprep.train.mixture import Chunk, MixturePlan, open_mixture
from mlmprep.train.model import build_model, parameter_count
from mlmprep.train.numerics import Guard, flop_counter, grad_norm
from mlmprep.train.speed import (
    Forward,
    adamw_options,
    collate_ahead,
    compile_model_and_loss,
    compile_wanted,
    deterministic_kernels,
    peak_memory_gb,
    plan_shapes,
    setup_device,
    shape_key,
)

Hook = Callable[[int, int, np.ndarray, bool], None]  # (step, microbatch index, rows, padding) before each forward


# ----------------------------------------------------------------------------- world
@dataclass(frozen=True)
class World:
    rank: int
    size: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_world() -> World:
    """One process, or one rank of a torchrun launch (env://): gloo on CPU, nccl on CUDA."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    if size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://")
    return World(rank=dist.get_rank() if size > 1 else 0, size=size, device=device)


def wrap_ddp(model, world: World):
    """DistributedDataParallel without per-forward buffer syncs: the buffers (BERT's position ids) are
    constants, and a rank that re-cut its microbatches after an OOM runs a different number of forwards."""
    from torch.nn.parallel import DistributedDataParallel

    params = inspect.signature(DistributedDataParallel).parameters
    # newer torch renamed the option
    option = "forward_sync_buffers" if "forward_sync_buffers" in params else "broadcast_buffers"
    device_ids = [world.device.index] if world.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, **{option: False})


def all_sum(world: World, values: torch.Tensor) -> torch.Tensor:
    """Sum a float64 tensor over ranks (a no-op for one process)."""
    if world.size > 1:
        dist.all_reduce(values)
    return values


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def autocast(world: World, cfg: TrainConfig):
    """bfloat16 autocast on CUDA; CPU runs float32 (or whatever dtype the model has)."""
    if world.device.type == "cuda" and cfg.bf16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- loss
def logits_of(model, mb: dict[str, torch.Tensor]) -> torch.Tensor:
    """[B, L, V] logits over the label positions (decoder for T5, encoder for BERT)."""
    return model(**{k: v for k, v in mb.items() if k != "labels"}).logits


def summed_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over labels != -100. Autocast computes it in float32 on CUDA; on CPU it keeps
    the model's dtype (float64 in the exact-gradient test)."""
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="sum")


def make_forward(model, cfg: TrainConfig, world: World, objective: str, shapes: int = 1) -> Forward:
    """Compile the model in place (its weights and state_dict keys stay the same) and the loss, if wanted;
    `shapes`: the distinct microbatch shapes of the epoch's plan, one graph each."""
    on = compile_wanted(cfg.compile, world.device, shapes)
    if on or (cfg.compile is None and world.device.type == "cuda"):
        say(world, f"compiling the model: {shapes} microbatch shapes in the plan, one graph each" if on else
                   f"not compiling: the plan has {shapes} microbatch shapes, one graph each; bucket widths with "
                   "--pad-to-multiple-of (e.g. 64) or force it with --compile")
    loss = compile_model_and_loss(model, summed_loss) if on else summed_loss
    return Forward(loss=loss, compiled=on, flops=flop_counter(model, objective))


def accumulate(model, split, collator: Collator, microbatches: list[tuple[np.ndarray, bool]], n_targets: int, *,
               world: World, cfg: TrainConfig, step: int = 0, hook: Hook | None = None,
               forward: Forward | None = None, groups: np.ndarray | None = None,
               group_sums: torch.Tensor | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Forward/backward this rank's microbatches (rows, padding) of one batch whose ranks hold `n_targets`
    label tokens in all; returns (loss share, a float64 device scalar; [real tokens, padded slots, rows, FLOPs]).
    With `groups` (a mixture's source per row of `split`), each row's summed loss is added to group_sums[its source].

    DDP averages gradients over ranks, so the scale is world_size / n_targets; gradients synchronise on
    the last microbatch only. A padding microbatch runs with weight 0 so every rank's backward matches.
    Nothing here waits for the device: the loss stays on it.
    """
    forward = forward or Forward(loss=summed_loss)
    scale = world.size / n_targets if n_targets else 0.0  # no label token in the batch: no gradient (step skipped)
    loss, out = torch.zeros((), dtype=torch.float64, device=world.device), np.zeros(4)
    batches = collate_ahead(collator, split, microbatches, forward, pin=world.device.type == "cuda")
    for k, ((rows, padding), (tensors, counts)) in enumerate(zip(microbatches, batches)):
        last = k == len(microbatches) - 1
        if hook is not None:
            hook(step, k, rows, padding)
        mb = {name: t.to(world.device, non_blocking=True) for name, t in tensors.items()}
        if forward.compiled and shape_key(mb) not in forward.shapes:
            forward.shapes.add(shape_key(mb))
            say(world, f"step {step}: compiling for microbatches of {shape_key(mb)} tokens "
                       f"(shape {len(forward.shapes)})")
        sync = model.no_sync() if world.size > 1 and not last else contextlib.nullcontext()
        try:
            with sync:
                with autocast(world, cfg):
                    logits = logits_of(model, mb)
                    if groups is None:
                        loss_sum = forward.loss(logits, mb["labels"])
                    else:
                        per_row = row_losses(logits, mb["labels"])
                        loss_sum = per_row.sum()
                (loss_sum * (0.0 if padding else scale)).backward()
        except torch.OutOfMemoryError as exc:
            if world.size > 1 and last:  # gradient buckets may be half all-reduced: ranks cannot retry in step
                raise RuntimeError(
                    "out of memory in the gradient-synchronising microbatch under DDP, which cannot be retried; "
                    "lower --max-tokens-per-microbatch or --max-examples-per-microbatch"
                ) from exc
            raise
        if not padding:
            loss += loss_sum.detach()
            out += counts
            if groups is not None:
                group_sums.index_add_(0, torch.from_numpy(groups[rows]).to(world.device), per_row.detach().double())
    return loss / max(n_targets, 1), out


def row_losses(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy summed over each row's labels != -100, [B]: a mixture's loss per source."""
    per_token = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="none")
    return per_token.view(labels.shape).sum(1)


def checked(world: World, loss: torch.Tensor, norm: torch.Tensor) -> tuple[float, float, str]:
    """(loss, gradient norm, what is not finite: "" / "loss" / "grad_norm") with one host-device sync; under
    DDP a value that is bad on any rank is bad on all, so every rank skips the same steps."""
    values = torch.stack([loss.double(), norm.double()])
    flags = all_sum(world, (~torch.isfinite(values)).double())
    loss_v, norm_v, bad_loss, bad_norm = torch.cat([values, flags]).tolist()
    return loss_v, norm_v, "loss" if bad_loss else "grad_norm" if bad_norm else ""


# ----------------------------------------------------------------------------- plan
def user_limits(cfg: TrainConfig) -> Limits:
    return Limits(cfg.max_examples_per_microbatch, cfg.max_tokens_per_microbatch)


def make_budget(cfg: TrainConfig, limits: Limits | None = None) -> Budget:
    """The plan's budget, or with `limits` the tighter microbatch caps an OOM left in a regime."""
    limits = limits or user_limits(cfg)
    return Budget(cfg.max_tokens_per_batch, limits.tokens, limits.examples, alpha=cfg.alpha,
                  pad_to_multiple_of=cfg.pad_to_multiple_of)


def epoch_plan(cfg: TrainConfig, world: World, epoch: int, seeds: int | None = None, mix: MixturePlan | None = None,
               *, planning: bool = False, identity: str | None = None):
    """(split, batches) of an epoch: the same plan on every rank; `seeds`: see load.epoch_split. A mixture's
    epoch is its plan's chunk `epoch`. A DATA URL's split is fetched into the local cache first (`planning`: only
    its row lengths are needed). With `identity` the build must still be the one the run planned on."""
    if mix is not None:
        chunk = mix.chunk(epoch)
        return chunk.split, chunk.plan
    split = remote.open_epoch(cfg.data, epoch, seeds, planning=planning, identity=identity, rehash=cfg.rehash_data)
    if len(split) == 0:
        raise CacheError(f"{split.path}: no rows to train on; build from a larger corpus")
    return split, plan_epoch(split.enc_lengths, split.dec_lengths, make_budget(cfg), seed=cfg.seed, epoch=epoch,
                             world_size=world.size)


def planned_steps(cfg: TrainConfig, world: World, seeds: int, mix: MixturePlan | None = None) -> int:
    """The steps the run trains: --max-steps; or with --max-tokens the first step by which the planned rows hold
    that many real tokens (epochs follow one another past --epochs as needed); else --epochs' plans."""
    if cfg.max_steps:
        return cfg.max_steps
    if not cfg.max_tokens:
        return sum(len(epoch_plan(cfg, world, e, seeds, planning=True)[1]) for e in range(cfg.epochs))
    steps, tokens, epoch = 0, 0, 0
    while True:
        split, plan = epoch_plan(cfg, world, epoch, seeds, mix, planning=True)
        enc = np.minimum(split.enc_lengths, cfg.max_encoder_len or MAX_TOKENS)
        dec = np.minimum(split.dec_lengths, cfg.max_decoder_len or MAX_TOKENS)
        for batch in plan:
            rows = [mb.rows for rank in batch.ranks for mb in rank if not mb.padding]
            rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
            steps, tokens = steps + 1, tokens + int(enc[rows].sum() + dec[rows].sum())
            if tokens >= cfg.max_tokens:
                return steps
        epoch += 1


def resumed_seeds(cfg: TrainConfig, have: int, state: dict) -> int:
    """The number of seed splits a resumed run reads: those it started with (runs saved before this was
    recorded: the build's)."""
    started = state.get("seeds", have)
    if type(started) is not int or not 1 <= started <= have:
        raise CacheError(f"{cfg.data}: has {have} seed splits, but the run in {cfg.out} started with {started!r}; "
                         "resume it on the build it started with")
    return started


def say_seeds_added(cfg: TrainConfig, world: World, have: int, seeds: int) -> None:
    """Tell a resume that goes on training when a remask has added seed splits it will not read."""
    if seeds < have:
        say(world, f"{cfg.data}: has {have} seed splits now; this run goes on reading the {seeds} it started with "
                   f"(epoch e reads seed-{{e % {seeds}}}); a new run reads all {have}")


def check_same_data(cfg: TrainConfig, saved: dict, digest: str) -> None:
    """Refuse to resume on data other than the run's (runs saved before this was recorded are not checked)."""
    if saved.get("data", digest) != digest:
        raise CacheError(f"{cfg.data}: not the data the run in {cfg.out} trained on (its seed and validation files "
                         "differ); resume it with the build it started with, or start a new run with another --out")


def row_targets(split, collator: Collator) -> np.ndarray:
    """Label tokens per row as the collator presents them, int64 [n]: split.n_targets, unless caps cut rows."""
    if collator.max_encoder_len is None and collator.max_decoder_len is None:
        return split.n_targets
    chunks = np.array_split(np.arange(len(split)), max(1, len(split) // 4096))
    return np.concatenate([(collator.from_split(split, rows)["labels"] != IGNORE).sum(1).numpy() for rows in chunks])


def batch_targets(batch: Batch, targets: np.ndarray) -> int:
    """Label tokens of a whole batch, every rank's real microbatches: the loss denominator."""
    return int(sum(targets[mb.rows].sum() for rank in batch.ranks for mb in rank if not mb.padding))


def rank_microbatches(batch: Batch, rank: int, split, cfg: TrainConfig,
                      limits: Limits) -> list[tuple[np.ndarray, bool]]:
    """This rank's microbatches, each re-cut with `limits` if an OOM tightened them (padding ones stay). Each planned
    microbatch is cut on its own: pooling the rank's rows could merge rows of small planned microbatches into
    a piece larger than any that just ran out of memory (twice as large, after the example cap was halved)."""
    mine = batch.ranks[rank]
    if limits == user_limits(cfg):
        return [(mb.rows, mb.padding) for mb in mine]
    budget = make_budget(cfg, limits)
    cut = [part for mb in mine if not mb.padding
           for part in split_microbatches(mb.rows, split.enc_lengths, split.dec_lengths, budget)]
    return [(rows, False) for rows in cut] + [(mb.rows, True) for mb in mine if mb.padding]


# ----------------------------------------------------------------------------- optimizer and schedule
def make_optimizer(model, cfg: TrainConfig):
    """AdamW with weight decay on matrices only (as nanoGPT), or Adafactor driven by lr_at."""
    groups = [
        {"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0},
    ]
    if cfg.optimizer == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(groups, lr=cfg.lr, scale_parameter=False, relative_step=False, warmup_init=False)
    device = next(model.parameters()).device
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), **adamw_options(device))


def lr_at(step: int, cfg: TrainConfig, horizon: int) -> float:
    """Learning rate of optimizer step `step` (0-based): linear warmup to cfg.lr over warmup_steps, then
    cosine or linear decay to cfg.min_lr at step `horizon`, then min_lr; or T5's inverse square root,
    lr * sqrt(warmup_steps / (step + 1)) (as transformers' get_inverse_sqrt_schedule), floored at min_lr."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "inverse_sqrt":
        return max(cfg.min_lr, cfg.lr * math.sqrt(max(1, cfg.warmup_steps) / (step + 1)))
    done = min(1.0, (step - cfg.warmup_steps) / max(1, horizon - cfg.warmup_steps))
    coeff = 0.5 * (1.0 + math.cos(math.pi * done)) if cfg.schedule == "cosine" else 1.0 - done
    return cfg.min_lr + coeff * (cfg.lr - cfg.min_lr)


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def evaluate(model, split, microbatches: list[np.ndarray], collator: Collator, world: World, cfg: TrainConfig) -> dict:
    """Mean token loss and token accuracy on labels != -100 of the validation split; ranks share the work."""
    model.eval()
    sums = torch.zeros(3, dtype=torch.float64, device=world.device)  # loss, correct, counted
    for rows in microbatches[world.rank :: world.size]:
        mb = {name: t.to(world.device) for name, t in collator.from_split(split, rows).items()}
        with autocast(world, cfg):
            logits = logits_of(model, mb)
            counted = mb["labels"] != IGNORE
            correct = (logits.argmax(-1) == mb["labels"]) & counted
            sums += torch.stack([summed_loss(logits, mb["labels"]).double(), correct.sum().double(),
                                 counted.sum().double()])
    model.train()
    loss, correct, counted = all_sum(world, sums).tolist()
    return {"eval_loss": loss / max(counted, 1), "eval_accuracy": correct / max(counted, 1),
            "eval_tokens": int(counted)}


# ----------------------------------------------------------------------------- logging
def due(step: int, every: int, total: int) -> bool:
    """Periodic work runs every `every` steps (0: never) and after the last step."""
    return (every > 0 and step % every == 0) or step == total


@dataclass
class Window:
    """This rank's sums over the steps since the last metrics line; summed over ranks when it is logged."""

    loss: float = 0.0  # the mean token losses of the steps applied
    tokens: float = 0.0  # real (not padding) encoder and decoder tokens
    slots: float = 0.0  # padded token slots the microbatches ran
    rows: float = 0.0
    flops: float = 0.0  # model FLOPs (numerics.flop_counter)
    applied: float = 0.0  # steps the optimizer took
    seconds: float = 0.0  # time in training steps, skipped ones included
    source_loss: torch.Tensor | None = None  # a mixture's summed token losses per source (on the device)
    source_targets: np.ndarray | None = None  # and their label tokens

    def add(self, loss: float, counts: np.ndarray) -> None:
        """An applied step: its mean token loss and accumulate()'s [real tokens, padded slots, rows, FLOPs]."""
        tokens, slots, rows, flops = counts.tolist()
        self.loss, self.tokens, self.slots = self.loss + loss, self.tokens + tokens, self.slots + slots
        self.rows, self.flops, self.applied = self.rows + rows, self.flops + flops, self.applied + 1

    def add_sources(self, loss: torch.Tensor, targets: np.ndarray) -> None:
        """An applied step's summed token losses and label tokens per source of a mixture."""
        first = self.source_loss is None
        self.source_loss = loss if first else self.source_loss + loss
        self.source_targets = targets if first else self.source_targets + targets


def window_metrics(world: World, window: Window) -> dict:
    """The metrics line of the steps since the last log, summed over ranks; the loss is the mean over the
    steps applied (None if none was)."""
    sums = all_sum(world, torch.tensor(astuple(window)[:7], dtype=torch.float64)).tolist()
    loss, real, slots, rows, flops, applied, seconds = sums
    seconds, applied = seconds / world.size, applied / world.size  # each rank timed and counted the same steps
    line = {"loss": loss / applied if applied else None, "tokens": int(real), "examples": int(rows),
            "tokens_per_s": real / seconds, "padding_efficiency": real / max(slots, 1.0),
            "tflops": flops / seconds / 1e12}
    peak = peak_memory_gb(world.device)
    return line if peak is None else {**line, "peak_memory_gb": peak}


def source_fields(run: Run, state: TrainState, window: Window | None = None) -> dict:
    """A mixture's per-source figures at the loop's position: window tokens trained, their achieved fraction and
    the target weight, the pass and the seed split the source reads; with `window`, its training loss over the
    window (summed over ranks; None when its rows had no label token)."""
    if run.mix is None:
        return {}
    sources = run.mix.mixture.sources
    chunk = run.mix.chunk(state.epoch)
    done, reading = chunk.progress(state.cursor, len(sources))
    target = run.mix.weights_at(max(state.step - 1, 0))
    losses = [None] * len(sources)
    if window is not None:
        none = window.source_loss is None  # no step applied since the last line
        loss = torch.zeros(len(sources), device=run.world.device) if none else window.source_loss
        targets = torch.tensor(np.zeros(len(sources)) if none else window.source_targets, dtype=torch.float64,
                               device=run.world.device)
        sums = all_sum(run.world, torch.cat([loss.double(), targets])).tolist()
        losses = [a / b if b else None for a, b in zip(sums[: len(sources)], sums[len(sources):])]
    out = {}
    for i, source in enumerate(sources):
        out |= {f"{source.name}/tokens": int(done[i]), f"{source.name}/fraction": float(done[i] / max(done.sum(), 1)),
                f"{source.name}/target": float(target[i]), f"{source.name}/pass": int(max(reading[i], 0)),
                f"{source.name}/seed": source.seed_name(int(max(reading[i], 0)))}
        if window is not None:
            out[f"{source.name}/loss"] = losses[i]
    return out


def epoch_of_last(epoch: int, cursor: int, step: int) -> int:
    """The 0-based epoch of the step just taken, given the loader's position (epoch, cursor) after it: an
    epoch's last step has already moved the position to the next epoch."""
    return epoch - 1 if cursor == 0 and step > 0 else epoch


def position(run: Run, epoch: int) -> dict:
    """Where a step is in the data, for logs and metrics: {"epoch": e}, or {"chunk": c} for a mixture, which has
    no epochs (each source keeps its own passes)."""
    return {"epoch" if run.mix is None else "chunk": epoch}


def log_line(step: int, total: int, where: dict, lr: float, line: dict) -> str:
    """A metrics line for the console when there is no progress bar to show it; `where`: see position()."""
    loss = "-" if line["loss"] is None else f"{line['loss']:.4f}"
    memory = f", peak memory {line['peak_memory_gb']:.1f} GB" if "peak_memory_gb" in line else ""
    ((unit, index),) = where.items()
    return (f"step {step}/{total} ({unit} {index}): loss {loss}, lr {lr:.2e}, {line['tokens_per_s']:,.0f} tokens/s, "
            f"padding efficiency {line['padding_efficiency']:.2f}, {line['tflops']:.3g} TFLOP/s{memory}")


def say(world: World, text: str) -> None:
    """A console line from rank 0 that does not break the progress bar."""
    if world.main:
        tqdm.write(text, file=sys.stderr)


def record(run: Path, world: World, **fields) -> None:
    """Append one JSON line to RUN/metrics.jsonl (rank 0 only)."""
    if world.main:
        with open(run / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(strict(fields), sort_keys=True, allow_nan=False) + "\n")


# ----------------------------------------------------------------------------- one step
def train_batch(model, batch: Batch, split, targets: np.ndarray, collator: Collator, adapter: Adapter, *,
                cfg: TrainConfig, world: World, step: int, run: Path, hook: Hook | None,
                forward: Forward, groups: np.ndarray | None = None,
                group_sums: torch.Tensor | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Forward/backward one batch. On an out-of-memory error: drop the partial gradients, free memory,
    shrink the limits of the batch's length regime, re-cut this rank's rows and retry the whole batch,
    so no row is lost or counted twice. Returns accumulate()'s (loss, counts)."""
    n_targets = batch_targets(batch, targets)
    mine = np.concatenate([mb.rows for mb in batch.ranks[world.rank]])
    regime = regime_of(split.enc_lengths, split.dec_lengths, mine, cfg.alpha)
    while True:
        limits = adapter.limits(regime)
        microbatches = rank_microbatches(batch, world.rank, split, cfg, limits)
        if group_sums is not None:
            group_sums.zero_()
        try:
            sums = accumulate(model, split, collator, microbatches, n_targets, world=world, cfg=cfg, step=step,
                              hook=hook, forward=forward, groups=groups, group_sums=group_sums)
        except torch.OutOfMemoryError:
            sums = None  # recover below, once the handler has released the failed pass's tensors
        if sums is not None:
            break
        model.zero_grad(set_to_none=True)
        if world.device.type == "cuda":
            torch.cuda.empty_cache()
        real = [rows for rows, padding in microbatches if not padding] or [rows for rows, _ in microbatches]
        budget = make_budget(cfg, limits)
        tokens = max(padded_cost(split.enc_lengths, split.dec_lengths, rows, budget) for rows in real)
        shrunk = adapter.shrink(regime, max(len(rows) for rows in real), tokens)
        record(run, world, event="oom", step=step, rank=world.rank, regime=regime,
               examples=shrunk.examples if shrunk else 1, tokens=shrunk.tokens if shrunk else int(tokens))
        if shrunk is None:
            raise torch.OutOfMemoryError(f"out of memory on a single row ({tokens:.0f} padded tokens) at step {step}; "
                                         "cap rows with --max-encoder-len / --max-decoder-len")
        tqdm.write(f"rank {world.rank}, step {step}: out of memory; length regime {regime} now runs "
                   f"{shrunk.examples} rows / {shrunk.tokens} tokens per microbatch", file=sys.stderr)
    grown = adapter.succeeded(regime)
    if grown:
        record(run, world, event="grow", step=step, rank=world.rank, regime=regime, examples=grown.examples,
               tokens=grown.tokens)
    return sums


def validation(cfg: TrainConfig, manifest: Manifest):
    """(split, microbatches under the eval budget) to evaluate on: --validation, else the build's validation
    split; None if there is none or it has no rows."""
    if cfg.validation:
        path = other_validation(cfg.validation[0], cfg, manifest)
    elif getattr(manifest.split("validation"), "rows", 0):
        path = remote.local_build(cfg.data) / "validation"
        check_split_files(path.parent, manifest, "validation")
    else:
        return None
    return eval_batches(cfg, open_split(path, objective=manifest.objective))


def mixture_validation(cfg: TrainConfig, mix: MixturePlan) -> list[tuple[str, int | None, tuple]]:
    """A mixture's evaluation sets: (name, its source's index or None, (split, microbatches)), each source's own
    validation split that has rows, then each --validation [NAME=]DIR."""
    sets = []
    for i, source in enumerate(mix.mixture.sources):
        if getattr(source.manifest.split("validation"), "rows", 0):
            check_split_files(source.path, source.manifest, "validation")
            found = eval_batches(cfg, open_split(source.path / "validation", objective=mix.mixture.objective))
            if found is not None:
                sets.append((source.name, i, found))
    for spec in cfg.validation:
        name, path = source_spec(spec)
        if name == path.resolve().name:  # no NAME= given: the build's name, not its split's (validation)
            name = path.resolve().parent.name
        if name in {n for n, _, _ in sets}:
            raise ConfigError(f"--validation {spec}: the name {name} is taken; give it as OTHER_NAME=DIR")
        found = eval_batches(cfg, open_split(other_validation(path, cfg, mix.mixture.sources[0].manifest),
                                             objective=mix.mixture.objective))
        if found is not None:
            sets.append((name, None, found))
    return sets


def eval_batches(cfg: TrainConfig, split: Split):
    """(split, its microbatches under the eval budget), or None when it has no rows."""
    if len(split) == 0:
        return None
    budget = Budget(cfg.eval_max_tokens_per_microbatch, cfg.eval_max_tokens_per_microbatch,
                    cfg.max_examples_per_microbatch, alpha=cfg.alpha, pad_to_multiple_of=cfg.pad_to_multiple_of)
    return split, split_microbatches(np.arange(len(split)), split.enc_lengths, split.dec_lengths, budget)


def other_validation(given: str, cfg: TrainConfig, manifest: Manifest) -> Path:
    """A --validation split, checked to come from a build with cfg.data's tokenizer and objective."""
    path = Path(given)
    if not (path / "state.json").is_file() or not manifest_path(path.parent).is_file():
        raise ConfigError(f"--validation {path}: not a split directory of a build; give one such as BUILD/validation")
    other = read_manifest(path.parent)
    if other.tokenizer.sha256 != manifest.tokenizer.sha256:
        raise ConfigError(f"--validation {path}: built with another tokenizer than {cfg.data}; build it with "
                          f"--tokenizer {Path(cfg.data) / 'tokenizer.json'}")
    if other.objective != manifest.objective:
        raise ConfigError(f"--validation {path}: {other.objective} data, but {cfg.data} is {manifest.objective} "
                          f"data; give a split of a --objective {manifest.objective} build")
    return path


def load_model(cfg: TrainConfig, resume_from: Path | None, objective: str, tok: TokenizerRecord, max_length: int):
    """cfg.model's initial weights, or the checkpoint's on a resume (a damaged one is a one-line error)."""
    if resume_from is None:
        return build_model(cfg.model, objective, tok, max_length=max_length)
    try:
        return build_model(str(resume_from), objective, tok, max_length=max_length)
    except Exception as exc:  # a truncated model.safetensors, a broken config.json
        raise checkpoint.damaged_run_file(resume_from / "model", exc) from None


# ----------------------------------------------------------------------------- the loop's state
@dataclass
class TrainState:
    """Where the loop is and what it has trained on, saved as a checkpoint's state.json: (epoch, cursor) is
    the next batch of the epoch's plan for `world_size` ranks."""

    step: int = 0  # optimizer steps taken, skipped ones included
    epoch: int = 0
    cursor: int = 0
    world_size: int = 1
    logged_step: int = 0  # the step of the last metrics line
    tokens: int = 0  # real tokens of the logged steps, all ranks
    examples: int = 0  # rows of the logged steps, all ranks
    train_s: float = 0.0  # seconds in the logged steps (evaluation and checkpoints not counted)
    seeds: int = 1  # seed splits the run reads: epoch e reads seed-{e % seeds}
    data: str = ""  # data_digest of the files it reads
    adapt: dict = field(default_factory=dict)  # Adapter.state_dict(): microbatch limits an OOM left per regime

    @classmethod
    def begin(cls, world: World, saved: dict | None, seeds: int, digest: str) -> TrainState:
        """A new run's state, or a resumed one's from its checkpoint's state.json (`saved`)."""
        names = {f.name for f in fields(cls)}
        kept = {key: value for key, value in (saved or {}).items() if key in names}
        return cls(**{"world_size": world.size, **kept, "seeds": seeds, "data": digest})

    def advance(self, plan_length: int) -> None:
        """Move past the step just taken; after an epoch's last batch, to the start of the next epoch."""
        self.step, self.cursor = self.step + 1, self.cursor + 1
        if self.cursor == plan_length:
            self.epoch, self.cursor = self.epoch + 1, 0


@dataclass(frozen=True)
class Epoch:
    """The rows an epoch trains on: its split `name` (seed-{index % seeds}), the batch plan, label tokens per row."""

    index: int
    name: str
    split: Split
    plan: list[Batch]
    targets: np.ndarray
    chunk: Chunk | None = None  # a mixture's: where each row comes from


@dataclass(frozen=True)
class Run:
    """What the loop's steps use, fixed for the whole run."""

    cfg: TrainConfig
    world: World
    out: Path  # RUN
    manifest: Manifest
    total: int  # train up to this step
    horizon: int  # the step at which the learning rate reaches --min-lr (lr_at)
    model: torch.nn.Module
    ddp: torch.nn.Module  # the model, wrapped for DistributedDataParallel when there are several ranks
    params: list  # the trainable parameters, whose gradient norm is clipped and checked
    optimizer: torch.optim.Optimizer
    adapter: Adapter
    guard: Guard
    collator: Collator
    forward: Forward
    val: tuple | None  # validation(): (split, microbatches), or None
    writer: object  # reporters.open_writer(): a SummaryWriter, or None
    hook: Hook | None
    mix: MixturePlan | None = None  # a mixture's plan (then val is mixture_validation()'s list)


# ----------------------------------------------------------------------------- setting up
def check_run(cfg: TrainConfig, world: World) -> Path | None:
    """The checkpoint to resume from, if any. A non-empty RUN needs --resume: checked on every rank before
    anything is written, as are the paths train_config.json records."""
    resume_from = checkpoint.open_run(cfg)
    reporters.check(cfg)
    if world.size > 1:
        dist.barrier()
    for option, path in (("DATA", cfg.data), *(("DATA", p) for p in cfg.sources),
                         *(("--validation", p) for p in cfg.validation)):
        check_utf8_path(path, option)
    return resume_from


def seeds_and_digest(cfg: TrainConfig, world: World, manifest: Manifest, saved: dict | None,
                     mix: MixturePlan | None = None) -> tuple[int, str]:
    """The number of seed splits the run reads and the digest of its files. A resume reads the seeds it started
    with (a remask since then does not change its epochs), and only on the data it started with."""
    n_seeds = len(manifest.seeds) if saved is None else resumed_seeds(cfg, len(manifest.seeds), saved)
    digest = manifest.identity(n_seeds) if mix is None else mixture_digest(mix)
    if saved is not None:
        check_same_data(cfg, saved, digest)
    return n_seeds, digest


def mixture_plan(cfg: TrainConfig, world: World, saved: dict | None, step: int) -> MixturePlan | None:
    """A mixture's plan (None for one build). A resume keeps the seeds and the weights' history it saved; new
    --weights or --mix apply from `step` on, every source going on from its place."""
    if not cfg.mixture:
        return None
    old = (saved or {}).get("mixture")
    if saved is not None and old is None:
        raise ConfigError(f"--resume: the run in {cfg.out} trained on one build; resume it on that build")
    mix = open_mixture(cfg.sources, weights=cfg.weights, mix=cfg.mix, seeds=old and old["seeds"])
    schedule = [(0, mix.weights.tolist())] if old is None else [(s, w) for s, w in old["schedule"]]
    if old is not None and old["names"] != mix.names:
        raise ConfigError(f"--resume: the run in {cfg.out} mixed {', '.join(old['names'])}, not "
                          f"{', '.join(mix.names)}; give the same builds in the same order")
    if schedule[-1][1] != mix.weights.tolist():
        say(world, f"mixture weights change at step {step}: " + ", ".join(
            f"{n} {a:.3f} -> {b:.3f}" for n, a, b in zip(mix.names, schedule[-1][1], mix.weights)) +
            "; every source goes on from where it is")
        schedule = [*(entry for entry in schedule if entry[0] < step), (step, mix.weights.tolist())]
    return mix.plan(make_budget(cfg), seed=cfg.seed, world_size=world.size, schedule=schedule)


def mixture_digest(mix: MixturePlan) -> str:
    """Manifest.identity of each source's files, with its name."""
    parts = [(s.name, s.manifest.identity(s.seeds)) for s in mix.mixture.sources]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def make_model_and_optimizer(cfg: TrainConfig, world: World, manifest: Manifest, resume_from: Path | None):
    """The model on the device, in training mode, with the same initial weights on every rank (a resume's are
    the checkpoint's), and its optimizer; then each rank's own seed, so dropout masks differ across ranks."""
    seed_everything(cfg.seed)
    model = load_model(cfg, resume_from, manifest.objective, manifest.tokenizer, manifest.input_length)
    model = model.to(world.device)
    model.train()  # from_pretrained (a resume, a checkpoint as --model) returns eval mode: dropout would be off
    optimizer = make_optimizer(model, cfg)
    seed_everything(cfg.seed + world.rank)
    return model, optimizer


def write_run(cfg: TrainConfig, world: World, step: int) -> None:
    """RUN with the run's options; metrics.jsonl keeps the lines up to `step`, those after it are redone."""
    if world.main:
        run = Path(cfg.out)
        run.mkdir(parents=True, exist_ok=True)
        write_json(run / checkpoint.CONFIG, checkpoint.run_options(cfg))
        checkpoint.trim_metrics(run, step)


def warn_schedule(cfg: TrainConfig, world: World, total: int) -> None:
    """Warn of a warmup or decay that the run's length makes meaningless."""
    if cfg.warmup_steps > total:
        say(world, f"warning: --warmup-steps {cfg.warmup_steps} is longer than the run ({total} steps): the learning "
                   f"rate never reaches --lr {cfg.lr:g}")
    if cfg.schedule in ("cosine", "linear") and 0 < cfg.decay_steps <= cfg.warmup_steps + 1:
        say(world, f"warning: --decay-steps {cfg.decay_steps} leaves no step to decay over after --warmup-steps "
                   f"{cfg.warmup_steps}: the learning rate falls from --lr to --min-lr {cfg.min_lr:g} at once")


def make_collator(cfg: TrainConfig, manifest: Manifest) -> Collator:
    """Batches of the build's rows, with its tokenizer's ids, the --max-*-len caps and --pad-to-multiple-of."""
    tok = manifest.tokenizer
    return Collator(manifest.objective, tok.pad_id, tok.decoder_start_id, max_encoder_len=cfg.max_encoder_len,
                    max_decoder_len=cfg.max_decoder_len, pad_to_multiple_of=cfg.pad_to_multiple_of,
                    vocab_size=tok.vocab_size)


def describe(cfg: TrainConfig, world: World, model, epoch: Epoch, total: int, state: TrainState,
             mix: MixturePlan | None = None) -> None:
    """The model, the data and the plan in two console lines (and a line per source of a mixture)."""
    stats = plan_stats(epoch.plan, epoch.split.enc_lengths, epoch.split.dec_lengths, make_budget(cfg))
    say(world, f"{type(model).__name__}: {parameter_count(model) / 1e6:.2f}M parameters on {world.size} x "
               f"{world.device.type}; {epoch.split.objective} data {cfg.data}")
    if mix is not None:
        say(world, f"tokens/step: {stats['tokens_per_batch']:.0f} real (budget {cfg.max_tokens_per_batch} padded, "
                   f"padding efficiency {stats['padding_efficiency']:.3f}); {total} steps from step {state.step}; "
                   f"a mixture of {len(mix.mixture.sources)} builds, weights = fractions of training tokens:")
        weights = mix.weights_at(state.step)
        for source, weight in zip(mix.mixture.sources, weights):
            say(world, f"  {source.name:<16} {weight:6.3f}  {source.tokens:>14,} window tokens a pass, pass p reads "
                       f"seed-{{p % {source.seeds}}}  {source.path}")
        return
    say(world, f"tokens/step: {stats['tokens_per_batch']:.0f} real (budget {cfg.max_tokens_per_batch} padded, "
               f"padding efficiency {stats['padding_efficiency']:.3f}); steps/epoch: {len(epoch.plan)}; {total} steps "
               f"from step {state.step}; epoch e reads seed-{{e % {state.seeds}}}")


def start(cfg: TrainConfig, world: World, manifest: Manifest, resume_from: Path | None, saved: dict | None,
          state: TrainState, total: int, hook: Hook | None, mix: MixturePlan | None = None) -> tuple[Run, Epoch]:
    """Set up for the loop: the model and optimizer (a resume restores the checkpoint's optimizer and RNG
    states), the data, then RUN, the device, the collator and the compiled forward; returns the run and
    the epoch it goes on with."""
    model, optimizer = make_model_and_optimizer(cfg, world, manifest, resume_from)
    adapter = Adapter(user_limits(cfg), grow_after=cfg.grow_after)
    if resume_from:
        checkpoint.load(resume_from, saved, optimizer, rank=world.rank, world_size=world.size, device=world.device)
        adapter.load_state_dict(state.adapt)
    # the data is opened before RUN is written: a damaged build leaves no RUN
    val = validation(cfg, manifest) if mix is None else mixture_validation(cfg, mix)
    split, plan = epoch_plan(cfg, world, state.epoch, state.seeds, mix, identity=state.data)
    write_run(cfg, world, state.step)
    warn_schedule(cfg, world, total)  # after every check that can fail, so that an error stays one line
    writer = reporters.open_writer(cfg, Path(cfg.out), state.step) if world.main else None
    setup_device(world.device)
    ddp = wrap_ddp(model, world) if world.size > 1 else model
    collator = make_collator(cfg, manifest)
    if not val:
        say(world, f"{(cfg.validation or [cfg.data])[0]}: no validation rows (built with --validation-fraction 0?); "
                   "evaluation is skipped")
    epoch = make_epoch(state.epoch, split, plan, collator, manifest, state.seeds, mix)
    describe(cfg, world, model, epoch, total, state, mix)
    shapes = plan_shapes(plan, split.enc_lengths, split.dec_lengths, world.rank, collator)
    forward = make_forward(model, cfg, world, manifest.objective, shapes)
    run = Run(cfg=cfg, world=world, out=Path(cfg.out), manifest=manifest, total=total, horizon=cfg.decay_steps or total,
              model=model, ddp=ddp, params=[p for p in model.parameters() if p.requires_grad], optimizer=optimizer,
              adapter=adapter, guard=Guard(cfg.max_bad_steps, cfg.out), collator=collator, forward=forward, val=val,
              writer=writer, hook=hook, mix=mix)
    return run, epoch


def make_epoch(index: int, split, plan: list[Batch], collator: Collator, manifest: Manifest, seeds: int,
               mix: MixturePlan | None) -> Epoch:
    """Epoch `index` of this split and plan, with the label tokens of its rows (and a mixture's chunk)."""
    if mix is None:
        return Epoch(index, epoch_split(manifest, index, seeds), split, plan, row_targets(split, collator))
    return Epoch(index, f"chunk {index}", split, plan, row_targets(split, collator), mix.chunk(index))


def next_epoch(run: Run, index: int, seeds: int, identity: str) -> Epoch:
    """Epoch `index`: its split, checked to be of the build the run planned on (`identity`), its plan (the same on
    every rank) and the label tokens of its rows."""
    split, plan = epoch_plan(run.cfg, run.world, index, seeds, run.mix, identity=identity)
    return make_epoch(index, split, plan, run.collator, run.manifest, seeds, run.mix)


# ----------------------------------------------------------------------------- the loop's steps
def train_step(run: Run, state: TrainState, epoch: Epoch, window: Window) -> tuple[float, float]:
    """One optimizer step on the batch at state.cursor: set the learning rate, forward/backward the batch, then
    apply the gradients, or drop them if they are not finite or the batch has no label token. Adds the step to
    `window`, moves `state` past it and returns (learning rate, gradient norm)."""
    t0, lr = time.perf_counter(), lr_at(state.step, run.cfg, run.horizon)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    batch = epoch.plan[state.cursor]
    groups = None if epoch.chunk is None else epoch.chunk.source
    sums = None if groups is None else torch.zeros(len(run.mix.mixture.sources), dtype=torch.float64,
                                                    device=run.world.device)
    loss, counts = train_batch(run.ddp, batch, epoch.split, epoch.targets, run.collator, run.adapter, cfg=run.cfg,
                               world=run.world, step=state.step, run=run.out, hook=run.hook, forward=run.forward,
                               groups=groups, group_sums=sums)
    loss, norm, bad = checked(run.world, loss, grad_norm(run.params, run.cfg.grad_clip))  # the step's one sync
    if bad or not batch_targets(batch, epoch.targets):
        skip_step(run, state.step, batch, bad, loss, norm)
    else:
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        run.guard.good(state.step)
        window.add(loss, counts)
        if sums is not None:
            mine = [mb.rows for mb in batch.ranks[run.world.rank] if not mb.padding]
            mine = np.concatenate(mine) if mine else np.zeros(0, np.int64)
            window.add_sources(sums, np.bincount(groups[mine], weights=epoch.targets[mine], minlength=len(sums)))
    window.seconds += time.perf_counter() - t0
    state.advance(len(epoch.plan))
    return lr, norm


def skip_step(run: Run, step: int, batch: Batch, bad: str, loss: float, norm: float) -> None:
    """Drop a step's gradients unapplied: a non-finite loss or gradient norm (`bad`, counted by the guard), or
    a batch whose caps (--max-encoder-len / --max-decoder-len) cut every label token off."""
    run.optimizer.zero_grad(set_to_none=True)
    rows = sorted(int(r) for rank in batch.ranks for mb in rank if not mb.padding for r in mb.rows)
    if bad:
        record(run.out, run.world, event="nonfinite", step=step, value=bad, loss=loss, grad_norm=norm, rows=rows)
        say(run.world, f"step {step}: non-finite {bad}; the step is skipped ({run.guard.streak + 1} in a row, "
                       f"--max-bad-steps {run.cfg.max_bad_steps})")
        run.guard.bad(step, bad)
    else:
        record(run.out, run.world, event="no_targets", step=step, rows=rows)
        say(run.world, f"step {step}: its rows have no label token left (--max-encoder-len / --max-decoder-len); "
                       "the step is skipped")


def log_window(run: Run, state: TrainState, window: Window, lr: float, norm: float, bar) -> float | None:
    """Log the steps since the last metrics line (metrics.jsonl, TensorBoard, the bar or a console line) and
    add them to the run's totals; returns their mean loss (None if none was applied)."""
    line = window_metrics(run.world, window) | source_fields(run, state, window)
    state.logged_step, state.train_s = state.step, state.train_s + window.seconds
    state.tokens, state.examples = state.tokens + line["tokens"], state.examples + line["examples"]
    where = position(run, epoch_of_last(state.epoch, state.cursor, state.step))
    record(run.out, run.world, step=state.step, **where, lr=lr, grad_norm=norm, **line)
    reporters.report(run.writer, {"step": state.step, **where, "lr": lr, "grad_norm": norm, **line})
    if bar.disable:  # off a terminal (a log file, a batch job): the bar's figures as a line
        say(run.world, log_line(state.step, run.total, where, lr, line))
    bar.set_postfix(loss=f"{line['loss']:.3f}" if line["loss"] is not None else "-", lr=f"{lr:.2e}",
                    tok_s=f"{line['tokens_per_s']:.0f}", pad=f"{line['padding_efficiency']:.2f}",
                    tflops=f"{line['tflops']:.3g}",
                    **({"mem_gb": f"{line['peak_memory_gb']:.1f}"} if "peak_memory_gb" in line else {}))
    return line["loss"]


def evaluate_and_log(run: Run, step: int) -> dict:
    """Evaluate on the validation rows and log it ({} without validation rows)."""
    if not run.val:
        return {}
    if run.mix is not None:
        return evaluate_mixture(run, step)
    metrics = evaluate(run.model, *run.val, run.collator, run.world, run.cfg)
    record(run.out, run.world, step=step, **metrics)
    reporters.report(run.writer, {"step": step, **metrics})
    if run.world.main:
        plots.update(run.out)  # RUN/plots.png
    say(run.world, f"step {step}: eval loss {metrics['eval_loss']:.4f}, token accuracy {metrics['eval_accuracy']:.4f}")
    return metrics


def evaluate_mixture(run: Run, step: int) -> dict:
    """Evaluate each of a mixture's sets (eval/NAME/loss, eval/NAME/accuracy) and their mean under the weights
    (eval_loss, eval_accuracy: over the sources' own sets), log it and show it as a table."""
    weights = run.mix.weights_at(max(step - 1, 0))
    metrics, rows, mean = {}, [], np.zeros(3)
    for name, source, (split, microbatches) in run.val:
        m = evaluate(run.model, split, microbatches, run.collator, run.world, run.cfg)
        metrics |= {f"eval/{name}/loss": m["eval_loss"], f"eval/{name}/accuracy": m["eval_accuracy"]}
        weight = None if source is None else float(weights[source])
        if weight is not None:
            mean += [weight * m["eval_loss"], weight * m["eval_accuracy"], weight]
        rows.append(f"  {name:<16}{'-' if weight is None else f'{weight:.3f}':>8}{m['eval_loss']:>10.4f}"
                    f"{m['eval_accuracy']:>10.4f}")
    if mean[2]:
        metrics |= {"eval_loss": mean[0] / mean[2], "eval_accuracy": mean[1] / mean[2]}
        rows.append(f"  {'weighted mean':<16}{'':>8}{mean[0] / mean[2]:>10.4f}{mean[1] / mean[2]:>10.4f}")
    record(run.out, run.world, step=step, **metrics)
    reporters.report(run.writer, {"step": step, **metrics})
    if run.world.main:
        plots.update(run.out)  # RUN/plots.png (validation: the weighted mean, when the sources have sets)
    say(run.world, "\n".join([f"step {step}: evaluation", f"  {'set':<16}{'weight':>8}{'loss':>10}{'accuracy':>10}",
                              *rows]))
    return metrics


def save_checkpoint(run: Run, state: TrainState) -> None:
    """checkpoint-{step}: weights, optimizer, every rank's RNG states and `state` with the adapter's limits."""
    state.adapt = run.adapter.state_dict()
    saved = asdict(state)
    if run.mix is not None:
        saved["mixture"] = {"names": run.mix.mixture.names, "seeds": [s.seeds for s in run.mix.mixture.sources],
                            "schedule": [[step, w.tolist()] for step, w in run.mix.schedule]}
    checkpoint.save(run.out, saved, model=run.model, optimizer=run.optimizer, cfg=run.cfg, rank=run.world.rank,
                    world_size=run.world.size)


def finish(run: Run, state: TrainState, loss: float | None, metrics: dict, started: float) -> dict:
    """final_metrics.json: the last logged loss and evaluation, and the run's totals."""
    where = position(run, epoch_of_last(state.epoch, state.cursor, state.step))
    final = {"step": state.step, **where, "loss": loss, **metrics, "tokens": state.tokens,
             "examples": state.examples, "wall_s": time.perf_counter() - started, "train_s": state.train_s,
             "tokens_per_s": state.tokens / state.train_s if state.train_s else 0.0, **source_fields(run, state)}
    if run.world.main:
        write_json(run.out / "final_metrics.json", final)
    if run.writer is not None:
        run.writer.close()
    return final


def record_fetch(run: Run, state: TrainState) -> None:
    """How long the start of the epoch at `state` waited for a DATA URL's split (metrics.jsonl's fetch_wait_s)."""
    wait = remote.fetch_wait(run.cfg.data)
    if wait is not None:
        record(run.out, run.world, event="fetch", step=state.step, epoch=state.epoch, fetch_wait_s=wait)
        say(run.world, f"epoch {state.epoch}: waited {wait:.2f} s for its data")


# ----------------------------------------------------------------------------- the run
def fit(cfg: TrainConfig, *, hook: Hook | None = None, on_end: Callable | None = None) -> dict:
    """Train cfg.model on the build cfg.data; write RUN/metrics.jsonl, RUN/checkpoint-{step} and
    RUN/final_metrics.json; return the final metrics. `hook(step, k, rows, padding)` runs before every forward
    (tests inject OOMs and record rows with it); `on_end(model)` sees the trained model on every rank."""
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its per-file bars would break ours
    world = init_world()
    try:
        with deterministic_kernels(cfg.deterministic):
            return run_fit(cfg, world, hook, on_end)
    finally:
        if world.size > 1:
            dist.destroy_process_group()


def run_fit(cfg: TrainConfig, world: World, hook: Hook | None, on_end: Callable | None) -> dict:
    """fit() on one rank, as a recipe: RUN and the data, the set-up, the loop, the final metrics."""
    started = time.perf_counter()
    # -- RUN and the data: what a resume reads, and the steps to train (the whole plan unless --max-steps)
    resume_from = check_run(cfg, world)
    manifest = read_manifest(remote.open_data(cfg, log=lambda line: say(world, line)))  # a URL: through the cache
    cfg.check_objective(manifest.objective)
    saved = checkpoint.read_json(resume_from / "state.json") if resume_from else None
    mix = mixture_plan(cfg, world, saved, saved["step"] if saved else 0)
    if mix is not None:  # the model takes the longest rows of any source
        manifest = replace(manifest, input_length=max(s.manifest.input_length for s in mix.mixture.sources))
    n_seeds, digest = seeds_and_digest(cfg, world, manifest, saved, mix)
    total = planned_steps(cfg, world, n_seeds, mix)
    if saved is not None and (done := checkpoint.finished(resume_from, saved, total)) is not None:  # change nothing
        say(world, f"{Path(cfg.out)}: already trained to step {done['step']} of {total}; nothing to do (raise "
                   "--max-steps or --epochs to train further)")
        return done
    if mix is None:  # after the check above: a finished run says only that
        say_seeds_added(cfg, world, len(manifest.seeds), n_seeds)
    state = TrainState.begin(world, saved, n_seeds, digest)
    if mix is not None and state.cursor and state.cursor == len(mix.chunk(state.epoch).plan):  # cut by new weights
        state.epoch, state.cursor = state.epoch + 1, 0
    run, epoch = start(cfg, world, manifest, resume_from, saved, state, total, hook, mix)
    record_fetch(run, state)

    # -- the loop: one optimizer step, then logging, evaluation and a checkpoint, each on its own schedule
    metrics = evaluate_and_log(run, state.step) if cfg.eval_every and state.step == 0 else {}
    bar = progress(total=total, initial=state.step, unit="step", unit_scale=False,
                   **({} if world.main else {"disable": True}))
    window, loss = Window(), None
    while state.step < total:
        if epoch.index != state.epoch:  # the previous step was its epoch's last
            epoch = next_epoch(run, state.epoch, state.seeds, state.data)
            record_fetch(run, state)
        bar.set_description(epoch.name if epoch.chunk is not None else f"epoch {epoch.index} ({epoch.name})")
        lr, norm = train_step(run, state, epoch, window)
        bar.update(1)
        save = due(state.step, cfg.save_every, total)
        if due(state.step, cfg.log_every, total) or save:  # the same steps on every rank: all_sum matches
            loss, window = log_window(run, state, window, lr, norm, bar), Window()
        if due(state.step, cfg.eval_every, total):
            metrics = evaluate_and_log(run, state.step)
        if save:
            save_checkpoint(run, state)
    bar.close()
    if not metrics:  # no evaluation yet (say, a run killed after its last checkpoint, resumed): evaluate now
        metrics = evaluate_and_log(run, state.step)
    final = finish(run, state, loss, metrics, started)
    remote.close(cfg.data)
    if on_end is not None:
        on_end(run.model)
    return final
