"""`mlmprep train`: pretrain T5 (span data) or a BERT-style model (mlm data) on a build, in one pass that
reads top to bottom like nanoGPT's train.py: config, world, plan, model, optimizer, evaluate(), lr_at(step), loop.

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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from tqdm import tqdm

from mlmprep.config import TrainConfig, to_dict
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format.load import epoch_split, open_epoch, open_split, read_manifest
from mlmprep.format.publish import check_utf8_path
from mlmprep.format.rows import IGNORE
from mlmprep.format.write import manifest_path, strict, write_json
from mlmprep.progress import progress
from mlmprep.train import checkpoint, reporters
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
    option = "forward_sync_buffers" if "forward_sync_buffers" in params else "broadcast_buffers"  # newer torch renamed it
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
               forward: Forward | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """Forward/backward this rank's microbatches (rows, padding) of one batch whose ranks hold `n_targets`
    label tokens in all; returns (loss share, a float64 device scalar; [real tokens, padded slots, rows, FLOPs]).

    DDP averages gradients over ranks, so the scale is world_size / n_targets; gradients synchronise on
    the last microbatch only. A padding microbatch runs with weight 0 so every rank's backward matches.
    Nothing here waits for the device: the loss stays on it.
    """
    forward = forward or Forward(loss=summed_loss)
    scale = world.size / n_targets if n_targets else 0.0  # no label token in the batch: no gradient (the step is skipped)
    loss, out = torch.zeros((), dtype=torch.float64, device=world.device), np.zeros(4)
    batches = collate_ahead(collator, split, microbatches, forward, pin=world.device.type == "cuda")
    for k, ((rows, padding), (tensors, counts)) in enumerate(zip(microbatches, batches)):
        last = k == len(microbatches) - 1
        if hook is not None:
            hook(step, k, rows, padding)
        mb = {name: t.to(world.device, non_blocking=True) for name, t in tensors.items()}
        if forward.compiled and shape_key(mb) not in forward.shapes:
            forward.shapes.add(shape_key(mb))
            say(world, f"step {step}: compiling for microbatches of {shape_key(mb)} tokens (shape {len(forward.shapes)})")
        sync = model.no_sync() if world.size > 1 and not last else contextlib.nullcontext()
        try:
            with sync:
                with autocast(world, cfg):
                    loss_sum = forward.loss(logits_of(model, mb), mb["labels"])
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
    return loss / max(n_targets, 1), out


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


def epoch_plan(cfg: TrainConfig, world: World, epoch: int, seeds: int | None = None):
    """(split, batches) of an epoch: the same plan on every rank; `seeds`: see load.epoch_split."""
    split = open_epoch(cfg.data, epoch, seeds)
    if len(split) == 0:
        raise CacheError(f"{split.path}: no rows to train on; build from a larger corpus")
    return split, plan_epoch(split.enc_lengths, split.dec_lengths, make_budget(cfg), seed=cfg.seed, epoch=epoch,
                             world_size=world.size)


def resumed_seeds(cfg: TrainConfig, world: World, have: int, state: dict) -> int:
    """The number of seed splits a resumed run reads: those it started with (runs saved before this was
    recorded: the build's), saying so when a remask has added more since."""
    started = state.get("seeds", have)
    if type(started) is not int or not 1 <= started <= have:
        raise CacheError(f"{cfg.data}: has {have} seed splits, but the run in {cfg.out} started with {started!r}; "
                         "resume it on the build it started with")
    if started < have:
        say(world, f"{cfg.data}: has {have} seed splits now; this run goes on reading the {started} it started with "
                   f"(epoch e reads seed-{{e % {started}}}); a new run reads all {have}")
    return started


def data_digest(manifest: dict, seeds: int) -> str:
    """sha256 over the manifest's hashes of the files a run reads, seed-0..seeds-1 and validation: a remask that
    adds seeds leaves it as it was, a build of other data or options does not."""
    names = [entry["split"] for entry in manifest["seeds"][:seeds]] + ["validation"]
    files = [(name, f.get("name"), f.get("sha256")) for name in names for f in manifest["splits"].get(name, {}).get("files", [])]
    return hashlib.sha256(json.dumps(files).encode("utf-8")).hexdigest()


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


def rank_microbatches(batch: Batch, rank: int, split, cfg: TrainConfig, limits: Limits) -> list[tuple[np.ndarray, bool]]:
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
            sums += torch.stack([summed_loss(logits, mb["labels"]).double(), correct.sum().double(), counted.sum().double()])
    model.train()
    loss, correct, counted = all_sum(world, sums).tolist()
    return {"eval_loss": loss / max(counted, 1), "eval_accuracy": correct / max(counted, 1), "eval_tokens": int(counted)}


# ----------------------------------------------------------------------------- logging
def due(step: int, every: int, total: int) -> bool:
    """Periodic work runs every `every` steps (0: never) and after the last step."""
    return (every > 0 and step % every == 0) or step == total


def window_metrics(world: World, window: np.ndarray) -> dict:
    """The metrics line of the steps since the last log, summed over ranks; the loss is the mean over the
    steps applied (None if none was)."""
    loss, real, slots, rows, flops, good, seconds = all_sum(world, torch.tensor(window, dtype=torch.float64)).tolist()
    seconds, good = seconds / world.size, good / world.size  # each rank timed and counted the same steps
    line = {"loss": loss / good if good else None, "tokens": int(real), "examples": int(rows),
            "tokens_per_s": real / seconds, "padding_efficiency": real / max(slots, 1.0), "tflops": flops / seconds / 1e12}
    peak = peak_memory_gb(world.device)
    return line if peak is None else {**line, "peak_memory_gb": peak}


def epoch_of_last(epoch: int, cursor: int, step: int) -> int:
    """The 0-based epoch of the step just taken, given the loader's position (epoch, cursor) after it: an
    epoch's last step has already moved the position to the next epoch."""
    return epoch - 1 if cursor == 0 and step > 0 else epoch


def log_line(step: int, total: int, epoch: int, lr: float, line: dict) -> str:
    """A metrics line for the console when there is no progress bar to show it."""
    loss = "-" if line["loss"] is None else f"{line['loss']:.4f}"
    memory = f", peak memory {line['peak_memory_gb']:.1f} GB" if "peak_memory_gb" in line else ""
    return (f"step {step}/{total} (epoch {epoch}): loss {loss}, lr {lr:.2e}, {line['tokens_per_s']:,.0f} tokens/s, "
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
                forward: Forward) -> tuple[torch.Tensor, np.ndarray]:
    """Forward/backward one batch. On an out-of-memory error: drop the partial gradients, free memory,
    shrink the limits of the batch's length regime, re-cut this rank's rows and retry the whole batch,
    so no row is lost or counted twice. Returns accumulate()'s (loss, counts)."""
    n_targets = batch_targets(batch, targets)
    mine = np.concatenate([mb.rows for mb in batch.ranks[world.rank]])
    regime = regime_of(split.enc_lengths, split.dec_lengths, mine, cfg.alpha)
    while True:
        limits = adapter.limits(regime)
        microbatches = rank_microbatches(batch, world.rank, split, cfg, limits)
        try:
            sums = accumulate(model, split, collator, microbatches, n_targets, world=world, cfg=cfg, step=step, hook=hook,
                              forward=forward)
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
        record(run, world, event="grow", step=step, rank=world.rank, regime=regime, examples=grown.examples, tokens=grown.tokens)
    return sums


def validation(cfg: TrainConfig, manifest: dict):
    """(split, microbatches under the eval budget) to evaluate on: --validation, else the build's validation
    split; None if there is none or it has no rows."""
    if cfg.validation:
        path = other_validation(cfg, manifest)
    elif manifest.get("splits", {}).get("validation", {}).get("rows"):
        path = Path(cfg.data) / "validation"
    else:
        return None
    split = open_split(path, objective=manifest["objective"])
    if len(split) == 0:
        return None
    budget = Budget(cfg.eval_max_tokens_per_microbatch, cfg.eval_max_tokens_per_microbatch, cfg.max_examples_per_microbatch,
                    alpha=cfg.alpha, pad_to_multiple_of=cfg.pad_to_multiple_of)
    return split, split_microbatches(np.arange(len(split)), split.enc_lengths, split.dec_lengths, budget)


def other_validation(cfg: TrainConfig, manifest: dict) -> Path:
    """--validation's split, checked to come from a build with cfg.data's tokenizer and objective."""
    path = Path(cfg.validation)
    if not (path / "state.json").is_file() or not manifest_path(path.parent).is_file():
        raise ConfigError(f"--validation {path}: not a split directory of a build; give one such as BUILD/validation")
    other = read_manifest(path.parent)
    if other["tokenizer"]["sha256"] != manifest["tokenizer"]["sha256"]:
        raise ConfigError(f"--validation {path}: built with another tokenizer than {cfg.data}; build it with "
                          f"--tokenizer {Path(cfg.data) / 'tokenizer.json'}")
    if other["objective"] != manifest["objective"]:
        raise ConfigError(f"--validation {path}: {other['objective']} data, but {cfg.data} is {manifest['objective']} "
                          f"data; give a split of a --objective {manifest['objective']} build")
    return path


def load_model(cfg: TrainConfig, resume_from: Path | None, objective: str, tok: dict, max_length: int):
    """cfg.model's initial weights, or the checkpoint's on a resume (a damaged one is a one-line error)."""
    if resume_from is None:
        return build_model(cfg.model, objective, tok, max_length=max_length)
    try:
        return build_model(str(resume_from), objective, tok, max_length=max_length)
    except Exception as exc:  # a truncated model.safetensors, a broken config.json
        raise checkpoint.damaged(resume_from / "model", exc) from None


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
    started = time.perf_counter()
    # -- run directory: a non-empty RUN needs --resume; checked on every rank before anything is written
    resume_from = checkpoint.open_run(cfg)
    reporters.check(cfg)
    if world.size > 1:
        dist.barrier()
    for option, path in (("DATA", cfg.data), ("--validation", cfg.validation)):  # train_config.json records them
        if path:
            check_utf8_path(path, option)
    run, manifest = Path(cfg.out), read_manifest(cfg.data)
    objective, tok, n_seeds = manifest["objective"], manifest["tokenizer"], len(manifest["seeds"])
    cfg.check_objective(objective)
    if resume_from:  # the seed count the run started with: a remask since then does not change its epochs
        saved = checkpoint.read_json(resume_from / "state.json")
        n_seeds = resumed_seeds(cfg, world, n_seeds, saved)
        check_same_data(cfg, saved, data_digest(manifest, n_seeds))

    # -- plan: total steps (unless --max-steps), and the learning-rate horizon
    total = cfg.max_steps or sum(len(epoch_plan(cfg, world, e, n_seeds)[1]) for e in range(cfg.epochs))
    horizon = cfg.decay_steps or total
    if resume_from and (done := checkpoint.finished(resume_from, total)) is not None:  # nothing to train: change nothing
        say(world, f"{run}: already trained to step {done['step']} of {total}; nothing to do (raise --max-steps or "
                   f"--epochs to train further)")
        return done

    # -- model and optimizer (identical initial weights on every rank; a resume loads the checkpoint's)
    seed_everything(cfg.seed)
    model = load_model(cfg, resume_from, objective, tok, manifest["input_length"]).to(world.device)
    model.train()  # from_pretrained (a resume, a checkpoint as --model) returns eval mode: dropout would be off
    optimizer = make_optimizer(model, cfg)
    seed_everything(cfg.seed + world.rank)  # dropout masks differ across ranks
    adapter = Adapter(user_limits(cfg), grow_after=cfg.grow_after)
    state = {"epoch": 0, "cursor": 0, "world_size": world.size, "logged_step": 0, "tokens": 0, "examples": 0,
             "adapt": {}}
    if resume_from:
        state = checkpoint.load(resume_from, optimizer, rank=world.rank, world_size=world.size, device=world.device)
        adapter.load_state_dict(state["adapt"])
    state["seeds"], state["data"] = n_seeds, data_digest(manifest, n_seeds)
    step, epoch, cursor = state.pop("step", 0), state["epoch"], state["cursor"]
    val = validation(cfg, manifest)  # the data is opened before RUN is written: a damaged build leaves no RUN
    split, plan = epoch_plan(cfg, world, epoch, n_seeds)
    if world.main:
        run.mkdir(parents=True, exist_ok=True)
        write_json(run / checkpoint.CONFIG, to_dict(cfg))
        checkpoint.trim_metrics(run, step)
    if cfg.warmup_steps > total:  # after every check that can fail, so that an error stays one line
        say(world, f"warning: --warmup-steps {cfg.warmup_steps} is longer than the run ({total} steps): the learning "
                   f"rate never reaches --lr {cfg.lr:g}")
    if cfg.schedule in ("cosine", "linear") and 0 < cfg.decay_steps <= cfg.warmup_steps + 1:
        say(world, f"warning: --decay-steps {cfg.decay_steps} leaves no step to decay over after --warmup-steps "
                   f"{cfg.warmup_steps}: the learning rate falls from --lr to --min-lr {cfg.min_lr:g} at once")
    writer = reporters.open_writer(cfg, run, step) if world.main else None
    setup_device(world.device)
    ddp = wrap_ddp(model, world) if world.size > 1 else model
    collator = Collator(objective, tok["pad_id"], tok["decoder_start_id"], max_encoder_len=cfg.max_encoder_len,
                        max_decoder_len=cfg.max_decoder_len, pad_to_multiple_of=cfg.pad_to_multiple_of,
                        vocab_size=tok["vocab_size"])
    if val is None:
        say(world, f"{cfg.validation or cfg.data}: no validation rows (built with --validation-fraction 0?); "
                   "evaluation is skipped")

    targets = row_targets(split, collator)
    stats = plan_stats(plan, split.enc_lengths, split.dec_lengths, make_budget(cfg))
    say(world, f"{type(model).__name__}: {parameter_count(model) / 1e6:.2f}M parameters on {world.size} x {world.device.type}; "
               f"{objective} data {cfg.data}")
    say(world, f"tokens/step: {stats['tokens_per_batch']:.0f} real (budget {cfg.max_tokens_per_batch} padded, "
               f"padding efficiency {stats['padding_efficiency']:.3f}); steps/epoch: {len(plan)}; {total} steps "
               f"from step {step}; epoch e reads seed-{{e % {n_seeds}}}")
    forward = make_forward(model, cfg, world, objective, plan_shapes(plan, split.enc_lengths, split.dec_lengths,
                                                                      world.rank, collator))

    # -- loop
    def run_eval(at: int) -> dict:
        if val is None:
            return {}
        metrics = evaluate(model, *val, collator, world, cfg)
        record(run, world, step=at, **metrics)
        reporters.report(writer, {"step": at, **metrics})
        say(world, f"step {at}: eval loss {metrics['eval_loss']:.4f}, token accuracy {metrics['eval_accuracy']:.4f}")
        return metrics

    metrics = run_eval(step) if cfg.eval_every and step == 0 else {}
    bar = progress(total=total, initial=step, unit="step", unit_scale=False, **({} if world.main else {"disable": True}))
    window, norm, loss = np.zeros(7), 0.0, None  # window: loss, real tokens, slots, rows, FLOPs, good steps, seconds
    guard, params = Guard(cfg.max_bad_steps, cfg.out), [p for p in model.parameters() if p.requires_grad]
    while step < total:
        if plan is None:
            split, plan = epoch_plan(cfg, world, epoch, n_seeds)
            targets = row_targets(split, collator)
        bar.set_description(f"epoch {epoch} ({epoch_split(manifest, epoch, n_seeds)})")
        t0, lr = time.perf_counter(), lr_at(step, cfg, horizon)
        for group in optimizer.param_groups:
            group["lr"] = lr
        step_loss, counts = train_batch(ddp, plan[cursor], split, targets, collator, adapter, cfg=cfg, world=world,
                                        step=step, run=run, hook=hook, forward=forward)
        step_loss, norm, bad = checked(world, step_loss, grad_norm(params, cfg.grad_clip))  # the step's one sync
        if bad:  # not applied: the optimizer never sees these gradients
            optimizer.zero_grad(set_to_none=True)
            rows = sorted(int(r) for rank in plan[cursor].ranks for mb in rank if not mb.padding for r in mb.rows)
            record(run, world, event="nonfinite", step=step, value=bad, loss=step_loss, grad_norm=norm, rows=rows)
            say(world, f"step {step}: non-finite {bad}; the step is skipped ({guard.streak + 1} in a row, "
                       f"--max-bad-steps {cfg.max_bad_steps})")
            guard.bad(step, bad)
        elif not batch_targets(plan[cursor], targets):  # caps cut every label token off: nothing to learn
            optimizer.zero_grad(set_to_none=True)
            rows = sorted(int(r) for rank in plan[cursor].ranks for mb in rank if not mb.padding for r in mb.rows)
            record(run, world, event="no_targets", step=step, rows=rows)
            say(world, f"step {step}: its rows have no label token left (--max-encoder-len / --max-decoder-len); "
                       "the step is skipped")
        else:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            guard.good(step)
            window[:6] += [step_loss, *counts, 1]
        window[6] += time.perf_counter() - t0
        step, cursor = step + 1, cursor + 1
        if cursor == len(plan):
            epoch, cursor, plan = epoch + 1, 0, None
        bar.update(1)

        save = due(step, cfg.save_every, total)
        if due(step, cfg.log_every, total) or save:  # the same steps on every rank: all_sum matches
            line = window_metrics(world, window)
            loss = line["loss"]
            state.update(logged_step=step, tokens=state["tokens"] + line["tokens"], examples=state["examples"] + line["examples"],
                         train_s=state.get("train_s", 0.0) + float(window[6]))
            record(run, world, step=step, epoch=epoch_of_last(epoch, cursor, step), lr=lr, grad_norm=norm, **line)
            reporters.report(writer, {"step": step, "epoch": epoch_of_last(epoch, cursor, step), "lr": lr, "grad_norm": norm,
                                      **line})
            if bar.disable:  # off a terminal (a log file, a batch job): the bar's figures as a line
                say(world, log_line(step, total, epoch_of_last(epoch, cursor, step), lr, line))
            bar.set_postfix(loss=f"{loss:.3f}" if loss is not None else "-", lr=f"{lr:.2e}",
                            tok_s=f"{line['tokens_per_s']:.0f}", pad=f"{line['padding_efficiency']:.2f}",
                            tflops=f"{line['tflops']:.3g}",
                            **({"mem_gb": f"{line['peak_memory_gb']:.1f}"} if "peak_memory_gb" in line else {}))
            window[:] = 0
        if due(step, cfg.eval_every, total):
            metrics = run_eval(step)
        if save:
            state.update(epoch=epoch, cursor=cursor, adapt=adapter.state_dict())
            checkpoint.save(run, step, model=model, optimizer=optimizer, state=state, cfg=cfg, rank=world.rank,
                            world_size=world.size)
    bar.close()
    if not metrics:  # no evaluation yet (say, a run killed after its last checkpoint, resumed): evaluate now
        metrics = run_eval(step)
    train_s = state.get("train_s", 0.0)
    final = {"step": step, "epoch": epoch_of_last(epoch, cursor, step), "loss": loss, **metrics, "tokens": state["tokens"], "examples": state["examples"],
             "wall_s": time.perf_counter() - started, "train_s": train_s,
             "tokens_per_s": state["tokens"] / train_s if train_s else 0.0}
    if world.main:
        write_json(run / "final_metrics.json", final)
    if writer is not None:
        writer.close()
    if on_end is not None:
        on_end(model)
    return final
