"""Decontamination in partitions (--decontaminate): the validation candidates' word n-grams and token windows
matched against training's one range of hashes at a time, in tasks on the workers, so that the driver holds a few
counts and a bit per window of each validation document, never the hashes.

Each reading task stages its shard's hashes (stage_hashes) as one file, `shard-N.hashes`, of each kind in turn (word
n-grams, and token windows with --method tokens; the index of every kind's parts last): its validation candidates'
(every occurrence, with its document and place in it) and the other documents' (the first copy of each text in the
shard, selection.to_hash; with --dedup off or exact without documents, with --dedup near each with its document,
since only those left in training count), each
part in ranges of hashes (dedup_partitions.partition_of, by a counting sort: _dedup_kernels.bucket_records). Once
every shard is read and every fate known, the driver stages every document's fate (`decontamination.fates`, a byte
per document in corpus order) and partition task p (range_matches) reads range p of every shard's file: the range's
validation hashes go into a hash table (_dedup_kernels.key_slots), training's (the other documents', and any
candidate's whose fate is training) are streamed through it one shard at a time (mark_found), and the task returns
- the validation occurrences found in training (document, place),
- those not found whose hash two or more validation documents hold (hash, document, place): when one of them moves
  to training, the others' occurrences become training text.
The driver sums the answers (overlap.Matches) and moves documents round after round (overlap.decontaminate): the same
documents, measures and bytes as matching every hash at once. A candidate dropped as a duplicate is neither side.
A file per shard of every kind, and one of fates for all, since on a small build creating the files costs more
than writing their bytes.

Partitions: --dedup-partitions, or without it one per PARTITION_BYTES of the corpus, 1 to PARTITIONS (partitions;
Layout.partitions). A task holds its range of the validation candidates' hashes (16 bytes each, and a table and its
filter of 20 to 40 bytes per hash) and one shard's range of training's. Staged until the tasks are done, in the
build's staging directory (removed with it on any failure): 8 bytes per n-gram and per token of every document (16
with --dedup near), 16 per one of a validation candidate, and a byte per document.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmprep.builder.dedup_partitions import LOCAL_BITS, LOCAL_MASK, bucketed
from mlmprep.builder.overlap import MATCH_TOKENS, joined_bytes, text_ngrams, window_hashes
from mlmprep.builder.selection import TRAIN, VALIDATION, FirstCopies, held_documents
from mlmprep.builder.staged import Layout, changed, read_array, write_atomic
from mlmprep.config import BuildConfig
from mlmprep.format.rows import span_indices, starts_of

PARTITIONS = 8  # partition tasks without --dedup-partitions, at most: a few per worker of a small machine
PARTITION_BYTES = 64 << 20  # ... one per this much of the corpus (a task reads every shard's file: few on little)
KINDS = {"grams": ("ngrams", "ngram_counts"), "runs": ("windows", "window_counts")}  # a kind: what it stages
HASHES = "hashes"  # suffix of each shard's staged hashes
FATES = "decontamination.fates"  # every document's fate, which the driver stages for the tasks
RUN_HASHES = 256  # the others' hashes are written as runs, uncopied, where there are this many a candidate or more


def partitions(cfg: BuildConfig, corpus_bytes: int) -> int:
    """The partition tasks of decontamination: --dedup-partitions, or one per PARTITION_BYTES of the corpus (of
    unknown size: PARTITIONS), 1 to PARTITIONS. Never changes the output."""
    if cfg.dedup_partitions:
        return cfg.dedup_partitions
    return min(PARTITIONS, max(1, corpus_bytes // PARTITION_BYTES)) if corpus_bytes else PARTITIONS


def kinds(cfg: BuildConfig) -> tuple[str, ...]:
    """The kinds of hashes a build stages, in the order of their sections in a shard's file."""
    return ("grams", "runs") if cfg.method == "tokens" else ("grams",)


def stage_hashes(layout: Layout, index: int, result: dict) -> dict:
    """In the reading task of shard `index`: stage its documents' n-gram and token-window hashes (document_keys,
    pipeline.stage_ids), taken out of `result`, for the partition tasks; what the driver keeps instead: the
    validation candidates (a held-out key: a kept document is its cluster's first, so its own key decides its side,
    and a copy is dropped) and each one's count of n-grams and windows."""
    cfg = layout.cfg
    candidates = held_documents(result["keys"], cfg.validation_fraction, cfg.seed)
    out, index_of = {"candidates": np.flatnonzero(candidates)}, []

    def sections() -> Iterator[memoryview | bytes]:  # a kind's records written before the next kind's are made
        for kind in kinds(cfg):
            hashes_of, counts = KINDS[kind]
            per_doc = result.pop(counts)
            offsets, arrays = staged_records(result.pop(hashes_of), per_doc, candidates, layout.partitions,
                                             cfg.dedup == "near")
            index_of.append(offsets)
            out[counts] = per_doc[candidates]
            yield from arrays
            del arrays
        yield np.concatenate(index_of).astype("<i8").tobytes()  # the index last

    write_atomic(layout.staged(f"shard-{index:06d}.{HASHES}"), sections())
    return result | out


def staged_records(hashes: np.ndarray, per_doc: np.ndarray, candidates: np.ndarray, parts: int,
                   with_documents: bool) -> tuple[np.ndarray, list]:
    """One kind's section of a shard's file: (its part of the index that ends the file, int64 [2, parts + 1], where
    each partition's records start among the candidates' and among the others'; the candidates' hashes and
    references (document << LOCAL_BITS | place in it), the others' hashes and, `with_documents`, references, as bytes
    to write). The candidates' records are gathered; in one partition without references, where the candidates are
    few (RUN_HASHES), the others' are written as the runs between them, uncopied."""
    starts, chosen = starts_of(per_doc), np.flatnonzero(candidates)
    mine = per_doc[chosen]
    at = span_indices(starts[chosen], mine)
    docs = np.repeat(chosen.astype(np.uint64), mine)
    places = (at - np.repeat(starts[chosen], mine)).astype(np.uint64)
    first = bucketed(hashes[at], docs << np.uint64(LOCAL_BITS) | places, parts)
    if parts == 1 and not with_documents and len(chosen) <= len(hashes) // RUN_HASHES:
        runs = [hashes[a:b] for a, b in zip(np.append(0, starts[chosen + 1]), np.append(starts[chosen], len(hashes)))
                if b > a]
        second = [np.array([0, len(hashes) - len(at)], np.int64), *runs]
    else:
        others = np.flatnonzero(~candidates)
        theirs = (np.repeat(others.astype(np.uint64), per_doc[others]) << np.uint64(LOCAL_BITS) if with_documents
                  else np.zeros(0, np.uint64))  # made only where written
        second = bucketed(np.delete(hashes, at), theirs, parts)
    return (np.concatenate([first[0], second[0]]),
            [memoryview(a.astype("<u8", copy=False)).cast("B") for a in (*first[1:], *second[1:])])  # not copied


def scratch_names(shards: int) -> list[str]:
    """The names in the staging subfolder of the files the partition tasks read."""
    return [f"shard-{s:06d}.{HASHES}" for s in range(shards)] + [FATES]


@dataclass(frozen=True)
class MatchTask:
    """One range of hashes of every shard's staged files; bases[s], shard s's first document in corpus order (the
    last: the documents in all)."""

    layout: Layout
    partition: int
    bases: tuple[int, ...]

    def describe(self) -> str:
        return f"decontamination partition {self.partition} of {self.layout.partitions}"


def range_matches(task: MatchTask) -> dict[str, dict[str, np.ndarray]]:
    """For each kind of hashes (`grams`, and `runs` with --method tokens): the validation occurrences of the task's
    range found in training (`documents`, `places`) and those not found whose hash two or more validation documents
    hold (`shared_hashes`, `shared_documents`, `shared_places`); documents by global number."""
    fates = staged_fates(task.layout, task.bases[-1])
    files = [mapped_hashes(task.layout, s) for s in range(len(task.bases) - 1)]
    return {kind: kind_matches(task, kind, fates, files) for kind in kinds(task.layout.cfg)}


def kind_matches(task: MatchTask, kind: str, all_fates: np.ndarray, files: list[MappedHashes]) -> dict[str, np.ndarray]:
    """range_matches of one kind of hashes, given every document's fate and every shard's staged file."""
    from mlmprep.builder import _dedup_kernels as kernels

    layout, bases, p = task.layout, task.bases, task.partition
    keys, docs, places, trained = [], [], [], []
    for s in range(len(bases) - 1):  # the validation candidates' hashes of the range
        fates = all_fates[bases[s] : bases[s + 1]]
        hashes, refs = range_records(files[s], layout, kind, p, bases[s + 1] - bases[s], candidates=True)
        doc = (refs >> np.uint64(LOCAL_BITS)).astype(np.int64)
        fate = fates[doc]
        keys.append(hashes[fate == VALIDATION])
        docs.append(doc[fate == VALIDATION] + bases[s])
        places.append((refs[fate == VALIDATION] & np.uint64(LOCAL_MASK)).astype(np.int64))
        trained.append(hashes[fate == TRAIN])
    keys, docs, places = (np.concatenate(a) for a in (keys, docs, places))
    table = np.zeros(1 << max(int(2 * len(keys)).bit_length(), 4), np.uint64)  # at most half full
    bits = np.zeros(table.size // 4, np.uint64)  # 16 filter bits a slot: 32 or more a key
    slots = np.empty(len(keys), np.int64)
    kernels.key_slots(keys, table, slots, bits)
    found = np.zeros(table.size + 1, bool)
    for hashes in trained:
        kernels.mark_found(hashes, table, found, bits)
    near = layout.cfg.dedup == "near"
    for s in range(len(bases) - 1):  # training's, one shard at a time
        hashes, refs = range_records(files[s], layout, kind, p, bases[s + 1] - bases[s], candidates=False)
        if near:  # only the documents left in training count
            hashes = hashes[all_fates[bases[s] : bases[s + 1]][
                (refs >> np.uint64(LOCAL_BITS)).astype(np.int64)] == TRAIN]
        kernels.mark_found(hashes, table, found, bits)
    hit = found[slots]
    shared = ~hit & held_by_two(slots, docs)
    return {"documents": docs[hit], "places": places[hit], "shared_hashes": keys[shared],
            "shared_documents": docs[shared], "shared_places": places[shared]}


def held_by_two(slots: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """bool: whether each occurrence's hash (by its slot) is held by two or more documents."""
    if not len(slots):
        return np.zeros(0, bool)
    order = np.lexsort((docs, slots))
    slots, docs = slots[order], docs[order]
    starts = np.flatnonzero(np.concatenate([[True], slots[1:] != slots[:-1]]))
    ends = np.append(starts[1:], len(slots))
    out = np.empty(len(slots), bool)
    out[order] = np.repeat(docs[starts] != docs[ends - 1], ends - starts)  # sorted by document within a slot
    return out


def staged_fates(layout: Layout, documents: int) -> np.ndarray:
    """Every document's fate (selection: a byte per document, corpus order), as the driver staged them."""
    path = layout.staged(FATES)
    fates = read_array(path, np.uint8)
    if len(fates) != documents:
        raise changed(path, f"it holds {len(fates)} fates, not those of {documents} documents")
    return fates


@dataclass(frozen=True)
class MappedHashes:
    """A shard's staged hashes as a partition task reads them: the file mapped (copy-on-write: nothing a task does
    reaches the file, and nothing is copied in before it is read), and its index, checked against its size."""

    path: Path
    index: np.ndarray  # int64 [kinds, 2, parts + 1] (see staged_records)
    items: np.ndarray  # the file's 8-byte items, the index's last


def mapped_hashes(layout: Layout, s: int) -> MappedHashes:
    """Shard s's staged hashes, mapped, its index checked against the file's size. One open of the file for every
    kind and side: a task reads every shard's, so their count, not their size, sets its time on small builds."""
    path = layout.staged(f"shard-{s:06d}.{HASHES}")
    parts, near, staged = layout.partitions, layout.cfg.dedup == "near", kinds(layout.cfg)
    width = 2 * (parts + 1) * len(staged)
    with open(path, "rb") as f:
        count = os.fstat(f.fileno()).st_size // 8
        items = (np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY), "<u8", count=count) if count
                 else np.zeros(0, "<u8"))
    size = count - width
    index = items[max(size, 0) :].view("<i8")  # at the file's end
    index = index.reshape(-1, 2, parts + 1) if len(index) == width else np.zeros((0, 2, 1), np.int64)
    mine, theirs = index[:, 0], index[:, 1]
    sections = 2 * mine[:, -1] + (2 if near else 1) * theirs[:, -1]
    if (len(index) != len(staged) or np.any(mine[:, 0] != 0) or np.any(theirs[:, 0] != 0)
            or np.any(np.diff(mine) < 0) or np.any(np.diff(theirs) < 0) or size != int(sections.sum())):
        raise changed(path, f"its index of {parts} partitions of {len(staged)} kinds does not match its {max(size, 0)} "
                            "hashes and references")
    return MappedHashes(path, index, items)


def range_records(file: MappedHashes, layout: Layout, kind: str, p: int, documents: int,
                  candidates: bool) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, references) of partition p of the candidates' or the others' records of `kind` in a shard's staged
    `file`, the references checked against the shard's `documents` (they may be empty)."""
    near = layout.cfg.dedup == "near"
    first, refs_at, count = records_at(file.index, near, kinds(layout.cfg).index(kind), candidates, p)
    hashes = file.items[first : first + count]
    refs = file.items[refs_at : refs_at + count] if candidates or near else np.zeros(0, np.uint64)
    if np.any((refs >> np.uint64(LOCAL_BITS)) >= np.uint64(documents)):
        raise changed(file.path, f"a record names a document beyond its {documents}")
    return hashes, refs


def records_at(index: np.ndarray, near: bool, k: int, candidates: bool, p: int) -> tuple[int, int, int]:
    """(first hash, first reference, count) in 8-byte items from a shard's file's start: partition p's records of
    the k-th kind it stages, the candidates' or the others' (`index`, the file's, [kinds, 2, parts + 1])."""
    mine, theirs = index[:, 0], index[:, 1]
    sections = 2 * mine[:, -1] + (2 if near else 1) * theirs[:, -1]
    at = int(sections[:k].sum()) + (0 if candidates else 2 * int(mine[k, -1]))
    offsets = mine[k] if candidates else theirs[k]
    lo = int(offsets[p])
    return at + lo, at + int(offsets[-1]) + lo, int(offsets[p + 1]) - lo


def partition_ranges(layout: Layout, path) -> list[list[tuple[int, int]]]:
    """For each partition, the byte ranges [start, stop) of a shard's staged hashes (as its reading task wrote them)
    that the partition's task reads (range_records): the index, and of each kind the partition's records."""
    parts, near, staged = layout.partitions, layout.cfg.dedup == "near", kinds(layout.cfg)
    size = os.stat(path).st_size // 8
    width = 2 * (parts + 1) * len(staged)
    index = read_array(path, "<i8", size - width, size).reshape(-1, 2, parts + 1)
    out = []
    for p in range(parts):
        ranges = [(8 * (size - width), 8 * size)]
        for k in range(len(staged)):
            for candidates in (True, False):
                first, refs_at, count = records_at(index, near, k, candidates, p)
                ranges += [(8 * at, 8 * (at + count)) for at in ((first, refs_at) if candidates or near else (first,))]
        out.append(ranges)
    return out


def warm_up() -> None:
    """Load the kernels that hash and match decontamination's n-grams and windows from Numba's cache, as the reading
    and partition tasks call them: a forkserver does it once for every worker it forks."""
    from mlmprep.builder import _dedup_kernels as kernels

    text_ngrams(*joined_bytes([b"a b"]))
    FirstCopies()(np.ones(1, np.uint64))
    window_hashes(np.zeros(MATCH_TOKENS, np.int32), np.array([MATCH_TOKENS], np.int64))
    table, bits = np.zeros(16, np.uint64), np.zeros(4, np.uint64)
    kernels.key_slots(np.ones(1, np.uint64), table, np.empty(1, np.int64), bits)
    kernels.mark_found(np.ones(1, np.uint64), table, np.zeros(table.size + 1, bool), bits)
