"""What the training loop holds: `TrainState`, its position and totals (a checkpoint's state.json); `Epoch`, the
rows and plan it trains on; `Window`, the counters of the next metrics line; `Run`, what stays fixed for the whole
run; and the checkpoint that saves them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from mlmprep.config import TrainConfig
from mlmprep.format.load import Split
from mlmprep.format.manifest import Manifest
from mlmprep.train import checkpoint
from mlmprep.train.adapt import Adapter
from mlmprep.train.batch import Batch
from mlmprep.train.collate import Collator
from mlmprep.train.mixture import Chunk, MixturePlan
from mlmprep.train.numerics import Guard
from mlmprep.train.speed import Forward
from mlmprep.train.world import World

Hook = Callable[[int, int, np.ndarray, bool], None]  # (step, microbatch index, rows, padding) before each forward


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
    tokenizer: object  # the build's tokenizer, checked before the first step; each checkpoint saves it
    mix: MixturePlan | None = None  # a mixture's plan (then val is mixture_validation()'s list)


def save_checkpoint(run: Run, state: TrainState) -> None:
    """checkpoint-{step}: weights, optimizer, every rank's RNG states and `state` with the adapter's limits."""
    state.adapt = run.adapter.state_dict()
    saved = asdict(state)
    if run.mix is not None:
        saved["mixture"] = run.mix.saved()
    checkpoint.save(run.out, saved, model=run.model, optimizer=run.optimizer, tokenizer=run.tokenizer,
                    max_length=run.manifest.input_length, cfg=run.cfg, rank=run.world.rank, world_size=run.world.size)
