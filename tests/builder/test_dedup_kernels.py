"""mlmprep.builder.dedup against independent references: a Python set of normalised texts for exact keys, a plain
Python MinHash for the signatures, true Jaccard of every pair for near duplicates, and connected components
found by breadth-first search for the clusters."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from mlmprep.builder import dedup
from mlmprep.errors import ConfigError
from tests.near_duplicates import (
    brute_force_duplicates,
    components,
    jaccard,
    planted_corpus,
    planted_duplicates,
    recall_precision,
    shingles,
)

M64 = (1 << 64) - 1
SPACES = [chr(c) for c in range(0x3001) if chr(c).isspace()]  # every whitespace code point up to U+3000
WORDS = ["a", "b", "the", "café", "cafe\u0301", "Ωmega", "数据", "x\x00y", "🙂", "ﬁ", "Ａ"]


# ---------------------------------------------------------------------------- references in plain Python


def _mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def reference_signature(text: str, ngram: int, num_hashes: int, seed: int) -> list[int]:
    """The documented signature, one shingle and one permutation at a time: FNV-1a 64 of each word's UTF-8 then
    SplitMix64's finaliser; a shingle chains its words' hashes; permutation k keeps the top 32 bits of a_k h + b_k."""
    words = dedup.normalise(text).split(" ") if dedup.normalise(text) else []
    hashes = []
    for word in words:
        h = 0xCBF29CE484222325
        for byte in word.encode("utf-8", "surrogatepass"):
            h = ((h ^ byte) * 0x100000001B3) & M64
        hashes.append(_mix64(h))
    runs = [hashes[i:i + ngram] for i in range(len(hashes) - ngram + 1)] if len(hashes) >= ngram else [hashes]
    key = (seed ^ 0x5167_0000_0000_0001) & M64
    draws = [_mix64((_mix64(key) + i * 0x9E3779B97F4A7C15) & M64) for i in range(2 * num_hashes)]
    sig = [0xFFFFFFFF] * num_hashes
    for run in runs if hashes else []:
        s = 0x5B1E_6A7E_D0C5_0001
        for h in run:
            s = _mix64(s ^ h)
        for k in range(num_hashes):
            sig[k] = min(sig[k], (((draws[2 * k] | 1) * s + draws[2 * k + 1]) & M64) >> 32)
    return sig


def random_texts(seed: int, n: int) -> list[str]:
    """Texts of 0 to 12 words from WORDS, joined by runs of any whitespace, some with leading/trailing space."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        words = [WORDS[i] for i in rng.integers(len(WORDS), size=rng.integers(0, 13))]
        gaps = ["".join(rng.choice(SPACES, size=rng.integers(1, 3))) for _ in range(len(words) + 1)]
        text = "".join(g + w for g, w in zip(gaps, words)) + gaps[-1]
        texts.append(text if rng.random() < 0.5 else text.strip())
    return texts


def reference_clusters(sig: np.ndarray, bands: int, rows: int, threshold: float) -> np.ndarray:
    """Every pair with an equal band and an estimated Jaccard >= threshold is an edge; clusters are components."""
    n, k = sig.shape
    edges = [(i, j) for j in range(n) for i in range(j)
             if any((sig[i, b * rows:(b + 1) * rows] == sig[j, b * rows:(b + 1) * rows]).all() for b in range(bands))
             and int((sig[i] == sig[j]).sum()) / k >= threshold]
    return components(n, edges)


# ---------------------------------------------------------------------------- exact


def test_normalise_composes_unicode_and_collapses_every_kind_of_whitespace():
    assert dedup.normalise("\u3000 cafe\u0301\t\u2028 Ωmega\u00a0\u00a0x \n") == "café Ωmega x"
    assert dedup.normalise(" \t\n") == ""
    for text in random_texts(0, 200):
        assert dedup.normalise(text) == " ".join(unicodedata.normalize("NFC", text).split())


def test_exact_keys_are_equal_exactly_when_the_normalised_texts_are():
    texts = random_texts(1, 400) + ["a b", " a  b ", "a\u00a0b", "a\u3000\u2029b", "café", "cafe\u0301", "a  c"]
    keys = dedup.exact_keys(texts)
    assert keys.dtype == np.uint64 and keys.shape == (len(texts),)
    seen: set[str] = set()
    first = []
    for t in texts:  # dedup by a plain set of normalised texts, in corpus order
        first.append(dedup.normalise(t) not in seen)
        seen.add(dedup.normalise(t))
    _, index = np.unique(keys, return_index=True)
    by_key = np.zeros(len(texts), dtype=bool)
    by_key[index] = True  # np.unique's index is each key's first occurrence
    assert (by_key == np.asarray(first)).all()
    assert len(set(keys.tolist())) == len(seen)
    assert keys[-7] == keys[-6] == keys[-5] == keys[-4] and keys[-3] == keys[-2] and keys[-7] != keys[-1]


def test_exact_keys_are_a_stable_hash_of_the_utf8_bytes():
    digest = hashlib.blake2b("café Ωmega".encode(), digest_size=8).digest()
    assert dedup.exact_keys([" cafe\u0301\n Ωmega"])[0] == int.from_bytes(digest, "little")
    assert dedup.exact_keys([]).shape == (0,)


# ---------------------------------------------------------------------------- signatures


@pytest.mark.parametrize("ngram", [1, 3, 5])
def test_signatures_equal_a_plain_python_minhash(ngram):
    texts = random_texts(ngram, 150) + ["", " \u2028 ", "a", "a b", "a b c d e", "a b c d e f g"]
    sig = dedup.minhash_signatures(texts, ngram=ngram, num_hashes=16, seed=7)
    assert sig.dtype == np.uint32 and sig.shape == (len(texts), 16)
    for text, row in zip(texts, sig):
        assert row.tolist() == reference_signature(text, ngram, 16, seed=7), repr(text)


def test_short_and_empty_texts():
    sig = dedup.minhash_signatures(["", "\t \u3000", "a b", "a  b", "b a", "a b c d e"], ngram=5, num_hashes=32,
                                   seed=0)
    assert (sig[0] == 0xFFFFFFFF).all() and (sig[1] == sig[0]).all()  # no words: the one fixed signature
    assert (sig[2] == sig[3]).all()  # fewer words than ngram: one shingle of all the words, in order
    assert (sig[2] != sig[4]).any() and (sig[2] != sig[0]).any()
    assert (sig[5] != sig[0]).any()
    assert dedup.minhash_signatures([], ngram=5, num_hashes=4, seed=0).shape == (0, 4)


def test_the_seed_acts():
    texts = [t for t in random_texts(3, 30) if t.strip()]  # an empty text has the one fixed signature
    one = dedup.minhash_signatures(texts, ngram=2, num_hashes=8, seed=1)
    assert (one == dedup.minhash_signatures(texts, ngram=2, num_hashes=8, seed=1)).all()
    assert (one != dedup.minhash_signatures(texts, ngram=2, num_hashes=8, seed=2)).mean() > 0.9


def test_the_estimate_is_unbiased_with_the_binomial_error_of_true_jaccard():
    pairs = [planted_corpus(seed=s, bases=1, copies=1, near_edits=(1, 30))[0] for s in range(400)]  # independent
    sig = dedup.minhash_signatures([t for pair in pairs for t in pair], ngram=dedup.NGRAM,
                                   num_hashes=dedup.NUM_HASHES, seed=0)
    z = []
    for k, (a, b) in enumerate(pairs):
        s = jaccard(shingles(a, dedup.NGRAM), shingles(b, dedup.NGRAM))
        if 0.02 < s < 0.98:
            z.append(((sig[2 * k] == sig[2 * k + 1]).mean() - s) / np.sqrt(s * (1 - s) / dedup.NUM_HASHES))
    z = np.asarray(z)
    assert len(z) > 350
    assert abs(z.mean()) < 4 / np.sqrt(len(z))  # no bias
    assert 0.85 < z.std() < 1.15  # each entry an independent Bernoulli(s): a correlated family spreads wider
    assert np.abs(z).max() < 5


def test_signatures_do_not_depend_on_the_batch_or_the_thread_count():
    texts = random_texts(4, 300) + planted_corpus(seed=4, bases=20, copies=20)[0]
    whole = dedup.minhash_signatures(texts, ngram=3, num_hashes=24, seed=5)
    order = np.random.default_rng(0).permutation(len(texts))
    parts = [dedup.minhash_signatures([texts[i] for i in chunk], ngram=3, num_hashes=24, seed=5)
             for chunk in np.array_split(order, 7)]
    assert (np.concatenate(parts) == whole[order]).all()
    import numba

    before = numba.get_num_threads()
    assert (dedup.minhash_signatures(texts, ngram=3, num_hashes=24, seed=5, threads=1) == whole).all()
    assert numba.get_num_threads() == before  # the caller's thread count is given back


def test_a_fresh_process_with_another_hash_seed_and_one_thread_gives_the_same_bytes():
    texts = planted_corpus(seed=5, bases=30, copies=30)[0]
    texts += random_texts(5, 50)
    here = dedup.minhash_signatures(texts, ngram=5, num_hashes=dedup.NUM_HASHES, seed=9)
    clusters = dedup.near_duplicate_clusters(here, bands=dedup.BANDS, rows=dedup.ROWS, threshold=dedup.THRESHOLD)
    script = (
        "import hashlib, sys\n"
        "from mlmprep.builder import dedup\n"
        "from tests.near_duplicates import planted_corpus\n"
        "from tests.builder.test_dedup_kernels import random_texts\n"
        "texts = planted_corpus(seed=5, bases=30, copies=30)[0] + random_texts(5, 50)\n"
        "s = dedup.minhash_signatures(texts, ngram=5, num_hashes=dedup.NUM_HASHES, seed=9)\n"
        "c = dedup.near_duplicate_clusters(s, bands=dedup.BANDS, rows=dedup.ROWS, threshold=dedup.THRESHOLD)\n"
        "print(hashlib.sha256(s.tobytes()).hexdigest(), hashlib.sha256(c.tobytes()).hexdigest(),"
        " hashlib.sha256(dedup.exact_keys(texts).tobytes()).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "NUMBA_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [hashlib.sha256(here.tobytes()).hexdigest(),
                                  hashlib.sha256(clusters.tobytes()).hexdigest(),
                                  hashlib.sha256(dedup.exact_keys(texts).tobytes()).hexdigest()]


# ---------------------------------------------------------------------------- clusters


def clustered_signatures(seed: int, n: int, k: int) -> np.ndarray:
    """Rows copied from a few centres with a random share of entries redrawn from 0..3, some rows repeated:
    many equal bands, estimates spread over 0 to 1."""
    rng = np.random.default_rng(seed)
    centres = rng.integers(0, 4, size=(6, k), dtype=np.uint32)
    sig = centres[rng.integers(6, size=n)]
    redraw = rng.random((n, k)) < rng.random((n, 1)) * 0.8
    sig = np.where(redraw, rng.integers(0, 4, size=(n, k), dtype=np.uint32), sig)
    repeats = rng.integers(n, size=n // 5)
    sig[rng.integers(n, size=n // 5)] = sig[repeats]
    return sig


@pytest.mark.parametrize("bands,rows,threshold", [(4, 3, 0.7), (3, 2, 0.65), (6, 2, 0.9), (1, 12, 0.6), (5, 1, 0.75)])
def test_clusters_are_the_components_of_the_kept_candidate_pairs(bands, rows, threshold):
    sig = clustered_signatures(bands * 10 + rows, n=250, k=12)
    got = dedup.near_duplicate_clusters(sig, bands=bands, rows=rows, threshold=threshold)
    want = reference_clusters(sig, bands, rows, threshold)
    assert got.dtype == np.int64
    assert (got == want).all()
    assert 5 < len(np.unique(want)) < 240  # neither everything one cluster nor nothing joined


def test_lsh_keys_of_shards_joined_give_the_clusters_of_the_whole():
    """The build computes each shard's keys as it comes in: keys of slices, joined, are the whole's, and
    clustering with them finds what clustering from the signatures alone does (the reference's components)."""
    sig = clustered_signatures(7, n=300, k=12)
    whole = dedup.lsh_keys(sig, bands=4, rows=3)
    assert whole.shape == (5, 300) and whole.dtype == np.uint64
    joined = np.concatenate([dedup.lsh_keys(sig[a:b], bands=4, rows=3) for a, b in ((0, 37), (37, 200), (200, 300))],
                            axis=1)
    assert (joined == whole).all()
    equal_band = sig[:, None, 3:6] == sig[None, :, 3:6]  # band 1: equal keys exactly where the entries are equal
    assert ((whole[2][:, None] == whole[2][None, :]) == equal_band.all(axis=2)).all()
    got = dedup.near_duplicate_clusters(sig, bands=4, rows=3, threshold=0.7, keys=joined)
    assert (got == reference_clusters(sig, 4, 3, 0.7)).all()
    with pytest.raises(ConfigError, match="LSH keys must have shape"):
        dedup.near_duplicate_clusters(sig, bands=4, rows=3, threshold=0.7, keys=joined[:, 1:])


@pytest.mark.parametrize("sizes", [(4, 0, 7, 30, 2), (0, 3, 1), (5,)])
def test_shards_rows_added_in_any_order_are_joined_in_corpus_order(sizes):
    """The first shard's size sets the room reserved; later, larger shards make the array grow."""
    from mlmprep.builder.selection import JoinedRows

    rng = np.random.default_rng(3)
    pieces = [rng.integers(0, 2**32, (n, 6), dtype=np.uint32) for n in sizes]
    rows = JoinedRows(len(pieces))
    for index in rng.permutation(len(pieces)):
        rows.add(int(index), pieces[index])
    got = rows.joined()
    assert got.dtype == np.uint32 and got.shape == (sum(sizes), 6)
    assert (got == np.concatenate(pieces)).all()
    assert rows.pending == [None] * len(pieces)  # each shard's own copy let go


def test_a_cluster_is_represented_by_its_first_document():
    sig = np.array([[1, 2, 3, 4], [9, 9, 9, 9], [1, 2, 3, 5], [9, 9, 9, 9], [1, 2, 3, 4]], dtype=np.uint32)
    assert dedup.near_duplicate_clusters(sig, bands=2, rows=2, threshold=0.75).tolist() == [0, 1, 0, 1, 0]
    assert dedup.near_duplicate_clusters(sig, bands=2, rows=2, threshold=1.0).tolist() == [0, 1, 2, 1, 0]
    assert dedup.near_duplicate_clusters(sig[:1], bands=2, rows=2, threshold=0.8).tolist() == [0]
    assert dedup.near_duplicate_clusters(sig[:0], bands=2, rows=2, threshold=0.8).shape == (0,)


@pytest.mark.parametrize("seed", [0, 1])
def test_near_duplicates_of_planted_copies_match_brute_force_jaccard(seed):
    texts, _, near = planted_corpus(seed=seed, bases=150, copies=250)
    truth = brute_force_duplicates(texts, dedup.NGRAM, dedup.THRESHOLD)
    assert (truth == planted_duplicates(near)).mean() > 0.99  # brute force agrees with what was planted
    sig = dedup.minhash_signatures(texts, ngram=dedup.NGRAM, num_hashes=dedup.NUM_HASHES, seed=0)
    reps = dedup.near_duplicate_clusters(sig, bands=dedup.BANDS, rows=dedup.ROWS, threshold=dedup.THRESHOLD)
    recall, precision = recall_precision(reps != np.arange(len(texts)), truth)
    assert 100 < truth.sum() < 150  # the near copies, not the far ones (Jaccard < 0.8 but often candidates)
    assert recall >= 0.95 and precision >= 0.95, (recall, precision)


@pytest.mark.parametrize("kwargs,message", [
    (dict(bands=5, rows=5, threshold=0.8), "bands x rows <= 24"),
    (dict(bands=0, rows=5, threshold=0.8), "bands >= 1"),
    (dict(bands=4, rows=5, threshold=0.0), "in (0, 1]"),
    (dict(bands=4, rows=5, threshold=1.5), "in (0, 1]"),
])
def test_impossible_parameters_are_config_errors(kwargs, message):
    sig = np.zeros((3, 24), dtype=np.uint32)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        dedup.near_duplicate_clusters(sig, **kwargs)
    with pytest.raises(ConfigError, match="ngram >= 1"):
        dedup.minhash_signatures(["a"], ngram=0, num_hashes=4, seed=0)
