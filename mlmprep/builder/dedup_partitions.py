"""Dedup in partitions (--dedup-partitions N): the duplicates found by N tasks on the workers, each over one range
of keys, so that the driver holds the duplicate pairs, not every document's keys and signatures.

Each reading task stages its shard's keys as `shard-N.dedup`, sorted by partition: with --dedup exact each
document's content key, with --dedup near each of its band keys (lsh_keys rows 1..bands) and, as `shard-N.sig`, its
signatures. A key's partition is its top 32 bits scaled to N (keys are hashes: the ranges are even). Partition task
p reads range p of every shard's file:
- exact: the documents of equal key, linked each to the first (in corpus order);
- near: the documents of equal (band, band key), reading the signatures of those alone, linked where their estimated
  Jaccard reaches the threshold (_dedup_kernels.link_groups: a spanning forest of the partition's edges, so at
  most one link per document that has a duplicate in the partition).
Every pair near_duplicate_clusters compares shares a band key, so it falls in one partition; the driver's union
of every partition's links (join) has the same connected components, and so the same first document of each,
as the in-driver clustering: the same documents are kept and the build's bytes are the same.

Staged per million documents: exact 16 MB (key, document); near (bands x 16 B of keys and references plus bands x
rows x 4 B of signature) 864 MB at 24 x 5. A partition task holds its share of every shard's records (16 B each)
and the signatures of the documents whose band key recurs. The staged files are in the build's staging directory,
removed once the partitions are done, and with the stage on any failure. On Ray nodes that share no disk, a task is
sent its partition's slice of each file alone (partition_ranges), and with --dedup near the rows of the signatures it
compares, cut from each shard's by a task of their own (partition_members, signature_slices).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlmprep.builder.dedup import lsh_keys
from mlmprep.builder.engine.base import Shipped, fetched
from mlmprep.builder.staged import STAGING, Layout, changed, read_array, write_atomic
from mlmprep.config import BuildConfig
from mlmprep.format.rows import starts_of

LOCAL_BITS = 32  # a near record's reference: band << LOCAL_BITS | the document's index in its shard
LOCAL_MASK = (1 << LOCAL_BITS) - 1
SCRATCH = ("dedup", "sig")  # the staged files' suffixes
JOIN_AT = 1 << 16  # links held by the driver before it first joins them


def partitioned(cfg: BuildConfig) -> bool:
    """Whether the build finds its duplicates in partition tasks."""
    return cfg.dedup != "off" and cfg.dedup_partitions > 0


def partition_of(keys: np.ndarray, partitions: int) -> np.ndarray:
    """int64: the partition of each uint64 key, floor(top 32 bits x partitions / 2**32)."""
    return ((keys >> np.uint64(32)) * np.uint64(partitions) >> np.uint64(32)).astype(np.int64)


def stage_keys(layout: Layout, index: int, described: dict[str, np.ndarray]) -> None:
    """In the reading task of shard `index`: stage its documents' keys by partition, in order within one (and with
    --dedup near, take the signatures out of `described` into `shard-N.sig`), which the partition tasks read. Near
    dedup's band keys (bands a document) go by a counting sort, whose memory is the keys twice (the task loads Numba
    for the signatures anyway); exact dedup's one key a document by NumPy, so that a driver reading shards itself
    never loads Numba for it."""
    cfg, parts = layout.cfg, layout.cfg.dedup_partitions
    if cfg.dedup == "near":
        sig = described.pop("signatures")
        bands = lsh_keys(sig, bands=cfg.dedup_bands, rows=cfg.dedup_rows)[1:]
        refs = ((np.arange(bands.shape[0], dtype=np.uint64)[:, None] << np.uint64(LOCAL_BITS))
                | np.arange(bands.shape[1], dtype=np.uint64)[None, :]).reshape(-1)
        write_atomic(layout.staged(f"shard-{index:06d}.sig"), [np.ascontiguousarray(sig, np.uint32).tobytes()])
        offsets, keys, refs = bucketed(bands.reshape(-1), refs, parts)  # within a partition: by band, then document
    else:
        keys = described["keys"]
        part = partition_of(keys, parts)
        order = np.argsort(part, kind="stable")
        offsets = starts_of(np.bincount(part, minlength=parts))
        keys, refs = keys[order], order.astype(np.uint64)
    write_atomic(layout.staged(f"shard-{index:06d}.dedup"),  # the sorted arrays as written, not copied again
                 [offsets.tobytes(), *(memoryview(a.astype("<u8", copy=False)).cast("B") for a in (keys, refs))])


def bucketed(keys: np.ndarray, refs: np.ndarray, parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets [parts + 1], keys, refs) of records sorted by partition (partition_of), stable (refs may be
    empty); one partition takes them as they are."""
    from mlmprep.builder import _dedup_kernels as kernels

    if parts == 1:
        return np.array([0, len(keys)], np.int64), keys, refs
    offsets = np.empty(parts + 1, np.int64)
    out_keys, out_refs = np.empty_like(keys), np.empty_like(refs)
    kernels.bucket_records(np.ascontiguousarray(keys, np.uint64), np.ascontiguousarray(refs, np.uint64), parts,
                           offsets, out_keys, out_refs)
    return offsets, out_keys, out_refs


@dataclass(frozen=True)
class PartitionTask:
    """One range of keys of every shard's staged file; bases[s], shard s's first document in corpus order (the
    last: the documents in all)."""

    layout: Layout
    partition: int
    bases: tuple[int, ...]

    def describe(self) -> str:
        return f"dedup partition {self.partition} of {self.layout.cfg.dedup_partitions}"


def partition_links(task: PartitionTask) -> np.ndarray:
    """int64 [2, links]: pairs of documents (corpus order) of one cluster of duplicates, found in the task's
    partition; their connected components are the partition's share of the clusters."""
    keys, bands, docs = records_of(task)
    if task.layout.cfg.dedup == "exact":
        return first_copies(keys, docs)
    return near_links(task.layout, *candidate_groups(keys, bands, docs), task.bases)


def partition_members(task: PartitionTask) -> np.ndarray:
    """--dedup near: the documents (corpus order, increasing) whose signatures the task's partition_links reads,
    those of its groups of two or more."""
    return np.unique(candidate_groups(*records_of(task))[0])


def records_of(task: PartitionTask) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, bands, documents in corpus order) of the task's partition of every shard's staged records."""
    keys, bands, docs = [], [], []
    for s in range(len(task.bases) - 1):  # each shard's references split as they are read, never all held as read
        k, refs = partition_records(task.layout, s, task.partition, task.bases[s + 1] - task.bases[s])
        keys.append(k)
        docs.append((refs & np.uint64(LOCAL_MASK)).astype(np.int64) + task.bases[s])
        bands.append((refs >> np.uint64(LOCAL_BITS)).astype(np.int32))
    keys, bands, docs = (np.concatenate(a) if a else np.zeros(0, t)
                         for a, t in ((keys, np.uint64), (bands, np.int32), (docs, np.int64)))
    return keys, bands, docs


def partition_records(layout: Layout, s: int, p: int, documents: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, references) of partition p in shard s's staged file, checked against the file's own index and the
    shard's `documents`."""
    path = layout.staged(f"shard-{s:06d}.dedup")
    parts = layout.cfg.dedup_partitions
    offsets = read_array(path, "<i8", 0, parts + 1)
    records = (path.stat().st_size // 8 - (parts + 1)) // 2
    per_doc = layout.cfg.dedup_bands if layout.cfg.dedup == "near" else 1
    if (len(offsets) != parts + 1 or offsets[0] != 0 or offsets[-1] != records or records != per_doc * documents
            or np.any(np.diff(offsets) < 0)):
        raise changed(path, f"its index of {parts} partitions does not match its {records} records "
                                          f"of {documents} documents")
    lo, hi = parts + 1 + int(offsets[p]), parts + 1 + int(offsets[p + 1])
    refs = read_array(path, "<u8", lo + records, hi + records)
    if np.any((refs & np.uint64(LOCAL_MASK)) >= np.uint64(documents)):
        raise changed(path, f"a record names a document beyond its {documents}")
    return read_array(path, "<u8", lo, hi), refs


def partition_ranges(layout: Layout, path: Path) -> list[list[tuple[int, int]]]:
    """For each partition, the byte ranges [start, stop) of a shard's staged `.dedup` file (as its reading task wrote
    it) that the partition's task reads (partition_records): the index, and the partition's keys and references."""
    parts = layout.cfg.dedup_partitions
    offsets = read_array(path, "<i8", 0, parts + 1).tolist()
    head, records = parts + 1, offsets[-1]
    return [[(0, 8 * head), (8 * (head + lo), 8 * (head + hi)), (8 * (head + records + lo), 8 * (head + records + hi))]
            for lo, hi in zip(offsets[:-1], offsets[1:])]


def first_copies(keys: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """--dedup exact: (each later copy, the first document of its key)."""
    order = np.lexsort((docs, keys))
    keys, docs = keys[order], docs[order]
    new = np.ones(len(keys), bool)
    new[1:] = keys[1:] != keys[:-1]
    first = docs[new][np.cumsum(new) - 1]
    return np.stack([docs[~new], first[~new]])


def candidate_groups(keys: np.ndarray, bands: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """--dedup near: (documents, sizes) of the groups of equal (band, band key) of two or more records, one group
    after another, each in corpus order."""
    order = np.lexsort((docs, keys, bands))
    keys, bands, docs = keys[order], bands[order], docs[order]
    new = np.ones(len(keys) + 1, bool)
    new[1:-1] = (keys[1:] != keys[:-1]) | (bands[1:] != bands[:-1])
    starts = np.flatnonzero(new)
    sizes = np.diff(starts)
    return docs[np.repeat(sizes > 1, sizes)], sizes[sizes > 1]


def near_links(layout: Layout, docs: np.ndarray, sizes: np.ndarray, bases: tuple[int, ...]) -> np.ndarray:
    """--dedup near: links between the documents of each candidate group (candidate_groups) whose estimated Jaccard
    reaches the threshold (_dedup_kernels.link_groups), from the signatures of those documents alone."""
    from mlmprep.builder import _dedup_kernels as kernels

    members = np.unique(docs)  # the documents compared, in corpus order
    sig = signatures_of(layout, members, bases)
    parent = np.arange(len(members), dtype=np.int64)
    edges = np.empty((2, max(len(members) - 1, 0)), np.int64)
    linked = kernels.link_groups(starts_of(sizes), np.searchsorted(members, docs), sig, layout.cfg.dedup_threshold,
                                 parent, edges)
    return members[edges[:, :linked]]


def signatures_of(layout: Layout, docs: np.ndarray, bases: tuple[int, ...]) -> np.ndarray:
    """uint32 [len(docs), hashes]: the staged signatures of documents `docs` (increasing, corpus order)."""
    hashes = layout.cfg.dedup_bands * layout.cfg.dedup_rows
    out = np.empty((len(docs), hashes), np.uint32)
    cuts = np.searchsorted(docs, np.asarray(bases, np.int64))
    for s in np.flatnonzero(np.diff(cuts)):
        path, documents = layout.staged(f"shard-{s:06d}.sig"), bases[s + 1] - bases[s]
        if path.stat().st_size != documents * hashes * 4:
            raise changed(path, f"it holds {path.stat().st_size} bytes, not the signatures of "
                                              f"{documents} documents")
        rows = np.memmap(path, np.uint32, "r", shape=(documents, hashes))
        out[cuts[s]:cuts[s + 1]] = rows[docs[cuts[s]:cuts[s + 1]] - bases[s]]
        del rows
    return out


@dataclass(frozen=True)
class SignatureTask:
    """Detached near dedup: shard `shard`'s staged signatures (`source`, the payload part its reading task shipped
    them in; `documents` of them) to cut into the rows each partition's task reads (`rows[p]`, the shard's own
    document numbers, increasing, uint32 as LOCAL_BITS holds them)."""

    layout: Layout
    shard: int
    documents: int
    source: Any
    rows: tuple[np.ndarray, ...]

    @property
    def parts(self) -> int:
        return len(self.rows)

    def describe(self) -> str:
        return f"signatures of shard {self.shard} cut for {len(self.rows)} dedup partitions"


def signature_slices(task: SignatureTask) -> Shipped:
    """The shard's `shard-N.sig` as one part per partition: part p, the rows of task.rows[p] alone (a slice,
    staged.write_fetched: the file's size, a run of consecutive rows a range), so that partition task p fetches the
    signatures it compares, never a whole file."""
    name = f"{STAGING}/shard-{task.shard:06d}.sig"
    data = fetched(task.source)[name]
    width = 4 * task.layout.cfg.dedup_bands * task.layout.cfg.dedup_rows
    if len(data) != task.documents * width:
        raise changed(Path(task.layout.stage) / name, f"it holds {len(data)} bytes, not the signatures of "
                                                      f"{task.documents} documents")
    parts = []
    for rows in (np.asarray(r, np.int64) for r in task.rows):
        runs = np.flatnonzero(np.diff(rows, prepend=-2, append=-2) != 1)  # where each run of consecutive rows starts
        parts.append({name: (len(data), tuple((int(a) * width, data[int(a) * width : (int(b) + 1) * width])
                                              for a, b in zip(rows[runs[:-1]], rows[runs[1:] - 1])))})
    return Shipped(None, tuple(parts), tuple((name,) for _ in parts))


def join(pairs: np.ndarray, firsts: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(documents, their cluster's first document, their cluster's size) for the documents of the linked pairs
    (int64 [2, links]) alone, increasing: union-find over those documents, each set rooted at its smallest.
    `firsts`: each pair is already (a later copy, its cluster's first), as exact dedup's partitions give (every
    copy of a key is in one partition), which needs no union-find (nor Numba in the driver)."""
    nodes = np.unique(pairs)
    if firsts:
        roots = np.arange(len(nodes))
        roots[np.searchsorted(nodes, pairs[0])] = np.searchsorted(nodes, pairs[1])
    else:
        from mlmprep.builder import _dedup_kernels as kernels

        parent = np.arange(len(nodes), dtype=np.int64)
        kernels.join_pairs(np.searchsorted(nodes, pairs[0]), np.searchsorted(nodes, pairs[1]), parent)
        roots = kernels.roots(parent)
    return nodes, nodes[roots], np.bincount(roots, minlength=len(nodes))[roots]


def joined_links(results: Iterable[np.ndarray], firsts: bool = False) -> np.ndarray:
    """The partitions' links (as the tasks finish) joined as they come in: whenever the held links have grown to
    twice what the last join left, they are replaced by one link per document from it to its cluster's first
    (the same clusters), so the driver holds about one link per duplicate, however many partitions find it.
    `firsts` (exact dedup): the links are that already, one per copy (see join)."""
    held, joined, count = [np.zeros((2, 0), np.int64)], 0, 0  # held[0]: what the last join left
    for links in results:
        held.append(links)
        count += links.shape[1]
        if not firsts and count > 2 * joined + JOIN_AT:
            documents, first, _ = join(np.concatenate(held, axis=1))
            held = [np.stack([documents[documents != first], first[documents != first]])]
            joined = count = held[0].shape[1]
    return np.concatenate(held, axis=1)


def scratch_names(shards: int) -> list[str]:
    """The names in the staging subfolder of every shard's files for the partition tasks."""
    return [f"shard-{s:06d}.{suffix}" for s in range(shards) for suffix in SCRATCH]
