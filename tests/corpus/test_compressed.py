"""Compressed corpus files (.gz, .bz2, .xz, .zst around .txt/.jsonl/.json/.csv), written here by the codecs' own
modules: read as the plain file reads, in any parts; built to the plain build's bytes on any number of workers;
damaged data is one line naming the file and how far it got, or with --on-decode-error skip the text before it;
a name that disagrees with the bytes is refused; streamed in bounded memory."""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import lzma
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import zstandard

from mlmprep.corpus import shards, streams
from mlmprep.corpus.documents import open_corpus
from mlmprep.corpus.files import CorpusStats, ReadOptions
from mlmprep.corpus.sources import resolve
from mlmprep.errors import CorpusError
from tests.builder.test_sharded import comparable, hashes
from tests.cli.test_build import assert_refused, build_args, cli, leftovers
from tests.conftest import build_tiny, tiny_documents

CODECS = {
    "gz": lambda data: gzip.compress(data, mtime=0),
    "bz2": lambda data: bz2.compress(data, 1),  # blocks of 100 kB: damage in the middle leaves some whole
    "xz": lzma.compress,
    "zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def compressed(path: Path, data: bytes, ext: str) -> Path:
    out = path.with_name(f"{path.name}.{ext}")
    out.write_bytes(CODECS[ext](data))
    return out


@pytest.fixture(scope="module")
def messy(tmp_path_factory) -> tuple[Path, bytes]:
    """Lines of words, blanks, whitespace-only lines, long lines, multi-byte characters, CRLF, an undecodable
    line, no line end at the end: where parts start and end matters."""
    rng = random.Random(7)
    pieces = ["alpha", "beta", "", "  ", "gamma delta", "é😀", "x" * 700, "\t"]
    lines = [" ".join(rng.choices(pieces, k=rng.randrange(0, 6))).encode() for _ in range(2500)]
    lines[100] += b"\xff"
    data = b"".join(line + rng.choice([b"\n", b"\n", b"\r\n"]) for line in lines) + b"last line, not ended"
    path = tmp_path_factory.mktemp("messy") / "m.txt"
    path.write_bytes(data)
    return path, data


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few KiB, so that a small file has many of them, and parts start and end inside them."""
    monkeypatch.setattr(streams, "READ_BYTES", 4096)
    monkeypatch.setattr("mlmprep.corpus.text.READ_BYTES", 4096)  # plain files' blocks
    monkeypatch.setattr(streams, "STREAM_BYTES", 512)


def plain_lines(data: bytes, policy: str = "replace") -> list[str]:
    """The non-blank lines of `data`, decoded independently of the readers."""
    out = []
    for raw in data.split(b"\n"):
        raw = raw.removesuffix(b"\r")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            if policy == "skip":
                continue
            text = raw.decode("utf-8", "replace")
        if text.strip():
            out.append(text)
    return out


def read_parts(path: Path, cuts: list[int], doc_sep: str, policy: str = "replace", digest: str = "",
               order: list[int] | None = None) -> tuple[list[str], CorpusStats]:
    """The documents of `path` read as shards cut at text offsets `cuts`, in order (or read in `order`, then put
    in order), and their summed counts; with a `digest`, each part may go on from a stream an earlier one left."""
    ranges = list(zip([0, *cuts], [*cuts, None]))
    parts, total = {}, CorpusStats()
    for k in order or range(len(ranges)):
        stats = CorpusStats()
        shard = shards.Shard(k, "file", str(path), *ranges[k], path.stat().st_size, digest=digest)
        parts[k] = list(shards.read_shard(shard, ReadOptions(doc_sep=doc_sep, on_decode_error=policy), stats))
        total.truncated_files += stats.truncated_files
        total.decode_errors += stats.decode_errors
    return [doc for k in sorted(parts) for doc in parts[k]], total


@pytest.fixture
def opens(monkeypatch) -> list[str]:
    """The compressed files opened for reading from their start, one entry an open; no streams kept before."""
    calls: list[str] = []
    real = streams.open_corpus_file

    def counted(path):
        calls.append(str(path))
        return real(path)

    for _, stream in streams._KEPT:
        stream.close()
    streams._KEPT.clear()
    monkeypatch.setattr(streams, "open_corpus_file", counted)
    return calls


@pytest.mark.parametrize("ext", list(CODECS))
def test_parts_of_a_compressed_file_read_the_documents_of_the_plain_file(tmp_path, messy, small_blocks, ext):
    path, data = messy
    packed = compressed(tmp_path / "m.txt", data, ext)
    rng = random.Random(ext)
    for doc_sep in ("line", "blank"):
        whole, _ = read_parts(path, [], doc_sep)
        if doc_sep == "line":
            assert whole == plain_lines(data)
        for trial in range(25):
            cuts = sorted(set(rng.sample(range(1, len(data) + 200), rng.randrange(1, 10))))
            if trial % 2:  # on line starts, and just after one, where an off-by-one shows
                cuts = sorted({data.find(b"\n", cut) + 1 + trial % 4 // 2 for cut in cuts if b"\n" in data[cut:]})
            got, stats = read_parts(packed, cuts, doc_sep)
            assert got == whole, (doc_sep, cuts)
            assert stats.decode_errors == 1
            order = rng.sample(range(len(cuts) + 1), len(cuts) + 1)  # parts going on from others, or not
            assert read_parts(packed, cuts, doc_sep, digest=f"{ext}{trial}", order=order)[0] == whole, (cuts, order)
            plain, _ = read_parts(path, cuts, doc_sep)  # the plain file's parts, aligned the plain way
            assert plain == whole
        dense = [*range(97, 9000, 97), len(data) // 2]  # parts inside one paragraph or line: empty
        assert read_parts(packed, dense, doc_sep)[0] == whole


@pytest.mark.parametrize("ext", list(CODECS))
def test_a_process_reading_a_files_parts_in_order_decompresses_it_once(tmp_path, messy, small_blocks, opens, ext):
    path, data = messy
    packed = compressed(tmp_path / "m.txt", data, ext)
    cuts = [len(data) * k // 10 for k in range(1, 10)]
    whole, _ = read_parts(path, [], "line")
    for doc_sep in ("line", "blank"):
        opens.clear()
        assert read_parts(packed, cuts, doc_sep)[0] == read_parts(path, [], doc_sep)[0]
        assert opens.count(str(packed)) == len(cuts) + 1  # without the file's digest: each part from the start
        opens.clear()
        assert read_parts(packed, cuts, doc_sep, digest=doc_sep)[0] == read_parts(path, [], doc_sep)[0]
        assert opens.count(str(packed)) == 1
    opens.clear()  # every other part, as one of two workers reads them: the stream goes on past the others'
    assert read_parts(packed, cuts, "line", digest="odd", order=[0, 2, 4, 6, 8, 1, 3, 5, 7, 9])[0] == whole
    assert opens.count(str(packed)) == 2
    planned = open_corpus([str(packed)]).shards(1 << 12, 4)  # a build's shards carry the file's digest
    assert len(planned) > 2 and {s.digest for s in planned} == {hashlib.sha256(packed.read_bytes()).hexdigest()}
    opens.clear()
    assert [doc for s in planned for doc in shards.read_shard(s, ReadOptions(), CorpusStats())] == whole
    assert opens.count(str(packed)) == 1


def test_a_build_closes_the_streams_its_process_kept(tmp_path, messy, opens, tiny_corpus, tiny_tokenizer_path):
    path, data = messy
    packed = compressed(tmp_path / "m.txt", data, "gz")
    read_parts(packed, [len(data) // 3, 2 * len(data) // 3], "line", digest="kept", order=[0])
    (kept,) = [stream for _, stream in streams._KEPT]
    build_tiny(tmp_path / "out", tiny_corpus, tiny_tokenizer_path)
    assert streams._KEPT == [] and kept.lines.gi_frame is None  # taken out and closed


def test_parts_go_on_only_from_a_stream_of_the_same_content(tmp_path, small_blocks, opens):
    """A file rewritten under its name (a new build, its new digest) is read again from its start."""
    old = "".join(f"old line {i}\n" for i in range(3000)).encode()
    new = "".join(f"new line {i}\n" for i in range(3000)).encode()
    path, plain = tmp_path / "m.txt.gz", tmp_path / "m.txt"
    cuts = [len(old) // 3, 2 * len(old) // 3]
    path.write_bytes(gzip.compress(old, mtime=0))
    plain.write_bytes(old)
    assert read_parts(path, cuts, "line", digest="old", order=[0, 1]) == read_parts(plain, cuts, "line", order=[0, 1])
    path.write_bytes(gzip.compress(new, mtime=0))
    plain.write_bytes(new)
    assert read_parts(path, cuts, "line", digest="new", order=[2]) == read_parts(plain, cuts, "line", order=[2])
    assert opens.count(str(path)) == 2


def test_every_text_format_reads_compressed_as_plain(tmp_path):
    docs = tiny_documents(60)
    files = {
        "a.jsonl": "".join(json.dumps({"text": d, "id": i}) + "\n" for i, d in enumerate(docs)).encode(),
        "b.json": json.dumps([{"text": d} for d in docs], indent=1).encode(),
        "c.csv": _csv(docs),
        "d.txt": ("\n".join(docs) + "\n").encode(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        expected = list(open_corpus([str(tmp_path / name)]).documents())
        assert expected == docs
        for ext in CODECS:
            packed = compressed(tmp_path / name, data, ext)
            assert list(open_corpus([str(packed)]).documents()) == docs, packed.name


def _csv(docs: list[str]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "text"])
    writer.writerows(enumerate(docs))
    return out.getvalue().encode()


def test_multi_member_gzip_and_multi_frame_zstd_read_every_member(tmp_path):
    """`cat a.gz b.gz` and pzstd's output: one stream of several members (frames), all of them read."""
    parts = [b"one\ntwo\n", b"three\n", b"four\nfive\n"]
    (tmp_path / "m.txt.gz").write_bytes(b"".join(gzip.compress(p) for p in parts))
    (tmp_path / "m.txt.zst").write_bytes(b"".join(zstandard.ZstdCompressor().compress(p) for p in parts))
    (tmp_path / "m.txt.bz2").write_bytes(b"".join(bz2.compress(p) for p in parts))
    for ext in ("gz", "zst", "bz2"):
        assert list(open_corpus([str(tmp_path / f"m.txt.{ext}")]).documents()) == ["one", "two", "three", "four",
                                                                                  "five"]


@pytest.mark.parametrize("ext", list(CODECS))
def test_a_bad_record_in_a_compressed_file_is_named_by_its_line_and_text_byte(tmp_path, ext):
    data = b'{"text": "one"}\n{"text": "two"}\n{"text": broken\n'
    path = compressed(tmp_path / "a.jsonl", data, ext)
    with pytest.raises(CorpusError, match=rf"a\.jsonl\.{ext} line 3 \(byte 32\): not valid JSON"):
        list(open_corpus([str(path)]).documents())


def damaged_copies(data: bytes, ext: str) -> dict[str, bytes]:
    """The compressed data cut short, and with bytes in its middle overwritten."""
    packed = CODECS[ext](data)
    middle = len(packed) // 2
    return {"truncated": packed[:middle], "corrupt": packed[:middle] + bytes(64) + packed[middle + 64:]}


@pytest.mark.parametrize("ext", list(CODECS))
def test_damaged_data_is_one_line_saying_how_far_it_got_or_skip_keeps_the_text_before_it(tmp_path, small_blocks,
                                                                                          ext):
    data = "".join(f"line {i} of some text to compress {i * 7919 % 1000}\n" for i in range(20000)).encode()
    for kind, bad in damaged_copies(data, ext).items():
        path = tmp_path / f"{kind}.txt.{ext}"
        path.write_bytes(bad)
        with pytest.raises(CorpusError) as caught:
            read_parts(path, [], "line")
        message = str(caught.value)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert (" truncated after " if kind == "truncated" else " corrupt (") in message
        # how far: whole blocks of text before the damage, and the lines they end
        text_bytes = int(message.split(" bytes of text")[0].rsplit("(", 1)[1].replace(",", ""))
        lines = int(message.split(" lines (")[0].rsplit(" ", 1)[1].replace(",", ""))
        assert text_bytes % streams.STREAM_BYTES == 0 and 0 < text_bytes < len(data)
        # skip: the whole lines before the damage, read in any parts, the file counted once
        whole, _ = read_parts(path, [], "line", "skip")
        assert len(whole) == lines
        if kind == "truncated":  # corrupt data may decode to other text before its check fails (gzip: at the end)
            assert data[:text_bytes].count(b"\n") == lines
            assert whole == plain_lines(data[: data.rfind(b"\n", 0, text_bytes) + 1])
        for cuts in ([], [len(data) // 5], [1000, text_bytes - 10, text_bytes + 5000]):
            for digest in ("", f"{kind}{cuts}"):  # fresh streams, or each part going on from the last
                docs, stats = read_parts(path, cuts, "line", "skip", digest)
                assert docs == whole, (kind, cuts)
                assert stats.truncated_files == 1
        for cut in (1000, text_bytes + 5000):  # a part after the damage, going on from one before it
            with pytest.raises(CorpusError) as again:
                read_parts(path, [cut], "line", digest=f"{kind}{cut}")
            assert str(again.value) == message


@pytest.mark.parametrize(("ext", "codec"), [("gz", "gzip"), ("zst", "zstd")])
def test_a_damaged_compressed_csv_names_the_rows_read_or_skip_keeps_them(tmp_path, ext, codec):
    docs = [f"row {i} " + "word " * 40 for i in range(20000)]
    path = tmp_path / f"t.csv.{ext}"
    path.write_bytes(damaged_copies(_csv(docs), ext)["truncated"])
    words = r"data truncated after [\d,]+ lines \([\d,]+ bytes of text\); download it again"
    with pytest.raises(CorpusError, match=rf"t\.csv\.{ext}: {codec} {words}"):
        list(open_corpus([str(path)]).documents())
    corpus = open_corpus([str(path)], on_decode_error="skip")
    kept = list(corpus.documents())
    assert 0 < len(kept) < len(docs) and kept == docs[: len(kept)]
    assert corpus.stats.truncated_files == 1


def test_a_name_that_disagrees_with_the_bytes_is_refused_in_one_line(tmp_path):
    text = b'{"text": "hello"}\n' * 50
    cases = {
        "gzipped.jsonl": (gzip.compress(text), "gzip-compressed data in a .jsonl file; rename it to gzipped.jsonl.gz"),
        "zst.txt": (zstandard.ZstdCompressor().compress(text), "zstd-compressed data in a .txt file; rename it to "
                    "zst.txt.zst"),
        "plain.jsonl.gz": (text, "not gzip data (its name ends in .gz)"),
        "bz.jsonl.xz": (bz2.compress(text), "not xz data (its name ends in .xz)"),
    }
    for name, (data, words) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(CorpusError, match=f"{name}: .*{words.replace('(', '.').replace(')', '.')}"):
            open_corpus([str(tmp_path / name)])


def test_the_cli_refuses_damaged_or_misnamed_files_in_one_line_and_leaves_nothing(tmp_path, tok):
    data = ("\n".join(tiny_documents()) + "\n").encode()
    (tmp_path / "cut.txt.gz").write_bytes(gzip.compress(data * 40)[:20000])
    (tmp_path / "misnamed.txt").write_bytes(gzip.compress(data))
    for name, words in (("cut.txt.gz", ("cut.txt.gz", "gzip data truncated after", "--on-decode-error skip")),
                        ("misnamed.txt", ("misnamed.txt", "rename it to misnamed.txt.gz"))):
        out = tmp_path / f"out-{name}"
        result = cli(*build_args(tmp_path / name, out, tok))
        assert_refused(result.exit_code, result.stderr, *words)
        assert leftovers(out) == []
    out = tmp_path / "kept"
    result = cli(*build_args(tmp_path / "cut.txt.gz", out, tok, "--on-decode-error", "skip"))
    assert result.exit_code == 0, result.stderr
    assert "1 compressed files read up to damaged data" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corpus"]["stats"]["truncated_files"] == 1


def test_directories_and_globs_pick_compressed_files_up_and_skip_hidden_ones(tmp_path):
    folder = tmp_path / "c4"
    folder.mkdir()
    for name in ("b.json.gz", "a.jsonl.zst", "c.txt.bz2", "d.csv.xz", ".hidden.jsonl.gz", "e.tar.gz", "f.parquet.gz"):
        (folder / name).write_bytes(b"")
    found, skipped = resolve([str(folder)])
    assert [p.name for p in found] == ["a.jsonl.zst", "b.json.gz", "c.txt.bz2", "d.csv.xz"]
    assert sorted(Path(s).name for s in skipped) == [".hidden.jsonl.gz", "e.tar.gz", "f.parquet.gz"]
    found, _ = resolve([str(folder / "*.gz")])
    assert [p.name for p in found] == ["b.json.gz"]  # a glob skips hidden files; the archive is skipped
    with pytest.raises(CorpusError, match=r"e\.tar\.gz: unsupported file type \.tar\.gz; use one of .*\.gz"):
        resolve([str(folder / "e.tar.gz")])


def test_a_compressed_file_with_no_known_format_inside_is_read_as_text_with_a_note(tmp_path, tok):
    """changelog.gz and changelog.Debian.gz (Debian's own names) build as the same text in .txt does, and the
    summary names them and the rename that says what they hold; an archive or a Parquet file inside is still
    skipped in a directory and refused by name."""
    text = "".join(doc + "\n" for doc in tiny_documents(200, seed=5)).encode()
    folder = tmp_path / "doc"
    folder.mkdir()
    (folder / "changelog.gz").write_bytes(CODECS["gz"](text[: len(text) // 2]))
    (folder / "changelog.Debian.gz").write_bytes(CODECS["gz"](text[len(text) // 2 :]))
    (folder / "e.tar.gz").write_bytes(b"")
    found, skipped = resolve([str(folder)])
    assert [p.name for p in found] == ["changelog.Debian.gz", "changelog.gz"]
    assert [Path(s).name for s in skipped] == ["e.tar.gz"]
    plain = tmp_path / "plain.txt"
    plain.write_bytes(text[len(text) // 2 :] + text[: len(text) // 2])  # the directory's order
    result = cli(*build_args(folder, tmp_path / "gz", tok))
    assert result.exit_code == 0, result.stderr
    (note,) = [line for line in result.stdout.splitlines() if line.startswith("note:")]
    assert note == (f"note: 2 compressed files with no known format inside read as text, one document per line "
                    f"({folder / 'changelog.Debian.gz'}, {folder / 'changelog.gz'}); rename to NAME.txt.gz (or "
                    ".jsonl.gz, .csv.gz, ...) to say what they hold")
    assert cli(*build_args(plain, tmp_path / "txt", tok)).exit_code == 0
    assert hashes(tmp_path / "gz") == hashes(tmp_path / "txt")
    for name in ("e.tar.gz", "f.parquet.gz", "g.gz.gz"):
        with pytest.raises(CorpusError, match=rf"{re.escape(name)}: unsupported file type"):
            (folder / name).write_bytes(b"")
            resolve([str(folder / name)])


# ------------------------------------------------------------------------------------------------ builds


@pytest.fixture(scope="module")
def jsonl_corpus(tmp_path_factory) -> tuple[Path, bytes]:
    docs = tiny_documents(400, seed=3)
    data = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    path = tmp_path_factory.mktemp("jsonl") / "c.jsonl"
    path.write_bytes(data)
    return path, data


@pytest.mark.parametrize("ext", list(CODECS))
def test_a_compressed_corpus_builds_the_bytes_of_the_plain_one_on_any_number_of_workers(tmp_path, jsonl_corpus,
                                                                                        tiny_tokenizer_path, ext):
    path, data = jsonl_corpus
    options = {"rows_per_file": 40, "shard_bytes": 3000}
    reference = hashes(build_tiny(tmp_path / "plain", path, tiny_tokenizer_path, workers=1, **options))
    packed = compressed(tmp_path / path.name, data, ext)
    plans = shards.file_shards([(packed, packed.stat().st_size)], 3000, streams=2)
    assert len(plans) >= 2 and plans[1].start > 0  # parts of the text: each but the first skips to its start
    builds = {}
    for workers in (1, 2):
        builds[workers] = build_tiny(tmp_path / f"{ext}-{workers}", packed, tiny_tokenizer_path, workers=workers,
                                     **options)
        assert hashes(builds[workers]) == reference, workers
    assert comparable(builds[1])["statistics"] == comparable(builds[2])["statistics"]


def test_a_compressed_txt_with_blank_line_documents_builds_as_the_plain_one(tmp_path, tiny_tokenizer_path):
    docs = tiny_documents(300, seed=5)
    data = "".join(f"{d}\n{d[:40]}\n\n" if i % 3 else f"{d}\n \n" for i, d in enumerate(docs)).encode()
    plain = tmp_path / "p.txt"
    plain.write_bytes(data)
    options = {"rows_per_file": 40, "shard_bytes": 2000, "doc_sep": "blank", "workers": 2}
    reference = hashes(build_tiny(tmp_path / "plain", plain, tiny_tokenizer_path, **options))
    packed = compressed(plain, data, "zst")
    assert hashes(build_tiny(tmp_path / "zst", packed, tiny_tokenizer_path, **options)) == reference


def test_shards_of_compressed_files_cover_their_text_in_even_ranges_shared_among_the_files(tmp_path):
    data = b"".join(b"%d some words on a line\n" % i for i in range(50000))
    packed = compressed(tmp_path / "big.txt", data, "gz")
    size = packed.stat().st_size
    assert shards.text_estimate(packed, size) == len(data)  # under a MiB compressed: exact
    plans = shards.file_shards([(packed, size)], 1 << 16, streams=4)  # gzip: 16 parts at least
    step = -(-len(data) // 16)
    assert [(s.start, s.end) for s in plans] == [(k * step, (k + 1) * step if k < 15 else None) for k in range(16)]
    assert sum(s.nbytes for s in plans) == size
    assert len(shards.file_shards([(packed, size)], 1 << 30, streams=4)) == 1  # one shard's worth: one shard
    assert len(shards.file_shards([(packed, size)], 1 << 16, streams=1)) == 1
    other = compressed(tmp_path / "other.txt", data, "zst")
    two = shards.file_shards([(packed, size), (tmp_path / "m.txt", 10), (other, other.stat().st_size)], 1 << 16, 4)
    assert [Path(s.source).name for s in two] == ["big.txt.gz"] * 8 + ["m.txt"] + ["other.txt.zst"] * 8
    many = [(compressed(tmp_path / f"{k}.txt", data, "gz"), 0) for k in range(20)]
    assert len(shards.file_shards(many, 1 << 16, streams=4)) == 20  # one each: no file is skipped through


# ------------------------------------------------------------------------------------------------ memory

PEAK = textwrap.dedent("""
    import os, sys
    from mlmprep.builder.engine.base import attempt
    from mlmprep.corpus.files import CorpusStats, ReadOptions
    from mlmprep.corpus.shards import Shard, read_shard
    path = sys.argv[1]
    attempt(lambda shard: sum(1 for _ in read_shard(shard, ReadOptions(), CorpusStats())),  # as a worker reads
            Shard(0, "file", path, 0, None, os.path.getsize(path)))
    # VmHWM: this address space's peak (ru_maxrss would keep the forking test process's, across exec)
    print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
""")


def peak_kb(path: Path) -> int:
    run = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, timeout=300,
                         check=True)
    return int(run.stdout)


def test_peak_memory_does_not_grow_with_the_compressed_file(tmp_path):
    """A worker reading a .gz of 80 MB of text peaks where one reading 8 MB does (+10%): streamed, never whole."""
    line = b"a line of text that repeats, as web text does, with a number: %d\n"
    peaks = {}
    for name, count in (("small", 120_000), ("large", 1_200_000)):
        path = tmp_path / f"{name}.txt.gz"
        with gzip.open(path, "wb", compresslevel=1) as f:
            for start in range(0, count, 100_000):
                f.write(b"".join(line % i for i in range(start, min(count, start + 100_000))))
        peaks[name] = peak_kb(path)
    assert peaks["large"] <= 1.10 * peaks["small"], peaks


@pytest.mark.slow  # streams tens of MB of real text several times
def test_peak_memory_does_not_creep_up_over_real_text(tmp_path, corpora):
    """Real text (lines of every length, ASCII blocks beside non-ASCII ones) decoded a MiB at a time: 220 MB of
    it peak where 22 MB do (+10%), the heap never growing with fragments of the blocks freed."""
    text = (corpora / "pydocs.txt").read_bytes()
    peaks = {}
    for copies in (2, 20):
        path = tmp_path / f"x{copies}.txt.gz"
        with gzip.open(path, "wb", compresslevel=1) as f:
            for _ in range(copies):
                f.write(text)
        peaks[copies] = peak_kb(path)
    assert peaks[20] <= 1.10 * peaks[2], peaks


def test_gzip_and_zstd_files_are_read_in_many_parts_bzip2_and_xz_in_what_the_workers_ask(tmp_path):
    """Output files are written as the parts they read come in, so a quick codec's file is cut finer than the workers
    alone would ask; a slow codec's is not (each part decompresses the text before it again); one process reads a
    file whole."""
    text = "".join(f"document {i} with a few words in it\n" for i in range(40_000)).encode()
    writers = {"gz": lambda b: gzip.compress(b, mtime=0), "zst": zstandard.ZstdCompressor().compress,
               "bz2": bz2.compress, "xz": lzma.compress}
    parts = {}
    for ending, compress in writers.items():
        path = tmp_path / f"c.txt.{ending}"
        path.write_bytes(compress(text))
        parts[ending] = [len(shards.file_shards([(path, path.stat().st_size)], 1024, streams)) for streams in (1, 4)]
    assert parts == {"gz": [1, 16], "zst": [1, 16], "bz2": [1, 4], "xz": [1, 4]}


def test_a_large_gzip_or_zstd_file_is_cut_into_parts_of_at_most_32_mib_of_text_whatever_the_workers(tmp_path):
    """A reading task holds its part's arrays, so a large compressed file is never one task, even among many files
    or in one process; bzip2 and xz, too slow to decompress the text before a part again, are not cut for it."""
    text = b"the same line of a few words\n" * 2_400_000  # 69.6 MB: under a MiB compressed, so estimated exactly
    for ending, compress in {"gz": lambda b: gzip.compress(b, 1, mtime=0), "zst": zstandard.ZstdCompressor().compress,
                             "bz2": bz2.compress}.items():
        path = tmp_path / f"big.txt.{ending}"
        path.write_bytes(compress(text))
        for asked in (1, 2):
            plans = shards.file_shards([(path, path.stat().st_size)], 1 << 30, asked)
            if ending == "bz2":  # a 1 GiB shard asked for: one part
                assert len(plans) == 1
                continue
            assert len(plans) == 3  # ceil(69.6 MB / 32 MiB)
            ends = [s.end if s.end is not None else len(text) for s in plans]
            assert [s.start for s in plans] == [0, *ends[:-1]]
            assert max(e - s.start for s, e in zip(plans, ends)) <= 32 << 20
    many = [(path.with_name(f"{k}.txt.gz"), 0) for k in range(6)]
    for p, _ in many:
        p.write_bytes(gzip.compress(text, 1, mtime=0))
    assert len(shards.file_shards(many, 1 << 30, streams=4)) == 18  # more files than streams: still 3 parts each
