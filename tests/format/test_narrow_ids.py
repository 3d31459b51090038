"""Format 3: token ids stored as uint16 (mlm labels int16) when the vocabulary fits. The reference is the same
build written in format 2 (int32 columns, as every build was before): the values, the loader's rows and
batches, datasets' torch tensors and verify agree, in about half the bytes; int32 builds still load,
verify, inspect and remask, in int32."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from mlmprep.builder import run
from mlmprep.builder.remask import remask
from mlmprep.format.load import open_split, read_manifest
from mlmprep.format.rows import IGNORE, Rows
from mlmprep.format.write import column_dtypes, format_version, iter_rows, write_part
from tests.conftest import build_tiny, int32_copy

MASKED = ("input_ids", "labels")


def int32_build(monkeypatch, out, corpus, tokenizer, **options):
    """The same build in format 2: what mlmprep wrote for every vocabulary before format 3."""
    with monkeypatch.context() as m:
        m.setattr(run, "format_version", lambda vocab_size: 2)
        return build_tiny(out, corpus, tokenizer, **options)


def stored_type(split_dir, column):
    with pa.memory_map(str(min(split_dir.glob("data-*.arrow")))) as source:
        return pa.ipc.open_stream(source).schema.field(column).type.value_type


def data_bytes(build):
    return sum(p.stat().st_size for p in build.glob("*/data-*.arrow"))


def manifest(build):
    return json.loads((build / "manifest.json").read_text())


def test_the_types_follow_the_vocabulary_at_the_integer_limits():
    uint16_ids, int16_ids = int(np.iinfo(np.uint16).max) + 1, int(np.iinfo(np.int16).max) + 1  # 65536, 32768
    assert (format_version(uint16_ids), format_version(uint16_ids + 1)) == (3, 2)
    assert column_dtypes(3, "span", uint16_ids) == dict.fromkeys(("tokens", "input_ids", "labels"), np.uint16)
    assert column_dtypes(3, "mlm", int16_ids)["labels"] == np.int16
    assert column_dtypes(3, "mlm", int16_ids + 1)["labels"] == np.int32
    assert column_dtypes(3, "mlm", int16_ids + 1)["input_ids"] == np.uint16
    for version in (1, 2):
        assert set(column_dtypes(version, "mlm", 300).values()) == {np.dtype(np.int32)}


def test_the_extreme_ids_and_ignore_come_back_exactly(tmp_path):
    """The largest id of a 65,536-id vocabulary as uint16, IGNORE and the largest id of a 32,768-id one as int16."""
    ids = np.array([0, 1, 65534, 65535, 7, 300], np.int32)
    labels = np.array([IGNORE, 32767, IGNORE, 0, 5, IGNORE], np.int32)
    offsets = np.array([0, 4, 6], np.int64)
    split = tmp_path / "seed-0"
    split.mkdir()
    info = write_part(split / "data-00000-of-00001.arrow", {"input_ids": None, "labels": None},
                      {"input_ids": np.dtype(np.uint16), "labels": np.dtype(np.int16)},
                      {"input_ids": Rows(ids, offsets), "labels": Rows(labels, offsets)})
    (split / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    assert info["rows"] == 2
    assert [r.values.tolist() for r in iter_rows(split, "input_ids")] == [ids.tolist()]
    assert [r.values.tolist() for r in iter_rows(split, "labels")] == [labels.tolist()]
    loaded = open_split(split, objective="mlm")
    assert loaded.input_ids.dtype == np.uint16 and loaded.labels.dtype == np.int16
    assert loaded.row(0)["input_ids"].tolist() == [0, 1, 65534, 65535]
    assert loaded.row(1)["labels"].tolist() == [5, IGNORE]
    assert loaded.n_targets.tolist() == [2, 1]


def compare_builds(narrow, wide, columns_of):
    """Every split of `narrow` (format 3) holds the values of `wide` (format 2) in half the bytes or less, and
    reads back alike through mlmprep's loader, its collator and datasets' torch format."""
    import datasets
    import torch

    from mlmprep.train.collate import Collator

    m = manifest(narrow)
    assert (m["format_version"], manifest(wide)["format_version"]) == (3, 2)
    expected = column_dtypes(3, m["objective"], m["tokenizer"]["vocab_size"])
    for name in m["splits"]:
        for column in columns_of(name):
            assert stored_type(narrow / name, column) == pa.from_numpy_dtype(expected[column])
            assert stored_type(wide / name, column) == pa.int32()
            got, want = list(iter_rows(narrow / name, column)), list(iter_rows(wide / name, column))
            assert [r.values.tolist() for r in got] == [r.values.tolist() for r in want]
        if name.endswith("windows") or not m["splits"][name]["rows"]:
            continue
        a, b = (datasets.load_from_disk(str(d / name)).with_format("torch") for d in (narrow, wide))
        for column in MASKED:
            x, y = a[: len(a)][column], b[: len(b)][column]
            x, y = (list(x), list(y)) if isinstance(x, list) else ([x], [y])
            assert all(t.dtype == torch.int64 for t in x) and len(x) == len(y)
            assert all(torch.equal(s, t) for s, t in zip(x, y))
        s, t = open_split(narrow / name), open_split(wide / name)
        assert np.array_equal(s.n_targets, t.n_targets) and s.n_targets.sum() > 0
        collator = Collator(m["objective"], pad_id=0, decoder_start_id=0, pad_to_multiple_of=8,
                            vocab_size=m["tokenizer"]["vocab_size"])
        rows = np.random.default_rng(0).permutation(len(s))[:40]
        x, y = collator.from_split(s, rows), collator.from_split(t, rows)
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) and x[k].dtype == torch.int64 for k in x)
        examples = collator([s[int(i)] for i in rows])  # the HF-Trainer path: rows as a map-style dataset gives them
        assert all(torch.equal(examples[k], y[k]) for k in y)
    assert data_bytes(narrow) <= 0.55 * data_bytes(wide)


def columns(name):
    return ("tokens",) if name.endswith("windows") else MASKED


def test_a_span_build_stores_uint16_with_the_int32_builds_values(tmp_path, monkeypatch, tiny_build, tiny_corpus,
                                                                 tiny_tokenizer_path):
    from mlmprep.builder.verify import verify

    wide = int32_build(monkeypatch, tmp_path / "wide", tiny_corpus, tiny_tokenizer_path)
    compare_builds(tiny_build, wide, columns)
    assert verify(tiny_build).ok and verify(wide).ok


def test_an_mlm_build_stores_ignore_as_minus_100_in_int16(tmp_path, monkeypatch, tiny_corpus, wordpiece_path):
    from mlmprep.builder.verify import verify

    options = {"objective": "mlm", "seeds": 1}
    narrow = build_tiny(tmp_path / "narrow", tiny_corpus, wordpiece_path, **options)
    wide = int32_build(monkeypatch, tmp_path / "wide", tiny_corpus, wordpiece_path, **options)
    assert stored_type(narrow / "seed-0", "labels") == pa.int16()
    labels = np.concatenate([r.values for r in iter_rows(narrow / "seed-0", "labels")])
    assert (labels == IGNORE).any() and labels.max() < manifest(narrow)["tokenizer"]["vocab_size"]
    compare_builds(narrow, wide, columns)
    assert verify(narrow).ok and verify(wide).ok


def test_an_int32_build_still_loads_verifies_inspects_and_remasks_in_int32(tmp_path, tiny_build):
    import shutil

    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.verify import verify
    from mlmprep.format.load import open_epoch
    from mlmprep.format.report import build_summary, show_examples

    old, new = tmp_path / "old", tmp_path / "new"
    int32_copy(tiny_build, old)
    shutil.copytree(tiny_build, new)
    assert verify(old).ok
    a, b = open_epoch(old, 1), open_epoch(new, 1)
    assert a.input_ids.dtype == np.int32 and b.input_ids.dtype == np.uint16
    assert np.array_equal(a.input_ids.values, b.input_ids.values)
    assert show_examples(old, read_manifest(old)) == show_examples(new, read_manifest(new))
    disk = next(x for x in build_summary(old, read_manifest(old)).splitlines() if x.startswith("disk:"))
    assert "(token ids int32, format 2)" in disk
    assert disk.endswith("; `mlmprep build ... --force` rebuilds it as format 3, about half the size")
    assert remask(old, 3, engine=LocalEngine(workers=1)) == remask(new, 3, engine=LocalEngine(workers=1)) == ["seed-2"]
    assert (stored_type(old / "seed-2", "input_ids"), stored_type(new / "seed-2", "input_ids")) == (pa.int32(),
                                                                                                  pa.uint16())
    assert manifest(old)["format_version"] == 2 and verify(old).ok and verify(new).ok
    assert ([r.values.tolist() for r in iter_rows(old / "seed-2", "labels")]
            == [r.values.tolist() for r in iter_rows(new / "seed-2", "labels")])


def test_verify_reports_columns_stored_in_another_type_than_the_format_says(tmp_path, tiny_build):
    from mlmprep.builder.verify import verify

    out = tmp_path / "data"
    recorded = int32_copy(tiny_build, out)
    (out / "manifest.json").write_text(json.dumps({**recorded, "format_version": 3}))
    problems = verify(out).problems
    assert any(p.startswith("seed-0/data-") and "column input_ids holds int32, format_version 3 stores uint16" in p
               for p in problems), problems
    assert any("windows/data-" in p and "column tokens holds int32" in p for p in problems), problems


def test_the_summary_says_the_disk_the_build_takes_and_what_a_seed_costs(tiny_build):
    from mlmprep.format.report import build_summary

    total = sum(p.stat().st_size for p in tiny_build.rglob("*") if p.is_file())
    seed = sum(p.stat().st_size for p in (tiny_build / "seed-1").iterdir())
    line = next(x for x in build_summary(tiny_build, read_manifest(tiny_build)).splitlines() if x.startswith("disk:"))
    assert line == (f"disk: {total / 1e6:.1f} MB (token ids uint16, format 3); "
                    f"each further seed adds {seed / 1e6:.1f} MB")


@pytest.mark.parametrize("objective", ["span", "mlm"])
def test_the_bytes_do_not_depend_on_workers_or_threads(tmp_path, tiny_corpus, tiny_tokenizer_path, wordpiece_path,
                                                       objective):
    tokenizer = tiny_tokenizer_path if objective == "span" else wordpiece_path
    builds = [build_tiny(tmp_path / f"b{w}", tiny_corpus, tokenizer, objective=objective, workers=w, threads=t,
                         rows_per_file=7) for w, t in ((1, 1), (2, 2))]
    files = [{p.relative_to(b): p.read_bytes() for p in b.rglob("data-*.arrow")} for b in builds]
    assert files[0] == files[1] and len(files[0]) > 4
