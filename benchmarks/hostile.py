"""Hostile input at scale: one 50 MB line without a newline, read alone and built, timed and measured.

    python -m benchmarks.hostile            # 50 MB
    python -m benchmarks.hostile --quick    # 10 MB

The unit tests (tests/corpus/test_sources.py, tests/corpus/test_hostile_corpora.py) check that such a line is
read and built exactly; the limits on time and memory live here, where a loaded machine cannot make a test flake.
Limits: the build within 120 s (about 10 M characters/s of reading and cleaning, tokenizing on 2 loaded
cores) and 1000 MB peak RSS (20x the line: a few copies of the text plus int32 tokens, no per-token
Python objects); reading the line alone within 10 s (about 0.3 s; a quadratic reader takes hours).
--write-docs writes the figures into the `hostile` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import docs
from benchmarks.common import Figure, timed

MAX_BUILD_S = 120
MAX_RSS_MB = 1000
MAX_READ_S = 10

WORDS = "mountain library teacher remembered explained carefully together vocabulary".split()


def run(quick: bool = False) -> dict:
    from mlmprep.corpus.documents import open_corpus
    from mlmprep.tokenizer.train import train_tokenizer

    line_bytes = 10_000_000 if quick else 50_000_000
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-hostile-") as tmp:
        tmp = Path(tmp)
        sentence = " ".join(WORDS) + " "
        corpus = tmp / "line.txt"
        corpus.write_text((sentence * (line_bytes // len(sentence) + 1))[:line_bytes], encoding="ascii")
        train_tokenizer([sentence * 20], vocab_size=400).save(str(tmp / "tokenizer.json"))

        started = time.perf_counter()
        lengths = [len(doc) for doc in open_corpus([str(corpus)]).documents()]
        read_s = time.perf_counter() - started
        assert len(lengths) == 1 and lengths[0] >= line_bytes - 1, lengths  # one document, whole

        # --workers 1: the whole build in one process. Its RSS is sampled (the rusage of a child counts the
        # parent's size at fork: a benchmark runner that trained a model first would be measured instead)
        build_s, rss_mb, _ = timed([sys.executable, "-m", "mlmprep", "build", str(corpus), "--out", str(tmp / "out"),
                                    "--tokenizer", str(tmp / "tokenizer.json"), "--input-length", "32", "--seeds", "1",
                                    "--workers", "1"])
    result = {"quick": quick, "mb": line_bytes / 1e6, "read_s": read_s, "build_s": build_s, "build_rss_mb": rss_mb}
    print(result, file=sys.stderr)
    return result


def figures(r: dict) -> list[Figure]:
    return [
        Figure(f"read one {r['mb']:.0f} MB line", f"{r['read_s']:.2f} s", f"< {MAX_READ_S} s",
               r["read_s"] < MAX_READ_S),
        Figure(f"build one {r['mb']:.0f} MB line", f"{r['build_s']:.0f} s", f"< {MAX_BUILD_S} s",
               r["build_s"] < MAX_BUILD_S),
        Figure("its peak RSS", f"{r['build_rss_mb']:.0f} MB", f"< {MAX_RSS_MB} MB", r["build_rss_mb"] < MAX_RSS_MB),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 10 MB line")
    docs.add_arguments(parser, "hostile")
    args = parser.parse_args()
    result = run(args.quick)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.hostile")


if __name__ == "__main__":
    main()
