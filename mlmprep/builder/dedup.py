"""Exact and near-duplicate detection over documents: content keys, MinHash signatures, LSH clusters.

Pure functions of their inputs: the same texts and parameters give the same arrays on any process, machine,
thread count or batch split (no Python hash(); every document is hashed on its own). The loops are the Numba
kernels of mlmprep.builder._dedup_kernels, imported where first called, so exact dedup never loads Numba.

Near duplicates: each document's words (`normalise(text).split(" ")`) give its shingles, every run of NGRAM
consecutive words (a document of fewer words is one shingle of all of them; an empty one has no shingle and
the fixed signature of all 0xFFFFFFFF, so empty documents are near duplicates of each other). A shingle's
64-bit hash goes through NUM_HASHES multiply-shift permutations, and a signature keeps each one's minimum:
two documents' signatures agree in an entry with probability their Jaccard similarity s. LSH cuts the first
BANDS x ROWS entries into bands; documents with an equal band are candidates, P = 1 - (1 - s**ROWS)**BANDS:

    s          0.5     0.6     0.7     0.75    0.8      0.9
    24 x 5     0.533   0.857   0.988   0.9985  0.99993  1.0     (these defaults)
    14 x 8     0.053   0.211   0.565   0.772   0.924    0.9996  (datatrove's)

so almost no pair above THRESHOLD is missed by the bands, and a candidate is kept as an edge only when its
estimated Jaccard (the share of equal entries over all NUM_HASHES, standard error 0.037 at s = 0.8) reaches
THRESHOLD; the cheap, wide bands give the recall, the estimate the precision. Clusters are the connected
components of the edges (union-find); each document's representative is its cluster's smallest index.

Memory of near_duplicate_clusters per million documents: the signatures it is given (NUM_HASHES x 4 bytes: 480 MB)
and their LSH keys (lsh_keys: (BANDS + 1) x 8 bytes, 200 MB; the build computes them shard by shard as the shards
come in), plus about 50 MB of int64/int32 arrays (union-find parents, the representatives, one key row, one band's
counting sort into buckets at a time); no Python object per document.
Time: a pass over the keys per band, plus every pair within a bucket of equal band keys (a bucket of m different
signatures costs up to m**2 / 2 root look-ups; m identical ones are joined in m steps first); one thread.
"""

from __future__ import annotations

import dataclasses
import hashlib
import unicodedata

import numpy as np

from mlmprep.builder import randomness
from mlmprep.config import BuildConfig
from mlmprep.errors import ConfigError

# the build's defaults (declared once, in mlmprep.config): words per shingle, as datatrove (long enough that
# shared common phrases do not make documents alike); LSH bands and rows (NUM_HASHES entries per signature set
# the standard error of the estimate); the estimated Jaccard at or above which two candidates are near duplicates
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(BuildConfig)}
NGRAM, BANDS, ROWS = _DEFAULTS["dedup_ngram"], _DEFAULTS["dedup_bands"], _DEFAULTS["dedup_rows"]
NUM_HASHES = BANDS * ROWS
THRESHOLD = _DEFAULTS["dedup_threshold"]

_SIGNATURE_TAG = 0x5167_0000_0000_0001  # keeps the permutation streams apart from masking's row streams


def normalise(text: str) -> str:
    """The text in Unicode NFC, each run of whitespace (str.isspace()) one space, stripped at both ends."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def exact_keys(texts: list[str], encoded: list[bytes] | None = None) -> np.ndarray:
    """uint64 [n]: the first 8 bytes (little-endian) of the BLAKE2b hash of each normalise(text) in UTF-8;
    equal keys mean equal normalised texts (up to a 2**-64 collision), on any machine or Python run. `encoded`:
    normalised_utf8(texts), when the caller has it."""
    encoded = normalised_utf8(texts) if encoded is None else encoded
    digests = b"".join(hashlib.blake2b(data, digest_size=8).digest() for data in encoded)
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


def normalised_utf8(texts: list[str]) -> list[bytes]:
    """Each normalise(text) in UTF-8."""
    return [normalise(t).encode("utf-8", "surrogatepass") for t in texts]


def permutations(num_hashes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b), uint64 [num_hashes] each: permutation k maps a shingle hash h to the top 32 bits of a_k h + b_k
    (mod 2**64), a_k odd; drawn from SplitMix64 streams of the seed."""
    key = np.uint64((seed ^ _SIGNATURE_TAG) & randomness.MASK64)
    with np.errstate(over="ignore"):
        draws = randomness.stream_key(key, np.arange(2 * num_hashes, dtype=np.uint64))
    return draws[0::2] | np.uint64(1), draws[1::2]


def minhash_signatures(texts: list[str], *, ngram: int, num_hashes: int, seed: int, threads: int = 0) -> np.ndarray:
    """uint32 [n, num_hashes]: the MinHash signature of each text over the word n-gram shingles of normalise(text)
    (see the module docstring); the words are split and hashed in one Numba pass over all texts' UTF-8 bytes, on
    `threads` of Numba's threads (0: all of them); the signatures do not depend on it."""
    if ngram < 1 or num_hashes < 1:
        raise ConfigError(f"MinHash needs ngram >= 1 and num_hashes >= 1, got ngram={ngram}, num_hashes={num_hashes}")
    import numba

    from mlmprep.builder import _dedup_kernels
    from mlmprep.builder.overlap import utf8_texts

    buf, offsets = utf8_texts(texts)  # NFC only: the kernel splits words at every whitespace code point itself
    a, b = permutations(num_hashes, seed)
    out = np.empty((len(texts), num_hashes), dtype=np.uint32)
    before = numba.get_num_threads()  # of this thread only
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS) if threads > 0 else before)
    try:
        _dedup_kernels.signatures(buf, offsets, ngram, a, b, out)
    finally:
        numba.set_num_threads(before)
    return out


def lsh_keys(signatures: np.ndarray, *, bands: int, rows: int) -> np.ndarray:
    """uint64 [bands + 1, n]: the key of each whole signature (row 0) and of each of its bands (row 1 + j: entries
    j*rows to (j + 1)*rows), which near_duplicate_clusters buckets; a pure function of each signature alone, so a
    shard's keys can be computed as soon as it is read."""
    sig = _signatures_array(signatures)
    if bands < 1 or rows < 1 or bands * rows > sig.shape[1]:
        raise ConfigError(f"LSH needs bands >= 1, rows >= 1 and bands x rows <= {sig.shape[1]} signature entries, "
                          f"got {bands} x {rows}")
    from mlmprep.builder import _dedup_kernels as kernels

    return kernels.lsh_keys(sig, bands, rows)


def _signatures_array(signatures: np.ndarray) -> np.ndarray:
    sig = np.ascontiguousarray(signatures, dtype=np.uint32)
    if sig.ndim != 2:
        raise ConfigError(f"signatures must be a 2-d array [documents, hashes], got shape {sig.shape}")
    return sig


def near_duplicate_clusters(signatures: np.ndarray, *, bands: int, rows: int, threshold: float,
                            keys: np.ndarray | list[np.ndarray] | None = None) -> np.ndarray:
    """int64 [n]: for each document the index of its cluster's first document (corpus order).

    Candidates are the pairs with an equal band (band j: columns j*rows to (j+1)*rows); a candidate is an edge
    when its estimated Jaccard, the share of equal entries of the whole signatures, is >= threshold; clusters
    are the connected components of the edges. Documents of identical signature are joined first, and only
    one of each such group takes part in the bands (its comparisons are theirs). `keys`: lsh_keys of the
    signatures, if computed already: one array, or the arrays of consecutive runs of documents (a build's
    shards, never joined: one key row at a time is gathered)."""
    sig = _signatures_array(signatures)
    parts = [lsh_keys(sig, bands=bands, rows=rows)] if keys is None else keys if isinstance(keys, list) else [keys]
    if any(p.shape[0] != bands + 1 for p in parts) or sum(p.shape[1] for p in parts) != len(sig):
        shapes = ", ".join(str(p.shape) for p in parts)
        raise ConfigError(f"LSH keys must have shape {(bands + 1, len(sig))} in all, got {shapes}")
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"the near-duplicate threshold is a Jaccard similarity in (0, 1], got {threshold}")
    from mlmprep.builder import _dedup_kernels as kernels

    n = len(sig)
    parent = np.arange(n, dtype=np.int64)
    if n < 2:
        return parent
    row = np.empty(n, np.uint64)  # one key row of every document at a time
    kernels.link_identical(sig, np.concatenate([p[0] for p in parts], out=row), parent)
    docs = np.flatnonzero(kernels.roots(parent) == np.arange(n))  # one per identical signature, in corpus order
    bits = kernels.bucket_bits(docs.size)
    starts, order = np.empty((1 << bits) + 1, np.int32), np.empty(docs.size, np.int32)
    for band in range(1, bands + 1):  # one band bucketed at a time
        np.concatenate([p[band] for p in parts], out=row)
        starts[:] = 0
        kernels.bucket_into(row, docs, bits, starts, order)
        kernels.link_band(sig, docs, row, starts, order, threshold, parent)
    return kernels.roots(parent)
