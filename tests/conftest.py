"""Shared fixtures: a tiny corpus and tokenizer the tests write themselves, and the shared real corpora."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest

# The Ctrl-C tests send SIGINT to the processes they start, as a terminal does to its foreground job. A shell
# that runs the suite in the background (or under nohup-like wrappers) hands it SIGINT ignored, and an ignored
# signal stays ignored across exec, so those processes would never see Ctrl-C. Catching it here (pytest's own
# default) makes every process the tests start begin with SIGINT at its default, as under a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def pytest_collection_finish(session):
    """When test_ray.py is among the tests to run (and Ray is installed), start its two-node cluster run now,
    in a thread: it overlaps the tests that come before it (test_ray.start_early says why)."""
    import importlib.util

    if session.config.option.collectonly or hasattr(session.config, "workerinput"):  # nothing runs; or xdist
        return
    if importlib.util.find_spec("ray") and any("cluster_run" in getattr(item, "fixturenames", ())
                                               for item in session.items):
        from tests.builder import test_ray

        session.config.ray_cluster_run = test_ray.start_early(session.config._tmp_path_factory.mktemp("ray"))

WORDS = (
    "the a of and to in is was for on that with as by at from it this be are or an not which have "
    "river mountain library window teacher garden morning journey silver quiet ancient message "
    "build train token window span model data cache seed epoch batch mask corpus vocabulary "
    "walked carried opened noticed remembered explained measured wrote sang followed "
    "quickly slowly carefully often never always nearly together"
).split()


def tiny_documents(n_docs: int = 300, seed: int = 0) -> list[str]:
    """Deterministic pseudo-English documents of 1 to 6 sentences."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        sentences = []
        for _ in range(rng.randint(1, 6)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
            sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
        docs.append(" ".join(sentences))
    return docs


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory) -> Path:
    """A .txt corpus, one document per line."""
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n".join(tiny_documents()) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer_path(tmp_path_factory) -> Path:
    """A T5-style Unigram tokenizer (<pad>, </s>, <unk>, <mask>, pieces, 100 sentinels) trained on the tiny corpus."""
    from mlmprep.tokenizer.train import train_tokenizer

    tok = train_tokenizer(tiny_documents(), vocab_size=400)
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="session")
def tok(tiny_tokenizer_path) -> str:
    """The tiny tokenizer's path as a command-line argument."""
    return str(tiny_tokenizer_path)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_path):
    from mlmprep.tokenizer.load import load_tokenizer

    return load_tokenizer(tiny_tokenizer_path)


@pytest.fixture(scope="session")
def wordpiece_path(tmp_path_factory):
    """A BERT-style WordPiece tokenizer ([PAD] [UNK] [CLS] [SEP] [MASK], lowercasing, post-processor [CLS] $A [SEP])."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(tiny_documents(), trainers.WordPieceTrainer(vocab_size=300, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    path = tmp_path_factory.mktemp("wordpiece") / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="session")
def corpora() -> Path:
    """The shared real corpora (../shared/corpora); tests that need real text skip when it is absent."""
    if not (CORPORA / "kjv.txt").is_file():
        pytest.skip("../shared/corpora is not present")
    return CORPORA


def int32_copy(build: Path, dest: Path) -> dict:
    """`build` copied to `dest` as mlmprep wrote it before format 3: every column int32 (the same values, in the
    same record batches), format_version 2, the manifest's sizes and hashes those of the rewritten files; its
    manifest."""
    import hashlib
    import json
    import shutil

    import pyarrow as pa

    shutil.copytree(build, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["format_version"] = 2
    for name, split in manifest["splits"].items():
        for record in split["files"]:
            path = dest / name / record["name"]
            if not record["name"].endswith(".arrow"):
                continue
            with pa.memory_map(str(path)) as source:
                reader = pa.ipc.open_stream(source)
                schema = pa.schema([(f.name, pa.list_(pa.int32(), getattr(f.type, "list_size", -1)))
                                    for f in reader.schema])
                batches = [pa.record_batch([c.cast(t) for c, t in zip(b.columns, schema.types)], schema=schema)
                           for b in reader]
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
                for batch in batches:
                    writer.write_batch(batch)
            record.update(bytes=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def format_1_copy(build: Path, dest: Path) -> dict:
    """`build` copied to `dest` as a build written before the sharded layout looks (format 1: int32 columns, files
    cut every 512 MiB, no rows_per_file); its manifest."""
    import json

    manifest = int32_copy(build, dest)
    manifest["format_version"] = 1
    for key in ("rows_per_file", "tokenizer_train_chars"):
        manifest.pop(key, None)
        manifest["config"].pop(key, None)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def build_tiny(out: Path, corpus: Path, tokenizer: Path, **options) -> Path:
    """A quick real build of a tiny corpus (input length 32, 2 seeds unless overridden)."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    settings = {"input_length": 32, "seeds": 2, "validation_fraction": 0.1, **options}
    build(BuildConfig(corpus=(str(corpus),), tokenizer=str(tokenizer), out=str(out), **settings), log=lambda _: None)
    return out


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path) -> Path:
    """A real span-corruption build of the tiny corpus; tests must not modify it (copy it first)."""
    return build_tiny(tmp_path_factory.mktemp("build") / "data", tiny_corpus, tiny_tokenizer_path)


@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread for a whole test module: tiny models run fastest so (OpenMP threads spinning on a
    shared 2-core box cost 5x), and every run of the module, baselines included, sums floats the same way,
    so two runs with the same options give the same weights."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def s3_endpoint():
    """A real S3 server (moto's server mode) on a free loopback port, for the tests of one module."""
    from tests.s3server import s3_server

    with s3_server() as server:
        yield server


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """The module's S3 server with this process's environment pointed at it; `s3.bucket()` makes a fresh bucket."""
    for key, value in s3_endpoint.env.items():
        monkeypatch.setenv(key, value)
    return s3_endpoint


@pytest.fixture
def switch_proxy(s3, monkeypatch):
    """A SwitchProxy in front of the S3 server, with the environment pointed at it: stop and start it."""
    from urllib.parse import urlsplit

    from tests.s3server import SwitchProxy

    url = urlsplit(s3.endpoint)
    proxy = SwitchProxy((url.hostname, url.port))
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    yield proxy
    proxy.close()


@pytest.fixture
def s3_proxy(s3, monkeypatch):
    """A FaultProxy in front of the S3 server, with the environment pointed at the proxy: add faults to it."""
    from urllib.parse import urlsplit

    from tests.s3server import FaultProxy

    url = urlsplit(s3.endpoint)
    proxy = FaultProxy((url.hostname, url.port))
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.endpoint)
    yield proxy
    proxy.close()
