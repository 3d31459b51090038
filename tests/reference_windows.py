"""Token splitting in one pass over (flat tokens, document lengths) chunks: the plain reference the tests hold
the sharded pipeline's windows (mlmprep.builder.side_rows.stream_windows / doc_windows) against.

The stream form carries each chunk's tail into the next; it never looks at shards, output files or global row
numbers, which is what makes it a check on the pipeline's arithmetic rather than a copy of it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from mlmprep.builder.windows import WindowStats, count_cut_rows, doc_rows, fixed_rows, with_eos
from mlmprep.format.rows import Rows
from mlmprep.tokenizer.encode import WordTables


def token_windows(chunks: Iterable[tuple[np.ndarray, np.ndarray]], *, length: int, eos_id: int | None, pack: str,
                  tables: WordTables, stats: WindowStats) -> Iterator[Rows]:
    """Rows of each chunk, counted into `stats`; `eos_id` None (pack "doc" only): documents get no EOS."""
    if pack == "stream":
        yield from stream_windows(chunks, length=length, eos_id=eos_id, tables=tables, stats=stats)
        return
    for flat, doc_lengths in chunks:
        rows, begins, ends, dropped = doc_rows(flat, doc_lengths, length=length, eos_id=eos_id, tables=tables)
        stats.rows += len(rows)
        stats.tokens_kept += int(rows.offsets[-1])
        stats.tokens_dropped += dropped
        stats.tokens_padded += int((length - rows.lengths()).sum())
        stats.rows_cut_in_word += count_cut_rows(begins, ends)
        stats.count_unknown(rows.values)
        if len(rows):
            yield rows


def stream_windows(chunks, *, length, eos_id, tables, stats) -> Iterator[Rows]:
    """Documents joined with EOS, cut every `length` tokens; the stream's last partial window is dropped."""
    carry, last_token, boundaries = np.zeros(0, dtype=np.int32), -1, []  # last_token: -1 at the stream's start
    for flat, doc_lengths in chunks:
        tokens, _ = with_eos(flat, doc_lengths, eos_id)
        stream = np.concatenate([carry, tokens])
        n = len(stream) // length
        carry = stream[n * length :]
        if n == 0:
            continue
        windows = stream[: n * length]
        firsts, lasts = windows[::length], windows[length - 1 :: length]
        cut = tables.cuts_word(np.concatenate([[max(last_token, 0)], lasts[:-1]]), firsts)
        cut[0] &= last_token >= 0
        boundaries.append(cut)  # cut[i]: the boundary before window i falls inside a word
        last_token = int(windows[-1])
        stats.rows += n
        stats.tokens_kept += n * length
        stats.count_unknown(windows)
        yield fixed_rows(windows, length)
    stats.tokens_dropped += len(carry)
    if boundaries:
        begins = np.concatenate(boundaries)
        after_last = bool(len(carry)) and bool(tables.cuts_word(np.array([last_token]), carry[:1])[0])
        stats.rows_cut_in_word += count_cut_rows(begins, np.append(begins[1:], after_last))
