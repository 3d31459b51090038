"""load: manifests, the epoch -> seed split mapping, zero-copy reads of fixed-size and variable-length
Arrow list columns, multi-shard and multi-batch splits, and the errors a damaged build gives."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pyarrow as pa
import pytest

from mlmprep.errors import CacheError
from mlmprep.format.load import epoch_split, open_epoch, open_split, pick_rows, read_manifest
from tests.fakes import write_fake_build


@pytest.fixture(scope="module")
def span_build(tmp_path_factory):
    """Token splitting: every row one length, so fixed_size_list columns."""
    return write_fake_build(tmp_path_factory.mktemp("span"), n_rows=40, n_seeds=3)


@pytest.fixture(scope="module")
def mlm_build(tmp_path_factory):
    """Text segmentation: variable lengths (list columns), three shards, mlm labels with -100."""
    lengths = np.random.default_rng(1).integers(3, 60, size=90)
    return write_fake_build(tmp_path_factory.mktemp("mlm"), objective="mlm", lengths=lengths, num_shards=3)


def reference_rows(split_dir):
    """What datasets itself reads: the ground truth for every row."""
    ds = datasets.load_from_disk(str(split_dir)).with_format("numpy")
    return [(np.asarray(r["input_ids"]), np.asarray(r["labels"])) for r in ds]


def assert_rows_match(split, reference):
    assert len(split) == len(reference)
    for i, (input_ids, labels) in enumerate(reference):
        row = split.row(i)
        np.testing.assert_array_equal(row["input_ids"], input_ids)
        np.testing.assert_array_equal(row["labels"], labels)
        assert row["input_ids"].dtype == np.int32


def test_fixed_size_lists_read_in_place(span_build):
    schema = pa.ipc.open_stream(pa.memory_map(str(span_build / "seed-0" / "data-00000-of-00001.arrow"))).schema
    assert pa.types.is_fixed_size_list(schema.field("input_ids").type)  # the case this test is for
    split = open_split(span_build / "seed-0")
    assert_rows_match(split, reference_rows(span_build / "seed-0"))
    # zero-copy: rows and the flat values are views of the one mapped file, never copies
    view = split.input_ids.files[0]
    assert not view.flags.owndata and not view.flags.writeable
    assert np.shares_memory(split.row(7)["input_ids"], view)
    assert np.shares_memory(split.labels.values, view)
    assert split.input_ids.values.size == split.enc_lengths.sum()
    assert split.enc_lengths.dtype == np.int64 and np.all(split.enc_lengths == split.enc_lengths[0])
    np.testing.assert_array_equal(split.n_targets, split.dec_lengths)  # span labels are all targets


def test_variable_lists_over_several_shards(mlm_build):
    split = open_split(mlm_build / "seed-1")
    assert len(split.input_ids.files) == 3
    reference = reference_rows(mlm_build / "seed-1")
    assert_rows_match(split, reference)
    for i in (0, 45, 89):  # rows in each shard are views of that shard's mapping
        file, _, _ = split.input_ids.locate(np.array([i]))
        assert np.shares_memory(split.row(i)["labels"], split.labels.files[file[0]])
    np.testing.assert_array_equal(split.input_ids.values, np.concatenate([r[0] for r in reference]))
    np.testing.assert_array_equal(split.n_targets, [(r[1] != -100).sum() for r in reference])
    assert split.n_targets.min() >= 1
    assert not split.dec_lengths.any()  # mlm runs no decoder: nothing for the planner to budget there
    for outside in (-1, len(split)):  # never read from outside the mapped files
        with pytest.raises(IndexError):
            split.input_ids.locate(np.array([0, outside]))


def test_picked_rows_are_those_rows_of_their_splits_in_order(mlm_build):
    """pick_rows over parts of two seed splits of three shards each (rows in any order, some twice): row by row what
    datasets reads, in one buffer per column."""
    rng = np.random.default_rng(2)
    reference = {k: reference_rows(mlm_build / f"seed-{k}") for k in (0, 1)}
    parts = [(k, rng.choice(90, size=n)) for k, n in ((1, 50), (0, 30), (1, 7))]
    picked = pick_rows([(open_split(mlm_build / f"seed-{k}"), rows) for k, rows in parts], "picked")
    expected = [reference[k][r] for k, rows in parts for r in rows]
    assert_rows_match(picked, expected)
    assert len(picked.input_ids.files) == len(picked.labels.files) == 1
    np.testing.assert_array_equal(picked.enc_lengths, [len(ids) for ids, _ in expected])
    assert not picked.dec_lengths.any()


def write_stream(path, batches):
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, batches[0].schema) as writer:
        for batch in batches:
            writer.write_batch(batch)


def test_many_record_batches_sliced_and_empty(tmp_path):
    """What mlmprep's writer makes: several record batches per file, a sliced array, an empty batch."""
    rows = [np.arange(k % 7 + 1, dtype=np.int32) + 10 * k for k in range(30)]
    column = pa.array(rows, type=pa.list_(pa.int32()))
    table = pa.table({"input_ids": column, "labels": column})
    pieces = [table.slice(0, 4), table.slice(4, 0), table.slice(4, 11), table.slice(15, 15)]
    split_dir = tmp_path / "seed-0"
    split_dir.mkdir()
    write_stream(split_dir / "data-00000-of-00002.arrow", [b for t in pieces[:2] for b in t.to_batches()])
    write_stream(split_dir / "data-00001-of-00002.arrow", [b for t in pieces[2:] for b in t.to_batches()])
    names = ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    (split_dir / "state.json").write_text(json.dumps({"_data_files": [{"filename": n} for n in names]}))
    split = open_split(split_dir, objective="span")
    assert len(split) == 30
    for k in (0, 3, 4, 14, 15, 29):
        np.testing.assert_array_equal(split.row(k)["input_ids"], rows[k])
    np.testing.assert_array_equal(split.enc_lengths, [len(r) for r in rows])
    np.testing.assert_array_equal(split.labels.values, np.concatenate(rows))



def test_record_batches_without_tokens(tmp_path):
    """A record batch with no tokens at all (no rows, or only empty rows, as datasets writes for a column of
    empty lists) has a values buffer of 0 bytes somewhere outside the mapping: it was refused as a compressed
    stream."""
    typ = pa.list_(pa.int32())
    def batch(rows):
        return pa.record_batch([pa.array(rows, type=typ), pa.array(rows, type=typ)], names=["input_ids", "labels"])
    rows = [[], [], [5, 6], [], [7], []]
    split_dir = tmp_path / "seed-0"
    split_dir.mkdir()
    write_stream(split_dir / "data-00000-of-00001.arrow",
                 [batch(rows[:2]), batch([]), batch(rows[2:4]), batch(rows[4:])])
    (split_dir / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    split = open_split(split_dir, objective="span")
    assert [split.row(i)["input_ids"].tolist() for i in range(len(split))] == rows
    assert split.labels.values.tolist() == [5, 6, 7]
    features = datasets.Features({name: datasets.Sequence(datasets.Value("int32")) for name in ("input_ids", "labels")})
    datasets.Dataset.from_dict({"input_ids": [[], []], "labels": [[1], [2]]},
                               features=features).save_to_disk(str(tmp_path / "ds"))
    assert [r.tolist() for r in map(open_split(tmp_path / "ds", objective="span").input_ids.row, (0, 1))] == [[], []]


def test_decreasing_list_offsets_are_refused(tmp_path):
    """A damaged data file of the right size: one row's end offset far past the data and the next row's
    negative, so the lengths still sum to the tokens there. It was read out of bounds (garbage rows of 10^8
    tokens in `inspect` and `train`, a segfault in the collator); now open_split refuses it."""
    rows = [np.arange(k % 5 + 1, dtype=np.int32) for k in range(6)]
    column = pa.array(rows, type=pa.list_(pa.int32()))
    split_dir = tmp_path / "seed-0"
    split_dir.mkdir()
    path = split_dir / "data-00000-of-00001.arrow"
    write_stream(path, pa.table({"input_ids": column, "labels": column}).to_batches())
    (split_dir / "state.json").write_text(json.dumps({"_data_files": [{"filename": path.name}]}))
    data = bytearray(path.read_bytes())
    offsets = np.cumsum([0] + [len(r) for r in rows]).astype(np.int32).tobytes()
    at = data.find(offsets)
    assert at > 0
    data[at + 12 : at + 16] = np.int32(10**8).tobytes()  # offset 3
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError, match="input_ids: list offsets decrease"):
        open_split(split_dir, objective="span")

def test_epoch_reads_seed_split_round_robin(span_build):
    manifest = read_manifest(span_build)
    assert [epoch_split(manifest, e) for e in range(7)] == ["seed-0", "seed-1", "seed-2", "seed-0", "seed-1", "seed-2",
                                                            "seed-0"]
    splits = [open_epoch(span_build, e) for e in range(4)]
    assert [s.path.name for s in splits] == ["seed-0", "seed-1", "seed-2", "seed-0"]
    np.testing.assert_array_equal(splits[0].row(5)["labels"], splits[3].row(5)["labels"])
    # seeds mask the same windows differently
    assert not np.array_equal(splits[0].row(5)["input_ids"], splits[1].row(5)["input_ids"])
    assert open_split(span_build / "validation").objective == "span"  # objective from the build's manifest


def test_manifest_errors(tmp_path, span_build):
    with pytest.raises(CacheError, match=r"no manifest.json; run mlmprep build first"):
        read_manifest(tmp_path)
    manifest = json.loads((span_build / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "format_version": 7}))
    with pytest.raises(CacheError, match=r"format_version 7.*format_version 1, 2 or 3; "
                                         r"rebuild it with `mlmprep build ... --force`"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "seeds": []}))
    with pytest.raises(CacheError, match="no seed splits"):
        open_epoch(tmp_path, 0)
    # JSON that is no manifest object, or one without the fields every reader uses: one line, not a traceback
    # (AttributeError on .get, KeyError on "tokenizer"); `true` is no format version, though True == 1
    for text, words in [("[]", "not a JSON object"), ("null", "not a JSON object"),
                        (json.dumps({"format_version": 2}), r"splits is missing \(an object of splits\)"),
                        (json.dumps({**manifest, "format_version": True}), "format_version true"),
                        (json.dumps({k: v for k, v in manifest.items() if k != "tokenizer"}), "tokenizer is missing")]:
        (tmp_path / "manifest.json").write_text(text)
        with pytest.raises(CacheError, match=f"manifest.json: {words}.*mlmprep build"):
            read_manifest(tmp_path)


def test_damaged_builds_are_refused(tmp_path):
    build = write_fake_build(tmp_path / "b", n_rows=12)
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["splits"]["seed-0"]["rows"] = 13
    (build / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CacheError, match="12 rows, the manifest says 13"):
        open_epoch(build, 0)
    (build / "seed-1" / "data-00000-of-00001.arrow").unlink()
    with pytest.raises(CacheError, match="missing"):
        open_epoch(build, 1)
    with pytest.raises(CacheError, match="missing"):
        open_split(build / "seed-1")
    with pytest.raises(CacheError, match="not a split directory"):
        open_split(build)


def test_wrong_types_and_unequal_mlm_rows(tmp_path):
    wide = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64")),
                              "labels": datasets.Sequence(datasets.Value("int64"))})
    datasets.Dataset.from_dict({"input_ids": [[1, 2]], "labels": [[1, 2]]},
                               features=wide).save_to_disk(str(tmp_path / "a"))
    with pytest.raises(CacheError, match="int32"):
        open_split(tmp_path / "a", objective="span")
    narrow = datasets.Features({k: datasets.Sequence(datasets.Value("int32")) for k in ("input_ids", "labels")})
    datasets.Dataset.from_dict({"input_ids": [[1, 2]], "labels": [[1]]},
                               features=narrow).save_to_disk(str(tmp_path / "b"))
    with pytest.raises(CacheError, match="mlm row 0 has 2 input_ids but 1 labels"):
        open_split(tmp_path / "b", objective="mlm")
    with pytest.raises(CacheError, match="span, mlm"):
        open_split(tmp_path / "b", objective="clm")
