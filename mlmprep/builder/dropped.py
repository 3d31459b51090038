"""--keep-dropped: the `dropped` split, every piece of text the build removed, with why.

Rows: `document` (int64: the document's number among those the corpus's readers yield, in corpus order from 0,
whatever the shards), `reason` (the rule: a filter's, mlmprep.builder.filters.RULES; `dedup_paragraphs` for the
lines --dedup-paragraphs removed; `dedup_exact` or `dedup_near` for a duplicate document) and `text` (a whole
document, or the lines one rule removed from it joined by "\\n"), ordered by document, then rule in the order
applied. A document's text is as cleaning left it; a duplicate's as the filters and paragraph dedup left it.

Each reading task keeps, for its shard, what the filters and paragraph dedup removed (`shard-N.dropped`, JSON
lines), each staged document's number (`shard-N.numbers`) and, with --dedup exact or near, every staged document's
text (`shard-N.text`, UTF-8, and `shard-N.textbytes`), since dedup decides in the driver once it has seen them
all. The driver then writes the split in document order, ROWS_PER_FILE rows a data file (`write_split`).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np

from mlmprep.builder.filters import RULES
from mlmprep.builder.staged import STAGING, read_array, write_atomic
from mlmprep.format.write import finish_split, part_path, write_text_part

SPLIT = "dropped"
REASONS = (*RULES, "dedup_paragraphs", "dedup_exact", "dedup_near")  # every reason, in the order applied
COLUMNS = {"document": "int64", "reason": "string", "text": "string"}
ROWS_PER_FILE = 10_000  # rows of each data file of the split


class ShardDrops:
    """One shard's removals as its reading task makes them: (document number, reason, text) records, the number
    of each document a batch passes on (`pending`, a batch at a time, taken in order by the next stage) and of
    each one staged (`numbers`), and the documents read so far (`read`)."""

    def __init__(self):
        self.records: list[tuple[int, str, str]] = []
        self.pending: deque[np.ndarray] = deque()
        self.numbers: list[np.ndarray] = []
        self.texts: list[str] = []
        self.read = 0

    def staged(self, docs: list[str], numbers: np.ndarray, keep_text: bool) -> None:
        """Note a batch of documents staged (their numbers; their text too, given `keep_text`)."""
        self.numbers.append(numbers)
        if keep_text:
            self.texts += docs

    def write(self, stage: Path, index: int) -> None:
        """Stage the shard's records, document numbers and (if kept) texts."""
        base = f"shard-{index:06d}"
        write_atomic(stage / STAGING / f"{base}.dropped",
                     [json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in self.records])
        numbers = np.concatenate(self.numbers) if self.numbers else np.zeros(0, np.int64)
        write_atomic(stage / STAGING / f"{base}.numbers", [numbers.astype(np.int64).tobytes()])
        if self.texts:
            encoded = [t.encode("utf-8", "surrogatepass") for t in self.texts]
            write_atomic(stage / STAGING / f"{base}.text", encoded)
            write_atomic(stage / STAGING / f"{base}.textbytes", [np.array([len(e) for e in encoded], np.int64)
                                                                  .tobytes()])


def shard_rows(stage: Path, index: int, duplicates: np.ndarray, method: str) -> list[tuple[int, str, str]]:
    """Shard `index`'s rows of the split, its document numbers within the shard: what its reading task kept, and
    its staged documents at positions `duplicates` (dedup `method`), in order."""
    base = stage / STAGING / f"shard-{index:06d}"
    rows = [tuple(json.loads(line)) for line in Path(f"{base}.dropped").read_text("utf-8").splitlines()]
    if len(duplicates):
        numbers = read_array(Path(f"{base}.numbers"), np.int64)
        sizes = read_array(Path(f"{base}.textbytes"), np.int64)
        starts = np.cumsum(sizes) - sizes
        with open(f"{base}.text", "rb") as f:
            for d in duplicates.tolist():
                f.seek(int(starts[d]))
                text = f.read(int(sizes[d])).decode("utf-8", "surrogatepass")
                rows.append((int(numbers[d]), f"dedup_{method}", text))
    return sorted(rows, key=lambda r: (r[0], REASONS.index(r[1])))


def write_split(stage: Path, duplicates: list[np.ndarray], documents_read: list[int], method: str) -> dict:
    """Write the `dropped` split into `stage` from every shard's staged removals (duplicates: each shard's staged
    documents dedup dropped; documents_read: each shard's documents as read), ROWS_PER_FILE rows a data file
    whatever the shards; its manifest entry."""
    directory, first, parts, rows = stage / SPLIT, 0, [], []

    def write(count: int) -> None:
        path = part_path(directory, len(parts))
        parts.append((path, write_text_part(path, {"document": [r[0] for r in rows[:count]],
                                                   "reason": [r[1] for r in rows[:count]],
                                                   "text": [r[2] for r in rows[:count]]}, COLUMNS)))
        del rows[:count]

    for index, (dups, read) in enumerate(zip(duplicates, documents_read)):
        rows += [(first + number, reason, text) for number, reason, text in shard_rows(stage, index, dups, method)]
        while len(rows) >= ROWS_PER_FILE:
            write(ROWS_PER_FILE)
        first += read
    if rows:
        write(len(rows))
    return finish_split(directory, {}, {}, parts, columns=COLUMNS)
