"""clean_text: what is dropped, what is kept (every script, emoji, marks), the counts, the options."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlmprep.builder.clean import clean_text, clean_texts

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"  # man ZWJ woman ZWJ girl ZWJ boy
ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"  # black flag + tag letters

CASES = [
    # (input, expected output, characters removed)
    ("plain ASCII text.", "plain ASCII text.", 0),
    ("Καλημέρα κόσμε", "Καλημέρα κόσμε", 0),  # Greek
    ("\u200fمرحبا بالعالم\u200e", "\u200fمرحبا بالعالم\u200e", 0),  # Arabic with RLM / LRM marks
    ("שָׁלוֹם עולם", "שָׁלוֹם עולם", 0),  # Hebrew with niqqud (combining marks)
    ("नमस्ते दुनिया", "नमस्ते दुनिया", 0),  # Devanagari: vowel signs and virama are combining marks
    ("你好，世界。日本語のテキスト", "你好，世界。日本語のテキスト", 0),  # CJK, full-width punctuation
    ("\U00020000\U0002a6d6 ext-B", "\U00020000\U0002a6d6 ext-B", 0),  # astral CJK extension B
    (f"family {FAMILY}!", f"family {FAMILY}!", 0),  # emoji ZWJ sequence
    (f"\u2764\ufe0f \U0001f1ec\U0001f1e7 {ENGLAND}", f"\u2764\ufe0f \U0001f1ec\U0001f1e7 {ENGLAND}", 0),  # VS16, flags
    ("\u845b\U000e0100", "\u845b\U000e0100", 0),  # ideographic variation selector
    ("cafe\u0301", "cafe\u0301", 0),  # combining acute stays decomposed (no NFKC asked)
    ("ک\u200cه", "ک\u200cه", 0),  # Persian zero-width non-joiner
    ("bad \ufffd byte", "bad \ufffd byte", 0),  # replacement character kept: the corpus stage counted it
    ("tab\tand\nnewline", "tab\tand\nnewline", 0),
    ("a\x00b\x01c\x1fd\x7fe", "abcde", 4),  # C0 controls, NUL, DEL
    ("a\x80b\x9fc", "abc", 2),  # C1 controls
    ("\ufeffstart", "start", 1),  # byte-order mark
    ("lone\ud800 \udfffsurrogates", "lone surrogates", 2),
    ("non\ufdd0\ufffe\uffff\U0001fffe\U0010ffffchar", "nonchar", 5),  # noncharacters, BMP and astral
    ("\ue000private\uf8ff use\U000f0000\U0010fffd", "private use", 4),  # private use, BMP and planes 15-16
    ("a\r\nb\rc", "a\nb\nc", 0),  # CR LF and CR become LF
    ("a\x0bb\x0cc\x85d\u2028e\u2029f", "a\nb\nc\nd\ne\nf", 0),  # VT FF NEL LS PS become LF, words stay apart
    ("", "", 0),
]


@pytest.mark.parametrize("text, expected, removed", CASES)
def test_clean_text_table(text, expected, removed):
    assert clean_text(text) == (expected, removed)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("  many   spaces\t\tand\n\nlines  ", "many spaces and lines"),
        ("ideographic\u3000space\u00a0nbsp", "ideographic space nbsp"),
        ("\x00 \x01 ", ""),
    ],
)
def test_normalize_whitespace(text, expected):
    assert clean_text(text, normalize_whitespace=True)[0] == expected


def test_removed_counts_only_dropped_characters_not_whitespace_or_nfkc():
    assert clean_text("a\x00  \ufb01 b", normalize_whitespace=True, nfkc=True) == ("a fi b", 1)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\ufb01nance", "finance"),  # ligature
        ("ＡＢＣ１２３", "ABC123"),  # full-width forms
        ("cafe\u0301", "caf\u00e9"),  # composed
        ("x\u00b2", "x2"),
        ("日本語", "日本語"),
    ],
)
def test_nfkc(text, expected):
    assert clean_text(text, nfkc=True)[0] == expected


# A per-character reference of the rule in mlmprep/builder/clean.py, written with unicodedata categories.
BREAKS = {"\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"}


def reference(text: str) -> tuple[str, int]:
    out, removed = [], 0
    for ch in text.replace("\r\n", "\n"):
        cp = ord(ch)
        noncharacter = 0xFDD0 <= cp <= 0xFDEF or cp & 0xFFFE == 0xFFFE
        if ch in BREAKS:
            out.append("\n")
        elif ch in "\t\n":
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cs", "Co") or noncharacter or ch == "\ufeff":
            removed += 1
        else:
            out.append(ch)
    return "".join(out), removed


INTERESTING = [0, 9, 10, 13, 0x0B, 0x7F, 0x85, 0x9F, 0xA0, 0x200D, 0x200E, 0xD800, 0xDFFF, 0xE000, 0xF8FF, 0xFDD0,
               0xFEFF, 0xFFFD, 0xFFFE, 0x1F468, 0x1FFFE, 0x20000, 0xE0067, 0xE0100, 0xEFFFF, 0xF0000, 0x10FFFF]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 0x10FFFF), st.sampled_from(INTERESTING)), max_size=40))
def test_matches_per_character_reference(codepoints):
    text = "".join(map(chr, codepoints))
    assert clean_text(text) == reference(text)


@pytest.mark.parametrize("line", ["The quick brown fox \x00jumps over the lazy dog.\r\n",
                                  "Ünï 日本 \x00\U0001f600\r\n"])
def test_a_long_text_is_cleaned_whole(line):
    text = line * (10_000_000 // len(line))
    cleaned, removed = clean_text(text)
    assert removed == text.count("\x00") and "\r" not in cleaned and "\x00" not in cleaned
    assert len(cleaned) == len(text) - text.count("\r\n") - removed


@pytest.mark.parametrize("astral", ["\U000f0001", "\U0010fffd", "\U0001fffe", "\U000effff"])
@pytest.mark.parametrize("rest", ["plain ascii", "bmp \u00e9 \u65e5", "bmp with a break\u2028"])
def test_a_single_astral_character_to_drop_is_found_in_any_text(astral, rest):
    """The one character to drop (private use in planes 15-16, an astral noncharacter) is the batch's only
    astral character, beside ASCII or BMP-only text."""
    texts = ["before", f"{rest} {astral} after", "next"]
    assert clean_texts(texts) == ([t.replace(astral, "").replace("\u2028", "\n") for t in texts], 1)


texts_with_specials = st.lists(
    st.lists(st.one_of(st.integers(0, 0x10FFFF), st.sampled_from(INTERESTING)), max_size=12).map(
        lambda cps: "".join(map(chr, cps))
    ),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(texts_with_specials, st.booleans(), st.booleans())
def test_clean_texts_is_clean_text_of_each(texts, normalize_whitespace, nfkc):
    """The batch version finds exactly the texts that need the drop pass (a hit next to a separator, a
    high noncharacter, an empty text) and gives what cleaning each text alone gives."""
    options = {"normalize_whitespace": normalize_whitespace, "nfkc": nfkc}
    each = [clean_text(t, **options) for t in texts]
    assert clean_texts(texts, **options) == ([t for t, _ in each], sum(n for _, n in each))
