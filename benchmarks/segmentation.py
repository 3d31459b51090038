"""Text segmentation vs token splitting (seed 002): does token splitting train a better T5 on the same text?

    python -m benchmarks.segmentation --corpus /work/shared/corpora/pydocs.txt --out bench-out/   # CPU, minutes
    python -m benchmarks.segmentation --full --out bench-out-full/                                # GPU-sized
    python -m benchmarks.segmentation --quick                                                     # CI: 1 MB, 20 steps

The same as `mlmprep compare-methods CORPUS --out DIR` (mlmprep.compare): documents held out first, one
tokenizer, both builds from the same training documents, the same model trained on each for the same steps,
both evaluated on one validation set cut by token splitting from the held-out documents. Writes
DIR/results.json, DIR/results.md and DIR/val_loss.png, DIR/val_accuracy.png. Without the shared corpora
the tests' synthetic text stands in (stated in the output).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

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
        cfg = compare_config(mode, {"corpus": (str(source),), "out": str(target)})
        check_compare(cfg, force=True)  # a previous result is replaced; an --out holding anything else is refused
        results = compare(cfg, log=lambda line: print(line, file=sys.stderr))
        print(results_markdown(results))
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="a corpus file (default: shared pydocs.txt)")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: bench-out; --quick: a temporary one)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="1 MB of the corpus, input length 64, 20 steps")
    mode.add_argument("--full", action="store_true", help="GPU-sized: t5-small shapes, input length 512, 4000 steps")
    args = parser.parse_args()
    try:
        run(args.quick, args.corpus, args.out, args.full)
    except MlmprepError as exc:
        parser.exit(2, f"error: {exc}\n")


if __name__ == "__main__":
    main()
