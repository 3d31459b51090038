"""Cut a token stream into training rows, by token splitting or by the naive text segmentation.

Token splitting concatenates documents with EOS between them and cuts exact windows of `length` tokens
(the sharded build does the cutting, from global positions: `pipeline.stream_windows`), e.g. with length 4
and EOS = 1::

    documents  [5 6 7] [8 9] [10 11 12 13 14]
    stream     5 6 7 1 8 9 1 10 11 12 13 14 1
    windows    [5 6 7 1] [8 9 1 10] [11 12 13 14]      tail [1] dropped and counted

With `pack="doc"` (`doc_rows`) every document starts a new window and its short tail is kept as a shorter
row; with `eos_id=None` no EOS is appended (span corruption ends every row with its own </s>, an MLM frame
with its [SEP]), so the end of a document is never text to mask. `frame_rows` adds a tokenizer's [CLS] … [SEP].
Text segmentation (`text_segments`) cuts the raw text every `(input_length - 2) * 4` characters,
wherever that falls: the naive baseline that `mlmprep compare-methods` measures token splitting against.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from mlmprep.errors import ConfigError
from mlmprep.format.rows import Rows, span_indices, starts_of
from mlmprep.tokenizer.encode import WordTables

MIN_ROW = 2  # the shortest row span corruption can mask (one noise and one kept token)


def fixed_rows(values: np.ndarray, length: int) -> Rows:
    """Rows of equal `length` over a flat array whose size is a multiple of it."""
    n = len(values) // length
    return Rows(values, np.arange(n + 1, dtype=np.int64) * length)


@dataclass
class WindowStats:
    """What the windowing kept, dropped and padded, and how often a row boundary cut a word."""

    method: str
    row_length: int
    rows: int = 0
    tokens_kept: int = 0
    tokens_dropped: int = 0  # tail of the stream, tails too short to mask, tokens truncated off segments
    tokens_padded: int = 0  # row capacity left empty by short rows
    rows_truncated: int = 0
    rows_cut_in_word: int = 0  # rows that begin or end inside a word
    unk_id: int | None = None  # the tokenizer's unknown token, counted in the rows kept
    unknown_tokens: int = 0

    def as_dict(self) -> dict:
        capacity = self.rows * self.row_length
        return {
            "method": self.method,
            "row_length": self.row_length,
            "rows": self.rows,
            "tokens_kept": self.tokens_kept,
            "tokens_dropped": self.tokens_dropped,
            "tokens_padded": self.tokens_padded,
            "rows_truncated": self.rows_truncated,
            "token_utilisation": self.tokens_kept / capacity if capacity else 0.0,
            "fragment_rate": self.rows_cut_in_word / self.rows if self.rows else 0.0,
            "unknown_tokens": self.unknown_tokens,
            "unknown_fraction": self.unknown_tokens / self.tokens_kept if self.tokens_kept else 0.0,
        }

    def count_unknown(self, values: np.ndarray) -> None:
        """Add the unknown tokens among `values` (tokens kept in rows)."""
        if self.unk_id is not None:
            self.unknown_tokens += int(np.count_nonzero(values == self.unk_id))


def count_cut_rows(begins: np.ndarray, ends: np.ndarray) -> int:
    """Rows whose first boundary or last boundary falls inside a word."""
    return int(np.count_nonzero(begins | ends))


def with_eos(flat: np.ndarray, doc_lengths: np.ndarray, eos_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Append EOS to every document: (flat tokens, document lengths including EOS)."""
    ends = np.cumsum(doc_lengths)
    out = np.insert(flat, ends, eos_id).astype(np.int32, copy=False)
    return out, doc_lengths + 1


def doc_rows_per_document(doc_lengths: np.ndarray, length: int, eos: bool) -> tuple[np.ndarray, int]:
    """(rows each document gives with --pack doc, tokens dropped in tails shorter than MIN_ROW)."""
    full, tail = np.divmod(doc_lengths + eos, length)
    return full + (tail >= MIN_ROW), int(tail[(tail > 0) & (tail < MIN_ROW)].sum())


def doc_rows(flat, doc_lengths, *, length, eos_id, tables) -> tuple[Rows, np.ndarray, np.ndarray, int]:
    """--pack doc rows of whole documents: (rows, whether each row begins / ends inside a word, tokens dropped)."""
    tokens, lengths = with_eos(flat, doc_lengths, eos_id) if eos_id is not None else (flat, doc_lengths)
    full, tail = np.divmod(lengths, length)
    kept_tail = np.where(tail >= MIN_ROW, tail, 0)
    rows_per_doc = full + (kept_tail > 0)
    row_lengths = np.repeat(np.full(len(lengths), length), rows_per_doc)
    last_row = np.cumsum(rows_per_doc) - 1
    has_tail = kept_tail > 0
    row_lengths[last_row[has_tail]] = kept_tail[has_tail]
    # gather: every kept row starts at its document start + k * length
    doc_starts = starts_of(lengths)[:-1]
    k = span_indices(0, rows_per_doc)  # each row's place in its document
    starts = np.repeat(doc_starts, rows_per_doc) + k * length
    offsets = starts_of(row_lengths)
    values = tokens[span_indices(starts, row_lengths)]
    # a row that is not the first of its document begins where the previous row of that document ended
    later = k > 0
    begins = np.zeros(len(row_lengths), dtype=bool)
    begins[later] = tables.cuts_word(tokens[starts[later] - 1], tokens[starts[later]])
    ends = np.zeros_like(begins)
    ends[:-1] = begins[1:] & later[1:]
    dropped_tails = tail[(tail > 0) & (tail < MIN_ROW)]
    return Rows(values, offsets), begins, ends, int(dropped_tails.sum())


def frame_rows(rows: Rows, prefix: np.ndarray, suffix: np.ndarray) -> Rows:
    """Every row as prefix + row + suffix: the frame a tokenizer's post-processor gives one sequence
    ([CLS] … [SEP]), so MLM rows look like the rows the model meets when it is used."""
    if not (len(prefix) or len(suffix)):
        return rows
    width = len(prefix) + len(suffix)
    offsets = starts_of(rows.lengths() + width)
    values = np.empty(int(offsets[-1]), dtype=np.int32)
    starts = offsets[:-1]
    for j, t in enumerate(prefix):
        values[starts + j] = t
    for j, t in enumerate(suffix):
        values[offsets[1:] - len(suffix) + j] = t
    values[span_indices(starts + len(prefix), rows.lengths())] = rows.values
    return Rows(values, offsets)


def segment_chars(input_length: int) -> int:
    """Characters per segment of the naive method: (input_length - 2) * 4 (4 characters a token)."""
    if input_length <= 2:
        raise ConfigError(f"--input-length {input_length} leaves --method text no characters to a segment "
                          "((input_length - 2) * 4); raise it")
    return (input_length - 2) * 4


def text_segments(documents: Iterable[str], chars: int) -> Iterator[tuple[str, bool]]:
    """Cut the text of all documents, joined by spaces, every `chars` characters.

    Yields (segment, cut_in_word), where cut_in_word says the cut after this segment split a word.
    The last segment is shorter. Whitespace-only segments are skipped.
    """
    buffer = ""
    for doc in documents:
        buffer = f"{buffer} {doc}" if buffer else doc
        pos = 0
        while len(buffer) - pos > chars:  # strictly longer: the character after the cut must exist
            segment, pos = buffer[pos : pos + chars], pos + chars
            if segment.strip():
                yield segment, segment[-1].isalnum() and buffer[pos].isalnum()
        buffer = buffer[pos:]
    if buffer.strip():
        yield buffer, False


def segment_rows(
    token_flat: np.ndarray,
    token_lengths: np.ndarray,
    cut_after: np.ndarray,
    cut_before_first: bool,
    *,
    length: int,
    tables: WordTables,
    stats: WindowStats,
) -> Rows:
    """Rows from tokenized text segments: longer than `length` truncated (loss counted), shorter kept.

    `cut_after[i]` says segment i's end split a word; `cut_before_first` whether the first one began inside a word.
    A truncated row ends where it was truncated, which splits a word if the next token continues one.
    Segments that tokenize to fewer than MIN_ROW tokens are dropped and counted.
    """
    kept_lengths = np.minimum(token_lengths, length)
    starts = starts_of(token_lengths)[:-1]
    begins = np.concatenate([[cut_before_first], cut_after[:-1]])  # where the text was cut before each row
    ends = cut_after.copy()
    truncated = token_lengths > length
    last = starts[truncated] + length  # the first token cut off
    ends[truncated] = tables.cuts_word(token_flat[last - 1], token_flat[last])
    keep = kept_lengths >= MIN_ROW
    starts, kept_lengths = starts[keep], kept_lengths[keep]
    offsets = starts_of(kept_lengths)
    index = span_indices(starts, kept_lengths)
    begins, ends = begins[keep], ends[keep]
    stats.rows += len(kept_lengths)
    stats.tokens_kept += int(offsets[-1])
    stats.tokens_dropped += int(token_lengths.sum() - offsets[-1])
    stats.tokens_padded += int((length - kept_lengths).sum())
    stats.rows_truncated += int(np.count_nonzero(token_lengths > length))
    stats.rows_cut_in_word += count_cut_rows(begins, ends)
    values = token_flat[index].astype(np.int32, copy=False)
    stats.count_unknown(values)
    return Rows(values, offsets)
