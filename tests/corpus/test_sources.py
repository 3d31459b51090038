"""Corpus sources: resolving paths, each file format, decoding policies, counts, fingerprints, datasets."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from mlmprep.corpus.documents import open_corpus
from mlmprep.corpus.sources import resolve_sources
from mlmprep.errors import ConfigError, CorpusError
from tests.cli.test_build import cli


def docs(*paths, **options) -> list[str]:
    return list(open_corpus([str(p) for p in paths], **options).documents())


def write(path, data: bytes | str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# ---------------------------------------------------------------------------------------------------- .txt


def test_txt_one_document_per_line_skipping_and_counting_blanks(tmp_path):
    path = write(tmp_path / "a.txt", "\ufefffirst line\r\n\nsecond line\n   \nthird line")  # BOM, CRLF, no final LF
    corpus = open_corpus([str(path)])
    assert list(corpus.documents()) == ["first line", "second line", "third line"]
    s = corpus.stats
    assert (s.files, s.documents, s.blank_skipped, s.characters) == (1, 3, 2, 31)


def reference_lines(data: bytes, policy: str) -> list[tuple[int, str]]:
    """(byte offset, text) of every line, the plain way: cut at each b"\\n", drop one b"\\r" before it, decode
    each line alone (replaced or left out when undecodable), drop a BOM that starts the file."""
    out, offset = [], 0
    *ended, last = data.split(b"\n")
    for i, raw in enumerate(ended + ([last] if last else [])):
        line = raw.removesuffix(b"\r") if i < len(ended) else raw
        line = line.removeprefix(b"\xef\xbb\xbf") if offset == 0 else line
        try:
            out.append((offset, line.decode("utf-8")))
        except UnicodeDecodeError:
            if policy == "replace":
                out.append((offset, line.decode("utf-8", "replace")))
        offset += len(raw) + 1
    return out


@pytest.mark.parametrize("read_bytes", [1, 5, 64, 1 << 20])
def test_text_lines_read_in_blocks_equal_reading_line_by_line(tmp_path, monkeypatch, read_bytes):
    """Blocks of any size, cut anywhere (inside a line, a CRLF, a multi-byte character), give the lines a plain
    line-by-line reader gives, from the whole file and from any byte range (the lines that start in it)."""
    from mlmprep.corpus.files import CorpusStats, ReadOptions
    from mlmprep.corpus.text import line_boundary, read_txt

    monkeypatch.setattr("mlmprep.corpus.text.READ_BYTES", read_bytes)
    rng = random.Random(read_bytes)
    parts = ["word", " ", "é", "😀", "\r", "\x1f", "\u2028", "x" * 300]
    for trial in range(12):
        lines = ["".join(rng.choices(parts, k=rng.randrange(0, 8))).encode() for _ in range(rng.randrange(1, 40))]
        lines = [line + b"\xff" if rng.random() < 0.1 else line for line in lines]  # an undecodable line now and then
        data = b"".join(line + rng.choice([b"\n", b"\r\n"]) for line in lines)
        data = (b"\xef\xbb\xbf" if trial % 2 else b"") + (data if trial % 3 else data.rstrip(b"\r\n"))
        path = write(tmp_path / f"t{trial}.txt", data)
        for policy in ("replace", "skip"):
            expected = reference_lines(data, policy)
            stats = CorpusStats()
            got = list(read_txt(path, stats, ReadOptions(on_decode_error=policy)))
            assert got == [text for _, text in expected]
            bad = sum(1 for line in lines if line.endswith(b"\xff"))
            assert stats.decode_errors == bad
            start, end = sorted(rng.sample(range(len(data) + 1), 2))
            start = line_boundary(path, start)  # a range starts at a line start; it may end anywhere
            got = list(read_txt(path, CorpusStats(), ReadOptions(on_decode_error=policy), start, end))
            assert got == [text for offset, text in expected if start <= offset < end]


def test_txt_paragraphs_with_blank_line_separator(tmp_path):
    path = write(tmp_path / "a.txt", "\n\npara one\nstill one\n\n \t\npara two\n\n\n")
    assert docs(path, doc_sep="blank") == ["para one\nstill one", "para two"]


def test_documents_is_reiterable_and_stats_count_one_pass(tmp_path):
    path = write(tmp_path / "a.txt", "a\n\nb\n")
    corpus = open_corpus([str(path)])
    assert list(corpus.documents()) == list(corpus.documents()) == ["a", "b"]
    assert (corpus.stats.documents, corpus.stats.blank_skipped) == (2, 1)


def test_documents_stream_before_a_bad_record_is_reached(tmp_path):
    path = write(tmp_path / "a.jsonl", '{"text": "one"}\n{"text": "two"}\n{"text": broken\n')
    stream = open_corpus([str(path)]).documents()
    assert [next(stream), next(stream)] == ["one", "two"]
    with pytest.raises(CorpusError, match=r"a\.jsonl line 3 \(byte \d+\): not valid JSON"):
        next(stream)


BAD_UTF8 = b"good line\nbad \xff\xfe line\nlast line\n"


def test_decode_error_replace(tmp_path):
    corpus = open_corpus([str(write(tmp_path / "a.txt", BAD_UTF8))], on_decode_error="replace")
    assert list(corpus.documents()) == ["good line", "bad \ufffd\ufffd line", "last line"]
    s = corpus.stats
    assert (s.decode_errors, s.decode_replaced_lines, s.decode_skipped_lines) == (1, 1, 0)


def test_decode_error_skip(tmp_path):
    corpus = open_corpus([str(write(tmp_path / "a.txt", BAD_UTF8))], on_decode_error="skip")
    assert list(corpus.documents()) == ["good line", "last line"]
    s = corpus.stats
    assert (s.decode_errors, s.decode_replaced_lines, s.decode_skipped_lines) == (1, 0, 1)


def test_decode_error_fail_names_file_line_and_fix(tmp_path):
    path = write(tmp_path / "a.txt", BAD_UTF8)
    bad = BAD_UTF8.index(b"\xff")  # the bad byte, not its line's start (10)
    with pytest.raises(CorpusError,
                       match=rf"a\.txt line 2 \(byte {bad}\): invalid UTF-8; use --on-decode-error replace\|skip"):
        docs(path, on_decode_error="fail")


@pytest.mark.parametrize("compressed", [False, True])
def test_decode_error_names_the_bad_byte_far_into_the_file(tmp_path, compressed):
    """Past the first block read, and in a compressed file's text, the offset is the bad byte's own."""
    data = b"x" * 100 + b"\n" + b"plain line\n" * 150_000 + b"ok \xc3\x28 broken\n" + b"tail\n"
    bad = data.index(b"\xc3\x28")
    name = "big.txt.gz" if compressed else "big.txt"
    (tmp_path / name).write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(CorpusError, match=rf"{re.escape(name)} line 150002 \(byte {bad}\): invalid UTF-8"):
        docs(tmp_path / name, on_decode_error="fail")


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(0).randbytes(20_000),  # an image
        "plain English text in UTF-16\n".encode("utf-16") * 50,
        ("中文" * 2000).encode("utf-16"),  # no NUL byte (no line break, no ASCII), but a UTF-16 byte-order mark
    ],
    ids=["png", "utf-16", "utf-16-cjk"],
)
def test_binary_file_is_refused_by_name(tmp_path, data):
    path = write(tmp_path / "binary.txt", data)
    with pytest.raises(CorpusError, match=r"binary\.txt: (binary or )?UTF-16 data \(.+\); convert it to UTF-8"):
        docs(path)


@pytest.mark.parametrize("encode", [lambda t: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40,
                                    lambda t: t.encode("utf-16")], ids=["binary", "utf-16"])
def test_a_csv_file_of_binary_or_utf16_data_is_refused_as_a_text_file_is(tmp_path, encode):
    """Not parsed: the CSV parser's message would quote the bytes of a garbled row."""
    path = write(tmp_path / "t.csv", encode("id,text\n" + "".join(f"{i},line {i}\n" for i in range(500))))
    with pytest.raises(CorpusError, match=r"t\.csv: (binary or )?UTF-16 data \(.+\); convert it to UTF-8"):
        docs(path)


def test_stray_nul_bytes_in_text_are_kept_for_the_clean_stage(tmp_path):
    path = write(tmp_path / "a.txt", "text with a \x00 NUL\n" + "an ordinary line of text\n" * 10)
    assert docs(path) == ["text with a \x00 NUL"] + ["an ordinary line of text"] * 10


def test_a_50_mb_line_streams_whole(tmp_path):
    """Read whole and exact; its speed (about 0.3 s, where a quadratic reader takes hours) is timed in
    benchmarks/hostile.py, not here."""
    path = write(tmp_path / "long.txt", b"word " * 10_000_000 + b"\nshort\n")
    assert [len(d) for d in docs(path)] == [50_000_000, 5]


# ---------------------------------------------------------------------------------------------------- JSON


def test_jsonl_text_field_nulls_blanks_and_text_column(tmp_path):
    lines = ['{"text": "one", "id": 1}', "", '{"text": null}', '{"text": "  "}', '{"text": "two"}']
    corpus = open_corpus([str(write(tmp_path / "a.jsonl", "\n".join(lines)))])
    assert list(corpus.documents()) == ["one", "two"]
    assert (corpus.stats.null_skipped, corpus.stats.blank_skipped) == (1, 1)
    path = write(tmp_path / "b.jsonl", '{"body": "x", "text": 5}\n')
    assert docs(path, text_column="body") == ["x"]


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"text": "ok"}\n{"text": 5}\n', r"b\.jsonl line 2 \(byte \d+\): field 'text' holds int, not text"),
        ('{"text": "ok"}\n\n{"text": "no end"\n', r"b\.jsonl line 3 \(byte \d+\): not valid JSON"),
        ('["text", "in", "a", "list"]\n',
         r"b\.jsonl line 1 \(byte \d+\): expected a JSON object with a 'text' field, got list"),
        ('{"text": "ok"}\n{"text": "x", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
         r"b\.jsonl line 2 \(byte 15\): JSON nested too deeply to parse; remove or fix that record"),
        ('{"text": "ok"}\n{"text": "x", "id": ' + "9" * 5000 + "}\n",
         r"b\.jsonl line 2 \(byte 15\): cannot parse its JSON \(Exceeds the limit \(4300 digits\) for integer string "
         r"conversion\); remove or fix that record"),
    ],
    ids=["int-text", "unterminated", "not-an-object", "nested-too-deep", "integer-too-long"],
)
def test_jsonl_errors_name_file_and_line(tmp_path, content, message):
    with pytest.raises(CorpusError, match=message):
        docs(write(tmp_path / "b.jsonl", content))


def test_a_byte_order_mark_starting_a_json_line_is_dropped(tmp_path):
    """Concatenated JSON lines files (`cat a.jsonl b.jsonl`) keep each file's BOM; in a .txt file cleaning
    drops it, and a JSON line reads as without it."""
    path = write(tmp_path / "cat.jsonl", '\ufeff{"text": "one"}\n{"text": "two"}\n\ufeff{"text": "three"}\n\ufeff\n')
    assert docs(path) == ["one", "two", "three"]


def test_json_file_as_lines_or_as_one_array(tmp_path):
    lines = write(tmp_path / "lines.json", '{"text": "a"}\n{"text": "b"}\n')
    array = write(tmp_path / "array.json", '\ufeff [\n {"text": "c"},\n {"text": null},\n {"text": "d"}\n]\n')
    assert docs(lines, array) == ["a", "b", "c", "d"]
    with pytest.raises(CorpusError, match=r"bad\.json line 2: not valid JSON"):
        docs(write(tmp_path / "bad.json", '[{"text": "c"},\n oops]'))
    with pytest.raises(CorpusError, match=r"deep\.json: JSON nested too deeply to parse; remove or fix that record"):
        docs(write(tmp_path / "deep.json", '[{"text": "c"},\n' + "[" * 100_000 + "]" * 100_000 + "]"))
    corpus = open_corpus([str(write(tmp_path / "recs.json", '[{"text": "c"}, {"txt": "d"}, {"body": "e"}]'))])
    assert list(corpus.documents()) == ["c"] and corpus.stats.missing_field_skipped == 2  # skipped, counted


def test_a_json_document_s_errors_name_the_file_s_line_when_lines_are_skipped(tmp_path):
    """--on-decode-error skip leaves a line of a JSON document out of the records, not out of the line count."""
    path = write(tmp_path / "skip.json", b'[\n {"text": "a"},\n {"text": "caf\xe9"},\n {"text": "b"},\n oops\n]\n')
    for policy in ("replace", "skip"):
        with pytest.raises(CorpusError, match=r"skip\.json line 5: not valid JSON"):
            docs(path, on_decode_error=policy)
    fixed = write(tmp_path / "fixed.json", path.read_bytes().replace(b",\n oops", b""))
    assert docs(fixed, on_decode_error="skip") == ["a", "b"]


def test_json_file_holding_one_object_over_several_lines(tmp_path):
    from mlmprep.corpus.files import CorpusStats, ReadOptions
    from mlmprep.corpus.shards import file_shards, read_shard

    pretty = write(tmp_path / "one.json", '\ufeff\n{\n  "text": "hello",\n  "id": 1\n}\n')
    assert docs(pretty) == ["hello"]
    shards = file_shards([(pretty, pretty.stat().st_size)], 4)  # one document: one shard, however small shards are
    assert [d for s in shards for d in read_shard(s, ReadOptions(), CorpusStats())] == ["hello"]
    with pytest.raises(CorpusError, match=r"bad\.json line 3: not valid JSON"):
        docs(write(tmp_path / "bad.json", '{\n  "text": "hello",\n  oops\n}\n'))
    with pytest.raises(CorpusError, match=r"lines\.json line 1 \(byte 0\): not valid JSON"):  # a bad JSON line
        docs(write(tmp_path / "lines.json", '{"text": oops}\n{"text": "b"}\n'))


def test_json_errors_name_the_column_once(tmp_path, tok):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "fine"}\n{"text": "unterminated\n', encoding="utf-8")
    result = cli("build", corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--input-length", "32")
    assert result.exit_code == 2
    assert "starting at column" in result.stderr and "at at" not in result.stderr


# ---------------------------------------------------------------------------------------------------- columnar


TABLE = pa.table({"id": [1, 2, 3, 4], "text": ["alpha", None, "", "delta\nsecond line"]})


def write_arrow_file(path, table, *, stream: bool):
    with pa.OSFile(str(path), "wb") as sink:
        opener = pa.ipc.new_stream if stream else pa.ipc.new_file
        with opener(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=2):
                writer.write_batch(batch)
    return path


@pytest.mark.parametrize("fmt", ["parquet", "csv", "arrow-file", "arrow-stream"])
def test_columnar_formats_read_the_text_column(tmp_path, fmt):
    if fmt == "parquet":
        path = tmp_path / "t.parquet"
        pq.write_table(TABLE, path, row_group_size=2)
    elif fmt == "csv":
        path = tmp_path / "t.csv"
        pacsv.write_csv(TABLE, path)  # quotes the multi-line value
    else:
        path = write_arrow_file(tmp_path / "t.arrow", TABLE, stream=fmt == "arrow-stream")
    corpus = open_corpus([str(path)])
    assert list(corpus.documents()) == ["alpha", "delta\nsecond line"]
    if fmt != "csv":  # CSV has no nulls: an empty field is an empty string
        assert (corpus.stats.null_skipped, corpus.stats.blank_skipped) == (1, 1)


@pytest.mark.parametrize("suffix", ["parquet", "csv", "arrow"])
def test_columnar_missing_column_lists_the_columns(tmp_path, suffix):
    table = pa.table({"body": ["x"], "lang": ["en"]})
    path = tmp_path / f"t.{suffix}"
    {"parquet": lambda: pq.write_table(table, path), "csv": lambda: pacsv.write_csv(table, path),
     "arrow": lambda: write_arrow_file(path, table, stream=False)}[suffix]()
    message = rf"t\.{suffix}: no column 'text'; pass --text-column NAME \(columns here: body, lang\)"
    with pytest.raises(CorpusError, match=message):
        docs(path)
    assert docs(path, text_column="body") == ["x"]


def test_columnar_non_text_column_is_refused(tmp_path):
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "t.parquet")
    with pytest.raises(CorpusError, match=r"t\.parquet: column 'text' holds int64, not text"):
        docs(tmp_path / "t.parquet")


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_a_text_column_named_twice_is_refused_naming_the_file(tmp_path, suffix):
    table = pa.Table.from_arrays([pa.array(["a b"]), pa.array(["c d"])], names=["text", "text"])
    path = tmp_path / f"t.{suffix}"
    pq.write_table(table, path) if suffix == "parquet" else write_arrow_file(path, table, stream=False)
    with pytest.raises(CorpusError, match=rf"t\.{suffix}: 2 columns are named 'text'; rename one"):
        docs(path)


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_a_text_column_of_null_type_is_read_as_nulls(tmp_path, suffix):
    """A writer gives a column with no value but nulls the null type (pandas does): its rows are nulls,
    skipped and counted like the null values of a string column, not a column that holds no text."""
    table = pa.table({"text": pa.array([None, None], pa.null())})
    path = tmp_path / f"nulls.{suffix}"
    pq.write_table(table, path) if suffix == "parquet" else write_arrow_file(path, table, stream=False)
    corpus = open_corpus([str(path), str(write(tmp_path / "a.txt", "one\n"))])
    assert list(corpus.documents()) == ["one"] and corpus.stats.null_skipped == 2


def test_csv_values_follow_the_decode_policy(tmp_path):
    path = write(tmp_path / "t.csv", b'id,text\n1,fine\n2,"bad \xff"\n3,also fine\n')
    assert docs(path) == ["fine", "bad \ufffd", "also fine"]
    skipped = open_corpus([str(path)], on_decode_error="skip")
    assert list(skipped.documents()) == ["fine", "also fine"]
    assert (skipped.stats.decode_skipped_lines, skipped.stats.null_skipped) == (1, 0)  # not counted as a null too
    with pytest.raises(CorpusError, match=r"t\.csv row 2: invalid UTF-8"):
        docs(path, on_decode_error="fail")


def write_bad_string_column(path):
    """A string column whose third value is not UTF-8 (Arrow writers do not check), as .parquet or .arrow,
    in parts of two rows: the bad value is in the second part."""
    text = pa.array([b"fine", None, b"bad \xff", b"also fine"], pa.binary()).view(pa.string())
    table = pa.table({"text": text})
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=2)
        return path
    return write_arrow_file(path, table, stream=False)


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
@pytest.mark.parametrize(
    "policy, expected, counts",
    [("replace", ["fine", "bad \ufffd", "also fine"], (1, 1, 0)), ("skip", ["fine", "also fine"], (1, 0, 1))],
)
def test_invalid_utf8_in_a_string_column_follows_the_decode_policy(tmp_path, suffix, policy, expected, counts):
    corpus = open_corpus([str(write_bad_string_column(tmp_path / f"t.{suffix}"))], on_decode_error=policy)
    assert list(corpus.documents()) == expected
    s = corpus.stats
    assert (s.decode_errors, s.decode_replaced_lines, s.decode_skipped_lines) == counts and s.null_skipped == 1


@pytest.mark.parametrize("suffix", ["parquet", "arrow"])
def test_invalid_utf8_in_a_string_column_fails_naming_file_and_row(tmp_path, suffix):
    path = write_bad_string_column(tmp_path / f"t.{suffix}")
    with pytest.raises(CorpusError, match=rf"t\.{suffix} row 3: invalid UTF-8; use --on-decode-error replace\|skip"):
        docs(path, on_decode_error="fail")


def test_damaged_columnar_files_raise_corpus_errors(tmp_path):
    pq.write_table(TABLE, tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    with pytest.raises(CorpusError, match=r"cut\.parquet: not a readable Parquet file"):
        docs(write(tmp_path / "cut.parquet", data[: len(data) // 2]))
    with pytest.raises(CorpusError, match=r"junk\.arrow: not an Arrow IPC file or stream"):
        docs(write(tmp_path / "junk.arrow", b"not arrow at all" * 10))


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_an_arrow_file_with_damaged_offsets_is_a_corpus_error(tmp_path, stream):
    """Arrow files are memory-mapped and read without checks: damaged offsets (here decreasing, as a flipped
    bit leaves them) made the conversion to Python fail with a SystemError or crash the process."""
    import numpy as np

    offsets = pa.py_buffer(np.array([0, 5, 3, 15], dtype=np.int32).tobytes())
    damaged = pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"helloworldagain"))  # not validated
    path = write_arrow_file(tmp_path / "damaged.arrow", pa.table({"text": damaged}), stream=stream)
    with pytest.raises(CorpusError, match=r"damaged\.arrow after row 0: cannot read \(.*offset"):
        docs(path)


# ---------------------------------------------------------------------------------------------------- sources


def make_tree(root):
    write(root / "b.txt", "b\n")
    write(root / "a.txt", "a\n")
    write(root / "sub" / "c.jsonl", '{"text": "c"}\n')
    write(root / "sub" / "notes.md", "not a corpus file\n")
    write(root / ".git" / "objects" / "x.txt", "hidden\n")
    return root


def test_directory_is_searched_recursively_in_sorted_order(tmp_path):
    root = make_tree(tmp_path / "corpus")
    assert resolve_sources([str(root)]) == [root / "a.txt", root / "b.txt", root / "sub" / "c.jsonl"]
    corpus = open_corpus([str(root)])
    assert list(corpus.documents()) == ["a", "b", "c"]
    assert corpus.stats.files == 3
    assert sorted(corpus.stats.files_skipped) == [f"{root / '.git'}/", str(root / "sub" / "notes.md")]


def test_hidden_files_in_a_directory_are_skipped_as_a_glob_skips_them(tmp_path):
    """macOS leaves `._NAME` files (binary resource forks) beside every file it copies to other disks."""
    import glob

    root = make_tree(tmp_path / "corpus")
    write(root / "._a.txt", b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X" + bytes(200))
    write(root / "sub" / ".notes.txt", "hidden\n")
    assert resolve_sources([str(root)]) == [root / "a.txt", root / "b.txt", root / "sub" / "c.jsonl"]
    assert resolve_sources([str(root / "*.txt")]) == [root / "a.txt", root / "b.txt"]
    assert sorted(glob.glob(str(root / "*.txt"))) == [str(root / "a.txt"), str(root / "b.txt")]  # glob's own rule
    corpus = open_corpus([str(root)])
    assert list(corpus.documents()) == ["a", "b", "c"]
    assert {str(root / "._a.txt"), str(root / "sub" / ".notes.txt")} <= set(corpus.stats.files_skipped)
    assert docs(root / "sub" / ".notes.txt") == ["hidden"]  # named, it is read


def test_globs_and_duplicates(tmp_path):
    root = make_tree(tmp_path / "corpus")
    assert resolve_sources([str(root / "*.txt")]) == [root / "a.txt", root / "b.txt"]
    assert resolve_sources([str(root / "**" / "*.jsonl")]) == [root / "sub" / "c.jsonl"]
    named_twice = resolve_sources([str(root / "b.txt"), str(root)])
    assert named_twice == [root / "b.txt", root / "a.txt", root / "sub" / "c.jsonl"]


def test_bad_sources_name_the_path_and_the_fix(tmp_path):
    (tmp_path / "link.txt").symlink_to(tmp_path / "gone.txt")
    write(tmp_path / "data.xml", "<x/>")
    (tmp_path / "empty").mkdir()
    os.mkfifo(tmp_path / "pipe.txt")  # reading it would wait for a writer forever
    cases = {
        str(tmp_path / "pipe.txt"): r"pipe\.txt: not a regular file \(a pipe or a device\); save the corpus to a file",
        str(tmp_path / "missing.txt"): r"missing\.txt: no such file or directory",
        str(tmp_path / "link.txt"): r"link\.txt: broken symbolic link",
        str(tmp_path / "*.nothing"): r"\*\.nothing: the glob matches nothing",
        str(tmp_path / "data.xml"): r"data\.xml: unsupported file type \.xml; use one of \.txt, \.jsonl",
        str(tmp_path / "empty"): r"empty: no corpus files",
    }
    for source, message in cases.items():
        with pytest.raises(CorpusError, match=message):
            resolve_sources([source])


def test_a_directory_of_only_other_files_names_what_it_skipped(tmp_path):
    """A directory of compressed archives reads as no corpus at all: the message says which files were there."""
    for name in ("b.tar.gz", "a.tar.gz", "c.zip", "d.parquet.gz"):
        write(tmp_path / "data" / name, gzip.compress(b'{"text": "x"}\n'))
    folder = tmp_path / "data"
    message = (f"{folder}: no corpus files (.txt, .jsonl, .json, .parquet, .csv, .arrow; .txt/.jsonl/.json/.csv also "
               f"as .gz/.bz2/.xz/.zst) found; 4 other files skipped ({folder / 'a.tar.gz'}, {folder / 'b.tar.gz'}, "
               f"{folder / 'c.zip'}, ...): convert them")
    with pytest.raises(CorpusError, match=re.escape(message)):
        resolve_sources([str(folder)])


def test_empty_corpus_is_left_for_the_caller_to_report(tmp_path):
    corpus = open_corpus([str(write(tmp_path / "blank.txt", "\n  \n\t\n"))])
    assert list(corpus.documents()) == []
    assert (corpus.stats.documents, corpus.stats.blank_skipped) == (0, 3)


def test_a_single_path_need_not_be_in_a_list(tmp_path):
    path = write(tmp_path / "a.txt", "a\n")
    assert list(open_corpus(path).documents()) == list(open_corpus(str(path)).documents()) == ["a"]


def test_bad_options_are_config_errors(tmp_path):
    path = str(write(tmp_path / "a.txt", "a\n"))
    with pytest.raises(ConfigError, match="--doc-sep must be one of line, blank"):
        open_corpus([path], doc_sep="para")
    with pytest.raises(ConfigError, match="--on-decode-error must be one of replace, skip, fail"):
        open_corpus([path], on_decode_error="ignore")
    with pytest.raises(ConfigError, match="not both"):
        open_corpus([path], dataset="x")


def test_a_reading_option_no_source_uses_is_refused(tmp_path, local_datasets):
    """--text-column names a field of records, --doc-sep splits .txt files: set for a corpus with neither, the
    build would differ in name only (as with the options config.APPLIES_WITH lists)."""
    txt, jsonl = write(tmp_path / "a.txt", "a\n"), write(tmp_path / "b.jsonl", '{"body": "b"}\n')
    with pytest.raises(ConfigError, match=r"--text-column applies to \.jsonl, \.json, \.parquet, \.csv and \.arrow "
                                          r"files and --dataset; the corpus has none: leave it out"):
        open_corpus([str(txt)], text_column="body")
    with pytest.raises(ConfigError, match=r"--doc-sep applies to \.txt files; the corpus has none: leave it out"):
        open_corpus([str(jsonl)], doc_sep="blank")
    with pytest.raises(ConfigError, match=r"--doc-sep applies to \.txt files; the corpus has none"):
        open_corpus(dataset=str(local_datasets / "saved"), doc_sep="blank")
    with pytest.raises(ConfigError, match=r"--text-column applies to"):
        open_corpus(text_column="body")  # the built-in sample
    assert docs(txt, jsonl, text_column="body", doc_sep="blank") == ["a", "b"]  # each applies to a file


# ---------------------------------------------------------------------------------------------------- fingerprint


def test_fingerprint_follows_content_and_order_not_names(tmp_path):
    a = write(tmp_path / "one" / "a.txt", "alpha\n")
    b = write(tmp_path / "one" / "b.txt", "beta\n")
    a2 = write(tmp_path / "two" / "renamed.txt", "alpha\n")
    b2 = write(tmp_path / "two" / "other.txt", "beta\n")
    fp = open_corpus([str(a), str(b)]).fingerprint
    assert open_corpus([str(a2), str(b2)]).fingerprint == fp
    assert open_corpus([str(b), str(a)]).fingerprint != fp
    b2.write_text("betA\n")
    assert open_corpus([str(a2), str(b2)]).fingerprint != fp


def test_files_list_sizes_and_hashes(tmp_path):
    path = write(tmp_path / "a.txt", "some text\n" * 1000)
    corpus = open_corpus([str(path)])
    data = path.read_bytes()
    assert corpus.files == [{"path": str(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}]
    assert corpus.description == "1 file, 0.0 MB"


def test_real_corpus_line_count(corpora):
    path = corpora / "kjv.txt"
    corpus = open_corpus([str(path)])
    n = sum(1 for _ in corpus.documents())
    lines = path.read_text(encoding="utf-8").splitlines()
    assert n == corpus.stats.documents == sum(1 for line in lines if line.strip())
    assert corpus.stats.blank_skipped == len(lines) - n


# ---------------------------------------------------------------------------------------------------- sample, dataset


def test_no_sources_means_the_builtin_sample():
    corpus = open_corpus()
    first = next(corpus.documents())
    assert corpus.description.startswith("built-in sample: Python ") and first.strip()


@pytest.fixture()
def local_datasets(tmp_path, monkeypatch):
    """A save_to_disk directory and a plain data directory; the datasets cache redirected to tmp_path."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    rows = {"text": ["first document", "", "second document"], "n": [1, 2, 3]}
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(rows)}).save_to_disk(str(tmp_path / "saved"))
    write(tmp_path / "plain" / "train.jsonl", "".join(json.dumps({"body": t}) + "\n" for t in ["x", "y", "z"]))
    return tmp_path


def test_dataset_from_save_to_disk_directory(local_datasets):
    spec = str(local_datasets / "saved")
    corpus = open_corpus(dataset=spec)
    assert list(corpus.documents()) == ["first document", "second document"]
    assert corpus.stats.blank_skipped == 1 and corpus.description == f"dataset {spec} [train], 3 rows"
    assert open_corpus(dataset=spec).fingerprint == corpus.fingerprint
    with pytest.raises(CorpusError, match=r"no split 'test'; pass --dataset-split train"):
        open_corpus(dataset=spec, dataset_split="test")
    with pytest.raises(CorpusError, match=r"no column 'body'; pass --text-column NAME \(columns here: text, n\)"):
        list(open_corpus(dataset=spec, text_column="body").documents())


@pytest.mark.parametrize("given, named", [("saved", "saved"), ("saved/train", "saved/train"), (".", "saved")])
def test_a_save_to_disk_directory_as_a_corpus_path_is_refused_for_dataset(local_datasets, given, named):
    """Read as corpus files, it would give its metadata JSON files as records and every split at once."""
    message = f"{local_datasets / named}: a `datasets` save_to_disk directory; pass --dataset {local_datasets / named}"
    with pytest.raises(CorpusError, match=re.escape(message)):
        resolve_sources([str(local_datasets / given)])


def test_dataset_by_load_dataset_from_a_local_directory(local_datasets):
    spec = str(local_datasets / "plain")
    corpus = open_corpus(dataset=spec, text_column="body")
    assert list(corpus.documents()) == ["x", "y", "z"]
    assert open_corpus(dataset=spec, text_column="body").fingerprint == corpus.fingerprint  # from the cache
    assert corpus.fingerprint != open_corpus(dataset=str(local_datasets / "saved")).fingerprint
    data = local_datasets / "plain" / "train.jsonl"
    data.write_text('{"body": "changed"}\n')
    os.utime(data, (time.time() + 10, time.time() + 10))  # a new modification time, as any real edit has
    changed = open_corpus(dataset=spec, text_column="body")
    assert changed.fingerprint != corpus.fingerprint and list(changed.documents()) == ["changed"]


def test_the_hub_client_s_retry_warnings_are_held_back_while_a_dataset_loads(monkeypatch):
    """Offline, huggingface_hub logs a warning per retry (ten lines over 30 s) before the one error line."""
    import io
    import logging

    import datasets

    def offline(*args, **kwargs):
        logging.getLogger("huggingface_hub.utils._http").warning("Retrying in 1s [Retry 1/5].")
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    hub, seen = logging.getLogger("huggingface_hub"), io.StringIO()
    handler, level = logging.StreamHandler(seen), hub.level
    hub.addHandler(handler)
    try:
        with pytest.raises(CorpusError, match="Couldn't reach the Hub"):
            open_corpus(dataset="someone/some-dataset")
    finally:
        hub.removeHandler(handler)
    assert seen.getvalue() == "" and hub.level == level


def test_a_corpus_file_given_as_dataset_is_refused_with_the_fix(tmp_path):
    """Not sent to `datasets`, whose message would be about the Hub and the cache."""
    path = write(tmp_path / "corpus.jsonl", '{"text": "a"}\n')
    message = f"--dataset {path}: a file; give corpus files as arguments (mlmprep build {path}), --dataset a dataset's"
    with pytest.raises(CorpusError, match=re.escape(message)):
        open_corpus(dataset=str(path))


def test_dataset_missing_offline_is_one_corpus_error_with_the_hint(tmp_path):
    """In a child process with the HF offline switches set before `datasets` is imported: never the network."""
    code = textwrap.dedent(
        """
        from mlmprep.corpus.documents import open_corpus
        from mlmprep.errors import CorpusError
        try:
            open_corpus(dataset="mlmprep-no-such-user/no-such-dataset:cfg")
        except CorpusError as exc:
            print(exc)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    message = out.stdout.strip()
    assert message.startswith("--dataset mlmprep-no-such-user/no-such-dataset:cfg [train]: cannot load (")
    assert "offline use needs the dataset in the local Hugging Face cache" in message and "\n" not in message
