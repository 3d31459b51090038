"""Which documents a build keeps, and on which side of the hold-out each one goes.

Every document (cleaned, non-blank, numbered 0..n-1 in corpus order) has a content key (dedup.exact_keys) and,
with --dedup near, a MinHash signature, computed by the reading task that tokenizes it. The driver then gives
each a fate: dropped (a duplicate of an earlier document: same key, or with --dedup near the same cluster), or
kept for training or validation. A kept document's side is a hash of (seed, the key of its cluster's first
document), so a cluster (with --dedup off or exact, the copies of one text) is wholly on one side, and the
choice depends on the corpus and the options only, never on shards, workers or Ray.

Exact dedup decides a shard as soon as every shard before it is in (its earlier copies are all known); near
dedup hashes each shard's LSH bands as it comes in and clusters the whole corpus once the last shard is in (a
document kept so far may still be joined to an earlier one through a later document). Decontamination
(mlmprep.builder.contamination, overlap) leaves training documents where they are: once the last shard is in, a
validation document whose word 13-grams are in training becomes MOVED, training text placed after every shard's
training documents, so training files are written as the shards come in and only the validation side waits. The
reading tasks stage the documents' hashes and partition tasks on the workers match them; the driver keeps each
validation candidate's counts (about 40 bytes, and a bit per token window) and the hashes two or more validation
documents share, not in training. Driver memory: every build keeps 9 bytes per document (its fate, and its
characters and tokens as int32 where they fit; its key is let go once its side is known); --dedup exact in the
driver, a Python dict entry (about 100 bytes) per distinct document; --dedup near in the driver, bands x rows x 4
bytes of signature and (bands + 1) x 8 bytes of LSH keys per document (680 MB per million documents at the default
24 x 5) until the clustering is done. With --dedup-partitions the workers find the duplicates
(mlmprep.builder.dedup_partitions) and the driver holds the pairs of duplicates alone beside the 9 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from mlmprep.builder import randomness
from mlmprep.builder.dedup import exact_keys, lsh_keys, minhash_signatures, near_duplicate_clusters, normalised_utf8
from mlmprep.builder.dedup_partitions import join, partitioned
from mlmprep.builder.overlap import MATCH_TOKENS, NGRAM, HashSet, Matches, decontaminate, joined_bytes, text_ngrams
from mlmprep.builder.staged import decontaminating, held_apart
from mlmprep.config import BuildConfig

SIDES = ("train", "validation")
TRAIN, VALIDATION, DROPPED, MOVED = 0, 1, 2, 3  # a document's fate (MOVED: from validation, after training's)
MOVED_PICKS = "moved"  # the picks of the documents moved to training, staged beside each side's
HOLDOUT_SALT = 0x5EED_0F_0A1D  # keys the held-out choice apart from the mask seeds
MINHASH_SEED = 0x5EED_D0C  # the MinHash functions: fixed, so signatures never depend on --seed
LARGEST = 5  # clusters the manifest describes, each with an excerpt of its first document
COUNTS = ("doc_chars", "doc_tokens")  # a reading task's counts per document (int64), which the driver keeps
NARROW_BELOW = 1 << 30  # ... as int32 where every one of a shard's is below this: a count plus one still fits, and
# every sum of them is taken as int64


def document_keys(texts: list[str], cfg: BuildConfig, hashed: bool = True, normalised: bool = False,
                  copies: FirstCopies | None = None) -> dict[str, np.ndarray]:
    """What a reading task returns about its documents for the driver's choice: content keys, signatures (on the
    reading thread alone: the worker's other cores tokenize, and every other worker has cores of its own), and
    given `hashed`, n-gram hashes for decontamination of the documents to_hash marks (`hashed`, bool per document;
    `copies`: the shard's earlier batches); given `normalised`, the texts the n-grams are of instead (`normalised`,
    their UTF-8 one after another, and `normalised_bytes`, each one's), for a worker to hash."""
    hashed = hashed and decontaminating(cfg)
    # its words are the n-grams' (NFC, split at whitespace)
    encoded = normalised_utf8(texts) if hashed or normalised else None
    out = {"keys": exact_keys(texts, encoded)}
    if cfg.dedup == "near":
        out["signatures"] = minhash_signatures(texts, ngram=cfg.dedup_ngram, num_hashes=cfg.dedup_bands *
                                               cfg.dedup_rows, seed=MINHASH_SEED, threads=1)
    if hashed:
        out["hashed"] = to_hash(out["keys"], cfg, FirstCopies() if copies is None else copies)
        out["ngrams"], out["ngram_counts"] = text_ngrams(*joined_bytes(encoded), keep=out["hashed"])
    elif normalised:
        buf, offsets = joined_bytes(encoded)
        out["normalised"], out["normalised_bytes"] = buf, np.diff(offsets)
    return out


class FirstCopies:
    """Which documents of a shard, read batch by batch, are the first of their text (content key) in it."""

    def __init__(self) -> None:
        self.seen = HashSet()  # the keys of the batches so far

    def __call__(self, keys: np.ndarray) -> np.ndarray:
        """bool per key of the next batch: the first of its value in the shard."""
        return self.seen.add(keys, np.arange(len(keys) + 1)) == 0  # each key a run of its own


def to_hash(keys: np.ndarray, cfg: BuildConfig, copies: FirstCopies) -> np.ndarray:
    """The documents whose n-grams and token windows decontamination needs (bool per key of the next batch of a
    shard): every validation candidate, and the first copy of every other text in the shard. A later copy's hashes
    are the first's, and training's count only as a set of hashes of documents it keeps: with --dedup off the first
    copy is kept too, with exact or near a later copy never is. Corpora hold many copies (boilerplate, mirrors)."""
    return copies(keys) | held_documents(keys, cfg.validation_fraction, cfg.seed)


def held_documents(keys: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Which documents (by their cluster's key, uint64) are held out for validation: a hash of (seed, key) below
    `fraction`."""
    if fraction <= 0.0:
        return np.zeros(len(keys), dtype=bool)
    with np.errstate(over="ignore"):  # SplitMix64 finaliser: wrapping uint64 arithmetic is the point
        x = randomness.mix64((keys.astype(np.uint64) + np.uint64(HOLDOUT_SALT)) ^ np.uint64(seed & (2**64 - 1)))
    return (x >> np.uint64(11)).astype(np.float64) * 2.0**-53 < fraction


def narrowed(counts: np.ndarray) -> np.ndarray:
    """Per-document counts as int32 when every one is in (-NARROW_BELOW, NARROW_BELOW), else as they are (int64):
    the driver keeps them for every document of the corpus until the end of the build."""
    if len(counts) and (int(counts.min()) <= -NARROW_BELOW or int(counts.max()) >= NARROW_BELOW):
        return counts
    return counts.astype(np.int32)


class JoinedRows:
    """The shards' arrays of one kind (a row per document) joined in corpus order as the shards come in: each is
    copied into one growing array once every shard before it is in, then let go, so the array's fresh pages are
    touched while later shards are still read rather than all at the end, and no second whole is ever held."""

    GROWTH = 1.5  # room reserved beyond the first shard's rows times the shards, or beyond a full array; a page
    # of it is only taken when touched

    def __init__(self, shards: int):
        self.pending: list[np.ndarray | None] = [None] * shards
        self.placed = 0  # shards [0, placed) are in `whole`
        self.whole: np.ndarray | None = None
        self.length = 0

    def add(self, index: int, piece: np.ndarray) -> None:
        self.pending[index] = piece
        while self.placed < len(self.pending) and self.pending[self.placed] is not None:
            piece, self.pending[self.placed] = self.pending[self.placed], None
            self.place(piece)
            self.placed += 1

    def place(self, piece: np.ndarray) -> None:
        end = self.length + len(piece)
        if self.whole is None or end > len(self.whole):
            capacity = max(end, int(self.GROWTH * (len(self.whole) if self.whole is not None else
                                                    len(piece) * len(self.pending))))
            grown = np.empty((capacity, *piece.shape[1:]), piece.dtype)
            if self.whole is not None:
                grown[: self.length] = self.whole[: self.length]
            self.whole = grown
        self.whole[self.length : end] = piece
        self.length = end

    def joined(self) -> np.ndarray:
        """Every shard's rows, in order (once all are in)."""
        assert self.placed == len(self.pending), "a shard is missing"
        return self.whole[: self.length] if self.whole is not None else np.zeros((0, 0), np.uint32)


class Selection:
    """The fates of the corpus's documents, shard by shard as the reading tasks' results come in (`add`)."""

    def __init__(self, cfg: BuildConfig, shards: int, partitions: Callable[[list[int]], np.ndarray] | None = None,
                 matches: Callable[[list[np.ndarray]], Iterable[dict]] | None = None):
        self.cfg = cfg
        # --dedup-partitions: given each shard's documents, runs the partition tasks; their links
        self.partitions = partitions
        # --decontaminate: given each shard's fates, runs the partition tasks of contamination; their answers
        self.matches = matches
        self.results: list[dict | None] = [None] * shards
        self.fates: list[np.ndarray | None] = [None] * shards  # per shard: uint8 per document
        self.decided = 0  # shards before this one have their fates
        self.first: dict[int, int] = {}  # --dedup exact: key -> global index of its first document
        self.copies: list[np.ndarray] = []  # --dedup exact: per decided shard, the first document of each copy
        # the clusters of two or more documents: each one's first document (global index) and its size, int64 arrays
        self.clusters: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.documents = 0  # documents of the decided shards
        self.signatures = JoinedRows(shards)  # --dedup near
        self.contamination: dict | None = None  # --decontaminate: what it found and moved
        self.candidates: list[np.ndarray] = []  # ... each shard's validation candidates, by index in the shard

    def add(self, index: int, result: dict) -> list[int]:
        """Note shard `index`'s documents (result: keys, signatures, doc_chars, doc_tokens, and
        contamination.stage_hashes'); the shards whose training documents that decides, in order (--decontaminate:
        their validation documents wait for the last shard, see validation_waits). Each document's key is let go as
        soon as its side is known, and its characters and tokens are held as int32 where they fit (narrowed)."""
        self.results[index] = result
        for key in COUNTS:
            if key in result:
                result[key] = narrowed(result[key])
        waits = self.cfg.dedup == "near" or partitioned(self.cfg)  # decides every shard at once, at the end
        if waits:  # each document's side now: a kept one is its cluster's first, whose own key decides it
            self.fates[index] = self.sides(result.pop("keys"))
        if partitioned(self.cfg):
            if any(r is None for r in self.results):
                return []
            self.join(self.partitions([len(f) for f in self.fates]))
        elif waits:
            # the shard's LSH keys now, while the other shards are still read: the clustering at the end only links
            result["lsh_keys"] = lsh_keys(result["signatures"], bands=self.cfg.dedup_bands, rows=self.cfg.dedup_rows)
            self.signatures.add(index, result.pop("signatures"))
            if any(r is None for r in self.results):
                return []
            self.cluster()
        start = 0 if waits else self.decided
        while self.decided < len(self.results) and self.results[self.decided] is not None:
            self.decide(self.decided)
            self.decided += 1
        if self.decided == len(self.results) and start < self.decided:  # the last shard's turn: once
            if self.copies:
                firsts, counts = np.unique(np.concatenate(self.copies), return_counts=True)
                self.clusters = firsts.astype(np.int64), counts.astype(np.int64) + 1
            if decontaminating(self.cfg):
                self.decontaminate()
        return list(range(start, self.decided))

    @property
    def validation_waits(self) -> bool:
        """Whether the validation side's fates wait for the last shard (--decontaminate)."""
        return decontaminating(self.cfg)

    def sides(self, keys: np.ndarray) -> np.ndarray:
        """uint8: VALIDATION for the documents whose key is held out (held_documents), else TRAIN."""
        held = held_documents(keys, self.cfg.validation_fraction, self.cfg.seed)
        return np.where(held, VALIDATION, TRAIN).astype(np.uint8)

    def decide(self, s: int) -> None:
        """Fates of shard s's documents (--dedup off or exact), every earlier shard decided."""
        keys = self.results[s].pop("keys")
        fates = self.sides(keys)
        if self.cfg.dedup == "exact":
            copy_of = self.copies_of(keys)
            fates[copy_of >= 0] = DROPPED
            self.copies.append(copy_of[copy_of >= 0])
        self.fates[s] = fates
        self.documents += len(keys)

    def copies_of(self, keys: np.ndarray) -> np.ndarray:
        """--dedup exact, the next shard's keys in corpus order: for each document the global index of the first
        document with its key, -1 where that is the document itself; self.first gains the shard's new keys. Array
        and dict operations that loop in C, not a Python loop per document."""
        base = self.documents
        unique, at, inverse = np.unique(keys, return_index=True, return_inverse=True)
        here = dict(zip(unique.tolist(), (at.astype(np.int64) + base).tolist()))  # each key's first in this shard
        for key in here.keys() & self.first.keys():  # the keys of earlier shards: a Python loop over these alone
            here[key] = self.first[key]
        self.first.update(here)
        copy_of = np.fromiter(here.values(), np.int64, len(here))[inverse.reshape(-1)]  # dicts keep their order
        copy_of[copy_of == np.arange(base, base + len(keys))] = -1
        return copy_of

    def cluster(self) -> None:
        """Fates of every document (--dedup near): MinHash clusters of the whole corpus, the first kept, on its own
        key's side (self.fates: each document's side, from add)."""
        cfg, counts = self.cfg, [len(f) for f in self.fates]
        sides = np.concatenate(self.fates) if counts else np.zeros(0, np.uint8)
        first = (near_duplicate_clusters(self.signatures.joined(), bands=cfg.dedup_bands, rows=cfg.dedup_rows,
                                         threshold=cfg.dedup_threshold, keys=[r.pop("lsh_keys") for r in self.results])
                 if len(sides) else np.zeros(0, np.int64))
        self.signatures = JoinedRows(0)
        fates = np.where(first == np.arange(len(first)), sides, DROPPED).astype(np.uint8)
        sizes = np.bincount(first, minlength=len(first)) if len(first) else np.zeros(0, np.int64)
        at = np.flatnonzero(sizes > 1)
        self.clusters = at.astype(np.int64), sizes[at].astype(np.int64)
        self.fates = np.split(fates, np.cumsum(counts)[:-1]) if counts else []
        self.decided, self.documents = len(self.results), len(sides)

    def join(self, links: np.ndarray) -> None:
        """Fates of every document (--dedup-partitions) from the partition tasks' links: the first of each cluster
        kept (dedup_partitions.join), the side of a kept one by its own key (self.fates: each document's side, from
        add)."""
        documents, first, sizes = join(links, firsts=self.cfg.dedup == "exact")
        kept = documents == first
        self.clusters = documents[kept].astype(np.int64), sizes[kept].astype(np.int64)
        dropped, at = documents[~kept], 0
        for fates in self.fates:
            lo, hi = np.searchsorted(dropped, [at, at + len(fates)])
            fates[dropped[lo:hi] - at] = DROPPED
            at += len(fates)
        self.decided, self.documents = len(self.results), at

    def decontaminate(self) -> None:
        """Make MOVED the validation documents whose n-grams are in training (the partition tasks' matches, then
        overlap.decontaminate); note the contamination before and after."""
        results = self.results
        self.candidates = candidates = [r.pop("candidates") for r in results]
        bases = np.cumsum([0] + [len(f) for f in self.fates[:-1]])
        fates = np.concatenate([f[c] for f, c in zip(self.fates, candidates)])
        counts = np.concatenate([r.pop("ngram_counts") for r in results])
        tokens = "window_counts" in results[0]
        lengths = np.concatenate([r["doc_tokens"][c].astype(np.int64) for r, c in zip(results, candidates)]
                                 ) if tokens else None
        matches = Matches(np.concatenate([base + c for base, c in zip(bases.tolist(), candidates)]),
                          np.concatenate([r.pop("window_counts") for r in results]) if tokens else None)
        for answer in self.matches(self.fates):
            matches.add(answer)
        moved, before, after = decontaminate(fates == VALIDATION, counts, matches,
                                             self.cfg.decontaminate_threshold, lengths)
        chars = 0
        for s, own in enumerate(np.split(moved, np.cumsum([len(c) for c in candidates])[:-1])):
            at = candidates[s][own]
            self.fates[s][at] = MOVED
            chars += int(results[s]["doc_chars"][at].sum(dtype=np.int64))
        self.contamination = {"ngram": NGRAM, "match_tokens": MATCH_TOKENS if tokens else None,
                              "threshold": self.cfg.decontaminate_threshold, "documents_moved": int(moved.sum()),
                              "characters_moved": chars, "before": before, "after": after}

    def picked(self, s: int, side: str) -> np.ndarray:
        """Shard s's documents on `side` (or MOVED_PICKS), by their index in the shard (int64)."""
        fate = MOVED if side == MOVED_PICKS else SIDES.index(side)
        return np.flatnonzero(self.fates[s] == fate).astype(np.int64)

    def staged_picks(self, s: int, side: str) -> np.ndarray:
        """picked, by index in the staged files the side reads (Layout.stem): held_apart, the validation and moved
        documents by their index among the shard's candidates."""
        picked = self.picked(s, side)
        return np.searchsorted(self.candidates[s], picked) if held_apart(self.cfg) and side != SIDES[0] else picked

    def locate(self, document: int) -> tuple[int, int]:
        """(shard, index in the shard) of a global document index."""
        ends = np.cumsum([len(f) for f in self.fates])
        s = int(np.searchsorted(ends, document, side="right"))
        return s, document - int(ends[s] - len(self.fates[s]))

    def largest(self) -> list[tuple[int, int]]:
        """(size, global index of the first document) of the largest clusters, largest first."""
        firsts, sizes = self.clusters
        top = np.lexsort((firsts, -sizes))[:LARGEST]  # ties: the earlier cluster first
        return [(int(sizes[k]), int(firsts[k])) for k in top]

    def summary(self) -> dict:
        """corpus.stats.dedup, less the largest clusters' excerpts (see largest)."""
        counts = {"dropped": 0, "characters_dropped": 0, "tokens_dropped": 0, "validation": 0}
        for result, fates in zip(self.results, self.fates):
            dropped = fates == DROPPED
            counts["dropped"] += int(dropped.sum())
            counts["characters_dropped"] += int(result["doc_chars"][dropped].sum(dtype=np.int64))
            if "doc_tokens" in result:
                counts["tokens_dropped"] += int(result["doc_tokens"][dropped].sum(dtype=np.int64))
            counts["validation"] += int((fates == VALIDATION).sum())
        return {
            "method": self.cfg.dedup,
            "documents": self.documents,
            "documents_dropped": counts["dropped"],
            "characters_dropped": counts["characters_dropped"],
            "tokens_dropped": counts["tokens_dropped"],
            "clusters": len(self.clusters[0]),  # groups of two or more documents
            "validation_documents": counts["validation"],
            "largest_clusters": [],
        }
