"""Phase 2's input: rows first..first+count-1 of one side's splits, cut from the staged shards wherever they lie
(a window may take the tail of one shard and the head of the next), or read from the segmenting tasks' rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mlmprep.builder.denoisers import SeedRows
from mlmprep.builder.selection import MOVED_PICKS
from mlmprep.builder.staged import Layout, document_index, gather, read_array, side_documents
from mlmprep.builder.windows import count_cut_rows, doc_rows, doc_rows_per_document, with_eos
from mlmprep.format.rows import Rows, concat_rows


@dataclass(frozen=True)
class Plan:
    """For phase 2, one side's: where each shard's (or segment task's) output on that side starts, as far as the
    driver knows."""

    layout: Layout
    side: str  # "train" (splits windows and seed-k) or "validation" (validation-windows and validation)
    offsets: tuple[int, ...]  # per staged file: first stream token (stream) or first row (doc, text); last: its end
    rows: int  # whole windows before offsets[-1] (once every shard is done: the windows in all)
    seeds: tuple[int, ...]
    validation_seed: int
    shards: int = 0  # staged shards: offsets beyond them are pieces of the moved documents (see piece)


def piece(side: str, p: int, shards: int) -> tuple[int, str]:
    """(shard, picks) of staged piece p of a side's stream: each shard's documents on the side in turn, then, on
    the training side of a decontaminated build, each shard's documents moved there from validation."""
    return (p, side) if p < shards else (p - shards, MOVED_PICKS)


def stream_slice(plan: Plan, start: int, stop: int) -> np.ndarray:
    """Tokens [start, stop) of the side's stream (every shard's documents on the side, each followed by EOS)."""
    layout, offsets, parts = plan.layout, np.asarray(plan.offsets), []
    for s in range(max(0, int(np.searchsorted(offsets, start, side="right")) - 1), len(offsets) - 1):
        lo, hi = int(offsets[s]), int(offsets[s + 1])
        if lo >= stop:
            break
        a, b = max(start, lo) - lo, min(stop, hi) - lo
        if a >= b:
            continue
        shard, picks = piece(plan.side, s, plan.shards)
        lengths, begins = side_documents(layout, shard, picks, "lens")
        ends = np.cumsum(lengths + 1)  # each document's end in the shard's stream, EOS included
        d0, d1 = (int(np.searchsorted(ends, x, side="right")) for x in (a, b - 1))
        tokens = gather(layout.tokens(shard, picks), np.int32, lengths, begins, d0, d1)
        run, _ = with_eos(tokens, lengths[d0 : d1 + 1], layout.doc_eos)
        base = int(ends[d0] - lengths[d0] - 1)
        parts.append(run[a - base : b - base])
    return np.concatenate(parts) if parts else np.zeros(0, np.int32)


def stream_windows(plan: Plan, first: int, count: int, tables) -> tuple[Rows, int]:
    """Windows first..first+count-1 of the stream, and how many begin or end inside a word; the last window of
    the stream is shorter when the stream ends inside it (ul2 and prefix keep that tail)."""
    length, total = plan.layout.content_length, int(plan.offsets[-1])
    lo = max(first * length - 1, 0)
    tokens = stream_slice(plan, lo, min((first + count) * length + 1, total))
    ends = np.minimum(np.arange(count + 1) * length + first * length, total)  # each window's start in the stream
    windows = tokens[first * length - lo : int(ends[-1]) - lo]
    cuts = np.zeros(count + 1, dtype=bool)  # cuts[i]: the boundary before window first + i splits a word
    at = ends - lo  # the first token after each boundary
    inside = (at >= 1) & (at < len(tokens))
    cuts[inside] = tables.cuts_word(tokens[at[inside] - 1], tokens[at[inside]])
    return Rows(windows, ends - ends[0]), count_cut_rows(cuts[:-1], cuts[1:])


def seed_stream_rows(plan: Plan, rows: SeedRows, offsets: np.ndarray) -> Rows:
    """One seed's rows of an output file (ul2, prefix): tokens [rows.start, rows.stop) of the stream, cut at
    `offsets`."""
    return Rows(stream_slice(plan, rows.start, rows.stop), offsets)


def overlapping(offsets, first: int, count: int) -> Iterator[tuple[int, int, int]]:
    """(task, a, b) for each task whose rows offsets[task]..offsets[task + 1]-1 overlap rows first..first+count-1:
    its own rows a..b-1 are the overlap."""
    offsets = np.asarray(offsets)
    for task in range(max(0, int(np.searchsorted(offsets, first, side="right")) - 1), len(offsets) - 1):
        lo, hi = int(offsets[task]), int(offsets[task + 1])
        if lo >= first + count:
            return
        a, b = max(first, lo) - lo, min(first + count, hi) - lo
        if a < b:
            yield task, a, b


def doc_windows(plan: Plan, first: int, count: int, tables) -> tuple[Rows, int]:
    """Rows first..first+count-1 of --pack doc, and how many begin or end inside a word."""
    layout, parts, cut = plan.layout, [], 0
    for s, a, b in overlapping(plan.offsets, first, count):
        shard, picks = piece(plan.side, s, plan.shards)
        lengths, begins = side_documents(layout, shard, picks, "lens")
        per_doc, _ = doc_rows_per_document(lengths, layout.content_length, layout.doc_eos is not None)
        row_ends = np.cumsum(per_doc)
        d0, d1 = (int(np.searchsorted(row_ends, x, side="right")) for x in (a, b - 1))
        tokens = gather(layout.tokens(shard, picks), np.int32, lengths, begins, d0, d1)
        rows, begins, ends, _ = doc_rows(tokens, lengths[d0 : d1 + 1], length=layout.content_length,
                                         eos_id=layout.doc_eos, tables=tables)
        base = int(row_ends[d0] - per_doc[d0])
        parts.append(rows.slice(a - base, b - base))
        cut += count_cut_rows(begins[a - base : b - base], ends[a - base : b - base])
    return concat_rows(parts), cut


def stored_rows(plan: Plan, first: int, count: int) -> Rows:
    """Rows first..first+count-1 of the segmenting tasks' output (--method text)."""
    layout, parts = plan.layout, []
    for t, a, b in overlapping(plan.offsets, first, count):
        lengths, starts = document_index(layout.staged(f"segments-{plan.side}-{t:06d}.lens"))
        values = read_array(layout.staged(f"segments-{plan.side}-{t:06d}.ids"), np.int32, int(starts[a]),
                            int(starts[b]))
        parts.append(Rows(values, starts[a : b + 1] - starts[a]))
    return concat_rows(parts)
