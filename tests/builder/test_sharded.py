"""The sharded build: the same bytes for any number of workers and any shard size, windows equal to
an independent one-pass reference over the whole corpus, and shard boundaries that never split a document."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from mlmprep.builder.pipeline import tokenize_shard_in_driver
from mlmprep.builder.windows import WindowStats, frame_rows, segment_chars, segment_rows, text_segments
from mlmprep.corpus.files import CorpusStats, ReadOptions
from mlmprep.corpus.shards import file_shards, read_shard
from mlmprep.errors import CorpusError
from mlmprep.format.rows import Rows, concat_rows
from mlmprep.format.write import iter_rows
from mlmprep.tokenizer.encode import encode, word_tables
from mlmprep.tokenizer.load import load_tokenizer, special_ids
from tests.conftest import build_tiny, format_1_copy, tiny_documents
from tests.reference_windows import token_windows

SMALL = {"shard_bytes": 3000, "rows_per_file": 40}  # the tiny corpus in ~15 shards and several output files

CASES = {
    "tokens-stream-span": {},
    "tokens-doc-span": {"pack": "doc"},
    "text-span": {"method": "text", "input_length": 64},
    "tokens-stream-mlm": {"objective": "mlm", "whole_word": True},
    "tokens-doc-mlm": {"objective": "mlm", "pack": "doc"},
}


def hashes(build: Path) -> dict[str, str]:
    """sha256 of every file of a build but the manifest."""
    return {str(p.relative_to(build)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(build.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def comparable(build: Path) -> dict:
    """The manifest without what may differ between identical builds (timings, speed-only options)."""
    manifest = json.loads((build / "manifest.json").read_text())
    manifest.pop("timings")
    manifest.pop("build_options")
    return manifest


@pytest.fixture(scope="module")
def corpus_with_blanks(tmp_path_factory) -> Path:
    """The tiny corpus with blank lines and a long paragraph, so shards start inside documents."""
    docs = tiny_documents()
    lines = []
    for i, doc in enumerate(docs):
        lines.append(doc)
        if i % 7 == 0:
            lines.append("")
        if i % 50 == 0:
            lines.append(" ".join(docs[:20]))  # a document longer than one shard
    path = tmp_path_factory.mktemp("sharded") / "c.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_any_number_of_workers_writes_the_same_bytes(tmp_path, corpus_with_blanks, tiny_tokenizer_path, case):
    options = {**CASES[case], **SMALL}
    one = build_tiny(tmp_path / "w1", corpus_with_blanks, tiny_tokenizer_path, workers=1, **options)
    reference = hashes(one)
    assert sum(name.startswith("windows/data-") for name in reference) >= 3  # several output files
    for workers, shard_bytes in ((2, 3000), (7, 3000), (2, 1 << 20)):  # any workers, any shard size
        other = build_tiny(tmp_path / f"w{workers}-{shard_bytes}", corpus_with_blanks, tiny_tokenizer_path,
                           **{**options, "workers": workers, "shard_bytes": shard_bytes})
        assert hashes(other) == reference, (workers, shard_bytes)
        assert comparable(other) == comparable(one)


@pytest.mark.parametrize("case", ["tokens-stream-span", "text-span", "tokens-doc-mlm"])
def test_shards_the_driver_reads_while_its_workers_start_give_the_same_bytes(tmp_path, corpus_with_blanks,
                                                                              tiny_tokenizer_path, case, monkeypatch):
    import mlmprep.builder.engine.local
    import mlmprep.builder.run
    from tests.builder.test_engine import SlowToStart

    options = {**CASES[case], **SMALL}
    one = build_tiny(tmp_path / "w1", corpus_with_blanks, tiny_tokenizer_path, workers=1, **options)
    in_driver = []
    monkeypatch.setattr(mlmprep.builder.engine.local, "ProcessPoolExecutor", SlowToStart)
    monkeypatch.setattr(mlmprep.builder.run, "tokenize_shard_in_driver",
                        lambda task: in_driver.append(task.shard.index) or tokenize_shard_in_driver(task))
    two = build_tiny(tmp_path / "w2", corpus_with_blanks, tiny_tokenizer_path, workers=2, **options)
    assert len(in_driver) >= 2 and 0 not in in_driver  # the driver read some shards, the workers the first
    assert hashes(two) == hashes(one) and comparable(two) == comparable(one)


def test_the_driver_tokenizes_with_the_tokenizer_it_has_loaded(tmp_path, tiny_corpus, tiny_tokenizer_path,
                                                                   monkeypatch):
    """Shards read in the driver (all of them with one worker) use the tokenizer it loaded for the build, not a
    second copy loaded from the staging directory (0.1 s for a 32k vocabulary)."""
    import mlmprep.builder.staged

    loads = []
    monkeypatch.setattr(mlmprep.builder.staged, "load_tokenizer",
                        lambda path: loads.append(path) or load_tokenizer(path))
    build_tiny(tmp_path / "one", tiny_corpus, tiny_tokenizer_path, workers=1)
    assert loads == []


@pytest.mark.parametrize("case, workers", [("tokens-stream-span", 2), ("text-span", 2),
                                            ("tokens-stream-span", 1)])  # one: files are written before reading ends
def test_the_bar_never_goes_back_and_every_stage_ends_full(tmp_path, corpus_with_blanks, tiny_tokenizer_path,
                                                           case, workers, monkeypatch):
    """On a terminal: stages in order, each with a total fixed when it starts (reading: the input's bytes, then
    the text segments, then one per output file), each ending with every unit counted once; the drawn
    percentage of a stage never falls."""
    import re

    import mlmprep.builder.run
    from mlmprep.config import BuildConfig
    from mlmprep.progress import Stages
    from tests.fakes import FakeTerminal

    stages = []

    class Recorded(Stages):
        def stage(self, desc, total, unit, done=0):
            stages.append([desc, total, unit, done, done])  # ... and the units done before the stage began
            super().stage(desc, total, unit, done)

        def update(self, n=1, note=None, tokens=None):
            stages[-1][3] += n
            super().update(n, note, tokens)

    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr(mlmprep.builder.run, "Stages", Recorded)
    options = {"input_length": 32, "seeds": 2, "validation_fraction": 0.1, "workers": workers, **CASES[case], **SMALL}
    mlmprep.builder.run.build(BuildConfig(corpus=(str(corpus_with_blanks),), tokenizer=str(tiny_tokenizer_path),
                                        out=str(tmp_path / "b"), **options), log=lambda line: None)
    files = len(list((tmp_path / "b" / "windows").glob("data-*.arrow")))
    validation_files = len(list((tmp_path / "b" / "validation-windows").glob("data-*.arrow")))
    expected = [["read, clean, tokenize", corpus_with_blanks.stat().st_size, "B"]]
    if case == "text-span":  # each side's text (training, validation) is one segmenting task (4M characters)
        expected.append(["cut, tokenize text segments", 2, "task"])
    expected.append(["window, mask, write", files + validation_files, "output file"])
    assert [s[:3] for s in stages] == expected and files >= 3
    assert all(done == total for _, total, _, done, _ in stages)
    assert workers > 1 or stages[-1][4] > 0  # in one process, write tasks run as soon as their shards are read
    drawn = [(f.split(":")[0], int(m.group(1))) for f in re.split(r"[\r\n]", terminal.getvalue())
             if (m := re.search(r"(\d+)%\|", f))]
    for desc, frames in itertools.groupby(drawn, key=lambda frame: frame[0]):
        percents = [percent for _, percent in frames]
        assert percents == sorted(percents), (desc, percents)
    assert drawn[-1] == ("window, mask, write", 100)


def test_a_build_logged_to_a_file_says_its_progress_in_lines(tmp_path, corpus_with_blanks, tiny_tokenizer_path,
                                                            monkeypatch):
    """stderr not a terminal: lines (here one per update, the interval set to 0) naming the stage, the bytes and
    shards read of all, the tokens and their rate; no bar's carriage returns."""
    import io
    import re

    import mlmprep.progress

    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    monkeypatch.setattr(mlmprep.progress, "LOG_EVERY_S", 0.0)
    build_tiny(tmp_path / "b", corpus_with_blanks, tiny_tokenizer_path, workers=2, **SMALL)
    lines = log.getvalue().splitlines()
    size = corpus_with_blanks.stat().st_size / 1e6
    reading = [line for line in lines if line.startswith("read, clean, tokenize: ")]
    shards = len(reading)
    pattern = (rf"read, clean, tokenize: \d+\.\d of {size:.1f} MB \(\d+%, \d+ s\), (\d+)/{shards} shards"
               r"(, \d+ output files written)?, [\d,]+ tokens, [\d,]+ tokens/s")
    assert all(re.fullmatch(pattern, line) for line in reading), reading
    assert [int(re.fullmatch(pattern, line).group(1)) for line in reading] == list(range(1, shards + 1))
    assert reading[-1].startswith(f"read, clean, tokenize: {size:.1f} of {size:.1f} MB (100%, ")
    writing = [line for line in lines if line.startswith("window, mask, write: ")]
    assert all(re.fullmatch(r"window, mask, write: \d+ of \d+ output files \(\d+%, \d+ s\), [\d,]+ windows", line)
               for line in writing), writing
    assert "\r" not in log.getvalue() and shards > 5


def reference_rows(docs: list[str], tokenizer: Path, options: dict,
                   stats: WindowStats | None = None) -> tuple[Rows, WindowStats]:
    """Every window of a build of `docs`, in order, by the one-pass functions of mlmprep.builder.windows (no shards,
    no output files), and their statistics (added to `stats` when given)."""
    tok = load_tokenizer(tokenizer)
    ids, tables = special_ids(tok), word_tables(tok)
    length = options.get("input_length", 32)
    framed = options.get("objective") == "mlm"
    if not framed:
        from mlmprep.builder.mask import compute_input_and_target_lengths

        length = compute_input_and_target_lengths(length, 0.15, 3.0)[0]
    stats = stats or WindowStats(method=options.get("method", "tokens"), row_length=length, unk_id=ids.unk)
    if options.get("method") == "text":
        segments = list(text_segments(docs, segment_chars(options["input_length"])))
        flat, lengths = encode(tok, [text for text, _ in segments])
        rows = segment_rows(flat, lengths, np.array([cut for _, cut in segments], dtype=bool), False, length=length,
                            tables=tables, stats=stats)
        return rows, stats
    pack = options.get("pack", "stream")
    eos = None if pack == "doc" else ids.eos  # --pack doc rows end themselves (span: </s>; tiny tokenizer: no frame)
    rows = concat_rows(list(token_windows([encode(tok, docs)], length=length, eos_id=eos, pack=pack, tables=tables,
                                          stats=stats)))
    return frame_rows(rows, np.zeros(0, np.int32), np.zeros(0, np.int32)), stats


def reference_sides(docs: list[str], fraction: float, seed: int) -> dict[str, list[str]]:
    """--dedup exact, the document hold-out and the default decontamination in plain Python: a document whose NFC,
    whitespace-folded text was seen before is dropped; the others go to validation when their key's hash falls
    below `fraction`; then tests.ngrams.side_streams."""
    import unicodedata

    from mlmprep.builder.dedup import exact_keys
    from mlmprep.builder.selection import held_documents
    from tests.ngrams import side_streams

    seen, kept, sides = set(), [], []
    for doc, held in zip(docs, held_documents(exact_keys(docs), fraction, seed)):
        text = " ".join(unicodedata.normalize("NFC", doc).split())
        if text not in seen:
            seen.add(text)
            kept.append(doc)
            sides.append("validation" if held else "train")
    return side_streams(kept, sides)


@pytest.mark.parametrize("case", ["tokens-stream-span", "tokens-doc-span", "text-span"])
def test_windows_equal_a_one_pass_reference(tmp_path, corpus_with_blanks, tiny_tokenizer_path, case):
    """Each side's windows are the one-pass windows of its documents: the corpus less exact copies (planted
    here), split by document."""
    docs = [line for line in corpus_with_blanks.read_text(encoding="utf-8").splitlines() if line.strip()]
    corpus = tmp_path / "corpus.txt"
    copies = [f"  {docs[k]}   " for k in range(0, len(docs), 7)]  # the same texts but for their spaces
    corpus.write_text("\n".join(docs + copies + docs[:40]) + "\n", encoding="utf-8")
    options = {**CASES[case], **SMALL}
    build = build_tiny(tmp_path / "b", corpus, tiny_tokenizer_path, workers=2, **options)
    sides = reference_sides(docs + copies + docs[:40], 0.1, 0)
    assert sum(map(len, sides.values())) == len(set(docs)) and len(sides["validation"]) > 5
    stats = None
    for side, split in (("train", "windows"), ("validation", "validation-windows")):
        expected, stats = reference_rows(sides[side], tiny_tokenizer_path, options, stats)
        built = concat_rows(list(iter_rows(build / split, "tokens")))
        assert np.array_equal(built.offsets, expected.offsets) and np.array_equal(built.values, expected.values), split
    manifest = json.loads((build / "manifest.json").read_text())
    assert manifest["statistics"]["windows"] == pytest.approx(stats.as_dict())
    assert manifest["rows_per_file"] == 40
    dedup = manifest["corpus"]["stats"]["dedup"]
    assert dedup["documents_dropped"] == len(docs) + len(copies) + 40 - sum(map(len, sides.values())) > len(copies)
    assert dedup["validation_documents"] == len(sides["validation"])


def test_an_output_file_is_written_as_soon_as_the_shards_before_its_end_are_read():
    """Phase 2 overlaps phase 1: a file of 3 windows of 4 tokens needs stream tokens through 3 * 4 * (its number
    + 1) and one more (does its last window end inside a word?), from shards whose predecessors are all done."""
    from mlmprep.builder.outputs import OutputFiles
    from mlmprep.builder.staged import Layout
    from mlmprep.config import BuildConfig

    cfg = BuildConfig(validation_fraction=0.3, seed=5)
    layout = Layout(cfg, "stage", 1, content_length=4, window_length=4, doc_eos=1, format_version=3)
    files = OutputFiles(layout, rows_per_file=3, shards=5, seeds=(11, 12), validation_seed=13, side="train")
    sizes = [5, 7, 0, 12, 9]  # stream tokens (documents and their EOS) of each shard: 33 in all, 8 windows

    def done(index):
        return [(t.index, t.first, t.count) for t in files.shard_done(index, sizes[index])]

    assert done(3) == [] and done(0) == [] and done(2) == []  # shard 1 is missing: only 5 tokens are known
    assert done(1) == [(0, 0, 3)]  # 24 tokens known (5 + 7 + 0 + 12): file 0 needs 12 + 1, file 1 needs 24 + 1
    assert done(4) == [(1, 3, 3)]  # 33: file 1 is whole; file 2 (windows 6 and 7, the end) waits for the rest
    assert [(t.index, t.first, t.count) for t in files.rest(sizes)] == [(2, 6, 2)]
    assert files.rows == 8 and files.tasks[0].plan.offsets == (0, 5, 12, 12, 24)
    assert {t.plan.side for t in files.tasks} == {"train"}
    # file 1 reads tokens 11-24 (from the one before its first window), file 2 tokens 23-32
    assert files.written(0) == [0]  # shard 1 (tokens 5-11) ends with the token before file 1's first window
    assert files.written(2) == []  # file 1, not written yet, still reads shards 1, 3 and 4
    assert files.written(1) == [1, 2, 3, 4]


@pytest.mark.parametrize("case, decontaminate", [("tokens-stream-span", True), ("tokens-doc-mlm", True),
                                                   ("tokens-stream-span", False)])
def test_staged_shards_are_let_go_as_the_files_that_read_them_are_written(tmp_path, corpus_with_blanks,
                                                                          tiny_tokenizer_path, case, decontaminate,
                                                                          monkeypatch):
    """Each file is written as soon as its shards are read, and the shards no file of either side still needs are
    deleted, so the staging directory never holds the whole corpus's tokens (a side's file waits for its
    rows_per_file windows: at --validation-fraction f, about rows_per_file / f windows' worth of shards). With
    decontamination (the default) the validation side waits for the last shard, reading the validation candidates'
    tokens staged apart (`shard-N.held.ids`), not the shards'."""
    import mlmprep.builder.run
    from mlmprep.builder.pipeline import write_file

    staged = []

    def counting(task):
        staged.append(len(list((Path(task.plan.layout.stage) / "shards").glob("shard-??????.ids"))))
        return write_file(task)

    monkeypatch.setattr(mlmprep.builder.run, "write_file", counting)
    build_tiny(tmp_path / "one", corpus_with_blanks, tiny_tokenizer_path, workers=1, validation_fraction=0.5,
               decontaminate=decontaminate, **{**CASES[case], **SMALL})
    shards = len(file_shards([(corpus_with_blanks, corpus_with_blanks.stat().st_size)], SMALL["shard_bytes"]))
    assert len(staged) >= 3 and shards >= 10
    assert max(staged) <= shards // 2 and staged[-1] < shards // 2, (staged, shards)


@pytest.mark.parametrize("doc_sep", ["line", "blank"])
@pytest.mark.parametrize("shard_bytes", [1, 7, 500, 1 << 20])
def test_shards_read_exactly_the_documents_of_one_pass(tmp_path, doc_sep, shard_bytes):
    """Shard boundaries fall anywhere (inside a line, a paragraph, a multi-byte character, a blank run):
    every document is read once, whole, in order; a bad line is counted once."""
    text = "\ufeffa é b\n\n\nc d\ne\n \n\n" + "\n".join(f"line {i} ünï" for i in range(40)) + "\n\nbad \xff end\nlast"
    path = tmp_path / "c.txt"
    path.write_bytes(text.encode("utf-8").replace("\xff".encode(), b"\xff"))
    opts = ReadOptions(doc_sep=doc_sep)
    whole_stats, shard_stats = CorpusStats(), CorpusStats()
    whole = list(read_shard(file_shards([(path, path.stat().st_size)], 1 << 30)[0], opts, whole_stats))
    shards = file_shards([(path, path.stat().st_size)], shard_bytes)
    parts = list(itertools.chain.from_iterable(read_shard(s, opts, shard_stats) for s in shards))
    assert parts == whole and len(whole) == (4 if doc_sep == "blank" else 45)
    assert shard_stats == whole_stats and whole_stats.decode_replaced_lines == 1
    assert whole[0] == "a é b"  # the byte-order mark is gone
    if shard_bytes == 7:
        assert len(shards) > 50


def messy_text(rng) -> bytes:
    """Random text with every line end (LF, CRLF, lone CR), blank and whitespace lines, invalid UTF-8, a NUL,
    multi-byte characters, lines longer than a shard and, sometimes, a BOM and no final line end."""
    pieces = [b"\n", b"\r\n", b"\n\n", b"  \n", b"\r", b"\xff", b"\xe4\xb8", b"\x00", b"word", b" ", b"\t",
              "é".encode(), "中文".encode(), "\U0001F600".encode(), "\xa0".encode(), "\ufeff".encode()]
    parts = [b"\xef\xbb\xbf"] if rng.random() < 0.3 else []
    for _ in range(rng.randint(0, 300)):
        parts.append(b"x" * rng.randint(1200, 3000) if rng.random() < 0.02 else rng.choice(pieces))
    return b"".join(parts)


def independent_documents(data: bytes, policy: str, doc_sep: str) -> list[str]:
    """The documents of a .txt file as the README and corpus/text.py describe them, computed without mlmprep: lines
    end in LF or CRLF (a lone CR is text), a BOM starting the file is dropped, an undecodable line is replaced
    or skipped, and blank lines separate paragraphs."""
    raws = data.split(b"\n")
    last = raws.pop()
    lines = []
    for k, raw in enumerate([r.removesuffix(b"\r") for r in raws] + ([last] if last else [])):
        raw = raw.removeprefix(b"\xef\xbb\xbf") if k == 0 else raw
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            if policy == "replace":
                lines.append(raw.decode("utf-8", "replace"))
    blank = [not line.strip() for line in lines]
    if doc_sep == "line":
        return [line for line, b in zip(lines, blank) if not b]
    groups = itertools.groupby(zip(lines, blank), key=lambda pair: pair[1])
    return ["\n".join(line for line, _ in group) for is_blank, group in groups if not is_blank]


def test_shards_of_messy_text_equal_an_independent_reading(tmp_path):
    """1 KiB shards of random messy files (seeded) read exactly the documents of an independent reference."""
    import random

    path, checked = tmp_path / "messy.txt", 0
    for seed in range(40):
        data = messy_text(random.Random(seed))
        path.write_bytes(data)
        for policy, doc_sep in itertools.product(("replace", "skip"), ("line", "blank")):
            opts = ReadOptions(doc_sep=doc_sep, on_decode_error=policy)
            shards = file_shards([(path, len(data))], 1024)
            try:
                got = [doc for shard in shards for doc in read_shard(shard, opts, CorpusStats())]
            except CorpusError as exc:  # NULs among undecodable bytes: binary (test_corpus tests the rule)
                assert "binary or UTF-16 data" in str(exc)
                break
            assert got == independent_documents(data, policy, doc_sep), (seed, policy, doc_sep)
            checked += 1
    assert checked > 100


def test_jsonl_records_are_never_split(tmp_path):
    records = [{"text": f"record {i} " + "x" * (i % 13)} for i in range(100)]
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    for shard_bytes in (5, 64, 1000):
        shards = file_shards([(path, path.stat().st_size)], shard_bytes)
        got = [d for s in shards for d in read_shard(s, ReadOptions(), CorpusStats())]
        assert got == [r["text"] for r in records]


def test_a_bad_record_in_one_shard_is_one_line_naming_file_line_and_byte(tmp_path, tok):
    from tests.cli.test_build import assert_refused, build_args, leftovers, run_cli

    lines = [json.dumps({"text": doc}) for doc in tiny_documents(200)]
    lines[150] = '{"text": "cut off'
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    byte = len("\n".join(lines[:150])) + 1
    out = tmp_path / "out"
    result = run_cli(*build_args(path, out, tok, "--workers", "2", "--shard-bytes", "2000"))
    assert_refused(result.returncode, result.stderr, f"c.jsonl line 151 (byte {byte})", "not valid JSON")
    assert leftovers(out) == []


def test_the_tokenizer_sample_is_the_smallest_keys_of_the_distinct_documents_whatever_the_files(tmp_path):
    """A bottom-k sample: the distinct documents in content-key order up to the budget (the last one cut), so it is
    spread over the whole corpus, holds each text once, and is the same for the corpus gzipped or split in files."""
    import gzip

    from mlmprep.builder.dedup import exact_keys
    from mlmprep.builder.tokenizer_file import training_sample
    from mlmprep.config import BuildConfig
    from mlmprep.corpus.documents import open_corpus

    docs = [f"document {i} " + "word " * (i % 17) for i in range(3000)]
    docs += docs[:1500]  # copies, which count once
    text = "\n".join(docs) + "\n"
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    (tmp_path / "z.txt.gz").write_bytes(gzip.compress(text.encode("utf-8")))
    (tmp_path / "a.txt").write_text("\n".join(docs[:1000]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(docs[1000:]) + "\n", encoding="utf-8")
    distinct = dict(zip(exact_keys(docs).tolist(), docs))
    ordered = [distinct[key] for key in sorted(distinct)]

    def sample(*paths, budget=6400):
        cfg = BuildConfig(corpus=tuple(str(tmp_path / p) for p in paths), tokenizer_train_chars=budget)
        used = {"documents": 0, "characters": 0}
        taken = list(training_sample(open_corpus(cfg.corpus), cfg, used))
        assert used["characters"] == sum(map(len, taken)) <= budget and used["documents"] == len(taken)
        return taken

    expected, total = [], 0
    for doc in ordered:
        if total >= 6400:
            break
        expected.append(doc[: 6400 - total])
        total += len(expected[-1])
    assert sample("c.txt") == expected and total == 6400
    numbers = [int(doc.split()[1]) for doc in expected if doc.startswith("document ")]
    assert min(numbers) < 300 and max(numbers) > 2700  # from the start to the end, not the first 6400 characters
    assert sample("z.txt.gz") == sample("a.txt", "b.txt") == expected
    assert sample("c.txt", budget=1 << 30) == ordered  # a small corpus: all of it, each text once


def test_tokenizer_train_learns_from_the_sample_build_takes(tmp_path):
    """`mlmprep tokenizer train --train-chars N` and `build --tokenizer-train-chars N` learn the same tokenizer
    (the same sample), and N acts: the whole corpus gives another one."""
    from mlmprep.builder.run import build
    from mlmprep.builder.tokenizer_file import train_tokenizer_file
    from mlmprep.config import BuildConfig

    path = tmp_path / "c.txt"
    path.write_text("\n".join(tiny_documents(3000)) + "\n", encoding="utf-8")
    model = lambda file: json.loads(Path(file).read_text())["model"]  # noqa: E731
    _, _, used = train_tokenizer_file([str(path)], tmp_path / "a.json", vocab_size=300, train_chars=20_000)
    assert 19_000 < used["characters"] <= 20_000
    build(BuildConfig(corpus=(str(path),), vocab_size=300, tokenizer_train_chars=20_000, input_length=32, seeds=1,
                      out=str(tmp_path / "build")), log=lambda line: None)
    assert model(tmp_path / "a.json") == model(tmp_path / "build" / "tokenizer.json")
    train_tokenizer_file([str(path)], tmp_path / "all.json", vocab_size=300, train_chars=1 << 30)
    assert model(tmp_path / "all.json") != model(tmp_path / "a.json")


@pytest.mark.slow  # rewrites a build in format 1, then builds, verifies and remasks it
def test_a_format_1_build_still_loads_verifies_and_remasks(tmp_path, tiny_build):
    """Builds written before the sharded layout (format 1: files cut every 512 MiB, no rows_per_file)."""
    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.remask import remask
    from mlmprep.builder.verify import verify
    from mlmprep.format.load import open_epoch

    old = tmp_path / "old"
    manifest = format_1_copy(tiny_build, old)
    assert len(open_epoch(old, 1)) == manifest["splits"]["seed-1"]["rows"]
    assert remask(old, 3, engine=LocalEngine(workers=1)) == ["seed-2"]
    assert verify(old).ok


def test_a_build_that_stored_an_option_its_objective_ignores_still_remasks(tmp_path, tiny_build):
    """Before such options were refused a span build could record whole_word: true; its bytes never used it."""
    import shutil

    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.remask import remask

    plain, old = tmp_path / "plain", tmp_path / "old"
    shutil.copytree(tiny_build, plain)
    shutil.copytree(tiny_build, old)
    manifest = json.loads((old / "manifest.json").read_text())
    assert manifest["objective"] == "span"
    manifest["config"].update(whole_word=True, mlm_probability=0.4)
    (old / "manifest.json").write_text(json.dumps(manifest))
    one = LocalEngine(workers=1)
    assert remask(old, 3, engine=one) == remask(plain, 3, engine=one) == ["seed-2"]
    assert hashes(old / "seed-2") == hashes(plain / "seed-2")


def test_a_second_build_in_the_same_process_reads_its_own_staged_files(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """In-process tasks (--workers 1, or a reused Ray worker) cache staged shards: never a previous build's."""
    other = tmp_path / "other.txt"
    other.write_text("\n".join(tiny_documents(300, seed=5)) + "\n", encoding="utf-8")
    options = {"workers": 1, "pack": "doc", "rows_per_file": 40, "shard_bytes": 1 << 20}  # one shard: same names
    build_tiny(tmp_path / "out", tiny_corpus, tiny_tokenizer_path, **options)
    again = build_tiny(tmp_path / "out", other, tiny_tokenizer_path, force=True, **options)
    fresh = build_tiny(tmp_path / "fresh", other, tiny_tokenizer_path, **options)
    assert hashes(again) == hashes(fresh)


def test_parquet_row_groups_and_arrow_batches_shard_without_loss(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"row {i} " + "y" * (i % 29) if i % 11 else None for i in range(500)]
    table = pa.table({"text": texts})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=37)
    with pa.ipc.new_file(str(tmp_path / "t.arrow"), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=41):
            writer.write_batch(batch)
    for name in ("t.parquet", "t.arrow"):
        path = tmp_path / name
        whole_stats, part_stats = CorpusStats(), CorpusStats()
        whole = list(read_shard(file_shards([(path, path.stat().st_size)], 1 << 30)[0], ReadOptions(), whole_stats))
        shards = file_shards([(path, path.stat().st_size)], 600)
        assert len(shards) > 5, name
        parts = [d for s in shards for d in read_shard(s, ReadOptions(), part_stats)]
        assert parts == whole == [t for t in texts if t is not None] and part_stats == whole_stats, name


def test_a_dataset_corpus_in_row_range_shards_builds_the_same_windows_as_its_text(tmp_path, tiny_tokenizer_path):
    datasets = pytest.importorskip("datasets")
    docs = tiny_documents(300, seed=3)
    datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(tmp_path / "ds"))
    (tmp_path / "c.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    def run(out, **options):
        settings = {"tokenizer": str(tiny_tokenizer_path), "input_length": 32, "seeds": 2, "rows_per_file": 40,
                    "out": str(tmp_path / out), **options}
        build(BuildConfig(**settings), log=lambda _: None)
        return hashes(tmp_path / out)

    one = run("d1", dataset=str(tmp_path / "ds"), workers=1, shard_bytes=1 << 20)
    assert run("d2", dataset=str(tmp_path / "ds"), workers=2, shard_bytes=2000) == one
    assert run("t", corpus=(str(tmp_path / "c.txt"),), workers=2, shard_bytes=2000) == one


def test_the_driver_reads_its_shards_in_small_batches_and_stages_what_a_worker_stages(tmp_path, tiny_corpus,
                                                                                       tiny_tokenizer_path,
                                                                                       monkeypatch):
    """A shard the driver reads itself (tokenize_shard_in_driver, and dedup_stats's excerpts, through driver_task) goes
    in batches of at most DRIVER_CHUNK_CHARS characters (each threshold crossed by its last document), whatever
    --chunk-chars, which a worker's batches follow: the driver's threads would keep the larger batches' memory all
    build. Its staged files and per-document arrays are a worker's to the byte."""
    import shutil
    from dataclasses import replace

    import mlmprep.builder.pipeline as pipeline
    from mlmprep.builder.filters import excerpt
    from mlmprep.builder.record import dedup_stats
    from mlmprep.builder.staged import STAGING, Layout
    from mlmprep.config import BuildConfig
    from mlmprep.corpus.documents import open_corpus

    monkeypatch.setattr(pipeline, "DRIVER_CHUNK_CHARS", 2000)
    batches: list[list[int]] = []
    plain = pipeline.batched

    def recorded(texts, max_chars):
        for batch in plain(texts, max_chars):
            batches.append([len(text) for text in batch])
            yield batch

    monkeypatch.setattr(pipeline, "batched", recorded)
    cfg = BuildConfig(corpus=(str(tiny_corpus),), dedup="exact", decontaminate=False)
    assert cfg.chunk_chars > 20 * 2000
    shard = open_corpus(list(cfg.corpus)).shards(1 << 20, 1)[0]
    staged, results, sizes = {}, {}, {}
    for who in ("driver", "worker"):
        stage = tmp_path / who
        (stage / STAGING).mkdir(parents=True)
        shutil.copy(tiny_tokenizer_path, stage / "tokenizer.json")
        layout = Layout(cfg, str(stage), 1, content_length=32, window_length=32, doc_eos=1, format_version=3)
        task = pipeline.TokenizeTask(layout, shard)
        batches.clear()
        results[who] = (pipeline.tokenize_shard_in_driver(task) if who == "driver" else
                        pipeline.tokenize_shard(replace(task, hashed=False)))
        sizes[who] = list(batches)
        staged[who] = {p.name: p.read_bytes() for p in sorted((stage / STAGING).iterdir())}
    assert len(sizes["driver"]) > 20 and all(sum(b[:-1]) < 2000 for b in sizes["driver"])
    assert max(sum(b) for b in sizes["worker"]) > 10 * 2000  # the worker's batches are --chunk-chars'
    assert staged["driver"] == staged["worker"] and set(staged["driver"]) == {"shard-000000.ids", "shard-000000.lens"}
    driver, worker = results["driver"], results["worker"]
    assert driver.keys() == worker.keys() and driver["documents"] == 300
    assert all(np.array_equal(driver[k], worker[k]) if isinstance(driver[k], np.ndarray) else driver[k] == worker[k]
               for k in driver)

    class Largest:  # a Selection whose largest cluster starts at document 250
        def summary(self) -> dict:
            return {"largest_clusters": []}

        def largest(self) -> list[tuple[int, int]]:
            return [(2, 250)]

        def locate(self, document: int) -> tuple[int, int]:
            return 0, document

    batches.clear()
    shown = dedup_stats(Largest(), [task])["largest_clusters"]
    assert shown == [{"size": 2, "excerpt": excerpt(tiny_documents()[250])}]
    assert len(batches) > 10 and all(sum(b[:-1]) < 2000 for b in batches)


def test_a_changed_held_file_or_picks_file_is_a_one_line_error(tmp_path):
    """A shard's validation candidates' file (count, tokens, lengths, int32 ids) reads back as written, the ids where
    it says; a head or a side's numbers other than written is a one-line CacheError naming the file, not rows read
    from the wrong place."""
    from mlmprep.builder.staged import held_bytes, held_index, picks_bytes, side_picks, write_atomic
    from mlmprep.errors import CacheError

    ids = [np.array([5, 6, 7], np.int32), np.array([8, 9], np.int32)]
    held = tmp_path / "shard-000000.held"
    write_atomic(held, held_bytes([(ids[0], np.array([1, 2])), (ids[1], np.array([2]))]))
    lengths, first = held_index(held)
    data = np.frombuffer(held.read_bytes(), "<i4")  # a head of 2 + 3 int64 items, then the 5 ids
    assert lengths.tolist() == [1, 2, 2] and data[first:].tolist() == [5, 6, 7, 8, 9] and first == 10
    picks = tmp_path / "shard-000000.validation"
    picks.write_bytes(picks_bytes(np.array([0, 2]), np.array([1])))
    assert side_picks(picks, "validation", 3).tolist() == [0, 2] and side_picks(picks, "moved", 3).tolist() == [1]
    picks.write_bytes(picks_bytes(np.array([1, 2])))
    assert side_picks(picks, "train", 3).tolist() == [1, 2]
    whole = held.read_bytes()
    for path, data, read in ((held, np.array([3, 6], "<i8").tobytes() + whole[16:], lambda: held_index(held)),  # 6 ids
                             (held, whole[:32], lambda: held_index(held)),  # cut in the lengths
                             (held, whole[:-4], lambda: held_index(held)),  # cut in the ids
                             (picks, np.array([4, 0, 2], "<i8").tobytes(), lambda: side_picks(picks, "moved", 3)),
                             (picks, np.array([1, 0, 3], "<i8").tobytes(), lambda: side_picks(picks, "moved", 3))):
        path.write_bytes(data)
        with pytest.raises(CacheError, match="staging directory was changed") as error:
            read()
        assert "\n" not in str(error.value) and path.name in str(error.value)
