"""--exclude: evaluation text cut out of the corpus as GPT-3 describes it (200 characters each side of a shared word
13-gram; pieces under 200 characters and documents in more than 10 pieces dropped), an evaluation text of fewer
words matched whole as Megatron's filter_ngrams does (down to --exclude-min-words), held against the brute-force
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
from tests.ngrams import evaluation_grams, excluded_pieces, has_match, runs


def words(rng: random.Random, n: int, prefix: str) -> str:
    return " ".join(f"{prefix}{rng.randrange(400)}" for _ in range(n))


SHORT = (5, 8, 10, 12)  # words of the short evaluation passages: one under Megatron's minimum of 8, three over


def evaluation_set(rng: random.Random) -> list[str]:
    """12 passages of 20 to 60 words of their own vocabulary (e...), then one of each length of SHORT (fewer words
    than an n-gram)."""
    return [words(rng, rng.randrange(20, 60), "e") for _ in range(12)] + [words(rng, n, "e") for n in SHORT]


def training_documents(rng: random.Random, passages: list[str], n: int) -> list[str]:
    """Filler text (t...) with 0 to 14 runs of 13 to 20 words of the long passages put in at random places, at the
    start and end too; some documents are a short passage alone, some hold one among filler, some hold a short
    passage less its last word."""
    long, short = passages[: -len(SHORT)], passages[-len(SHORT):]
    docs = []
    for k in range(n):
        parts = [words(rng, rng.randrange(0, 120), "t")]
        for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 14])):
            passage = rng.choice(long).split()
            at, size = rng.randrange(len(passage) - 12), rng.randrange(13, 21)
            parts += [" ".join(passage[at : at + size]), words(rng, rng.randrange(0, 90), "t")]
        doc = " ".join(p for p in parts if p)
        few = short[k // 17 % len(short)]
        docs.append({5: few, 9: f"{doc} {few} {words(rng, 3, 't')}",
                     13: f"{words(rng, 2, 't')} {few.rsplit(' ', 1)[0]}"}.get(k % 17, doc))
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
    from mlmprep.builder.overlap import cut_matches, exclusion_table, matched

    rng = random.Random(7)
    hits = dict.fromkeys(range(1, 14), 0)  # documents matched, by the shortest length of a match
    for case in range(32):
        passages = evaluation_set(rng)
        fewest = (8, 10, 13, 3)[case % 4]  # Megatron's minimum, one between, 13-grams only, every short passage
        grams = evaluation_grams(passages, fewest)
        evaluation, counts = exclusion_table([passages[:7], passages[7:]], fewest)
        assert counts == {"documents_short": sum(fewest <= n < 13 for n in SHORT),
                          "documents_ignored": sum(n < fewest for n in SHORT)}
        docs = training_documents(rng, passages, 70)
        assert matched(docs, evaluation).tolist() == [has_match(doc, grams) for doc in docs]
        for doc in docs:
            pieces, removed = cut_matches(doc, evaluation)
            assert pieces == excluded_pieces(doc, grams), (case, doc)
            assert sum(map(len, pieces)) + sum(map(len, removed)) == len(doc)
            found = runs(doc.split(), grams)
            hits[min(n for _, n in found) if found else 1] += 1
    assert all(hits[n] > 5 for n in (8, 10, 12, 13)) and hits[5] > 5  # each length matched, 5 with fewest 3 only


def test_the_cut_is_200_characters_each_side_and_its_limits_exact():
    """Crafted: a piece of exactly 200 characters stays and one of 199 goes; 10 pieces stay, 11 drop the document;
    the cut starts 200 characters before the n-gram's first word and ends 200 after its last."""
    from mlmprep.builder.overlap import cut_matches, exclusion_table

    gram = " ".join(f"g{k}" for k in range(13))
    table = exclusion_table([[gram]], 8)[0]
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


def test_a_shorter_match_inside_a_longer_ones_cut_changes_nothing():
    """Crafted: an evaluation text of 8 words that is also words 2 to 9 of a 13-gram, and one of 9 words that ends
    130 characters past the 13-gram: the cut is the 13-gram's, then the second text's, one after the other."""
    from mlmprep.builder.overlap import cut_matches, exclusion_table

    gram = " ".join(f"g{k}" for k in range(13))
    inside = " ".join(f"g{k}" for k in range(2, 10))
    after = " ".join(["g12"] + [f"h{k}{'x' * 10}" for k in range(8)])
    evaluation, counts = exclusion_table([[gram, inside, after]], 8)
    assert evaluation.lengths == (8, 9, 13) and counts == {"documents_short": 2, "documents_ignored": 0}
    doc = "a" * 450 + " " + gram + after.removeprefix("g12") + " " + "b" * 500
    pieces, removed = cut_matches(doc, evaluation)
    grams = {tuple(gram.split()), tuple(inside.split()), tuple(after.split())}
    end = doc.index("h7") + len("h7") + 10 + 200  # the cut ends 200 characters past the last word of `after`
    assert pieces == excluded_pieces(doc, grams) == ["a" * 251, doc[end:]] and len(doc) - end > 200
    assert "".join(removed) == doc[251:end]


def reference_documents(docs: list[str], grams: set[tuple[str, ...]]) -> tuple[list[str], int, int]:
    """(the training documents a build with --exclude streams: each matched document's reference pieces, the others
    whole; documents matched; documents dropped)."""
    expected, matched, dropped = [], 0, 0
    for doc in docs:
        hit = has_match(doc, grams)
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


@pytest.mark.parametrize("fewest", [8, 11])
def test_a_build_with_exclude_is_the_build_of_the_pieces(tmp_path, corpus, tiny_tokenizer_path, fewest):
    """The training windows are those of the reference's pieces, each a document; the manifest counts them; the
    short evaluation passages are matched whole down to --exclude-min-words."""
    path, evaluation, docs, passages = corpus
    grams = evaluation_grams(passages, fewest)
    expected, matched, dropped = reference_documents(docs, grams)
    assert 10 < matched < len(docs) and dropped > 3 and len(expected) > len(docs) - dropped  # every case arises
    assert reference_documents(docs, evaluation_grams(passages, 13))[1] < matched  # the short ones act
    options = {} if fewest == 8 else {"exclude_min_words": fewest}  # 8 is the default
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, validation_fraction=0.0, dedup="off",
                       exclude=(str(evaluation),), workers=2, shard_bytes=6000, rows_per_file=40, **options)
    assert_training_windows_of(built, expected, tiny_tokenizer_path)
    stats = json.loads((built / "manifest.json").read_text())["corpus"]["stats"]["exclusion"]
    first = next(doc.split() for doc in docs if has_match(doc, grams))
    start, size = min(runs(first, grams))
    short, ignored = sum(fewest <= n < 13 for n in SHORT), sum(n < fewest for n in SHORT)
    assert stats == {"files": [str(evaluation)], "documents": len(passages), "ngrams": len(grams), "ngram": 13,
                     "min_words": fewest, "documents_short": short, "documents_ignored": ignored,
                     "margin": 200, "documents_matched": matched, "documents_dropped": dropped,
                     "pieces": len(expected) - (len(docs) - matched),
                     "characters_removed": sum(map(len, docs)) - sum(map(len, expected)),
                     "example": " ".join(first[start : start + size])}
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary

    assert (f"excluded: {len(passages)} evaluation documents ({len(grams):,} distinct n-grams: of 13 words, and "
            f"{short} text{'s' * (short != 1)} of {fewest} to 12 words whole; {ignored} text{'s' * (ignored != 1)} "
            f"under {fewest} words ignored) matched "
            f"{matched} documents") in build_summary(built, read_manifest(built))


def test_an_edited_evaluation_set_is_another_build(tmp_path, corpus, tiny_tokenizer_path):
    """The manifest records the evaluation set's size and sha256; the same build again is up to date; once the set
    is edited (to the same size), the build is refused as made differently until --force rebuilds it, and then the
    new text is what is cut out."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig
    from mlmprep.errors import CacheError

    path, _, docs, passages = corpus
    first, second = passages[:6], passages[6:12]  # of 20 words or more: 13-grams

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
        assert_training_windows_of(tmp_path / "b", reference_documents(docs, evaluation_grams(excluded))[0],
                                   tiny_tokenizer_path)


def test_keep_dropped_holds_what_exclude_cut_from_each_matched_document(tmp_path, corpus, tiny_tokenizer_path):
    """--keep-dropped: one `exclude` row per matched document (its number in the corpus), whose text is that
    document's characters less the reference's pieces; verify accepts the split."""
    from collections import Counter

    from mlmprep.builder.dropped import split_rows

    path, evaluation, docs, passages = corpus
    grams = evaluation_grams(passages)
    built = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, validation_fraction=0.0, dedup="off",
                       exclude=(str(evaluation),), keep_dropped=True, workers=2, shard_bytes=6000)
    rows = [r for r in split_rows(built) if r[1] == "exclude"]
    matched = [k for k, doc in enumerate(docs) if has_match(doc, grams)]
    assert [r[0] for r in rows] == matched
    for number, _, text in rows:
        kept = "".join(excluded_pieces(docs[number], grams))
        assert Counter(text.replace("\n", "")) == Counter(docs[number]) - Counter(kept), number
    verified = run_cli("verify", built)
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("name, content, more, message", [
    ("missing.txt", None, [], "--exclude: {path}: no such file or directory"),
    ("empty.txt", "\n\n", [], "--exclude {path}: no text to exclude"),
    ("short.txt", "seven words make a short question here\n", [],
     "--exclude {path}: no text to exclude (read 1 documents, 1 of fewer than --exclude-min-words 8 words)"),
    ("short.txt", "eight words make a short question right here\n", ["--exclude-min-words", "9"],
     "--exclude {path}: no text to exclude (read 1 documents, 1 of fewer than --exclude-min-words 9 words)"),
    ("eval.txt", "text\n", ["--exclude-min-words", "14"], "--exclude-min-words must be at most 13, got 14"),
    ("broken.parquet", "not parquet", [], "--exclude: {path}: not a readable Parquet file"),
])
def test_a_bad_evaluation_set_is_one_line_and_exit_2(tmp_path, tiny_corpus, tiny_tokenizer_path, name, content,
                                                       more, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content, encoding="utf-8")
    result = run_cli("build", str(tiny_corpus), "--tokenizer", str(tiny_tokenizer_path), "--out",
                     str(tmp_path / "out"), "--exclude", str(path), "--seeds", "1", *more)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: " + message.format(path=path)), result.stderr
    assert not (tmp_path / "out").exists()


def test_exclude_min_words_applies_with_exclude_only():
    from mlmprep.config import BuildConfig
    from mlmprep.errors import ConfigError

    with pytest.raises(ConfigError, match="--exclude-min-words applies to --exclude only"):
        BuildConfig(exclude_min_words=10)


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
