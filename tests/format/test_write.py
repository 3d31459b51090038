"""The split writer's output (parts, then the finished split) opens with datasets, and publishing never exposes or
overwrites by surprise."""

import json
import multiprocessing as mp

import numpy as np
import pytest

from mlmprep.builder.windows import fixed_rows
from mlmprep.errors import CacheError
from mlmprep.format.publish import build_lock, publish, read_existing, staging_dir
from mlmprep.format.rows import Rows
from mlmprep.format.write import BATCH_ROWS, finish_split, iter_rows, part_path, write_part


def ragged(rows):
    lengths = [len(r) for r in rows]
    return Rows(np.concatenate([np.asarray(r, np.int32) for r in rows]),
                np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))


def write_split(directory, widths, parts, dtypes=None):
    """A split of one data file per item of `parts` (None: a part without rows), as build tasks and the
    driver write it, its columns int32 unless `dtypes` says otherwise; returns the manifest entry."""
    dtypes = dtypes or dict.fromkeys(widths, np.dtype(np.int32))
    infos = [(part_path(directory, k), write_part(part_path(directory, k), widths, dtypes, columns) if columns
              else None) for k, columns in enumerate(parts)]
    return finish_split(directory, widths, dtypes, infos)


def test_fixed_length_split_loads_with_datasets_as_fixed_size_lists(tmp_path):
    from datasets import load_from_disk

    widths = {"input_ids": 3, "labels": 2}
    entry = write_split(tmp_path / "s", widths, [
        {"input_ids": fixed_rows(np.arange(6, dtype=np.int32), 3),
         "labels": fixed_rows(np.arange(4, dtype=np.int32), 2)},
        None,
        {"input_ids": fixed_rows(np.arange(6, 9, dtype=np.int32), 3),
         "labels": fixed_rows(np.arange(4, 6, dtype=np.int32), 2)},
    ])
    ds = load_from_disk(str(tmp_path / "s"))
    assert ds["input_ids"][:] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert ds.features["input_ids"].length == 3
    assert entry["rows"] == 3 and [f["name"] for f in entry["files"]] == sorted(
        ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow", "dataset_info.json", "state.json"]
    )
    assert not list((tmp_path / "s").glob("part-*"))


def test_a_part_is_written_in_record_batches_of_fixed_rows(tmp_path):
    import pyarrow as pa

    rows = fixed_rows(np.arange(5 * (2 * BATCH_ROWS + 7), dtype=np.int32), 5)
    info = write_part(tmp_path / "p.arrow", {"tokens": 5}, {"tokens": np.dtype(np.int32)}, {"tokens": rows})
    with pa.memory_map(str(tmp_path / "p.arrow")) as source:
        assert [b.num_rows for b in pa.ipc.open_stream(source)] == [BATCH_ROWS, BATCH_ROWS, 7]
    assert info["rows"] == len(rows) and not (tmp_path / "p.arrow.tmp").exists()


def test_variable_length_split_round_trips(tmp_path):
    from datasets import load_from_disk

    rows = [[5, 6, 7], [8], [9, 10]]
    write_split(tmp_path / "s", {"tokens": None}, [{"tokens": ragged(rows)}])
    assert load_from_disk(str(tmp_path / "s"))["tokens"][:] == rows
    (back,) = list(iter_rows(tmp_path / "s", "tokens"))
    assert back.values.tolist() == [5, 6, 7, 8, 9, 10] and back.offsets.tolist() == [0, 3, 4, 6]


def test_empty_split_still_loads(tmp_path):
    from datasets import load_from_disk

    assert write_split(tmp_path / "s", {"tokens": 4}, [None, None])["rows"] == 0
    assert len(load_from_disk(str(tmp_path / "s"))) == 0


def hold_lock(out, ready, release):
    with build_lock(out):
        ready.set()
        release.wait(10)


def test_a_second_build_into_the_same_output_is_refused_while_the_first_runs(tmp_path):
    out = tmp_path / "data"
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=hold_lock, args=(out, ready, release))
    holder.start()
    try:
        assert ready.wait(10)
        with pytest.raises(CacheError, match="another mlmprep build is writing it"):
            with build_lock(out):
                pass
    finally:
        release.set()
        holder.join(10)
    with build_lock(out):  # free again once the first has finished
        pass
    assert not (tmp_path / ".data.lock").exists()


def test_a_failed_build_leaves_no_staging_directory_and_publish_replaces_atomically(tmp_path):
    out = tmp_path / "data"
    with pytest.raises(RuntimeError):
        with staging_dir(out) as stage:
            (stage / "half-written").write_text("x")
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []
    out.mkdir()
    (out / "old").write_text("old")
    with staging_dir(out) as stage:
        (stage / "new").write_text("new")
        publish(stage, out)
    assert (sorted(p.name for p in tmp_path.iterdir()) == ["data"] and (out / "new").exists()
            and not (out / "old").exists())


GIVEN = {"tokenizer_sha": None, "option_files": {}}  # no tokenizer given, no file named by --exclude or --c4-badwords


def test_read_existing_refuses_foreign_or_different_outputs(tmp_path):
    out = tmp_path / "data"
    assert read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=False) is None
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    for force in (False, True):
        with pytest.raises(CacheError, match="not an mlmprep build"):
            read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=force)
    (out / "precious.txt").unlink()
    (out / "tokenizer.json").write_text("{}")
    tokenizer = {"file": "tokenizer.json", "sha256": "0" * 64, "vocab_size": 32000, "pad_id": 0, "eos_id": 1,
                 "decoder_start_id": 0}
    manifest = {"config": {"seeds": 4}, "corpus": {"fingerprint": "fp"}, "splits": {}, "seeds": [],
                "objective": "span", "input_length": 8, "window_length": 8, "target_length": 4,
                "tokenizer": tokenizer, "format_version": 3, "mlmprep_version": "test"}
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=False).to_json() == manifest  # up to date
    assert read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=True) is None
    with pytest.raises(CacheError, match=r"seeds: 4 -> 8.*--force"):
        read_existing(out, {"seeds": 8}, "fp", **GIVEN, force=False)
    with pytest.raises(CacheError, match="the corpus changed"):
        read_existing(out, {"seeds": 4}, "other", **GIVEN, force=False)
    # an evaluation set's content identifies the build as the corpus's does
    record = {"path": "e.txt", "bytes": 4, "sha256": "a" * 64}
    (out / "manifest.json").write_text(json.dumps({**manifest, "corpus": {"fingerprint": "fp", "stats": {
        "option_files": {"exclude": [record]}}}}))
    same = {"tokenizer_sha": None, "option_files": {"exclude": [record]}}
    assert read_existing(out, {"seeds": 4}, "fp", **same, force=False) is not None
    for edited in ({**record, "sha256": "b" * 64}, {**record, "bytes": 5}):
        with pytest.raises(CacheError, match=r"\(--exclude e.txt changed\); pass --force"):
            read_existing(out, {"seeds": 4}, "fp", tokenizer_sha=None, option_files={"exclude": [edited]}, force=False)
        assert read_existing(out, {"seeds": 4}, "fp", tokenizer_sha=None, option_files={"exclude": [edited]},
                             force=True) is None
    (out / "manifest.json").write_text(json.dumps(manifest))
    # int32 columns (format 2) are what this vocabulary is built as no longer, and what a larger one still is
    for vocab, current in ((32000, False), (70000, True)):
        old = {**manifest, "format_version": 2, "tokenizer": {**tokenizer, "vocab_size": vocab}}
        (out / "manifest.json").write_text(json.dumps(old))
        if current:
            assert read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=False).to_json() == old
        else:
            with pytest.raises(CacheError, match=r"format_version: 2 -> 3.*--force"):
                read_existing(out, {"seeds": 4}, "fp", **GIVEN, force=False)


def test_paths_whose_names_are_not_utf8_build_read_back_and_are_refused_where_a_run_records_them(
        tmp_path, tiny_corpus, tiny_tokenizer_path):
    """A corpus file and a tokenizer named with a byte that is not UTF-8 (Latin-1 ÿ) build; the manifest stays
    strict UTF-8 JSON, with the byte escaped, and a second run is up to date. An --out, or a DATA to train on,
    with such a name is refused in one line, before anything is written."""
    import os
    import shutil

    from tests.cli.test_build import assert_refused, cli

    corpus, tok = os.fsdecode(bytes(tmp_path) + b"/c\xff.txt"), os.fsdecode(bytes(tmp_path) + b"/t\xff.json")
    shutil.copy(tiny_corpus, corpus)
    shutil.copy(tiny_tokenizer_path, tok)
    out = tmp_path / "data"
    args = ["build", corpus, "--tokenizer", tok, "--out", out, "--input-length", "32", "--seeds", "1"]
    first = cli(*args)
    assert first.exit_code == 0, first.stderr
    manifest = json.loads((out / "manifest.json").read_bytes().decode("utf-8"))  # strict UTF-8: no surrogates
    assert manifest["config"]["corpus"] == [str(tmp_path) + "/c\\xff.txt"]
    assert manifest["config"]["tokenizer"] == str(tmp_path) + "/t\\xff.json"
    assert [f["path"] for f in manifest["corpus"]["files"]] == [str(tmp_path) + "/c\\xff.txt"]
    assert "up to date" in cli(*args).stderr + cli(*args).stdout

    odd = os.fsdecode(bytes(tmp_path) + b"/o\xff")
    result = cli("build", corpus, "--tokenizer", tok, "--out", odd, "--input-length", "32")
    assert_refused(result.exit_code, result.stderr, "--out", "o\\xff", "not UTF-8")
    os.rename(out, odd)
    result = cli("train", odd, "--out", tmp_path / "run", "--max-steps", "1")
    assert_refused(result.exit_code, result.stderr, "DATA", "o\\xff", "not UTF-8")
    assert sorted(os.listdir(tmp_path)) == sorted(["c\udcff.txt", "t\udcff.json", "o\udcff"])
