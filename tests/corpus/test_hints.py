"""What a newcomer trips on while building, said in the summary: hard-wrapped prose read one line per document
(a hint: --doc-sep blank), and a --text-column most JSON records lack (a warning over 1%, refused over half)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mlmprep.corpus.text import looks_wrapped, wrapped_count
from tests.cli.test_build import assert_refused, cli, leftovers, manifest, run_cli
from tests.conftest import tiny_documents


def wrapped_prose(path: Path, paragraphs: int = 60) -> Path:
    """Paragraphs of the tiny documents hard-wrapped at 72 columns, a blank line between two (a licence, a book)."""
    docs = tiny_documents(paragraphs * 3, seed=7)
    text = "\n\n".join(textwrap.fill(" ".join(docs[3 * k : 3 * k + 3]), 72) for k in range(paragraphs))
    path.write_text(text + "\n", encoding="utf-8")
    return path


def one_per_line(path: Path) -> Path:
    """One document per line, a blank line now and then (what --doc-sep line is for)."""
    docs = tiny_documents(300)
    path.write_text("".join(doc + ("\n\n" if k % 20 == 0 else "\n") for k, doc in enumerate(docs)), encoding="utf-8")
    return path


def hint_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("hint:")]


def test_wrapped_lines_are_short_and_do_not_end_a_sentence():
    lines = ["This sentence is cut by the wrap", "and goes on here.", "", "   ", "\u201cA quoted end.\u201d",
             "A list item ends with a colon:", "Chapter Three", None, "x" * 101, "(A bracketed end.)", "**",
             "    for line in lines", "value = compute(x)", "from pathlib import Path  # a comment"]
    assert wrapped_count(lines) == 2  # the cut line and the heading; not the code


@pytest.mark.parametrize(("documents", "blank", "wrapped", "verdict"), [
    (100, 10, 60, True),
    (100, 10, 49, False),  # most lines end a sentence: one document per line
    (100, 0, 100, False),  # no paragraphs: a list of titles, or nothing --doc-sep blank would split
    (19, 5, 19, False),  # too few lines to tell
])
def test_looks_wrapped_needs_paragraphs_and_mostly_cut_lines(documents, blank, wrapped, verdict):
    assert looks_wrapped(documents, blank, wrapped) is verdict


@pytest.mark.parametrize("shard_bytes", [0, 2000])
def test_wrapped_prose_gets_a_hint_with_its_figures_however_it_is_sharded(tmp_path, tok, shard_bytes):
    """The figures come from the file itself (its lines, its non-blank lines' mean length), the same whether
    one shard reads it or several; the one-document-per-line file beside it is not counted."""
    prose = wrapped_prose(tmp_path / "licence.txt")
    plain = one_per_line(tmp_path / "plain.txt")
    out = tmp_path / "b"
    result = cli("build", prose, plain, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "1",
                 "--workers", "2", "--shard-bytes", shard_bytes)
    assert result.exit_code == 0, result.stderr
    lines = prose.read_text(encoding="utf-8").splitlines()
    documents = [line for line in lines if line.strip()]
    mean = sum(map(len, documents)) / len(documents)
    assert hint_lines(result.stdout) == [
        f"hint: 1 .txt file ({len(lines):,} lines) looks like hard-wrapped prose, read one document per line "
        f"(mean {mean:,.0f} characters); --doc-sep blank (one document per paragraph) probably fits"]
    assert manifest(out)["corpus"]["stats"]["wrapped_prose"] == {
        "files": 1, "lines": len(lines), "documents": len(documents), "characters": sum(map(len, documents))}


def test_no_hint_for_one_document_per_line_paragraphs_or_json(tmp_path, tok):
    """Not for a one-document-per-line file, nor wrapped prose read by paragraph, nor the same text in JSON."""
    prose = wrapped_prose(tmp_path / "licence.txt")
    records = tmp_path / "licence.jsonl"
    records.write_text("".join(json.dumps({"text": line}) + "\n" for line in prose.read_text().splitlines()))
    common = ("--tokenizer", tok, "--input-length", "32", "--seeds", "1")
    for name, args in {"plain": (one_per_line(tmp_path / "plain.txt"),),
                       "blank": (prose, "--doc-sep", "blank"), "json": (records,)}.items():
        result = cli("build", *args, "--out", tmp_path / name, *common)
        assert result.exit_code == 0, result.stderr
        assert hint_lines(result.stdout) == [], name
        assert manifest(tmp_path / name)["corpus"]["stats"]["wrapped_prose"]["files"] == 0


def test_no_hint_for_source_code(tmp_path, tok):
    """Python source saved as .txt (short lines, blank lines between functions, few sentence ends) is not prose:
    the hint stays silent, and the wrapped-line count of its lines is small."""
    import difflib
    import inspect
    import textwrap as textwrap_module

    code = "".join(inspect.getsource(m) for m in (textwrap_module, difflib, json.decoder))
    source = tmp_path / "modules.txt"
    source.write_text(code, encoding="utf-8")
    result = cli("build", source, "--out", tmp_path / "b", "--tokenizer", tok, "--input-length", "32", "--seeds", "1")
    assert result.exit_code == 0, result.stderr
    assert hint_lines(result.stdout) == []
    lines = [line for line in code.splitlines() if line.strip()]
    assert wrapped_count(lines) < 0.2 * len(lines)


def records(path: Path, n: int, lacking: int, column: str = "body") -> Path:
    """`n` JSON records with their text under `column`, except `lacking` of them spread evenly, which hold it
    under "content" beside an id and a title."""
    docs = tiny_documents(n, seed=3)
    lacks = [(k * lacking) // n != ((k + 1) * lacking) // n for k in range(n)]
    path.write_text("".join(json.dumps({"content": doc, "id": k, "title": "t"} if lack else {column: doc}) + "\n"
                            for k, (doc, lack) in enumerate(zip(docs, lacks))), encoding="utf-8")
    return path


BUILD = ("--text-column", "body", "--input-length", "32", "--seeds", "1")


def test_a_text_field_some_records_lack_is_named_in_the_count_and_warned_of(tmp_path, tok):
    corpus = records(tmp_path / "c.jsonl", 400, 40)
    result = cli("build", corpus, "--out", tmp_path / "b", "--tokenizer", tok, *BUILD)
    assert result.exit_code == 0, result.stderr
    assert "dropped or replaced: 40 records without the 'body' field skipped" in result.stdout
    (warning,) = [line for line in result.stdout.splitlines() if line.startswith("warning:")]
    assert warning == ("warning: 10.0% of the JSON records (40 of 400) have no 'body' field and were skipped "
                       "(their fields: content (40), id (40), title (40)); check --text-column")


def test_a_few_records_without_the_field_are_counted_but_not_warned_of(tmp_path, tok):
    corpus = records(tmp_path / "c.jsonl", 400, 4)  # 1%: not over it
    result = cli("build", corpus, "--out", tmp_path / "b", "--tokenizer", tok, *BUILD)
    assert result.exit_code == 0, result.stderr
    assert "4 records without the 'body' field skipped" in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("warning:")]


def test_a_text_column_most_records_lack_is_refused_after_reading_leaving_nothing(tmp_path, tok):
    """--text-column body where 360 of 400 records lack it, read by two workers in many shards: one line naming
    the column, the count and the fields the records have, exit 2, nothing under --out."""
    corpus = records(tmp_path / "c.jsonl", 400, 360)
    out = tmp_path / "b"
    result = run_cli("build", corpus, "--out", out, "--tokenizer", tok, *BUILD, "--workers", "2",
                     "--shard-bytes", "4096")
    assert_refused(result.returncode, result.stderr, "360 of its 400 records lack the 'body' field",
                   "--text-column NAME", "their fields: content (360), id (360), title (360)")
    assert leftovers(out) == []


def test_half_the_records_without_the_field_is_built_with_a_warning(tmp_path, tok):
    corpus = records(tmp_path / "c.jsonl", 400, 200)
    result = cli("build", corpus, "--out", tmp_path / "b", "--tokenizer", tok, *BUILD)
    assert result.exit_code == 0, result.stderr
    assert "warning: 50.0% of the JSON records (200 of 400)" in result.stdout


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
