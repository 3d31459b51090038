"""Hostile corpora: each input below has one expected outcome, and none ends in a traceback.

| input                                          | what mlmprep does                                            |
|------------------------------------------------|--------------------------------------------------------------|
| an empty file                                  | exit 2: names the file, the corpus has no text               |
| a file of blank / whitespace-only lines        | exit 2: names the file, the corpus has no text               |
| PNG bytes named .png, given by name            | exit 2: unsupported file type .png, lists the supported ones |
| PNG bytes named .txt                           | exit 2: binary or UTF-16 data, convert it to UTF-8           |
| invalid UTF-8 mid-file, --on-decode-error fail | exit 2 naming file and line (test_cli_build, decode-fail)    |
| invalid UTF-8 mid-file, replace / skip         | builds; the line gets U+FFFD / is left out; both counted     |
| a NUL byte inside a line                       | builds; cleaning drops the NUL and counts it                 |
| a stray NUL beside a Latin-1 byte in a .txt    | builds: text, not binary; the byte follows --on-decode-error |
| one long line, no newline                      | builds the windows its tokens make (time, memory: benchmarks) |
| emoji ZWJ sequences, combining marks, RTL, CJK | builds; every script survives cleaning and tokenizing        |
| a JSONL file with a broken line                | exit 2 naming file:line and the JSON error                   |
| a directory of .txt .jsonl .md .png            | builds from .txt and .jsonl; .md and .png listed as skipped  |
| a broken symbolic link                         | exit 2: broken symbolic link                                 |
| a JSON line nested 100,000 deep                | exit 2 naming file:line: nested too deeply, remove or fix it |
| a Parquet file with two columns named text     | exit 2: 2 columns are named 'text'; rename one               |
| an Arrow file with damaged (decreasing) offsets | exit 2 naming the file and row: cannot read                 |
| a corpus file deleted during the build         | exit 2: cannot be read any more, keep the corpus unchanged   |
| a corpus file resized during the build         | exit 2: changed during the build                             |
| file names that are not UTF-8 (Latin-1 bytes)  | builds; the manifest and summary list them with \\xNN escapes |

Everything skipped, replaced or dropped is counted in the manifest's corpus.stats and shown in the
summary the build prints.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli.test_build import (
    assert_refused,
    build_args,
    cli,
    leftovers,
    manifest,
    run_many,
)
from tests.conftest import WORDS, tiny_documents

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def png(n_bytes: int) -> bytes:
    """A PNG header and random bytes (the same every run)."""
    return PNG + random.Random(0).randbytes(n_bytes)


def text(n_docs: int = 40) -> bytes:
    return ("\n".join(tiny_documents(n_docs)) + "\n").encode()


def windows_text(build: Path) -> str:
    """The training windows of a build (made with ALL_WINDOWS: every document's windows, in corpus order)
    decoded as one text; special tokens, such as the EOS between documents, are dropped."""
    from mlmprep.format.write import iter_rows
    from mlmprep.tokenizer.load import load_tokenizer

    ids = [i for rows in iter_rows(build / "windows", "tokens") for i in rows.values.tolist()]
    return load_tokenizer(build / "tokenizer.json").decode(ids)


ALL_WINDOWS = ("--validation-fraction", "0", "--dedup", "off")  # these corpora repeat their text


# ----------------------------------------------------------------------------------------------- refused


def write_refused_inputs(d: Path) -> None:
    """The files the refused cases read, in `d`."""
    (d / "empty.txt").write_bytes(b"")
    (d / "blank.txt").write_bytes(b"\n   \n\t\n\r\n \n")
    (d / "picture.png").write_bytes(png(4096))
    (d / "picture.txt").write_bytes(png(4096))
    (d / "broken.jsonl").write_bytes(b'{"text": "one"}\n{"text": "two"}\n{"text": "thr\n{"text": "four"}\n')
    os.symlink(d / "gone.txt", d / "dangling.txt")
    (d / "deep.jsonl").write_text('{"text": "one"}\n{"text": "two", "m": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    twice = pa.Table.from_arrays([pa.array(["a b"] * 5), pa.array(["c d"] * 5)], names=["text", "text"])
    pq.write_table(twice, d / "twice.parquet")
    offsets = pa.py_buffer(np.array([0, 5, 3, 15], dtype=np.int32).tobytes())  # decreasing: a flipped bit
    damaged = pa.table({"text": pa.StringArray.from_buffers(3, offsets, pa.py_buffer(b"helloworldagain"))})
    with pa.OSFile(str(d / "damaged.arrow"), "wb") as sink, pa.ipc.new_file(sink, damaged.schema) as writer:
        writer.write_table(damaged)


# case -> (corpus in write_refused_inputs' d, words the error line must contain)
REFUSED = {
    "empty-file": ("empty.txt", ("empty.txt", "no text")),
    "blank-lines": ("blank.txt", ("blank.txt", "no text")),
    "png-by-name": ("picture.png", ("picture.png", "unsupported file type .png", ".txt")),
    "png-as-txt": ("picture.txt", ("picture.txt", "binary", "convert it to UTF-8")),
    "broken-jsonl": ("broken.jsonl", ("broken.jsonl line 3", "not valid JSON")),
    "broken-symlink": ("dangling.txt", ("dangling.txt", "broken symbolic link")),
    "json-too-deep": ("deep.jsonl", ("deep.jsonl line 2 (byte 16)", "nested too deeply", "remove or fix")),
    "column-named-twice": ("twice.parquet", ("twice.parquet", "2 columns are named 'text'", "rename one")),
    "arrow-damaged-offsets": ("damaged.arrow", ("damaged.arrow after row 0", "cannot read", "offset")),
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory, tok) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every refused input, run once as a real process in the cases' directory: case -> (result, its --out)."""
    d = tmp_path_factory.mktemp("hostile")
    write_refused_inputs(d)
    commands = {case: build_args(Path(source), Path(f"out-{case}"), tok) for case, (source, _) in REFUSED.items()}
    results = run_many(commands, cwd=d)
    return {case: (results[case], d / f"out-{case}") for case in REFUSED}


@pytest.mark.parametrize("case", REFUSED)
def test_hostile_input_is_refused_in_one_line_leaving_nothing(refused, case):
    result, out = refused[case]
    assert_refused(result.returncode, result.stderr, *REFUSED[case][1])
    assert leftovers(out) == []


# ----------------------------------------------------------------------------------------------- files that change


def corpus_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_bytes(text())
    return folder


def while_reading_a(folder: Path, monkeypatch, action) -> None:
    """Run `action` when the build starts reading a.txt: after open_corpus has hashed both files (the build
    must run in this process, --workers 1, for the patched reader to act)."""
    from mlmprep.corpus import readers

    read_txt = readers.READERS[".txt"]

    def reader(path, stats, opts, *part):
        if path.name == "a.txt":
            action()
        yield from read_txt(path, stats, opts, *part)

    monkeypatch.setitem(readers.READERS, ".txt", reader)


def test_a_file_deleted_during_the_build_is_a_clear_error(tmp_path, tok, monkeypatch):
    folder, out = corpus_dir(tmp_path), tmp_path / "out"
    while_reading_a(folder, monkeypatch, (folder / "b.txt").unlink)
    result = cli(*build_args(folder, out, tok, "--workers", "1"))
    assert_refused(result.exit_code, result.stderr, "b.txt", "cannot be read any more", "keep the corpus unchanged")
    assert leftovers(out) == []


def test_a_file_resized_during_the_build_is_a_clear_error(tmp_path, tok, monkeypatch):
    folder, out = corpus_dir(tmp_path), tmp_path / "out"
    grown = text() + b"one more line\n"
    while_reading_a(folder, monkeypatch, lambda: (folder / "b.txt").write_bytes(grown))
    result = cli(*build_args(folder, out, tok, "--workers", "1"))
    sizes = f"({len(text())} -> {len(grown)} bytes)"
    assert_refused(result.exit_code, result.stderr, "b.txt", f"changed during the build {sizes}")
    assert leftovers(out) == []


# ----------------------------------------------------------------------------------------------- built, counted


@pytest.mark.parametrize("policy, replaced, skipped", [("replace", 1, 0), ("skip", 0, 1)])
def test_invalid_utf8_mid_file_is_replaced_or_skipped_and_counted(tmp_path, tok, policy, replaced, skipped):
    corpus, out = tmp_path / "bad.txt", tmp_path / "out"
    corpus.write_bytes(text() + b"caf\xe9 latin-1 bytes in a UTF-8 file\n" + text())
    result = cli(*build_args(corpus, out, tok, "--on-decode-error", policy, *ALL_WINDOWS))
    assert result.exit_code == 0, result.stderr
    stats = manifest(out)["corpus"]["stats"]
    counts = stats["decode_errors"], stats["decode_replaced_lines"], stats["decode_skipped_lines"]
    assert counts == (1, replaced, skipped)
    assert stats["documents"] == 80 + replaced
    assert ("latin" in windows_text(out)) is bool(replaced)


def test_a_nul_byte_inside_a_line_is_dropped_and_counted(tmp_path, tok):
    corpus, out = tmp_path / "nul.txt", tmp_path / "out"
    corpus.write_bytes(text() + b"the quiet gar\x00den opened\n" + text())
    result = cli(*build_args(corpus, out, tok, *ALL_WINDOWS))
    assert result.exit_code == 0, result.stderr
    stats = manifest(out)["corpus"]["stats"]
    assert stats["characters_removed"] == 1 and stats["documents"] == 81
    assert "the quiet garden opened" in windows_text(out)


SCRIPTS = (
    "👩‍👩‍👧‍👦 family, 👨🏽‍💻 coder, 🏳️‍🌈 flag",  # ZWJ sequences, a skin tone, a variation selector
    "e\u0301te\u0301 na\u0308ive Z\u0351\u036b\u0343a\u0310l\u0352g\u0306o",  # combining marks, stacked
    "مرحبا بالعالم هذا نص عربي",  # Arabic, right to left
    "שלום עולם זה טקסט בעברית",  # Hebrew, right to left
    "中文文本测试 日本語のテキスト 한국어 텍스트",  # CJK without spaces, and Hangul
)


def test_every_script_survives_cleaning_and_tokenizing(tmp_path):
    corpus, out = tmp_path / "scripts.txt", tmp_path / "out"
    corpus.write_text("\n".join(SCRIPTS * 60) + "\n", encoding="utf-8")
    result = cli("build", corpus, "--out", out, "--vocab-size", "300", "--input-length", "32", "--seeds", "1",
                 *ALL_WINDOWS)
    assert result.exit_code == 0, result.stderr
    m = manifest(out)
    assert m["corpus"]["stats"]["characters_removed"] == 0
    decoded = windows_text(out)
    for line in SCRIPTS:
        assert line in decoded  # whole lines, code point for code point: nothing dropped, split or reordered
    assert "\ufffd" not in decoded and m["statistics"]["windows"]["tokens_kept"] > 0


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, tok):
    """A directory of .txt (with blank lines, a NUL and a bad byte), .jsonl (with a null), .md and .png, built."""
    d = tmp_path_factory.mktemp("mixed")
    folder, out = d / "corpus", d / "out"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_bytes(text() + b"\n\n  \nthe ri\x00ver \xff sang\n")
    (folder / "sub" / "b.jsonl").write_bytes(b'{"text": "json text here"}\n{"text": null}\n{"text": "more"}\n')
    (folder / "notes.md").write_text("# not read\n", encoding="utf-8")
    (folder / "sub" / "logo.png").write_bytes(png(512))
    return folder, out, cli(*build_args(folder, out, tok))


def test_a_mixed_directory_reads_what_it_can_and_counts_the_rest(mixed):
    folder, out, result = mixed
    assert result.exit_code == 0, result.stderr
    corpus = manifest(out)["corpus"]
    assert [Path(f["path"]).relative_to(folder).as_posix() for f in corpus["files"]] == ["a.txt", "sub/b.jsonl"]
    stats = corpus["stats"]
    assert sorted(Path(p).name for p in stats["files_skipped"]) == ["logo.png", "notes.md"]
    assert (stats["documents"], stats["blank_skipped"], stats["null_skipped"]) == (43, 3, 1)
    assert (stats["decode_replaced_lines"], stats["characters_removed"]) == (1, 1)


def test_the_summary_shows_what_was_dropped(mixed):
    _, _, result = mixed
    summary = result.stdout
    assert "notes.md" in summary and "logo.png" in summary
    for count, what in ((3, "blank"), (1, "null"), (1, "undecodable"), (1, "removed")):
        assert re.search(rf"\b{count}\b[^;\n]*{what}", summary), what  # the count, then what it counts


def test_file_names_that_are_not_utf8_build_and_are_listed_escaped(tmp_path, tok):
    """A Latin-1 name from an old archive (bytes the file system keeps, Python holds as surrogates) is read;
    the manifest, strict UTF-8 JSON, lists it with the byte as an escape."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (Path(os.fsdecode(bytes(folder) + b"/caf\xe9.txt"))).write_bytes(text())
    (Path(os.fsdecode(bytes(folder) + b"/r\xe9sum\xe9.md"))).write_bytes(b"not read\n")
    out = tmp_path / "out"
    (result,) = run_many({"build": build_args(folder, out, tok)}).values()
    assert result.returncode == 0, result.stderr
    corpus = manifest(out)["corpus"]
    assert [f["path"] for f in corpus["files"]] == [f"{folder}/caf\\xe9.txt"]
    assert corpus["stats"]["files_skipped"] == [f"{folder}/r\\xe9sum\\xe9.md"]
    assert "r\\xe9sum\\xe9.md" in result.stdout  # the summary lists it


# ----------------------------------------------------------------------------------------------- one long line


def test_a_single_long_line_builds_the_windows_its_tokens_make(tmp_path, tok):
    """One 4 MB line without a newline: the windows hold exactly the tokens the tokenizer gives the line,
    counted here independently (plus the document's </s>). Its time and memory at 50 MB are measured by
    benchmarks/hostile.py, not asserted here."""
    from tokenizers import Tokenizer

    long_words = [w for w in WORDS if len(w) >= 8]
    sentence = " ".join(long_words) + " "
    line = (sentence * (4_000_000 // len(sentence) + 1))[:4_000_000]
    corpus, out = tmp_path / "line.txt", tmp_path / "out"
    corpus.write_text(line, encoding="ascii")
    result = cli(*build_args(corpus, out, tok, "--seeds", "1"))
    assert result.exit_code == 0, result.stderr
    m = manifest(out)
    tokens = len(Tokenizer.from_file(tok).encode(line.strip(), add_special_tokens=False).ids) + 1  # + </s>
    windows, length = m["statistics"]["windows"], m["window_length"]
    assert m["corpus"]["stats"]["documents"] == 1
    assert (windows["rows"], windows["tokens_kept"], windows["tokens_dropped"]) == (
        tokens // length, tokens // length * length, tokens % length)
