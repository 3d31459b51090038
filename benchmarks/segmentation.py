"""Text segmentation vs token splitting: does token splitting train a better T5 on the same text?

    python -m benchmarks.segmentation --corpus /work/shared/corpora/pydocs.txt --out bench-out/   # CPU, minutes
    python -m benchmarks.segmentation --full --out bench-out-full/                                # GPU-sized
    python -m benchmarks.segmentation --quick                                                     # CI: 1 MB, 20 steps

The same as `mlmprep compare-methods CORPUS --out DIR` (mlmprep.compare): documents held out first, one
tokenizer, both builds from the same training documents, the same model trained on each for the same steps,
both evaluated on one validation set cut by token splitting from the held-out documents. Writes
DIR/results.json, DIR/results.md and DIR/val_loss.png, DIR/val_accuracy.png. Without the shared corpora
the tests' synthetic text stands in (stated in the output). --write-docs writes the figures into the
`segmentation` section of docs/benchmarks.md (--section names another, e.g. one for --full).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks import docs
from benchmarks.common import Figure
from mlmprep.compare import check_compare, compare, compare_config, results_markdown
from mlmprep.errors import MlmprepError

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "pydocs.txt"


def synthetic_corpus(work: Path) -> Path:
    """The tests' pseudo-English documents, when the shared corpora are absent."""
    from tests.conftest import tiny_documents

    print(f"notice: {CORPUS} is absent; comparing on the tests' synthetic text")
    path = work / "synthetic.txt"
    path.write_text("\n".join(tiny_documents(n_docs=3000)) + "\n", encoding="utf-8")
    return path


def run(quick: bool = False, corpus: Path | None = None, out: Path | None = None, full: bool = False) -> dict:
    """The comparison in quick, default or full mode; its results dict (results.json)."""
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-segmentation-") as tmp:
        source = corpus or (CORPUS if CORPUS.is_file() else synthetic_corpus(Path(tmp)))
        target = out or (Path(tmp) / "out" if quick else Path("bench-out"))
        mode = "full" if full else "quick" if quick else "default"
        # a previous result is replaced; an --out holding anything else is refused
        cfg = compare_config(mode, {"corpus": (str(source),), "out": str(target), "force": True})
        check_compare(cfg)
        results = compare(cfg, log=lambda line: print(line, file=sys.stderr))
        print(results_markdown(results))
        return results


def figures(r: dict) -> list[Figure]:
    text, tokens = (r["methods"][m] for m in ("text", "tokens"))

    def pair(section: str, key: str, fmt: str) -> str:  # a run that diverged has no final evaluation: None
        return " / ".join("none (diverged)" if m[section][key] is None else fmt.format(m[section][key])
                          for m in (text, tokens))

    loss, accuracy = ([m["train"][key] for m in (text, tokens)] for key in ("final_loss", "final_accuracy"))
    evaluated = None not in loss + accuracy
    # a quick run (20 steps on 1 MB) keeps the code path alive; it is too short to judge the claim either way
    smoke = r["settings"]["mode"] == "quick"
    where = " (default mode)" if smoke else ""

    def judged(met: bool) -> bool | None:
        return None if smoke else met

    return [
        Figure("token utilisation: text / tokens", pair("build", "token_utilisation", "{:.3f}")),
        Figure("tokens lost (truncated or dropped): text / tokens", pair("build", "tokens_dropped", "{:,}")),
        Figure("windows cut inside a word: text / tokens", pair("build", "fragment_rate", "{:.1%}")),
        Figure("masked spans that are fragments: text / tokens", pair("build", "fragment_span_share", "{:.1%}")),
        Figure(f"validation loss after {tokens['train']['steps']} steps: text / tokens",
               pair("train", "final_loss", "{:.3f}"), "tokens lower" + where, judged(evaluated and loss[1] < loss[0])),
        Figure("validation token accuracy: text / tokens", pair("train", "final_accuracy", "{:.4f}"),
               "tokens higher" + where, judged(evaluated and accuracy[1] > accuracy[0])),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="a corpus file (default: shared pydocs.txt)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: bench-out; --quick: a temporary one)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="1 MB of the corpus, input length 64, 20 steps")
    mode.add_argument("--full", action="store_true", help="GPU-sized: t5-small shapes, input length 512, 4000 steps")
    docs.add_arguments(parser, "segmentation")
    args = parser.parse_args()
    try:
        result = run(args.quick, args.corpus, args.out, args.full)
    except MlmprepError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.segmentation")


if __name__ == "__main__":
    main()
