"""Token splitting and text segmentation: exact windows, honest counts, chunking that changes nothing."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlmprep.builder.windows import WindowStats, segment_chars, segment_rows, text_segments
from mlmprep.format.rows import Rows
from mlmprep.tokenizer.encode import WordTables, spaced_alnum, word_tables
from mlmprep.tokenizer.train import train_tokenizer
from tests.reference_windows import token_windows

EOS = 1


def all_word_starts(size: int = 100) -> WordTables:
    """Every token begins a word, so no boundary is ever inside a word."""
    ones = np.ones(size, dtype=bool)
    return WordTables(starts_word=ones, first_alnum=ones, last_alnum=ones)


def run(chunks, length, pack="stream", tables=None):
    stats = WindowStats(method="tokens", row_length=length)
    rows = list(token_windows(chunks, length=length, eos_id=EOS, pack=pack, tables=tables or all_word_starts(),
                              stats=stats))
    return rows, stats


def docs_to_chunk(docs):
    return np.concatenate([np.asarray(d, dtype=np.int32) for d in docs]), np.array([len(d) for d in docs])


def test_stream_windows_match_the_docstring_example():
    rows, stats = run([docs_to_chunk([[5, 6, 7], [8, 9], [10, 11, 12, 13, 14]])], length=4)
    got = np.concatenate([r.values for r in rows]).reshape(-1, 4)
    assert got.tolist() == [[5, 6, 7, 1], [8, 9, 1, 10], [11, 12, 13, 14]]
    assert (stats.rows, stats.tokens_kept, stats.tokens_dropped, stats.tokens_padded) == (3, 12, 1, 0)


def test_stream_windows_do_not_depend_on_chunking():
    rng = np.random.default_rng(0)
    docs = [rng.integers(2, 90, size=rng.integers(1, 40)).tolist() for _ in range(200)]
    whole, _ = run([docs_to_chunk(docs)], length=16)
    pieces, _ = run([docs_to_chunk(docs[i : i + 7]) for i in range(0, len(docs), 7)], length=16)
    assert np.array_equal(np.concatenate([r.values for r in whole]), np.concatenate([r.values for r in pieces]))


def test_doc_pack_starts_each_document_in_a_new_window_and_keeps_tails():
    rows, stats = run([docs_to_chunk([[5, 6, 7, 8, 9], [10], [11, 12]])], length=4)
    assert (stats.rows, stats.tokens_dropped) == (2, 3)  # stream: 5 6 7 8 | 9 1 10 1 | 11 12 1 dropped
    rows, stats = run([docs_to_chunk([[5, 6, 7, 8, 9], [10], [11, 12]])], length=4, pack="doc")
    (r,) = rows
    got = [r.values[r.offsets[i] : r.offsets[i + 1]].tolist() for i in range(len(r))]
    assert got == [[5, 6, 7, 8], [9, 1], [10, 1], [11, 12, 1]]
    assert stats.tokens_kept == 11 and stats.tokens_dropped == 0 and stats.tokens_padded == 16 - 11


def test_doc_pack_drops_and_counts_tails_too_short_to_mask():
    _, stats = run([docs_to_chunk([[5, 6, 7]])], length=4, pack="doc")  # 5 6 7 1: exactly one window
    assert stats.rows == 1 and stats.tokens_dropped == 0
    (r,), stats = run([docs_to_chunk([[5, 6, 7, 8]])], length=4, pack="doc")  # tail is the lone EOS
    assert len(r) == 1 and stats.tokens_dropped == 1


def test_fragment_rate_counts_windows_cut_inside_a_word(tiny_tokenizer):
    tables = word_tables(tiny_tokenizer)
    ids = np.arange(tables.starts_word.size)
    word_initial = ids[tables.starts_word & tables.last_alnum][:20]
    continuation = ids[~tables.starts_word & tables.first_alnum]
    assert len(word_initial) and len(continuation), "the tiny tokenizer has whole words and word pieces"
    _, clean = run([docs_to_chunk([word_initial])], length=2, tables=tables)
    assert clean.rows > 0 and clean.rows_cut_in_word == 0
    # windows of 3 over "word piece word piece ...": every boundary falls between a word and its piece
    doc = [word_initial[0], continuation[0]] * 10
    _, cut = run([docs_to_chunk([doc])], length=3, tables=tables)
    assert cut.rows_cut_in_word > cut.rows // 2


@pytest.mark.parametrize(("char", "spaced"), [("a", True), ("é", True), ("9", True), ("한", True), ("ж", True),
                                             ("中", False), ("あ", False), ("ア", False), ("ｱ", False), ("ก", False),
                                             ("ក", False), ("မ", False), ("，", False), (" ", False)])
def test_only_letters_and_digits_of_scripts_with_spaces_between_words_can_be_cut(char, spaced):
    assert spaced_alnum(char) is spaced


def test_a_han_corpus_counts_no_row_cut_inside_a_word_and_the_same_text_in_english_many(corpora, tmp_path):
    """Han text has no spaces between words, so no boundary between two of its tokens shows a word cut: the
    fragment rate of a CJK corpus (the benchmark's cipher of kjv.txt, digits dropped) is zero, while
    the English it was made from, cut into the same windows, has many rows cut inside a word."""
    from benchmarks.tokenizer import HANZI_LIST, cjk_corpus

    if not HANZI_LIST.is_file():
        pytest.skip(f"{HANZI_LIST} (glibc's locale sources) is not present")
    english = [re.sub(r"\d+", "", line).strip() for line in (corpora / "kjv.txt").read_text().split("\n")[:1000]]
    (tmp_path / "en.txt").write_text("\n".join(english), encoding="utf-8")
    han = cjk_corpus(tmp_path / "en.txt", tmp_path / "cjk.txt").read_text(encoding="utf-8").split("\n")
    assert sum(map(len, han)) > 20_000 and not re.search(r"[A-Za-z0-9]", "".join(han))
    rates = {}
    for name, lines in (("english", english), ("han", han)):
        tok = train_tokenizer(lines, vocab_size=3000)
        docs = [e.ids for e in tok.encode_batch([line for line in lines if line.strip()])]
        _, stats = run([docs_to_chunk(docs)], length=16, tables=word_tables(tok))
        rates[name] = stats.rows_cut_in_word / stats.rows
    assert rates["han"] == 0 and rates["english"] > 0.1, rates


def test_text_segments_cut_every_n_characters_and_flag_cut_words():
    segments = list(text_segments(["hello world", "foo bar baz"], chars=5))
    assert [s for s, _ in segments] == ["hello", " worl", "d foo", " bar ", "baz"]
    assert [c for _, c in segments] == [False, True, False, False, False]
    assert segment_chars(512) == 2040


class CountingStr(str):
    """A str that counts the characters its slices copy (and whose slices count too)."""

    copied = 0

    def __getitem__(self, key):
        part = super().__getitem__(key)
        CountingStr.copied += len(part)
        return CountingStr(part)


def test_text_segments_stream_a_long_line_without_quadratic_copies():
    line = "abc " * 250_000  # 1 MB: 490 segments; re-slicing the rest after each would copy ~250 MB
    CountingStr.copied = 0
    segments = list(text_segments([CountingStr(line)], chars=2040))
    assert "".join(s for s, _ in segments) == line and all(len(s) == 2040 for s, _ in segments[:-1])
    assert CountingStr.copied <= 2 * len(line)  # each character copied about once


def test_segment_rows_truncate_with_the_loss_counted_and_keep_short_rows():
    flat = np.arange(2, 2 + 6 + 2 + 1, dtype=np.int32)  # segments of 6, 2 and 1 tokens
    stats = WindowStats(method="text", row_length=4)
    cut_after = np.array([False, True, False])  # the text cut after segment 1 split a word
    rows = segment_rows(flat, np.array([6, 2, 1]), cut_after, False, length=4, tables=all_word_starts(), stats=stats)
    assert [len(rows.values[rows.offsets[i] : rows.offsets[i + 1]]) for i in range(len(rows))] == [4, 2]
    assert stats.tokens_dropped == 2 + 1 and stats.rows_truncated == 1 and stats.tokens_padded == 2
    assert stats.rows_cut_in_word == 1  # row 1 ends inside a word; the dropped 1-token row is not counted


def test_a_truncated_segment_ends_where_it_was_truncated():
    flat = np.arange(2, 2 + 6 + 3, dtype=np.int32)  # segments of 6 and 3 tokens, no text cut inside a word
    no_word_starts = WordTables(np.zeros(20, bool), np.ones(20, bool), np.ones(20, bool))  # every boundary cuts
    stats = WindowStats(method="text", row_length=4)
    segment_rows(flat, np.array([6, 3]), np.array([False, False]), False, length=4, tables=no_word_starts, stats=stats)
    assert stats.rows_cut_in_word == 1  # row 0 stops mid-word at its truncation point; row 1 is whole


def test_rows_take_gathers_fixed_and_ragged_rows():
    fixed = Rows(np.arange(12, dtype=np.int32), np.arange(4, dtype=np.int64) * 4)
    assert fixed.take(np.array([2, 0])).values.tolist() == [8, 9, 10, 11, 0, 1, 2, 3]
    ragged = Rows(np.arange(6, dtype=np.int32), np.array([0, 1, 3, 6]))
    taken = ragged.take(np.array([2, 0]))
    assert taken.values.tolist() == [3, 4, 5, 0] and taken.offsets.tolist() == [0, 3, 4]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.integers(1, 120))
def test_rows_pieces_cover_the_rows_in_order_within_the_limit(lengths, max_tokens):
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    rows = Rows(np.arange(offsets[-1], dtype=np.int32), offsets)
    pieces = list(rows.pieces(max_tokens))
    assert [len(p) for p in pieces if len(p) == 0] == []
    assert sum(len(p) for p in pieces) == len(rows)
    assert np.concatenate([p.values for p in pieces] or [np.zeros(0, np.int32)]).tolist() == rows.values.tolist()
    assert np.concatenate([p.lengths() for p in pieces] or [np.zeros(0, np.int64)]).tolist() == lengths
    for p in pieces:  # within the limit, or a single row longer than it
        assert p.offsets[-1] <= max_tokens or len(p) == 1


def test_text_method_build_equals_plain_segmentation_of_the_joined_text(tmp_path, tiny_tokenizer_path):
    """--method text against plain Python over the tokenizer's output: the documents joined by spaces, cut
    every (input_length - 2) * 4 characters (code points: inside words and multi-byte characters alike),
    each segment's ids truncated to the window; the manifest's counts and the rows cut inside a word (at the
    character cut, or at the truncation) as counted here, and compare's replay of the row edges too."""
    import json

    from tokenizers import Tokenizer

    from mlmprep.compare import text_row_cuts
    from mlmprep.config import BuildConfig
    from mlmprep.format.write import iter_rows
    from tests.conftest import build_tiny, tiny_documents

    docs = tiny_documents(60) + ["café naïve 日本語のテキスト 😀😀 end", "x", "wörds " * 9 + "tail",
                                 "a" + " " * 40 + "b"]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    cfg = dict(input_length=9, seeds=1, validation_fraction=0.0, method="text")
    out = build_tiny(tmp_path / "b", corpus, tiny_tokenizer_path, **cfg)
    manifest = json.loads((out / "manifest.json").read_text())
    width, chars = manifest["window_length"], (9 - 2) * 4
    tok = Tokenizer.from_file(str(tiny_tokenizer_path))
    pieces = {i: p for p, i in tok.get_vocab().items()}

    def continues(left: int, right: int) -> bool:  # the boundary left|right falls inside a word
        a, b = pieces[left].removeprefix("▁"), pieces[right]
        return not b.startswith(("▁", "<")) and bool(a) and a[-1].isalnum() and b[0].isalnum()

    joined, rows, cuts, lost, truncated = " ".join(docs), [], [], 0, 0
    for start in range(0, len(joined), chars):
        segment, stop = joined[start : start + chars], start + chars
        ids = tok.encode(segment, add_special_tokens=False).ids if segment.strip() else []
        truncated += len(ids) > width
        if min(len(ids), width) < 2:
            lost += len(ids)
            continue
        rows.append(ids[:width])
        lost += len(ids) - len(rows[-1])
        begins = start > 0 and joined[start - 1].isalnum() and joined[start].isalnum()
        ends = stop < len(joined) and segment[-1].isalnum() and joined[stop].isalnum()
        cuts.append((begins, continues(ids[width - 1], ids[width]) if len(ids) > width else ends))
    got = [c.values[c.offsets[i] : c.offsets[i + 1]].tolist() for c in iter_rows(out / "windows", "tokens")
           for i in range(len(c))]
    assert got == rows and truncated > 10
    stats = manifest["statistics"]["windows"]
    kept = sum(map(len, rows))
    assert (stats["rows"], stats["tokens_kept"], stats["tokens_dropped"], stats["tokens_padded"],
            stats["rows_truncated"]) == (len(rows), kept, lost, len(rows) * width - kept, truncated)
    assert round(stats["fragment_rate"] * len(rows)) == sum(b or e for b, e in cuts)
    build_cfg = BuildConfig(corpus=(str(corpus),), tokenizer=str(tiny_tokenizer_path), out=str(out), **cfg)
    begins, ends = text_row_cuts(build_cfg, tok, word_tables(tok), width)
    assert list(zip(begins.tolist(), ends.tolist())) == cuts


def test_text_method_refuses_an_input_length_that_leaves_no_characters(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """--input-length 2 is a valid MLM length for a tokenizer without a frame, but (2 - 2) * 4 = 0 characters a
    segment: one error line naming the option, not a ZeroDivisionError, and no build left."""
    from tests.cli.test_build import assert_refused, cli, leftovers

    out = tmp_path / "out"
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tiny_tokenizer_path, "--objective", "mlm",
                 "--method", "text", "--input-length", "2", "--seeds", "1")
    assert_refused(result.exit_code, result.stderr, "--input-length 2", "--method text")
    assert leftovers(out) == []


@pytest.mark.parametrize("pack", ["stream", "doc"])
def test_token_splitting_build_equals_plain_windows_of_the_tokenizer_output(tmp_path, tiny_corpus, tiny_tokenizer_path,
                                                                             pack):
    """Token splitting against plain Python, over several input shards: --pack stream is every document's ids
    and </s> back to back, cut every window length, the short tail dropped; --pack doc (span corruption: no
    </s> of its own) cuts each document alone and drops only tails under two tokens. Counts as counted here."""
    import json

    from tokenizers import Tokenizer

    from mlmprep.format.write import iter_rows
    from tests.conftest import build_tiny

    out = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, input_length=16, seeds=1,
                     validation_fraction=0.0, pack=pack, shard_bytes=4096)
    manifest = json.loads((out / "manifest.json").read_text())
    width, eos = manifest["window_length"], manifest["tokenizer"]["eos_id"]
    tok = Tokenizer.from_file(str(tiny_tokenizer_path))
    docs = [tok.encode(d, add_special_tokens=False).ids for d in tiny_corpus.read_text(encoding="utf-8").splitlines()]
    if pack == "stream":
        stream = [t for ids in docs for t in ids + [eos]]
        pieces = [stream[i : i + width] for i in range(0, len(stream), width)]
    else:
        pieces = [ids[i : i + width] for ids in docs for i in range(0, len(ids), width)]
    rows = [p for p in pieces if len(p) == width or (pack == "doc" and len(p) >= 2)]
    got = [c.values[c.offsets[i] : c.offsets[i + 1]].tolist() for c in iter_rows(out / "windows", "tokens")
           for i in range(len(c))]
    assert got == rows
    kept = sum(map(len, rows))
    stats = manifest["statistics"]["windows"]
    assert (stats["rows"], stats["tokens_kept"], stats["tokens_dropped"], stats["tokens_padded"]) == (
        len(rows), kept, sum(map(len, pieces)) - kept, len(rows) * width - kept)
