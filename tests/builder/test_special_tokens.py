"""Data details: special tokens are structure, never noise or targets; MLM rows carry the
tokenizer's own frame; unknown tokens are counted; remask's seed semantics; inspect; config numbers."""

import json

import numpy as np
import pytest
from conftest import build_tiny, tiny_documents

from mlmprep.format.write import iter_rows


def rows_of(split_dir, column):
    """Every row of one column of a split, as a list of int arrays."""
    out = []
    for chunk in iter_rows(split_dir, column):
        out += [chunk.values[chunk.offsets[i] : chunk.offsets[i + 1]] for i in range(len(chunk))]
    return out


# ---------------------------------------------------------------------------- item 1: structure is never noise


@pytest.mark.parametrize("options", [{"pack": "doc"}, {"pack": "doc", "random_roll": True},
                                     {"method": "text", "input_length": 64}], ids=["doc", "doc-roll", "text"])
def test_span_rows_hold_eos_only_at_their_end(tmp_path, tiny_corpus, tiny_tokenizer_path, options):
    """A document's end is structure: with --pack doc (and --method text) no </s> is noise, and each
    input and label row ends with exactly one </s> (the issue's rows ended `</s></s>`)."""
    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, **options)
    eos = json.loads((out / "manifest.json").read_text())["tokenizer"]["eos_id"]
    for split in ("seed-0", "seed-1", "validation"):
        for column in ("input_ids", "labels"):
            rows = rows_of(out / split, column)
            assert rows
            for row in rows:
                assert row[-1] == eos and np.count_nonzero(row == eos) == 1, (split, column, row)
    from mlmprep.build.verify import verify

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
    from mlmprep.tokenize import load_tokenizer, special_ids

    special = special_ids(load_tokenizer(out / "tokenizer.json")).all()
    windows, labels = rows_of(out / "windows", "tokens"), rows_of(out / "seed-0", "labels")
    assert any(np.isin(w, special).any() for w in windows)  # there are special tokens to leave alone
    for w, y in zip(windows, labels):
        assert not (np.isin(w, special) & (y != -100)).any()


# ---------------------------------------------------------------------------- item 2: the tokenizer's frame


def test_frame_ids_follow_the_post_processor(wordpiece_path, tiny_tokenizer):
    from mlmprep.tokenize import frame_ids, load_tokenizer

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
    from mlmprep.build.verify import verify

    assert verify(out).ok


# ---------------------------------------------------------------------------- item 8: remask and seed counts


def cli(*args):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_a_build_with_more_seeds_satisfies_a_request_for_fewer(tmp_path, tiny_corpus, tok):
    out = tmp_path / "b"
    build = ["build", tiny_corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "2"]
    assert cli(*build).exit_code == 0
    assert cli("remask", out, "--seeds", "5").exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = cli(*build)  # the original command: the 5-seed build holds its 2 seeds
    assert again.exit_code == 0 and "up to date" in again.stdout
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    said = cli("remask", out, "--seeds", "2")
    assert said.exit_code == 0 and "already has 5 seeds" in said.stdout
    more = cli(*build[:-1], "7")  # more seeds than the build has: remask says how
    assert more.exit_code == 2 and f"mlmprep remask {out} --seeds 7" in more.stderr
    for bad in ("0", "-1"):
        refused = cli("remask", out, "--seeds", bad)
        assert refused.exit_code == 2 and "--seeds must be at least 1" in refused.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# ---------------------------------------------------------------------------- item 9: inspect


@pytest.fixture(scope="module")
def mlm_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path):
    return build_tiny(tmp_path_factory.mktemp("mlm") / "b", tiny_corpus, tiny_tokenizer_path, objective="mlm",
                      input_length=64, seeds=1)


def test_inspect_examples_zero_shows_none_and_negative_is_refused(mlm_build):
    shown = cli("inspect", mlm_build, "--examples", "0")
    assert shown.exit_code == 0 and "rows:" in shown.stdout and "--- seed-0 row" not in shown.stdout
    assert cli("inspect", mlm_build, "--examples", "2").stdout.count("--- seed-0 row") == 2
    refused = cli("inspect", mlm_build, "--examples", "-1")
    assert refused.exit_code == 2 and "--examples" in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_inspect_marks_masked_replaced_and_kept_mlm_targets(mlm_build, tiny_tokenizer):
    """Each MLM target is shown in [[ ]]: masked, replaced by a random token (->), or kept (=)."""
    import re

    from mlmprep.format.report import mlm_text

    shown = cli("inspect", mlm_build, "--examples", "40").stdout
    texts = [line for line in shown.splitlines() if line.startswith("text:")]
    assert len(texts) == 40 and all("[[" in t for t in texts)
    marks = re.findall(r"\[\[([^\]]*)\]\]", "\n".join(texts))
    assert any("->" in m for m in marks) and any(m.endswith("=") for m in marks)
    # one row by hand: token 7 masked, token 8 replaced by 9, token 10 chosen and kept
    w = lambda i: tiny_tokenizer.decode([i])  # noqa: E731
    ids = [20, 7, 21, 8, 22, 10, 23]
    inputs = np.array([20, 3, 21, 9, 22, 10, 23])
    labels = np.array([-100, 7, -100, 8, -100, 10, -100])
    text = mlm_text(tiny_tokenizer, inputs, labels, mask_id=3)
    assert f"[[{w(7)}]]" in text and f"[[{w(8)}->{w(9)}]]" in text and f"[[{w(10)}=]]" in text
    unmarked = text.replace("[[", "").replace("]]", "").replace(f"->{w(9)}", "").replace("=", "")
    assert unmarked.split() == tiny_tokenizer.decode(ids).split()


# ---------------------------------------------------------------------------- item 10: numbers in config files


@pytest.mark.parametrize("suffix, text", [(".yaml", "lr: 1e-3\nmin_lr: 1e-5\nmax_steps: 1e2\n"),
                                          (".json", '{"lr": "1e-3", "min_lr": "1e-5", "max_steps": "100"}')])
def test_config_files_accept_numbers_written_as_strings(tmp_path, suffix, text):
    from mlmprep.config import TrainConfig, config_from
    from mlmprep.errors import ConfigError

    path = tmp_path / f"c{suffix}"
    path.write_text(text, encoding="utf-8")
    cfg = config_from(TrainConfig, str(path), {})
    assert (cfg.lr, cfg.min_lr, cfg.max_steps) == (1e-3, 1e-5, 100)
    for bad, words in (("max_steps: 2.5\n", "whole number"), ("lr: fast\n", "expects a number"),
                       ("lr: .nan\n", "--lr")):
        path = tmp_path / "bad.yaml"
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(ConfigError, match=words):
            config_from(TrainConfig, str(path), {})


# ---------------------------------------------------------------------------- item 6: unknown tokens


def test_unknown_tokens_are_counted_and_warned_about(tmp_path, tiny_corpus, tok, tiny_tokenizer):
    from mlmprep.tokenize import special_ids

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


# ---------------------------------------------------------------------------- item 11: records without the text field


def test_records_without_the_text_field_are_counted_and_skipped(tmp_path, tok):
    docs = tiny_documents(120)
    records = [{"text": d} if i % 10 else {"body": d} for i, d in enumerate(docs)]  # 12 without "text"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "b"
    result = cli("build", corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "1")
    assert result.exit_code == 0, result.stderr
    stats = json.loads((out / "manifest.json").read_text())["corpus"]["stats"]
    assert stats["missing_field_skipped"] == 12 and stats["documents"] == 108
    assert "12 records without the 'text' field skipped" in result.stdout


def test_a_corpus_where_no_record_has_the_field_is_refused_naming_the_option(tmp_path, tok):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"body": d}) + "\n" for d in tiny_documents(30)), encoding="utf-8")
    out = tmp_path / "b"
    result = cli("build", corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "1")
    assert result.exit_code == 2 and not out.exists()
    (line,) = result.stderr.splitlines()
    assert "none of its 30 records has a 'text' field" in line and "--text-column" in line


def test_json_errors_name_the_column_once(tmp_path, tok):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "fine"}\n{"text": "unterminated\n', encoding="utf-8")
    result = cli("build", corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--input-length", "32")
    assert result.exit_code == 2
    assert "starting at column" in result.stderr and "at at" not in result.stderr


def test_training_without_validation_rows_says_evaluation_is_skipped(tmp_path, tiny_corpus, tiny_tokenizer_path,
                                                                     capsys):
    import torch

    from mlmprep.config import TrainConfig
    from mlmprep.train.loop import fit

    data = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, validation_fraction=0.0, seeds=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fit(TrainConfig(data=str(data), out=str(tmp_path / "run"), model="tiny", max_steps=1, warmup_steps=0,
                        max_tokens_per_batch=256, max_tokens_per_microbatch=256, eval_every=0, save_every=0))
    finally:
        torch.set_num_threads(threads)
    said = [line for line in capsys.readouterr().err.splitlines() if "evaluation is skipped" in line]
    assert len(said) == 1 and "no validation rows" in said[0]


def test_whole_word_needs_a_tokenizer_that_marks_word_starts(tmp_path, tiny_corpus):
    """A WordLevel tokenizer marks no word starts: every run between specials would be one "word"
    masked whole, so --whole-word is refused before any reading, in one line."""
    from fakes import fake_tokenizer

    from mlmprep.build.mask import mlm_mask
    from mlmprep.errors import ConfigError

    path = tmp_path / "wordlevel.json"
    fake_tokenizer(400).save(str(path))
    out = tmp_path / "b"
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", path, "--objective", "mlm", "--whole-word",
                 "--input-length", "32")
    assert result.exit_code == 2 and not out.exists()
    (line,) = result.stderr.splitlines()
    assert "--whole-word" in line and "word starts" in line
    with pytest.raises(ConfigError, match="marks no word starts"):
        mlm_mask(np.arange(4, 20, dtype=np.int32), np.array([0, 16]), seed=0, first_row=0, probability=0.15,
                 mask_id=3, special_ids=np.arange(4), vocab_size=20, word_starts=np.zeros(20, bool))


def test_text_method_mlm_rows_are_framed_too(tmp_path, tiny_corpus, wordpiece_path):
    out = build_tiny(tmp_path / "b", tiny_corpus, wordpiece_path, objective="mlm", method="text", input_length=24)
    windows = rows_of(out / "windows", "tokens")
    assert len(windows) > 20
    assert all(w[0] == 2 and w[-1] == 3 and len(w) <= 24 for w in windows)


# ---------------------------------------------------------------------------- a tokenizer file's own settings


@pytest.mark.parametrize("workers", [1, 2])
def test_padding_and_truncation_saved_in_a_tokenizer_file_do_not_reach_the_data(tmp_path, tiny_corpus,
                                                                                  tiny_tokenizer_path, workers):
    """A tokenizer.json saved from transformers may carry truncation and padding; encoding with them would cut
    every document to a few tokens or pad it with pad ids. The stream must be the plain one all the same, and
    the build keeps (and hashes) the file as given."""
    from tokenizers import Tokenizer

    from mlmprep.build.verify import verify
    from mlmprep.tokenize import tokenizer_sha256

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
