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

_PRIME = (1 << 61) - 1  # hashes are taken modulo this Mersenne prime, then kept to 32 bits


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


def _permutations(num_hashes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of num_hashes universal hash functions x -> (a*x + b) mod _PRIME of 32-bit x, drawn from `seed`;
    a and b below 2**32, so a*x + b never wraps uint64."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 32, size=num_hashes, dtype=np.uint64)
    b = rng.integers(0, 1 << 32, size=num_hashes, dtype=np.uint64)
    return a, b


def minhash_signatures(texts: list[str], *, ngram: int, num_hashes: int, seed: int) -> np.ndarray:
    """uint32 [n, num_hashes]: for each text and hash function, the least hash of its word n-gram shingles. Two
    texts agree in one entry with probability about their shingle sets' Jaccard similarity."""
    a, b = _permutations(num_hashes, seed)
    out = np.zeros((len(texts), num_hashes), dtype=np.uint32)
    for i, text in enumerate(texts):
        base = np.array([_hash64(s) & 0xFFFFFFFF for s in _shingles(text, ngram)], dtype=np.uint64)
        hashed = (np.multiply.outer(base, a) + b) % np.uint64(_PRIME)
        out[i] = (hashed.min(axis=0) & np.uint64(0xFFFFFFFF)).astype(np.uint32)
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
