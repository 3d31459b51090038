"""Duplicate detection over documents, as pure functions of texts and arrays: exact content keys, MinHash
signatures over word n-grams, and LSH clustering of the signatures.

Plain NumPy/Python reference version of the agreed interface; the Numba kernels replace this file whole.
`normalise` is what both kinds compare: Unicode NFC, every run of whitespace one space, the ends stripped.
"""

from __future__ import annotations

import hashlib
import unicodedata

import numpy as np

__all__ = ["exact_keys", "minhash_signatures", "near_duplicate_clusters", "normalise"]


def normalise(text: str) -> str:
    """The text duplicates are judged on: NFC, whitespace runs one space, ends stripped.

    >>> normalise("  caf\\u0065\\u0301\\n\\tau lait ")
    'café au lait'
    """
    return " ".join(unicodedata.normalize("NFC", text).split())


def _hash64(data: bytes, key: bytes = b"") -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=key).digest(), "little")


def exact_keys(texts: list[str]) -> np.ndarray:
    """uint64 [n]: a 64-bit blake2b hash of each normalised text's UTF-8, the same in every process and machine."""
    return np.array([_hash64(normalise(t).encode("utf-8", "surrogatepass")) for t in texts], dtype=np.uint64)


def _shingles(text: str, ngram: int) -> list[bytes]:
    """The distinct word n-grams of the normalised text (a text of fewer words: itself, one shingle)."""
    words = normalise(text).split(" ")
    if len(words) < ngram:
        return [" ".join(words).encode("utf-8", "surrogatepass")]
    return list({" ".join(words[i : i + ngram]).encode("utf-8", "surrogatepass")
                 for i in range(len(words) - ngram + 1)})


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser over uint64 (wrapping arithmetic): every output bit depends on every input bit."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def minhash_signatures(texts: list[str], *, ngram: int, num_hashes: int, seed: int) -> np.ndarray:
    """uint32 [n, num_hashes]: for each text and hash function, the least hash of its word n-gram shingles (the
    high 32 bits of it). Hash function k is mix64(shingle hash ^ salt_k), the salts drawn from `seed`. Two texts
    agree in one entry with probability about their shingle sets' Jaccard similarity."""
    salts = np.random.default_rng(seed).integers(0, 2**63, size=num_hashes, dtype=np.uint64) * np.uint64(2) + \
        np.uint64(1)
    out = np.zeros((len(texts), num_hashes), dtype=np.uint32)
    for i, text in enumerate(texts):
        base = np.array([_hash64(s) for s in _shingles(text, ngram)], dtype=np.uint64)
        out[i] = (_mix64(base[:, None] ^ salts[None, :]).min(axis=0) >> np.uint64(32)).astype(np.uint32)
    return out


def near_duplicate_clusters(signatures: np.ndarray, *, bands: int, rows: int, threshold: float) -> np.ndarray:
    """int64 [n]: each document's cluster representative, the smallest index in its cluster. Candidates share
    one band (`rows` signature entries) exactly; a candidate pair is an edge when the share of equal signature
    entries is at least `threshold`; clusters are the connected components. Documents with equal signatures
    are one cluster at once (their share is 1), so pairs are only tried between distinct signatures."""
    n = len(signatures)
    parent = np.arange(n, dtype=np.int64)
    if n == 0:
        return parent

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    _, first, inverse = np.unique(signatures, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    for i in range(n):
        union(int(first[inverse[i]]), i)
    distinct = np.sort(first)
    for band in range(bands):
        buckets: dict[bytes, list[int]] = {}
        for i in distinct:
            buckets.setdefault(signatures[i, band * rows : (band + 1) * rows].tobytes(), []).append(int(i))
        for members in buckets.values():
            for k, j in enumerate(members):
                for i in members[:k]:
                    if np.mean(signatures[i] == signatures[j]) >= threshold:
                        union(i, j)
    return np.array([find(i) for i in range(n)], dtype=np.int64)
