"""Cleaning: drop characters that are not text, keep letters of every script. Pure str -> str functions.

Dropped (counted): C0/C1 control characters except tab and newline, NUL, lone surrogates, noncharacters
(U+FDD0..U+FDEF and U+xFFFE/U+xFFFF of every plane), the byte-order mark U+FEFF, and private-use
characters (U+E000..U+F8FF and planes 15-16): they have no agreed meaning across fonts and systems, so a
model cannot learn them from text, and they show up in corpora as icon-font residue.

Kept: letters, digits and marks of every script, emoji with ZWJ (U+200D), ZWNJ, variation selectors and
tag characters, bidirectional marks and embeddings (U+200E/F, U+202A..E, U+2066..9: they are text in
RTL scripts), the replacement character U+FFFD (the corpus stage counts the lines it stood in for).

Line breaks: "\\r\\n", "\\r", and the vertical separators VT, FF, NEL (U+0085), U+2028, U+2029 become
"\\n", so a break between two words never joins them. Breaks are re-spelled, not removed: they are not
counted as removed characters.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata

_BREAKS = ("\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")  # each becomes "\n" (after "\r\n" has)
# Everything dropped, as one character class of few ranges, which `re` tests per character with a bitmap:
# one subn pass in C, at the same speed however many characters it drops (no Python callback per match).
_DROP_CLASS = (
    "\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f"  # C0 but tab, newline, VT, FF, CR (breaks); DEL; C1 but NEL
    "\ud800-\udfff"  # lone surrogates (a valid str never holds a pair)
    "\ue000-\uf8ff\U000f0000-\U0010ffff"  # private use; planes 15-16 hold their own noncharacters too
    "\ufdd0-\ufdef\ufeff\ufffe\uffff"  # BMP noncharacters and the BOM
)
_DROP = re.compile(f"[{_DROP_CLASS}]")
_TOUCHED = re.compile(f"[{''.join(_BREAKS)}{_DROP_CLASS}]")  # what the drop pass would change (see clean_texts)
_TOUCHED_BMP = re.compile(  # a third faster
    f"[{''.join(_BREAKS)}{_DROP_CLASS.replace(chr(0xF0000) + '-' + chr(0x10FFFF), '')}]"
)
# The noncharacters U+1FFFE..U+EFFFF are 28 separate points: a class of them is 6x slower to scan, so it runs
# only on text holding code points that high (CJK extensions B+, tags, variation selectors supplement).
_HIGH_ASTRAL = re.compile("[\U0001fffe-\U000effff]")
_ASTRAL_NONCHARACTERS = re.compile(
    "[" + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(1, 15)) + "]"
)


def clean_text(text: str, *, normalize_whitespace: bool = False, nfkc: bool = False) -> tuple[str, int]:
    """(cleaned text, number of non-text characters dropped).

    `nfkc` applies Unicode NFKC (ligatures, full-width forms, compatibility digits) after dropping;
    `normalize_whitespace` then turns every run of whitespace into one space and strips the ends.

    >>> clean_text("caf\\u00e9\\x00 \\ufeffok\\r\\n")
    ('café ok\\n', 2)
    """
    text, removed = _drop(text)
    return _normalize(text, normalize_whitespace=normalize_whitespace, nfkc=nfkc), removed


def clean_texts(texts: list[str], *, normalize_whitespace: bool = False, nfkc: bool = False) -> tuple[list[str], int]:
    """clean_text over a list: (cleaned texts, characters dropped in all). One scan of the joined list
    finds the few texts that hold anything to drop or re-spell; only those go through the drop pass.

    >>> clean_texts(["ok", "a\\x00b"])
    (['ok', 'ab'], 1)
    """
    joined = "\n".join(texts)  # "\n" is kept text, so a hit always lies inside one text
    astral = _has_astral(joined)
    hits = [m.start() for m in (_TOUCHED if astral else _TOUCHED_BMP).finditer(joined)]
    if astral:
        hits += [m.start() for m in _HIGH_ASTRAL.finditer(joined)]
    out, removed = list(texts), 0
    if hits:
        ends = list(itertools.accumulate(len(t) + 1 for t in texts))  # one past each text's separator
        for i in sorted({bisect.bisect_right(ends, pos) for pos in hits}):
            out[i], n = _drop(out[i])
            removed += n
    if normalize_whitespace or nfkc:
        out = [_normalize(t, normalize_whitespace=normalize_whitespace, nfkc=nfkc) for t in out]
    return out, removed


def _has_astral(text: str) -> bool:
    """Whether `text` holds a code point above U+FFFF (two UTF-16 units): one encoding, ten times cheaper than
    a regular-expression scan, tells most texts they need no scan for astral characters."""
    return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def _drop(text: str) -> tuple[str, int]:
    """Re-spell line breaks as "\\n" and drop the non-text characters; (text, number dropped)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    for brk in _BREAKS:  # a fast search each, and a copy only where one is found
        text = text.replace(brk, "\n")
    text, removed = _DROP.subn("", text)
    if not text.isascii() and _HIGH_ASTRAL.search(text):
        text, more = _ASTRAL_NONCHARACTERS.subn("", text)
        removed += more
    return text, removed


def _normalize(text: str, *, normalize_whitespace: bool, nfkc: bool) -> str:
    if nfkc:
        text = unicodedata.normalize("NFKC", text)
    if normalize_whitespace:
        text = " ".join(text.split())
    return text


__all__ = ["clean_text", "clean_texts"]
