"""Dedup in the build and the document hold-out, held against plain references: exact dedup against a Python
set of normalised texts, near dedup against brute-force Jaccard over every pair, the hold-out against the
documents each window came from; the same bytes for any workers and shards; the figures the manifest shows."""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from mlmprep.builder.dedup import exact_keys
from mlmprep.builder.selection import held_documents
from mlmprep.config import BuildConfig
from mlmprep.format.write import iter_rows
from mlmprep.tokenizer.load import load_tokenizer
from tests import near_duplicates
from tests.builder.test_sharded import reference_rows
from tests.cli.test_build import build_args, cli, data_files, leftovers, run_cli
from tests.conftest import CORPORA, build_tiny, tiny_documents
from tests.ngrams import side_streams

NEAR = {"dedup": "near"}  # the default threshold, shingles, bands and rows


def normalised(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).split())


def shingles(text: str, n: int = 5) -> set[str]:
    words = normalised(text).split(" ")
    return {" ".join(words[i : i + n]) for i in range(len(words) - n + 1)} if len(words) >= n else {" ".join(words)}


def brute_force_kept(docs: list[str], threshold: float) -> list[int]:
    """The first document of each cluster: pairs whose true Jaccard similarity reaches `threshold` are joined,
    every pair tried."""
    sets = [shingles(d) for d in docs]
    parent = list(range(len(docs)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for i, j in itertools.combinations(range(len(docs)), 2):
        if len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= threshold:
            a, b = find(i), find(j)
            parent[max(a, b)] = min(a, b)
    return [i for i in range(len(docs)) if find(i) == i]


def planted(n: int = 400, seed: int = 1) -> list[str]:
    """Distinct long documents, then exact copies (re-spaced, decomposed accents) and near copies (a few words
    added or changed: Jaccard about 0.9 and above), shuffled among them."""
    rng = random.Random(seed)
    base = [" ".join(tiny_documents(8, seed=1000 + k)) + f" Caf\u00e9 number {k}." for k in range(n)]
    copies = [f"  {base[k].replace(' ', '   ')} ".replace("\u00e9", "e\u0301") for k in rng.sample(range(n), 60)]
    near = []
    for k in rng.sample(range(n), 60):
        words = base[k].split()
        words[rng.randrange(len(words))] = "zebra"
        near.append(" ".join(words) + " and so on")
    docs = base + copies + near
    tail = docs[50:]
    rng.shuffle(tail)
    return docs[:50] + tail


def sides(docs: list[str], kept: list[int], fraction: float, seed: int, decontaminate: float | None = 0.2
          ) -> dict[str, list[str]]:
    """The kept documents in corpus order, split by the hash of (seed, each one's content key), then (unless
    `decontaminate` is None; 0.2 is the build's default) validation documents with more than that share of their
    13-grams in training moved to training, after its own documents (tests.ngrams.side_streams)."""
    held = held_documents(exact_keys([docs[i] for i in kept]), fraction, seed)
    return side_streams([docs[i] for i in kept], ["validation" if h else "train" for h in held], decontaminate)


def built_rows(build: Path, split: str):
    from mlmprep.format.rows import concat_rows

    return concat_rows(list(iter_rows(build / split, "tokens")))


def assert_windows_are_those_of(build: Path, expected: dict[str, list[str]], tokenizer: Path, options: dict):
    stats = None
    for side, split in (("train", "windows"), ("validation", "validation-windows")):
        rows, stats = reference_rows(expected[side], tokenizer, options, stats)
        built = built_rows(build, split)
        assert np.array_equal(built.offsets, rows.offsets) and np.array_equal(built.values, rows.values), split


@pytest.fixture(scope="module")
def planted_corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    docs = planted()
    path = tmp_path_factory.mktemp("planted") / "corpus.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path, docs


def test_exact_dedup_keeps_what_a_set_of_normalised_texts_keeps(tmp_path, planted_corpus, tiny_tokenizer_path):
    path, docs = planted_corpus
    seen, kept = set(), []
    for i, doc in enumerate(docs):
        if normalised(doc) not in seen:
            seen.add(normalised(doc))
            kept.append(i)
    assert len(docs) - len(kept) >= 60
    build = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, workers=2, shard_bytes=4000, rows_per_file=40)
    expected = sides(docs, kept, 0.1, 0)
    assert_windows_are_those_of(build, expected, tiny_tokenizer_path, {})
    dedup = json.loads((build / "manifest.json").read_text())["corpus"]["stats"]["dedup"]
    dropped = sorted(set(range(len(docs))) - set(kept))
    assert dedup["method"] == "exact" and dedup["documents"] == len(docs)
    assert dedup["documents_dropped"] == len(dropped)
    assert dedup["characters_dropped"] == sum(len(docs[i]) for i in dropped)
    assert dedup["validation_documents"] == len(expected["validation"])
    clusters = {}  # normalised text -> [copies, the first copy]
    for doc in docs:
        clusters.setdefault(normalised(doc), [0, doc])[0] += 1
    largest = sorted((c for c in clusters.values() if c[0] > 1), key=lambda c: -c[0])[:5]  # stable: corpus order
    assert [(c["size"], c["excerpt"]) for c in dedup["largest_clusters"]] == [
        (size, " ".join(first.split())[:200]) for size, first in largest]


def minhash_kept(docs: list[str], threshold: float) -> list[int]:
    """The first document of each cluster the dedup kernels find over the whole corpus in one call (no shards)."""
    from mlmprep.builder.dedup import minhash_signatures, near_duplicate_clusters
    from mlmprep.builder.selection import MINHASH_SEED

    cfg = BuildConfig(corpus=("c.txt",))
    signatures = minhash_signatures(docs, ngram=cfg.dedup_ngram, num_hashes=cfg.dedup_bands * cfg.dedup_rows,
                                    seed=MINHASH_SEED)
    first = near_duplicate_clusters(signatures, bands=cfg.dedup_bands, rows=cfg.dedup_rows, threshold=threshold)
    return [int(i) for i in np.flatnonzero(first == np.arange(len(docs)))]


def test_the_default_bands_make_a_candidate_of_nearly_every_pair_at_the_threshold():
    """The recall target (0.95 at the default threshold) needs the LSH bands to compare such pairs: the chance
    that a pair at Jaccard s shares a band, 1 - (1 - s**rows)**bands, at the default threshold and a little above;
    the estimate checked against an independent count over random signatures of that agreement."""
    cfg = BuildConfig(corpus=("c.txt",))
    s, bands, rows = cfg.dedup_threshold, cfg.dedup_bands, cfg.dedup_rows
    assert 1 - (1 - s**rows) ** bands >= 0.999
    rng = np.random.default_rng(0)
    agree = rng.random((20000, bands, rows)) < s  # entry by entry, the two signatures agree with probability s
    assert agree.all(axis=2).any(axis=1).mean() >= 0.995


def test_near_dedup_keeps_the_first_of_each_cluster_brute_force_jaccard_confirms(tmp_path, planted_corpus,
                                                                                tiny_tokenizer_path):
    """The build, sharded, keeps the first document of each cluster the kernels find over the whole corpus at
    once, each kept one on its side; and those clusters are the ones true Jaccard over every pair gives at 0.8
    (recall and precision of the dropped documents at least 0.95)."""
    path, docs = planted_corpus
    kept = minhash_kept(docs, 0.8)
    dropped, truth = set(range(len(docs))) - set(kept), set(range(len(docs))) - set(brute_force_kept(docs, 0.8))
    assert len(truth) >= 100  # the exact and the near copies
    assert len(dropped & truth) / len(truth) >= 0.95 and len(dropped & truth) / len(dropped) >= 0.95
    build = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, workers=2, shard_bytes=4000, rows_per_file=40,
                       **NEAR)
    assert_windows_are_those_of(build, sides(docs, kept, 0.1, 0), tiny_tokenizer_path, {})
    dedup = json.loads((build / "manifest.json").read_text())["corpus"]["stats"]["dedup"]
    assert dedup["method"] == "near" and dedup["documents_dropped"] == len(dropped)
    off = build_tiny(tmp_path / "off", path, tiny_tokenizer_path, dedup="off")  # the option acts
    assert json.loads((off / "manifest.json").read_text())["corpus"]["stats"]["dedup"]["documents_dropped"] == 0
    assert_windows_are_those_of(off, sides(docs, list(range(len(docs))), 0.1, 0), tiny_tokenizer_path, {})


def test_the_threshold_acts(tmp_path, planted_corpus, tiny_tokenizer_path):
    """At Jaccard 0.99 the exact copies are still joined, most near copies no longer."""
    path, docs = planted_corpus
    build = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, **{**NEAR, "dedup_threshold": 0.99})
    dedup = json.loads((build / "manifest.json").read_text())["corpus"]["stats"]["dedup"]
    assert dedup["documents_dropped"] == len(docs) - len(minhash_kept(docs, 0.99))
    assert 60 <= dedup["documents_dropped"] < len(docs) - len(minhash_kept(docs, 0.8)) - 30


@pytest.mark.parametrize("options", [{"dedup": "exact"}, NEAR, {"dedup": "exact", "pack": "doc"},
                                     {"dedup": "near", "method": "text", "input_length": 64}],
                         ids=["exact", "near", "exact-doc", "near-text"])
def test_workers_and_shards_never_change_which_documents_are_kept(tmp_path, planted_corpus, tiny_tokenizer_path,
                                                                  options):
    path, _ = planted_corpus
    one = build_tiny(tmp_path / "one", path, tiny_tokenizer_path, workers=1, rows_per_file=30, **options)
    many = build_tiny(tmp_path / "many", path, tiny_tokenizer_path, workers=2, shard_bytes=1500, rows_per_file=30,
                      **options)
    assert data_files(one) == data_files(many)
    assert json.loads((one / "manifest.json").read_text())["corpus"]["stats"]["dedup"]["documents_dropped"] >= 60


def marked_documents(n: int) -> list[str]:
    """Documents whose every few words name the document (marker qx<letters of its number>qx), so any window
    cut from one, however short, tells which document it came from; every fifth one copied later."""
    rng = random.Random(7)
    docs = []
    for k in range(n):
        mark = "qx" + "".join("abcdefghij"[int(c)] for c in str(k)) + "qx"
        words = [rng.choice(("river", "garden", "token", "model", "window", "silver")) for _ in range(rng.randint(20,
                                                                                                              90))]
        docs.append(" ".join(f"{mark} {w}" if i % 3 == 0 else w for i, w in enumerate(words)))
    return docs + docs[::5]


@pytest.mark.parametrize("dedup", ["off", "exact"])
@pytest.mark.parametrize("pack", ["stream", "doc"])
def test_no_validation_window_shares_a_document_with_a_training_window(tmp_path, tiny_tokenizer_path, dedup, pack):
    """Decoded, each window names the documents it holds: no document is on both sides, not even as a copy of
    itself (--dedup off keeps the copies, all on one side), and about the asked share of documents is held out."""
    docs = marked_documents(300)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    build = build_tiny(tmp_path / "b", path, tiny_tokenizer_path, validation_fraction=0.3, shard_bytes=2000,
                       rows_per_file=20, workers=2, dedup=dedup, pack=pack)
    tok = load_tokenizer(tiny_tokenizer_path)
    named = {}
    for split in ("windows", "validation-windows"):
        rows = built_rows(build, split)
        text = " ".join(tok.decode(rows.values[a:b].tolist()) for a, b in zip(rows.offsets[:-1], rows.offsets[1:]))
        named[split] = set(re.findall(r"qx[a-j]+qx", text.replace(" ", "")))
    assert named["windows"] and named["validation-windows"]
    assert not named["windows"] & named["validation-windows"]
    assert 0.2 < len(named["validation-windows"]) / 300 < 0.4


def test_a_corpus_as_txt_and_as_gz_gives_the_same_build_with_a_trained_tokenizer(tmp_path):
    """No --tokenizer: the tokenizer's sample depends on the documents only, so the same text gzipped (cut into
    other shards, read through another reader) builds the same bytes, tokenizer included."""
    if not (CORPORA / "kjv.txt").exists():
        pytest.skip("the shared corpora are absent")
    text = (CORPORA / "kjv.txt").read_bytes()[: 3 << 20]
    text = text[: text.rfind(b"\n") + 1]
    (tmp_path / "c.txt").write_bytes(text)
    (tmp_path / "z.txt.gz").write_bytes(gzip.compress(text))
    common = ["--vocab-size", "500", "--tokenizer-train-chars", "200000", "--input-length", "64", "--seeds", "1"]
    for name in ("c.txt", "z.txt.gz"):
        result = run_cli("build", tmp_path / name, "--out", tmp_path / f"out-{name}", *common)
        assert result.returncode == 0, result.stderr
    txt, gz = data_files(tmp_path / "out-c.txt"), data_files(tmp_path / "out-z.txt.gz")
    assert txt == gz and "tokenizer.json" in txt
    manifests = [json.loads((tmp_path / f"out-{n}" / "manifest.json").read_text()) for n in ("c.txt", "z.txt.gz")]
    assert manifests[0]["tokenizer"]["trained_on"] == manifests[1]["tokenizer"]["trained_on"]
    assert manifests[0]["corpus"]["stats"]["dedup"] == manifests[1]["corpus"]["stats"]["dedup"]


def chained() -> list[str]:
    """Near copies of near copies (tests.near_duplicates: chains of links that fall in different partitions),
    exact copies of them re-spaced, and documents shorter than a shingle (some of identical signature), shuffled
    after the first 40."""
    texts, _, _ = near_duplicates.planted_corpus(seed=3, bases=120, copies=160)
    rng = random.Random(3)
    copies = [f" {texts[k].replace(' ', '  ')} " for k in rng.sample(range(len(texts)), 40)]
    short = ["brief note", "brief  note", "another brief one", "brief note here"] * 3
    tail = texts[40:] + copies + short
    rng.shuffle(tail)
    return texts[:40] + tail


def signature_clusters_kept(docs: list[str], threshold: float) -> list[int]:
    """The first document of each cluster by brute force over the documents' MinHash signatures: every pair equal
    in some band's entries whose share of equal entries reaches `threshold` is joined (the signatures themselves
    are held against true Jaccard in test_dedup_kernels)."""
    from mlmprep.builder.dedup import minhash_signatures
    from mlmprep.builder.selection import MINHASH_SEED

    cfg = BuildConfig(corpus=("c.txt",))
    bands, rows = cfg.dedup_bands, cfg.dedup_rows
    sig = minhash_signatures(docs, ngram=cfg.dedup_ngram, num_hashes=bands * rows, seed=MINHASH_SEED)
    same = sig[:, None, :] == sig[None, :, :]
    linked = same.reshape(len(docs), len(docs), bands, rows).all(axis=3).any(axis=2) & (same.mean(axis=2) >= threshold)
    first = list(range(len(docs)))
    for i, j in zip(*np.nonzero(np.triu(linked, 1))):
        a, b = first[i], first[j]
        first = [min(a, b) if f in (a, b) else f for f in first]
    return [i for i in range(len(docs)) if first[i] == i]


@pytest.fixture(scope="module")
def chained_corpus(tmp_path_factory) -> tuple[Path, list[str]]:
    docs = chained()
    path = tmp_path_factory.mktemp("chained") / "corpus.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path, docs


@pytest.mark.parametrize("dedup", ["exact", "near"])
def test_dedup_in_partitions_builds_the_bytes_of_dedup_in_the_driver(tmp_path, chained_corpus, tiny_tokenizer_path,
                                                                      dedup, monkeypatch):
    """1 and 7 partitions, on 1 and 2 workers, over shards of a few documents: the in-driver build's bytes and
    counts, whose kept documents are those of a plain reference (a set of normalised texts; brute force over the
    signatures); clusters chain across partitions; the driver joins the links as each partition's come in; no
    partition file is left."""
    from mlmprep.builder import dedup_partitions

    monkeypatch.setattr(dedup_partitions, "JOIN_AT", 0)
    path, docs = chained_corpus
    if dedup == "exact":
        seen: dict[str, int] = {}
        kept = [seen.setdefault(normalised(d), i) for i, d in enumerate(docs) if normalised(d) not in seen]
    else:
        kept = signature_clusters_kept(docs, 0.8)
        assert len(docs) - len(kept) >= 100
    options = {"rows_per_file": 30, "dedup": dedup}
    driver = build_tiny(tmp_path / "driver", path, tiny_tokenizer_path, workers=1, **options)
    assert_windows_are_those_of(driver, sides(docs, kept, 0.1, 0), tiny_tokenizer_path, {})
    stats = json.loads((driver / "manifest.json").read_text())["corpus"]["stats"]["dedup"]
    assert stats["documents_dropped"] == len(docs) - len(kept)
    assert stats["largest_clusters"][0]["size"] >= 3  # chains: a cluster joined through later documents
    for partitions, workers in ((1, 1), (7, 2)):
        out = tmp_path / f"p{partitions}"
        build_tiny(out, path, tiny_tokenizer_path, workers=workers, shard_bytes=2000, dedup_partitions=partitions,
                   **options)
        assert data_files(out) == data_files(driver), partitions
        assert json.loads((out / "manifest.json").read_text())["corpus"]["stats"]["dedup"] == stats
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".dedup", ".sig") or p.name == "shards"]


@pytest.mark.parametrize("dedup", ["exact", "near"])
def test_a_partition_file_changed_in_the_stage_is_one_line_and_nothing_is_left(tmp_path, tiny_corpus, tok, dedup,
                                                                               monkeypatch):
    """A staged file cut short after its reading task wrote it: exit 2, one line naming it, no output, no stage."""
    from mlmprep.builder import pipeline

    staged = pipeline.stage_keys

    def cut_short(layout, index, described):
        staged(layout, index, described)
        if index == 1:
            path = layout.staged(f"shard-{index:06d}.dedup")
            path.write_bytes(path.read_bytes()[:-8])

    monkeypatch.setattr(pipeline, "stage_keys", cut_short)
    out = tmp_path / "b"
    result = cli(*build_args(tiny_corpus, out, tok, "--workers", "1", "--shard-bytes", "3000", "--dedup", dedup,
                             "--dedup-partitions", "2"))
    assert result.exit_code == 2
    assert re.fullmatch(r"error: \S+shard-000001\.dedup: .* run the build again\n", result.stderr), result.stderr
    assert leftovers(out) == []


def test_dedup_options_are_refused_where_they_do_nothing(tmp_path, tiny_corpus, tok):
    result = run_cli("build", tiny_corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--dedup", "off",
                     "--no-decontaminate", "--dedup-partitions", "4")
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: --dedup-partitions applies to --dedup exact or near, or --decontaminate only; leave it out or use "
        "--dedup exact or near, or --decontaminate")
    result = run_cli("build", tiny_corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--dedup-partitions", "-1")
    assert result.returncode == 2 and "--dedup-partitions must be at least 0" in result.stderr
    result = run_cli("build", tiny_corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--dedup-threshold", "0.9")
    assert result.returncode == 2 and result.stderr.strip() == (
        "error: --dedup-threshold applies to --dedup near only; leave it out or use --dedup near")
    result = run_cli("build", tiny_corpus, "--out", tmp_path / "b", "--tokenizer", tok, "--dedup", "near",
                     "--dedup-threshold", "1.5")
    assert result.returncode == 2 and "--dedup-threshold must be in (0, 1]" in result.stderr
    assert not (tmp_path / "b").exists()


def test_the_summary_inspect_and_the_page_say_what_dedup_removed(tmp_path, tiny_tokenizer_path):
    """One line of counts, then each largest cluster with its excerpt; on the HTML page escaped."""
    import html

    from mlmprep.format.html import summary
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary

    docs = tiny_documents(200) + ["<b>Licence</b> & terms, repeated."] * 7 + tiny_documents(40)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    build = build_tiny(tmp_path / "b", path, tiny_tokenizer_path)
    manifest = json.loads((build / "manifest.json").read_text())
    dedup = manifest["corpus"]["stats"]["dedup"]
    assert dedup["largest_clusters"][0] == {"size": 7, "excerpt": "<b>Licence</b> & terms, repeated."}
    text = build_summary(build, read_manifest(build)).splitlines()
    line = next(k for k, t in enumerate(text) if t.startswith("dedup exact: "))
    assert text[line].startswith(f"dedup exact: {dedup['documents_dropped']:,} of {len(docs):,} documents dropped")
    assert f"{dedup['validation_documents']:,} documents held out whole for validation" in text[line]
    assert text[line + 1] == "  7 copies: '<b>Licence</b> & terms, repeated.'"
    assert dedup["documents_dropped"] >= 40 + 6
    page = summary(build, read_manifest(build))
    assert html.escape("7 copies: '<b>Licence</b> & terms, repeated.'") in page and "<b>Licence" not in page
    result = run_cli("inspect", build, "--examples", "1")
    assert result.returncode == 0 and text[line] in result.stdout


def test_the_partitions_links_joined_as_they_come_give_the_clusters_of_all_links_at_once(monkeypatch):
    """Chains whose links are spread over many partitions, each partition's links given in turn and joined as they
    come (JOIN_AT 0: at every partition): each linked document's cluster first is the smallest document it is
    connected to through any partition's links, by a plain union-find in the test."""
    from mlmprep.builder import dedup_partitions

    monkeypatch.setattr(dedup_partitions, "JOIN_AT", 0)
    rng = random.Random(5)
    pairs = [(a, b) for a, b in ((rng.randrange(400), rng.randrange(400)) for _ in range(300)) if a != b]
    parts = [np.array(pairs[k::9], np.int64).T.reshape(2, -1) for k in range(9)]  # link k in partition k % 9
    parent = list(range(400))

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        parent[max(ra, rb)] = min(ra, rb)
    links = dedup_partitions.joined_links(iter(parts))
    documents, first, _ = dedup_partitions.join(links)
    linked = sorted({d for pair in pairs for d in pair})
    assert documents.tolist() == linked
    assert first.tolist() == [root(d) for d in linked]


@pytest.mark.parametrize("partitions", [0, 3])
def test_the_driver_keeps_a_side_per_document_not_its_key_and_decides_what_a_plain_reference_does(partitions):
    """--dedup exact over shards arriving out of order, in the driver and in partitions (the partition tasks' links
    by a dict of first copies in the test): each later copy dropped, each kept document on its own key's side, as a
    plain reference over every key decides; what the driver keeps of a shard once it is decided is 9 bytes a
    document (a fate, and its characters and tokens as int32), its keys let go."""
    from mlmprep.builder.selection import DROPPED, TRAIN, VALIDATION, Selection

    cfg = BuildConfig(corpus=("x",), dedup="exact", dedup_partitions=partitions, validation_fraction=0.3,
                      decontaminate=False)
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 1 << 63, 600, dtype=np.uint64)
    keys[rng.integers(100, 600, 150)] = keys[rng.integers(0, 100, 150)]  # copies of early documents, later
    cuts = [0, 90, 250, 251, 430, 600]
    first: dict[int, int] = {}
    expected = [DROPPED if first.setdefault(int(k), d) != d else VALIDATION if held else TRAIN
                for d, (k, held) in enumerate(zip(keys, held_documents(keys, 0.3, cfg.seed)))]
    links = np.array([[d, first[int(k)]] for d, k in enumerate(keys) if first[int(k)] != d], np.int64).T

    def partition_links(documents: list[int]) -> np.ndarray:
        assert documents == np.diff(cuts).tolist()
        return links

    selection = Selection(cfg, len(cuts) - 1, partition_links)
    decided = []
    for s in (3, 1, 4, 0, 2):
        part = slice(cuts[s], cuts[s + 1])
        decided += selection.add(s, {"keys": keys[part], "doc_chars": np.arange(600, dtype=np.int64)[part] * 7,
                                     "doc_tokens": np.arange(600, dtype=np.int64)[part]})
    assert sorted(decided) == list(range(5))
    assert np.concatenate(selection.fates).tolist() == expected
    assert selection.summary()["characters_dropped"] == sum(7 * d for d, fate in enumerate(expected) if fate == DROPPED)
    for result, fates in zip(selection.results, selection.fates):
        arrays = [value for value in result.values() if isinstance(value, np.ndarray)]
        assert "keys" not in result and fates.itemsize + sum(value.itemsize for value in arrays) == 9


def test_counts_that_do_not_fit_int32_are_kept_whole_and_every_sum_is_exact():
    """The driver's per-document counts go to int32 only where every one of a shard's is below NARROW_BELOW; a shard
    with a larger one keeps int64, never wraps; sums past 2**31 (a side's stream, what dedup dropped) are exact."""
    from mlmprep.builder.outputs import side_size
    from mlmprep.builder.selection import NARROW_BELOW, Selection, narrowed
    from mlmprep.builder.staged import Layout

    fits = np.array([7, NARROW_BELOW - 1, NARROW_BELOW - 1, NARROW_BELOW - 1, 15], np.int64)  # each + 1: rows of 8
    assert narrowed(fits).dtype == np.int32 and narrowed(fits).tolist() == fits.tolist()
    for larger in (NARROW_BELOW, 1 << 31, 1 << 40, -NARROW_BELOW):
        kept = narrowed(np.array([3, larger], np.int64))
        assert kept.dtype == np.int64 and kept.tolist() == [3, larger]
    cfg = BuildConfig(corpus=("x",), dedup="exact", validation_fraction=0.0, decontaminate=False)
    selection = Selection(cfg, 1)
    selection.add(0, {"keys": np.array([9, 9, 9, 9, 4], np.uint64), "doc_chars": fits.copy(),
                      "doc_tokens": fits.copy()})
    summary = selection.summary()
    assert summary["documents_dropped"] == 3
    assert summary["characters_dropped"] == summary["tokens_dropped"] == 3 * (NARROW_BELOW - 1)  # > 2**31
    result = selection.results[0]
    assert result["doc_tokens"].dtype == np.int32
    for pack, expected in (("stream", sum(fits.tolist()) + 5), ("doc", sum((n + 1) // 8 for n in fits.tolist()))):
        layout = Layout(BuildConfig(corpus=("x",), pack=pack), "stage", 1, content_length=8, window_length=8, doc_eos=1,
                        format_version=3)
        assert side_size(layout, result, np.arange(5))[0] == expected
