"""N-gram overlap inside the corpus: paragraphs seen earlier (--dedup-paragraphs), validation documents whose
text is in training (--decontaminate), and evaluation text to cut out (--exclude).

N-grams are runs of NGRAM words (GPT-3's decontamination, Dolma's bff), words as near dedup splits them (NFC, runs
between whitespace); a text of fewer words is one n-gram of them all, a text of none has none. Each is a 64-bit
hash (a polynomial of its words' hashes, rolled along: mlmprep.builder._dedup_kernels.shingle_hashes), so two
n-grams are taken as equal when their hashes are: a false match with one of a billion distinct n-grams has
probability about 2**-34 per n-gram looked up.

Paragraphs are lines (a document cut at "\\n", as C4 and bff do): a line whose n-grams were mostly (at least
--paragraph-threshold of them, counted with repeats) in some earlier line of the corpus, in corpus order, is
removed with its line break; a document left blank is dropped. An n-gram counts as seen once any earlier line
held it, removed or not, so each line's fate depends on the text before it only, never on other lines' fates
or on how the corpus was cut into shards: the driver takes the shards' line hashes in corpus order into one
exact hash set (first_seen), 16 to 32 bytes per distinct n-gram (a table of 64-bit hashes at most half full):
16 to 32 GB per billion distinct n-grams.

Contamination is measured two standard ways on the validation documents: the share with any n-gram in training
(GPT-3's), and the share of their tokens inside a run of MATCH_TOKENS tokens that also occurs in training (Lee
et al. 2022's exact-substring measure, on token windows). Decontamination moves every validation document with
more than --decontaminate-threshold of its n-grams in training to training (nothing is lost), again and again
until none is left over the threshold, so a document moved makes its own n-grams training text too. The hashes are
matched a range at a time by partition tasks (mlmprep.builder.contamination); the driver sums their answers
(Matches) and makes the rounds and measures from those (decontaminate): counts, a bit per window, and the hashes that
two or more validation documents share, which are all a round needs.

Exclusion (GPT-3's filter) cuts out of a document the text around each of its n-grams found in the evaluation
sets, EXCLUDE_MARGIN characters on each side; cut_matches is the one place that knows what it removes. As
Megatron's filter_ngrams takes task texts, an evaluation text of fewer than NGRAM words but at least
--exclude-min-words (8, Megatron's) is one n-gram of its length, found in any run of that many words of a
document; a shorter one is left out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np

from mlmprep.builder.filters import excerpt
from mlmprep.errors import CacheError
from mlmprep.format.rows import span_indices, starts_of

NGRAM = 13  # words per n-gram
MATCH_TOKENS = 50  # tokens of an exact match (Lee et al.)
FIRST_TABLE = 1 << 16  # slots of the paragraph table at first; it doubles when half full


def utf8_texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the NFC texts' UTF-8 bytes one after another, int64 offsets [n + 1])."""
    return joined_bytes([unicodedata.normalize("NFC", t).encode("utf-8", "surrogatepass") for t in texts])


def joined_bytes(parts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(the parts one after another, int64 offsets [n + 1])."""
    sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    return np.frombuffer(b"".join(parts), dtype=np.uint8), starts_of(sizes)


def ngram_hashes(texts: list[str], ngram: int = NGRAM) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes of every text's word n-grams in order, int64 [n] n-grams per text)."""
    return text_ngrams(*utf8_texts(texts), ngram)


def text_ngrams(buf: np.ndarray, offsets: np.ndarray, ngram: int = NGRAM,
                keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """ngram_hashes of the texts buf[offsets[i]:offsets[i + 1]] (UTF-8 of NFC text), of those `keep` marks (bool per
    text; the others have none): one pass over the bytes for the word hashes, one over those for the n-grams."""
    return shingles(*text_words(buf, offsets, keep), ngram)


def text_words(buf: np.ndarray, offsets: np.ndarray, keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes of the words of the texts buf[offsets[i]:offsets[i + 1]] that `keep` marks (all by default),
    one after another; int64 words per text, 0 for the others)."""
    from mlmprep.builder import _dedup_kernels as kernels

    words, per_text = np.empty(len(buf) // 2 + 1, np.uint64), np.empty(len(offsets) - 1, np.int64)
    kernels.word_hashes(buf, offsets, all_of(len(per_text)) if keep is None else keep, words, per_text)
    return words, per_text


def shingles(words: np.ndarray, per_text: np.ndarray, ngram: int, whole: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes of every text's word n-grams in order, int64 [n] n-grams per text) of text_words; a text of
    fewer words has one n-gram of them all with `whole`, else none."""
    from mlmprep.builder import _dedup_kernels as kernels

    counts = np.where(per_text >= ngram, per_text - (ngram - 1), np.minimum(per_text, 1) if whole else 0)
    out = np.empty(int(counts.sum()), np.uint64)
    kernels.shingle_hashes(words, per_text, ngram, starts_of(counts), out, whole)
    return out, counts


def window_hashes(ids: np.ndarray, lengths: np.ndarray, k: int = MATCH_TOKENS,
                  keep: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 hashes of each document's runs of k tokens in order, int64 [n] runs per document) of the documents
    `keep` marks (bool per document, all by default; the others have none); ids: the documents' tokens one after
    another, int32 as a build has them (any integers)."""
    from mlmprep.builder import _dedup_kernels as kernels

    keep = all_of(len(lengths)) if keep is None else keep
    counts = np.where(keep, np.maximum(lengths.astype(np.int64) - (k - 1), 0), 0)
    out = np.empty(int(counts.sum()), np.uint64)
    kernels.window_hashes(np.ascontiguousarray(ids), lengths.astype(np.int64), keep, k, starts_of(counts), out)
    return out, counts


def all_of(n: int) -> np.ndarray:
    """bool [n], every one True: hash every text."""
    return np.ones(n, dtype=bool)


# ------------------------------------------------------------------------------------------ paragraphs


def line_hashes(documents: list[str]) -> dict[str, np.ndarray]:
    """What a shard's reading returns for paragraph dedup: the n-gram hashes of every line of its documents, in
    order (`hashes`), and each line's count of them (`counts`). NFC keeps every
    line break, so the documents are normalised and encoded whole and cut at their "\\n" bytes (a line keeps its
    break: whitespace, which no word holds)."""
    buf, offsets = utf8_texts(documents)
    breaks = np.flatnonzero(buf == 10)
    starts = np.sort(np.concatenate([offsets[:-1], breaks + 1]))  # every line's first byte
    hashes, counts = text_ngrams(buf, np.append(starts, len(buf)))
    return {"hashes": hashes, "counts": counts}


class HashSet:
    """An exact set of uint64 hashes, taken run by run: an open-addressing table (_dedup_kernels.first_seen) that
    doubles to stay at most half full."""

    def __init__(self) -> None:
        self.table = np.zeros(FIRST_TABLE, np.uint64)
        self.used = np.zeros(1, np.int64)

    def add(self, hashes: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """int64 [runs]: how many of each run hashes[starts[p]:starts[p + 1]] the set held before it (its earlier
        runs included); every run then joins the set."""
        from mlmprep.builder import _dedup_kernels as kernels

        size = self.table.size
        while 2 * (int(self.used[0]) + len(hashes)) > size:  # half full at most, even if every hash is new
            size *= 2
        if size != self.table.size:
            bigger = np.zeros(size, np.uint64)
            kernels.rehash(self.table, bigger)
            self.table = bigger
        return kernels.first_seen(hashes, starts, self.table, self.used)


class SeenLines:
    """The driver's exact set of every n-gram seen so far, taking shards in corpus order: each shard's lines to
    remove (`decide`)."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.grams = HashSet()

    def decide(self, hashes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """bool [lines]: the shard's lines whose n-grams were at least `threshold` seen in earlier lines (lines
        without words stay); their n-grams join the set."""
        seen = self.grams.add(hashes, starts_of(counts))
        return (counts > 0) & (seen >= self.threshold * counts)


def trimmed(batches: Iterable[list[str]], removed: np.ndarray, counts: dict, drops=None) -> Iterator[list[str]]:
    """The documents of `batches` less the lines `removed` flags (bool, every line of every document in order);
    documents left blank are left out. Counts lines and characters removed and documents emptied, and notes the
    first line removed as counts["example"] (filters.excerpt) unless one is there. With `drops`
    (dropped.ShardDrops), the removed lines are kept there, and each list's document numbers taken from
    drops.pending and those of the documents passed on queued back in their place."""
    at = 0
    for docs in batches:
        lines_of = np.fromiter((doc.count("\n") + 1 for doc in docs), np.int64, len(docs))
        starts = at + starts_of(lines_of)
        touched = np.logical_or.reduceat(removed[at : starts[-1]], starts[:-1] - at)  # batches are never empty
        numbers = drops.pending.popleft() if drops is not None else None
        at, kept, passed = int(starts[-1]), [], []
        for k, (doc, start, count, touch) in enumerate(zip(docs, starts.tolist(), lines_of.tolist(),
                                                          touched.tolist())):
            if touch:  # only documents that lose a line are split into lines
                lines, gone = doc.split("\n"), removed[start : start + count]
                counts["lines_removed"] += int(gone.sum())
                if not counts.get("example"):
                    counts["example"] = excerpt(lines[int(np.argmax(gone))])
                text = "\n".join(line for line, g in zip(lines, gone) if not g)
                counts["characters_removed"] += len(doc) - len(text)
                if drops is not None:
                    drops.records.append((int(numbers[k]), "dedup_paragraphs",
                                          "\n".join(line for line, g in zip(lines, gone) if g)))
                if not text or text.isspace():
                    counts["documents_emptied"] += 1
                    continue
                doc = text
            kept.append(doc)
            passed.append(k)
        if kept:
            if drops is not None:
                drops.pending.appendleft(numbers[passed])
            yield kept


# ------------------------------------------------------------------------------------------ contamination


class Matches:
    """What the partition tasks (mlmprep.builder.contamination) found of the validation candidates' hashes in
    training, summed in the driver as each task's answer comes in: per candidate, its n-grams found (a count), and
    with `window_counts` (per candidate) a bit per token window, set when it was found; and the occurrences not found
    whose hash two or more validation documents hold (hash, and the candidate or window), which become training
    text when one of those documents moves. Candidates by their ordinal in corpus order (`documents`: their global
    numbers, increasing)."""

    def __init__(self, documents: np.ndarray, window_counts: np.ndarray | None = None):
        self.documents = documents
        self.found = np.zeros(len(documents), np.int64)
        self.shared: list[tuple[np.ndarray, np.ndarray]] = []  # n-grams: (hashes, candidates)
        self.window_starts = starts_of(window_counts) if window_counts is not None else None
        self.bits = np.zeros((int(self.window_starts[-1]) + 7) // 8 if window_counts is not None else 0, np.uint8)
        self.shared_windows: list[tuple[np.ndarray, np.ndarray]] = []  # windows: (hashes, positions)

    def add(self, answer: dict[str, dict[str, np.ndarray]]) -> None:
        """Take one partition task's answer (contamination.range_matches)."""
        grams = answer["grams"]
        self.found += np.bincount(self.ordinals(grams["documents"]), minlength=len(self.documents))
        self.shared.append((grams["shared_hashes"], self.ordinals(grams["shared_documents"])))
        if self.window_starts is not None:
            runs = answer["runs"]
            set_bits(self.bits, self.positions(runs["documents"], runs["places"]))
            self.shared_windows.append((runs["shared_hashes"],
                                        self.positions(runs["shared_documents"], runs["shared_places"])))

    def ordinals(self, documents: np.ndarray) -> np.ndarray:
        """The candidates' ordinals of global document numbers; one that is no candidate's is a changed stage."""
        at = np.searchsorted(self.documents, documents)
        if np.any(at >= len(self.documents)) or np.any(self.documents[np.minimum(at, len(self.documents) - 1)]
                                                       != documents):
            raise CacheError("the staged hashes of decontamination name a document that is no validation candidate; "
                             "the build's staging directory was changed while the build ran; run the build again")
        return at

    def positions(self, documents: np.ndarray, places: np.ndarray) -> np.ndarray:
        """The windows' places among every candidate's windows, checked against each candidate's count."""
        at = self.ordinals(documents)
        if np.any(places >= np.diff(self.window_starts)[at]):
            raise CacheError("the staged hashes of decontamination name a token window beyond its document's; the "
                             "build's staging directory was changed while the build ran; run the build again")
        return self.window_starts[at] + places


def set_bits(bits: np.ndarray, positions: np.ndarray) -> None:
    """Set bit `positions` of a bit array (uint8, little-endian bit order: np.unpackbits(..., bitorder="little"))."""
    np.bitwise_or.at(bits, positions >> 3, np.left_shift(1, positions & 7).astype(np.uint8))


def decontaminate(validation: np.ndarray, counts: np.ndarray, matches: Matches, threshold: float,
                  lengths: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, int], dict[str, int]]:
    """(bool [candidates]: the validation documents to move to training, the measures before, after).

    A validation document moves when more than `threshold` of its n-grams (`counts` per candidate) are training's
    (matches.found); again until none is left, training taking each round's moved documents: their hashes that
    other validation documents share (matches.shared) become found in those. The measures (see measures) are of
    the validation documents against training before, and of those left against training and the moved after;
    `lengths` (tokens per candidate, with windows in `matches`): Lee et al.'s too."""
    hashes, owners = joined_pairs(matches.shared)
    found, moved, counted = matches.found.copy(), np.zeros(len(counts), bool), np.zeros(len(hashes), bool)
    while True:
        more = validation & ~moved & (found / np.maximum(counts, 1) > threshold)
        if not more.any():
            break
        moved |= more
        new = ~counted & member(hashes, distinct(hashes[moved[owners]]))
        found += np.bincount(owners[new], minlength=len(counts))
        counted |= new
    before = measures(validation, matches.found, matches, matches.bits, lengths)
    after_bits = None
    if lengths is not None:
        hashes, positions = joined_pairs(matches.shared_windows)
        owners = np.searchsorted(matches.window_starts, positions, side="right") - 1
        after_bits = matches.bits.copy()
        set_bits(after_bits, positions[member(hashes, distinct(hashes[moved[owners]]))])
    return moved, before, measures(validation & ~moved, found, matches, after_bits, lengths)


def joined_pairs(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, int64 owners) of the partitions' pairs, joined."""
    if not pairs:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return np.concatenate([h for h, _ in pairs]), np.concatenate([o for _, o in pairs])


def distinct(values: np.ndarray) -> np.ndarray:
    """np.unique(values) by a sort (NumPy 2's np.unique of a million uint64 takes a hundred times as long)."""
    out = np.sort(values)
    return out[np.concatenate([out[:1] == out[:1], out[1:] != out[:-1]])] if len(out) else out


def member(values: np.ndarray, table: np.ndarray) -> np.ndarray:
    """np.isin(values, table) for a sorted, distinct `table`: a binary search each, no sort of `values`."""
    if not len(table):
        return np.zeros(len(values), bool)
    return table[np.minimum(np.searchsorted(table, values), len(table) - 1)] == values


def measures(documents: np.ndarray, found: np.ndarray, matches: Matches, bits: np.ndarray | None,
             lengths: np.ndarray | None) -> dict[str, int]:
    """GPT-3's and Lee et al.'s measures of `documents` (bool, validation documents among the candidates): those with
    any n-gram found in training (`found`: per candidate); their tokens, and those inside a MATCH_TOKENS-token window
    found there (`bits`: one per window)."""
    out = {"documents": int(documents.sum()), "documents_with_ngram": int(np.count_nonzero((found > 0) & documents))}
    if lengths is not None:
        out |= {"tokens": int(lengths[documents].sum()),
                "tokens_in_match": matched_tokens(bits, np.diff(matches.window_starts), lengths, documents)}
    return out


CHUNK_TOKENS = 1 << 16  # tokens of validation documents matched_tokens takes at a time (a few MB of arrays)


def matched_tokens(bits: np.ndarray, counts: np.ndarray, lengths: np.ndarray, documents: np.ndarray,
                   k: int = MATCH_TOKENS) -> int:
    """covered_tokens of the `documents` (bool, per candidate) whose windows' bits (one per window of every
    candidate, packed) are set, about CHUNK_TOKENS tokens of candidates at a time, so the working arrays stay small
    however large the validation set."""
    tokens, windows = starts_of(lengths), starts_of(counts)
    cuts = np.unique(np.concatenate([[0], np.searchsorted(tokens, np.arange(CHUNK_TOKENS, tokens[-1], CHUNK_TOKENS)),
                                     [len(lengths)]]))
    total = 0
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        lo, hi = int(windows[a]), int(windows[b])
        matched = np.unpackbits(bits[lo >> 3 : (hi + 7) >> 3], bitorder="little")[lo & 7 : (lo & 7) + hi - lo]
        picked = documents[a:b]
        total += covered_tokens(matched.astype(bool)[np.repeat(picked, counts[a:b])], counts[a:b][picked],
                                lengths[a:b][picked], k)
    return total


def covered_tokens(matched: np.ndarray, counts: np.ndarray, lengths: np.ndarray, k: int = MATCH_TOKENS) -> int:
    """How many tokens of the documents (lengths) lie inside a matched window (matched: their windows of k tokens
    one after another, counts per document): token t of a document is when a window from t - k + 1 to t is. In
    NumPy over the tokens, so the driver never loads Numba."""
    ends = np.cumsum(matched, dtype=np.int64)
    ends = np.concatenate([np.zeros(1, np.int64), ends])  # matched windows before each
    first = np.repeat(starts_of(counts)[:-1], lengths)  # the document's first window, per token
    t = span_indices(0, lengths)  # each token's place in its document
    windows = np.repeat(counts, lengths)
    lo, hi = first + np.maximum(t - k + 1, 0), first + np.minimum(t, windows - 1) + 1
    return int(np.count_nonzero((windows > 0) & (ends[np.maximum(hi, lo)] > ends[lo])))


# ------------------------------------------------------------------------------------------ exclusion

EXCLUDE_MARGIN = 200  # characters cut on each side of an evaluation n-gram found in training text (GPT-3)
EXCLUDE_MIN_PIECE = 200  # a piece left shorter than this is dropped
EXCLUDE_MAX_PIECES = 10  # a document left in more pieces is dropped whole (taken as a copy of evaluation text)


class Evaluation(NamedTuple):
    """The evaluation sets' n-grams (--exclude): their distinct hashes, sorted, and the lengths in words they come
    in (NGRAM, and those of the shorter evaluation texts taken whole), which a document's runs are hashed at."""

    table: np.ndarray
    lengths: tuple[int, ...]


def exclusion_table(batches: Iterable[list[str]], shortest: int) -> tuple[Evaluation, dict[str, int]]:
    """The evaluation sets' documents as Megatron's filter_ngrams takes its task texts: each one's NGRAM-grams, or,
    of a text of fewer words but at least `shortest` (--exclude-min-words), the whole text as one n-gram of its
    length; shorter texts are left out (a few words would match common phrases everywhere). With the counts of the
    documents taken whole (`documents_short`) and of those left out (`documents_ignored`)."""
    parts, lengths = [], set()
    counts = {"documents_short": 0, "documents_ignored": 0}
    for docs in batches:
        words, per_text = text_words(*utf8_texts(docs))
        kept = np.repeat(per_text >= shortest, per_text)  # the words of the texts not left out
        hashes, _ = shingles(words[: len(kept)][kept], per_text[per_text >= shortest], NGRAM)
        parts.append(hashes)
        short = per_text[(per_text >= shortest) & (per_text < NGRAM)]
        lengths.update(short.tolist(), [NGRAM] if (per_text >= NGRAM).any() else [])
        counts["documents_short"] += len(short)
        counts["documents_ignored"] += int(np.count_nonzero((per_text < shortest) & (per_text > 0)))
    table = distinct(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)
    return Evaluation(table, tuple(sorted(lengths))), counts


def matched(docs: list[str], evaluation: Evaluation) -> np.ndarray:
    """bool [n]: whether a run of each document's words, of one of the evaluation n-grams' lengths, is one of them
    (a document shorter than a length has no run of it)."""
    words, per_text = text_words(*utf8_texts(docs))
    hit = np.zeros(len(docs), bool)
    for n in evaluation.lengths:
        hashes, per_doc = shingles(words, per_text, n, whole=False)
        hit |= np.bincount(np.repeat(np.arange(len(docs)), per_doc), weights=member(hashes, evaluation.table),
                           minlength=len(docs)) > 0
    return hit


def excluded(batches: Iterable[list[str]], evaluation: Evaluation, counts: dict, drops=None) -> Iterator[list[str]]:
    """The documents of `batches` with the text around every n-gram of `evaluation` cut out (cut_matches): each piece
    left becomes a document (of the same number); the others pass untouched. Counts documents matched and
    dropped, pieces kept and characters removed, and notes the words of the first match as counts["example"]
    (filters.excerpt) unless one is there. With `drops` (dropped.ShardDrops), each matched document's
    removed text is kept there, and each list's document numbers taken from drops.pending and those passed on
    queued back in their place."""
    for docs in batches:
        hit = matched(docs, evaluation)
        numbers = drops.pending.popleft() if drops is not None else None
        kept, passed = [], []
        for k, (doc, touch) in enumerate(zip(docs, hit.tolist())):
            if not touch:
                kept.append(doc)
                passed.append(k)
                continue
            pieces, removed = cut_matches(doc, evaluation)
            if not counts.get("example"):  # the shard's first match: the evaluation text found
                start, end = match_spans(doc, evaluation)[0]
                counts["example"] = excerpt(doc[start:end])
            counts["documents_matched"] += 1
            counts["documents_dropped"] += not pieces
            counts["pieces"] += len(pieces)
            counts["characters_removed"] += len(doc) - sum(map(len, pieces))
            if drops is not None:
                drops.records.append((int(numbers[k]), "exclude", "\n".join(removed)))
            kept += pieces
            passed += [k] * len(pieces)
        if kept:
            if drops is not None:
                drops.pending.appendleft(numbers[passed])
            yield kept


def match_spans(doc: str, evaluation: Evaluation) -> list[tuple[int, int]]:
    """Where each run of `doc`'s words found among the evaluation n-grams lies, by its first word: (that word's
    start, its last word's end)."""
    words = [m.span() for m in re.finditer(r"\S+", doc)]  # \S: not str.isspace(), as the n-grams split words
    hashed, spans = text_words(*utf8_texts([doc])), []
    for n in evaluation.lengths:
        hashes, _ = shingles(*hashed, n, whole=False)
        spans += [(words[i][0], words[i + n - 1][1]) for i in np.flatnonzero(member(hashes, evaluation.table)).tolist()]
    return sorted(spans)


def cut_matches(doc: str, evaluation: Evaluation) -> tuple[list[str], list[str]]:
    """(the pieces of `doc` left, the text removed): every run of the document's words among the evaluation
    n-grams is cut out with EXCLUDE_MARGIN characters on each side; pieces shorter than EXCLUDE_MIN_PIECE (or blank)
    go too, and all of them when more than EXCLUDE_MAX_PIECES are left. The one place that knows what exclusion
    removes."""
    pieces, removed, at = [], [], 0
    for start, end in match_spans(doc, evaluation):
        lo, hi = max(start - EXCLUDE_MARGIN, at), end + EXCLUDE_MARGIN
        if hi <= at:  # a shorter match inside the cut before
            continue
        if lo > at:  # a match apart from the one before: the text between is a piece
            pieces.append(doc[at:lo])
        removed.append(doc[lo:hi])
        at = hi
    pieces.append(doc[at:])
    kept = [p for p in pieces if len(p) >= EXCLUDE_MIN_PIECE and not p.isspace()]
    if len(kept) > EXCLUDE_MAX_PIECES:
        kept = []
    return kept, removed + [p for p in pieces if p and (len(p) < EXCLUDE_MIN_PIECE or p.isspace() or not kept)]
