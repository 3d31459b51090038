"""Training from a build in object storage (moto's S3 server on loopback): the bounded local seed cache.

A run from s3:// equals the run from a local copy bit for bit, resumes (mid-epoch, at a boundary, after the
cache was wiped) included; the disk holds at most two seeds + validation whatever N; runs share one
download per file; faults are retried, a damaged file stops the run in one line; a slow store's fetch hides
behind the previous epoch; `mlmprep cache ls|clear`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.config import TrainConfig, parse_size, size_text
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format import cache as remote
from mlmprep.format.load import open_split, read_manifest
from mlmprep.train.epochs import epoch_plan
from mlmprep.train.loop import fit
from mlmprep.train.world import World
from tests.fakes import list_metadata_files, write_fake_build
from tests.s3server import Fault

pytest.importorskip("s3fs")
pytest.importorskip("moto")
pytestmark = pytest.mark.usefixtures("one_thread")

CPU = World(rank=0, size=1, device=torch.device("cpu"))
FAST = dict(max_tokens_per_batch=2048, max_tokens_per_microbatch=1024, max_examples_per_microbatch=32,
            warmup_steps=2, eval_every=0, log_every=2, save_every=0, deterministic=True)


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch):
    """No cache opened by one test is seen by the next; retries back off in milliseconds."""
    monkeypatch.setattr(remote, "BACKOFF_S", 0.01)
    yield
    for cache in remote.OPEN.values():
        cache.close()
    remote.OPEN.clear()


def upload(s3, build: Path) -> str:
    bucket = s3.bucket()
    s3.fs().put(str(build), f"{bucket}/build", recursive=True)
    return f"s3://{bucket}/build"


def fake_build(directory: Path, **options) -> Path:
    return list_metadata_files(write_fake_build(directory, format_version=3, **options))


def weights(run: Path, step: int) -> dict:
    return load_file(str(run / f"checkpoint-{step}" / "model" / "model.safetensors"))


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").open()]


def data_gets(proxy, split: str) -> int:
    """GET requests the proxy forwarded for a split's Arrow data files."""
    return sum(1 for method, path in proxy.requests if method == "GET" and f"/{split}/data-" in path)


def cache_bytes(cache_dir: Path) -> int:
    """Bytes in the cache (its locks left out), read while a background fetch renames files in it."""
    return remote.tree_bytes(cache_dir)


@pytest.mark.slow  # three runs through a local S3 server
def test_a_run_from_s3_equals_the_run_from_a_local_copy_resumes_and_a_wiped_cache_included(tmp_path, s3, tiny_build):
    url = upload(s3, tiny_build)
    base = dict(**FAST, epochs=3, seed=1, keep_checkpoints=5)
    steps = [len(epoch_plan(TrainConfig(data=str(tiny_build), **base), CPU, e)[1]) for e in range(3)]
    boundary, inside, total = steps[0], steps[0] + steps[1] // 2, sum(steps)
    a = fit(TrainConfig(data=str(tiny_build), out=str(tmp_path / "a"), **base, max_steps=total, decay_steps=total))

    cache_dir = tmp_path / "cache"
    b = TrainConfig(data=url, cache_dir=str(cache_dir), out=str(tmp_path / "b"), **base, max_steps=total,
                    decay_steps=total, resume=True)
    fit(replace(b, max_steps=boundary, resume=False))  # stops at the end of epoch 0
    shutil.rmtree(cache_dir)  # the cache wiped between stop and resume
    fit(replace(b, max_steps=inside))  # stops inside epoch 1
    final = fit(b)

    assert same_weights(weights(tmp_path / "a", total), weights(tmp_path / "b", total))
    assert (a["eval_loss"], a["tokens"], a["examples"]) == (final["eval_loss"], final["tokens"], final["examples"])
    fetches = [(r["epoch"], r["step"]) for r in metrics(tmp_path / "b") if r.get("event") == "fetch"]
    assert fetches == [(0, 0), (1, boundary), (1, inside), (2, boundary + steps[1])]  # each epoch start, each resume


def test_the_plan_of_a_fixed_length_build_needs_no_download_and_equals_the_splits_lengths(tmp_path, s3, tiny_build,
                                                                                          s3_proxy):
    url = upload(s3, tiny_build)
    remote.open_data(TrainConfig(data=url, cache_dir=str(tmp_path / "cache")))
    for epoch in range(2):
        planned = remote.open_epoch(url, epoch, planning=True)
        split = open_split(tiny_build / f"seed-{epoch}")  # the reference: the split itself, read in place
        assert np.array_equal(planned.enc_lengths, split.enc_lengths)
        assert np.array_equal(planned.dec_lengths, split.dec_lengths)
    assert data_gets(s3_proxy, "seed-0") == data_gets(s3_proxy, "seed-1") == 0


def test_the_plan_of_a_fixed_length_mlm_build_has_no_decoder_tokens(tmp_path, s3):
    data = fake_build(tmp_path / "data", objective="mlm", n_rows=30, n_seeds=2)
    url = upload(s3, data)
    remote.open_data(TrainConfig(data=url, cache_dir=str(tmp_path / "cache")))
    planned, split = remote.open_epoch(url, 1, planning=True), open_split(data / "seed-1")
    assert isinstance(planned, remote.RowLengths)  # from the schema, not a download
    assert np.array_equal(planned.enc_lengths, split.enc_lengths) and not planned.dec_lengths.any()


def test_a_variable_length_mlm_build_from_s3_trains_as_from_its_local_copy(tmp_path, s3):
    lengths = np.random.default_rng(2).integers(8, 40, size=150)
    data = fake_build(tmp_path / "data", objective="mlm", n_rows=150, lengths=lengths, n_seeds=3)
    url = upload(s3, data)
    cfg = TrainConfig(**FAST, epochs=4, data=str(data), out=str(tmp_path / "a"))
    a = fit(cfg)
    b = fit(replace(cfg, data=url, out=str(tmp_path / "b"), cache_dir=str(tmp_path / "cache")))
    assert same_weights(weights(tmp_path / "a", a["step"]), weights(tmp_path / "b", b["step"]))


def test_the_disk_holds_at_most_two_seeds_and_validation_whatever_n(tmp_path, s3):
    data = fake_build(tmp_path / "data", n_rows=80, n_seeds=5)
    url = upload(s3, data)
    manifest = read_manifest(data)
    seed = max(manifest.splits[f"seed-{k}"].bytes for k in range(5))
    small = sum(p.stat().st_size for p in data.iterdir() if p.is_file())  # manifest and tokenizer files
    bound = 2 * seed + manifest.splits["validation"].bytes + small + 1000
    cache_dir, peak = tmp_path / "cache", []

    def measure(step, k, rows, padding):
        peak.append(cache_bytes(cache_dir))

    fit(TrainConfig(**FAST, epochs=7, data=url, out=str(tmp_path / "run"), cache_dir=str(cache_dir)), hook=measure)
    assert 2 * seed <= max(peak) <= bound  # the next seed was fetched during an epoch, and no third one
    held = [p.name for p in next(cache_dir.iterdir()).iterdir() if p.name.startswith("seed-")]
    assert held == ["seed-1"]  # epoch 6, the last, reads seed-1; nothing is fetched past it


def test_a_cache_limit_with_room_keeps_seeds_so_each_downloads_once(tmp_path, s3, s3_proxy):
    data = fake_build(tmp_path / "data", n_rows=40, n_seeds=3)
    url = upload(s3, data)
    cfg = TrainConfig(**FAST, epochs=6, data=url, out=str(tmp_path / "a"), cache_dir=str(tmp_path / "cache"))
    fit(replace(cfg, cache_limit="10M"))
    assert [data_gets(s3_proxy, f"seed-{k}") for k in range(3)] == [1, 1, 1]
    s3_proxy.requests.clear()
    shutil.rmtree(tmp_path / "cache")
    fit(replace(cfg, out=str(tmp_path / "b")))  # the default: only what the current and next epochs need
    assert [data_gets(s3_proxy, f"seed-{k}") for k in range(3)] == [2, 2, 2]


def test_a_cache_limit_too_small_for_one_seed_is_refused_before_any_download(tmp_path, s3, s3_proxy, tiny_build):
    url = upload(s3, tiny_build)
    result = CliRunner().invoke(app, ["train", url, "--cache-dir", str(tmp_path / "cache"), "--cache-limit", "20k",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    line = result.output.strip()
    assert "\n" not in line and line.startswith("error: --cache-limit 20 kB is too small for " + url)
    from mlmprep.config import size_text

    def split_bytes(name: str) -> int:
        return sum(f.stat().st_size for f in (tiny_build / name).iterdir())

    largest = max(split_bytes(p.name) for p in tiny_build.glob("seed-*"))
    # the largest seed and validation, as their files (data and datasets metadata) size them
    assert f"up to {size_text(largest)} and validation {size_text(split_bytes('validation'))};" in line
    assert not any(method == "GET" and "/data-" in path for method, path in s3_proxy.requests)
    assert not (tmp_path / "run").exists()


def test_runs_sharing_the_cache_download_each_file_once_and_never_read_half_of_one(tmp_path, s3, s3_proxy,
                                                                                 tiny_build):
    url = upload(s3, tiny_build)
    s3_proxy.bandwidth = 100_000  # seed-0's 26 kB take a quarter second: the runs overlap
    cache_dir = tmp_path / "cache"
    first = remote.SeedCache(url, cache_dir)
    (first.root / "seed-0").mkdir()
    (first.root / "seed-0" / "data-00000-of-00001.arrow.part").write_bytes(b"a dead run's half file")
    caches = [first, remote.SeedCache(url, cache_dir), remote.SeedCache(url, cache_dir)]
    roots = [None] * 3
    threads = [threading.Thread(target=lambda k=k: roots.__setitem__(k, caches[k].ensure("seed-0", [])))
               for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert roots == [first.root] * 3
    assert data_gets(s3_proxy, "seed-0") == 1
    local = first.root / "seed-0" / "data-00000-of-00001.arrow"
    assert local.read_bytes() == (tiny_build / "seed-0" / "data-00000-of-00001.arrow").read_bytes()
    assert not list(first.root.rglob("*.part"))
    for cache in caches:
        cache.close()


def test_two_processes_sharing_the_cache_download_each_file_once(tmp_path, s3, s3_proxy, tiny_build):
    url = upload(s3, tiny_build)
    s3_proxy.bandwidth = 50_000  # seed-1's 26 kB take half a second: the processes overlap
    code = ("import sys\nfrom mlmprep.format.cache import SeedCache\n"
            "cache = SeedCache(sys.argv[1], sys.argv[2])\nprint(cache.ensure('seed-1', []))")
    runs = [subprocess.Popen([sys.executable, "-c", code, url, str(tmp_path / "cache")], stdout=subprocess.PIPE,
                             text=True) for _ in range(2)]
    roots = {run.communicate(timeout=120)[0].strip() for run in runs}
    assert [run.returncode for run in runs] == [0, 0] and len(roots) == 1
    assert data_gets(s3_proxy, "seed-1") == 1
    name = "seed-1/data-00000-of-00001.arrow"
    assert (Path(roots.pop()) / name).read_bytes() == (tiny_build / name).read_bytes()


def test_store_faults_are_retried_and_the_bytes_are_the_builds(tmp_path, s3, s3_proxy, tiny_build, monkeypatch):
    url = upload(s3, tiny_build)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # botocore's own retries of each read: fewer, so fewer back-offs
    is_data = lambda method, path: method == "GET" and "/seed-1/data-" in path  # noqa: E731
    faults = [s3_proxy.add(Fault(is_data, kind="503", times=2)), s3_proxy.add(Fault(is_data, kind="drop", times=1)),
              s3_proxy.add(Fault(is_data, kind="reset", times=5))]  # more than one read's client retries
    cache = remote.SeedCache(url, tmp_path / "cache")
    cache.ensure("seed-1", [])
    assert [f.hits for f in faults] == [2, 1, 5]
    name = "seed-1/data-00000-of-00001.arrow"
    assert (cache.root / name).read_bytes() == (tiny_build / name).read_bytes()
    cache.close()


def test_a_damaged_file_is_fetched_twice_then_stops_the_run_in_one_line(tmp_path, s3, s3_proxy, tiny_build):
    url = upload(s3, tiny_build)
    name = "seed-0/data-00000-of-00001.arrow"
    damaged = bytearray((tiny_build / name).read_bytes())
    damaged[-100] ^= 1  # one bit, the size unchanged
    s3.fs().pipe(f"{url[5:]}/{name}", bytes(damaged))
    result = CliRunner().invoke(app, ["train", url, "--cache-dir", str(tmp_path / "cache"), "--out",
                                      str(tmp_path / "run"), "--max-steps", "2"])
    assert result.exit_code == 2
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"error: {url}/{name}: sha256 differs from the manifest's in two downloads")
    assert data_gets(s3_proxy, "seed-0") == 2
    mirror = next((tmp_path / "cache").iterdir())
    assert not (mirror / "seed-0" / "data-00000-of-00001.arrow").exists()
    assert not list(mirror.rglob("*.part"))
    assert not list((tmp_path / "run").glob("checkpoint-*"))  # no step was trained


def test_a_store_gone_at_a_boundary_stops_the_run_with_its_checkpoints_then_it_resumes(tmp_path, s3, s3_proxy,
                                                                                        tiny_build, monkeypatch):
    url = upload(s3, tiny_build)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # botocore's own retries of each read: fewer, so the test is quick
    base = dict(**FAST, epochs=2, seed=2)
    steps = len(epoch_plan(TrainConfig(data=str(tiny_build), **base), CPU, 0)[1])
    a = fit(TrainConfig(data=str(tiny_build), out=str(tmp_path / "a"), **base))
    gone = Fault(lambda method, path: "/seed-1/" in path, kind="reset", times=0)
    s3_proxy.add(gone)

    def store_goes_away(step, k, rows, padding):
        if step == 1 and k == 0:
            gone.times = 10**6  # every request for seed-1 from now on: the connection is reset

    b = TrainConfig(data=url, out=str(tmp_path / "b"), cache_dir=str(tmp_path / "cache"), prefetch_epochs=0,
                    **{**base, "save_every": steps})
    with pytest.raises(CacheError, match=f"^{url}/seed-1/.*: cannot be read .* after 5 tries; .*--resume"):
        fit(b, hook=store_goes_away)
    assert [p.name for p in (tmp_path / "b").glob("checkpoint-*")] == [f"checkpoint-{steps}"]
    gone.times = 0  # the store answers again
    final = fit(replace(b, resume=True))
    assert same_weights(weights(tmp_path / "a", a["step"]), weights(tmp_path / "b", final["step"]))


def test_the_prefetch_hides_a_slow_stores_fetch_behind_the_epoch(tmp_path, s3, s3_proxy):
    data = fake_build(tmp_path / "data", n_rows=240, n_seeds=2)
    url = upload(s3, data)
    seed = read_manifest(data).splits["seed-1"].bytes
    s3_proxy.bandwidth = seed / 0.6  # a seed takes 0.6 s to fetch
    steps = len(epoch_plan(TrainConfig(data=str(data), **FAST), CPU, 0)[1])

    def slow_step(step, k, rows, padding):  # an epoch of 1.2 s or more: longer than a fetch
        if k == 0:
            time.sleep(1.2 / steps)

    def waits(prefetch: int) -> list[float]:
        out = tmp_path / f"run-{prefetch}"
        fit(TrainConfig(**FAST, epochs=2, data=url, out=str(out), cache_dir=str(tmp_path / f"cache-{prefetch}"),
                        prefetch_epochs=prefetch), hook=slow_step)
        return [r["fetch_wait_s"] for r in metrics(out) if r.get("event") == "fetch"]

    ahead, at_boundary = waits(1), waits(0)
    fetch = min(at_boundary[1:])  # what a boundary waits when nothing was fetched ahead: the fetch itself
    assert fetch >= 0.5
    assert max(ahead[1:]) < 0.1 * fetch, (ahead, at_boundary)


def test_cache_ls_and_clear(tmp_path, s3, tiny_build):
    url = upload(s3, tiny_build)
    cache_dir = tmp_path / "cache"
    runner = CliRunner()
    empty = runner.invoke(app, ["cache", "ls", "--cache-dir", str(cache_dir)])
    assert empty.output == f"{cache_dir}: no cached builds\n"
    cache = remote.SeedCache(url, cache_dir)
    cache.ensure("seed-0", [])
    listed = runner.invoke(app, ["cache", "ls", "--cache-dir", str(cache_dir)])
    assert listed.exit_code == 0
    size = size_text(cache_bytes(cache_dir))
    assert listed.output.splitlines()[0] == f"{url}  {size}  seed-0, validation  (open in a run)"
    kept = runner.invoke(app, ["cache", "clear", "--cache-dir", str(cache_dir)])  # open: left
    assert kept.output.splitlines() == [f"removed 0 cached builds (0 B) from {cache_dir}",
                                        f"left {url} ({size_text(cache_bytes(cache_dir))}): a run has it open"]
    cache.close()
    other = runner.invoke(app, ["cache", "clear", "s3://another/build", "--cache-dir", str(cache_dir)])
    assert other.output.startswith("removed 0 cached builds") and cache.root.is_dir()
    cleared = runner.invoke(app, ["cache", "clear", url, "--cache-dir", str(cache_dir)])
    assert cleared.output.startswith("removed 1 cached build (") and not cache.root.exists()


def test_a_url_without_a_manifest_is_one_line(tmp_path, s3):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/half/seed-0/data-00000-of-00001.arrow", b"an unfinished build")
    result = CliRunner().invoke(app, ["train", f"s3://{bucket}/half", "--cache-dir", str(tmp_path / "cache"),
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert result.output == f"error: s3://{bucket}/half: no manifest.json, so no finished build there; give the URL " \
                            "mlmprep build wrote to (its manifest is written last)\n"
    assert not (tmp_path / "run").exists()


def test_the_default_cache_dir_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert remote.default_cache_dir() == tmp_path / "xdg" / "mlmprep"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert remote.default_cache_dir() == tmp_path / "home" / ".cache" / "mlmprep"


@pytest.mark.parametrize("text, size", [("123", 123), ("40G", 40 * 10**9), ("1.5TB", 15 * 10**11),
                                        ("64GiB", 64 * 2**30), ("500 mb", 500 * 10**6), ("2Ki", 2048)])
def test_sizes_read_as_people_write_them(text, size):
    assert parse_size(text, "--cache-limit") == size


def test_a_bad_size_is_one_line_naming_the_option():
    with pytest.raises(ConfigError, match=r"^--cache-limit: '40 gigs' is not a size"):
        TrainConfig(cache_limit="40 gigs")
    with pytest.raises(ConfigError, match=r"^--fetch-bandwidth must be at least 1 byte"):
        TrainConfig(fetch_bandwidth="0")


def test_storage_options_reach_the_store_and_never_the_run_s_files(tmp_path, s3, tiny_build, monkeypatch):
    """The endpoint given only by --storage-options (the environment's leads nowhere); the options, which may hold
    credentials, are written nowhere in the run; a bad one is one line."""
    url = upload(s3, tiny_build)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    options = json.dumps({"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing", "token": "testing"})
    cfg = TrainConfig(data=url, cache_dir=str(tmp_path / "cache"), out=str(tmp_path / "run"), **FAST, max_steps=2,
                      storage_options=options)
    assert fit(cfg)["step"] == 2
    assert not [p for p in (tmp_path / "run").rglob("*") if p.is_file() and b"testing" in p.read_bytes()]
    result = CliRunner().invoke(app, ["train", url, "--storage-options", '{"no_such_option": 1}', "--cache-dir",
                                      str(tmp_path / "cache"), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2 and result.output.startswith(f"error: {url}: ") and "--storage-options" in \
        result.output and len(result.output.splitlines()) == 1, result.output
    assert not (tmp_path / "bad").exists()
