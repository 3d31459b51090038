"""Write splits as `datasets.save_to_disk` directories, plus the manifest, last and atomically.

Each build task writes one data file of each split (`write_part`); the driver names them in order and adds
datasets' metadata (`finish_split`). A split directory holds Arrow IPC stream files
`data-0000k-of-0000K.arrow`, `dataset_info.json` and `state.json`, so `datasets.load_from_disk` opens it
and the trainer memory-maps it. Columns are lists of the integer type `column_dtypes` gives (uint16 token
ids when the vocabulary fits, else int32): fixed-size lists when every row has length L (a zero-copy 2-D view),
variable-length lists otherwise.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mlmprep.config import SEQ2SEQ
from mlmprep.errors import CacheError, printable
from mlmprep.format.manifest import MANIFEST, data_file_names, file_sha256, member
from mlmprep.format.rows import Rows

FORMAT_VERSION = 3  # 3: 16-bit columns (column_dtypes); 2: int32, a fixed number of rows per data file
UINT16_IDS = 1 << 16  # a vocabulary of at most this many ids is stored as uint16 (format 3)
INT16_LABELS = 1 << 15  # an mlm vocabulary of at most this many ids has int16 labels, -100 stored as it is
BATCH_ROWS = 1000  # rows per Arrow record batch, whatever the chunks upstream, so the bytes never depend on them

if TYPE_CHECKING:  # imported by the functions that use it: a build's driver, which writes no Arrow, spares 0.14 s
    import pyarrow as pa


def format_version(vocab_size: int) -> int:
    """The format a new build with a tokenizer of `vocab_size` ids is written in: 3 when every id fits in uint16,
    else 2 (int32 throughout)."""
    return FORMAT_VERSION if vocab_size <= UINT16_IDS else 2


def column_dtypes(version: int, objective: str, vocab_size: int) -> dict[str, np.dtype]:
    """The value type of each column of a build in format `version`: int32 before format 3; in format 3 uint16
    token ids (`tokens`, `input_ids`, the labels of span, ul2 and prefix), and mlm and mdlm `labels` int16 when the
    vocabulary has at most 32,768 ids (ids and IGNORE = -100 stored as they are, so every reader sees today's
    values), else int32. A ul2 or prefix build has a `denoiser` column (uint8), an mdlm build a `rate` (float32)."""
    extra = ({"denoiser": np.dtype(np.uint8)} if objective in ("ul2", "prefix") else
             {"rate": np.dtype(np.float32)} if objective == "mdlm" else {})
    if version < 3:
        return {**dict.fromkeys(("tokens", "input_ids", "labels"), np.dtype(np.int32)), **extra}
    labels = np.int16 if vocab_size <= INT16_LABELS else np.int32
    return {"tokens": np.dtype(np.uint16), "input_ids": np.dtype(np.uint16),
            "labels": np.dtype(np.uint16 if objective in SEQ2SEQ else labels), **extra}


def manifest_path(build_dir: str | Path) -> Path:
    return Path(build_dir) / MANIFEST


def damaged(build_dir: str | Path, path: Path, problem: str) -> CacheError:
    """The one-line error for a file of a build that is missing or changed, saying how to see every problem or
    rebuild."""
    return CacheError(f"{path}: {problem}; the build is damaged: "
                      f"run `mlmprep verify {build_dir}` to see every problem, "
                      f"or rebuild it with `mlmprep build ... --out {build_dir} --force`")


def strict(value):
    """`value` with every non-finite float (NaN, ±inf) replaced by None, so json.dumps(allow_nan=False) holds:
    strict JSON readers reject the bare NaN / Infinity literals Python writes by default; and every string
    made printable (a path given with bytes that are not UTF-8 cannot be written as UTF-8 JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def write_json(path: Path, data: dict) -> None:
    """Write JSON (sorted keys) to a temporary name, then rename: readers see the old or the new file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(strict(data), f, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def hf_tokenizer_files(tok, *, model_max_length: int) -> dict[str, dict]:
    """special_tokens_map.json and tokenizer_config.json for `tok`: what transformers' AutoTokenizer reads
    beside tokenizer.json to set pad/eos/unk/mask and the sentinels."""
    from mlmprep.tokenizer.load import special_ids

    ids, name = special_ids(tok), tok.id_to_token
    found = {"pad_token": ids.pad, "eos_token": ids.eos, "unk_token": ids.unk, "mask_token": ids.mask,
             "cls_token": tok.token_to_id("[CLS]"), "sep_token": tok.token_to_id("[SEP]"),
             "bos_token": tok.token_to_id("<s>")}
    special = {key: name(idx) for key, idx in found.items() if idx is not None}
    if len(ids.sentinels):
        # <extra_id_0>, <extra_id_1>, ...
        special["additional_special_tokens"] = [name(int(idx)) for idx in ids.sentinels]
    bert = type(tok.model).__name__ == "WordPiece" and ids.mask is not None and "cls_token" in special
    # a BERT layout loads as BERT's own tokenizer class (cased: the WordPiece mlmprep trains keeps the case)
    kind = {"tokenizer_class": "BertTokenizerFast", "do_lower_case": lowercases(tok)} if bert else {
        "tokenizer_class": "PreTrainedTokenizerFast"}
    return {"special_tokens_map.json": special,
            "tokenizer_config.json": {**kind, "model_max_length": model_max_length, **special}}


def lowercases(tok) -> bool:
    """Whether the tokenizer's normaliser lowercases (a BERT normaliser's setting, which transformers is told)."""
    normalizer = json.loads(tok.to_str()).get("normalizer") or {}
    return bool(normalizer.get("lowercase", False))


def hf_tokenizer_json(tok) -> str:
    """tokenizer.json's text as written for transformers: a tokenizer without a post-processor gets eos_frame, so
    AutoTokenizer ends an input with </s> as every row ends (a post-processor of its own frames the rows and is
    kept). load_tokenizer takes the frame off again, so the build's tokenizer, its sha256 and its data stay those of
    `tok`. The frame is put on `tok` for the one serialisation and taken off again (a copy through from_str costs as
    much as loading the tokenizer); nothing else may use `tok` meanwhile."""
    from mlmprep.tokenizer.load import eos_frame

    own = tok.post_processor
    if own is None:
        tok.post_processor = eos_frame(tok)
    try:
        return tok.to_str(pretty=True)
    finally:
        tok.post_processor = own


def write_hf_tokenizer(tok, directory: Path, *, model_max_length: int) -> None:
    """tokenizer.json (hf_tokenizer_json), with the transformers files beside it (hf_tokenizer_files)."""
    (directory / "tokenizer.json").write_bytes(hf_tokenizer_json(tok).encode("utf-8"))
    for name, content in hf_tokenizer_files(tok, model_max_length=model_max_length).items():
        write_json(directory / name, content)


def arrow_column(rows: Rows, width: int | None, dtype: np.dtype) -> pa.Array:
    """A list column of `dtype` values over the rows (no copy when they are `dtype` already): fixed-size when
    `width` is given (every row has that length), a column of one value per row when it is 0. Built from buffers
    because `pa.array` imports pandas, a second of start-up."""
    import pyarrow as pa

    values = flat_array(rows.values, dtype)
    if width == 0:
        return values
    if width is not None:
        return pa.FixedSizeListArray.from_arrays(values, width)
    return pa.ListArray.from_arrays(flat_array(rows.offsets, np.dtype(np.int32)), values)


def flat_array(values: np.ndarray, dtype: np.dtype) -> pa.Array:
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(pa.from_numpy_dtype(dtype), len(values), [None, pa.py_buffer(values)])


def write_datasets_metadata(directory: Path, names: list[str]) -> None:
    """The dataset_info.json and state.json that `datasets.load_from_disk` reads, listing data files `names`."""
    # no "features": datasets infers them from the Arrow schema, in the words of whichever version reads it
    info = {"citation": "", "description": "", "homepage": "", "license": ""}
    state = {
        "_data_files": [{"filename": name} for name in names],
        "_fingerprint": hashlib.sha256(json.dumps(info, sort_keys=True).encode()).hexdigest()[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    for filename, data in (("dataset_info.json", info), ("state.json", state)):
        with open(directory / filename, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")


def part_path(split_dir: Path, index: int) -> Path:
    """Where output file `index` of a split is written before the split is finished (then renamed data-k-of-K)."""
    return split_dir / f"part-{index:06d}.arrow"


def write_part(path: Path, widths: dict[str, int | None], dtypes: dict[str, np.dtype],
               columns: dict[str, Rows]) -> dict | None:
    """One data file of a split: `columns` (stored as `dtypes`) in record batches of BATCH_ROWS rows, written
    under a temporary name and renamed, so a task run again replaces what a dead attempt left. Returns its
    rows, bytes and sha256; None (and no file) for no rows."""
    import pyarrow as pa

    rows = len(next(iter(columns.values())))
    if rows == 0:
        return None
    schema = split_schema(widths, dtypes)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for start in range(0, rows, BATCH_ROWS):
            stop = min(start + BATCH_ROWS, rows)
            arrays = [arrow_column(columns[name].slice(start, stop), w, dtypes[name]) for name, w in widths.items()]
            writer.write_batch(pa.record_batch(arrays, schema=schema))
    os.replace(tmp, path)
    return {"rows": rows, "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def write_text_part(path: Path, columns: dict[str, list], types: dict[str, str]) -> dict | None:
    """One data file of a split of plain columns (`types`: column -> Arrow type name, such as "int64" or
    "string"), as write_part writes token columns: record batches of BATCH_ROWS rows, a temporary name renamed.
    Returns its rows, bytes and sha256; None (and no file) for no rows."""
    import pyarrow as pa

    rows = len(next(iter(columns.values())))
    if rows == 0:
        return None
    schema = text_schema(types)
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for start in range(0, rows, BATCH_ROWS):
            writer.write_batch(pa.record_batch([pa.array(columns[name][start : start + BATCH_ROWS], type=field.type)
                                                for name, field in zip(schema.names, schema)], schema=schema))
    os.replace(tmp, path)
    return {"rows": rows, "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def text_schema(types: dict[str, str]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(name, pa.type_for_alias(kind)) for name, kind in types.items()])


def split_schema(widths: dict[str, int | None], dtypes: dict[str, np.dtype]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(n, pa.from_numpy_dtype(dtypes[n]) if w == 0 else
                       pa.list_(pa.from_numpy_dtype(dtypes[n]), -1 if w is None else w)) for n, w in widths.items()])


def finish_split(directory: Path, widths: dict[str, int | None], dtypes: dict[str, np.dtype],
                 parts: list[tuple[Path, dict | None]], *, columns: dict[str, str] | None = None) -> dict:
    """Name a split's written parts data-0000k-of-0000K.arrow in order (parts without rows have no file; a
    split without rows gets one empty file, so it loads), write datasets' metadata; return the manifest entry.
    `columns`: the types of a split of plain columns (write_text_part) instead of `widths` and `dtypes`."""
    written = [(path, info) for path, info in parts if info is not None]
    directory.mkdir(parents=True, exist_ok=True)
    if not written:
        import pyarrow as pa

        path = part_path(directory, 0)
        schema = split_schema(widths, dtypes) if columns is None else text_schema(columns)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema):
            pass
        written = [(path, {"rows": 0, "bytes": path.stat().st_size, "sha256": file_sha256(path)})]
    files = []
    for k, (path, info) in enumerate(written):
        name = f"data-{k:05d}-of-{len(written):05d}.arrow"
        path.rename(directory / name)
        files.append({"name": name, "bytes": info["bytes"], "sha256": info["sha256"]})
    write_datasets_metadata(directory, [f["name"] for f in files])
    for name in ("dataset_info.json", "state.json"):
        files.append({"name": name, "bytes": (directory / name).stat().st_size,
                      "sha256": file_sha256(directory / name)})
    files.sort(key=lambda f: f["name"])
    return {"rows": sum(info["rows"] for _, info in written), "files": files}


def iter_rows(split_dir: Path, column: str) -> Iterator[Rows]:
    """Read one list column of a split back as int32 Rows, a record batch at a time (the counterpart of
    write_part)."""
    for path in data_files(split_dir):
        yield from iter_rows_of_file(path, column)


def data_files(split_dir: Path) -> list[Path]:
    """A split's data files, in order, as its state.json lists them, each inside the split's build."""
    state = member(split_dir.parent, f"{split_dir.name}/state.json")
    return [split_dir / name for name in data_file_names(state)]


def read_batches(source, path: Path) -> Iterator[pa.RecordBatch]:
    """The record batches of data file `path` (of a split of a build) from `source`; damage is refused in one line."""
    import pyarrow as pa

    try:
        yield from pa.ipc.open_stream(source)
    except (pa.ArrowInvalid, OSError) as exc:
        raise damaged(path.parent.parent, path, f"not a readable Arrow stream ({str(exc).splitlines()[0]})") from None


def iter_rows_of_file(path: Path, column: str) -> Iterator[Rows]:
    """One data file's column as int32 Rows (whatever its stored type), a record batch at a time; a column of one
    value per row (denoiser, rate) as Rows of one value each, in its stored type."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        for batch in read_batches(source, path):
            arr = batch.column(column)
            if not pa.types.is_list(arr.type) and not pa.types.is_fixed_size_list(arr.type):  # a value per row
                yield Rows(arr.to_numpy(zero_copy_only=False), np.arange(len(arr) + 1, dtype=np.int64))
                continue
            values = arr.flatten().to_numpy(zero_copy_only=False).astype("int32", copy=False)
            if pa.types.is_fixed_size_list(arr.type):
                width = arr.type.list_size
                offsets = np.arange(len(arr) + 1, dtype=np.int64) * width
            else:
                offsets = arr.offsets.to_numpy().astype(np.int64)
                offsets -= offsets[0]
            yield Rows(values, offsets)


def file_rows(path: Path) -> int:
    """Rows in one data file (its record batches' lengths; no column is read)."""
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        return sum(batch.num_rows for batch in read_batches(source, path))
