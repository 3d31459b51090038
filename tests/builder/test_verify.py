"""`mlmprep verify` says ok on a sound build and names the file, split and row of every kind of damage."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mlmprep.builder.verify import verify
from mlmprep.format.report import merge_spans
from mlmprep.format.rows import Rows
from mlmprep.format.write import column_dtypes, finish_split, iter_rows, part_path, write_json, write_part
from tests.conftest import build_tiny


@pytest.fixture
def build_copy(tiny_build, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(tiny_build, out)
    return out


def data_file(out, split):
    return next((out / split).glob("data-*.arrow"))


def test_a_sound_build_verifies_ok_with_every_row_checked(tiny_build):
    report = verify(tiny_build)
    manifest = json.loads((tiny_build / "manifest.json").read_text())
    rows = (sum(manifest["splits"][s["split"]]["rows"] for s in manifest["seeds"])
            + manifest["splits"]["validation"]["rows"])
    assert report.ok, report.problems
    assert report.rows_checked == rows > 0
    assert report.summary().startswith("ok: ")


def test_a_flipped_byte_and_a_truncated_file_are_each_reported(build_copy):
    flipped, truncated = data_file(build_copy, "seed-0"), data_file(build_copy, "validation")
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:-10])
    report = verify(build_copy)
    assert not report.ok
    text = "\n".join(report.problems)
    assert f"seed-0/{flipped.name}: sha256 differs" in text
    assert f"validation/{truncated.name}:" in text and "bytes, manifest says" in text


def rewrite_split(out, split, change):
    """Rewrite a masked split with `change(input_ids, labels)` applied, and fix up the manifest's hashes,
    as a buggy writer would: only the row checks can catch this."""
    manifest = json.loads((out / "manifest.json").read_text())
    inputs = next(iter_rows(out / split, "input_ids"))
    labels = next(iter_rows(out / split, "labels"))
    inputs, labels = Rows(inputs.values.copy(), inputs.offsets), Rows(labels.values.copy(), labels.offsets)
    change(inputs, labels)
    shutil.rmtree(out / split)
    width = manifest["fixed_length"] and {"input_ids": int(inputs.lengths()[0]), "labels": int(labels.lengths()[0])}
    widths, part = width or {"input_ids": None, "labels": None}, part_path(out / split, 0)
    dtypes = column_dtypes(manifest["format_version"], manifest["objective"], manifest["tokenizer"]["vocab_size"])
    info = write_part(part, widths, dtypes, {"input_ids": inputs, "labels": labels})
    manifest["splits"][split] = finish_split(out / split, widths, dtypes, [(part, info)])
    write_json(out / "manifest.json", manifest)


def test_a_row_that_does_not_merge_back_is_reported_by_split_and_row(build_copy):
    def swap_tokens_of_row_3(inputs, labels):
        start = inputs.offsets[3]
        inputs.values[start], inputs.values[start + 1] = inputs.values[start + 1] + 1, inputs.values[start]

    rewrite_split(build_copy, "seed-1", swap_tokens_of_row_3)
    report = verify(build_copy)
    assert report.problems == ["seed-1 row 3: input_ids and labels do not merge back to the stored window"]


def test_out_of_order_sentinels_are_reported(build_copy):
    manifest = json.loads((build_copy / "manifest.json").read_text())
    first_sentinel = manifest["tokenizer"]["vocab_size"] - 1  # <extra_id_0> has the highest id

    def renumber_first_span_of_row_0(inputs, labels):
        for rows in (inputs, labels):
            row = rows.values[rows.offsets[0] : rows.offsets[1]]
            row[row == first_sentinel] = first_sentinel - 1

    rewrite_split(build_copy, "seed-0", renumber_first_span_of_row_0)
    assert verify(build_copy).problems == ["seed-0 row 0: sentinels are not <extra_id_0>, <extra_id_1>, ... in order"]


def test_mlm_and_ragged_builds_verify_and_a_sample_checks_fewer_rows(tmp_path, tiny_corpus, tiny_tokenizer_path):
    mlm = build_tiny(tmp_path / "mlm", tiny_corpus, tiny_tokenizer_path, objective="mlm", whole_word=True)
    assert verify(mlm).ok
    text = build_tiny(tmp_path / "text", tiny_corpus, tiny_tokenizer_path, method="text", random_roll=True)
    full, sampled = verify(text), verify(text, sample=5)
    assert full.ok and sampled.ok
    assert sampled.rows_checked <= 5 * 3 < full.rows_checked  # at most 5 rows of each of three splits


def test_a_build_without_validation_rows_verifies_ok_and_missing_statistics_are_still_reported(tmp_path, tiny_corpus,
                                                                                            tiny_tokenizer_path):
    out = build_tiny(tmp_path / "data", tiny_corpus, tiny_tokenizer_path, validation_fraction=0.0)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["validation"]["rows"] == 0 and "validation" not in manifest["statistics"]["masking"]
    assert verify(out).problems == []
    del manifest["statistics"]["masking"]["seed-1"]  # a split with rows must still have its statistics
    write_json(out / "manifest.json", manifest)
    assert verify(out).problems == ["seed-1: the manifest has no masking statistics for it"]


def edit_manifest(out, edit):
    manifest = json.loads((out / "manifest.json").read_text())
    edit(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda out: (out / "tokenizer.json").unlink(), "tokenizer.json: missing"),
        (lambda out: (out / "special_tokens_map.json").unlink(), "special_tokens_map.json: missing"),
        (lambda out: (out / "tokenizer_config.json").write_text('{"tokenizer_class": "T5Tokenizer"}'),
         "tokenizer_config.json: not what the tokenizer implies"),
        (lambda out: edit_manifest(out, lambda m: m["tokenizer"].update(vocab_size=100)),
         "tokenizer vocab_size is 100"),
        (lambda out: edit_manifest(out, lambda m: m["tokenizer"].update(pad_id=7)),
         "tokenizer pad_id is 7, the tokenizer's is 0"),
        (lambda out: edit_manifest(out, lambda m: m.update(window_length=m["window_length"] + 1)),
         "input, window and target lengths"),
        (lambda out: edit_manifest(out, lambda m: m.update(seeds=[])), "manifest.json: no seeds"),
        (lambda out: edit_manifest(out, lambda m: m["seeds"].reverse()), "seeds[0]"),
        (lambda out: edit_manifest(out, lambda m: m.update(validation_seed=1)), "validation_seed"),
        (lambda out: edit_manifest(out, lambda m: m["statistics"].update(extra=float("nan"))), "not strict JSON"),
        # edited or damaged fields verify itself reads: a problem line each, never a traceback or an option's error
        (lambda out: edit_manifest(out, lambda m: m.update(input_length=float("nan"))),
         "manifest.json: not strict JSON (NaN is not a JSON number)"),
        (lambda out: edit_manifest(out, lambda m: m["config"].update(noise_density=None)),
         "manifest.json: config.noise_density is null, not a number in (0, 1)"),
        (lambda out: edit_manifest(out, lambda m: m["config"].pop("seed")), "manifest.json: config.seed is missing"),
        (lambda out: edit_manifest(out, lambda m: m["config"].update(noise_density=2.0)),
         "manifest.json: config.noise_density is 2.0, not a number in (0, 1)"),
        (lambda out: edit_manifest(out, lambda m: m["tokenizer"].update(file="../tokenizer.json")),
         'manifest.json: tokenizer.file is "../tokenizer.json", not a file name'),
        (lambda out: edit_manifest(out, lambda m: m["splits"].update({"../seed-0": m["splits"]["seed-0"]})),
         'manifest.json: splits."../seed-0" is not a split'),
        (lambda out: edit_manifest(out, lambda m: m["splits"]["seed-0"]["files"][0].update(bytes="12")),
         "manifest.json: splits.seed-0.files[0].bytes is \"12\", not a size in bytes"),
        (lambda out: edit_manifest(out,
                                   lambda m: m["statistics"]["masking"].update({"seed-0": {"noise_fraction": "x"}})),
         'manifest.json: statistics.masking.seed-0 is {"noise_fraction": "x"}, not an object of finite numbers'),
        (lambda out: edit_manifest(out, lambda m: m.update(objective="bert")), "manifest.json: objective is \"bert\""),
    ],
    ids=["no-tokenizer", "no-special-tokens-map", "other-tokenizer-config", "vocab-size", "pad-id", "window-length",
         "no-seeds", "seeds-swapped", "validation-seed", "nan", "nan-length", "null-density", "no-seed",
         "density-out-of-range", "tokenizer-outside", "split-outside", "file-bytes-text", "statistic-text",
         "objective"],
)
def test_a_manifest_that_contradicts_its_tokenizer_options_or_json_is_reported(build_copy, damage, words):
    damage(build_copy)
    report = verify(build_copy)
    assert not report.ok and any(words in p for p in report.problems), report.problems


def test_windows_of_another_length_than_the_manifest_says_are_reported(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """A fixed-layout build whose manifest (options included) claims other lengths than its rows have."""
    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, input_length=32, seeds=1)
    other = build_tiny(tmp_path / "c", tiny_corpus, tiny_tokenizer_path, input_length=48, seeds=1)
    claimed = json.loads((other / "manifest.json").read_text())
    edit_manifest(out, lambda m: m.update({k: claimed[k] for k in ("input_length", "window_length", "target_length")},
                                         config={**m["config"], "input_length": 48}))
    shutil.copy(other / "tokenizer_config.json", out)  # its model_max_length follows the input length
    problems = verify(out).problems
    assert any(p.startswith("windows row 0:") and "window_length is" in p for p in problems), problems


def test_merge_spans_undoes_the_seed_000_toy_example():
    e0, e1, eos = 100, 99, 1
    enc = np.array([11, 12, 13, e0, 15, 16, 17, 18, 19, 20, e1, eos])
    labels = np.array([e0, 14, e1, 21, 22, 23, eos])
    tokens, noise = merge_spans(enc, labels, np.array([e0, e1]))
    assert tokens.tolist() == list(range(11, 24))
    assert noise.tolist() == [False] * 3 + [True] + [False] * 6 + [True] * 3


def test_the_cli_exits_0_with_ok_and_1_listing_problems(build_copy):
    ok = subprocess.run([sys.executable, "-m", "mlmprep", "verify", str(build_copy)], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: ")
    data_file(build_copy, "seed-0").write_bytes(b"not arrow")
    bad = subprocess.run([sys.executable, "-m", "mlmprep", "verify", str(build_copy)], capture_output=True, text=True)
    assert bad.returncode == 1 and "seed-0/" in bad.stdout and "Traceback" not in bad.stderr


@pytest.mark.parametrize(("edit", "words"), [
    (lambda m: m["splits"]["seed-0"]["files"].pop(1), "seed-0/dataset_info.json: not listed in the manifest"),
    (lambda m: m["splits"].pop("validation-windows"), "manifest.json: lists no split validation-windows"),
    (lambda m: m["splits"].pop("validation-windows"),
     "validation-windows/: a split directory the manifest does not list"),
], ids=["a-file", "a-split", "its-directory"])
def test_what_the_manifest_no_longer_lists_is_reported(build_copy, edit, words):
    """A file or a split left on disk that the manifest forgot: the manifest was edited, not the build."""
    edit_manifest(build_copy, edit)
    problems = verify(build_copy).problems
    assert words in problems or any(p.startswith(words) for p in problems), problems
