"""--exclude: evaluation text cut out of the corpus as GPT-3 describes it (200 characters each side of a shared word
13-gram; pieces under 200 characters and documents in more than 10 pieces dropped), held against the brute-force
reference of tests.ngrams (sets of word tuples, characters struck out one by one); errors of a bad evaluation set."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from tests.builder.test_sharded import reference_rows
from tests.cli.test_build import run_cli
from tests.conftest import build_tiny
from tests.ngrams import excluded_pieces, word_ngrams


def words(rng: random.Random, n: int, prefix: str) -> str:
    return " ".join(f"{prefix}{rng.randrange(400)}" for _ in range(n))


def evaluation_set(rng: random.Random) -> list[str]:
    """Passages of 20 to 60 words of their own vocabulary (e...), and one of 8 words (shorter than an n-gram)."""
    return [words(rng, rng.randrange(20, 60), "e") for _ in range(12)] + [words(rng, 8, "e")]


def training_documents(rng: random.Random, passages: list[str], n: int) -> list[str]:
    """Filler text (t...) with 0 to 14 runs of 13 to 20 words of the passages put in at random places, at the
    start and end too; some documents are the short passage alone, and some hold it among filler."""
    docs = []
    for k in range(n):
        parts = [words(rng, rng.randrange(0, 120), "t")]
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 14])):
            passage = rng.choice(passages[:-1]).split()
            at, size = rng.randrange(len(passage) - 12), rng.randrange(13, 21)
            parts += [" ".join(passage[at : at + size]), words(rng, rng.randrange(0, 90), "t")]
        doc = " ".join(p for p in parts if p)
        docs.append(passages[-1] if k % 17 == 5 else f"{doc} {passages[-1]}" if k % 17 == 9 else doc)
    return [doc for doc in docs if doc.strip()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path, list[str], list[str]]:
    rng = random.Random(46)
    passages = evaluation_set(rng)
    docs = training_documents(rng, passages, 160)
    root = tmp_path_factory.mktemp("exclude")
    (root / "corpus.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    with open(root / "eval.jsonl", "w", encoding="utf-8") as f:  # another format than the corpus's
        for passage in passages:
            f.write(json.dumps({"text": passage}) + "\n")
    return root / "corpus.txt", root / "eval.jsonl", docs, passages


def test_cut_matches_leaves_the_reference_pieces():
    """Each document's pieces, and what was removed, against the brute-force strike-out, over many random cases:
    matches at the ends, overlapping margins, short pieces, more than 10 pieces."""
    from mlmprep.builder.overlap import cut_matches, exclusion_table

    rng = random.Random(7)
    for case in range(30):
        passages = evaluation_set(rng)
        grams = {g for p in passages for g in word_ngrams(p)}
        table = exclusion_table([passages])
        for doc in training_documents(rng, passages, 20):
            pieces, removed = cut_matches(doc, table)
            assert pieces == excluded_pieces(doc, grams), (case, doc)
            assert sum(map(len, pieces)) + sum(map(len, removed)) == len(doc)


def test_the_cut_is_200_characters_each_side_and_its_limits_exact():
    """Crafted: a piece of exactly 200 characters stays and one of 199 goes; 10 pieces stay, 11 drop the document;
    the cut starts 200 characters before the n-gram's first word and ends 200 after its last."""
    from mlmprep.builder.overlap import cut_matches, exclusion_table

    gram = " ".join(f"g{k}" for k in range(13))
    table = exclusion_table([[gram]])
    for before, after in ((200, 200), (199, 201), (201, 199), (400, 0), (0, 400)):
        doc = "a" * (before + 199) + " " + gram + " " + "b" * (after + 199)  # a 199-character cut before the match
        pieces, _ = cut_matches(doc, table)
        assert pieces == excluded_pieces(doc, {tuple(gram.split())}), (before, after)
        assert pieces == [p for p in ("a" * before, "b" * after) if len(p) >= 200]
    block = "z" * 200 + " " + "w" * 199 + " " + gram + " " + "v" * 199 + " "  # one piece of 201 or 202 characters
    for count in (10, 11):
        pieces, _ = cut_matches(block * count, table)
        assert len(pieces) == (count if count <= 10 else 0), count
        assert pieces == excluded_pieces(block * count, {tuple(gram.split())})


def reference_documents(docs: list[str], grams: set[tuple[str, ...]]) -> tuple[list[str], int, int]:
    """(the training documents a build with --exclude streams: each matched document's reference pieces, the others
    whole; documents matched; documents dropped)."""
    expected, matched, dropped = [], 0, 0
    for doc in docs:
        hit = any(g in grams for g in word_ngrams(doc))
        pieces = excluded_pieces(doc, grams) if hit else [doc]
        matched += hit
        dropped += hit and not pieces
        expected += pieces
    return expected, matched, dropped


def assert_training_windows_of(built: Path, expected: list[str], tokenizer: Path) -> None:
    from mlmprep.format.rows import concat_rows
    from mlmprep.format.write import iter_rows

    rows, _ = reference_rows(expected, tokenizer, {})
    got = concat_rows(list(iter_rows(built / "windows", "tokens")))
    assert np.array_equal(got.offsets, rows.offsets) and np.array_equal(got.values, rows.values)


def test_a_build_with_exclude_is_the_build_of_the_pieces(tmp_path, corpus, tiny_tokenizer_path):
    """The training windows are those of the reference's pieces, each a document; the manifest counts them."""
    path, evaluation, docs, passages = corpus
    grams = {g for p in passages for g in word_ngrams(p)}
    expected, matched, dropped = reference_documents(docs, grams)
    assert 10 < matched < len(docs) and dropped > 3 and len(expected) > len(docs) - dropped  # every case arises
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, validation_fraction=0.0, dedup="off",
                       exclude=(str(evaluation),), workers=2, shard_bytes=6000, rows_per_file=40)
    assert_training_windows_of(built, expected, tiny_tokenizer_path)
    stats = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["exclusion"]
    assert stats == {"files": [str(evaluation)], "documents": len(passages), "ngrams": len(grams), "ngram": 13,
                     "margin": 200, "documents_matched": matched, "documents_dropped": dropped,
                     "pieces": len(expected) - (len(docs) - matched),
                     "characters_removed": sum(map(len, docs)) - sum(map(len, expected)),
                     "example": next(" ".join(g) for doc in docs for g in word_ngrams(doc) if g in grams)}
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary

    assert (f"excluded: {len(passages)} evaluation documents ({len(grams):,} distinct 13-word n-grams) matched "
            f"{matched} documents") in build_summary(built, read_manifest(built))


def test_an_edited_evaluation_set_is_another_build(tmp_path, corpus, tiny_tokenizer_path):
    """The manifest records the evaluation set's size and sha256; the same build again is up to date; once the set
    is edited (to the same size), the build is refused as made differently until --force rebuilds it, and then the
    new text is what is cut out."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig
    from mlmprep.errors import CacheError

    path, _, docs, passages = corpus
    first, second = passages[:6], passages[6:-1]  # of 20 words or more: 13-grams

    def flipped(passage: str) -> str:  # the same characters, none of the passage's 13-grams
        return " ".join(reversed(passage.split()))

    evaluation = tmp_path / "eval.txt"
    options = BuildConfig(corpus=(str(path),), tokenizer=str(tiny_tokenizer_path), out=str(tmp_path / "b"),
                          input_length=32, seeds=1, validation_fraction=0.0, dedup="off", rows_per_file=40,
                          exclude=(str(evaluation),))
    built = {}
    for text in (first + [flipped(p) for p in second], [flipped(p) for p in first] + second):
        evaluation.write_text("\n".join(text) + "\n", encoding="utf-8")
        content = evaluation.read_bytes()
        if built:
            assert len(content) == built["bytes"]
            changed = re.escape(f"holds a build made differently (--exclude {evaluation} changed); pass --force")
            with pytest.raises(CacheError, match=changed):
                build(options, log=lambda _: None)
        result = build(dataclasses.replace(options, force=bool(built)), log=lambda _: None)
        assert not result.up_to_date
        recorded = json.loads((tmp_path / "b" / "manifest.json").read_text())["corpus"]["stats"]["option_files"]
        built = {"path": str(evaluation), "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
        assert recorded == {"exclude": [built]}
        assert build(options, log=lambda _: None).up_to_date  # the same command again
        excluded = text[:6] if text[0] == first[0] else text[6:]
        assert_training_windows_of(tmp_path / "b", reference_documents(docs, {g for p in excluded
                                                                              for g in word_ngrams(p)})[0],
                                   tiny_tokenizer_path)


def test_keep_dropped_holds_what_exclude_cut_from_each_matched_document(tmp_path, corpus, tiny_tokenizer_path):
    """--keep-dropped: one `exclude` row per matched document (its number in the corpus), whose text is that
    document's characters less the reference's pieces; verify accepts the split."""
    from collections import Counter

    from mlmprep.builder.dropped import split_rows

    path, evaluation, docs, passages = corpus
    grams = {g for p in passages for g in word_ngrams(p)}
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, validation_fraction=0.0, dedup="off",
                       exclude=(str(evaluation),), keep_dropped=True, workers=2, shard_bytes=6000)
    rows = [r for r in split_rows(built) if r[1] == "exclude"]
    matched = [k for k, doc in enumerate(docs) if any(g in grams for g in word_ngrams(doc))]
    assert [r[0] for r in rows] == matched
    for number, _, text in rows:
        kept = "".join(excluded_pieces(docs[number], grams))
        assert Counter(text.replace("\n", "")) == Counter(docs[number]) - Counter(kept), number
    verified = run_cli("verify", built)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("name, content, message", [
    ("missing.txt", None, "--exclude: {path}: no such file or directory"),
    ("empty.txt", "\n\n", "--exclude {path}: no text to exclude"),
    ("broken.parquet", "not parquet", "--exclude: {path}: not a readable Parquet file"),
])
def test_a_bad_evaluation_set_is_one_line_and_exit_2(tmp_path, tiny_corpus, tiny_tokenizer_path, name, content,
                                                       message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = run_cli("build", str(tiny_corpus), "--tokenizer", str(tiny_tokenizer_path), "--out",
                     str(tmp_path / "out"), "--exclude", str(path), "--seeds", "1")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: " + message.format(path=path)), result.stderr
    assert not (tmp_path / "out").exists()


def test_evaluation_sets_and_badwords_on_object_storage_identify_the_build(s3, tmp_path, tiny_tokenizer_path):
    """--exclude and --c4-badwords given as s3:// URLs (moto's server): read in place, recorded by URL, size and
    sha256; the same build again is up to date, an object edited since is a different build, and one put back as
    it was is up to date again (the content, not the upload, identifies it)."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig
    from mlmprep.errors import CacheError
    from tests.builder.test_filters import corpus_pages

    pages = corpus_pages(120, seed=13)
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"text": p}) + "\n" for p in pages), encoding="utf-8")
    bucket, fs = s3.bucket(), s3.fs()
    contents = {"eval.jsonl": "".join(json.dumps({"text": p}) + "\n" for p in pages[:4]).encode(),
                "bad.txt": b"mill\n"}
    for name, data in contents.items():
        fs.pipe(f"{bucket}/{name}", data)
    options = BuildConfig(corpus=(str(corpus),), tokenizer=str(tiny_tokenizer_path), out=str(tmp_path / "b"),
                          input_length=32, seeds=1, filters="c4", exclude=(f"s3://{bucket}/eval.jsonl",),
                          c4_badwords=f"s3://{bucket}/bad.txt")
    assert not build(options, log=lambda _: None).up_to_date
    recorded = json.loads((tmp_path / "b" / "manifest.json").read_text())["corpus"]["stats"]
    assert recorded["option_files"] == {
        option: [{"path": f"s3://{bucket}/{name}", "bytes": len(contents[name]),
                  "sha256": hashlib.sha256(contents[name]).hexdigest()}]
        for option, name in (("exclude", "eval.jsonl"), ("c4_badwords", "bad.txt"))}
    assert recorded["exclusion"]["documents_matched"] >= 4 and recorded["filters"]["c4_badword"]["documents"] > 0
    assert build(options, log=lambda _: None).up_to_date
    for name, option, edited in (("bad.txt", "--c4-badwords", b"noon\n"),
                                 ("eval.jsonl", "--exclude", contents["eval.jsonl"].replace(b"Page", b"Sage"))):
        fs.pipe(f"{bucket}/{name}", edited)
        with pytest.raises(CacheError, match=re.escape(f"({option} s3://{bucket}/{name} changed); pass --force")):
            build(options, log=lambda _: None)
        fs.pipe(f"{bucket}/{name}", contents[name])
        assert build(options, log=lambda _: None).up_to_date
