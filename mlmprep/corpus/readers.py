"""Readers: one file of a supported format -> its document texts, with what was skipped or replaced counted.
READERS names each format's reader: `text` (.txt), `jsonl` (.jsonl, .json), `columnar` (.parquet, .csv, .arrow);
what they share is in `files`, and `streams` streams compressed files.

Text files are read as bytes and decoded about 1 MB of whole lines at a time; a block holding undecodable
bytes is decoded line by line, so --on-decode-error can replace, skip or refuse one bad line. Parquet, CSV
and Arrow files are read in record batches. The exception is a `.json` file holding one JSON document (a
top-level array, or one object over several lines), which is parsed whole (use JSON lines for large corpora).

Compressed files: `NAME.FORMAT.gz|.bz2|.xz|.zst` (any text format) are streamed through `open_corpus_file`,
which every reader uses, and checked against their magic bytes both ways. A part of one is read by decompressing
from the start and skipping to the part, or by going on from where this process's last part of the file stopped
(see `streams.py`); damaged data is an error, or with --on-decode-error skip the end of the file
(the text before it is kept, its cut last line dropped).

Binary files: a .txt/.json/.jsonl/.csv file that starts with a UTF-16 byte-order mark, or whose first 8 KiB
hold NUL bytes and are over 1% undecodable (an image, an archive) or over 1% NUL (UTF-16 text), is refused.
Other NULs are text, dropped by the clean stage, and other undecodable bytes follow --on-decode-error (a stray
NUL beside one Latin-1 byte is still text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from mlmprep.corpus.columnar import read_arrow, read_csv, read_parquet
from mlmprep.corpus.files import CorpusStats, ReadOptions
from mlmprep.corpus.jsonl import read_json, read_jsonl
from mlmprep.corpus.text import read_txt

READERS: dict[str, Callable[[Path, CorpusStats, ReadOptions], Iterator[str | None]]] = {
    ".txt": read_txt, ".jsonl": read_jsonl, ".json": read_json, ".parquet": read_parquet, ".csv": read_csv,
    ".arrow": read_arrow,
}


__all__ = ["READERS"]
