"""Training reads what it planned: a build replaced (`build --force` into the same directory) or edited under a
running training stops the run in one line when the next epoch (or mixture pass) opens its split; the sizes are
checked each time, and each epoch's file hashes before it trains (the first's before the first step, each later
one's in the background while the epoch before it trains)."""

from __future__ import annotations

import json
import shutil

import pytest

from mlmprep.config import TrainConfig
from mlmprep.errors import CacheError
from mlmprep.format.load import open_epoch, read_manifest
from mlmprep.train import mixture
from mlmprep.train.loop import fit
from tests.fakes import write_fake_build

SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8, warmup_steps=2,
             eval_every=0, log_every=1, save_every=1, deterministic=True)


def replace_at_first_step(path, **other):
    """A training hook that, once, puts another build (other data, the same layout and sizes) where `path` was."""
    done = []

    def hook(step, k, rows, padding):
        if not done:
            shutil.rmtree(path)
            write_fake_build(path, **other)
            done.append(step)

    return hook


def assert_nothing_half_written(run) -> None:
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    if (run / "metrics.jsonl").exists():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            json.loads(line)


def test_a_build_replaced_under_a_run_stops_it_when_the_next_epoch_opens(tmp_path):
    data = write_fake_build(tmp_path / "data", n_rows=24)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=3, **SMALL)
    with pytest.raises(CacheError, match=r"not the build this run started on .*rebuilt or edited") as caught:
        fit(cfg, hook=replace_at_first_step(data, n_rows=24, seed=9))
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "run" / "final_metrics.json").exists()
    assert_nothing_half_written(tmp_path / "run")


def test_the_same_build_rewritten_in_place_trains_on(tmp_path):
    """A rebuild that gives the same bytes (same corpus, options and seed) is the same data: the run goes on."""
    data = write_fake_build(tmp_path / "data", n_rows=24)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=3, **SMALL)
    fit(cfg, hook=replace_at_first_step(data, n_rows=24))
    assert (tmp_path / "run" / "final_metrics.json").is_file()


def flip_a_token(split_dir) -> None:
    """Change one byte of a split's data file in place, keeping its size (an edit only a hash finds). Never through
    a truncating write: a run reading the file's map at that moment would die of SIGBUS past its new end."""
    path = split_dir / "data-00000-of-00001.arrow"
    middle = path.stat().st_size // 2
    with path.open("r+b") as f:
        f.seek(middle)
        byte = f.read(1)[0]
        f.seek(middle)
        f.write(bytes([byte ^ 1]))


def last_state(run) -> dict:
    """state.json of the run's last checkpoint."""
    last = max(run.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return json.loads((last / "state.json").read_text())


@pytest.mark.parametrize("seeds", [2, 1])
def test_a_later_epochs_changed_bytes_stop_the_run_before_a_step_reads_them(tmp_path, seeds):
    """No --rehash-data: a byte changed in the split epoch 1 reads (same size: only a hash finds it) stops the run
    where epoch 1 would begin, in one line, after every step of epoch 0 and before any of epoch 1. With one seed
    the changed split is the one epoch 0 trained on: a change during the run is found too."""
    data = write_fake_build(tmp_path / "data", n_rows=24, n_seeds=seeds)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=3, **SMALL)
    changed = []

    def change_at_first_step(step, k, rows, padding):
        if not changed and seeds == 1:  # after the first epoch's check: the background one must find it
            flip_a_token(data / "seed-0")
        changed.append(step)

    if seeds == 2:
        flip_a_token(data / "seed-1")
    name = f"seed-{seeds - 1}"
    with pytest.raises(CacheError, match=rf"{name}/data-00000-of-00001.arrow: sha256 differs") as caught:
        fit(cfg, hook=change_at_first_step)
    assert "\n" not in str(caught.value)
    assert {key: last_state(tmp_path / "run")[key] for key in ("epoch", "cursor")} == {"epoch": 1, "cursor": 0}
    assert_nothing_half_written(tmp_path / "run")


def test_the_first_epochs_changed_bytes_stop_the_run_before_its_first_step(tmp_path):
    """seed-0's and seed-1's data files swapped (the same sizes): refused before anything is written."""
    data = write_fake_build(tmp_path / "data", n_rows=24)
    a, b = data / "seed-0" / "data-00000-of-00001.arrow", data / "seed-1" / "data-00000-of-00001.arrow"
    first, second = a.read_bytes(), b.read_bytes()
    assert len(first) == len(second) and first != second
    a.write_bytes(second)
    b.write_bytes(first)
    with pytest.raises(CacheError, match=r"seed-0/data-00000-of-00001.arrow: sha256 differs"):
        fit(TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=1, **SMALL))
    assert not (tmp_path / "run").exists()


def test_an_edit_that_keeps_the_sizes_is_found_by_a_hash_at_once_with_rehash_data(tmp_path):
    data = write_fake_build(tmp_path / "data", n_rows=24)
    identity = read_manifest(data).identity()
    flip_a_token(data / "seed-1")
    assert len(open_epoch(data, 1, identity=identity)) == 24  # sizes only: the default, fast on every epoch
    with pytest.raises(CacheError, match=r"seed-1/data-00000-of-00001.arrow: sha256 differs"):
        open_epoch(data, 1, identity=identity, rehash=True)
    # and through train: the option acts whenever epoch 1's split opens (here when the run plans its steps)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=2, rehash_data=True, **SMALL)
    with pytest.raises(CacheError, match=r"seed-1/data-00000-of-00001.arrow: sha256 differs"):
        fit(cfg)
    assert_nothing_half_written(tmp_path / "run")


def test_an_edited_manifest_is_another_build(tmp_path):
    """A manifest whose recorded hashes changed (the files it names are others) is not the build planned on."""
    data = write_fake_build(tmp_path / "data", n_rows=24)
    identity = read_manifest(data).identity()
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["splits"]["seed-1"]["files"][0]["sha256"] = "0" * 64
    (data / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CacheError, match="not the build this run started on"):
        open_epoch(data, 1, identity=identity)
    assert len(open_epoch(data, 1)) == 24  # a new run on it plans on it as it is


def test_a_mixture_source_replaced_under_the_run_stops_it_at_its_next_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(mixture, "CHUNK_BATCHES", 4)
    big = write_fake_build(tmp_path / "big", n_rows=80)
    small = write_fake_build(tmp_path / "small", n_rows=24, window_length=96, n_seeds=6, seed=1)
    cfg = TrainConfig(sources=(str(big), str(small)), weights="0.2,0.8", max_steps=36, out=str(tmp_path / "run"),
                      **SMALL)
    with pytest.raises(CacheError, match=f"{small}: not the build this run started on"):
        fit(cfg, hook=replace_at_first_step(small, n_rows=24, window_length=96, n_seeds=6, seed=2))
    assert_nothing_half_written(tmp_path / "run")


def test_a_mixture_source_changed_in_place_is_refused_when_its_pass_opens(tmp_path, monkeypatch):
    """A byte changed in a source's seed file (same size): the mixture hashes each seed split as it opens it."""
    monkeypatch.setattr(mixture, "CHUNK_BATCHES", 4)
    big = write_fake_build(tmp_path / "big", n_rows=80)
    small = write_fake_build(tmp_path / "small", n_rows=24, window_length=96, n_seeds=6, seed=1)
    flip_a_token(small / "seed-0")
    cfg = TrainConfig(sources=(str(big), str(small)), weights="0.2,0.8", max_steps=36, out=str(tmp_path / "run"),
                      **SMALL)
    with pytest.raises(CacheError, match=f"{small}/seed-0/data-00000-of-00001.arrow: sha256 differs"):
        fit(cfg)
