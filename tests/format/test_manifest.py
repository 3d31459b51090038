"""The typed manifest: a fresh build's manifest.json round-trips byte for byte; every field is validated and named in
one line; corpus.stats takes other small mappings; member() keeps a build's files inside it."""

from __future__ import annotations

import json
import os

import pytest

from mlmprep.errors import CacheError
from mlmprep.format.load import read_manifest
from mlmprep.format.manifest import Manifest, ManifestError, member
from mlmprep.format.write import write_json


@pytest.fixture
def raw(tiny_build):
    return json.loads((tiny_build / "manifest.json").read_text(encoding="utf-8"))


def test_a_fresh_build_manifest_round_trips_byte_for_byte(tiny_build, tmp_path):
    """The build writes through Manifest too, so what it holds is checked against the documented fields."""
    raw = json.loads((tiny_build / "manifest.json").read_text(encoding="utf-8"))
    assert sorted(raw) == ["build_options", "config", "corpus", "fixed_length", "format_version", "input_length",
                           "method", "mlmprep_version", "objective", "rows_per_file", "seeds", "splits", "statistics",
                           "target_length", "timings", "tokenizer", "validation_seed", "window_length"]
    assert sorted(raw["corpus"]) == ["description", "files", "fingerprint", "stats"]
    assert sorted(raw["tokenizer"]) == ["decoder_start_id", "eos_id", "file", "mask_id", "pad_id", "sentinels",
                                        "sha256", "trained_on", "type", "unk_id", "vocab_size"]
    manifest = read_manifest(tiny_build)
    write_json(tmp_path / "manifest.json", manifest.to_json())
    assert (tmp_path / "manifest.json").read_bytes() == (tiny_build / "manifest.json").read_bytes()
    assert manifest.seed_splits == ["seed-0", "seed-1"] and manifest.splits["seed-0"].record("state.json").bytes > 0


def edited(raw: dict, path: str, value=None, *, delete: bool = False) -> dict:
    data = json.loads(json.dumps(raw))
    *parents, last = path.split(".")
    target = data
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if delete:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return data


@pytest.mark.parametrize(("path", "value", "words"), [
    ("objective", "bert", "objective is \"bert\", not 'span' or 'mlm'"),
    ("input_length", 0, "input_length is 0, not a positive integer"),
    ("window_length", True, "window_length is true, not a positive integer"),
    ("target_length", 2**40, "target_length is 1099511627776, not a positive integer"),
    ("tokenizer.file", "../tokenizer.json", 'tokenizer.file is "../tokenizer.json", not a file name'),
    ("tokenizer.file", "/etc/passwd", "tokenizer.file is \"/etc/passwd\", not a file name"),
    ("tokenizer.sha256", "abc", "tokenizer.sha256 is \"abc\", not a sha256 in hex"),
    ("tokenizer.pad_id", 10**6, "tokenizer.pad_id is 1000000, not an id below vocab_size"),
    ("tokenizer.eos_id", -1, "tokenizer.eos_id is -1, not an id below vocab_size"),
    ("tokenizer.vocab_size", "400", "tokenizer.vocab_size is \"400\", not a vocabulary size"),
    ("tokenizer.extra", 1, "tokenizer.extra is not a field this mlmprep knows"),
    ("tokenizer.type", "spm", "tokenizer.type is \"spm\", not one of unigram, wordpiece, bpe or null"),
    ("seeds.0.split", "seed-9", 'seeds[0].split is "seed-9", not a split that splits lists'),
    ("seeds.0.seed", 2**64, "seeds[0].seed is 18446744073709551616, not a seed"),
    ("seeds.1", "seed-1", 'seeds[1] is "seed-1", not an object'),
    ("splits.seed-0.rows", -1, "splits.seed-0.rows is -1, not a row count"),
    ("splits.seed-0.files.0.name", "../../x.arrow", 'splits.seed-0.files[0].name is "../../x.arrow", not a file name'),
    ("splits.seed-0.files.0.name", "state.json", "splits.seed-0.files lists a file twice"),
    ("splits.seed-0.files.0.bytes", 1.5, "splits.seed-0.files[0].bytes is 1.5, not a size in bytes"),
    ("splits.seed-0.files", {}, "splits.seed-0.files is {}, not a list of files"),
    ("config.noise_density", 1.0, "config.noise_density is 1.0, not a number in (0, 1)"),
    ("config.seed", "0", 'config.seed is "0", not a seed'),
    ("config.pack", "zip", "config.pack is \"zip\", not 'stream' or 'doc'"),
    ("statistics.windows.rows", "730", 'statistics.windows.rows is "730", not a count'),
    ("statistics.masking.seed-0", {"noise_fraction": 0.15}, "statistics.masking.seed-0 is"),
    ("corpus.stats.files_skipped", "a.txt", 'corpus.stats.files_skipped is "a.txt", not a list of strings'),
    ("corpus.stats.wrapped_prose", {"files": 1}, "corpus.stats.wrapped_prose is"),
    ("corpus.stats.files_as_text", True, "corpus.stats.files_as_text is true, not a list of strings"),
    ("corpus.stats.dedup", True, "corpus.stats.dedup is true, not an object of dedup counts"),
    ("corpus.stats.dedup.largest_clusters", [{"size": "3", "excerpt": "x"}], "corpus.stats.dedup is"),
    ("corpus.stats.dedup.documents", None, "corpus.stats.dedup is"),
    ("corpus.stats.option_files", {"exclude": [{"path": "e.txt", "bytes": 4, "sha256": "A" * 64}]},
     "corpus.stats.option_files is"),
    ("corpus.stats.option_files", {"exclude": ["e.txt"]}, "corpus.stats.option_files is"),
    ("corpus.description", "x" * 5000, "corpus.description is"),
    ("timings.total_s", "fast", "timings is"),
    ("build_options.threads", [[[[[[[1]]]]]]], "build_options is"),
    ("extra", 1, "extra is not a field this mlmprep knows"),
    ("validation_seed", -5, "validation_seed is -5, not a seed"),
])
def test_each_field_is_checked_and_named_in_one_line(raw, path, value, words):
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(edited(raw, path, value), "BUILD")
    message = str(caught.value)
    assert words in message and "\n" not in message, message
    assert message.startswith("BUILD/manifest.json: ") and "mlmprep verify BUILD" in message


@pytest.mark.parametrize("path", ["objective", "tokenizer", "tokenizer.sha256", "seeds", "splits", "config",
                                  "splits.seed-0.files.0.sha256", "seeds.0.seed"])
def test_a_missing_field_is_named(raw, path):
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(edited(raw, path, delete=True), "BUILD")
    assert f"{path.replace('.0.', '[0].')} is missing" in str(caught.value)


def test_corpus_stats_take_other_small_mappings_and_older_builds_lack_optional_fields(raw):
    dedup = {"documents_removed": 12, "clusters": 3, "method": "minhash",
             "examples": [{"size": 4, "excerpt": "the same text"}, {"size": 2, "excerpt": "other"}]}
    manifest = Manifest.from_json(edited(raw, "corpus.stats.minhash", dedup), "BUILD")  # a key no reader reads
    assert manifest.corpus.stats["minhash"] == dedup and manifest.to_json()["corpus"]["stats"]["minhash"] == dedup
    old = {k: v for k, v in raw.items() if k not in ("timings", "build_options", "corpus", "validation_seed",
                                                      "rows_per_file", "fixed_length")}
    manifest = Manifest.from_json(old, "BUILD")
    assert manifest.to_json() == old and manifest.fixed  # method tokens: fixed windows
    assert manifest.option("pack") == "stream"  # recorded
    assert Manifest.from_json(edited(old, "config.pack", delete=True), "B").option("pack") == "stream"  # default


def test_member_keeps_paths_inside_the_build_links_resolved(tmp_path):
    build, outside = tmp_path / "b", tmp_path / "outside"
    (build / "seed-0").mkdir(parents=True)
    outside.mkdir()
    (outside / "x.arrow").write_bytes(b"x")
    assert member(build, "seed-0/data.arrow") == build / "seed-0" / "data.arrow"
    os.symlink(outside / "x.arrow", build / "seed-0" / "link.arrow")
    os.symlink(outside, build / "seed-1")
    os.symlink(build / "seed-0", build / "inside")  # a link that stays inside is fine
    assert member(build, "inside/data.arrow") == build / "inside" / "data.arrow"
    for name in ("../outside/x.arrow", "seed-0/link.arrow", "seed-1/x.arrow", str(outside / "x.arrow"),
                 "seed-0/../../outside/x.arrow"):
        with pytest.raises(CacheError, match="resolves outside the build"):
            member(build, name)
    with pytest.raises(CacheError, match="resolves outside the build"):
        member(tmp_path / "b2", "../b/seed-0")  # a sibling whose name starts like the build's


def test_a_state_json_naming_a_file_outside_is_refused_before_it_is_read(tiny_build, tmp_path):
    import shutil

    from mlmprep.format.load import open_epoch

    build = tmp_path / "b"
    shutil.copytree(tiny_build, build)
    state = json.loads((build / "seed-0" / "state.json").read_text())
    for name in ("../../elsewhere/x.arrow", "/etc/passwd", ".."):
        state["_data_files"][0]["filename"] = name
        (build / "seed-0" / "state.json").write_text(json.dumps(state))
        with pytest.raises(CacheError, match="state.json: not a datasets state.json"):
            from mlmprep.format.load import open_split
            open_split(build / "seed-0")
    with pytest.raises(CacheError):
        open_epoch(build, 0)
