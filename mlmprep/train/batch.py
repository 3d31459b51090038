"""Batch plan: which rows train together, as a pure function of (lengths, budget, seed, epoch, world size).

Budgets count what the GPU computes, padding included: a microbatch of B rows costs
B * roundup(max encoder length) + alpha * B * roundup(max decoder length) (alpha = 2: a decoder token
costs about twice an encoder token). A batch is one optimizer step across all ranks; its microbatches
are dealt to ranks, and every rank runs the same number of them so DDP's all-reduce never waits on a
rank that has run out. Every rank computes the same plan from the same arguments, so nothing is sent.

    shuffle rows (seed, epoch) -> sort by length inside large pools -> cut microbatches under the caps
    -> shuffle microbatches -> fill batches under the step budget -> deal each batch's microbatches to ranks
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch.utils.data
from numba import njit

from mlmprep.errors import ConfigError
from mlmprep.format.rows import starts_of

log = logging.getLogger(__name__)

POOL_BATCHES = 64  # rows are length-sorted in pools of ~64 batches: padding under 1%, batches still mixed


@dataclass(frozen=True)
class Budget:
    """Token budgets in padded cost units (see the module docstring); checked on construction."""

    max_tokens_per_batch: int  # per optimizer step, summed over every rank's microbatches
    max_tokens_per_microbatch: int  # per forward/backward pass on one device
    max_examples_per_microbatch: int
    alpha: float = 2.0  # cost of a decoder token relative to an encoder token
    pad_to_multiple_of: int = 1  # the collator pads to this multiple; the budget counts the same slots

    def __post_init__(self) -> None:
        for option in ("max_tokens_per_batch", "max_tokens_per_microbatch", "max_examples_per_microbatch",
                       "pad_to_multiple_of"):
            value = getattr(self, option)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"--{option.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if self.max_tokens_per_microbatch > self.max_tokens_per_batch:
            raise ConfigError(
                f"--max-tokens-per-microbatch ({self.max_tokens_per_microbatch}) must not exceed "
                f"--max-tokens-per-batch ({self.max_tokens_per_batch}): a batch is one or more microbatches"
            )
        if not (isinstance(self.alpha, (int, float)) and 0.0 <= self.alpha < float("inf")):
            raise ConfigError(f"--alpha must be a number >= 0, got {self.alpha!r}; 2.0 weighs decoder tokens double")


@dataclass(eq=False, slots=True)  # not frozen: a plan makes one per microbatch, and frozen fields are set slowly
class Microbatch:
    """Rows for one forward/backward pass on one rank.

    padding: a stand-in (one real row) for a rank with fewer microbatches than the others in this step;
    run it with loss weight 0 so DDP's collectives match, never count it. oversize: a lone row whose cost
    alone exceeds max_tokens_per_microbatch (it is trained, not dropped; the trainer may warn or cap it).
    """

    rows: np.ndarray  # int64 [B], indices into the split
    padding: bool = False
    oversize: bool = False


@dataclass(frozen=True, eq=False)
class Batch:
    """One optimizer step: ranks[r] are rank r's microbatches; every rank has the same number."""

    ranks: tuple[tuple[Microbatch, ...], ...]


def _roundup(x, multiple):
    return -(-x // multiple) * multiple


def padded_cost(enc_lengths: np.ndarray, dec_lengths: np.ndarray, rows: np.ndarray, budget: Budget) -> float:
    """Cost of `rows` as one padded microbatch: B * roundup(max enc) + alpha * B * roundup(max dec)."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return 0.0
    m = budget.pad_to_multiple_of
    enc = _roundup(int(enc_lengths[rows].max()), m)
    dec = _roundup(int(dec_lengths[rows].max()), m)
    return float(len(rows) * enc + budget.alpha * len(rows) * dec)


@njit(cache=True)
def _sort_pools(order, key, pool):
    """`order` (int64 [n]) with each run of `pool` rows stably sorted by key[row] (float64 >= 0): an LSD radix sort
    of the keys' bits, which for numbers >= 0 order as the numbers do, skipping the bytes every row of a pool shares
    (integer costs vary in two or three)."""
    n = len(order)
    rows, bits = order.copy(), key[order].view(np.uint64)
    rows_out, bits_out = np.empty_like(rows), np.empty_like(bits)
    count = np.empty(257, dtype=np.int64)
    for a in range(0, n, pool):
        b = min(a + pool, n)
        every, some = ~np.uint64(0), np.uint64(0)
        for i in range(a, b):
            every &= bits[i]
            some |= bits[i]
        for p in range(8):
            shift = np.uint64(8 * p)
            if ((every ^ some) >> shift) & np.uint64(255) == 0:
                continue
            count[:] = 0
            for i in range(a, b):
                count[((bits[i] >> shift) & np.uint64(255)) + 1] += 1
            for d in range(256):
                count[d + 1] += count[d]
            for i in range(a, b):  # a stable scatter: rows with the same byte keep their order
                d = (bits[i] >> shift) & np.uint64(255)
                rows_out[a + count[d]] = rows[i]
                bits_out[a + count[d]] = bits[i]
                count[d] += 1
            rows[a:b] = rows_out[a:b]
            bits[a:b] = bits_out[a:b]
    return rows


@njit(cache=True)
def _cut(enc, dec, multiple, alpha, max_tokens, max_examples, pool):
    """Greedy microbatches over rows in order (enc, dec int64 [n]), cutting at every `pool` rows too.

    Returns (ends int64 [k]: one past each microbatch's last row, costs float64 [k]).
    """
    n = len(enc)
    ends = np.empty(n, dtype=np.int64)
    costs = np.empty(n, dtype=np.float64)
    k = 0
    size = 0
    max_enc = 0
    max_dec = 0
    for i in range(n):
        e = max(max_enc, -(-enc[i] // multiple) * multiple)
        d = max(max_dec, -(-dec[i] // multiple) * multiple)
        cost = (size + 1) * (e + alpha * d)
        if size > 0 and (cost > max_tokens or size == max_examples or i % pool == 0):
            ends[k] = i
            costs[k] = size * (max_enc + alpha * max_dec)
            k += 1
            size = 0
            e = -(-enc[i] // multiple) * multiple
            d = -(-dec[i] // multiple) * multiple
        size += 1
        max_enc = e
        max_dec = d
    if size > 0:
        ends[k] = n
        costs[k] = size * (max_enc + alpha * max_dec)
        k += 1
    return ends[:k], costs[:k]


def split_microbatches(rows: np.ndarray, enc_lengths: np.ndarray, dec_lengths: np.ndarray,
                       budget: Budget) -> list[np.ndarray]:
    """Sort `rows` by length and cut them greedily into microbatches within both microbatch caps.

    A row whose cost alone is over max_tokens_per_microbatch gets a microbatch of its own (never dropped);
    `padded_cost(...) > budget.max_tokens_per_microbatch` on a one-row result tells it apart.
    """
    rows = np.asarray(rows, dtype=np.int64)
    enc, dec = np.asarray(enc_lengths, dtype=np.int64), np.asarray(dec_lengths, dtype=np.int64)
    rows = rows[np.argsort(enc[rows] + budget.alpha * dec[rows], kind="stable")]
    ends, _ = _cut(enc[rows], dec[rows], budget.pad_to_multiple_of, float(budget.alpha),
                   float(budget.max_tokens_per_microbatch), budget.max_examples_per_microbatch, max(len(rows), 1))
    return np.split(rows, ends[:-1])


@njit(cache=True)
def _group(costs, max_tokens, world_size):
    """Batch ends over microbatches in order: fill up to `max_tokens`; then, unless it is the last batch,
    hand the last (count % world_size) microbatches on to the next batch so that no rank idles."""
    m = len(costs)
    ends = np.empty(m, dtype=np.int64)
    k = 0
    i = 0
    while i < m:
        total = costs[i]
        j = i + 1
        while j < m and total + costs[j] <= max_tokens:
            total += costs[j]
            j += 1
        count = j - i
        if j < m and count > world_size and count % world_size:
            j -= count % world_size
        ends[k] = j
        k += 1
        i = j
    return ends[:k]


@njit(cache=True)
def _deal(costs, batch_ends, world_size):
    """Rank of each microbatch: per batch, largest cost first to the least-loaded rank that still has
    room, where room is ceil(count / world_size) microbatches per rank. int64 [m]."""
    rank = np.empty(len(costs), dtype=np.int64)
    start = 0
    for end in batch_ends:
        room = -(-(end - start) // world_size)
        load = np.zeros(world_size, dtype=np.float64)
        count = np.zeros(world_size, dtype=np.int64)
        for j in start + np.argsort(-costs[start:end], kind="mergesort"):
            best = -1
            for r in range(world_size):
                if count[r] < room and (best < 0 or load[r] < load[best]):
                    best = r
            rank[j] = best
            load[best] += costs[j]
            count[best] += 1
        start = end
    return rank


def plan_epoch(enc_lengths: np.ndarray, dec_lengths: np.ndarray, budget: Budget, *, seed: int, epoch: int,
               world_size: int = 1) -> list[Batch]:
    """The batches of one epoch, identical on every rank; every row is in exactly one real microbatch.

    Microbatches are capped at min(max_tokens_per_microbatch, max_tokens_per_batch // world_size) so a
    step has work for every rank. A rank short of microbatches in a step gets a padding one.
    """
    enc, dec = np.asarray(enc_lengths, dtype=np.int64), np.asarray(dec_lengths, dtype=np.int64)
    if enc.shape != dec.shape or enc.ndim != 1:
        raise ConfigError(f"enc_lengths {enc.shape} and dec_lengths {dec.shape} must be 1-D and the same length")
    if world_size < 1:
        raise ConfigError(f"world size must be >= 1, got {world_size}")
    n = len(enc)
    if n == 0:
        return []
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, int(epoch)])  # int(): a NumPy seed has no 64-bit mask
    key = enc + budget.alpha * dec  # [n] unpadded cost per row
    cap = min(budget.max_tokens_per_microbatch, budget.max_tokens_per_batch // world_size)
    pool = max(1, int(POOL_BATCHES * budget.max_tokens_per_batch / max(key.mean(), 1.0)))

    order = _sort_pools(rng.permutation(n), key, pool)
    ends, costs = _cut(enc[order], dec[order], budget.pad_to_multiple_of, float(budget.alpha), float(cap),
                       budget.max_examples_per_microbatch, pool)
    shuffle = rng.permutation(len(ends))
    starts, ends, costs = np.append(0, ends[:-1])[shuffle], ends[shuffle], costs[shuffle]
    batch_ends = _group(costs, float(budget.max_tokens_per_batch), world_size)
    rank = _deal(costs, batch_ends, world_size).tolist()

    oversize = costs > budget.max_tokens_per_microbatch  # only ever lone rows: _cut never grows a group past cap
    if oversize.any():
        log.warning("%d rows cost more than --max-tokens-per-microbatch %d on their own; each trains alone",
                    int(oversize.sum()), budget.max_tokens_per_microbatch)
    mbs = [Microbatch(order[a:b], oversize=o) for a, b, o in zip(starts.tolist(), ends.tolist(), oversize.tolist())]
    plan, start = [], 0
    for end in batch_ends.tolist():
        per_rank = [[] for _ in range(world_size)]
        for mb, r in zip(mbs[start:end], rank[start:end]):
            per_rank[r].append(mb)
        room = -(-(end - start) // world_size)
        if room * world_size != end - start:  # a stand-in: the shortest row of the batch's cheapest microbatch
            stand_in = Microbatch(rows=mbs[start + int(np.argmin(costs[start:end]))].rows[:1], padding=True)
            per_rank = [r + [stand_in] * (room - len(r)) for r in per_rank]
        plan.append(Batch(ranks=tuple(map(tuple, per_rank))))
        start = end
    return plan


def plan_stats(plan: list[Batch], enc_lengths: np.ndarray, dec_lengths: np.ndarray, budget: Budget) -> dict[str, float]:
    """What a plan costs: real tokens, padded slots, their ratio (padding efficiency), counts per kind."""
    mbs = [mb for batch in plan for rank in batch.ranks for mb in rank]
    real = [mb for mb in mbs if not mb.padding]
    sizes = np.array([len(mb.rows) for mb in real], dtype=np.int64)  # [k]
    rows = np.concatenate([mb.rows for mb in real]) if real else np.zeros(0, np.int64)
    tokens = int(enc_lengths[rows].sum() + dec_lengths[rows].sum())
    padded = 0
    if real:
        starts = starts_of(sizes)[:-1]
        for lengths in (enc_lengths, dec_lengths):
            padded += int((sizes * _roundup(np.maximum.reduceat(lengths[rows], starts),
                                            budget.pad_to_multiple_of)).sum())
    return {
        "batches": len(plan),
        "microbatches": len(real),
        "padding_microbatches": len(mbs) - len(real),
        "oversize_microbatches": sum(mb.oversize for mb in real),
        "real_tokens": tokens,
        "padded_tokens": padded,
        "padding_efficiency": tokens / padded if padded else 1.0,
        "tokens_per_batch": tokens / len(plan) if plan else 0.0,
    }


class TokenBudgetBatchSampler(torch.utils.data.Sampler):
    """Token-budget batches for a plain DataLoader (`batch_sampler=`) or an HF Trainer's train dataloader.

    Each item is the list of row indices rank `rank` runs in one batch of `plan_epoch`, all its
    microbatches flattened (the DataLoader collates them as one tensor batch, so the microbatch caps do
    not bound it; use plan_epoch directly to run microbatches). A rank with only a padding microbatch in
    a step gets its stand-in row, which a plain loader counts like any other. Call set_epoch(e) per epoch.
    """

    def __init__(self, enc_lengths: np.ndarray, dec_lengths: np.ndarray, budget: Budget, *, seed: int,
                 epoch: int = 0, world_size: int = 1, rank: int = 0):
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is not in [0, world size {world_size})")
        self.enc_lengths, self.dec_lengths, self.budget = enc_lengths, dec_lengths, budget
        self.seed, self.world_size, self.rank = seed, world_size, rank
        self.set_epoch(epoch)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.plan = plan_epoch(self.enc_lengths, self.dec_lengths, self.budget, seed=self.seed, epoch=epoch,
                               world_size=self.world_size)

    def __len__(self) -> int:
        return len(self.plan)

    def __iter__(self):
        for batch in self.plan:
            mine = batch.ranks[self.rank]
            real = [mb.rows for mb in mine if not mb.padding] or [mine[0].rows]
            yield np.concatenate(real).tolist()


__all__ = [
    "Batch", "Budget", "Microbatch", "TokenBudgetBatchSampler", "padded_cost", "plan_epoch", "plan_stats",
    "split_microbatches",
]
