"""Quality filters (--filters c4,gopher): rules that remove lines from documents and drop whole documents, applied to
each batch of cleaned documents before anything else sees them (the tokenizer's sample, dedup, the windows).

c4 is T5's C4 `clean_page` as TFDS writes it. Each line ("\\n"), stripped, is removed when a word in it is longer
than --c4-max-word-chars; then its citation markers ("[1]", "[edit]", "[citation needed]") are cut, and it is
removed when it does not end in . ? ! or \\" (or ends in "..."), holds fewer than --c4-min-words words, or mentions
javascript or a cookie / privacy-policy / terms-of-use phrase. A page is dropped when it is over --c4-max-chars
characters (checked first), when a kept line holds "lorem ipsum" or "{", with --c4-badwords when a kept line holds
a listed word between two non-letters (TFDS's rule), or when its kept lines hold fewer than --c4-min-sentences
sentences. The kept lines make the page, joined by "\\n". Phrases are found ASCII case-folded; TFDS's punkt
sentence splitter (an NLTK download) is replaced by a count of runs of . ? ! followed by whitespace or the line's
end (punkt also leaves out abbreviations such as "Mr.").

gopher is Gopher's quality rules (MassiveText: word count, mean word length, '#' and ellipses per word, bullet and
ellipsis lines, words with a letter, stop words) and its repetition rules (repeated paragraphs and lines, the most
frequent 2- to 4-grams, repeated 5- to 10-grams), each threshold an option; see mlmprep.builder._filter_kernels
for each measure. Words are runs between whitespace (str.split()).

What each rule removed is counted per batch: documents (a page it dropped, or one it took lines from) and
characters (the page's, or the stripped lines' and cut markers'); each removal can be kept as (index of the
document in the batch, rule, text).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

import numpy as np

from mlmprep import storage
from mlmprep.builder.filter_codes import (
    ALPHA,
    DIGIT,
    LINE_JAVASCRIPT,
    LINE_KEPT,
    LINE_LONG_WORD,
    LINE_NO_END_MARK,
    LINE_POLICY,
    LINE_SHORT,
    PAGE_CURLY_BRACKET,
    PAGE_FEW_SENTENCES,
    PAGE_KEPT,
    PAGE_LOREM_IPSUM,
    PAGE_TOO_LONG,
    Q_BULLET_LINES,
    Q_ELLIPSES,
    Q_ELLIPSIS_LINES,
    Q_FEW_ALPHA_WORDS,
    Q_FEW_STOP_WORDS,
    Q_FEW_WORDS,
    Q_HASHES,
    Q_KEPT,
    Q_LONG_WORDS,
    Q_MANY_WORDS,
    Q_SHORT_WORDS,
    R_DUP_LINE_CHARS,
    R_DUP_LINES,
    R_DUP_NGRAM,
    R_DUP_PARAGRAPH_CHARS,
    R_DUP_PARAGRAPHS,
    R_KEPT,
    R_TOP_NGRAM,
    SPACE,
    SYMBOL,
)
from mlmprep.config import BuildConfig, filter_sets
from mlmprep.corpus.documents import file_digest
from mlmprep.errors import ConfigError, CorpusError, printable
from mlmprep.format.regular import open_regular
from mlmprep.format.rows import starts_of

EXCERPT_CHARS = 200  # characters of each rule's example
KINDS_SIZE = 0x40000  # code points classified: planes 0 to 3, every assigned letter, digit, space and symbol

C4_LINE_RULES = {LINE_LONG_WORD: "c4_long_word", LINE_NO_END_MARK: "c4_no_end_mark",
                 LINE_SHORT: "c4_short_line", LINE_JAVASCRIPT: "c4_javascript", LINE_POLICY: "c4_policy"}
C4_PAGE_RULES = {PAGE_TOO_LONG: "c4_too_long", PAGE_LOREM_IPSUM: "c4_lorem_ipsum",
                 PAGE_CURLY_BRACKET: "c4_curly_bracket", PAGE_FEW_SENTENCES: "c4_few_sentences"}
GOPHER_QUALITY_RULES = {
    Q_FEW_WORDS: "gopher_few_words", Q_MANY_WORDS: "gopher_many_words", Q_SHORT_WORDS: "gopher_short_words",
    Q_LONG_WORDS: "gopher_long_words", Q_HASHES: "gopher_hashes", Q_ELLIPSES: "gopher_ellipses",
    Q_BULLET_LINES: "gopher_bullet_lines", Q_ELLIPSIS_LINES: "gopher_ellipsis_lines",
    Q_FEW_ALPHA_WORDS: "gopher_few_alpha_words", Q_FEW_STOP_WORDS: "gopher_few_stop_words"}
GOPHER_REPETITION_RULES = {
    R_DUP_PARAGRAPHS: "gopher_dup_paragraphs", R_DUP_PARAGRAPH_CHARS: "gopher_dup_paragraph_chars",
    R_DUP_LINES: "gopher_dup_lines", R_DUP_LINE_CHARS: "gopher_dup_line_chars",
    R_TOP_NGRAM: "gopher_top_ngram", R_DUP_NGRAM: "gopher_dup_ngram"}
RULES = ("c4_citation", *C4_LINE_RULES.values(), *C4_PAGE_RULES.values(), "c4_badword", "c4_empty",
         *GOPHER_QUALITY_RULES.values(), *GOPHER_REPETITION_RULES.values())  # every reason, in the order applied
DOCUMENT_RULES = frozenset(RULES) - {"c4_citation", *C4_LINE_RULES.values()}  # those that drop a whole document


@functools.cache
def kinds_table() -> np.ndarray:
    """uint8 per code point below KINDS_SIZE: SPACE, DIGIT, ALPHA, SYMBOL bits (see _filter_kernels)."""
    chars = [chr(c) for c in range(KINDS_SIZE)]
    kinds = np.zeros(KINDS_SIZE, np.uint8)
    kinds[[c.isspace() for c in chars]] |= SPACE
    kinds[[c.isdecimal() for c in chars]] |= DIGIT
    kinds[[c.isalpha() for c in chars]] |= ALPHA
    kinds[[unicodedata.category(c)[0] in "PS" for c in chars]] |= SYMBOL
    return kinds


def code_points(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the texts' code points one after another, uint32; int64 offsets [n + 1])."""
    offsets = starts_of(np.fromiter(map(len, texts), np.int64, len(texts)))
    joined = "".join(texts)
    if joined.isascii():  # a flag of the str: a copy of its bytes, four times faster than the UTF-32 codec
        return np.frombuffer(joined.encode("ascii"), np.uint8).astype(np.uint32), offsets
    return np.frombuffer(bytearray(joined.encode("utf-32-le", "surrogatepass")), np.uint32), offsets  # writable,
    # as the ASCII path's: one compiled kernel for both


def decoded(cp: np.ndarray, lo: int, hi: int) -> str:
    return cp[lo:hi].tobytes().decode("utf-32-le", "surrogatepass")


def ngram_limits(text: str, option: str) -> np.ndarray:
    """float64 [k, 2] of "N:SHARE,N:SHARE" (an n-gram length and a share of characters each)."""
    try:
        pairs = [(int(n), float(share)) for n, share in (part.split(":") for part in text.split(",") if part.strip())]
    except ValueError:
        raise ConfigError(f"{option} must be N:SHARE pairs separated by commas (e.g. 2:0.2,3:0.18), got "
                          f"{text!r}") from None
    if any(n < 1 or not 0.0 <= share <= 1.0 for n, share in pairs):
        raise ConfigError(f"{option}: each N must be at least 1 and each SHARE in [0, 1], got {text!r}")
    return np.array(pairs, np.float64).reshape(-1, 2)


@functools.cache
def badwords_pattern(path: str) -> re.Pattern:
    """TFDS's bad-words expression of the list in `path` (a file or an object's URL, one word or phrase a line): a
    listed word between two characters that are not lower-case ASCII letters, in the lower-cased line."""
    try:
        if storage.is_url(path):  # read with the build's storage options (storage.use_corpus_options)
            with storage.errors(f"--c4-badwords {path}", ConfigError), storage.open_corpus_url(path) as f:
                data = f.read()
        else:
            with open_regular(Path(path).expanduser()) as f:  # never waits on a FIFO
                data = f.read()
        words = data.decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"--c4-badwords {path}: cannot read it as a UTF-8 list of words, one a line ({e}); give "
                          "such a file, or leave the option out") from None
    words = sorted({w.strip().lower() for w in words if w.strip()})
    if not words:
        raise ConfigError(f"--c4-badwords {path} lists no word; give a file of words, one a line")
    return re.compile("[^a-z]({})[^a-z]".format("|".join(map(re.escape, words))))


def badwords_file(path: str) -> dict:
    """--c4-badwords as a build records it, {path, bytes, sha256}: its content identifies the build as its options
    do. A list that cannot be read, or lists no word, is refused here, before any work. Read afresh: this process
    may have read an earlier version of the list for an earlier build (worker processes start with each build)."""
    badwords_pattern.cache_clear()
    badwords_pattern(path)
    try:
        size, digest = file_digest(path)
    except CorpusError as error:
        raise ConfigError(f"--c4-badwords: {error}") from None
    return {"path": printable(path), "bytes": size, "sha256": digest}


class Removals:
    """What the filters removed from one batch: per rule, documents and characters (`counts`) and the start of
    its first removal (`examples`), and with `keep` each removal as (index of the document in the batch, rule,
    text)."""

    def __init__(self, keep: bool):
        self.counts: dict[str, list[int]] = {}
        self.examples: dict[str, str] = {}
        self.kept: list[tuple[int, str, str]] | None = [] if keep else None

    def add(self, rule: str, documents: int, characters: int) -> None:
        count = self.counts.setdefault(rule, [0, 0])
        count[0] += documents
        count[1] += characters

    def keep(self, index: int, rule: str, text) -> None:
        """Note a removal (the first of its rule as the example; every one with `keep`); text is a str, or a
        function that makes it, called only when needed."""
        if self.kept is None and rule in self.examples:
            return
        text = text if isinstance(text, str) else text()
        self.examples.setdefault(rule, excerpt(text))
        if self.kept is not None:
            self.kept.append((index, rule, text))

    def totals(self) -> dict[str, dict]:
        """The counts and examples as corpus.stats.filters holds them: rule -> {documents, characters, example}."""
        return {rule: {"documents": d, "characters": c, "example": self.examples.get(rule, "")}
                for rule, (d, c) in self.counts.items()}


def excerpt(text: str) -> str:
    """The start of a removed text as the manifest shows it: whitespace folded, EXCERPT_CHARS characters."""
    return " ".join(text[: 4 * EXCERPT_CHARS].split())[:EXCERPT_CHARS]


def add_totals(total: dict[str, dict], more: dict[str, dict]) -> dict[str, dict]:
    """Sum Removals.totals of later text into `total` (the first example of each rule stays); returns it."""
    for rule, count in more.items():
        mine = total.setdefault(rule, {"documents": 0, "characters": 0, "example": count["example"]})
        mine["documents"] += count["documents"]
        mine["characters"] += count["characters"]
    return total


def filter_texts(texts: list[str], cfg: BuildConfig, removals: Removals) -> tuple[list[str], np.ndarray]:
    """The documents the filters of cfg.filters keep, their text as the filters left it, and each one's index in
    `texts` (int64); removals noted in `removals` (its kept removals ordered by document, then rule)."""
    index = np.arange(len(texts), dtype=np.int64)
    sets = filter_sets(cfg.filters)
    if "c4" in sets:
        texts, index = c4_filter(texts, index, cfg, removals)
    if "gopher" in sets:
        texts, index = gopher_filter(texts, index, cfg, removals)
    if removals.kept is not None:
        removals.kept.sort(key=lambda r: (r[0], RULES.index(r[1])))
    return texts, index


def c4_filter(texts: list[str], index: np.ndarray, cfg: BuildConfig,
              removals: Removals) -> tuple[list[str], np.ndarray]:
    """C4's clean_page over the documents (see the module's docstring); (the pages kept, their indices)."""
    cp, offsets = code_points(texts)
    n, lines = len(texts), len(texts) + int(np.count_nonzero(cp == 10))
    line_doc, line_lo, line_hi = (np.empty(lines, np.int64) for _ in range(3))
    line_fate = np.empty(lines, np.int8)
    out, bounds = np.empty(len(cp) + 1, np.uint32), np.empty((n, 2), np.int64)
    page_fate, cited = np.empty(n, np.int8), np.empty(n, np.int64)
    from mlmprep.builder import _filter_kernels as k

    k.c4_pages(cp, offsets, kinds_table(), cfg.c4_min_words, cfg.c4_max_word_chars, cfg.c4_min_sentences,
               cfg.c4_max_chars, line_doc, line_lo, line_hi, line_fate, out, bounds, page_fate, cited)
    pattern = badwords_pattern(cfg.c4_badwords) if cfg.c4_badwords else None
    kept, kept_index = [], []
    for d in range(n):
        fate, reason, page = int(page_fate[d]), None, ""
        if fate != PAGE_TOO_LONG and (fate == PAGE_KEPT or pattern is not None):
            page = decoded(out, bounds[d, 0], bounds[d, 1])
        if pattern is not None and page and any(pattern.search(line.lower()) for line in page.split("\n")):
            reason = "c4_badword"  # the lines kept before the one that stopped the page: checked in TFDS's order
        elif fate != PAGE_KEPT:
            reason = C4_PAGE_RULES[fate]
        elif not (page := page.strip()):
            reason = "c4_empty"
        if reason is not None:
            removals.add(reason, 1, len(texts[d]))
            removals.keep(int(index[d]), reason, texts[d])
        else:
            kept.append(page)
            kept_index.append(d)
    kept_index = np.array(kept_index, np.int64)
    c4_line_removals(texts, offsets, index, kept_index, cited, (line_doc, line_lo, line_hi, line_fate), removals)
    return kept, index[kept_index]


def c4_line_removals(texts: list[str], offsets: np.ndarray, index: np.ndarray, kept: np.ndarray, cited: np.ndarray,
                     lines: tuple, removals: Removals) -> None:
    """Count (and keep) the lines C4 removed from the pages it kept, and the citation markers it cut."""
    line_doc, line_lo, line_hi, line_fate = lines
    on_kept = np.isin(line_doc, kept) & (line_fate != LINE_KEPT) & (line_hi > line_lo)  # a blank line is no text
    if cited[kept].any():
        removals.add("c4_citation", int(np.count_nonzero(cited[kept])), int(cited[kept].sum()))
        removals.examples.setdefault("c4_citation", excerpt(texts[int(kept[np.flatnonzero(cited[kept])[0]])]))
    for fate, rule in C4_LINE_RULES.items():
        mine = np.flatnonzero(on_kept & (line_fate == fate))
        if not len(mine):
            continue
        docs = np.unique(line_doc[mine])
        removals.add(rule, len(docs), int((line_hi[mine] - line_lo[mine]).sum()))
        for d in docs.tolist() if removals.kept is not None else docs[:1].tolist():
            removals.keep(int(index[d]), rule, "\n".join(texts[d][line_lo[s] - offsets[d] : line_hi[s] - offsets[d]]
                                                         for s in mine[line_doc[mine] == d].tolist()))


def gopher_filter(texts: list[str], index: np.ndarray, cfg: BuildConfig,
                  removals: Removals) -> tuple[list[str], np.ndarray]:
    """Gopher's quality rules, then its repetition rules on the documents they keep; (kept, their indices)."""
    cp, offsets = code_points(texts)
    quality, repetition = np.empty(len(texts), np.int8), np.empty(len(texts), np.int8)
    limits = np.array([cfg.gopher_min_words, cfg.gopher_max_words, cfg.gopher_min_mean_word,
                       cfg.gopher_max_mean_word, cfg.gopher_max_symbols, cfg.gopher_max_bullet_lines,
                       cfg.gopher_max_ellipsis_lines, cfg.gopher_min_alpha_words, cfg.gopher_min_stop_words],
                      np.float64)
    from mlmprep.builder import _filter_kernels as k

    k.gopher_documents(cp, offsets[:-1], offsets[1:], kinds_table(), limits,
                       np.array([cfg.gopher_max_dup_paragraphs, cfg.gopher_max_dup_paragraph_chars,
                                 cfg.gopher_max_dup_lines, cfg.gopher_max_dup_line_chars], np.float64),
                       ngram_limits(cfg.gopher_top_ngrams, "--gopher-top-ngrams"),
                       ngram_limits(cfg.gopher_dup_ngrams, "--gopher-dup-ngrams"), quality, repetition)
    fates = np.where(quality != Q_KEPT, quality, np.where(repetition == R_KEPT, 0, 100 + repetition.astype(np.int64)))
    for d in np.flatnonzero(fates).tolist():
        rule = GOPHER_QUALITY_RULES[fates[d]] if fates[d] < 100 else GOPHER_REPETITION_RULES[fates[d] - 100]
        removals.add(rule, 1, len(texts[d]))
        removals.keep(int(index[d]), rule, texts[d])
    kept = np.flatnonzero(fates == 0)
    return [texts[d] for d in kept.tolist()], index[kept]
