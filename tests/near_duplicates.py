"""Independent references for near-duplicate detection, shared by tests/test_dedup_kernels.py and
benchmarks/minhash.py: corpora with planted near duplicates, true Jaccard similarity of word n-gram sets by
brute force (every pair), and the duplicates a threshold makes of them, in plain Python.

    texts, origin = planted_corpus(seed=0, bases=200, copies=200)  # copies edit a few words of another
    truth = brute_force_duplicates(texts, ngram=5, threshold=0.8)  # bool [n]: an earlier doc is that close
"""

from __future__ import annotations

import numpy as np

WORDS = 3_000  # vocabulary of the generated documents: unrelated documents share few 5-grams


def planted_corpus(seed: int, bases: int, copies: int, *, near_edits: tuple[int, int] = (1, 3),
                   far_edits: tuple[int, int] = (10, 25), words: tuple[int, int] = (150, 300)
                   ) -> tuple[list[str], np.ndarray]:
    """(texts, origin): `bases` random documents of Zipf-like words, then `copies` edited copies of a random earlier
    document (a base or a copy), all shuffled; origin[i] is the base document i descends from. Half the copies
    get near_edits word edits (replace, insert or delete; Jaccard of 5-grams 0.8 to 0.97 to their source), half
    far_edits (0.1 to 0.75): related documents that are not near duplicates. Wider near_edits put copies on
    both sides of 0.8, where any MinHash is as often wrong as right."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{k}" for k in range(WORDS)]
    weights = 1.0 / np.arange(1, WORDS + 1) ** 0.8
    weights /= weights.sum()
    docs = [list(rng.choice(vocab, size=rng.integers(words[0], words[1] + 1), p=weights)) for _ in range(bases)]
    origin = list(range(bases))
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
    order = rng.permutation(len(docs))
    return [" ".join(docs[i]) for i in order], np.asarray(origin)[order]


def shingles(text: str, ngram: int) -> set[tuple[str, ...]]:
    """The word n-grams of a whitespace-normalised text; fewer words than ngram: one shingle of all of them."""
    words = text.split()
    if len(words) < ngram:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + ngram]) for i in range(len(words) - ngram + 1)}


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def brute_force_pairs(texts: list[str], ngram: int, threshold: float) -> list[tuple[int, int]]:
    """Every pair (i < j) whose true Jaccard similarity is >= threshold."""
    sets = [shingles(t, ngram) for t in texts]
    return [(i, j) for j in range(len(sets)) for i in range(j) if jaccard(sets[i], sets[j]) >= threshold]


def brute_force_duplicates(texts: list[str], ngram: int, threshold: float) -> np.ndarray:
    """bool [n]: document j has an earlier document i < j of true Jaccard >= threshold (dedup would drop it)."""
    dup = np.zeros(len(texts), dtype=bool)
    for _, j in brute_force_pairs(texts, ngram, threshold):
        dup[j] = True
    return dup


def recall_precision(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """(recall, precision) of the documents found to be duplicates against the true ones (bool arrays)."""
    hits = int((found & truth).sum())
    return hits / max(1, int(truth.sum())), hits / max(1, int(found.sum()))
