"""Mixtures: several builds trained together, each contributing a set fraction of the training tokens.

A weight is the fraction of training tokens (window tokens, before masking) a source contributes, whatever its
window length. Weights are given, or come from the sources' sizes n_i (window tokens of one pass):
proportional n_i / sum n; temperature:T n_i^(1/T) / sum n^(1/T); cap:K min(n_i, K) / sum min(n, K) (the T5
paper's temperature-scaled and examples-proportional-with-limit mixing).

Each source keeps its own epoch: its rows in an order that is a pure function of (run seed, its name, its pass),
a cursor, and a pass counter p_i; pass p_i reads seed-{p_i % N_i}, so a source repeated three times is three
different puzzles. The step plan is one deterministic function of the sources, the weights, the budget, the
seed and the world size (the same on every rank): it is cut into chunks of about CHUNK_BATCHES batches; a chunk
takes from each source, at its cursor, rows worth its weight's share of the chunk's window tokens (what is left
over is carried to the next chunk, so the achieved fractions track the weights to within a row), picks them
into one split (mlmprep.format.load.pick_rows: a copy of just those rows, one buffer per column, which collates
as fast as one build) and plans them as an epoch (plan_epoch: length-sorted in pools, token-budget batches).
Weights may change at a step (a resume): a chunk running past that step is cut there, and the rows it had taken
but not trained go back to the front of their sources' queues, so nothing is skipped or repeated.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch.utils.data

from mlmprep.config import SEQ2SEQ, source_spec
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format.load import Split, epoch_split, open_epoch, pick_rows, read_manifest
from mlmprep.format.manifest import Manifest
from mlmprep.train.batch import POOL_BATCHES, Batch, Budget, TokenBudgetBatchSampler, padded_cost, plan_epoch

STRATEGIES = ("proportional", "temperature", "cap")
CHUNK_BATCHES = POOL_BATCHES  # batches a chunk of the plan is sized for: one length-sorting pool
WEIGHTS_MEAN = "the fraction of training tokens (window tokens, before masking) it contributes"


# ----------------------------------------------------------------------------- weights
def parse_weights(text: str | Sequence[float], count: int) -> np.ndarray:
    """--weights "0.6,0.3,0.1" (or numbers) for `count` sources, normalised to sum 1; one line when a weight is not
    a positive finite number or the count differs."""
    items = text.split(",") if isinstance(text, str) else list(text)
    values = []
    for item in items:
        try:
            value = float(item)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"--weights: {str(item).strip()!r} is not a positive finite number; give one weight > 0 "
                              "per source, e.g. --weights 0.8,0.2")
        values.append(value)
    if len(values) != count:
        raise ConfigError(f"--weights: {len(values)} weights for {count} sources; give one per DATA, in their order")
    weights = np.asarray(values, dtype=np.float64)
    return weights / weights.sum()


def parse_mix(text: str) -> tuple[str, float]:
    """--mix: proportional, temperature:T (T > 0) or cap:K (K > 0 window tokens)."""
    kind, _, value = str(text).partition(":")
    if kind == "proportional" and not value:
        return kind, 0.0
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if kind not in STRATEGIES[1:] or not (math.isfinite(number) and number > 0):
        raise ConfigError(f"--mix {text}: give proportional, temperature:T (T > 0, e.g. temperature:2) or cap:K "
                          "(K > 0 window tokens, e.g. cap:1000000)")
    return kind, number


def mix_weights(tokens: Sequence[int], mix: str) -> np.ndarray:
    """Each source's fraction of the training tokens under strategy `mix`, from its size in window tokens."""
    kind, value = parse_mix(mix)
    n = np.asarray(tokens, dtype=np.float64)
    rates = {"proportional": lambda: n, "temperature": lambda: n ** (1.0 / value),
             "cap": lambda: np.minimum(n, value)}[kind]()
    return rates / rates.sum()


# ----------------------------------------------------------------------------- sources
@dataclass(frozen=True, eq=False)
class Source:
    """One build of a mixture: its name (metrics, --validation NAME=DIR), directory and manifest, the seed splits it
    reads (pass p reads seed-{p % seeds}) and its size, the window tokens of one pass."""

    name: str
    path: Path
    manifest: Manifest
    seeds: int
    tokens: int

    def split(self, pass_: int) -> Split:
        """The split pass `pass_` reads: the one call that opens a seed split of a source (once a run), checked to be
        of the build the mixture was planned on, its files' sha256 the recorded ones."""
        return open_epoch(self.path, pass_, self.seeds, identity=self.manifest.identity(self.seeds), rehash=True)

    def seed_name(self, pass_: int) -> str:
        return epoch_split(self.manifest, pass_, self.seeds)


def row_window_tokens(split: Split, manifest: Manifest) -> np.ndarray:
    """Window tokens (before masking) per row, int64 [n]: the build's window length for fixed-length rows; for
    variable-length rows the row's tokens scaled by the window's share of the longest row's."""
    if manifest.fixed:
        return np.full(len(split), manifest.window_length, dtype=np.int64)
    corrupted = manifest.input_length + (manifest.target_length if manifest.objective in SEQ2SEQ else 0)
    real = split.enc_lengths + split.dec_lengths
    return np.maximum(1, np.rint(real * (manifest.window_length / corrupted))).astype(np.int64)


def parse_source(spec: str | Path | tuple[str, str | Path]) -> tuple[str, Path]:
    """(name, path) of "PATH", "NAME=PATH" or (NAME, PATH); the name defaults to the directory's."""
    if isinstance(spec, tuple):
        return str(spec[0]), Path(spec[1])
    return source_spec(spec)


def open_mixture(builds: Sequence, *, weights: str | Sequence[float] | None = None, mix: str | None = None,
                 seeds: Sequence[int] | None = None) -> Mixture:
    """A mixture of builds ("PATH", "NAME=PATH" or (NAME, PATH)) with `weights` (fractions of training tokens, any
    scale) or strategy `mix` (default proportional); `seeds`: the seed splits each reads (default: all of its).
    Refused in one line: a missing build, the same build or name twice, builds of other tokenizers or objectives."""
    parsed = [parse_source(spec) for spec in builds]
    if not parsed:
        raise ConfigError("a mixture needs at least one build")
    seen: dict = {}
    for _, path in parsed:
        if (real := path.resolve()) in seen:
            raise ConfigError(f"{path}: given twice in the mixture (also as {seen[real]}); give each build once and "
                              "raise its weight instead")
        seen[real] = path
    names = [name for name, _ in parsed]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ConfigError(f"two sources are named {twice!r}; name them apart as NAME=PATH")
    manifests = [read_manifest(path) for _, path in parsed]
    first = manifests[0]
    for (_, path), manifest in zip(parsed[1:], manifests[1:]):
        if manifest.tokenizer.sha256 != first.tokenizer.sha256:
            raise ConfigError(f"{path} and {parsed[0][1]}: built with different tokenizers (sha256 in their "
                              f"manifests); a mixture needs one: build {path} with --tokenizer "
                              f"{parsed[0][1] / 'tokenizer.json'}")
        if manifest.objective != first.objective:
            raise ConfigError(f"{path} is {manifest.objective} data and {parsed[0][1]} is {first.objective} "
                              "data; a mixture trains one objective")
    counts = list(seeds) if seeds is not None else [len(m.seeds) for m in manifests]
    sources = []
    for (name, path), manifest, n_seeds in zip(parsed, manifests, counts):
        split = open_epoch(path, 0, n_seeds)
        if len(split) == 0:
            raise CacheError(f"{path}: no rows to train on; build it from a larger corpus or leave it out")
        tokens = int(row_window_tokens(split, manifest).sum())
        sources.append(Source(name=name, path=path, manifest=manifest, seeds=n_seeds, tokens=tokens))
    if weights is not None and mix not in (None, "proportional"):
        raise ConfigError(f"--weights and --mix {mix} both set the proportions; give one of the two")
    fractions = (parse_weights(weights, len(sources)) if weights is not None
                 else mix_weights([s.tokens for s in sources], mix or "proportional"))
    return Mixture(sources=tuple(sources), weights=fractions)


# ----------------------------------------------------------------------------- the plan
@dataclass
class Queue:
    """A source's place: the pass it reads and the rows of that pass's order taken so far; `pending`, rows taken by a
    chunk that was cut short and not trained, which are taken again first; `carry`, window tokens owed to it."""

    pass_: int = 0
    cursor: int = 0
    pending: list = field(default_factory=list)  # [(pass, rows int64)]
    carry: float = 0.0


@dataclass(frozen=True, eq=False)
class Chunk:
    """Consecutive steps of a mixture's plan: `plan` over `split` (the rows picked from the sources); per row its
    source, the pass it comes from and its window tokens; `before`, each source's window tokens trained before
    its first step, and `passes`, the pass each source reads at its end."""

    index: int
    start: int  # the step of plan[0]
    split: Split
    plan: list[Batch]
    source: np.ndarray  # int64 [rows]
    pass_of: np.ndarray  # int64 [rows]
    window: np.ndarray  # int64 [rows]
    before: np.ndarray  # int64 [sources]
    passes: tuple[int, ...]
    reading_before: np.ndarray  # int64 [sources]: the pass of each source's last row trained before plan[0]

    def batch_tokens(self, batch: Batch, n_sources: int) -> np.ndarray:
        """Window tokens of a batch's real rows (every rank's) per source, int64 [sources]."""
        rows = trained([batch])
        return np.bincount(self.source[rows], weights=self.window[rows], minlength=n_sources).astype(np.int64)

    def progress(self, cursor: int, n_sources: int) -> tuple[np.ndarray, np.ndarray]:
        """Before step start + cursor: each source's window tokens trained, and the pass of its last row trained
        (-1: none yet); int64 [sources] each."""
        return self.totals(trained(self.plan[:cursor]), n_sources)

    def totals(self, rows: np.ndarray | slice, n_sources: int) -> tuple[np.ndarray, np.ndarray]:
        """progress once `rows` (of the chunk's, in any order; slice(None): all of them) have trained."""
        reading = self.reading_before.copy()
        np.maximum.at(reading, self.source[rows], self.pass_of[rows])
        tokens = np.bincount(self.source[rows], weights=self.window[rows], minlength=n_sources).astype(np.int64)
        return self.before + tokens, reading


def rows_within(window: np.ndarray, rows: np.ndarray, quota: float) -> tuple[int, float]:
    """(k, their window tokens): the first k of `rows` fit in `quota` window tokens, k + 1 do not. Prefix sums over a
    head of `rows` that doubles until it is past the quota, so a take costs the rows taken, not the source's size."""
    head = 1024
    while True:
        cum = np.cumsum(window[rows[:head]])
        if head >= len(rows) or cum[-1] > quota:
            k = int(np.searchsorted(cum, quota, side="right"))
            return k, float(cum[k - 1]) if k else 0.0
        head *= 2


def trained(batches: list[Batch]) -> np.ndarray:
    """The real rows of `batches` (every rank's microbatches but the padding ones), int64."""
    rows = [mb.rows for batch in batches for rank in batch.ranks for mb in rank if not mb.padding]
    return np.concatenate(rows) if rows else np.zeros(0, np.int64)


@dataclass(frozen=True)
class Mixture:
    """Builds trained together: `weights[i]` is the fraction of training tokens source i contributes."""

    sources: tuple[Source, ...]
    weights: np.ndarray  # float64 [sources], sum 1

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sources]

    @property
    def objective(self) -> str:
        return self.sources[0].manifest.objective

    def plan(self, budget: Budget, *, seed: int, world_size: int = 1,
             schedule: Sequence[tuple[int, Sequence[float]]] | None = None) -> MixturePlan:
        return MixturePlan(self, budget, seed=seed, world_size=world_size, schedule=schedule)

    def sampler(self, budget: Budget, *, seed: int, steps: int, world_size: int = 1, rank: int = 0) -> MixtureSampler:
        """A TokenBudgetBatchSampler over the mixture's first `steps` steps, for `MixtureRows`."""
        return MixtureSampler(self.plan(budget, seed=seed, world_size=world_size), steps, world_size=world_size,
                              rank=rank)


def name_key(name: str) -> int:
    """A source's name as a 64-bit seed word: its row orders depend on its name, not its place in the list."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def row_order(seed: int, name: str, pass_: int, n: int) -> np.ndarray:
    """The order source `name` reads its n rows in on pass `pass_`: a pure function of (seed, name, pass)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, name_key(name), int(pass_)]).permutation(n)


class MixturePlan:
    """The steps of a mixture, chunk by chunk (`chunk(k)`), the same on every rank. `schedule`: (step, weights) from
    which step on which weights apply, first at step 0 (default: the mixture's)."""

    def __init__(self, mixture: Mixture, budget: Budget, *, seed: int, world_size: int = 1,
                 schedule: Sequence[tuple[int, Sequence[float]]] | None = None):
        self.mixture, self.budget, self.seed, self.world_size = mixture, budget, seed, world_size
        self.schedule = [(int(step), np.asarray(w, np.float64) / np.sum(w))
                         for step, w in (schedule or [(0, mixture.weights)])]
        self.splits: dict[tuple[int, int], tuple[Split, np.ndarray]] = {}
        self.ratio = []  # window tokens per unit of plan cost, per source
        for i, source in enumerate(mixture.sources):
            split, window = self.pass_data(i, 0)
            cost = split.enc_lengths + budget.alpha * split.dec_lengths
            self.ratio.append(window.sum() / max(float(cost.sum()), 1.0))
            fits = padded_cost(split.enc_lengths, split.dec_lengths, np.arange(len(split)), budget)
            if fits < budget.max_tokens_per_microbatch and len(split) < budget.max_examples_per_microbatch:
                raise ConfigError(f"source {source.name} ({source.path}): {len(split)} rows, less than one microbatch "
                                  f"(--max-tokens-per-microbatch {budget.max_tokens_per_microbatch}, "
                                  f"--max-examples-per-microbatch {budget.max_examples_per_microbatch}); "
                                  "build it from more text or leave it out")
        self.reset()

    def reset(self) -> None:
        self.queues = [Queue() for _ in self.mixture.sources]
        self.orders: dict[int, tuple[int, np.ndarray]] = {}
        self.last: Chunk | None = None
        self.done = np.zeros(len(self.mixture.sources), np.int64)
        self.read = np.full(len(self.mixture.sources), -1, np.int64)
        self.weights_used: np.ndarray | None = None

    def weights_at(self, step: int) -> np.ndarray:
        return [w for s, w in self.schedule if s <= step][-1]

    def saved(self) -> dict:
        """What a checkpoint records for a resume to plan the same mixture: its names, each source's seed count
        and the weights' history."""
        return {"names": self.mixture.names, "seeds": [s.seeds for s in self.mixture.sources],
                "schedule": [[step, w.tolist()] for step, w in self.schedule]}

    def pass_data(self, i: int, pass_: int) -> tuple[Split, np.ndarray]:
        """(split, window tokens per row) pass `pass_` of source i reads; opened once per seed split."""
        source = self.mixture.sources[i]
        key = (i, pass_ % source.seeds)
        if key not in self.splits:
            split = source.split(pass_)
            self.splits[key] = (split, row_window_tokens(split, source.manifest))
        return self.splits[key]

    def order(self, i: int, pass_: int) -> np.ndarray:
        if self.orders.get(i, (None,))[0] != pass_:
            n = len(self.pass_data(i, pass_)[0])
            self.orders[i] = (pass_, row_order(self.seed, self.mixture.sources[i].name, pass_, n))
        return self.orders[i][1]

    def take(self, i: int, quota: float) -> list[tuple[int, np.ndarray]]:
        """Rows of source i at its place worth at most `quota` window tokens, as (pass, rows) runs; moves its place
        and leaves what is left of the quota in its carry."""
        q, out, left = self.queues[i], [], quota
        while True:
            pending = bool(q.pending)
            p, rows = q.pending[0] if pending else (q.pass_, self.order(i, q.pass_)[q.cursor:])
            k, tokens = rows_within(self.pass_data(i, p)[1], rows, left)
            if k:
                out.append((p, rows[:k]))
                left -= tokens
            if pending:
                if k < len(rows):
                    q.pending[0] = (p, rows[k:])
                    break
                q.pending.pop(0)
            else:
                q.cursor += k
                if k < len(rows):
                    break
                q.pass_, q.cursor = q.pass_ + 1, 0
        q.carry = left
        return out

    def next_chunk(self) -> Chunk:
        index = 0 if self.last is None else self.last.index + 1
        start = 0 if self.last is None else self.last.start + len(self.last.plan)
        weights = self.weights_at(start)
        if self.weights_used is None or not np.array_equal(weights, self.weights_used):
            for q in self.queues:  # tokens owed under the old weights are not owed under the new
                q.carry = 0.0
            self.weights_used = weights
        tokens = CHUNK_BATCHES * self.budget.max_tokens_per_batch * float(np.dot(weights, self.ratio))
        parts = [(i, p, rows) for i, w in enumerate(weights)
                 for p, rows in self.take(i, w * tokens + self.queues[i].carry)]
        split = pick_rows([(self.pass_data(i, p)[0], rows) for i, p, rows in parts],
                          f"{self.mixture.sources[0].path} mixture chunk {index}")
        plan = plan_epoch(split.enc_lengths, split.dec_lengths, self.budget, seed=self.seed, epoch=index,
                          world_size=self.world_size)
        sizes = [len(rows) for _, _, rows in parts]
        source = np.repeat(np.array([i for i, _, _ in parts], np.int64), sizes)
        pass_of = np.repeat(np.array([p for _, p, _ in parts], np.int64), sizes)
        window = np.concatenate([self.pass_data(i, p)[1][rows] for i, p, rows in parts])
        if cut := next((s - start for s, _ in self.schedule if start < s < start + len(plan)), None):
            plan = plan[:cut]
            self.hand_back(parts, plan)
        chunk = Chunk(index=index, start=start, split=split, plan=plan, source=source, pass_of=pass_of, window=window,
                      before=self.done.copy(), passes=tuple(q.pass_ for q in self.queues), reading_before=self.read)
        # an uncut plan trains every row of the chunk once: no need to list them
        self.done, self.read = chunk.totals(slice(None) if cut is None else trained(plan), len(self.queues))
        self.last = chunk
        return chunk

    def hand_back(self, parts: list, plan: list[Batch]) -> None:
        """Put the rows of `parts` that `plan` does not train back at the front of their sources' queues, in the
        order they were taken."""
        done = np.zeros(sum(len(rows) for _, _, rows in parts), dtype=bool)
        done[trained(plan)] = True
        back: dict[int, list] = {}
        at = 0
        for i, p, rows in parts:
            keep = rows[~done[at : at + len(rows)]]
            at += len(rows)
            if len(keep):
                back.setdefault(i, []).append((p, keep))
        for i, runs in back.items():
            self.queues[i].pending = runs + self.queues[i].pending

    def chunk(self, index: int) -> Chunk:
        """Chunk `index`, computed in order from the start (a resume replays the chunks before it)."""
        if self.last is not None and index < self.last.index:
            self.reset()
        while self.last is None or self.last.index < index:
            self.next_chunk()
        return self.last

    def chunks(self):
        """Every chunk in turn, without end."""
        index = 0
        while True:
            yield self.chunk(index)
            index += 1


# ----------------------------------------------------------------------------- for your own loop
class MixtureSampler(TokenBudgetBatchSampler):
    """TokenBudgetBatchSampler over a mixture: each item is rank `rank`'s rows of one step, as keys of `MixtureRows`
    (chunk << 32 | row), for the first `steps` steps of the plan."""

    def __init__(self, plan: MixturePlan, steps: int, *, world_size: int = 1, rank: int = 0):
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is not in [0, world size {world_size})")
        self.mixture_plan, self.steps, self.world_size, self.rank = plan, steps, world_size, rank

    def set_epoch(self, epoch: int) -> None:
        """A mixture has no epochs: its sources each keep their own."""

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        steps = 0
        for chunk in self.mixture_plan.chunks():
            for batch in chunk.plan:
                if steps == self.steps:
                    return
                mine = batch.ranks[self.rank]
                real = [mb.rows for mb in mine if not mb.padding] or [mine[0].rows]
                yield ((chunk.index << 32) | np.concatenate(real)).tolist()
                steps += 1


class MixtureRows(torch.utils.data.Dataset):
    """Rows of a MixtureSampler's keys as example dicts ({"input_ids", "labels"}) for `Collator.__call__`."""

    def __init__(self, sampler: MixtureSampler):
        self.plan = sampler.mixture_plan

    def __getitem__(self, key: int) -> dict[str, np.ndarray]:
        return self.plan.chunk(key >> 32).split.row(key & 0xFFFFFFFF)


__all__ = ["Chunk", "Mixture", "MixturePlan", "MixtureRows", "MixtureSampler", "Source", "mix_weights",
           "open_mixture", "parse_mix", "parse_weights", "row_order", "row_window_tokens"]
