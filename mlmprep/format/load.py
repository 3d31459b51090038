"""Load: open the splits of a build directory in place, memory-mapped, without copying a token.

A split directory is what `datasets.save_to_disk` writes: Arrow IPC *stream* files, each a run of record
batches. Every data file is mapped once and viewed whole as each column's stored type (uint16, int16 or
int32: write.column_dtypes); a `Column` records where each record batch's tokens sit in those views. Rows
are read straight from the page cache, so the ranks of one machine share a single copy, and opening a split
costs O(rows), never O(tokens).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
from numba import njit
from numba.typed import List

from mlmprep.errors import CacheError, TokenizerError
from mlmprep.format.manifest import (
    MANIFEST,
    OBJECTIVES,
    FileRecord,
    Manifest,
    data_file_names,
    file_sha256,
    member,
    not_regular,
    read_json,
)
from mlmprep.format.rows import IGNORE, starts_of
from mlmprep.format.write import damaged, file_rows, manifest_path, read_batches
from mlmprep.tokenizer.load import load_tokenizer, tokenizer_sha256

COLUMNS = ("input_ids", "labels")
ROW_VALUES = {"denoiser": np.uint8, "rate": np.float32}  # a value per row: ul2 and prefix, mdlm
FEW_FILES = 4  # Column.buffers: up to this many files go to kernels as a tuple (one compiled variant per count)
STORED = {pa.int32(): np.int32, pa.uint16(): np.uint16, pa.int16(): np.int16}  # the value types a column may have


def read_manifest(build_dir: str | Path) -> Manifest:
    """The manifest of a build directory, every field checked (manifest.Manifest.from_json)."""
    if not Path(build_dir).is_dir():  # a mistyped name is said plainly, not as a build missing its manifest
        what = "not a directory" if Path(build_dir).exists() else "no such directory"
        raise CacheError(f"{build_dir}: {what}; give the directory mlmprep build wrote")
    path = member(build_dir, MANIFEST)  # the manifest is a file of the build like any other
    if not path.is_file():
        raise CacheError(f"{build_dir}: no manifest.json; run mlmprep build first")
    return parse_manifest(read_json(path), build_dir)


def parse_manifest(data, build_dir: str | Path) -> Manifest:
    """Manifest.from_json, said as "not an mlmprep manifest" when `data` is no JSON object at all."""
    if not isinstance(data, dict):
        raise CacheError(f"{manifest_path(build_dir)}: not a JSON object, so no mlmprep manifest; "
                         "rebuild with mlmprep build --force")
    return Manifest.from_json(data, build_dir)


def file_problem(path: Path, record: FileRecord | None, *, content: bool = True) -> str | None:
    """What is wrong with `path` against its manifest record, or None: not listed, missing, another size, or
    (with `content`, a whole read) other bytes."""
    if record is None:
        return "not listed in the manifest"
    if kind := not_regular(path):
        return f"{kind}, not a regular file"
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if size != record.bytes:
        return f"{size} bytes, manifest says {record.bytes}"
    if content:
        try:
            sha256 = file_sha256(path)
        except OSError as exc:  # swapped for a FIFO or a directory since the checks above
            return f"unreadable ({exc})"
        return sha_problem(sha256, record)
    return None


def sha_problem(sha256: str, record: FileRecord) -> str | None:
    """What a file whose bytes hash to `sha256` ("-": could not be read) is against its record, or None."""
    if sha256 == "-":
        return "unreadable"
    return None if sha256 == record.sha256 else "sha256 differs from the manifest (the file changed)"


def check_split_files(build_dir: Path, manifest: Manifest, name: str) -> dict[str, FileRecord]:
    """The manifest's records of split `name`'s files, by file name, once each is inside the build and there at
    its recorded size: a stat apiece (`verify` also hashes), so a command that reads the split refuses a damaged
    one in one line."""
    entry = manifest.split(name)
    if entry is None:
        raise damaged(build_dir, manifest_path(build_dir), f"lists no split {name}")
    for record in entry.files:
        path = member(build_dir, f"{name}/{record.name}")
        if problem := file_problem(path, record, content=False):
            raise damaged(build_dir, path, problem)
    return {f.name: f for f in entry.files}


def check_split_hashes(build_dir: Path, manifest: Manifest, name: str, *, digests=None) -> dict[str, FileRecord]:
    """check_split_files, then each of split `name`'s files re-hashed against the manifest's sha256 (a whole read):
    the one check an edit that keeps the sizes, or a swap of two same-size files, cannot pass. `digests(paths)`
    gives the files' sha256 ("-": unreadable) another way (in a child process); by default they are hashed here."""
    records = check_split_files(build_dir, manifest, name)
    paths = [build_dir / name / record.name for record in records.values()]
    if digests is None:
        problems = [file_problem(path, record) for path, record in zip(paths, records.values())]
    else:
        problems = [sha_problem(sha256, record) for sha256, record in zip(digests(paths), records.values())]
    for path, problem in zip(paths, problems):
        if problem:
            raise damaged(build_dir, path, problem)
    return records


def listed_data_files(build_dir: Path, name: str, records: dict[str, FileRecord]) -> list[str]:
    """The data files split `name`'s state.json lists, in order, once each is one of `records` (the manifest's files
    of the split): a state.json edited to name another file beside them is refused in one line."""
    state = member(build_dir, f"{name}/state.json")
    names = data_file_names(state)
    if unlisted := [n for n in names if n not in records]:
        raise damaged(build_dir, state, f"lists {unlisted[0]}, a data file the manifest does not list")
    return names


def check_split_rows(build_dir: Path, manifest: Manifest, name: str) -> None:
    """Split `name` as the manifest gives it: its files there at their sizes (listed_data_files) and as many rows in
    their Arrow metadata (no column read) as the manifest says; refused in one line otherwise."""
    names = listed_data_files(build_dir, name, check_split_files(build_dir, manifest, name))
    rows = sum(file_rows(build_dir / name / n) for n in names)
    if rows != (listed := manifest.splits[name].rows):
        raise damaged(build_dir, build_dir / name, f"its files hold {rows:,} rows, the manifest says {listed:,}")


def check_splits(build_dir: Path, manifest: Manifest, names=None) -> None:
    """check_split_rows for each split of `names` (every split the manifest lists: None), so that what a summary
    shows of them is what their files hold."""
    for name in manifest.splits if names is None else names:
        check_split_rows(build_dir, manifest, name)


def tokenizer_path(build_dir: Path, manifest: Manifest) -> Path:
    """The build's tokenizer.json, refused in one line when it is missing or outside the build."""
    path = member(build_dir, manifest.tokenizer.file)
    if not path.is_file():
        raise damaged(build_dir, path, "missing")
    return path


def build_tokenizer(build_dir: Path, manifest: Manifest):
    """The build's own tokenizer, refused in one line when missing or changed, or when its vocabulary is not the
    one the manifest gives: masks, decoding and a model's embeddings use its ids."""
    path = tokenizer_path(build_dir, manifest)
    try:
        tok = load_tokenizer(path)
    except TokenizerError:
        raise damaged(build_dir, path, "not a readable tokenizer.json") from None
    if tokenizer_sha256(tok) != manifest.tokenizer.sha256:
        raise damaged(build_dir, path, "not the tokenizer the build used (sha256 differs)")
    if (size := tok.get_vocab_size(with_added_tokens=True)) != manifest.tokenizer.vocab_size:
        raise damaged(build_dir, manifest_path(build_dir),
                      f"tokenizer vocab_size {manifest.tokenizer.vocab_size}, the tokenizer has {size}")
    return tok


@dataclass(frozen=True, eq=False)
class Column:
    """One list column of a split, read in place, its values in their stored type (`dtype`).

    Row i has offsets[i + 1] - offsets[i] tokens, numbered as if the column were one flat array. The
    tokens live in `files` (each mapped data file viewed whole as `dtype`, zero-copy); record batch c holds
    rows from chunks[c, 0] on, whose first token (number chunks[c, 1]) is files[chunks[c, 2]][chunks[c, 3]].
    """

    offsets: np.ndarray  # int64 [n + 1]
    files: tuple[np.ndarray, ...]  # dtype [file bytes // itemsize] per data file, read-only views of the maps
    chunks: np.ndarray  # int64 [n_chunks, 4]: first row, first token, file index, token position in that file
    dtype: np.dtype  # uint16, int16 or int32: the values as stored, which every reader converts to int64 alike

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        """Tokens per row, int64 [n]."""
        return np.diff(self.offsets)

    @property
    def values(self) -> np.ndarray:
        """All tokens, flat (dtype [offsets[-1]]): a zero-copy view when the column is one record batch;
        otherwise the batches are not adjacent in the files and this is a copy (`row`, `locate` never copy)."""
        ends = np.append(self.chunks[1:, 1], self.offsets[-1])
        parts = [self.files[f][pos : pos + end - first] for (_, first, f, pos), end in zip(self.chunks, ends)]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, self.dtype)

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(file index, first token's position in that file, length) of each row; int64 [len(rows)] each."""
        return locate(self.offsets, self.chunks, np.asarray(rows, dtype=np.int64))

    def by_file(self, rows: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """Per data file holding some of `rows`: (its view, which of `rows` [k], their starts [k],
        lengths [k])."""
        file, start, length = self.locate(rows)
        if len(self.files) == 1:
            yield self.files[0], np.arange(len(file)), start, length
            return
        for f in np.unique(file):
            which = np.flatnonzero(file == f)
            yield self.files[f], which, start[which], length[which]

    @cached_property
    def buffers(self) -> tuple | List:
        """`files` for a kernel that reads rows of every file in one call: the tuple itself when there are a few (a
        Numba call unpacks it fastest), a Numba typed list when there are more (its call costs the same whatever
        their number); one placeholder when there are none."""
        files = self.files or (np.zeros(0, self.dtype),)
        return files if len(files) <= FEW_FILES else List(files)

    def row(self, i: int) -> np.ndarray:
        """Row i, dtype [length]: a view of the mapped file."""
        file, start, length = (int(x[0]) for x in self.locate(np.array([i])))
        return self.files[file][start : start + length]


@njit(cache=True, nogil=True)
def locate(offsets, chunks, rows):
    """Column.locate over a column's offsets and chunks, in one pass: each row's record batch (the last chunk
    starting at or before it), its file and position there, its length. A row outside [0, n) raises IndexError."""
    file = np.empty(len(rows), dtype=np.int64)
    start = np.empty(len(rows), dtype=np.int64)
    length = np.empty(len(rows), dtype=np.int64)
    for j in range(len(rows)):
        row = rows[j]
        if row < 0 or row >= len(offsets) - 1:
            raise IndexError("row outside the column")
        c = np.searchsorted(chunks[:, 0], row, side="right") - 1
        file[j] = chunks[c, 2]
        start[j] = chunks[c, 3] + offsets[row] - chunks[c, 1]
        length[j] = offsets[row + 1] - offsets[row]
    return file, start, length


@dataclass(frozen=True, eq=False)
class Split:
    """One split directory (seed-k, validation) of a build, memory-mapped.

    Encoder tokens are input_ids; decoder tokens are the labels for the seq2seq objectives (span, ul2, prefix)
    and none for mlm and mdlm (an encoder-only model runs no decoder), which is what the batch planner budgets.
    ul2 and prefix rows carry their denoiser (an index into `denoisers`, the manifest's names), mdlm rows their
    masking rate.
    """

    path: Path
    objective: str  # one of manifest.OBJECTIVES
    input_ids: Column
    labels: Column
    enc_lengths: np.ndarray  # int64 [n]
    dec_lengths: np.ndarray  # int64 [n]; zeros for mlm and mdlm
    denoiser: np.ndarray | None = None  # uint8 [n]: ul2, prefix
    rate: np.ndarray | None = None  # float32 [n]: mdlm
    denoisers: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.enc_lengths)

    def row(self, i: int) -> dict[str, np.ndarray]:
        """Row i as zero-copy views in the stored types: {"input_ids": [L_enc], "labels": [L_dec]}, and its
        "denoiser" or "rate" where the split has them."""
        out = {"input_ids": self.input_ids.row(i), "labels": self.labels.row(i)}
        for name in ROW_VALUES:
            if (values := getattr(self, name)) is not None:
                out[name] = values[i]
        return out

    __getitem__ = row  # a map-style dataset for torch's DataLoader and the HF Trainer

    @cached_property
    def n_targets(self) -> np.ndarray:
        """Positions the loss counts per row (labels != -100), int64 [n]; one pass over the labels, on first use.
        mdlm: every position of the row, as MDLM's bound is a mean over the sequence (loss.weighted_loss)."""
        if self.objective == "mdlm":
            return self.enc_lengths.copy()
        out = np.zeros(len(self), dtype=np.int64)
        for buf, which, start, length in self.labels.by_file(np.arange(len(self))):
            out[which] = _count_targets(buf, start, length)
        return out


@njit(cache=True)
def _count_targets(buf, starts, lengths):
    """Per row, the tokens in buf[starts[i] : starts[i] + lengths[i]] that are not IGNORE; int64 [n]."""
    out = np.zeros(len(starts), dtype=np.int64)
    for i in range(len(starts)):
        s = starts[i]
        count = 0
        for t in range(s, s + lengths[i]):
            count += buf[t] != IGNORE
        out[i] = count
    return out


def open_split(path: str | Path, *, objective: str | None = None) -> Split:
    """Memory-map every data-*.arrow file that state.json lists; fixed-size and variable-length lists.

    `objective` defaults to the one in the build's manifest (the split's parent directory).
    """
    path = Path(path)
    state = member(path.parent, f"{path.name}/state.json")  # the split and its files stay inside the build
    if not state.is_file():
        raise CacheError(f"{path}: not a split directory (no state.json); run mlmprep build first")
    if objective is None:
        objective = read_manifest(path.parent).objective
    if objective not in OBJECTIVES:
        raise CacheError(f"{path}: objective {objective!r} is not one of {', '.join(OBJECTIVES)}")
    names = data_file_names(state)
    maps, chunks, dtypes, values = [], {name: [] for name in COLUMNS}, {}, {name: [] for name in ROW_VALUES}
    for f, name in enumerate(names):
        if not (path / name).is_file():
            raise CacheError(f"{path / name}: listed in state.json but missing; the build is incomplete, rebuild it")
        mapped = pa.memory_map(str(path / name)).read_buffer()  # zero-copy: the whole file
        maps.append(mapped)
        for batch in read_batches(mapped, path / name):
            for column in COLUMNS:
                if column not in batch.schema.names:
                    raise CacheError(f"{path / name}: no column {column!r} (has {', '.join(batch.schema.names)})")
                where = f"{path / name}:{column}"
                chunk, dtype = _chunk(batch.column(column), mapped, f, where)
                if dtypes.setdefault(column, dtype) != dtype:
                    raise CacheError(f"{where}: {dtype} values where earlier batches hold {dtypes[column]}; "
                                     "rebuild the split")
                chunks[column].append(chunk)
            for column, dtype in ROW_VALUES.items():
                if column in batch.schema.names:
                    values[column].append(row_values(batch.column(column), dtype, f"{path / name}:{column}"))
    input_ids, labels = (_column(chunks[name], maps, dtypes.get(name, np.dtype(np.int32))) for name in COLUMNS)
    if len(input_ids) != len(labels):
        raise CacheError(f"{path}: {len(input_ids)} input_ids rows but {len(labels)} labels rows; rebuild the split")
    enc, dec = input_ids.lengths(), labels.lengths()
    if objective in ("mlm", "mdlm"):
        if not np.array_equal(enc, dec):
            bad = int(np.flatnonzero(enc != dec)[0])
            raise CacheError(f"{path}: {objective} row {bad} has {enc[bad]} input_ids but {dec[bad]} labels; "
                             "rebuild the split")
        dec = np.zeros_like(enc)
    extra = {}
    needed = {"ul2": "denoiser", "prefix": "denoiser", "mdlm": "rate"}.get(objective)
    if needed is not None:
        if sum(map(len, values[needed])) != len(enc):
            raise CacheError(f"{path}: {objective} data without a {needed} per row; rebuild the split")
        extra[needed] = np.concatenate(values[needed]) if values[needed] else np.zeros(0, ROW_VALUES[needed])
    if needed == "denoiser":
        names = tuple(read_manifest(path.parent).denoiser_names())
        if len(extra["denoiser"]) and int(extra["denoiser"].max()) >= len(names):
            raise CacheError(f"{path}: a row's denoiser is {int(extra['denoiser'].max())}, the manifest lists "
                             f"{len(names)}; rebuild the split")
        extra["denoisers"] = names
    return Split(path=path, objective=objective, input_ids=input_ids, labels=labels, enc_lengths=enc, dec_lengths=dec,
                 **extra)


def row_values(arr: pa.Array, dtype, where: str) -> np.ndarray:
    """A column of one value per row (denoiser, rate) as `dtype`, checked: that type, no nulls, rates in (0, 1]."""
    if arr.type != pa.from_numpy_dtype(np.dtype(dtype)) or arr.null_count:
        raise CacheError(f"{where}: type {arr.type} with {arr.null_count} nulls, expected {np.dtype(dtype)}; rebuild")
    out = arr.to_numpy(zero_copy_only=False)
    if dtype == np.float32 and len(out) and not (np.all(out > 0) and np.all(out <= 1)):
        raise CacheError(f"{where}: a rate outside (0, 1] (a damaged file); rebuild the split")
    return out


def _chunk(arr: pa.Array, mapped: pa.Buffer, file: int, where: str) -> tuple[tuple[np.ndarray, int, int], np.dtype]:
    """((row lengths int64 [k], file index, token position in the file), value type) of one record batch's list
    column."""
    if pa.types.is_fixed_size_list(arr.type):
        lengths = np.full(len(arr), arr.type.list_size, dtype=np.int64)
        first = arr.offset * arr.type.list_size
    elif pa.types.is_list(arr.type):
        offsets = arr.offsets.to_numpy()  # int32 [k + 1], honours a sliced array's offset
        lengths = np.diff(offsets).astype(np.int64)
        first = int(offsets[0])
        # negative rows cancel out in the bounds check below, and are read out of bounds
        if len(lengths) and lengths.min() < 0:
            raise CacheError(f"{where}: list offsets decrease (a damaged file); rebuild the split")
    else:
        raise CacheError(f"{where}: type {arr.type}, expected a list or fixed_size_list of integers; rebuild")
    child = arr.values
    if child.type not in STORED or arr.null_count or child.null_count:
        raise CacheError(f"{where}: type {arr.type} with {arr.null_count} null rows; "
                         "mlmprep reads lists of uint16, int16 or int32 without nulls")
    dtype = np.dtype(STORED[child.type])
    if not lengths.sum():  # no tokens: the values buffer may be 0 bytes anywhere, and nothing is read from it
        return (lengths, file, 0), dtype
    size = dtype.itemsize
    byte = child.buffers()[1].address + size * (child.offset + first) - mapped.address
    if byte % size or not 0 <= byte <= mapped.size - size * int(lengths.sum()):
        raise CacheError(f"{where}: tokens are not stored in place (a compressed Arrow stream?); rebuild the split")
    return (lengths, file, byte // size), dtype


def _column(chunks: list[tuple[np.ndarray, int, int]], maps: list[pa.Buffer], dtype: np.dtype) -> Column:
    """Join per-batch (lengths, file, position) into one Column over `maps` viewed as `dtype`; empty batches
    are left out of the table."""
    offsets = starts_of(np.concatenate([c[0] for c in chunks]) if chunks else np.zeros(0, np.int64))
    rows = starts_of([len(c[0]) for c in chunks])[:-1]
    table = np.array(
        [(r, offsets[r], f, pos) for r, (ls, f, pos) in zip(rows, chunks) if len(ls)], dtype=np.int64
    ).reshape(-1, 4)
    files = tuple(np.frombuffer(m, dtype=dtype, count=m.size // dtype.itemsize) for m in maps)
    return Column(offsets=offsets, files=files, chunks=table, dtype=dtype)


@njit(cache=True, nogil=True)
def _gather(buf, starts, lengths, out, out_starts):
    """Copy buf[starts[i] : starts[i] + lengths[i]] to out[out_starts[i] :] for each i, row by row through views of
    both: a loop without index arithmetic, which compiles to a vectorized copy."""
    for i in range(len(starts)):
        source = buf[starts[i] : starts[i] + lengths[i]]
        target = out[out_starts[i] : out_starts[i] + lengths[i]]
        for t in range(lengths[i]):
            target[t] = source[t]


def pick_rows(parts: list[tuple[Split, np.ndarray]], path: str | Path) -> Split:
    """One Split of the given rows of several splits, in order (the rows of each (split, rows) part in turn). Their
    tokens are gathered into one array per column (a copy of just those rows), so that collating reads one buffer
    as it does for a split of one file; the cost follows the rows picked, not the splits' sizes. `path` names it in
    messages. Parts must share their objective and their columns' stored types."""
    objectives = {split.objective for split, _ in parts}
    if len(objectives) != 1:
        raise CacheError(f"{path}: cannot pick rows of {' and '.join(sorted(objectives))} splits together")
    columns, firsts = {}, np.cumsum([0] + [len(rows) for _, rows in parts[:-1]]).tolist()
    for name in COLUMNS:
        dtypes = {getattr(split, name).dtype for split, _ in parts}
        if len(dtypes) != 1:
            raise CacheError(f"{path}: {name} stored as {' and '.join(sorted(map(str, dtypes)))} in the builds mixed; "
                             "rebuild the older ones with this mlmprep so that they match")
        dtype = dtypes.pop()
        located = [(buf, first + which, start, length) for first, (split, rows) in zip(firsts, parts)
                   for buf, which, start, length in getattr(split, name).by_file(rows)]
        lengths = np.zeros(firsts[-1] + len(parts[-1][1]), dtype=np.int64)
        for _, at, _, length in located:
            lengths[at] = length
        offsets = starts_of(lengths)
        values = np.empty(int(offsets[-1]), dtype=dtype)
        for buf, at, start, length in located:
            _gather(buf, start, length, values, offsets[at])
        columns[name] = Column(offsets=offsets, files=(values,), chunks=np.zeros((1, 4), np.int64), dtype=dtype)
    enc = np.concatenate([split.enc_lengths[rows] for split, rows in parts])
    dec = np.concatenate([split.dec_lengths[rows] for split, rows in parts])
    extra = {name: np.concatenate([getattr(split, name)[rows] for split, rows in parts]) for name in ROW_VALUES
             if all(getattr(split, name) is not None for split, _ in parts)}
    if "denoiser" in extra:  # kept where the parts name their denoisers alike (mixture_run.mixture_denoisers)
        names = {split.denoisers for split, _ in parts}
        extra["denoisers"] = names.pop() if len(names) == 1 else ()
        if not extra["denoisers"]:
            del extra["denoiser"]
    return Split(path=Path(path), objective=objectives.pop(), input_ids=columns["input_ids"],
                 labels=columns["labels"], enc_lengths=enc, dec_lengths=dec, **extra)


def epoch_split(manifest: Manifest, epoch: int, seeds: int | None = None) -> str:
    """The split epoch `epoch` trains on: seed-{epoch % N}, so N masked copies take turns; N is the manifest's
    seed count, or `seeds` of them (a run keeps the count it started with when a remask adds more)."""
    listed = manifest.seed_splits
    if not listed:
        raise CacheError("manifest.json lists no seed splits; rebuild with mlmprep build --seeds N")
    return listed[epoch % min(seeds or len(listed), len(listed))]


def open_epoch(build_dir: str | Path, epoch: int, seeds: int | None = None, *, identity: str | None = None,
               rehash: bool = False) -> Split:
    """Open the split of `epoch` (see epoch_split), checking its files (sizes; with `rehash` their sha256 too) and
    row count against the manifest, and with `identity` (Manifest.identity of the build a run planned on) that
    the build is still that one: a build replaced or edited under a run stops it in one line."""
    build_dir = Path(build_dir)
    manifest = read_manifest(build_dir)
    if identity is not None and (now := manifest.identity(seeds)) != identity:
        raise CacheError(f"{build_dir}: not the build this run started on (its data files' sha256 {now[:12]}, the "
                         f"run's {identity[:12]}): it was rebuilt or edited; start a new run (--out) on it, or "
                         "restore the build the run began with")
    name = epoch_split(manifest, epoch, seeds)
    listed_data_files(build_dir, name, (check_split_hashes if rehash else check_split_files)(build_dir, manifest, name))
    split = open_split(build_dir / name, objective=manifest.objective)
    if len(split) != (rows := manifest.splits[name].rows):
        raise CacheError(f"{build_dir / name}: {len(split)} rows, the manifest says {rows}; rebuild with --force")
    return split


__all__ = ["Column", "Split", "build_tokenizer", "check_split_files", "check_split_hashes", "check_split_rows",
           "check_splits", "epoch_split", "file_problem", "listed_data_files", "open_epoch", "open_split",
           "parse_manifest", "pick_rows", "read_manifest", "tokenizer_path"]
