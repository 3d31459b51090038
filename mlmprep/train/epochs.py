"""The data of each epoch as the run reads it: the token budget from the options, the epoch's split and its batch
plan (the same on every rank), the label tokens of its rows, and the number of steps the run trains."""

from __future__ import annotations

import numpy as np

from mlmprep.config import MAX_TOKENS, TrainConfig
from mlmprep.errors import CacheError
from mlmprep.format import cache as remote
from mlmprep.format.load import epoch_split
from mlmprep.format.manifest import Manifest
from mlmprep.format.rows import IGNORE
from mlmprep.train.adapt import Limits
from mlmprep.train.batch import Batch, Budget, plan_epoch
from mlmprep.train.collate import Collator
from mlmprep.train.mixture import MixturePlan
from mlmprep.train.state import Epoch, Run
from mlmprep.train.world import World


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


def row_targets(split, collator: Collator) -> np.ndarray:
    """Label tokens per row as the collator presents them, int64 [n]: split.n_targets, unless caps cut rows."""
    if collator.max_encoder_len is None and collator.max_decoder_len is None:
        return split.n_targets
    chunks = np.array_split(np.arange(len(split)), max(1, len(split) // 4096))
    return np.concatenate([(collator.from_split(split, rows)["labels"] != IGNORE).sum(1).numpy() for rows in chunks])


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
