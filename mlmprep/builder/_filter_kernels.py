"""Numba kernels of the quality filters (mlmprep.builder.filters): arrays in, arrays out, no validation.

Texts arrive as one array of code points (UTF-32) with int64 offsets, so a position is a Python str index. `kinds`
classifies the code points below its length (SPACE: str.isspace, DIGIT: str.isdecimal, ALPHA: str.isalpha,
SYMBOL: a Unicode punctuation or symbol character); those past it (planes 4 to 16: unassigned, tags, private use)
are none of these. Words are runs of non-SPACE code points, as str.split() cuts them. Each document is independent
of the others.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlmprep.builder.filter_codes import (  # the codes the kernels return, and the kinds of code points
    ALPHA,
    DIGIT,
    LINE_JAVASCRIPT,
    LINE_KEPT,
    LINE_LONG_WORD,
    LINE_NO_END_MARK,
    LINE_POLICY,
    LINE_SHORT,
    LINE_STOP,
    LINE_UNSEEN,
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

# C4's phrases, lower case: the index of each one's start in PHRASES and what finding it does
PHRASE_TEXT = ("lorem ipsum", "javascript", "terms of use", "privacy policy", "cookie policy", "uses cookies",
               "use of cookies", "use cookies")
PHRASES = np.array([ord(c) for c in "".join(PHRASE_TEXT)], np.uint32)
PHRASE_STARTS = np.cumsum([0] + [len(p) for p in PHRASE_TEXT]).astype(np.int64)
PHRASE_KIND = np.array([0, 1, 2, 2, 2, 2, 2, 2], np.int64)  # 0 lorem ipsum, 1 javascript, 2 policy
PHRASE_PAIRS = np.zeros(128 * 128, np.bool_)  # the phrases' first two letters, c1 * 128 + c2
PHRASE_PAIRS[[ord(p[0]) * 128 + ord(p[1]) for p in PHRASE_TEXT]] = True
EDIT = np.array([ord(c) for c in "[edit]"], np.uint32)
CITATION_NEEDED = np.array([ord(c) for c in "[citation needed]"], np.uint32)
STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")  # Gopher's, matched exactly (case too)
STOP = np.array([ord(c) for c in "".join(STOP_WORDS)], np.uint32)
STOP_STARTS = np.cumsum([0] + [len(w) for w in STOP_WORDS]).astype(np.int64)

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, nogil=True, inline="always")
def _kind(kinds, c):
    return kinds[c] if c < len(kinds) else 0


@njit(cache=True, nogil=True, inline="always")
def _mix(x):
    """SplitMix64's finaliser: a 64-bit hash whose bits all depend on every bit of x."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(cache=True, nogil=True)
def _span_hash(cp, lo, hi):
    """A hash of the code points cp[lo:hi] (their length included): nonzero, the empty-slot mark of the tables."""
    h = FNV_OFFSET
    for i in range(lo, hi):
        h = (h ^ np.uint64(cp[i])) * FNV_PRIME
    h = _mix(h ^ np.uint64(hi - lo))
    return h if h != 0 else np.uint64(1)


@njit(cache=True, nogil=True)
def _matches(buf, at, end, pattern, lo, hi, fold):
    """Whether buf[at:] starts with pattern[lo:hi] (ASCII capitals folded to lower case given `fold`)."""
    if at + (hi - lo) > end:
        return False
    for k in range(hi - lo):
        c = buf[at + k]
        if fold and 65 <= c <= 90:
            c += 32
        if c != pattern[lo + k]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@njit(cache=True, nogil=True)
def _citation_end(cp, i, end, kinds):
    """Where a citation marker starting at cp[i] == "[" ends ("[" digits "]", "[edit]", "[citation needed]", the
    first that matches, as `re` tries them), or -1."""
    j = i + 1
    while j < end and _kind(kinds, cp[j]) & DIGIT:
        j += 1
    if j < end and cp[j] == 93:
        return j + 1
    if _matches(cp, i, end, EDIT, 0, len(EDIT), False):
        return i + len(EDIT)
    if _matches(cp, i, end, CITATION_NEEDED, 0, len(CITATION_NEEDED), False):
        return i + len(CITATION_NEEDED)
    return -1


@njit(cache=True, nogil=True)
def _is_end_mark(c):
    return c == 46 or c == 63 or c == 33  # . ? !


@njit(cache=True, nogil=True)
def _sentences(buf, lo, hi, kinds):
    """Sentences of a line: the runs of . ? ! followed, past closing quotes and brackets, by whitespace or the
    line's end; at least one (a line C4 keeps ends in an end mark)."""
    count = 0
    i = lo
    while i < hi:
        if _is_end_mark(buf[i]):
            while i + 1 < hi and _is_end_mark(buf[i + 1]):
                i += 1
            j = i + 1
            while j < hi and (buf[j] == 34 or buf[j] == 39 or buf[j] == 41 or buf[j] == 93 or buf[j] == 0x201D
                              or buf[j] == 0x2019):
                j += 1
            if j == hi or _kind(kinds, buf[j]) & SPACE:
                count += 1
        i += 1
    return max(count, 1)


@njit(cache=True, nogil=True)
def _words(buf, lo, hi, kinds):
    """(words of buf[lo:hi], code points of its longest word)."""
    words, longest, run = 0, 0, 0
    for i in range(lo, hi):
        if _kind(kinds, buf[i]) & SPACE:
            run = 0
        else:
            if run == 0:
                words += 1
            run += 1
            longest = max(longest, run)
    return words, longest


@njit(cache=True, nogil=True, inline="always")
def _line(cp, kinds, s, b):
    """The line starting at s, before b: where it ends (its "\\n" or b) and its bounds stripped of spaces."""
    e = s
    while e < b and cp[e] != 10:
        e += 1
    lo, hi = s, e
    while lo < hi and _kind(kinds, cp[lo]) & SPACE:
        lo += 1
    while hi > lo and _kind(kinds, cp[hi - 1]) & SPACE:
        hi -= 1
    return e, lo, hi


@njit(cache=True, nogil=True)
def c4_pages(cp, offsets, kinds, min_words, max_word, min_sentences, max_chars,
             line_doc, line_lo, line_hi, line_fate, out, out_bounds, page_fate, cited):
    """TFDS's C4 clean_page over every document: each line ("\\n") stripped and judged (line_fate; its document
    and stripped bounds in line_doc, line_lo, line_hi; lines after the one that drops a page LINE_UNSEEN), each
    page's fate (page_fate; PAGE_TOO_LONG first, on its length as given), the kept lines (citation markers cut)
    joined by "\\n" into out[out_bounds[d, 0]:out_bounds[d, 1]], and the characters of citations cut from them
    (cited). `out` holds len(cp) + 1 code points; `line_*` one more than the documents' line breaks and documents."""
    line, o = 0, 0
    for d in range(len(offsets) - 1):
        a, b = offsets[d], offsets[d + 1]
        out_bounds[d, 0] = o
        cited[d] = 0
        fate = PAGE_TOO_LONG if b - a > max_chars else PAGE_KEPT
        sentences, first, s = 0, True, a
        while s <= b:
            e, lo, hi = _line(cp, kinds, s, b)
            line_doc[line], line_lo[line], line_hi[line] = d, lo, hi
            s = e + 1
            if fate != PAGE_KEPT:
                line_fate[line] = LINE_UNSEEN
                line += 1
                continue
            w0 = o if first else o + 1  # the line, its citations cut, written after the page's kept lines
            w, i, cut, run, longest = w0, lo, 0, 0, 0
            while i < hi:
                c = cp[i]
                if c == 91:
                    j = _citation_end(cp, i, hi, kinds)
                    if j > 0:  # a marker holds no whitespace: it lengthens the word it is in
                        run += j - i
                        longest = max(longest, run)
                        cut += j - i
                        i = j
                        continue
                run = 0 if _kind(kinds, c) & SPACE else run + 1
                longest = max(longest, run)
                out[w] = c
                w += 1
                i += 1
            if longest > max_word:
                line_fate[line] = LINE_LONG_WORD
                line += 1
                continue
            last = out[w - 1] if w > w0 else 0
            ellipsis = w - w0 >= 3 and out[w - 1] == 46 and out[w - 2] == 46 and out[w - 3] == 46
            if not (_is_end_mark(last) or last == 34) or ellipsis:
                line_fate[line] = LINE_NO_END_MARK
                line += 1
                continue
            words, gap = 0, True
            lorem = javascript = policy = curly = False
            for i in range(w0, w):
                c = out[i]
                if _kind(kinds, c) & SPACE:
                    gap = True
                    continue
                words += gap
                gap = False
                if 65 <= c <= 90:
                    c += 32
                if c == 123:
                    curly = True
                elif c < 128 and i + 1 < w and PHRASE_PAIRS[c * 128 + min(_lower(out[i + 1]), 127)]:
                    for p in range(len(PHRASE_KIND)):
                        if PHRASES[PHRASE_STARTS[p]] == c and _matches(out, i, w, PHRASES, PHRASE_STARTS[p],
                                                                       PHRASE_STARTS[p + 1], True):
                            kind = PHRASE_KIND[p]
                            lorem |= kind == 0
                            javascript |= kind == 1
                            policy |= kind == 2
            if words < min_words:
                line_fate[line] = LINE_SHORT
            elif lorem:
                fate = PAGE_LOREM_IPSUM
                line_fate[line] = LINE_STOP
            elif javascript:
                line_fate[line] = LINE_JAVASCRIPT
            elif curly:
                fate = PAGE_CURLY_BRACKET
                line_fate[line] = LINE_STOP
            elif policy:
                line_fate[line] = LINE_POLICY
            else:
                line_fate[line] = LINE_KEPT
                sentences += _sentences(out, w0, w, kinds)
                if not first:
                    out[o] = 10
                o, first = w, False
                cited[d] += cut
            line += 1
        if fate == PAGE_KEPT and sentences < min_sentences:
            fate = PAGE_FEW_SENTENCES
        page_fate[d] = fate
        out_bounds[d, 1] = o
    return line


@njit(cache=True, nogil=True)
def _stop_word(cp, lo, hi):
    """The index of Gopher's stop word cp[lo:hi] is (exactly), or -1."""
    for k in range(len(STOP_STARTS) - 1):
        if STOP_STARTS[k + 1] - STOP_STARTS[k] == hi - lo and _matches(cp, lo, hi, STOP, STOP_STARTS[k],
                                                                         STOP_STARTS[k + 1], False):
            return k
    return -1


@njit(cache=True, nogil=True)
def gopher_quality(cp, starts, ends, kinds, limits, fates):
    """Gopher's quality rules over the documents cp[starts[d]:ends[d]] (fates: Q_*). limits: min words, max words,
    min and max mean word length, max '#' and ellipses per word, max share of lines starting with a bullet, of lines
    ending with an ellipsis, min share of words holding a letter, min distinct stop words. Words that hold only
    punctuation and symbols are left out of the word count and mean length (not the shares)."""
    for d in range(len(starts)):
        a, b = starts[d], ends[d]
        words = plain = plain_chars = alpha = hashes = ellipses = 0
        stops = np.zeros(len(STOP_STARTS) - 1, np.bool_)
        i = a
        while i < b:  # '#', '…' and "..." (str.count: k // 3 in a run of k dots)
            if cp[i] == 46:
                j = i
                while j < b and cp[j] == 46:
                    j += 1
                ellipses += (j - i) // 3
                i = j
                continue
            hashes += cp[i] == 35
            ellipses += cp[i] == 0x2026
            i += 1
        i = a
        while i < b:
            if _kind(kinds, cp[i]) & SPACE:
                i += 1
                continue
            j, has_plain, has_alpha = i, False, False
            while j < b and not _kind(kinds, cp[j]) & SPACE:
                kind = _kind(kinds, cp[j])
                has_plain |= not kind & SYMBOL
                has_alpha |= (kind & ALPHA) != 0
                j += 1
            words += 1
            plain += has_plain
            plain_chars += (j - i) if has_plain else 0
            alpha += has_alpha
            k = _stop_word(cp, i, j)
            if k >= 0:
                stops[k] = True
            i = j
        lines = bullets = trailing = 0
        s = a
        while s < b:  # str.splitlines(): no empty line after a final break
            e, lo, hi = _line(cp, kinds, s, b)
            lines += 1
            bullets += lo < hi and (cp[lo] == 0x2022 or cp[lo] == 45)
            trailing += hi > lo and (cp[hi - 1] == 0x2026 or (hi - lo >= 3 and cp[hi - 1] == 46 and cp[hi - 2] == 46
                                                               and cp[hi - 3] == 46))
            s = e + 1
        per_word = max(words, 1)
        mean = plain_chars / plain if plain else np.nan
        fate = Q_KEPT
        if plain < limits[0]:
            fate = Q_FEW_WORDS
        elif plain > limits[1]:
            fate = Q_MANY_WORDS
        elif mean < limits[2]:
            fate = Q_SHORT_WORDS
        elif mean > limits[3]:
            fate = Q_LONG_WORDS
        elif hashes / per_word > limits[4]:
            fate = Q_HASHES
        elif ellipses / per_word > limits[4]:
            fate = Q_ELLIPSES
        elif lines and bullets / lines > limits[5]:
            fate = Q_BULLET_LINES
        elif lines and trailing / lines > limits[6]:
            fate = Q_ELLIPSIS_LINES
        elif alpha / per_word < limits[7]:
            fate = Q_FEW_ALPHA_WORDS
        elif stops.sum() < limits[8]:
            fate = Q_FEW_STOP_WORDS
        fates[d] = fate


@njit(cache=True, nogil=True)
def _seen(table, h):
    """Add hash h to the open-addressing set `table` (0: empty); whether it was there already."""
    mask = np.uint64(len(table) - 1)
    slot = int(h & mask)
    while table[slot] != 0:
        if table[slot] == h:
            return True
        slot = int((np.uint64(slot) + np.uint64(1)) & mask)
    table[slot] = h
    return False


@njit(cache=True, nogil=True)
def _slot(keys, h):
    """The slot of hash h in the open-addressing table `keys` (0: empty), claimed if new."""
    mask = np.uint64(len(keys) - 1)
    slot = int(h & mask)
    while keys[slot] != 0 and keys[slot] != h:
        slot = int((np.uint64(slot) + np.uint64(1)) & mask)
    keys[slot] = h
    return slot


@njit(cache=True, nogil=True)
def _table(n):
    size = 16
    while size < 2 * n:
        size *= 2
    return np.zeros(size, np.uint64)


@njit(cache=True, nogil=True)
def _repeats(cp, bounds, count):
    """(segments equal to an earlier one, their code points): segments cp[bounds[k, 0]:bounds[k, 1]], k < count."""
    table = _table(count)
    repeated = chars = 0
    for k in range(count):
        if _seen(table, _span_hash(cp, bounds[k, 0], bounds[k, 1])):
            repeated += 1
            chars += bounds[k, 1] - bounds[k, 0]
    return repeated, chars


@njit(cache=True, nogil=True)
def _split_breaks(cp, lo, hi, run, bounds):
    """Cut cp[lo:hi] at every run of at least `run` line breaks (re.split of "\\n{run,}"): the pieces' bounds into
    `bounds`; how many."""
    count, start, i = 0, lo, lo
    while i < hi:
        if cp[i] == 10:
            j = i
            while j < hi and cp[j] == 10:
                j += 1
            if j - i >= run:
                bounds[count, 0], bounds[count, 1] = start, i
                count += 1
                start = j
            i = j
        else:
            i += 1
    bounds[count, 0], bounds[count, 1] = start, hi
    return count + 1


@njit(cache=True, nogil=True)
def gopher_repetition(cp, starts, ends, kinds, limits, top_ngrams, dup_ngrams, fates):
    """Gopher's repetition rules over the documents cp[starts[d]:ends[d]] (fates: R_*), each share of the
    document's characters. limits: max share of paragraphs ("\\n\\n" apart, the text stripped) repeating an
    earlier one, of their characters, the same of lines ("\\n" apart). top_ngrams [k, 2]: (n, max share) of the
    most frequent word n-gram (its text, spaces between words, times its count); dup_ngrams [k, 2]: (n, max share)
    of the words' characters in n-grams repeating an earlier one, taken left to right without overlap."""
    for d in range(len(starts)):
        a, b = starts[d], ends[d]
        length = max(b - a, 1)
        bounds = np.empty((b - a + 2, 2), np.int64)
        lo, hi = a, b
        while lo < hi and _kind(kinds, cp[lo]) & SPACE:
            lo += 1
        while hi > lo and _kind(kinds, cp[hi - 1]) & SPACE:
            hi -= 1
        count = _split_breaks(cp, lo, hi, 2, bounds)
        repeated, chars = _repeats(cp, bounds, count)
        fate = R_KEPT
        if repeated / count > limits[0]:
            fate = R_DUP_PARAGRAPHS
        elif chars / length > limits[1]:
            fate = R_DUP_PARAGRAPH_CHARS
        else:
            count = _split_breaks(cp, a, b, 1, bounds)
            repeated, chars = _repeats(cp, bounds, count)
            if repeated / count > limits[2]:
                fate = R_DUP_LINES
            elif chars / length > limits[3]:
                fate = R_DUP_LINE_CHARS
        if fate == R_KEPT:
            fate = _ngram_fate(cp, a, b, kinds, length, top_ngrams, dup_ngrams, bounds)
        fates[d] = fate


@njit(cache=True, nogil=True)
def _ngram_fate(cp, a, b, kinds, length, top_ngrams, dup_ngrams, bounds):
    """R_TOP_NGRAM, R_DUP_NGRAM or R_KEPT for the document cp[a:b] (bounds: scratch for its words)."""
    words, i = 0, a
    while i < b:
        if _kind(kinds, cp[i]) & SPACE:
            i += 1
            continue
        j = i
        while j < b and not _kind(kinds, cp[j]) & SPACE:
            j += 1
        bounds[words, 0], bounds[words, 1] = i, j
        words += 1
        i = j
    hashes = np.empty(words, np.uint64)
    chars = np.zeros(words + 1, np.int64)  # code points of the words before each
    for w in range(words):
        hashes[w] = _span_hash(cp, bounds[w, 0], bounds[w, 1])
        chars[w + 1] = chars[w] + bounds[w, 1] - bounds[w, 0]
    grams, level = hashes.copy(), 1  # the hashes of the runs of `level` words, each from the run one shorter
    for k in range(len(top_ngrams)):
        n = int(top_ngrams[k, 0])
        grams, level = _ngrams(hashes, grams, level, n)
        if len(grams) == 0:
            continue
        keys = _table(len(grams))
        counts = np.zeros(len(keys), np.int64)
        for g in range(len(grams)):
            counts[_slot(keys, grams[g])] += 1
        most, at = 0, 0
        for g in range(len(grams)):  # the most frequent, the first seen among equals (Counter.most_common)
            c = counts[_slot(keys, grams[g])]
            if c > most:
                most, at = c, g
        if most * (chars[at + n] - chars[at] + n - 1) / length > top_ngrams[k, 1]:
            return R_TOP_NGRAM
    for k in range(len(dup_ngrams)):
        n = int(dup_ngrams[k, 0])
        grams, level = _ngrams(hashes, grams, level, n)
        table = _table(len(grams))
        repeated, g = 0, 0
        while g < len(grams):
            if _seen(table, grams[g]):
                repeated += chars[g + n] - chars[g]
                g += n
            else:
                g += 1
        if repeated / length > dup_ngrams[k, 1]:
            return R_DUP_NGRAM
    return R_KEPT


@njit(cache=True, nogil=True)
def _ngrams(hashes, grams, level, n):
    """(hashes of the runs of n word hashes, nonzero; n) from those of the runs of `level` words: each run's hash
    is its one word shorter prefix's, mixed with its last word (from the words alone when n < level)."""
    if n < level:
        grams, level = hashes.copy(), 1
    for m in range(level + 1, n + 1):
        longer = np.empty(max(len(hashes) - m + 1, 0), np.uint64)
        for g in range(len(longer)):
            h = _mix(grams[g] * GOLDEN + hashes[g + m - 1])
            longer[g] = h if h != 0 else np.uint64(1)
        grams = longer
    return grams, n
