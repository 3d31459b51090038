"""Build tasks detached from the staging directory, as on Ray nodes that share no disk with the driver (a build to
object storage), run here on the local engine (in the driver, and in worker processes): each task works in a
directory of its own, given the staged files it reads as the payloads of the tasks that made them. The bytes are
the attached build's; the driver's staging subfolder stays empty; the payloads of shards no file still reads are
let go. The Ray cluster itself is in test_ray.py."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from mlmprep.builder import outputs as build_outputs
from mlmprep.builder import run as build_run
from mlmprep.builder import staged
from mlmprep.builder.dropped import DRIVER_FILES, split_rows
from mlmprep.builder.staged import STAGING
from tests.cli.test_build import build_args, cli, data_files, manifest
from tests.conftest import tiny_documents


@pytest.fixture
def detached(monkeypatch) -> list[tuple[list[str], int]]:
    """Every build's tasks detached; for each finished task, what the driver's staging subfolder held (besides the
    --keep-dropped files the tasks send it) and how many shards' token files the driver kept payloads of, just
    before it took the task's payload."""
    seen: list[tuple[list[str], int]] = []

    class Detached(build_run.Staging):
        def __init__(self, stage, engine, detached, apart=False):
            super().__init__(stage, engine, detached=True, apart=apart)

        def take(self, run, index):
            seen.append((sorted(p.name for p in (self.stage / STAGING).iterdir()
                                if not p.name.endswith(DRIVER_FILES)),
                         sum(name.endswith(".ids") for name in self.held)))
            super().take(run, index)

    monkeypatch.setattr(build_run, "Staging", Detached)
    return seen


@pytest.mark.parametrize("more", [("--workers", "1"), ("--workers", "2"), ("--workers", "1", "--pack", "doc"),
                                  ("--workers", "1", "--method", "text"), ("--workers", "1", "--no-decontaminate"),
                                  ("--workers", "2", "--dedup", "near", "--dedup-partitions", "3")],
                         ids=["stream", "processes", "doc", "text", "stream-no-decontaminate", "partitions"])
def test_detached_tasks_build_the_attached_build_s_bytes(tmp_path, tiny_corpus, tok, detached, monkeypatch, more):
    # half the documents held out: a validation file fills (and lets its shards go) as often as a training one
    args = ("--shard-bytes", "3000", "--rows-per-file", "50", "--validation-fraction", "0.5", *more)
    in_driver = args[:-2] if "--dedup-partitions" in args else args  # the attached build dedups in the driver
    with monkeypatch.context() as attached:
        attached.setattr(build_run, "Staging", build_run.Staging.__mro__[1])  # the real one
        assert cli(*build_args(tiny_corpus, tmp_path / "attached", tok, *in_driver)).exit_code == 0
    assert not detached
    result = cli(*build_args(tiny_corpus, tmp_path / "detached", tok, *args))
    assert result.exit_code == 0, result.stderr
    assert data_files(tmp_path / "detached") == data_files(tmp_path / "attached")
    assert len(detached) > 10
    assert all(staged == [] for staged, _ in detached), detached  # no task wrote into the driver's stage
    shards = tiny_corpus.stat().st_size // 3000  # about
    # in one process, in order: token files go as files are written; with decontamination, a task's payload holds
    # its validation candidates' tokens too (staged apart), which wait for the last shard, so every payload stays
    if "--no-decontaminate" in more:
        assert max(held for _, held in detached) <= shards // 2, (shards, str([held for _, held in detached]))


def test_detached_tasks_keep_the_attached_build_s_dropped_split(tmp_path, tok, detached, monkeypatch):
    """--keep-dropped with tasks that cannot write the driver's stage: what the filters, paragraph dedup and dedup
    removed (a duplicate's text read back from its shard's) makes the attached build's `dropped` split."""
    docs = tiny_documents(400, seed=3)
    docs += docs[5:60:3] + [f"{doc} Once more, and again." for doc in docs[7:80:5]]  # copies, lines seen before
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    args = ("--shard-bytes", "4000", "--workers", "2", "--keep-dropped", "--filters", "c4", "--dedup", "near")
    with monkeypatch.context() as attached:
        attached.setattr(build_run, "Staging", build_run.Staging.__mro__[1])
        assert cli(*build_args(corpus, tmp_path / "attached", tok, *args)).exit_code == 0
    result = cli(*build_args(corpus, tmp_path / "detached", tok, *args))
    assert result.exit_code == 0, result.stderr
    assert data_files(tmp_path / "detached") == data_files(tmp_path / "attached")
    assert all(staged == [] for staged, _ in detached), detached
    reasons = {reason for _, reason, _ in split_rows(tmp_path / "detached")}
    assert {"dedup_near", "c4_few_sentences"} <= reasons, reasons



@pytest.fixture
def fetches(monkeypatch) -> dict[str, dict[str, tuple[int, list[tuple[int, bytes]]]]]:
    """What each detached task fetched, by task: staged name -> (the file's size, the pieces (start, bytes) it was
    sent: the whole file, or a slice's)."""
    seen: dict[str, dict] = {}
    running = []
    real_run, real_write = build_outputs.run_detached, staged.write_fetched

    def run_detached(task):
        running.append(task.describe())
        try:
            return real_run(task)
        finally:
            running.pop()

    def write_fetched(path, data):
        seen.setdefault(running[-1], {})[path.name] = (len(data), [(0, data)]) if isinstance(data, bytes) else data
        real_write(path, data)

    monkeypatch.setattr(build_outputs, "run_detached", run_detached)
    monkeypatch.setattr(staged, "write_fetched", write_fetched)
    return seen


def planted_copies(tmp_path) -> Path:
    """400 documents, then exact and near copies of some of them."""
    docs = tiny_documents(400, seed=5)
    docs += docs[3:200:4] + [f"{doc} Once more, and again." for doc in docs[7:300:6]]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return corpus


BANDS, ROWS = 12, 4


@pytest.mark.parametrize("dedup", ["near", "exact"])
def test_a_detached_partition_task_fetches_its_own_partition_s_records_alone(tmp_path, tok, detached, fetches,
                                                                             monkeypatch, dedup):
    """In one process, so every fetch is seen: the bytes of the build that dedups in the driver; each partition
    task fetched only scratch files, never a token file; every shard's `.dedup` and `.hashes` files split among the
    partition tasks, each record sent to exactly one (the index to all), each `.dedup` key to the partition its top
    bits name; near dedup's signatures, the rows of the documents in the partition's groups alone."""
    parts = 4
    corpus = planted_copies(tmp_path)
    args = ("--shard-bytes", "4000", "--workers", "1", "--validation-fraction", "0.3", "--dedup", dedup,
            *(("--dedup-bands", str(BANDS), "--dedup-rows", str(ROWS)) if dedup == "near" else ()))
    with monkeypatch.context() as attached:
        attached.setattr(build_run, "Staging", build_run.Staging.__mro__[1])
        assert cli(*build_args(corpus, tmp_path / "in-driver", tok, *args)).exit_code == 0
    result = cli(*build_args(corpus, tmp_path / "detached", tok, *args, "--dedup-partitions", str(parts)))
    assert result.exit_code == 0, result.stderr
    assert data_files(tmp_path / "detached") == data_files(tmp_path / "in-driver")
    assert manifest(tmp_path / "detached")["corpus"]["stats"]["dedup"]["documents_dropped"] >= 50
    partition_tasks = {name: got for name, got in fetches.items() if " partition " in name}
    assert len(partition_tasks) == 2 * parts, sorted(fetches)  # dedup's and decontamination's
    for name, got in fetches.items():  # the scratch files go to the partition tasks alone
        scratch = [f for f in got if f.endswith((".dedup", ".sig", ".hashes", ".fates"))]
        assert (scratch == list(got)) if name in partition_tasks else not scratch, (name, sorted(got))
    shards = sorted({f.rsplit(".", 1)[0] for got in partition_tasks.values() for f in got if f.endswith(".hashes")})
    assert len(shards) > 5
    for suffix, index_at in (("dedup", lambda size: (0, 8 * (parts + 1))),
                             ("hashes", lambda size: (size - 8 * 2 * (parts + 1) * 2, size))):
        for shard in shards:
            sent = [got[f"{shard}.{suffix}"] for got in partition_tasks.values() if f"{shard}.{suffix}" in got]
            assert len(sent) == parts
            size, index = sent[0][0], index_at(sent[0][0])
            ranges = [[(a, a + len(piece)) for a, piece in pieces] for _, pieces in sent]
            assert all(index in r for r in ranges)
            records = sorted(x for r in ranges for x in r if x != index)
            covered = [0] + [x for r in sorted([index, *records]) for x in r] + [size]
            assert covered[::2] == covered[1::2], (suffix, shard, records)  # no gap, no overlap, nothing more
    for p in range(parts):
        check_keys_and_rows(partition_tasks[f"dedup partition {p} of {parts}"], shards, p, parts, dedup)


def check_keys_and_rows(got: dict, shards: list[str], p: int, parts: int, dedup: str) -> None:
    """Dedup partition task p's `.dedup` slices as sent (holes read as zeros): the keys of partition p alone (by their
    top 32 bits); with near dedup, the `.sig` rows it was sent: those of the documents whose (band, key) two records
    of the partition share, and no more."""
    records, base, sig_rows = [], 0, set()
    for shard in shards:
        size, pieces = got[f"{shard}.dedup"]
        whole = bytearray(size)
        for at, piece in pieces:
            whole[at:at + len(piece)] = piece
        items = np.frombuffer(bytes(whole), "<u8")
        offsets = items[:parts + 1].astype(np.int64)
        count = int(offsets[-1])
        keys, refs = items[parts + 1:parts + 1 + count], items[parts + 1 + count:]
        lo, hi = int(offsets[p]), int(offsets[p + 1])
        assert not keys[:lo].any() and not keys[hi:].any() and not refs[:lo].any() and not refs[hi:].any()
        assert all(int(k) >> 32 == 0 or (int(k) >> 32) * parts >> 32 == p for k in keys[lo:hi])
        records += [(int(r) >> 32, int(k), base + (int(r) & 0xFFFFFFFF)) for k, r in zip(keys[lo:hi], refs[lo:hi])]
        if dedup == "near" and f"{shard}.sig" in got:
            size, pieces = got[f"{shard}.sig"]
            width = 4 * BANDS * ROWS
            assert size == width * count // BANDS and all(at % width == 0 == len(r) % width for at, r in pieces)
            sig_rows |= {base + row for at, r in pieces for row in range(at // width, (at + len(r)) // width)}
        base += count // (BANDS if dedup == "near" else 1)
    groups = collections.Counter((band, key) for band, key, _ in records)
    members = {doc for band, key, doc in records if groups[band, key] > 1}
    if dedup == "near":
        assert len(members) > 5 and sig_rows == members, (p, sorted(sig_rows ^ members))
    else:
        assert not any(f.endswith(".sig") for f in got)
