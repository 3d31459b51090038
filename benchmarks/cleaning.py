"""Clean text, not only clean documents: what `--dedup-paragraphs` and `--decontaminate` cost a build, and how
much of the validation text is still training text.

    python -m benchmarks.cleaning            # pydocs.txt (16 MB) and a licence-like corpus of 20,000 paragraphs
    python -m benchmarks.cleaning --quick    # small corpora, for CI (seconds)

Side by side in one run (the four builds in turn, 7 rounds: each stage's cost the median of the rounds' ratios to
neither, since a few percent is within one run's luck; one tokenizer given so its training is not timed; --dedup
exact, the default, throughout): the CPU time of a build in one process (--workers 1: every thread's time, which a
loaded machine does not distort as it does wall time) with neither stage, with --decontaminate alone (the default),
with --dedup-paragraphs alone and with both, on pydocs (8 MB), on kjv.txt (few repeated lines: paragraph dedup's
cost with little to remove) and on the licence-like corpus of tests/licences.py (hard-wrapped paragraphs as
documents, half of them shared warranty and permission paragraphs, some with a holder's name of their own, a third
of the others quoting one). On pydocs and the licences the paragraphs removed leave less to tokenize, so there the
ratio is what the option costs net of what it saves. Decontamination writes the training files while the corpus is
read; only the validation side waits for the last shard. Leakage, on the licence-like corpus: the share of the
validation windows' 32-token shingles that also occur in the training windows (as benchmarks.dedup measures it) with
--no-decontaminate, with the defaults and with --dedup-paragraphs, and the share of the held-out documents the
validation set keeps; the manifest's contamination measures before and after.
Filters (--filters c4, gopher): the build CPU time with each set against neither (net: the documents a filter
drops are not tokenized), and mlmprep's decisions against datatrove's C4QualityFilter (after TFDS's 190,000-
character page limit) and GopherQualityFilter + GopherRepetitionFilter at the same thresholds, on the licence-like
paragraphs and kjv and pydocs in pages of 30 lines, cleaned as a build cleans them: the share of documents both
keep or both drop, of the pages both keep those left the same text, and the CPU time of each on one core
(characters per second). datatrove's words are cut at whitespace and its sentences counted as mlmprep counts them
(its default tokenizer, NLTK's punkt, is a download), so the comparison is of the rules; without datatrove
installed that half is skipped with a printed line.
--write-docs writes the figures into the `cleaning` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each, median_ratio, print_figures, ratio, times_in_turn
from benchmarks.dedup import SHINGLE, leakage
from tests.licences import licence_documents, write_licence_corpus

ROUNDS = 7  # rounds of the four builds in turn: a stage's cost is the median of the rounds' ratios
PARAGRAPHS_TARGET = 1.15  # --dedup-paragraphs: at most this times the build without it
DECONTAMINATE_TARGET = 1.05  # --decontaminate: at most this times the build without it
LEAK_DEFAULTS, LEAK_PARAGRAPHS, KEPT = 0.05, 0.03, 0.5  # on the licence-like corpus
PAGE_LINES = 30  # lines of kjv and pydocs per document in the filter comparison
FILTER_SETS = ("c4", "gopher")
AGREEMENT, SPEEDUP, FILTER_COST = 0.99, 3.0, 1.10  # the filters' targets
SENTENCE_END = re.compile("[.?!]+[\"')\\]\u201d\u2019]*(?=\\s|$)")
ARMS = {"neither": {"decontaminate": False}, "decontaminate": {},
        "paragraphs": {"dedup_paragraphs": True, "decontaminate": False}, "both": {"dedup_paragraphs": True}}
FILTER_ARMS = {"off": {}, "c4": {"filters": "c4"}, "gopher": {"filters": "gopher"}}


def run(quick: bool = False) -> dict:
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig
    from mlmprep.tokenizer.train import train_tokenizer

    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-cleaning-") as tmp:
        work = Path(tmp)
        corpora = {"licences": (write_licence_corpus(work / "licences.txt", 3000 if quick else 20000), "blank")}
        sample = licence_documents(2000, seed=1)
        for name in ("pydocs", "kjv"):
            if (CORPORA / f"{name}.txt").exists():
                text = (CORPORA / f"{name}.txt").read_bytes()[: (512 << 10) if quick else (8 << 20)]
                (work / f"{name}.txt").write_bytes(text[: text.rfind(b"\n") + 1])
                corpora[name] = (work / f"{name}.txt", "line")
                sample += text.decode("utf-8", "replace").splitlines()[:4000]
        tokenizer = work / "tokenizer.json"
        train_tokenizer(sample, vocab_size=2000).save(str(tokenizer))
        manifests, times, filter_times = {}, {}, {}

        def build_arm(name: str, arm: str, options: dict) -> None:
            path, doc_sep = corpora[name]
            cfg = BuildConfig(corpus=(str(path),), tokenizer=str(tokenizer), out=str(work / f"{name}-{arm}"),
                              doc_sep=doc_sep, input_length=128, seeds=1, force=True, workers=1, **options)
            manifests[name, arm] = build(cfg, log=lambda _: None).manifest

        for name in list(corpora):
            times[name] = times_in_turn({arm: (lambda a=arm, n=name: build_arm(n, a, ARMS[a])) for arm in ARMS},
                                        1 if quick else ROUNDS, clock=time.process_time)
        pages = filter_documents(quick)
        for name, texts in pages.items():  # the filters judge pages: each a document of a JSON Lines corpus
            corpora[f"{name}-pages"] = (work / f"{name}-pages.jsonl", "line")
            with open(corpora[f"{name}-pages"][0], "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"text": text}) + "\n" for text in texts)
            filter_times[name] = best_of_each({arm: (lambda a=arm, n=f"{name}-pages": build_arm(
                n, a, {"decontaminate": False, **FILTER_ARMS[a]})) for arm in FILTER_ARMS}, 1 if quick else 3,
                clock=time.process_time)  # three: a build of pages takes a second or two, which a loaded box skews
        stats = {arm: manifests["licences", arm].corpus.stats for arm in ARMS}
        result = {
            "quick": quick,
            "times": times,
            "leakage": {arm: leakage(work / f"licences-{arm}") for arm in ("neither", "decontaminate", "both")},
            "validation_documents": {arm: s["dedup"]["validation_documents"] for arm, s in stats.items()},
            "contamination": {arm: stats[arm]["contamination"] for arm in ("decontaminate", "both")},
            "paragraphs": stats["both"]["paragraphs"],
            "filter_times": filter_times,
            "filters": filter_comparison(pages),
            "load": os.getloadavg()[0],
        }
        print(json.dumps(result, indent=1))
        return result


def filter_documents(quick: bool) -> dict[str, list[str]]:
    """The documents the filters are compared on, cleaned as a build cleans them: the licence-like corpus's
    paragraphs, and kjv and pydocs cut into pages of PAGE_LINES lines (one line each would leave C4 and Gopher
    nothing but single lines to judge)."""
    from mlmprep.builder.clean import clean_texts

    corpora = {"licences": licence_documents(2000 if quick else 20000, seed=2)}
    for name in ("kjv", "pydocs"):
        if (CORPORA / f"{name}.txt").exists():
            lines = (CORPORA / f"{name}.txt").read_text("utf-8", "replace").splitlines()[: 20000 if quick else None]
            corpora[name] = ["\n".join(lines[k : k + PAGE_LINES]) for k in range(0, len(lines), PAGE_LINES)]
    return {name: [t for t in clean_texts(docs)[0] if t.strip()] for name, docs in corpora.items()}


def datatrove_filters(cfg) -> dict | None:
    """datatrove's C4 quality filter and Gopher's quality and repetition filters at cfg's thresholds, with words
    cut at whitespace and sentences counted as mlmprep counts them (its default, NLTK's punkt, is a download);
    None where datatrove is not installed."""
    try:
        from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
        from datatrove.utils.word_tokenizers import WordTokenizer
    except ImportError:
        return None
    from mlmprep.builder.filters import ngram_limits

    class Whitespace(WordTokenizer):
        """Words between whitespace; a sentence ends at a run of . ? ! (closing quotes and brackets after it)
        followed by whitespace or the end."""

        def word_tokenize(self, text):
            return text.split()

        def sent_tokenize(self, text):
            return [text[a:b] for a, b in self.span_tokenize(text)]

        def span_tokenize(self, text):
            ends = [m.end() for m in SENTENCE_END.finditer(text)] or [len(text)]
            return list(zip([0, *ends[:-1]], ends))

    words = Whitespace()
    return {
        "c4": C4QualityFilter(min_num_sentences=cfg.c4_min_sentences, min_words_per_line=cfg.c4_min_words,
                              max_word_length=cfg.c4_max_word_chars, language=words),
        "gopher_quality": GopherQualityFilter(
            min_doc_words=cfg.gopher_min_words, max_doc_words=cfg.gopher_max_words,
            min_avg_word_length=cfg.gopher_min_mean_word, max_avg_word_length=cfg.gopher_max_mean_word,
            max_symbol_word_ratio=cfg.gopher_max_symbols, max_bullet_lines_ratio=cfg.gopher_max_bullet_lines,
            max_ellipsis_lines_ratio=cfg.gopher_max_ellipsis_lines,
            max_non_alpha_words_ratio=cfg.gopher_min_alpha_words, min_stop_words=cfg.gopher_min_stop_words,
            language=words),
        "gopher_repetition": GopherRepetitionFilter(
            dup_line_frac=cfg.gopher_max_dup_lines, dup_para_frac=cfg.gopher_max_dup_paragraphs,
            dup_line_char_frac=cfg.gopher_max_dup_line_chars, dup_para_char_frac=cfg.gopher_max_dup_paragraph_chars,
            top_n_grams=tuple((int(n), f) for n, f in ngram_limits(cfg.gopher_top_ngrams, "")),
            dup_n_grams=tuple((int(n), f) for n, f in ngram_limits(cfg.gopher_dup_ngrams, "")), language=words),
    }


def datatrove_decisions(name: str, docs: list[str], filters: dict, max_chars: int) -> list[str | None]:
    """Each document's text as datatrove's filters of set `name` leave it (None: dropped). C4 drops a page over
    max_chars first, TFDS's is_valid_length, which datatrove's C4 filter leaves to the reader."""
    from datatrove.data import Document

    out = []
    for k, text in enumerate(docs):
        doc = Document(text=text, id=str(k))
        if name == "c4":
            kept = len(text) <= max_chars and filters["c4"].filter(doc) is True
        else:
            kept = all(filters[f].filter(doc) is True for f in ("gopher_quality", "gopher_repetition"))
        out.append(doc.text if kept else None)
    return out


def tfds_end_marks_agreement(name: str, texts: list[str], reference: dict, cfg, ours: list) -> float | None:
    """C4 only: the share of decisions agreeing with datatrove's once its end marks are TFDS's (it also ends a line
    at "'"): what is left of the difference once that one is taken away."""
    if name != "c4":
        return None
    from datatrove.pipeline.filters import c4_filters

    marks = c4_filters.END_PUNCTUATION
    c4_filters.END_PUNCTUATION = tuple(m for m in marks if m != "'")
    try:
        theirs = datatrove_decisions(name, texts, reference, cfg.c4_max_chars)
    finally:
        c4_filters.END_PUNCTUATION = marks
    return sum((a is None) == (b is None) for a, b in zip(ours, theirs)) / max(len(texts), 1)


def filter_comparison(corpora: dict[str, list[str]]) -> dict:
    """Per corpus and filter set: mlmprep's decisions against datatrove's at the same thresholds (documents decided
    alike; of the pages both keep, those left the same text), the CPU time of each, and the first few documents
    decided apart with mlmprep's reason."""
    from mlmprep.builder.filters import DOCUMENT_RULES, Removals, filter_texts
    from mlmprep.builder.pipeline import batched
    from mlmprep.config import BuildConfig

    result = {}
    for name in FILTER_SETS:
        cfg = BuildConfig(filters=name)
        reference = datatrove_filters(cfg)
        for corpus, texts in corpora.items():
            removals = Removals(keep=True)
            filter_texts(texts, cfg, removals)  # compiled or loaded, and each removal's rule, untimed
            ours: list[str | None] = [None] * len(texts)
            started, first = time.process_time(), 0
            for batch in batched(texts, cfg.chunk_chars):  # as a build filters: a batch at a time
                kept, index = filter_texts(batch, cfg, Removals(keep=False))
                for k, text in zip(index.tolist(), kept):
                    ours[first + k] = text
                first += len(batch)
            row = {"documents": len(texts), "characters": sum(map(len, texts)),
                   "mlmprep_s": time.process_time() - started, "mlmprep_dropped": ours.count(None)}
            if reference is not None:
                started = time.process_time()
                theirs = datatrove_decisions(name, texts, reference, cfg.c4_max_chars)
                row["datatrove_s"] = time.process_time() - started
                apart = [k for k in range(len(texts)) if (ours[k] is None) != (theirs[k] is None)]
                both = [k for k in range(len(texts)) if ours[k] is not None and theirs[k] is not None]
                reasons = {k: rule for k, rule, _ in removals.kept if rule in DOCUMENT_RULES}
                row |= {"agree": 1 - len(apart) / max(len(texts), 1), "datatrove_dropped": theirs.count(None),
                        "agree_tfds_marks": tfds_end_marks_agreement(name, texts, reference, cfg, ours),
                        "same_text": sum(ours[k] == theirs[k] for k in both) / max(len(both), 1),
                        "apart": [{"document": k, "mlmprep": reasons.get(k, "kept"), "text": texts[k][:300]}
                                  for k in apart[:5]]}
            result[f"{corpus}/{name}"] = row
    return result


def share(m: dict, part: str, whole: str) -> str:
    return f"{m[part] / m[whole]:.1%}" if m[whole] else "0%"


def figures(r: dict) -> list[Figure]:
    rows = []
    for name, t in r["times"].items():
        para, decon = median_ratio(t, "paragraphs", "neither"), median_ratio(t, "decontaminate", "neither")
        rows += [Figure(f"{name}: build CPU time neither / decontaminate / paragraphs / both (best)",
                        " / ".join(f"{min(t[a]):.2f}" for a in ARMS) + " s"),
                 Figure(f"{name}: --dedup-paragraphs / neither", f"{para:.2f}x", f"<= {PARAGRAPHS_TARGET:.2f}x",
                        para <= PARAGRAPHS_TARGET),
                 Figure(f"{name}: --decontaminate / neither", f"{decon:.2f}x", f"<= {DECONTAMINATE_TARGET:.2f}x",
                        decon <= DECONTAMINATE_TARGET)]
    leak, docs_kept = r["leakage"], r["validation_documents"]
    kept = docs_kept["decontaminate"] / docs_kept["neither"] if docs_kept["neither"] else 0.0
    before, after = r["contamination"]["decontaminate"]["before"], r["contamination"]["decontaminate"]["after"]
    para = r["paragraphs"]
    rows += [
        Figure(f"licences: validation {SHINGLE}-token shingles in training, --no-decontaminate",
               f"{leak['neither']:.3f}"),
        Figure("licences: ... with the defaults", f"{leak['decontaminate']:.3f}", f"<= {LEAK_DEFAULTS}",
               leak["decontaminate"] <= LEAK_DEFAULTS),
        Figure("licences: ... with --dedup-paragraphs", f"{leak['both']:.3f}", f"<= {LEAK_PARAGRAPHS}",
               leak["both"] <= LEAK_PARAGRAPHS),
        Figure("licences: validation documents kept by the defaults",
               f"{docs_kept['decontaminate']:,} of {docs_kept['neither']:,}", f">= {KEPT:.0%}", kept >= KEPT),
        Figure("licences: documents sharing a 13-gram, before / after",
               " / ".join(share(m, "documents_with_ngram", "documents") for m in (before, after))),
        Figure("licences: tokens in a 50-token match, before / after",
               " / ".join(share(m, "tokens_in_match", "tokens") for m in (before, after))),
        Figure("licences: lines removed by --dedup-paragraphs", f"{para['lines_removed']:,} of {para['lines']:,}"),
        *filter_figures(r["filters"], r["filter_times"]),
        Figure("machine load (1-minute average) at the end", f"{r['load']:.1f}"),
    ]
    return rows


def filter_figures(compared: dict, times: dict) -> list[Figure]:
    """mlmprep's filters against datatrove's: agreement, CPU time per character, and the filters' own CPU time
    as a share of a build without them (their gross cost, before what they save)."""
    rows = []
    for name, t in times.items():
        rows.append(Figure(f"{name} pages: build CPU time --filters off / c4 / gopher",
                           " / ".join(f"{t[a]:.2f}" for a in FILTER_ARMS) + " s"))
        for f in FILTER_SETS:
            gross = compared[f"{name}/{f}"]["mlmprep_s"] / t["off"]
            rows += [Figure(f"{name} pages: --filters {f} / off (net of the text it drops)", ratio(t[f], t["off"]),
                            f"<= {FILTER_COST:.2f}x", t[f] / t["off"] <= FILTER_COST),
                     Figure(f"{name} pages: --filters {f}'s own CPU time / build off", f"{gross:.1%}",
                            f"<= {FILTER_COST - 1:.0%}", gross <= FILTER_COST - 1)]
    for key, c in compared.items():
        corpus, name = key.split("/")
        rows.append(Figure(f"{key}: documents dropped, mlmprep / datatrove",
                           f"{c['mlmprep_dropped']:,} / {c.get('datatrove_dropped', '-')} of {c['documents']:,}"))
        if "datatrove_s" not in c:
            continue
        rows += [Figure(f"{key}: decisions agreeing with datatrove's", f"{c['agree']:.2%}", f">= {AGREEMENT:.0%}",
                        c["agree"] >= AGREEMENT),
                 *([Figure(f"{key}: ... with datatrove's end marks TFDS's (no \"'\")", f"{c['agree_tfds_marks']:.2%}")]
                   if c.get("agree_tfds_marks") is not None else []),
                 Figure(f"{key}: pages both keep left the same text", f"{c['same_text']:.2%}"),
                 Figure(f"{key}: throughput per core, mlmprep / datatrove",
                        f"{c['characters'] / c['mlmprep_s'] / 1e6:.0f} / {c['characters'] / c['datatrove_s'] / 1e6:.1f}"
                        f" MB/s = {c['datatrove_s'] / c['mlmprep_s']:.1f}x", f">= {SPEEDUP:.0f}x",
                        c["datatrove_s"] / c["mlmprep_s"] >= SPEEDUP)]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpora (CI)")
    docs.add_arguments(parser)
    args = parser.parse_args()
    result = run(args.quick)
    if not any("datatrove_s" in c for c in result["filters"].values()):
        print("datatrove is not installed: the comparison of the filters with its filters is skipped")
    rows = figures(result)
    print_figures(rows)
    if args.write_docs:
        docs.write(args.write_docs, {"cleaning": rows}, "benchmarks.cleaning")


if __name__ == "__main__":
    main()
