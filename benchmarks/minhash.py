"""MinHash near duplicates: mlmprep's Numba signatures and LSH clusters against datatrove's MinHash, with the
same word 5-gram shingles and the same 24 x 5 = 120 hashes, side by side in one run.

    python -m benchmarks.minhash            # kjv.txt and pydocs.txt whole, 20,000 generated documents
    python -m benchmarks.minhash --quick    # 1 MB of each corpus, 4,000 generated documents

Documents: the paragraphs (blank-line separated) of the shared corpora, and a generated corpus with planted near
copies (tests/near_duplicates.py: half the copies 1 to 3 word edits from their source, half 10 to 25) whose
ground truth is known. Throughput: the signatures of every document, mlmprep on one thread and on all, and
datatrove's get_shingles + get_signature per document (its stage 1 without the disk writes; words split at
whitespace and no lowercasing or punctuation removal, so both hash the same shingles; its default 64-bit
hashes), timed in turn, best of a few. Target: mlmprep >= 2x datatrove on one thread.
Duplicates: the documents each one drops, mlmprep (signatures and near_duplicate_clusters at 0.8) and datatrove's
stages 1 to 3 run for real into a temporary folder (its buckets join any pair with an equal band, unchecked), with
24 x 5 and with its own 14 x 8 bands; recall and precision against the planted truth, and against brute-force
Jaccard of every pair on small samples (target >= 0.95 each for mlmprep; reported, not judged, where copies of 1
to 10 edits put many near the threshold). Clustering: the time and the peak memory near_duplicate_clusters adds,
per million documents, on synthetic signatures (10% near copies), measured in a child process.
--write-docs writes the figures into the `minhash` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each
from mlmprep.builder import dedup
from tests.near_duplicates import brute_force_duplicates, planted_corpus, planted_duplicates, recall_precision

TARGET_SPEEDUP = 2.0
TARGET_ACCURACY = 0.95
TOOLS = ("mlmprep", "datatrove", "datatrove 14x8")


def paragraphs(name: str, limit: int | None) -> list[str] | None:
    """The paragraphs of the first `limit` bytes of a shared corpus (all of it: None); None if it is absent."""
    path = CORPORA / name
    if not path.is_file():
        print(f"notice: {path} is absent; skipped")
        return None
    with open(path, encoding="utf-8") as f:
        text = f.read(limit) if limit else f.read()
    return [p for p in text.split("\n\n") if p.strip()]


# ---------------------------------------------------------------------------- datatrove, for comparison


def datatrove_step(folder: Path, bands: int = dedup.BANDS, rows: int = dedup.ROWS):
    """datatrove's stage 1 with mlmprep's shingles: whitespace words, no other normalisation; bands x rows hashes."""
    import xxhash
    from datatrove.pipeline.dedup.minhash import MinhashConfig, MinhashDedupSignature
    from datatrove.utils.logging import logger
    from datatrove.utils.text import TextNormConfig
    from datatrove.utils.word_tokenizers import WordTokenizer

    class Whitespace(WordTokenizer):
        def word_tokenize(self, text: str) -> list[str]:
            return text.split()

        def sent_tokenize(self, text: str) -> list[str]:
            return [text]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [(0, len(text))]

    logger.remove()  # its per-stage log lines
    norm = TextNormConfig(lowercase=False, remove_punctuation=False, norm_unicode_diacritics=False,
                          norm_numbers=False)
    config = MinhashConfig(n_grams=dedup.NGRAM, num_buckets=bands, hashes_per_bucket=rows, norm_config=norm)
    step = MinhashDedupSignature(output_folder=str(folder / "signatures"), config=config, language=Whitespace())
    # its shingle hash, xxh64 of the n-gram's text: xxhash < 4 (its pin) encodes a str as UTF-8, 4 wants bytes
    step._hash_func = lambda text: xxhash.xxh64_intdigest(text.encode("utf-8"))
    return step


def datatrove_signatures(step, texts: list[str]) -> None:
    for text in texts:
        shingles_ = step.get_shingles(text)
        if shingles_.size:
            step.get_signature(shingles_)


def datatrove_duplicates(texts: list[str], bands: int, rows: int) -> tuple[np.ndarray, float]:
    """(bool [n]: the documents datatrove's stages 1 to 3 drop with bands x rows hashes, seconds they took)."""
    from datatrove.data import Document
    from datatrove.pipeline.dedup import minhash
    from datatrove.pipeline.dedup.minhash import MinhashDedupBuckets, MinhashDedupCluster

    minhash.tqdm = lambda iterable, **_: iterable  # its progress bar

    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-datatrove-") as tmp:
        tmp = Path(tmp)
        step = datatrove_step(tmp, bands, rows)
        started = time.perf_counter()
        step.run((Document(text=t, id=str(i)) for i, t in enumerate(texts)), rank=0, world_size=1)
        for bucket in range(bands):
            MinhashDedupBuckets(input_folder=str(tmp / "signatures"), output_folder=str(tmp / "buckets"),
                                config=step.config).run(rank=bucket, world_size=bands)
        MinhashDedupCluster(input_folder=str(tmp / "buckets"), output_folder=str(tmp / "remove"),
                            config=step.config).run()
        seconds = time.perf_counter() - started
        removed = tmp / "remove" / "000000.remove"
        ids = np.frombuffer(removed.read_bytes(), dtype="<u4") if removed.exists() else np.zeros(0, np.uint32)
    dropped = np.zeros(len(texts), dtype=bool)
    dropped[ids.astype(np.int64)] = True
    return dropped, seconds


# ---------------------------------------------------------------------------- mlmprep


def mlmprep_signatures(texts: list[str]) -> np.ndarray:
    return dedup.minhash_signatures(texts, ngram=dedup.NGRAM, num_hashes=dedup.NUM_HASHES, seed=0)


def mlmprep_duplicates(texts: list[str]) -> tuple[np.ndarray, float]:
    """(bool [n]: the documents mlmprep's near dedup drops, seconds it took)."""
    started = time.perf_counter()
    reps = dedup.near_duplicate_clusters(mlmprep_signatures(texts), bands=dedup.BANDS, rows=dedup.ROWS,
                                         threshold=dedup.THRESHOLD)
    return reps != np.arange(len(texts)), time.perf_counter() - started


def throughput(texts: list[str], repeats: int) -> dict:
    """Signature seconds of mlmprep (1 thread, all threads) and datatrove, timed in turn."""
    threads = numba.config.NUMBA_NUM_THREADS
    before = numba.get_num_threads()

    def ours(t: int):
        def once():
            numba.set_num_threads(t)
            mlmprep_signatures(texts)
        return once

    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-datatrove-") as tmp:
        step = datatrove_step(Path(tmp))
        try:
            seconds = best_of_each({"mlmprep_1": ours(1), f"mlmprep_{threads}": ours(threads),
                                    "datatrove": lambda: datatrove_signatures(step, texts)}, repeats)
        finally:
            numba.set_num_threads(before)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    return {"docs": len(texts), "mb": mb, "threads": threads, "seconds": seconds}


def accuracy(texts: list[str], truth: np.ndarray) -> dict:
    """Documents each drops, in how many seconds, with recall and precision against the truth: mlmprep, datatrove
    with the same 24 x 5 hashes, and datatrove with its own 14 x 8 (a steeper S-curve, as it checks no estimate)."""
    found = {"mlmprep": mlmprep_duplicates(texts), "datatrove": datatrove_duplicates(texts, dedup.BANDS, dedup.ROWS),
             "datatrove 14x8": datatrove_duplicates(texts, 14, 8)}
    return {"docs": len(texts), "true": int(truth.sum()),
            **{tool: {"dropped": int(dropped.sum()), "seconds": seconds, "rp": recall_precision(dropped, truth)}
               for tool, (dropped, seconds) in found.items()}}


def brute_force(texts: list[str]) -> np.ndarray:
    return brute_force_duplicates(texts, dedup.NGRAM, dedup.THRESHOLD)


MAKE_SIGNATURES = """
import sys
import numpy as np
from mlmprep.builder import dedup
n = int(sys.argv[1])
rng = np.random.default_rng(0)
sig = rng.integers(0, 2**32, size=(n, dedup.NUM_HASHES), dtype=np.uint32)
copies, at = rng.integers(n, size=n // 10), rng.integers(n, size=n // 10)
sig[at] = np.where(rng.random((n // 10, dedup.NUM_HASHES)) < 0.1, sig[copies] + 1, sig[copies])
np.save(sys.argv[2], sig)
"""

CLUSTER = """
import json, sys, time
import numpy as np
from mlmprep.builder import dedup


def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(field))


sig = np.load(sys.argv[1])
dedup.near_duplicate_clusters(sig[:1000], bands=dedup.BANDS, rows=dedup.ROWS, threshold=dedup.THRESHOLD)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak RSS (VmHWM) starts again from the current RSS
before = status("VmRSS:")
started = time.perf_counter()
reps = dedup.near_duplicate_clusters(sig, bands=dedup.BANDS, rows=dedup.ROWS, threshold=dedup.THRESHOLD)
seconds = time.perf_counter() - started
print(json.dumps({"seconds": seconds, "added_mb": status("VmHWM:") - before, "signatures_mb": sig.nbytes / 2**20,
                  "dropped": int((reps != np.arange(len(sig))).sum())}))
"""


def clustering(n: int) -> dict:
    """near_duplicate_clusters on n synthetic signatures (10% near copies of others) in a fresh process that
    holds nothing else: seconds, and the peak RSS it adds to that of the loaded signatures (MB; Linux)."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-minhash-") as tmp:
        path = str(Path(tmp) / "signatures.npy")
        subprocess.run([sys.executable, "-c", MAKE_SIGNATURES, str(n), path], check=True, cwd=root)
        out = subprocess.run([sys.executable, "-c", CLUSTER, path], check=True, capture_output=True, text=True,
                             cwd=root)
    return {"docs": n, **json.loads(out.stdout)}


# ---------------------------------------------------------------------------- the run


def run(quick: bool = False) -> dict:
    limit = 1 << 20 if quick else None
    corpora = {name: paragraphs(name, limit) for name in ("kjv.txt", "pydocs.txt")}
    generated, _, near = planted_corpus(seed=0, bases=2_000 if quick else 10_000, copies=2_000 if quick else 10_000)
    corpora["generated"] = generated
    result: dict = {"quick": quick, "throughput": {}, "found": {}}
    for name, texts in corpora.items():
        if texts is not None:
            result["throughput"][name] = throughput(texts, repeats=2 if quick else 3)
    result["found"]["generated, planted truth"] = accuracy(generated, planted_duplicates(near))
    small, _, _ = planted_corpus(seed=1, bases=150, copies=250)
    result["found"]["generated sample, brute force"] = accuracy(small, brute_force(small))
    border, _, _ = planted_corpus(seed=2, bases=150, copies=250, near_edits=(1, 10))
    result["found"]["near copies 1-10 edits, brute force"] = accuracy(border, brute_force(border))
    for name in ("kjv.txt", "pydocs.txt"):
        if corpora[name] is not None:
            sample = corpora[name][: 1_500 if quick else 4_000]
            result["found"][f"{name} sample, brute force"] = accuracy(sample, brute_force(sample))
    result["clustering"] = clustering(200_000 if quick else 1_000_000)
    print_tables(result)
    return result


def speedup(t: dict, threads: str = "1") -> float:
    return t["seconds"]["datatrove"] / t["seconds"][f"mlmprep_{threads}"]


def print_tables(r: dict) -> None:
    print(f"\nMinHash signatures, {dedup.NGRAM}-gram shingles, {dedup.NUM_HASHES} hashes")
    print(f"{'corpus':<14}{'docs':>8}{'MB':>7}{'mlmprep 1t MB/s':>17}{'all threads':>13}{'datatrove MB/s':>16}"
          f"{'1t speed-up':>13}")
    for name, t in r["throughput"].items():
        s, all_threads = t["seconds"], f"mlmprep_{t['threads']}"
        print(f"{name:<14}{t['docs']:>8,}{t['mb']:>7.1f}{t['mb'] / s['mlmprep_1']:>17.1f}"
              f"{t['mb'] / s[all_threads]:>13.1f}{t['mb'] / s['datatrove']:>16.2f}{speedup(t):>12.1f}x")
    print(f"\nnear duplicates at Jaccard {dedup.THRESHOLD} ({dedup.BANDS} bands x {dedup.ROWS} rows)")
    print(f"{'corpus':<36}{'docs':>7}{'true':>6}" + "".join(f"{tool:>15}{'recall':>8}{'prec.':>7}{'s':>7}"
                                                           for tool in TOOLS))
    for name, f in r["found"].items():
        print(f"{name:<36}{f['docs']:>7,}{f['true']:>6,}" + "".join(
            f"{f[t]['dropped']:>15,}{f[t]['rp'][0]:>8.3f}{f[t]['rp'][1]:>7.3f}{f[t]['seconds']:>7.2f}" for t in TOOLS))
    c = r["clustering"]
    print(f"\nclustering {c['docs']:,} synthetic signatures ({c['signatures_mb']:.0f} MB): {c['seconds']:.2f} s, "
          f"peak RSS +{c['added_mb']:.0f} MB, {c['dropped']:,} dropped")


def figures(r: dict) -> list[Figure]:
    out = []
    for name, t in r["throughput"].items():
        all_threads = f"mlmprep_{t['threads']}"
        out.append(Figure(f"{name}: signatures, mlmprep 1 thread / datatrove", f"{speedup(t):.1f}x",
                          f">= {TARGET_SPEEDUP:g}x", speedup(t) >= TARGET_SPEEDUP))
        out.append(Figure(f"{name}: mlmprep MB/s, 1 / {t['threads']} threads",
                          f"{t['mb'] / t['seconds']['mlmprep_1']:.0f} / "
                          f"{t['mb'] / t['seconds'][all_threads]:.0f}"))
    for name, f in r["found"].items():
        for tool in TOOLS:
            recall, precision = f[tool]["rp"]
            if f["true"]:
                value = f"{recall:.3f} / {precision:.3f}"
            else:  # recall has nothing to measure
                value = f"none to find, {f[tool]['dropped']} dropped"
            judged = tool == "mlmprep" and f["true"] > 0 and not name.startswith("near copies")
            out.append(Figure(f"{name}: {tool} recall / precision", value, f">= {TARGET_ACCURACY}" if judged else "",
                              min(recall, precision) >= TARGET_ACCURACY if judged else None))
    c = r["clustering"]
    per_million = 1e6 / c["docs"]
    out.append(Figure("clustering: seconds per million documents", f"{c['seconds'] * per_million:.1f}"))
    out.append(Figure("clustering: memory added per million documents",
                      f"{c['added_mb'] * per_million:.0f} MB (+ {c['signatures_mb'] * per_million:.0f} MB signatures)"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 MB of each corpus, 4,000 generated documents")
    docs.add_arguments(parser, "minhash")
    args = parser.parse_args()
    result = run(args.quick)
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.minhash")


if __name__ == "__main__":
    main()
