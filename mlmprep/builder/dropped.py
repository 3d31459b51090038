"""--keep-dropped: the `dropped` split, every piece of text the build removed, with why.

Rows: `document` (int64: the document's number among those the corpus's readers yield, in corpus order from 0,
whatever the shards), `reason` (the rule: a filter's, mlmprep.builder.filters.RULES; `dedup_paragraphs` for the
lines --dedup-paragraphs removed; `exclude` for the text --exclude cut out; `dedup_exact` or `dedup_near` for a
duplicate document) and `text` (a whole document, or the lines one rule removed from it, or the stretches
--exclude cut, joined by "\\n"), ordered by document, then rule in the order applied (the pieces --exclude leaves
are documents of the same number, so a document can have a duplicate row for each). A document's text is as
cleaning left it; a duplicate's as the filters, paragraph dedup and --exclude left it.

Each reading task keeps, for its shard, what the filters and paragraph dedup removed (`shard-N.dropped`, JSON
lines), each staged document's number (`shard-N.numbers`) and, with --dedup exact or near, every staged document's
text (`shard-N.text`, UTF-8, and `shard-N.textbytes`), since dedup decides in the driver once it has seen them
all. A task on a Ray node that shares no disk with the driver sends these files back with its result (see
pipeline.run_detached). The driver then writes the split in document order, ROWS_PER_FILE rows a data file
(`write_split`).
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np

from mlmprep.builder.filters import DOCUMENT_RULES, RULES
from mlmprep.builder.staged import STAGING, read_array, write_atomic
from mlmprep.errors import CacheError
from mlmprep.format.manifest import Manifest, MemberError
from mlmprep.format.rows import starts_of
from mlmprep.format.write import (
    damaged,
    data_files,
    finish_split,
    part_path,
    read_batches,
    text_schema,
    write_text_part,
)

SPLIT = "dropped"
REASONS = (*RULES, "dedup_paragraphs", "exclude", "dedup_exact", "dedup_near")  # every reason, in the order applied
COLUMNS = {"document": "int64", "reason": "string", "text": "string"}
ROWS_PER_FILE = 10_000  # rows of each data file of the split
DRIVER_FILES = (".dropped", ".numbers", ".text", ".textbytes")  # a shard's staged files: only the driver reads them


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
        records, numbers, text, sizes = (stage / STAGING / f"shard-{index:06d}{end}" for end in DRIVER_FILES)
        write_atomic(records, [json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in self.records])
        staged = np.concatenate(self.numbers) if self.numbers else np.zeros(0, np.int64)
        write_atomic(numbers, [staged.astype(np.int64).tobytes()])
        if self.texts:
            encoded = [t.encode("utf-8", "surrogatepass") for t in self.texts]
            write_atomic(text, encoded)
            write_atomic(sizes, [np.array([len(e) for e in encoded], np.int64).tobytes()])


def shard_rows(stage: Path, index: int, duplicates: np.ndarray, method: str) -> list[tuple[int, str, str]]:
    """Shard `index`'s rows of the split, its document numbers within the shard: what its reading task kept, and
    its staged documents at positions `duplicates` (dedup `method`), in order."""
    base = stage / STAGING / f"shard-{index:06d}"
    rows = [tuple(json.loads(line)) for line in Path(f"{base}.dropped").read_text("utf-8").splitlines()]
    if len(duplicates):
        numbers = read_array(Path(f"{base}.numbers"), np.int64)
        sizes = read_array(Path(f"{base}.textbytes"), np.int64)
        starts = starts_of(sizes)
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


def split_rows(out: Path) -> list[tuple[int, str, str]]:
    """Every row of a build's `dropped` split, in order; a file not of its columns' types is refused."""
    import pyarrow as pa

    rows, schema = [], text_schema(COLUMNS)
    for path in data_files(out / SPLIT):
        with pa.memory_map(str(path)) as source:
            for batch in read_batches(source, path):
                if not batch.schema.equals(schema):
                    raise damaged(out, path, f"holds columns {batch.schema.to_string(show_schema_metadata=False)}"
                                  .replace("\n", ", ") + ", not document (int64), reason and text (strings)")
                rows += zip(*(batch.column(name).to_pylist() for name in COLUMNS))
    return rows


def check_split(out: Path, manifest: Manifest) -> list[str]:
    """The problems of a build's `dropped` split, one line each: rows the manifest does not count, a reason no rule
    gives, rows out of order, empty text, and for each rule rows that disagree with corpus.stats (the filters'
    documents and characters, dedup's documents and characters dropped, the lines paragraph dedup removed)."""
    try:
        rows = split_rows(out)
    except (CacheError, MemberError) as exc:
        return [f"{SPLIT}: does not load ({exc})"]
    problems = []
    if len(rows) != manifest.splits[SPLIT].rows:
        problems.append(f"{SPLIT}: {len(rows):,} rows, manifest says {manifest.splits[SPLIT].rows:,}")
    if bad := [r for r in rows if r[1] not in REASONS]:
        return [*problems, f"{SPLIT}: reason {bad[0][1]!r} (document {bad[0][0]}) is no rule's"]
    keys = [(r[0], REASONS.index(r[1])) for r in rows]
    repeatable = {REASONS.index("dedup_exact"), REASONS.index("dedup_near")}  # pieces of one document --exclude cut
    if (out_of_order := next((k for k in range(1, len(keys)) if keys[k] < keys[k - 1]
                              or (keys[k] == keys[k - 1] and keys[k][1] not in repeatable)), None)) is not None:
        problems.append(f"{SPLIT}: row {out_of_order} (document {rows[out_of_order][0]}, {rows[out_of_order][1]}) "
                        "is not after the row before it")
    if keys and keys[0][0] < 0:
        problems.append(f"{SPLIT}: document {keys[0][0]} is negative")
    if (empty := next((k for k, r in enumerate(rows) if not r[2]), None)) is not None:
        problems.append(f"{SPLIT}: row {empty} has no text")
    stats = manifest.corpus.stats
    found: dict[str, list[int]] = {}
    for _, reason, text in rows:
        count = found.setdefault(reason, [0, 0, 0])
        count[0] += 1
        count[1] += len(text)
        count[2] += text.count("\n") + 1
    expected = {rule: [c["documents"], c["characters"] if rule in DOCUMENT_RULES else None]
                for rule, c in stats.get("filters", {}).items() if rule != "c4_citation"}
    if stats.get("exclusion", {}).get("documents_matched"):  # a row of the stretches cut from each matched document
        expected["exclude"] = [stats["exclusion"]["documents_matched"], None]
    if stats.get("dedup", {}).get("documents_dropped"):
        expected[f"dedup_{stats['dedup']['method']}"] = [stats["dedup"]["documents_dropped"],
                                                         stats["dedup"]["characters_dropped"]]
    for rule in sorted(set(expected) | set(found) - {"dedup_paragraphs"}):
        want, got = expected.get(rule, [0, 0]), found.get(rule, [0, 0])
        if want[0] != got[0] or want[1] not in (None, got[1]):
            problems.append(f"{SPLIT}: {got[0]:,} rows ({got[1]:,} characters) of {rule}, corpus.stats gives "
                            f"{want[0]:,}" + (f" ({want[1]:,} characters)" if want[1] is not None else ""))
    lines = found.get("dedup_paragraphs", [0, 0, 0])[2]
    if lines != stats.get("paragraphs", {}).get("lines_removed", 0):
        problems.append(f"{SPLIT}: {lines:,} lines of dedup_paragraphs, corpus.stats.paragraphs gives "
                        f"{stats.get('paragraphs', {}).get('lines_removed', 0):,}")
    return problems
