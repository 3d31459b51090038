"""`mlmprep train`: pretrain T5 (span data) or a BERT-style model (mlm data) on a build. `run_fit` reads top to
bottom like torchtitan's and nanoT5's train(): open RUN and the data (mlmprep.train.prepare), set up, then loop
over `train_step` (one optimizer step, mlmprep.train.step) with `log_window`, `evaluate_and_log` and
`save_checkpoint` each on its own schedule, and write the final metrics.

One optimizer step is one token-budget batch of the epoch's plan (mlmprep.train.batch); epoch e reads split
seed-{e % N}. `TrainState` (mlmprep.train.state) is the loop's position and totals, a checkpoint's state.json.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch.distributed as dist

from mlmprep.config import TrainConfig
from mlmprep.format import cache as remote
from mlmprep.progress import progress
from mlmprep.train.epochs import Ahead, hash_ahead, next_epoch
from mlmprep.train.evaluation import evaluate_build
from mlmprep.train.logs import due, finish, log_window, record_fetch
from mlmprep.train.mixture_run import evaluate_mixture
from mlmprep.train.prepare import open_data, start
from mlmprep.train.speed import deterministic_kernels
from mlmprep.train.state import Epoch, Hook, Run, TrainState, Window, save_checkpoint
from mlmprep.train.step import train_step
from mlmprep.train.world import World, init_world


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
    opening = open_data(cfg, world)  # what a resume reads, and the steps to train
    if opening.done is not None:  # already trained that far: nothing changes
        return opening.done
    run, state, epoch = start(cfg, world, opening, hook)
    record_fetch(run, state)

    # -- the loop: one optimizer step, then logging, evaluation and a checkpoint, each on its own schedule
    metrics = evaluate_and_log(run, state.step) if cfg.eval_every and state.step == 0 else {}
    bar = progress(total=run.total, initial=state.step, unit="step", unit_scale=False,
                   **({} if world.main else {"disable": True}))
    window, loss = Window(), None
    ahead = check_next(run, state, epoch)
    while state.step < run.total:
        if epoch.index != state.epoch:  # the previous step was its epoch's last
            epoch = next_epoch(run, state.epoch, state.seeds, state.data, ahead)
            ahead = check_next(run, state, epoch)
            record_fetch(run, state)
        bar.set_description(epoch.name if epoch.chunk is not None else f"epoch {epoch.index} ({epoch.name})")
        lr, norm = train_step(run, state, epoch, window)
        bar.update(1)
        save = due(state.step, cfg.save_every, run.total)
        if due(state.step, cfg.log_every, run.total) or save:  # the same steps on every rank: all_sum matches
            loss, window = log_window(run, state, window, lr, norm, bar), Window()
        if due(state.step, cfg.eval_every, run.total):
            metrics = evaluate_and_log(run, state.step)
        if save:
            save_checkpoint(run, state)
    bar.close()
    if ahead is not None:
        ahead.stop()
    if not metrics:  # no evaluation yet (say, a run killed after its last checkpoint, resumed): evaluate now
        metrics = evaluate_and_log(run, state.step)
    final = finish(run, state, loss, metrics, started)
    remote.close(cfg.data)
    if on_end is not None:
        on_end(run.model)
    return final


def check_next(run: Run, state: TrainState, epoch: Epoch) -> Ahead | None:
    """The background sha256 check of the next epoch's files while `epoch` trains (epochs.hash_ahead), when the run
    reaches that epoch."""
    if state.step + len(epoch.plan) - state.cursor >= run.total:
        return None
    return hash_ahead(run, epoch.index + 1, state.seeds)


def evaluate_and_log(run: Run, step: int) -> dict:
    """Evaluate on the validation sets and log it ({} without validation rows)."""
    if not run.val:
        return {}
    return evaluate_build(run, step) if run.mix is None else evaluate_mixture(run, step)
