"""Independent references for near-duplicate detection, shared by tests/builder/test_dedup_kernels.py and
benchmarks/minhash.py: corpora with planted near duplicates, true Jaccard similarity of word n-gram sets by
brute force (every pair), and the duplicates a threshold makes of them, in plain Python.

    texts, origin, near = planted_corpus(seed=0, bases=200, copies=200)  # copies edit a few words of another
    truth = brute_force_duplicates(texts, ngram=5, threshold=0.8)  # bool [n]: what dedup should drop
"""

from __future__ import annotations

from collections import deque

import numpy as np

WORDS = 3_000  # vocabulary of the generated documents: unrelated documents share few 5-grams


def planted_corpus(seed: int, bases: int, copies: int, *, near_edits: tuple[int, int] = (1, 3),
                   far_edits: tuple[int, int] = (10, 25), words: tuple[int, int] = (150, 300)
                   ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(texts, origin, near): `bases` random documents of Zipf-like words, then `copies` edited copies of a random
    earlier document (a base or a copy), all shuffled; origin[i] is the base document i descends from, near[i] the
    document i is a near copy of (-1: none; the planted ground truth). Half the copies
    get near_edits word edits (replace, insert or delete; Jaccard of 5-grams 0.8 to 0.97 to their source), half
    far_edits (0.1 to 0.75): related documents that are not near duplicates. Wider near_edits put copies on
    both sides of 0.8, where any MinHash is as often wrong as right."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{k}" for k in range(WORDS)]
    weights = 1.0 / np.arange(1, WORDS + 1) ** 0.8
    weights /= weights.sum()
    docs = [list(rng.choice(vocab, size=rng.integers(words[0], words[1] + 1), p=weights)) for _ in range(bases)]
    origin, near = list(range(bases)), [-1] * bases
    for c in range(copies):
        src = int(rng.integers(len(docs)))
        text = list(docs[src])
        lo, hi = near_edits if c % 2 == 0 else far_edits
        for _ in range(int(rng.integers(lo, hi + 1))):
            at, op = int(rng.integers(len(text))), rng.integers(3)
            if op == 0:
                text[at] = str(rng.choice(vocab, p=weights))
            elif op == 1:
                text.insert(at, str(rng.choice(vocab, p=weights)))
            elif len(text) > 1:
                del text[at]
        docs.append(text)
        origin.append(origin[src])
        near.append(src if c % 2 == 0 else -1)
    order = rng.permutation(len(docs))
    place = np.argsort(order)  # where each generated document lands
    near_in_order = np.asarray([place[near[i]] if near[i] >= 0 else -1 for i in order], dtype=np.int64)
    return [" ".join(docs[i]) for i in order], np.asarray(origin)[order], near_in_order


def shingles(text: str, ngram: int) -> set[tuple[str, ...]]:
    """The word n-grams of a whitespace-normalised text; fewer words than ngram: one shingle of all of them."""
    words = text.split()
    if len(words) < ngram:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + ngram]) for i in range(len(words) - ngram + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def components(n: int, pairs) -> np.ndarray:
    """int64 [n]: the smallest index of each node's connected component under the pairs, by breadth-first search."""
    adjacent: list[list[int]] = [[] for _ in range(n)]
    for x, y in pairs:
        adjacent[x].append(y)
        adjacent[y].append(x)
    out = np.full(n, -1, dtype=np.int64)
    for start in range(n):  # in increasing order: a component is first reached from its smallest node
        if out[start] >= 0:
            continue
        out[start], queue = start, deque([start])
        while queue:
            for y in adjacent[queue.popleft()]:
                if out[y] < 0:
                    out[y] = start
                    queue.append(y)
    return out


def planted_duplicates(near: np.ndarray) -> np.ndarray:
    """bool [n]: the documents dedup should drop by the planted ground truth: all but the first of each group
    joined by near-copy links."""
    return components(len(near), [(i, j) for i, j in enumerate(near.tolist()) if j >= 0]) != np.arange(len(near))


def brute_force_pairs(texts: list[str], ngram: int, threshold: float) -> list[tuple[int, int]]:
    """Every pair (i < j) whose true Jaccard similarity is >= threshold > 0: each pair that shares a shingle
    (found through an index of shingles: the others have Jaccard 0) is measured."""
    sets = [shingles(t, ngram) for t in texts]
    postings: dict[tuple[str, ...], list[int]] = {}
    for j, s in enumerate(sets):
        for shingle in s:
            postings.setdefault(shingle, []).append(j)
    share = {(i, j) for docs in postings.values() for k, j in enumerate(docs) for i in docs[:k]}
    empty = [j for j, s in enumerate(sets) if not s]  # no shingles: equal to each other (Jaccard 1)
    share |= {(i, j) for k, j in enumerate(empty) for i in empty[:k]}
    return sorted((i, j) for i, j in share if jaccard(sets[i], sets[j]) >= threshold)


def brute_force_duplicates(texts: list[str], ngram: int, threshold: float) -> np.ndarray:
    """bool [n]: all but the first document of each component of the pairs of true Jaccard >= threshold."""
    return components(len(texts), brute_force_pairs(texts, ngram, threshold)) != np.arange(len(texts))


def recall_precision(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(recall, precision) of the documents found to be duplicates against the true ones (bool arrays)."""
    hits = int((found & truth).sum())
    return hits / max(1, int(truth.sum())), hits / max(1, int(found.sum()))
