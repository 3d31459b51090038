"""The ranks of a run (one process, or one rank of a torchrun launch) and what only rank 0 does: console lines
and metrics.jsonl records."""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from tqdm import tqdm

from mlmprep.config import TrainConfig
from mlmprep.format.write import strict


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


def say(world: World, text: str) -> None:
    """A console line from rank 0 that does not break the progress bar."""
    if world.main:
        tqdm.write(text, file=sys.stderr)


def record(run: Path, world: World, **fields) -> None:
    """Append one JSON line to RUN/metrics.jsonl (rank 0 only)."""
    if world.main:
        with open(run / "metrics.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(strict(fields), sort_keys=True, allow_nan=False) + "\n")
