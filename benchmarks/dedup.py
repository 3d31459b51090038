"""Dedup in the build: what `--dedup exact` and `--dedup near` cost a build, what they find, and whether the
validation split still overlaps training.

    python -m benchmarks.dedup            # pydocs.txt, and a generated corpus with planted duplicates
    python -m benchmarks.dedup --quick    # small corpora, for CI (seconds)

Side by side in one run (builds in turn, off/exact/near, the best of a few each, one tokenizer given with
--tokenizer so its training is not timed): the build time of each on the shared corpus and on the planted one.
The planted corpus is distinct generated documents followed by exact copies (re-spaced) and near copies (a
word changed, a few added) of some of them: its ground truth is the copies, so dedup's recall is the share of
them dropped and a drop beyond them is a false positive. Leakage: the share of the validation windows'
32-token shingles that also occur in the training windows, on the planted corpus with dedup off and near, and on
the same corpus without its copies (the level a duplicate-free corpus has).
The MinHash kernels against datatrove's are measured apart, by the kernels' own benchmark.
--write-docs writes the figures into the `dedup` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each, ratio

EXACT_TARGET = 1.05  # build time with --dedup exact / with --dedup off
NEAR_TARGET = 1.30  # with --dedup near / off
SHINGLE = 32  # tokens per shingle of the leakage figure
WORDS = ("river mountain library window teacher garden morning journey silver quiet ancient message build train "
         "token span model data cache seed epoch batch mask corpus walked carried opened noticed remembered "
         "explained measured wrote sang followed quickly slowly carefully often never always nearly together the "
         "a of and to in is was for on that with as by at from it this be are or an not which have").split()


def planted_corpus(n: int, seed: int = 0) -> tuple[list[str], list[str], int]:
    """(documents, the distinct ones alone, planted copies): n distinct documents, then an exact copy of every
    5th and a near copy (Jaccard about 0.9) of every 7th, shuffled into the second half."""
    rng = random.Random(seed)
    base = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(120, 300))) + f" number {k}." for k in range(n)]
    copies = [f" {doc}  " for doc in base[::5]]
    near = []
    for doc in base[3::7]:
        words = doc.split()
        words[rng.randrange(len(words))] = "zebra"
        near.append(" ".join(words) + " and so on")
    rest = base[n // 2 :] + copies + near
    rng.shuffle(rest)
    return base[: n // 2] + rest, base, len(copies) + len(near)


def build_config(corpus: Path, out: Path, tokenizer: Path, dedup: str, fraction: float = 0.1):
    from mlmprep.config import BuildConfig

    return BuildConfig(corpus=(str(corpus),), tokenizer=str(tokenizer), out=str(out), dedup=dedup, force=True,
                       input_length=128, seeds=1, validation_fraction=fraction)


def shingle_keys(split: Path) -> np.ndarray:
    """A 64-bit hash of every SHINGLE-token run inside each window of a windows split, sorted and distinct."""
    from mlmprep.format.rows import concat_rows
    from mlmprep.format.write import iter_rows

    rows = concat_rows(list(iter_rows(split, "tokens")))
    keys = []
    weights = np.random.default_rng(0).integers(1, 2**63, size=SHINGLE, dtype=np.uint64)
    for a, b in zip(rows.offsets[:-1], rows.offsets[1:]):
        row = rows.values[a:b].astype(np.uint64)
        if len(row) >= SHINGLE:
            with np.errstate(over="ignore"):
                keys.append(np.lib.stride_tricks.sliding_window_view(row, SHINGLE) @ weights)
    return np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.uint64)


def leakage(build: Path) -> float:
    """The share of validation shingles that occur in training windows."""
    val, train = shingle_keys(build / "validation-windows"), shingle_keys(build / "windows")
    return float(np.isin(val, train).mean()) if len(val) else 0.0


def run(quick: bool = False) -> dict:
    from mlmprep.build.run import build
    from mlmprep.tokenize import train_tokenizer

    pydocs = CORPORA / "pydocs.txt"
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-dedup-") as tmp:
        work = Path(tmp)
        documents, distinct, planted = planted_corpus(600 if quick else 12000)
        corpora = {"planted": work / "planted.txt", "clean": work / "clean.txt"}
        corpora["planted"].write_text("\n".join(documents) + "\n", encoding="utf-8")
        corpora["clean"].write_text("\n".join(distinct) + "\n", encoding="utf-8")
        if pydocs.exists():
            text = pydocs.read_bytes()[: (512 << 10) if quick else (16 << 20)]
            corpora["pydocs"] = work / "pydocs.txt"
            corpora["pydocs"].write_bytes(text[: text.rfind(b"\n") + 1])
        tokenizer = work / "tokenizer.json"
        train_tokenizer(documents[:3000], vocab_size=2000).save(str(tokenizer))
        quiet = lambda line: None  # noqa: E731
        times, manifests = {}, {}
        for name in [n for n in ("pydocs", "planted") if n in corpora]:
            fns = {dedup: (lambda d=dedup, n=name: manifests.__setitem__(
                (n, d), build(build_config(corpora[n], work / f"{n}-{d}", tokenizer, d), log=quiet).manifest))
                for dedup in ("off", "exact", "near")}
            times[name] = best_of_each(fns, 1 if quick else 3)
        build(build_config(corpora["clean"], work / "clean-off", tokenizer, "off"), log=quiet)
        near = manifests["planted", "near"].corpus.stats["dedup"]
        exact = manifests["planted", "exact"].corpus.stats["dedup"]
        result = {
            "quick": quick,
            "times": times,
            "planted": planted,
            "documents": len(documents),
            "dropped": {"exact": exact["documents_dropped"], "near": near["documents_dropped"]},
            "leakage": {"planted, dedup off": leakage(work / "planted-off"),
                        "planted, dedup near": leakage(work / "planted-near"),
                        "without the copies, dedup off": leakage(work / "clean-off")},
        }
        print(json.dumps(result, indent=1))
        return result


def figures(r: dict) -> list[Figure]:
    rows = []
    for name, t in r["times"].items():
        exact, near = t["exact"] / t["off"], t["near"] / t["off"]
        rows += [Figure(f"{name}: build time off / exact / near", f"{t['off']:.2f} / {t['exact']:.2f} / "
                        f"{t['near']:.2f} s"),
                 Figure(f"{name}: exact / off", ratio(t["exact"], t["off"]), f"<= {EXACT_TARGET:.2f}x",
                        exact <= EXACT_TARGET),
                 Figure(f"{name}: near / off", ratio(t["near"], t["off"]), f"<= {NEAR_TARGET:.2f}x",
                        near <= NEAR_TARGET)]
    recall = min(r["dropped"]["near"], r["planted"]) / r["planted"]
    leak = r["leakage"]
    rows += [
        Figure("planted copies dropped: exact / near", f"{r['dropped']['exact']:,} / {r['dropped']['near']:,} of "
               f"{r['planted']:,}"),
        Figure("near: recall of the planted copies", f"{recall:.3f}", ">= 0.95", recall >= 0.95),
        Figure("near: drops beyond the planted copies", f"{max(0, r['dropped']['near'] - r['planted']):,}", "0",
               r["dropped"]["near"] <= r["planted"]),
        Figure(f"validation {SHINGLE}-token shingles in training: planted off / near / no copies",
               f"{leak['planted, dedup off']:.3f} / {leak['planted, dedup near']:.3f} / "
               f"{leak['without the copies, dedup off']:.3f}", "near <= no copies + 0.01",
               leak["planted, dedup near"] <= leak["without the copies, dedup off"] + 0.01),
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="512 KB of pydocs and 600 generated documents, one timed build each (CI)")
    docs.add_arguments(parser, "dedup")
    args = parser.parse_args()
    result = run(args.quick)
    for figure in figures(result):
        print(f"{figure.name:<70}{figure.value:>24}  {figure.target}")
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.dedup")


if __name__ == "__main__":
    main()
