"""Build tasks detached from the staging directory, as on Ray nodes that share no disk with the driver (a build to
object storage), run here on the local engine (in the driver, and in worker processes): each task works in a
directory of its own, given the staged files it reads as the payloads of the tasks that made them. The bytes are
the attached build's; the driver's staging subfolder stays empty; the payloads of shards no file still reads are
let go. The Ray cluster itself is in test_ray.py."""

from __future__ import annotations

import pytest

from mlmprep.builder import run as build_run
from mlmprep.builder.dropped import DRIVER_FILES, split_rows
from mlmprep.builder.staged import STAGING
from tests.cli.test_build import build_args, cli, data_files
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
