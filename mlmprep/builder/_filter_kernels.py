"""Numba kernels of the quality filters (mlmprep.builder.filters): arrays in, arrays out, no validation.

Texts arrive as one array of code points (UTF-32) with int64 offsets, so a position is a Python str index. `kinds`
classifies the code points below its length (SPACE: str.isspace, DIGIT: str.isdecimal, ALPHA: str.isalpha,
SYMBOL: a Unicode punctuation or symbol character); those past it (planes 4 to 16: unassigned, tags, private use)
are none of these. Words are runs of non-SPACE code points, as str.split() cuts them. Each document is independent
of the others.
"""

from __future__ import annotations

import itertools

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
STOP_SHORTEST, STOP_LONGEST = min(map(len, STOP_WORDS)), max(map(len, STOP_WORDS))
STOP_KEYS = [int.from_bytes(b"\1" + w.encode(), "big") for w in STOP_WORDS]  # a word's key: 1, then its bytes
STOP_MODULUS = next(m for m in itertools.count(len(STOP_KEYS)) if len({k % m for k in STOP_KEYS}) == len(STOP_KEYS))
STOP_TABLE = np.zeros(STOP_MODULUS, np.int64)  # each key at its remainder, and its bit (1 << its index) beside
STOP_BITS = np.zeros(STOP_MODULUS, np.int64)
STOP_TABLE[[k % STOP_MODULUS for k in STOP_KEYS]] = STOP_KEYS
STOP_BITS[[k % STOP_MODULUS for k in STOP_KEYS]] = [1 << k for k in range(len(STOP_KEYS))]

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


@njit(cache=True, nogil=True, inline="always")
def _step(h, c):
    """FNV-1a's step: the hash h of a span, then code point c."""
    return (h ^ np.uint64(c)) * FNV_PRIME


@njit(cache=True, nogil=True, inline="always")
def _finished(h, length):
    """A span's hash from its FNV-1a hash h and its length: nonzero, the empty-slot mark of the tables."""
    h = _mix(h ^ np.uint64(length))
    return h if h != 0 else np.uint64(1)


@njit(cache=True, nogil=True)
def _span_hash(cp, lo, hi):
    """A hash of the code points cp[lo:hi] (their length included): nonzero, the empty-slot mark of the tables."""
    h = FNV_OFFSET
    for i in range(lo, hi):
        h = _step(h, cp[i])
    return _finished(h, hi - lo)


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


@njit(cache=True, nogil=True, inline="always")
def _stop_word(cp, lo, hi):
    """The bit of Gopher's stop word cp[lo:hi] is (exactly: 1 << its index in STOP_WORDS), or 0; at most
    STOP_LONGEST code points."""
    key = 1
    for i in range(lo, hi):
        if cp[i] >= 128:
            return 0
        key = key << 8 | cp[i]
    slot = key % STOP_MODULUS
    return STOP_BITS[slot] if STOP_TABLE[slot] == key else 0


@njit(cache=True, nogil=True)
def gopher_documents(cp, starts, ends, kinds, limits, repetition_limits, top_ngrams, dup_ngrams, quality,
                     repetition):
    """Gopher's rules over the documents cp[starts[d]:ends[d]]: its quality rules (quality: Q_*, see
    gopher_quality), then on the documents they keep its repetition rules (repetition: R_*, see
    gopher_repetition; R_KEPT for the others), which take the words the quality rules cut."""
    longest = 0
    for d in range(len(starts)):
        longest = max(longest, ends[d] - starts[d])
    hashes = np.empty(longest // 2 + 1, np.uint64)  # the words of a document (at most one per two code points)
    chars = np.empty(longest // 2 + 2, np.int64)
    bounds = np.empty((longest + 2, 2), np.int64)  # its paragraphs or lines
    for d in range(len(starts)):
        quality[d], words = gopher_quality(cp, starts[d], ends[d], kinds, limits, hashes, chars)
        repetition[d] = R_KEPT
        if quality[d] == Q_KEPT:
            repetition[d] = gopher_repetition(cp, starts[d], ends[d], kinds, repetition_limits, top_ngrams,
                                              dup_ngrams, hashes[:words], chars[: words + 1], bounds)


@njit(cache=True, nogil=True)
def gopher_quality(cp, a, b, kinds, limits, hashes, chars):
    """Gopher's quality rules over the document cp[a:b]: (its fate, Q_*; its words, their hashes written into
    `hashes` and the code points of the words before each, and of all, into `chars`). limits: min words, max
    words, min and max mean word length, max '#' and ellipses per word, max share of lines starting with a bullet,
    of lines ending with an ellipsis, min share of words holding a letter, min distinct stop words. Words that hold
    only punctuation and symbols are left out of the word count and mean length (not the shares). Lines are cut
    at "\n" as str.splitlines() cuts them (no empty line after a final break); a line's first and last code
    points past its spaces are its first word's first and its last word's last."""
    words = plain = plain_chars = alpha = pounds = ellipses = stops = 0
    lines = bullets = trailing = 0
    worded, ends_ellipsis = False, False  # the line so far: whether it has a word, whether its last ends in one
    chars[0] = 0
    i = a
    while i < b:
        if _kind(kinds, cp[i]) & SPACE:
            if cp[i] == 10:  # a line ends
                lines += 1
                trailing += worded and ends_ellipsis
                worded = False
            i += 1
            continue
        if not worded:
            bullets += cp[i] == 0x2022 or cp[i] == 45
            worded = True
        # a word: its kinds, hash, '#', '…' and "..." (str.count: k // 3 in a run of k dots)
        j, has_plain, has_alpha, dots, h = i, False, False, 0, FNV_OFFSET
        while j < b:
            c = cp[j]
            kind = _kind(kinds, c)
            if kind & SPACE:
                break
            has_plain |= not kind & SYMBOL
            has_alpha |= (kind & ALPHA) != 0
            h = _step(h, c)
            if c == 46:
                dots += 1
            else:
                if dots:
                    ellipses += dots // 3
                    dots = 0
                if c == 35:
                    pounds += 1
                elif c == 0x2026:
                    ellipses += 1
            j += 1
        ellipses += dots // 3
        ends_ellipsis = cp[j - 1] == 0x2026 or dots >= 3
        hashes[words] = _finished(h, j - i)
        chars[words + 1] = chars[words] + j - i
        words += 1
        plain += has_plain
        plain_chars += (j - i) if has_plain else 0
        alpha += has_alpha
        if STOP_SHORTEST <= j - i <= STOP_LONGEST:
            stops |= _stop_word(cp, i, j)
        i = j
    if b > a and cp[b - 1] != 10:  # the last line, unless a break ends the text
        lines += 1
        trailing += worded and ends_ellipsis
    distinct_stops = 0
    while stops:
        distinct_stops += stops & 1
        stops >>= 1
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
    elif pounds / per_word > limits[4]:
        fate = Q_HASHES
    elif ellipses / per_word > limits[4]:
        fate = Q_ELLIPSES
    elif lines and bullets / lines > limits[5]:
        fate = Q_BULLET_LINES
    elif lines and trailing / lines > limits[6]:
        fate = Q_ELLIPSIS_LINES
    elif alpha / per_word < limits[7]:
        fate = Q_FEW_ALPHA_WORDS
    elif distinct_stops < limits[8]:
        fate = Q_FEW_STOP_WORDS
    return fate, words


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
    """(segments equal to an earlier one, their code points): segments cp[bounds[k, 0]:bounds[k, 1]], k < count.
    Only segments whose length and first, middle and last code points another shares can be equal to it: only
    those are hashed whole."""
    if count < 2:
        return 0, 0
    keys = _table(count)
    shared = np.zeros(len(keys), np.int64)
    slots = np.empty(count, np.int64)
    for k in range(count):
        lo, hi = bounds[k, 0], bounds[k, 1]
        h = _step(_step(_step(FNV_OFFSET, cp[lo]), cp[(lo + hi) // 2]), cp[hi - 1]) if hi > lo else FNV_OFFSET
        slots[k] = _slot(keys, _finished(h, hi - lo))
        shared[slots[k]] += 1
    table = _table(count)
    repeated = chars = 0
    for k in range(count):
        if shared[slots[k]] > 1 and _seen(table, _span_hash(cp, bounds[k, 0], bounds[k, 1])):
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
def gopher_repetition(cp, a, b, kinds, limits, top_ngrams, dup_ngrams, hashes, chars, bounds):
    """Gopher's repetition rules over the document cp[a:b] (R_*), each a share of the document's characters.
    limits: max share of paragraphs ("\\n\\n" apart, the text stripped) repeating an earlier one, of their
    characters, the same of lines ("\\n" apart). top_ngrams [k, 2]: (n, max share) of the most frequent word
    n-gram (its text, spaces between words, times its count); dup_ngrams [k, 2]: (n, max share) of the words'
    characters in n-grams repeating an earlier one, taken left to right without overlap. hashes, chars: its
    words (gopher_quality); bounds: scratch for b - a + 2 pieces."""
    length = max(b - a, 1)
    lo, hi = a, b
    while lo < hi and _kind(kinds, cp[lo]) & SPACE:
        lo += 1
    while hi > lo and _kind(kinds, cp[hi - 1]) & SPACE:
        hi -= 1
    count = _split_breaks(cp, lo, hi, 2, bounds)
    repeated, repeated_chars = _repeats(cp, bounds, count)
    if repeated / count > limits[0]:
        return R_DUP_PARAGRAPHS
    if repeated_chars / length > limits[1]:
        return R_DUP_PARAGRAPH_CHARS
    count = _split_breaks(cp, a, b, 1, bounds)
    repeated, repeated_chars = _repeats(cp, bounds, count)
    if repeated / count > limits[2]:
        return R_DUP_LINES
    if repeated_chars / length > limits[3]:
        return R_DUP_LINE_CHARS
    return _ngram_fate(hashes, chars, length, top_ngrams, dup_ngrams)


@njit(cache=True, nogil=True)
def _ngram_fate(hashes, chars, length, top_ngrams, dup_ngrams):
    """R_TOP_NGRAM, R_DUP_NGRAM or R_KEPT for a document of `length` code points whose words have these hashes
    (chars: the code points of the words before each, and of all).

    Only an n-gram that occurs more than once can repeat an earlier one or be the most frequent (unless none
    does: then the first is), and an (n+1)-gram occurs more than once only where the n-grams at its first and
    second words do. So each length past the shortest asked for is counted only at those places, which are few in
    text not made of repeats."""
    words, shortest, longest, last_top = len(hashes), 1 << 30, 0, 0
    for rules in (top_ngrams, dup_ngrams):
        for k in range(len(rules)):
            shortest, longest = min(shortest, int(rules[k, 0])), max(longest, int(rules[k, 0]))
    for k in range(len(top_ngrams)):
        last_top = max(last_top, int(top_ngrams[k, 0]))
    if longest == 0 or words < shortest:
        return R_KEPT
    grams = hashes.copy()  # at each place, the hash of the n words there, each from that of the n - 1 words
    for m in range(2, shortest + 1):
        for g in range(words - m + 1):
            grams[g] = _longer(grams[g], hashes[g + m - 1])
    places = np.arange(words - shortest + 1)
    count = len(places)
    repeats_at = np.zeros(words + 1, np.int64)  # the longest n at which the n-gram at a place occurs more than once
    dup = False
    for n in range(shortest, longest + 1):
        if n > shortest:  # where the (n - 1)-grams at the place and the next occur more than once
            kept = 0
            for k in range(count):
                g = places[k]
                if g + n <= words and repeats_at[g] == n - 1 and repeats_at[g + 1] == n - 1:
                    grams[g] = _longer(grams[g], hashes[g + n - 1])
                    places[kept] = g
                    kept += 1
            count = kept
        keys = _table(count)
        counts = np.zeros(len(keys), np.int64)
        slots = np.empty(count, np.int64)
        for k in range(count):
            slots[k] = _slot(keys, grams[places[k]])
            counts[slots[k]] += 1
        for k in range(count):
            if counts[slots[k]] > 1:
                repeats_at[places[k]] = n
        for r in range(len(top_ngrams)):
            if int(top_ngrams[r, 0]) != n or words < n:
                continue
            most, at = 1, 0  # every n-gram occurs once: the first (Counter.most_common)
            for k in range(count):  # the most frequent, the first seen among equals
                if counts[slots[k]] > most:
                    most, at = counts[slots[k]], places[k]
            if most * (chars[at + n] - chars[at] + n - 1) / length > top_ngrams[r, 1]:
                return R_TOP_NGRAM
        for r in range(len(dup_ngrams)):
            if int(dup_ngrams[r, 0]) != n:
                continue
            seen = np.zeros(len(keys), np.bool_)
            repeated, free = 0, 0  # the words of a repeat are not looked at again
            for k in range(count):
                g = places[k]
                if g < free:
                    continue
                if seen[slots[k]]:
                    repeated += chars[g + n] - chars[g]
                    free = g + n
                else:
                    seen[slots[k]] = True
            dup |= repeated / length > dup_ngrams[r, 1]
        if dup and n >= last_top:
            return R_DUP_NGRAM
    return R_DUP_NGRAM if dup else R_KEPT


@njit(cache=True, nogil=True, inline="always")
def _longer(gram, word):
    """The hash of a run of words from that of the run one word shorter and its last word's: nonzero."""
    h = _mix(gram * GOLDEN + word)
    return h if h != 0 else np.uint64(1)
