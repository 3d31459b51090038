"""One optimizer step: forward/backward of a batch's microbatches with exact gradients, the retry of a batch that
ran out of memory, and applying or skipping its gradients.

Each microbatch's loss is its summed token cross-entropy divided by the label tokens of the whole batch (all
microbatches, all ranks), so the accumulated gradient is the gradient of the batch's mean per-token loss, however
the batch is cut. An out-of-memory error shrinks the microbatch limits of the batch's length regime and retries
the same batch (mlmprep.train.adapt).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from mlmprep.config import TrainConfig
from mlmprep.train.adapt import Adapter, Limits, regime_of
from mlmprep.train.batch import Batch, padded_cost, split_microbatches
from mlmprep.train.collate import Collator
from mlmprep.train.epochs import make_budget, user_limits
from mlmprep.train.loss import batch_loss, logits_of, row_losses, summed_loss
from mlmprep.train.mixture_run import add_source_losses, mixture_denoisers, source_sums
from mlmprep.train.numerics import flop_counter, grad_norm
from mlmprep.train.optim import lr_at
from mlmprep.train.speed import Forward, collate_ahead, compile_model_and_loss, compile_wanted, shape_key
from mlmprep.train.state import Epoch, Hook, Run, TrainState, Window
from mlmprep.train.world import World, all_sum, autocast, record, say


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
                        loss_sum = batch_loss(logits, mb, forward.loss)
                    else:
                        per_row = row_losses(logits, mb["labels"])
                        if "rate" in mb:
                            per_row = per_row / mb["rate"].to(per_row.dtype)
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


def checked(world: World, loss: torch.Tensor, norm: torch.Tensor) -> tuple[float, float, str]:
    """(loss, gradient norm, what is not finite: "" / "loss" / "grad_norm") with one host-device sync; under
    DDP a value that is bad on any rank is bad on all, so every rank skips the same steps."""
    values = torch.stack([loss.double(), norm.double()])
    flags = all_sum(world, (~torch.isfinite(values)).double())
    loss_v, norm_v, bad_loss, bad_norm = torch.cat([values, flags]).tolist()
    return loss_v, norm_v, "loss" if bad_loss else "grad_norm" if bad_norm else ""


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


def train_step(run: Run, state: TrainState, epoch: Epoch, window: Window) -> tuple[float, float]:
    """One optimizer step on the batch at state.cursor: set the learning rate, forward/backward the batch, then
    apply the gradients, or drop them if they are not finite or the batch has no label token. Adds the step to
    `window`, moves `state` past it and returns (learning rate, gradient norm)."""
    t0, lr = time.perf_counter(), lr_at(state.step, run.cfg, run.horizon)
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    batch = epoch.plan[state.cursor]
    groups, sums = step_groups(run, epoch)
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
            add_source_losses(run, batch, groups, epoch.targets, sums, window)
    window.seconds += time.perf_counter() - t0
    state.advance(len(epoch.plan))
    return lr, norm


def step_groups(run: Run, epoch: Epoch) -> tuple[np.ndarray | None, torch.Tensor | None]:
    """(each row's group, the step's summed losses per group, zero on the device) whose training losses are logged:
    a mixture's sources (each split by denoiser, source * D + denoiser, when its builds share D denoisers), a ul2 or
    prefix build's denoisers; (None, None) otherwise."""
    if epoch.chunk is not None:
        shared = len(mixture_denoisers(run))
        groups = epoch.chunk.source * shared + epoch.chunk.split.denoiser if shared else epoch.chunk.source
        return groups, source_sums(run)
    split = epoch.split
    if split.denoiser is None or not split.denoisers:
        return None, None
    return split.denoiser.astype(np.int64), torch.zeros(len(split.denoisers), dtype=torch.float64,
                                                        device=run.world.device)


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
