"""Brute-force references for n-gram overlap, on Python strings and sets (no hashes): the lines --dedup-paragraphs
removes, the validation documents --decontaminate moves, the two contamination measures, and the pieces --exclude
leaves of a document."""

from __future__ import annotations

import unicodedata

NGRAM, MATCH = 13, 50


def word_ngrams(text: str, n: int = NGRAM) -> list[tuple[str, ...]]:
    """The text's runs of n words (NFC, split at whitespace), with repeats; fewer words: one run of them all."""
    words = unicodedata.normalize("NFC", text).split()
    if len(words) < n:
        return [tuple(words)] if words else []
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def line_fates(docs: list[str], threshold: float) -> list[list[tuple[str, bool]]]:
    """Each document's lines, each with whether it goes: its n-grams were at least `threshold` in some earlier line
    of the corpus (every earlier line counts, removed or not)."""
    seen: set[tuple[str, ...]] = set()
    fates = []
    for doc in docs:
        fates.append([])
        for line in doc.split("\n"):
            grams = word_ngrams(line)
            fates[-1].append((line, bool(grams) and sum(g in seen for g in grams) >= threshold * len(grams)))
            seen.update(grams)
    return fates


def without_repeated_lines(docs: list[str], threshold: float) -> tuple[list[str], int, int]:
    """Each document less its lines that go (line_fates); (the documents, blank ones left out; lines removed;
    characters removed, line breaks included)."""
    out, removed, chars = [], 0, 0
    for doc, lines in zip(docs, line_fates(docs, threshold)):
        kept = [line for line, gone in lines if not gone]
        removed += len(lines) - len(kept)
        text = "\n".join(kept)
        chars += len(doc) - len(text)
        if text.strip():
            out.append(text)
    return out, removed, chars


def decontaminated(sides: list[str], docs: list[str], threshold: float) -> list[str]:
    """The sides ("train", "validation" or "dropped", per document) after moving every validation document with more
    than `threshold` of its n-grams (with repeats) among the training documents' to training, until none is left."""
    sides = list(sides)
    while True:
        training = {g for doc, side in zip(docs, sides) if side == "train" for g in word_ngrams(doc)}
        moving = [i for i, (doc, side) in enumerate(zip(docs, sides)) if side == "validation"
                  and sum(g in training for g in word_ngrams(doc)) > threshold * len(word_ngrams(doc))]
        if not moving:
            return sides
        for i in moving:
            sides[i] = "train"


def side_streams(docs: list[str], sides: list[str], threshold: float | None = 0.2) -> dict[str, list[str]]:
    """Each side's documents in the order a build streams them: training's in corpus order, then the validation
    documents `decontaminated` moves (none when `threshold` is None; 0.2 is the build's default), then
    validation's."""
    after = decontaminated(sides, docs, threshold) if threshold is not None else sides
    moved = [d for d, b, a in zip(docs, sides, after) if b != a]
    return {"train": [d for d, s in zip(docs, sides) if s == "train"] + moved,
            "validation": [d for d, s in zip(docs, after) if s == "validation"]}


def measures(validation: list[str], training: list[str], tokens_of) -> dict[str, int]:
    """GPT-3's (validation documents with an n-gram among training's) and Lee et al.'s (their tokens inside a run of
    MATCH tokens that training also has) measures; tokens_of(doc): the document's token ids."""
    grams = {g for doc in training for g in word_ngrams(doc)}
    runs = set()
    for doc in training:
        ids = tokens_of(doc)
        runs.update(tuple(ids[i : i + MATCH]) for i in range(len(ids) - MATCH + 1))
    covered = 0
    for doc in validation:
        ids, inside = tokens_of(doc), set()
        for i in range(len(ids) - MATCH + 1):
            if tuple(ids[i : i + MATCH]) in runs:
                inside.update(range(i, i + MATCH))
        covered += len(inside)
    return {"documents": len(validation),
            "documents_with_ngram": sum(any(g in grams for g in word_ngrams(doc)) for doc in validation),
            "tokens": sum(len(tokens_of(doc)) for doc in validation), "tokens_in_match": covered}


def hashed_decontamination(sides: list[str], grams: list[list[int]], threshold: float,
                           windows: tuple[list[list[int]], list[int]] | None = None) -> tuple[list[bool], dict, dict]:
    """decontaminated on hashes given per document (sides: "train", "validation" or "dropped"), all at once in Python
    sets: (moved, the measures before, after) as the build states them; `windows`: each document's token-window
    hashes (a window of MATCH tokens at each token) and its tokens, for Lee et al.'s measure."""
    runs, lengths = windows if windows is not None else ([[] for _ in sides], [0] * len(sides))

    def training(per_doc: list[list[int]], moved: list[bool]) -> set[int]:
        return {h for doc, side, m in zip(per_doc, sides, moved) if side == "train" or m for h in doc}

    def measured(left: list[int], moved: list[bool]) -> dict[str, int]:
        trained_grams, trained_runs, covered = training(grams, moved), training(runs, moved), 0
        for d in left:
            inside = set()
            for i, h in enumerate(runs[d]):
                if h in trained_runs:
                    inside.update(range(i, i + MATCH))
            covered += len(inside)
        out = {"documents": len(left),
               "documents_with_ngram": sum(any(h in trained_grams for h in grams[d]) for d in left)}
        return out | ({"tokens": sum(lengths[d] for d in left), "tokens_in_match": covered} if windows else {})

    moved = [False] * len(sides)
    while True:
        trained = training(grams, moved)
        more = [d for d, side in enumerate(sides) if side == "validation" and not moved[d]
                and sum(h in trained for h in grams[d]) / max(len(grams[d]), 1) > threshold]
        if not more:
            break
        for d in more:
            moved[d] = True
    held = [d for d, side in enumerate(sides) if side == "validation"]
    return moved, measured(held, [False] * len(sides)), measured([d for d in held if not moved[d]], moved)


def evaluation_grams(texts: list[str], fewest: int = 8) -> set[tuple[str, ...]]:
    """The n-grams --exclude looks for, as Megatron's filter_ngrams builds them from task texts: a text's 13-grams,
    or, for a text of fewer words but at least `fewest`, the text's words whole; nothing of a shorter one."""
    grams = set()
    for text in texts:
        words = tuple(unicodedata.normalize("NFC", text).split())
        if len(words) >= NGRAM:
            grams.update(words[i : i + NGRAM] for i in range(len(words) - NGRAM + 1))
        elif len(words) >= fewest:
            grams.add(words)
    return grams


def runs(words: list[str], grams: set[tuple[str, ...]]) -> list[tuple[int, int]]:
    """(first word, word count) of every run of `words` that is one of `grams`, of any length they have."""
    return [(k, n) for n in {len(g) for g in grams} for k in range(len(words) - n + 1)
            if tuple(words[k : k + n]) in grams]


def has_match(doc: str, grams: set[tuple[str, ...]]) -> bool:
    return bool(runs(unicodedata.normalize("NFC", doc).split(), grams))


def excluded_pieces(doc: str, grams: set[tuple[str, ...]], margin: int = 200, shortest: int = 200,
                    most: int = 10) -> list[str]:
    """The runs of `doc`'s characters left once every character within `margin` of a run of its words in `grams`
    (of any length they have) is struck out (a run spans its first word's first character to its last word's
    last), those of at least `shortest` characters and not blank; none when more than `most` are left."""
    spans, i = [], 0  # each word's [start, end), words being runs of characters that are not str.isspace()
    while i < len(doc):
        if doc[i].isspace():
            i += 1
            continue
        j = i
        while j < len(doc) and not doc[j].isspace():
            j += 1
        spans.append((i, j))
        i = j
    words = [unicodedata.normalize("NFC", doc[a:b]) for a, b in spans]
    struck = [False] * len(doc)
    for k, n in runs(words, grams):
        for c in range(max(spans[k][0] - margin, 0), min(spans[k + n - 1][1] + margin, len(doc))):
            struck[c] = True
    pieces, piece = [], []
    for ch, gone in zip(doc, struck):
        if gone:
            if piece:
                pieces.append("".join(piece))
            piece = []
        else:
            piece.append(ch)
    if piece:
        pieces.append("".join(piece))
    kept = [p for p in pieces if len(p) >= shortest and p.strip()]
    return [] if len(kept) > most else kept
