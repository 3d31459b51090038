"""Special tokens in the data: a document's </s> and the tokenizer's frame ([CLS] ... [SEP]) are structure, never
noise or MLM targets; unknown tokens are counted and warned about; a tokenizer file's own padding and truncation
never reach the rows."""

import json

import numpy as np
import pytest

from mlmprep.format.write import iter_rows
from tests.cli.test_build import cli
from tests.conftest import build_tiny


def rows_of(split_dir, column):
    """Every row of one column of a split, as a list of int arrays."""
    out = []
    for chunk in iter_rows(split_dir, column):
        out += [chunk.values[chunk.offsets[i] : chunk.offsets[i + 1]] for i in range(len(chunk))]
    return out


@pytest.mark.parametrize("options", [{"pack": "doc"}, {"pack": "doc", "random_roll": True},
                                     {"method": "text", "input_length": 64}], ids=["doc", "doc-roll", "text"])
def test_span_rows_hold_eos_only_at_their_end(tmp_path, tiny_corpus, tiny_tokenizer_path, options):
    """A document's end is structure: with --pack doc (and --method text) no </s> is noise, and each
    input and label row ends with exactly one </s> (never `</s></s>`)."""
    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, **options)
    eos = json.loads((out / "manifest.json").read_text())["tokenizer"]["eos_id"]
    for split in ("seed-0", "seed-1", "validation"):
        for column in ("input_ids", "labels"):
            rows = rows_of(out / split, column)
            assert rows
            for row in rows:
                assert row[-1] == eos and np.count_nonzero(row == eos) == 1, (split, column, row)
    from mlmprep.builder.verify import verify

    assert verify(out).ok


def test_doc_windows_use_the_full_input_length_for_text(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """Without the document's own </s> a --pack doc window holds one more text token; encoder rows stay
    within --input-length and the longest one reaches it."""
    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, pack="doc", input_length=16)
    manifest = json.loads((out / "manifest.json").read_text())
    assert max(len(r) for r in rows_of(out / "windows", "tokens")) == manifest["window_length"]
    assert max(len(r) for r in rows_of(out / "seed-0", "input_ids")) == 16


def test_mlm_never_targets_a_special_token(tmp_path, tiny_corpus, tiny_tokenizer_path):
    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, objective="mlm", pack="doc")
    from mlmprep.tokenizer.load import load_tokenizer, special_ids

    special = special_ids(load_tokenizer(out / "tokenizer.json")).all()
    windows, labels = rows_of(out / "windows", "tokens"), rows_of(out / "seed-0", "labels")
    assert any(np.isin(w, special).any() for w in windows)  # there are special tokens to leave alone
    for w, y in zip(windows, labels):
        assert not (np.isin(w, special) & (y != -100)).any()


def test_frame_ids_follow_the_post_processor(wordpiece_path, tiny_tokenizer):
    from mlmprep.tokenizer.load import frame_ids, load_tokenizer

    prefix, suffix = frame_ids(load_tokenizer(wordpiece_path))
    assert prefix.tolist() == [2] and suffix.tolist() == [3]
    prefix, suffix = frame_ids(tiny_tokenizer)  # mlmprep's Unigram tokenizer has no post-processor
    assert prefix.size == suffix.size == 0


@pytest.mark.parametrize("pack", ["stream", "doc"])
def test_mlm_rows_are_framed_cls_sep_inside_the_input_length(tmp_path, tiny_corpus, wordpiece_path, pack):
    out = build_tiny(tmp_path / "b", tiny_corpus, wordpiece_path, objective="mlm", pack=pack, input_length=24)
    cls, sep = 2, 3
    inputs, labels = rows_of(out / "seed-0", "input_ids"), rows_of(out / "seed-0", "labels")
    windows = rows_of(out / "windows", "tokens")
    assert len(windows) > 20
    for w, x, y in zip(windows, inputs, labels):
        assert w[0] == cls and w[-1] == sep and x[0] == cls and x[-1] == sep
        assert np.count_nonzero(w == cls) == 1  # the frame, once
        assert y[0] == -100 and y[-1] == -100  # the frame is never masked
        assert len(w) <= 24
        if pack == "doc":
            assert np.count_nonzero(w == sep) == 1  # the frame's [SEP] is the document's end, not [SEP][SEP]
    if pack == "stream":
        assert {len(w) for w in windows} == {24}
    from mlmprep.builder.verify import verify

    assert verify(out).ok


def test_unknown_tokens_are_counted_and_warned_about(tmp_path, tiny_corpus, tok, tiny_tokenizer):
    from mlmprep.tokenizer.load import special_ids

    unk = special_ids(tiny_tokenizer).unk
    greek = tmp_path / "mixed.txt"  # the tiny tokenizer never saw these letters
    lines = tiny_corpus.read_text(encoding="utf-8").splitlines()
    greek.write_text("\n".join(f"{line} αβγ δεζ ηθι" for line in lines) + "\n", encoding="utf-8")
    said = {}
    for name, corpus in (("clean", tiny_corpus), ("greek", greek)):
        out = tmp_path / name
        result = cli("build", corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "1")
        assert result.exit_code == 0, result.stderr
        stats = json.loads((out / "manifest.json").read_text())["statistics"]["windows"]
        kept = [t for split in ("windows", "validation-windows") for t in rows_of(out / split, "tokens")]
        expected = sum(int(np.count_nonzero(t == unk)) for t in kept)
        assert stats["unknown_tokens"] == expected
        assert stats["unknown_fraction"] == pytest.approx(expected / stats["tokens_kept"])
        said[name] = (expected, result.stdout)
    assert said["clean"][0] == 0 and "warning" not in said["clean"][1]
    assert said["greek"][0] > 0 and f"unknown tokens: {said['greek'][0]:,}" in said["greek"][1]
    (warning,) = [line for line in said["greek"][1].splitlines() if line.startswith("warning:")]
    assert "unknown" in warning and "%" in warning


def test_text_method_mlm_rows_are_framed_too(tmp_path, tiny_corpus, wordpiece_path):
    out = build_tiny(tmp_path / "b", tiny_corpus, wordpiece_path, objective="mlm", method="text", input_length=24)
    windows = rows_of(out / "windows", "tokens")
    assert len(windows) > 20
    assert all(w[0] == 2 and w[-1] == 3 and len(w) <= 24 for w in windows)


@pytest.mark.parametrize("workers", [1, 2])
def test_padding_and_truncation_saved_in_a_tokenizer_file_do_not_reach_the_data(tmp_path, tiny_corpus,
                                                                                  tiny_tokenizer_path, workers):
    """A tokenizer.json saved from transformers may carry truncation and padding; encoding with them would cut
    every document to a few tokens or pad it with pad ids. The stream must be the plain one all the same, and
    the build keeps (and hashes) the file as given."""
    from tokenizers import Tokenizer

    from mlmprep.builder.verify import verify
    from mlmprep.tokenizer.load import tokenizer_sha256

    padded = Tokenizer.from_file(str(tiny_tokenizer_path))
    padded.enable_truncation(max_length=5)
    padded.enable_padding(length=7, pad_id=0)
    padded_path = tmp_path / "padded.json"
    padded.save(str(padded_path))
    out = build_tiny(tmp_path / "out", tiny_corpus, padded_path, pack="doc", input_length=512, workers=workers,
                     validation_fraction=0.0)

    plain = Tokenizer.from_file(str(tiny_tokenizer_path))  # the reference: the file without those settings
    manifest = json.loads((out / "manifest.json").read_text())
    docs = [line for line in tiny_corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    expected = [i for doc in docs for i in plain.encode(doc, add_special_tokens=False).ids]
    # --pack doc for span corruption: each document its own rows, in corpus order, ended by the mask's </s>
    assert np.concatenate(rows_of(out / "windows", "tokens")).tolist() == expected
    assert manifest["tokenizer"]["sha256"] == tokenizer_sha256(padded)
    assert Tokenizer.from_file(str(out / "tokenizer.json")).truncation["max_length"] == 5
    assert verify(out).problems == []
