"""--filters c4,gopher against references written here from the rules (TFDS's clean_page, Gopher's quality and
repetition rules), in plain Python over str: crafted pages for each rule and its edges, random pages drawn from
those lines, a build whose windows are those of the reference's pages, and the same bytes on 1 and 2 workers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import unicodedata
from collections import Counter

import pytest

from mlmprep.builder.filters import Removals, filter_texts
from mlmprep.config import BuildConfig
from mlmprep.errors import ConfigError
from tests.builder.test_dedup import assert_windows_are_those_of, normalised, sides
from tests.builder.test_sharded import comparable, hashes
from tests.cli.test_build import assert_refused, build_args, cli, leftovers
from tests.conftest import build_tiny
from tests.ngrams import word_ngrams

END_MARKS = (".", "?", "!", '"')
CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")
POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
SENTENCE = re.compile(r"[.?!]+[\"')\]\u201d\u2019]*(?=\s|$)")
STOP_WORDS = {"the", "be", "to", "of", "and", "that", "have", "with"}


def c4_reference(text: str, *, min_words=5, min_sentences=3, max_word=1000, max_chars=190_000, badwords=None,
                 removed: dict | None = None):
    """(the page TFDS's clean_page leaves, or None; the rule that dropped it, or None); `removed` gets the
    non-blank lines (stripped) each line rule removed."""
    if len(text) > max_chars:
        return None, "c4_too_long"
    kept, sentences, lost = [], 0, {}
    for stripped in text.split("\n"):
        line = stripped = stripped.strip()
        rule = None
        if any(len(word) > max_word for word in line.split()):
            rule = "c4_long_word"
        elif not (line := CITATION.sub("", line)).endswith(END_MARKS) or line.endswith("..."):
            rule = "c4_no_end_mark"
        elif len(line.split()) < min_words:
            rule = "c4_short_line"
        elif "lorem ipsum" in line.lower():
            return None, "c4_lorem_ipsum"
        elif "javascript" in line.lower():
            rule = "c4_javascript"
        elif "{" in line:
            return None, "c4_curly_bracket"
        elif any(p in line.lower() for p in POLICY):
            rule = "c4_policy"
        if rule is not None:
            if stripped:
                lost.setdefault(rule, []).append(stripped)
            continue
        low = line.lower()
        if badwords is not None and badwords.search(low):
            return None, "c4_badword"
        sentences += max(1, len(SENTENCE.findall(line)))
        kept.append(line)
    if sentences < min_sentences:
        return None, "c4_few_sentences"
    page = "\n".join(kept).strip()
    if removed is not None and page:
        removed.update(lost)
    return (page, None) if page else (None, "c4_empty")


def symbols_only(word: str) -> bool:
    return all(unicodedata.category(c)[0] in "PS" for c in word)


def repeats(parts: list[str]) -> tuple[int, int]:
    """(parts equal to an earlier one, their characters)."""
    seen, count, chars = set(), 0, 0
    for part in parts:
        if part in seen:
            count, chars = count + 1, chars + len(part)
        seen.add(part)
    return count, chars


def gopher_reference(text: str, *, min_words=50, max_words=100_000, min_mean=3.0, max_mean=10.0, symbols=0.1,
                     bullets=0.9, ellipsis_lines=0.3, alpha=0.8, stop=2, dup_paragraphs=0.3, dup_paragraph_chars=0.2,
                     dup_lines=0.3, dup_line_chars=0.2, top=((2, 0.2), (3, 0.18), (4, 0.16)),
                     dup=((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.1))) -> str | None:
    """The first Gopher rule the document fails, or None."""
    words = text.split()
    plain = [w for w in words if not symbols_only(w)]
    if len(plain) < min_words:
        return "gopher_few_words"
    if len(plain) > max_words:
        return "gopher_many_words"
    mean = sum(map(len, plain)) / len(plain) if plain else float("nan")
    if mean < min_mean:
        return "gopher_short_words"
    if mean > max_mean:
        return "gopher_long_words"
    if text.count("#") / len(words) > symbols:
        return "gopher_hashes"
    if (text.count("...") + text.count("\u2026")) / len(words) > symbols:
        return "gopher_ellipses"
    lines = text.splitlines()
    if sum(line.lstrip().startswith(("\u2022", "-")) for line in lines) / len(lines) > bullets:
        return "gopher_bullet_lines"
    if sum(line.rstrip().endswith(("...", "\u2026")) for line in lines) / len(lines) > ellipsis_lines:
        return "gopher_ellipsis_lines"
    if sum(any(c.isalpha() for c in w) for w in words) / len(words) < alpha:
        return "gopher_few_alpha_words"
    if len(STOP_WORDS & set(words)) < stop:
        return "gopher_few_stop_words"
    count, chars = repeats(re.split(r"\n{2,}", text.strip()))
    if count / len(re.split(r"\n{2,}", text.strip())) > dup_paragraphs:
        return "gopher_dup_paragraphs"
    if chars / len(text) > dup_paragraph_chars:
        return "gopher_dup_paragraph_chars"
    count, chars = repeats(re.split("\n+", text))
    if count / len(re.split("\n+", text)) > dup_lines:
        return "gopher_dup_lines"
    if chars / len(text) > dup_line_chars:
        return "gopher_dup_line_chars"
    for n, share in top:
        grams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
        if grams:
            gram, count = Counter(grams).most_common(1)[0]
            if len(" ".join(gram)) * count / len(text) > share:
                return "gopher_top_ngram"
    for n, share in dup:
        seen, chars, i = set(), 0, 0
        while i < len(words) - n + 1:
            gram = tuple(words[i : i + n])
            if gram in seen:
                chars += sum(map(len, gram))
                i += n
            else:
                seen.add(gram)
                i += 1
        if chars / len(text) > share:
            return "gopher_dup_ngram"
    return None


def decisions(texts: list[str], **options) -> tuple[list[str | None], dict[int, list[str]]]:
    """mlmprep's filters: each page's text (None: dropped), and each page's rules that removed text."""
    removals = Removals(keep=True)
    kept, index = filter_texts(texts, BuildConfig(**options), removals)
    out: list[str | None] = [None] * len(texts)
    for k, text in zip(index.tolist(), kept):
        out[k] = text
    rules: dict[int, list[str]] = {}
    for k, rule, _ in removals.kept:
        rules.setdefault(k, []).append(rule)
    return out, rules


GOOD = ("The river runs past the old mill every morning.", "She wrote three letters and sent them at noon.",
        "Why would anyone leave the door open all night?", "We walked home slowly. It rained. Nobody minded!",
        "He said \"we will meet again by the bridge.\"", "Five words make this line.",
        "  Leading and trailing spaces are stripped away here.  ", "Mr. Smith went to Washington with his dog.",
        "Doctors named it pneumonoultramicroscopicsilicovolcanoconiosis, a lung disease.")  # a word of 45 characters
BAD_LINES = ("Menu", "Home | About | Contact", "Four words only here.", "Read more about the story here...",
             "Please enable JavaScript to view the comments below.", "This site uses cookies to improve things.",
             "Read our Privacy Policy before you sign up today.", "Click here", "A line with no end mark at all",
             "Supercalifragilistic" * 60 + " is a very long word indeed.")
CITED = ("The treaty was signed in the spring of that year.[1]", "Its capital moved twice during the war.[12][edit]",
         "Scholars still argue about the exact date [citation needed].", "The tower was rebuilt later on. [3]",
         "[2] The bridge was painted red by the town council.")
PAGE_ENDERS = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit.", "var x = { a: 1 }; and then we stop.",
               "Javascript users write { braces } in this line too.")


def random_pages(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pool = GOOD * 3 + BAD_LINES + CITED + PAGE_ENDERS
    return ["\n".join(rng.choice(pool) for _ in range(rng.randint(1, 9))) for _ in range(n)]


def test_c4_crafted_pages_are_those_of_the_reference():
    pages = {
        "kept, lines removed": ("Menu\n" + "\n".join(GOOD[:3]) + "\nPlease enable JavaScript to continue here.",
                                "\n".join(GOOD[:3])),
        "too few sentences": ("\n".join(GOOD[:2]) + "\nMenu", None),
        "one line, three sentences": (GOOD[3], GOOD[3]),
        "four words is short, five is not": ("Four words only here.\nFive words make this line.\n" + GOOD[0] + "\n"
                                             + GOOD[1], "\n".join(["Five words make this line.", GOOD[0], GOOD[1]])),
        "lorem ipsum drops the page": ("\n".join(GOOD[:3]) + "\n" + PAGE_ENDERS[0], None),
        "a brace drops the page": (PAGE_ENDERS[1] + "\n" + "\n".join(GOOD[:3]), None),
        "javascript is a line rule, checked before the brace": (PAGE_ENDERS[2] + "\n" + "\n".join(GOOD[:3]),
                                                                "\n".join(GOOD[:3])),
        "a brace on a removed line does not count": ("{ menu }\n" + "\n".join(GOOD[:3]), "\n".join(GOOD[:3])),
        "citations cut, then the end mark": ("\n".join(CITED), "The treaty was signed in the spring of that year.\n"
                                             "Its capital moved twice during the war.\n"
                                             "Scholars still argue about the exact date .\n"
                                             " The bridge was painted red by the town council."),
        "an ellipsis is no end mark": ("\n".join(GOOD[:2]) + "\nThen the story went on and on...", None),
    }
    for name, (page, expected) in pages.items():
        assert c4_reference(page)[0] == expected, name  # the reference does what the rules say
        assert decisions([page], filters="c4")[0] == [expected], name


def test_c4_random_pages_match_the_reference_text_and_rule():
    pages = random_pages(600, seed=3)
    got, rules = decisions(pages, filters="c4")
    dropped = 0
    for k, page in enumerate(pages):
        text, rule = c4_reference(page)
        assert got[k] == text, page
        if rule is not None:
            dropped += 1
            assert rules[k][-1] == rule, page
    assert 100 < dropped < 500  # both fates well represented


def test_c4_thresholds_act():
    pages = random_pages(300, seed=4)
    for options, reference in (({"c4_min_words": 3}, {"min_words": 3}),
                               ({"c4_min_sentences": 1}, {"min_sentences": 1}),
                               ({"c4_max_word_chars": 44}, {"max_word": 44}),
                               ({"c4_max_chars": 150}, {"max_chars": 150})):
        got = decisions(pages, filters="c4", **options)[0]
        assert got == [c4_reference(p, **reference)[0] for p in pages], options
        assert got != decisions(pages, filters="c4")[0], options
    assert decisions(pages, filters="c4", c4_max_word_chars=46)[0] == decisions(pages, filters="c4")[0]


def test_c4_badwords_file(tmp_path):
    listed = tmp_path / "bad.txt"
    listed.write_text("mill\nnoon\n", encoding="utf-8")
    pages = random_pages(300, seed=5)
    pattern = re.compile(r"[^a-z](mill|noon)[^a-z]")
    got, rules = decisions(pages, filters="c4", c4_badwords=str(listed))
    assert got == [c4_reference(p, badwords=pattern)[0] for p in pages]
    assert sum(r[-1] == "c4_badword" for r in rules.values()) > 10
    (tmp_path / "empty.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="empty.txt lists no word"):
        decisions(pages, filters="c4", c4_badwords=str(tmp_path / "empty.txt"))


def test_an_edited_badwords_list_is_another_build(tmp_path, tiny_tokenizer_path):
    """The manifest records the bad-words list's size and sha256; the same build again is up to date; once the list
    is edited (to the same size), the build is refused as made differently until --force rebuilds it, and then the
    new words are what drop pages."""
    import datasets

    from mlmprep.builder.run import build
    from mlmprep.errors import CacheError

    pages = corpus_pages(150, seed=12)
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"text": p}) + "\n" for p in pages), encoding="utf-8")
    listed = tmp_path / "bad.txt"
    options = BuildConfig(corpus=(str(corpus),), tokenizer=str(tiny_tokenizer_path), out=str(tmp_path / "b"),
                          input_length=32, seeds=1, dedup="off", filters="c4", c4_badwords=str(listed),
                          keep_dropped=True)
    built = {}
    for word in ("mill", "noon"):  # the same size
        listed.write_text(word + "\n", encoding="utf-8")
        if built:
            with pytest.raises(CacheError, match=re.escape(f"(--c4-badwords {listed} changed); pass --force")):
                build(options, log=lambda _: None)
        assert not build(dataclasses.replace(options, force=bool(built)), log=lambda _: None).up_to_date
        manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
        built = {"path": str(listed), "bytes": 5, "sha256": hashlib.sha256(f"{word}\n".encode()).hexdigest()}
        assert manifest["corpus"]["stats"]["option_files"] == {"c4_badwords": [built]}
        assert build(options, log=lambda _: None).up_to_date  # the same command again
        pattern = re.compile(f"[^a-z]({word})[^a-z]")
        expected = [k for k, page in enumerate(pages) if c4_reference(page, badwords=pattern)[1] == "c4_badword"]
        split = datasets.load_from_disk(str(tmp_path / "b" / "dropped"))
        assert len(expected) > 5 and [k for k, r in zip(split["document"], split["reason"])
                                      if r == "c4_badword"] == expected, word


VOCAB = ("river", "stone", "market", "window", "letter", "garden", "a", "I", "is", "on", "it", "extraordinary",
         "#tag", "...", "\u2026", "-", "\u2022", "|", "42", "3.14", "\u00e9t\u00e9", "na\u00efve")


def gopher_documents(n: int, seed: int) -> list[str]:
    """Documents near Gopher's thresholds: 40 to 70 words of a small vocabulary, some stop words or none, lines of
    3 to 10 words, some bullets, ellipses, repeated lines, paragraphs and phrases, some with line breaks around."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        vocab = list(VOCAB) + rng.sample(sorted(STOP_WORDS), rng.randint(0, 3))
        weights = [rng.random() ** 3 for _ in vocab]
        words = rng.choices(vocab, weights, k=rng.randint(40, 75))
        lines, i = [], 0
        while i < len(words):
            step = rng.randint(3, 10)
            line = " ".join(words[i : i + step])
            lines.append(("- " if rng.random() < 0.4 else "") + line + (" ..." if rng.random() < 0.2 else "."))
            if rng.random() < 0.15:
                lines.append(lines[rng.randrange(len(lines))])
            i += step
        text = "\n".join(lines)
        if rng.random() < 0.2:
            text += "\n\n" + text.split("\n\n")[0]
        if rng.random() < 0.2:
            phrase = " ".join(rng.choices(vocab, k=rng.randint(2, 8)))
            text += " " + " ".join([phrase] * rng.randint(2, 5))
        if rng.random() < 0.3:  # breaks around the text: empty lines for some rules, stripped away for others
            text = "\n" * rng.randint(1, 3) + text + "\n" * rng.randint(0, 2)
        docs.append(text)
    return docs


def test_gopher_documents_match_the_reference_rule():
    docs = gopher_documents(800, seed=6)
    got, rules = decisions(docs, filters="gopher")
    reasons = [gopher_reference(d) for d in docs]
    assert [rules.get(k, [None])[-1] for k in range(len(docs))] == reasons
    assert [g is None for g in got] == [r is not None for r in reasons]
    assert len(set(reasons)) >= 8  # most rules are exercised
    kept = [d for d, r in zip(docs, reasons) if r is None]
    assert [g for g in got if g is not None] == kept and len(kept) > 3  # kept text is left as it was


def test_gopher_thresholds_act():
    docs = gopher_documents(300, seed=7)
    for options, reference in (({"gopher_min_words": 45}, {"min_words": 45}),
                               ({"gopher_min_stop_words": 1}, {"stop": 1}),
                               ({"gopher_max_symbols": 0.2}, {"symbols": 0.2}),
                               ({"gopher_max_dup_lines": 0.1}, {"dup_lines": 0.1}),
                               ({"gopher_top_ngrams": "2:0.1"}, {"top": ((2, 0.1),)}),
                               ({"gopher_dup_ngrams": "3:0.05"}, {"dup": ((3, 0.05),)})):
        rules = decisions(docs, filters="gopher", **options)[1]
        assert [rules.get(k, [None])[-1] for k in range(len(docs))] == [gopher_reference(d, **reference)
                                                                         for d in docs], options


NGRAMS_ALONE = {"gopher_min_words": 0, "gopher_min_mean_word": 0.0, "gopher_max_mean_word": 1e9,
                "gopher_max_symbols": 1e9, "gopher_max_bullet_lines": 1.0, "gopher_max_ellipsis_lines": 1.0,
                "gopher_min_alpha_words": 0.0, "gopher_min_stop_words": 0, "gopher_max_dup_paragraphs": 1.0,
                "gopher_max_dup_paragraph_chars": 1.0, "gopher_max_dup_lines": 1.0, "gopher_max_dup_line_chars": 1.0}


@pytest.mark.parametrize("top, dup", [("2:0.2,3:0.18,4:0.16", "5:0.15,6:0.14,7:0.13,8:0.12,9:0.11,10:0.1"),
                                      ("4:0.25,1:0.5", ""), ("3:0.3", ""), ("", "7:0.0,2:0.1"),
                                      ("6:0.2", "3:0.02,9:0.01")])
def test_gopher_ngram_rules_match_the_reference_at_any_lengths(top, dup):
    """The n-gram rules alone, lengths in any order: documents of a few words repeated over and over, of words
    never repeated, and between, with repeated phrases anywhere (the last words too), and documents whose
    n-grams all occur once though shorter ones repeat (the first n-gram is then the most frequent)."""
    rng = random.Random(12)
    docs = ["abcdefghij y z w y z q", "y z w y z q abcdefghij", "a b c a b d a b e a b"]
    for _ in range(500):
        vocab = ["".join(rng.choices("abcdefgh", k=rng.randint(1, 9))) for _ in range(rng.randint(2, 40))]
        words = rng.choices(vocab, k=rng.randint(1, 60))
        for _ in range(rng.randint(0, 3)):
            phrase, at = rng.sample(words, min(len(words), rng.randint(2, 9))), rng.randint(0, len(words))
            words[at:at] = phrase * rng.randint(2, 3)
        docs.append(" ".join(words))
    reference = {"min_words": 0, "min_mean": 0.0, "max_mean": 1e9, "symbols": 1e9, "bullets": 1.0,
                 "ellipsis_lines": 1.0, "alpha": 0.0, "stop": 0, "dup_paragraphs": 1.0, "dup_paragraph_chars": 1.0,
                 "dup_lines": 1.0, "dup_line_chars": 1.0,
                 "top": tuple((int(n), float(f)) for n, f in (r.split(":") for r in top.split(",") if r)),
                 "dup": tuple((int(n), float(f)) for n, f in (r.split(":") for r in dup.split(",") if r))}
    expected = [gopher_reference(d, **reference) for d in docs]
    rules = decisions(docs, filters="gopher", gopher_top_ngrams=top, gopher_dup_ngrams=dup, **NGRAMS_ALONE)[1]
    assert [rules.get(k, [None])[-1] for k in range(len(docs))] == expected
    assert 50 < expected.count(None) < len(docs) - 50  # the rules keep some and drop some


def test_gopher_stop_words_are_the_words_exactly():
    """A stop word counts only as itself: not in capitals, not with any other character before or after it, not
    with a letter past ASCII that shares its low bits."""
    alike = ["The", "THE", "\x00the", "the\x00", "th\u00e9", "t\x00\u6865", "\x01\x00the", "wit", "withe", "\u0174he"]
    docs = [" ".join(["river", "stone", "window"] * 20 + [word]) for word in [*alike, "the"]]
    rules = decisions(docs, filters="gopher", gopher_min_stop_words=1, gopher_top_ngrams="", gopher_dup_ngrams="")[1]
    expected = [gopher_reference(d, stop=1, top=(), dup=()) for d in docs]
    assert [rules.get(k, [None])[-1] for k in range(len(docs))] == expected
    assert expected == ["gopher_few_stop_words"] * len(alike) + [None]


def test_c4_then_gopher_judges_the_page_c4_left():
    pages = random_pages(200, seed=8)
    got = decisions(pages, filters="gopher,c4")[0]
    expected = []
    for page in pages:
        text = c4_reference(page)[0]
        expected.append(text if text is not None and gopher_reference(text) is None else None)
    assert got == expected and any(g is not None for g in got)


@pytest.mark.parametrize("options, words", [
    ({"filters": "c5"}, "unknown filter set 'c5'"),
    ({"filters": ","}, "names no filter set"),
    ({"c4_min_words": 3}, "--c4-min-words applies to --filters c4 only"),
    ({"filters": "c4", "gopher_min_words": 10}, "--gopher-min-words applies to --filters gopher only"),
    ({"filters": "gopher", "gopher_max_symbols": -1.0}, "--gopher-max-symbols must be a finite number >= 0"),
    ({"filters": "c4", "c4_min_sentences": -1}, "--c4-min-sentences"),
])
def test_bad_filter_options_are_refused(options, words):
    with pytest.raises(ConfigError, match=re.escape(words)):
        BuildConfig(**options)


def test_bad_ngram_limits_are_refused():
    with pytest.raises(ConfigError, match="--gopher-top-ngrams must be N:SHARE"):
        decisions(["x"], filters="gopher", gopher_top_ngrams="2=0.2")


def corpus_pages(n: int, seed: int) -> list[str]:
    """Pages of C4 lines with a page number of their own (so no two are equal), some long enough for Gopher."""
    rng = random.Random(seed)
    pages = []
    for k in range(n):
        page = random_pages(1, seed * 1000 + k)[0]
        if rng.random() < 0.5:
            page += "\n" + " ".join(GOOD[rng.randrange(len(GOOD))] for _ in range(rng.randint(4, 9)))
        pages.append(f"Page number {k} of the book is this one here.\n{page}")
    return pages


@pytest.mark.parametrize("filters", ["c4", "c4,gopher"])
def test_a_build_keeps_the_references_pages_and_counts_each_rule(tmp_path, tiny_tokenizer_path, filters):
    pages = corpus_pages(300, seed=9)
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"text": p}) + "\n" for p in pages), encoding="utf-8")
    kept, counts = [], {}
    for page in pages:
        text, rule = c4_reference(page)
        if text is not None and "gopher" in filters and (rule := gopher_reference(text)) is not None:
            text = None
        if rule is not None:
            counts.setdefault(rule, [0, 0])
            counts[rule][0] += 1
            counts[rule][1] += len(page if rule.startswith("c4") else c4_reference(page)[0])
        kept.append(text)
    texts = [t for t in kept if t is not None]
    seen, firsts = set(), []  # exact dedup after the filters
    for k, t in enumerate(texts):
        if normalised(t) not in seen:
            seen.add(normalised(t))
            firsts.append(k)
    one = build_tiny(tmp_path / "one", corpus, tiny_tokenizer_path, workers=1, filters=filters, rows_per_file=20)
    assert_windows_are_those_of(one, sides(texts, firsts, 0.1, 0), tiny_tokenizer_path, {})
    stats = json.loads((one / "manifest.json").read_text())["corpus"]["stats"]["filters"]
    assert {rule: [c["documents"], c["characters"]] for rule, c in stats.items() if rule in counts} == counts
    assert all(stats[rule]["example"] for rule in counts)
    two = build_tiny(tmp_path / "two", corpus, tiny_tokenizer_path, workers=2, shard_bytes=4000, filters=filters,
                     rows_per_file=20)
    assert hashes(one) == hashes(two) and comparable(one) == comparable(two)


def dropped_reference(pages: list[str], paragraphs: bool, threshold: float = 0.8) -> list[tuple[int, str, str]]:
    """The rows of the `dropped` split of a build with --filters c4 --dedup exact: each page's C4 removals, then
    (given `paragraphs`) the lines whose word 13-grams were mostly in earlier lines (tests.ngrams), then the pages
    equal to an earlier one; ordered by page, then rule in the order applied."""
    from mlmprep.builder.dropped import REASONS

    rows, seen_grams, seen_texts = [], set(), set()
    for k, page in enumerate(pages):
        removed: dict[str, list[str]] = {}
        text, rule = c4_reference(page, removed=removed)
        rows += [(k, rule, "\n".join(lines)) for rule, lines in removed.items()]
        if text is None:
            rows.append((k, rule, page))
            continue
        kept, gone = [], []
        for line in text.split("\n"):
            grams = word_ngrams(line)
            repeated = paragraphs and grams and sum(g in seen_grams for g in grams) >= threshold * len(grams)
            (gone if repeated else kept).append(line)
            seen_grams.update(grams)
        if gone:
            rows.append((k, "dedup_paragraphs", "\n".join(gone)))
        text = "\n".join(kept)
        if not text.strip():
            continue
        if normalised(text) in seen_texts:
            rows.append((k, "dedup_exact", text))
        seen_texts.add(normalised(text))
    return sorted(rows, key=lambda r: (r[0], REASONS.index(r[1])))


def test_keep_dropped_writes_every_removal_with_its_rule_and_verify_checks_it(tmp_path, tiny_tokenizer_path):
    import datasets

    from mlmprep.builder.verify import verify

    pages = corpus_pages(200, seed=10)
    rng = random.Random(11)
    pages += [pages[k] for k in rng.sample(range(200), 30)]  # copies: exact duplicates, or their lines repeated
    pages += [f"Page {k} is a copy.\n{GOOD[0]}\n{GOOD[1]}\n{GOOD[2]} And more." for k in range(20)]
    corpus = tmp_path / "pages.jsonl"
    corpus.write_text("".join(json.dumps({"text": p}) + "\n" for p in pages), encoding="utf-8")
    for workers, shard_bytes, paragraphs in ((1, 0, True), (2, 5000, True), (2, 5000, False)):
        expected = dropped_reference(pages, paragraphs)
        assert {r[1] for r in expected} >= {"c4_no_end_mark", "c4_lorem_ipsum",
                                            "dedup_paragraphs" if paragraphs else "dedup_exact"}
        build = build_tiny(tmp_path / f"w{workers}{paragraphs}", corpus, tiny_tokenizer_path, workers=workers,
                           shard_bytes=shard_bytes, filters="c4", dedup_paragraphs=paragraphs, keep_dropped=True)
        split = datasets.load_from_disk(str(build / "dropped"))
        assert list(zip(split["document"], split["reason"], split["text"])) == expected, (workers, paragraphs)
        report = verify(build)
        assert report.ok, report.problems
    assert hashes(tmp_path / "w1True") == hashes(tmp_path / "w2True")
    manifest = json.loads((build / "manifest.json").read_text())
    manifest["corpus"]["stats"]["filters"]["c4_policy"]["documents"] += 1
    (build / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    rows = sum(r[1] == "c4_policy" for r in expected)
    assert f"dropped: {rows:,} rows" in " ".join(verify(build).problems)
    assert f"of c4_policy, corpus.stats gives {rows + 1:,}" in " ".join(verify(build).problems)


@pytest.mark.parametrize("more, words", [
    (["--filters", "c4,c5"], ("--filters", "unknown filter set 'c5'")),
    (["--filters", "c4", "--c4-badwords", "missing.txt"], ("--c4-badwords missing.txt", "UTF-8 list of words")),
    (["--c4-min-words", "4"], ("--c4-min-words applies to --filters c4 only",)),
])
def test_a_bad_filter_option_is_one_line_and_leaves_nothing(tmp_path, tiny_corpus, tok, more, words, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    result = cli(*build_args(tiny_corpus, out, tok, *more))
    assert_refused(result.exit_code, result.stderr, *words)
    assert leftovers(out) == []
