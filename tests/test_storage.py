"""Builds on object storage, against a real S3 server (moto's server mode on loopback, tests/s3server.py):
corpus, tokenizer and output as s3:// URLs give the local build's bytes; manifest.json is the commit point,
so a failed, unfinished or replaced build never reads as complete; one writer at a time; faults are
retried; wrong credentials, a missing bucket and a missing extra are one line before any work."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli.test_build import assert_refused, build_args, cli, cli_command, cli_env, data_files
from tests.s3server import Fault

pytest.importorskip("s3fs")
pytest.importorskip("moto")


def upload_inputs(s3, bucket: str, corpus, tok: str) -> tuple[str, str]:
    """The tiny corpus under s3://BUCKET/corpus/ and the tokenizer at s3://BUCKET/tok/tokenizer.json."""
    fs = s3.fs()
    fs.put(str(corpus), f"{bucket}/corpus/{corpus.name}")
    fs.pipe(f"{bucket}/corpus/.hidden.txt", b"never read\n")  # skipped, as a directory walk skips it
    fs.pipe(f"{bucket}/corpus/notes.md", b"never read\n")  # not a corpus type: skipped
    fs.put(tok, f"{bucket}/tok/tokenizer.json")
    return f"s3://{bucket}/corpus/", f"s3://{bucket}/tok/tokenizer.json"


def remote_files(s3, url: str) -> dict[str, bytes]:
    """Every object under the prefix `url` by its relative name, manifest.json left out (as data_files does)."""
    fs, root = s3.fs(), url.removeprefix("s3://").rstrip("/")
    return {name[len(root) + 1:]: fs.cat(name) for name in sorted(fs.find(root))
            if not name.endswith("/manifest.json")}


def listing(s3, url: str) -> list[str]:
    root = url.removeprefix("s3://").rstrip("/")
    return sorted(name[len(root) + 1:] for name in s3.fs().find(root))


def remote_manifest(s3, url: str) -> dict:
    return json.loads(s3.fs().cat(url.removeprefix("s3://") + "/manifest.json"))


def run(*args, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI as a real process with `env` added (one error line and the exit code are the point)."""
    return subprocess.run(cli_command(*args), env={**cli_env(), **env}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory, tiny_corpus, tok):
    """The tiny build on local disk: what every build through S3 must equal byte for byte."""
    out = tmp_path_factory.mktemp("local") / "data"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    return out


def test_a_build_from_and_to_s3_equals_the_local_build(s3, tiny_corpus, tok, local_reference):
    bucket = s3.bucket()
    corpus, tokenizer = upload_inputs(s3, bucket, tiny_corpus, tok)
    out = f"s3://{bucket}/builds/data"
    result = cli(*build_args(corpus, out, tokenizer))
    assert result.exit_code == 0, result.stderr
    assert remote_files(s3, out) == data_files(local_reference)
    manifest = remote_manifest(s3, out)
    assert [f["path"] for f in manifest["corpus"]["files"]] == [corpus + tiny_corpus.name]
    assert manifest["corpus"]["fingerprint"] == json.loads((local_reference / "manifest.json").read_text())[
        "corpus"]["fingerprint"]
    assert ".mlmprep-lock" not in listing(s3, out)  # released
    again = cli(*build_args(corpus, out, tokenizer))
    assert again.exit_code == 0 and "up to date" in again.stdout


def test_a_local_corpus_to_s3_and_back_with_verify_inspect_and_remask(s3, tmp_path, tiny_corpus, tok,
                                                                     local_reference):
    out = f"s3://{s3.bucket()}/data"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    checked = cli("verify", out)
    assert checked.exit_code == 0 and checked.stdout.startswith("ok:"), checked.stdout
    shown = cli("inspect", out, "--split", "validation", "--examples", "2")
    assert shown.exit_code == 0 and out in shown.stdout and "/mlmprep-" not in shown.stdout, shown.stdout
    # remask on the store gives the split a local remask gives
    local = tmp_path / "data"
    assert cli(*build_args(tiny_corpus, local, tok)).exit_code == 0
    assert cli("remask", local, "--seeds", "3").exit_code == 0
    added = cli("remask", out, "--seeds", "3")
    assert added.exit_code == 0 and added.stdout.strip() == f"{out}: added seed-2"
    assert remote_files(s3, out) == data_files(local)
    assert remote_manifest(s3, out)["splits"]["seed-2"] == json.loads((local / "manifest.json").read_text())[
        "splits"]["seed-2"]
    assert cli("verify", out).exit_code == 0
    # a damaged object is found by re-hashing what the store serves
    key = out.removeprefix("s3://") + "/seed-1/data-00000-of-00001.arrow"
    data = bytearray(s3.fs().cat(key))
    data[-9] ^= 1
    s3.fs().pipe(key, bytes(data))
    damaged = cli("verify", out)
    assert damaged.exit_code == 1 and "seed-1/data-00000-of-00001.arrow: sha256 differs" in damaged.stdout


def test_a_prefix_without_a_manifest_is_not_a_build(s3, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    s3.fs().rm(out.removeprefix("s3://") + "/manifest.json")
    for command in (["verify", out], ["inspect", out], ["remask", out, "--seeds", "3"]):
        result = cli(*command)
        assert result.exit_code == 2 and "no manifest.json, so not a finished mlmprep build" in result.stderr
    # the unfinished build's files are replaced only with --force
    refused = cli(*build_args(tiny_corpus, out, tok))
    assert refused.exit_code == 2 and "unfinished build" in refused.stderr
    assert cli(*build_args(tiny_corpus, out, tok, "--force")).exit_code == 0
    assert cli("verify", out).exit_code == 0


def test_force_never_leaves_old_files_beside_the_new_manifest(s3, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    assert cli(*build_args(tiny_corpus, out, tok, "--seeds", "3", "--rows-per-file", "100")).exit_code == 0
    assert "seed-2/data-00003-of-00004.arrow" in listing(s3, out)
    refused = cli(*build_args(tiny_corpus, out, tok))
    assert refused.exit_code == 2 and "--force" in refused.stderr
    assert cli(*build_args(tiny_corpus, out, tok, "--force")).exit_code == 0
    manifest = remote_manifest(s3, out)
    listed = {f"{name}/{f['name']}" for name, split in manifest["splits"].items() for f in split["files"]}
    top = {"manifest.json", "tokenizer.json", "special_tokens_map.json", "tokenizer_config.json"}
    assert set(listing(s3, out)) == listed | top  # no seed-2/, no fifth data file of the old layout


def test_a_foreign_prefix_is_never_replaced(s3, tiny_corpus, tok):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/data/report.pdf", b"the user's")
    result = cli(*build_args(tiny_corpus, f"s3://{bucket}/data", tok, "--force"))
    assert result.exit_code == 2 and "not an mlmprep build" in result.stderr
    assert listing(s3, f"s3://{bucket}/data") == ["report.pdf"]


def test_two_builds_into_one_prefix_cannot_both_win(s3, tiny_corpus, tok):
    from mlmprep.errors import CacheError
    from mlmprep.format.publish import remote_lock

    out = f"s3://{s3.bucket()}/data"
    with remote_lock(out, {}):
        with pytest.raises(CacheError, match="another mlmprep build is writing it"), remote_lock(out, {}):
            pass
        refused = cli(*build_args(tiny_corpus, out, tok))
        assert refused.exit_code == 2 and "another mlmprep build is writing it" in refused.stderr
        assert listing(s3, out) == [".mlmprep-lock"]  # the refused build wrote nothing
    assert listing(s3, out) == []  # the holder's lock is gone with it
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0


def test_a_failed_upload_leaves_nothing_that_reads_as_a_build(s3, s3_proxy, tiny_corpus, tok):
    bucket = s3.bucket()
    out = f"s3://{bucket}/data"
    # every attempt to store one data file fails, and --storage-options leaves botocore one try (s3fs's own stay,
    # 2 of them through AWS_MAX_ATTEMPTS: fewer back-offs)
    s3_proxy.add(Fault(lambda method, path: method == "PUT" and "/seed-1/" in path, kind="503", times=1000))
    no_retries = json.dumps({"config_kwargs": {"retries": {"max_attempts": 1}}})
    result = run(*build_args(tiny_corpus, out, tok, "--storage-options", no_retries), env={"AWS_MAX_ATTEMPTS": "2"})
    assert result.returncode == 2, result.stderr
    assert_refused(result.returncode, result.stderr, out)
    assert listing(s3, out) == []  # what was uploaded is taken back, and the lock released


def test_faults_are_retried_and_the_build_equals_a_clean_one(s3, s3_proxy, tiny_corpus, tok, local_reference):
    bucket = s3.bucket()
    corpus, tokenizer = upload_inputs(s3, bucket, tiny_corpus, tok)
    out = f"s3://{bucket}/data"
    faults = [s3_proxy.add(Fault(lambda method, path: method == "GET" and path.split("?")[0].endswith(".txt"),
                                 kind="drop", after_bytes=2000, times=1)),
              s3_proxy.add(Fault(lambda method, path: method == "GET" and "tokenizer.json" in path, times=2)),
              s3_proxy.add(Fault(lambda method, path: method == "PUT" and "/windows/" in path, times=2)),
              s3_proxy.add(Fault(lambda method, path: method == "PUT" and "manifest.json" in path, kind="reset"))]
    result = run(*build_args(corpus, out, tokenizer), env={})
    assert result.returncode == 0, result.stderr
    assert [f.hits for f in faults] == [1, 2, 2, 1]
    assert remote_files(s3, out) == data_files(local_reference)
    puts = [path for method, path in s3_proxy.requests if method == "PUT" and ".mlmprep-" not in path]
    assert "manifest.json" in puts[-1] and not any("manifest.json" in path for path in puts[:-2])  # last: the commit


def test_storage_options_act(s3, monkeypatch, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    options = json.dumps({"endpoint_url": s3.endpoint})
    assert cli(*build_args(tiny_corpus, out, tok, "--storage-options", options)).exit_code == 0
    assert cli("verify", out, "--storage-options", options).exit_code == 0
    assert "manifest.json" in listing(s3, out)
    assert "storage_options" not in remote_manifest(s3, out)["build_options"]  # it may hold secrets
    for bad in ("[1]", '{"no_such_option": 1}'):
        refused = cli(*build_args(tiny_corpus, out, tok, "--force", "--storage-options", bad))
        assert refused.exit_code == 2 and "--storage-options" in refused.stderr, refused.stderr


@pytest.mark.parametrize("case", ["missing bucket", "wrong credentials", "missing corpus", "missing tokenizer"])
def test_store_problems_are_one_line_naming_the_url_before_any_work(s3, monkeypatch, tmp_path, tiny_corpus, tok,
                                                                    case):
    import moto.settings

    bucket = s3.bucket()
    corpus, tokenizer, out, env = str(tiny_corpus), tok, f"s3://{bucket}/data", {}
    if case == "missing bucket":  # found before the corpus is looked at: the missing corpus is not what is said
        out, corpus = "s3://no-such-bucket-here/data", str(tmp_path / "no-such-corpus.txt")
    elif case == "wrong credentials":
        monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks keys now
        env = {"AWS_ACCESS_KEY_ID": "wrong"}
    elif case == "missing corpus":
        corpus = f"s3://{bucket}/nothing/*.jsonl"
    else:
        tokenizer = f"s3://{bucket}/tok/tokenizer.json"
    result = run(*build_args(corpus, out, tokenizer), env=env)
    named = {"missing corpus": corpus, "missing tokenizer": tokenizer}.get(case, out)
    assert_refused(result.returncode, result.stderr, named)
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", float("inf"))
    if case != "missing bucket":
        assert listing(s3, f"s3://{bucket}/data") == []


def test_a_protocol_without_its_package_names_the_extra(tiny_corpus, tok):
    import importlib.util

    if importlib.util.find_spec("gcsfs"):
        pytest.skip("gcsfs is installed")
    result = run(*build_args(tiny_corpus, "gs://bucket/data", tok), env={})
    assert_refused(result.returncode, result.stderr, "gs://bucket/data", "pip install 'mlmprep[gcs]'")


def test_no_credentials_at_all_is_one_line_naming_the_url(tiny_corpus, tok):
    nothing = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
               "AWS_CONFIG_FILE": "/nonexistent"}
    result = run(*build_args(tiny_corpus, "s3://bucket/data", tok), env=nothing)
    assert_refused(result.returncode, result.stderr, "--out s3://bucket/data", "no credentials")


def test_a_bad_record_in_a_remote_corpus_file_is_named_by_its_url(s3, tok):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/c/a.jsonl", b'{"text": "one fine document here"}\n{"text": broken\n')
    corpus = f"s3://{bucket}/c/a.jsonl"
    result = cli(*build_args(corpus, f"s3://{bucket}/out", tok))
    assert result.exit_code == 2 and f"{corpus} line 2" in result.stderr and "/mlmprep-" not in result.stderr, \
        result.stderr
    assert listing(s3, f"s3://{bucket}/out") == []


def test_a_remote_build_missing_a_file_is_not_up_to_date(s3, tiny_corpus, tok):
    out = f"s3://{s3.bucket()}/data"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    s3.fs().rm(out.removeprefix("s3://") + "/seed-1/data-00000-of-00001.arrow")
    refused = cli(*build_args(tiny_corpus, out, tok))
    assert refused.exit_code == 2 and "its files are damaged" in refused.stderr, refused.stdout
    assert cli(*build_args(tiny_corpus, out, tok, "--force")).exit_code == 0
    assert cli("verify", out).exit_code == 0


def test_tokenizer_train_reads_and_writes_urls(s3, tmp_path, tiny_corpus):
    bucket = s3.bucket()
    s3.fs().put(str(tiny_corpus), f"{bucket}/c/{tiny_corpus.name}")
    args = ["--vocab-size", "300", "--tokenizer-train-chars", "20000"]
    assert cli("tokenizer", "train", tiny_corpus, "--out", tmp_path / "local.json", *args).exit_code == 0
    made = cli("tokenizer", "train", f"s3://{bucket}/c/", "--out", f"s3://{bucket}/tok/", *args)
    assert made.exit_code == 0 and made.stdout.startswith(f"wrote s3://{bucket}/tok/tokenizer.json:"), made.stdout
    assert s3.fs().cat(f"{bucket}/tok/tokenizer.json") == (tmp_path / "local.json").read_bytes()
    again = cli("tokenizer", "train", f"s3://{bucket}/c/", "--out", f"s3://{bucket}/tok/", *args)
    assert again.exit_code == 2 and "exists; pass --force" in again.stderr


def every_format(folder) -> None:
    """The same documents in every corpus format, compressed and plain, into `folder`."""
    import gzip

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    from tests.conftest import tiny_documents

    docs = tiny_documents(240, seed=5)
    folder.mkdir()
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs[:80]).encode()
    (folder / "a.txt").write_text("\n".join(docs[80:120]) + "\n", encoding="utf-8")
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(lines, mtime=0))
    (folder / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    table = pa.table({"text": docs[120:200]})
    pq.write_table(table, folder / "d.parquet", row_group_size=20)
    with pa.ipc.new_file(folder / "e.arrow", table.schema) as writer:
        for batch in table.to_batches(max_chunksize=25):
            writer.write_batch(batch)
    (folder / "f.json").write_text(json.dumps([{"text": d} for d in docs[200:]]), encoding="utf-8")


def test_corpus_urls_are_read_in_place_shard_by_shard(s3, monkeypatch, tmp_path):
    """Every format from s3:// in many small shards, as Ray tasks read them, with nothing copied to local disk: the
    documents of the same shards of the local files, and the same fingerprint."""
    import s3fs

    from mlmprep import storage
    from mlmprep.corpus.documents import open_corpus
    from mlmprep.corpus.files import CorpusStats, ReadOptions
    from mlmprep.corpus.shards import read_shard

    every_format(tmp_path / "corpus")
    bucket = s3.bucket()
    s3.fs().put(str(tmp_path / "corpus") + "/", f"{bucket}/corpus/", recursive=True)

    def copied(*args, **kwargs):
        raise AssertionError("a corpus object was copied to local disk")

    def documents(corpus):
        shards = corpus.shards(1024, 4)
        assert len(shards) > 12
        return [(shard.start, shard.end, list(read_shard(shard, ReadOptions(), CorpusStats()))) for shard in shards]

    local = open_corpus([str(tmp_path / "corpus")])
    monkeypatch.setattr(storage, "fetch", copied)
    monkeypatch.setattr(s3fs.S3FileSystem, "_get_file", copied)
    remote = open_corpus([f"s3://{bucket}/corpus/"], storage_options={})
    assert [f["path"] for f in remote.files] == [
        f"s3://{bucket}/corpus/{name}" for name in sorted(p.name for p in (tmp_path / "corpus").iterdir())]
    assert remote.fingerprint == local.fingerprint
    assert documents(remote) == documents(local)


def test_a_store_that_keeps_failing_while_an_object_is_read_in_place_is_one_line_naming_it(s3, s3_proxy,
                                                                                             tiny_corpus):
    """As the driver of a Ray build hashes the corpus objects it will have its tasks read in place."""
    from mlmprep.corpus.documents import open_corpus
    from mlmprep.errors import CorpusError

    bucket = s3.bucket()
    s3.fs().put(str(tiny_corpus), f"{bucket}/c/{tiny_corpus.name}")
    s3_proxy.add(Fault(lambda method, path: method == "GET" and path.split("?")[0].endswith(".txt"), kind="503",
                       times=1000))
    url = f"s3://{bucket}/c/{tiny_corpus.name}"
    with pytest.raises(CorpusError, match=f"^{url}: the storage failed .*; check the endpoint and try again$"):
        open_corpus([url], storage_options={"config_kwargs": {"retries": {"max_attempts": 1}}})


def test_a_store_that_keeps_failing_to_serve_the_corpus_is_one_line_naming_its_url(s3, s3_proxy, tiny_corpus, tok):
    bucket = s3.bucket()
    corpus, tokenizer = upload_inputs(s3, bucket, tiny_corpus, tok)
    s3_proxy.add(Fault(lambda method, path: method == "GET" and path.split("?")[0].endswith(".txt"), kind="503",
                       times=1000))
    no_retries = json.dumps({"config_kwargs": {"retries": {"max_attempts": 1}}})
    out = f"s3://{bucket}/data"
    result = run(*build_args(corpus, out, tokenizer, "--storage-options", no_retries), env={})
    assert_refused(result.returncode, result.stderr, corpus + tiny_corpus.name, "the storage failed")
    assert listing(s3, out) == []


def test_a_shard_of_a_large_object_fetches_about_its_own_bytes(s3, monkeypatch):
    """Finding a shard's line starts and reading it fetch about the shard, not the whole object (nor the store's
    default block, 50 MiB for s3fs)."""
    import s3fs

    from mlmprep.corpus.files import CorpusStats, ReadOptions
    from mlmprep.corpus.shards import Shard, read_shard

    bucket = s3.bucket()
    line = b"a line of some words that stands for one document\n"
    data = line * ((24 << 20) // len(line))
    s3.fs().pipe(f"{bucket}/big.txt", data)
    fetched = []
    fetch = s3fs.core.S3File._fetch_range
    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range",
                        lambda self, start, end: fetched.append(end - start) or fetch(self, start, end))
    shard = Shard(1, "file", f"s3://{bucket}/big.txt", 3 << 20, 4 << 20, len(data))
    documents = list(read_shard(shard, ReadOptions(), CorpusStats()))
    assert len(documents) in ((1 << 20) // len(line), (1 << 20) // len(line) + 1)
    assert 1 << 20 <= sum(fetched) <= 2 << 20, fetched  # and a few small probes: first bytes, line starts
