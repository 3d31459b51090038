"""Clean text, not only clean documents: what `--dedup-paragraphs` and `--decontaminate` cost a build, and how
much of the validation text is still training text.

    python -m benchmarks.cleaning            # pydocs.txt (16 MB) and a licence-like corpus of 20,000 paragraphs
    python -m benchmarks.cleaning --quick    # small corpora, for CI (seconds)

Side by side in one run (builds in turn, the best of 3 each, one tokenizer given so its training is not
timed; --dedup exact, the default, throughout): the CPU time of a build in one process (--workers 1: every
thread's time, which a loaded machine does not distort as it does wall time) with neither stage, with
--decontaminate alone (the default), with --dedup-paragraphs alone and with both, on pydocs (8 MB), on kjv.txt
(few repeated lines: paragraph dedup's cost with little to remove) and on the licence-like corpus of
tests/licences.py (hard-wrapped paragraphs as documents, half of them shared warranty and permission paragraphs,
some with a holder's name of their own, a third of the others quoting one). On pydocs and the licences the
paragraphs removed leave less to tokenize, so there the ratio is what the option costs net of what it saves.
Decontamination writes the training files while the corpus is read; only the validation side waits for the last
shard. Leakage, on the licence-like
corpus: the share of the validation windows' 32-token shingles that also occur in the training windows (as
benchmarks.dedup measures it) with --no-decontaminate, with the defaults and with --dedup-paragraphs, and the
share of the held-out documents the validation set keeps; the manifest's contamination measures before and
after.
--write-docs writes the figures into the `cleaning` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each, print_figures, ratio
from benchmarks.dedup import SHINGLE, leakage
from tests.licences import licence_documents, write_licence_corpus

PARAGRAPHS_TARGET = 1.15  # --dedup-paragraphs: at most this times the build without it
DECONTAMINATE_TARGET = 1.05  # --decontaminate: at most this times the build without it
LEAK_DEFAULTS, LEAK_PARAGRAPHS, KEPT = 0.05, 0.03, 0.5  # on the licence-like corpus
ARMS = {"neither": {"decontaminate": False}, "decontaminate": {},
        "paragraphs": {"dedup_paragraphs": True, "decontaminate": False}, "both": {"dedup_paragraphs": True}}


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
        manifests, times = {}, {}

        def build_arm(name: str, arm: str) -> None:
            path, doc_sep = corpora[name]
            cfg = BuildConfig(corpus=(str(path),), tokenizer=str(tokenizer), out=str(work / f"{name}-{arm}"),
                              doc_sep=doc_sep, input_length=128, seeds=1, force=True, workers=1, **ARMS[arm])
            manifests[name, arm] = build(cfg, log=lambda _: None).manifest

        for name in corpora:
            times[name] = best_of_each({arm: (lambda a=arm, n=name: build_arm(n, a)) for arm in ARMS},
                                       1 if quick else 3, clock=time.process_time)
        stats = {arm: manifests["licences", arm].corpus.stats for arm in ARMS}
        result = {
            "quick": quick,
            "times": times,
            "leakage": {arm: leakage(work / f"licences-{arm}") for arm in ("neither", "decontaminate", "both")},
            "validation_documents": {arm: s["dedup"]["validation_documents"] for arm, s in stats.items()},
            "contamination": {arm: stats[arm]["contamination"] for arm in ("decontaminate", "both")},
            "paragraphs": stats["both"]["paragraphs"],
            "load": os.getloadavg()[0],
        }
        print(json.dumps(result, indent=1))
        return result


def share(m: dict, part: str, whole: str) -> str:
    return f"{m[part] / m[whole]:.1%}" if m[whole] else "0%"


def figures(r: dict) -> list[Figure]:
    rows = []
    for name, t in r["times"].items():
        para, decon = t["paragraphs"] / t["neither"], t["decontaminate"] / t["neither"]
        rows += [Figure(f"{name}: build CPU time neither / decontaminate / paragraphs / both",
                        " / ".join(f"{t[a]:.2f}" for a in ARMS) + " s"),
                 Figure(f"{name}: --dedup-paragraphs / neither", ratio(t["paragraphs"], t["neither"]),
                        f"<= {PARAGRAPHS_TARGET:.2f}x", para <= PARAGRAPHS_TARGET),
                 Figure(f"{name}: --decontaminate / neither", ratio(t["decontaminate"], t["neither"]),
                        f"<= {DECONTAMINATE_TARGET:.2f}x", decon <= DECONTAMINATE_TARGET)]
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
        Figure("machine load (1-minute average) at the end", f"{r['load']:.1f}"),
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpora (CI)")
    docs.add_arguments(parser)
    args = parser.parse_args()
    rows = figures(run(args.quick))
    print_figures(rows)
    if args.write_docs:
        docs.write(args.write_docs, {"cleaning": rows}, "benchmarks.cleaning")


if __name__ == "__main__":
    main()
