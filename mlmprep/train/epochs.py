"""The data of each epoch as the run reads it: the token budget from the options, the epoch's split and its batch
plan (the same on every rank), the label tokens of its rows, and the number of steps the run trains."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlmprep import storage
from mlmprep.config import MAX_TOKENS, TrainConfig
from mlmprep.errors import CacheError, MlmprepError
from mlmprep.format import cache as remote
from mlmprep.format import regular
from mlmprep.format.load import check_split_hashes, epoch_split, read_manifest
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
               *, planning: bool = False, identity: str | None = None, rehash: bool = False):
    """(split, batches) of an epoch: the same plan on every rank; `seeds`: see load.epoch_split. A mixture's
    epoch is its plan's chunk `epoch`. A DATA URL's split is fetched into the local cache first (`planning`: only
    its row lengths are needed). With `identity` the build must still be the one the run planned on; with `rehash`
    (or --rehash-data) its files' sha256 are checked as it opens."""
    if mix is not None:
        chunk = mix.chunk(epoch)
        return chunk.split, chunk.plan
    split = remote.open_epoch(cfg.data, epoch, seeds, planning=planning, identity=identity,
                              rehash=rehash or cfg.rehash_data)
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


def next_epoch(run: Run, index: int, seeds: int, identity: str, ahead: Ahead | None) -> Epoch:
    """Epoch `index`: its split, checked to be of the build the run planned on (`identity`) and, once `ahead`'s
    check of its files' sha256 is done, its plan (the same on every rank) and the label tokens of its rows. A
    check that failed is done once more here, before a step reads the files, and only that one counts (the
    background one may have met a build being replaced): a mismatch stops the run in one line. Without `ahead`
    (a URL's files are hashed by the cache as they land; a mixture's as each pass opens them), the split opens
    as it is."""
    failed = ahead is not None and ahead.index == index and ahead.future.exception() is not None
    split, plan = epoch_plan(run.cfg, run.world, index, seeds, run.mix, identity=identity, rehash=failed)
    return make_epoch(index, split, plan, run.collator, run.manifest, seeds, run.mix)


@dataclass
class Ahead:
    """The sha256 check of epoch `index`'s split files, running while the epoch before it trains; `future` ends with
    None or the check's CacheError. `children`: the hashing processes, which `stop` kills."""

    index: int
    future: Future
    children: list = field(default_factory=list)
    stopped: bool = False

    def stop(self) -> None:
        self.stopped = True
        for child in self.children:
            child.kill()


def hash_ahead(run: Run, index: int, seeds: int) -> Ahead | None:
    """Start checking epoch `index`'s split files against the manifest's sha256 (load.check_split_hashes), hashed
    by a child process at the lowest CPU priority (child_digests) that a daemon thread waits on; None for a mixture
    or a build from a URL, whose files are hashed otherwise (next_epoch)."""
    if run.mix is not None or storage.is_url(run.cfg.data):
        return None
    ahead = Ahead(index, Future())

    def work() -> None:
        try:
            manifest = read_manifest(run.cfg.data)
            check_split_hashes(Path(run.cfg.data), manifest, epoch_split(manifest, index, seeds),
                               digests=lambda paths: child_digests(paths, ahead))
        except MlmprepError as exc:
            ahead.future.set_exception(exc)
        else:
            ahead.future.set_result(None)

    threading.Thread(target=work, name=f"mlmprep-hash-epoch-{index}", daemon=True).start()
    return ahead


def child_digests(paths: list[Path], ahead: Ahead | None = None) -> list[str]:
    """The sha256 of each of `paths` ("-": unreadable), from mlmprep/format/regular.py run as a script (nice 19):
    a process shares no GIL with the loader, and the scheduler gives it only the CPU the run leaves. It needs only
    the standard library, so it starts isolated and without site-packages (-I -S: their start-up is most of the
    check's own). Killed by `ahead.stop()`, it gives "-" for the files it did not hash."""
    if ahead is not None and ahead.stopped:
        return ["-"] * len(paths)
    nice = [found, "-n", "19"] if (found := shutil.which("nice")) else []  # its start-up too, not only the hashing
    with subprocess.Popen([*nice, sys.executable, "-I", "-S", regular.__file__, *map(str, paths)],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) as child:
        if ahead is not None:
            ahead.children.append(child)
        out, _ = child.communicate()
    found = out.decode("ascii", "replace").split()
    return found + ["-"] * (len(paths) - len(found))
