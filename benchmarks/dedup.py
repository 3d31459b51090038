"""Dedup in the build: what `--dedup exact` and `--dedup near` cost a build, what they find, and whether the
validation split still overlaps training.

    python -m benchmarks.dedup            # pydocs.txt, and a generated corpus with planted duplicates
    python -m benchmarks.dedup --quick    # small corpora, for CI (seconds)
    python -m benchmarks.dedup --scale-mb 1000 [--tokenizer tokenizer.json] [--partitions 16]   # at 1000 and 100 MB

Side by side in one run (builds in turn, off/exact/near, the best of a few each, one tokenizer given with
--tokenizer so its training is not timed): the build time of each on the shared corpus and on the planted one.
The planted corpus is distinct generated documents followed by exact copies (re-spaced) and near copies (a
word changed, a few added) of some of them: its ground truth is the copies, so dedup's recall is the share of
them dropped and a drop beyond them is a false positive. Leakage: the share of the validation windows'
32-token shingles that also occur in the training windows, on the planted corpus with dedup off and near, and on
the same corpus without its copies (the level a duplicate-free corpus has).
The MinHash kernels against datatrove's are measured apart, by the kernels' own benchmark.
--scale-mb N: a generated corpus of N MB and one of N/10 MB (numpy, seconds; a tenth of the documents exact copies
and a twentieth near copies of earlier ones), each built with --dedup exact and near, in the driver and in
--partitions partitions (--dedup-partitions), each in a child process in turn; the wall and CPU time, the peak
memory (VmHWM) of the driver and of the largest worker, and the partitions' scratch disk at its most (dedup's and
decontamination's staged files): the figure "peak at N / at N/10" says whether memory grows with the corpus, and the
driver's growth per million documents is what dedup and decontamination (on by default, also in partition tasks:
mlmprep.builder.contamination) hold there (the rest of a build streams); --no-decontaminate leaves dedup's alone.
--write-docs writes the figures into the `dedup` section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, best_of_each, print_figures, ratio

EXACT_TARGET = 1.05  # build time with --dedup exact / with --dedup off
NEAR_TARGET = 1.30  # with --dedup near / off
SHINGLE = 32  # tokens per shingle of the leakage figure
SCRATCH = (".dedup", ".sig", ".hashes", ".fates")  # the partition tasks' staged files
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

    # decontamination off: it would move the leaked validation documents too, and the figures are dedup's alone
    return BuildConfig(corpus=(str(corpus),), tokenizer=str(tokenizer), out=str(out), dedup=dedup, force=True,
                       input_length=128, seeds=1, validation_fraction=fraction, decontaminate=False)


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
    from mlmprep.builder.run import build
    from mlmprep.tokenizer.train import train_tokenizer

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


SCALE_VOCAB = 30000  # distinct words of a generated corpus, drawn with a skew toward the common ones
SCALE_CHUNK = 8 << 20  # bytes generated at a time


def scale_corpus(path: Path, megabytes: float, seed: int = 0) -> dict:
    """Write about `megabytes` MB of generated documents, one per line, to `path` with numpy (no Python loop per
    word): 40 to 700 words each from a skewed vocabulary of SCALE_VOCAB made-up words, a tenth of them exact copies
    and a twentieth near copies (a word changed, three added) of a document of the same or the previous chunk."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 11, SCALE_VOCAB)
    # word id k spelt in row k (followed by a space) and row k + SCALE_VOCAB (by a newline), 0-padded to 11 bytes
    table = np.where(np.arange(11) < lengths[:, None], rng.integers(97, 123, (SCALE_VOCAB, 11)), 0).astype(np.uint8)
    table = np.concatenate([table, table])
    table[np.arange(2 * SCALE_VOCAB), np.concatenate([lengths, lengths])] = [32] * SCALE_VOCAB + [10] * SCALE_VOCAB
    total, documents, copies, near = 0, 0, 0, 0
    previous: list[np.ndarray] = []
    with open(path, "wb") as out:
        while total < megabytes * 1e6:
            count = max(1, int(min(SCALE_CHUNK, megabytes * 1e6 - total) / 2600))  # about 2.6 KB a document
            cuts = np.cumsum(rng.integers(40, 701, count))
            ids = (SCALE_VOCAB * rng.random(cuts[-1]) ** 3).astype(np.int64)
            docs = np.split(ids, cuts[:-1])
            pool = previous + docs
            kinds = rng.random(count)
            for d in np.flatnonzero(kinds < 0.15):  # a copy of a document before it
                source = pool[rng.integers(0, len(previous) + d)] if len(previous) + d else None
                if source is None:
                    continue
                if kinds[d] < 0.10:
                    docs[d], copies = source, copies + 1
                else:
                    changed = source.copy()
                    changed[rng.integers(0, len(changed))] = rng.integers(0, SCALE_VOCAB)
                    docs[d], near = np.concatenate([changed, rng.integers(0, SCALE_VOCAB, 3)]), near + 1
                pool[len(previous) + d] = docs[d]  # what a later copy copies is what the file holds
            ids = np.concatenate(docs)
            ids[np.cumsum([len(d) for d in docs]) - 1] += SCALE_VOCAB  # each document's last word ends its line
            data = table[ids]
            data = data[data != 0]
            out.write(data.tobytes())
            total, documents, previous = total + len(data), documents + count, docs
            print(f"  generated {total / 1e6:,.0f} of {megabytes:,.0f} MB, {documents:,} documents", file=sys.stderr,
                  flush=True)
    return {"bytes": total, "documents": documents, "exact_copies": copies, "near_copies": near}


BUILD_CHILD = """
import json, resource, sys
from mlmprep.builder.run import build
from mlmprep.config import BuildConfig
cfg = BuildConfig(**json.loads(sys.argv[1]))
manifest = build(cfg, log=lambda line: print(line, file=sys.stderr, flush=True)).manifest
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"driver_kb": hwm, "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "dedup": manifest.corpus.stats["dedup"]}))
"""


def measured_build(options: dict) -> dict:
    """Build in a child process: its wall time, the CPU time of it and its descendants (each as last sampled, every
    0.5 s), the driver's peak memory (VmHWM), the largest worker's (VmHWM, sampled from /proc, and the reaped
    children's ru_maxrss), the most scratch disk the partitions' staged files took at a sample, and what dedup
    dropped."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", BUILD_CHILD, json.dumps(options)], stdout=subprocess.PIPE)
    stage = Path(options["out"]).parent / f".{Path(options['out']).name}.partial" / "shards"
    workers_kb, scratch, cpu = 0, 0, {}
    while True:
        pid, status = os.waitpid(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            driver = psutil.Process(proc.pid)
            children = driver.children(recursive=True)
        except psutil.Error:
            driver, children = None, []
        for child in [driver, *children] if driver else []:
            try:
                times = child.cpu_times()
                cpu[child.pid] = times.user + times.system
            except psutil.Error:
                pass
            if child is driver:  # its own peak is the driver's figure (VmHWM, read by the build's process)
                continue
            try:
                with open(f"/proc/{child.pid}/status") as status_file:
                    workers_kb = max(workers_kb, next(int(line.split()[1]) for line in status_file
                                                     if line.startswith("VmHWM:")))
            except (OSError, StopIteration):  # ended while being read
                pass
        try:
            scratch = max(scratch, sum(p.stat().st_size for p in stage.iterdir() if p.suffix in SCRATCH))
        except OSError:  # no stage yet, or a file removed while listed
            pass
        time.sleep(0.5)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read()
    if proc.returncode:
        raise RuntimeError(f"the build failed (exit {proc.returncode}): {options}")
    child = json.loads(out.decode().strip().splitlines()[-1])
    dedup = child["dedup"]
    return {"seconds": time.perf_counter() - start, "cpu_s": sum(cpu.values()),
            "driver_mb": child["driver_kb"] / 1024, "workers_mb": max(workers_kb, child["children_kb"]) / 1024,
            "scratch_mb": scratch / 1e6, "documents": dedup["documents"], "dropped": dedup["documents_dropped"]}


def run_scale(megabytes: float, tokenizer: str | None, workers: int, partitions: int,
              decontaminate: bool = True) -> dict:
    """The scale mode (see the module docstring): corpora of `megabytes` and a tenth of it, exact and near, each in
    the driver and in `partitions` partitions, in turn (without `decontaminate`: the figures dedup's alone)."""
    from mlmprep.tokenizer.train import train_tokenizer

    result = {"scale_mb": megabytes, "partitions": partitions, "decontaminate": decontaminate, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-dedup-scale-") as tmp:
        work = Path(tmp)
        for size in (megabytes / 10, megabytes):
            corpus = work / f"corpus-{size:g}mb.txt"
            started = time.perf_counter()
            made = scale_corpus(corpus, size)
            print(f"{corpus.name}: {made['bytes'] / 1e6:,.0f} MB, {made['documents']:,} documents in "
                  f"{time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
            if tokenizer is None:
                with open(corpus, encoding="utf-8") as lines:
                    sample = [line for line, _ in zip(lines, range(3000))]
                tokenizer = str(work / "tokenizer.json")
                train_tokenizer(sample, vocab_size=8000).save(tokenizer)
            for dedup in ("exact", "near"):
                for parts in (0, partitions):
                    options = {"corpus": [str(corpus)], "tokenizer": tokenizer, "out": str(work / f"out-{dedup}"),
                               "dedup": dedup, "force": True, "input_length": 128, "seeds": 1, "workers": workers,
                               "dedup_partitions": parts, "decontaminate": decontaminate}
                    print(f"building {corpus.name} with --dedup {dedup} --dedup-partitions {parts} ...",
                          file=sys.stderr, flush=True)
                    run = {**measured_build(options), **made}
                    result["runs"][f"{size:g} MB, {dedup}, {parts}"] = run
                    print(json.dumps(run), file=sys.stderr, flush=True)
            corpus.unlink()
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))
    return result


def scale_figures(r: dict) -> list[Figure]:
    """Each mode in the driver and in partitions side by side: time, peaks at both sizes, the driver's growth per
    million documents against the targets, the scratch disk per million documents."""
    big, small, parts = r["scale_mb"], r["scale_mb"] / 10, r["partitions"]
    targets = {"exact": 50, "near": 100}  # MB of driver growth per million documents, in partitions
    rows = [Figure("decontamination (the default)", "on" if r.get("decontaminate", True) else "off")]
    peak = lambda a, b, key: f"{a[key]:,.0f} / {b[key]:,.0f} MB ({a[key] / b[key]:.2f}x)"  # noqa: E731
    per_million = lambda a, b, key: (a[key] - b[key]) / (a["documents"] - b["documents"]) * 1e6  # noqa: E731
    for dedup in ("exact", "near"):
        (d, ds), (p, ps) = ((r["runs"][f"{big:g} MB, {dedup}, {n}"], r["runs"][f"{small:g} MB, {dedup}, {n}"])
                            for n in (0, parts))
        growth = per_million(p, ps, "driver_mb")
        rows += [Figure(f"{dedup}: documents / dropped at {big:g} MB (driver, partitions)",
                        f"{d['documents']:,} / {d['dropped']:,}, {p['documents']:,} / {p['dropped']:,}",
                        "the same", (d["documents"], d["dropped"]) == (p["documents"], p["dropped"])),
                 Figure(f"{dedup}: build wall time at {big:g} MB, {parts} partitions / driver",
                        f"{p['seconds']:.1f} / {d['seconds']:.1f} s ({ratio(p['seconds'], d['seconds'])})",
                        "<= 1.10x", p["seconds"] <= 1.10 * d["seconds"]),
                 Figure(f"{dedup}: build CPU time at {big:g} MB, {parts} partitions / driver",
                        f"{p['cpu_s']:.1f} / {d['cpu_s']:.1f} s ({ratio(p['cpu_s'], d['cpu_s'])})"),
                 Figure(f"{dedup}: driver peak at {big:g} / {small:g} MB, driver", peak(d, ds, "driver_mb")),
                 Figure(f"{dedup}: driver peak at {big:g} / {small:g} MB, partitions", peak(p, ps, "driver_mb")),
                 Figure(f"{dedup}: largest worker's peak at {big:g} / {small:g} MB, partitions",
                        peak(p, ps, "workers_mb")),
                 Figure(f"{dedup}: driver's growth per million documents, driver / partitions",
                        f"{per_million(d, ds, 'driver_mb'):,.0f} / {growth:,.0f} MB",
                        f"partitions <= {targets[dedup]} MB", growth <= targets[dedup]),
                 Figure(f"{dedup}: scratch disk per million documents, partitions",
                        f"{p['scratch_mb'] / p['documents'] * 1e6:,.0f} MB")]
    return rows + [Figure("load average at the end", f"{r['load']:.1f}")]


def simulate(documents: int, partitions: int, shard_documents: int = 100_000) -> dict:
    """--dedup near in partitions over `documents` generated documents, without their text: each shard's signatures
    drawn at random, a tenth of them exact copies and a twentieth near copies (12 of the 120 entries redrawn:
    estimated Jaccard 0.9) of a document of the previous shard; staged, run partition by partition in this
    process and joined as a build does. CPU time of each stage, each partition task's peak (tracemalloc), the
    driver's links, the scratch disk, and whether exactly the copies are dropped."""
    import tracemalloc

    from mlmprep.builder import dedup_partitions as dp
    from mlmprep.builder.staged import STAGING, Layout
    from mlmprep.config import BuildConfig

    cfg = BuildConfig(corpus=("generated",), dedup="near", dedup_partitions=partitions)
    hashes = cfg.dedup_bands * cfg.dedup_rows
    rng = np.random.default_rng(0)
    result = {"documents": documents, "partitions": partitions, "copies": 0}
    with tempfile.TemporaryDirectory(prefix="mlmprep-bench-dedup-sim-") as tmp:
        (Path(tmp) / STAGING).mkdir()
        layout = Layout(cfg, tmp, 1, content_length=126, window_length=128, doc_eos=None, format_version=1)
        bases, previous = [0], None
        started = time.process_time()
        while bases[-1] < documents:
            n = min(shard_documents, documents - bases[-1])
            sig = rng.integers(0, 1 << 32, (n, hashes), dtype=np.uint32)
            keys = rng.integers(0, 1 << 63, n, dtype=np.uint64)
            if previous is not None:
                kinds = rng.random(n)
                copies = np.flatnonzero(kinds < 0.15)
                sig[copies] = previous[rng.integers(0, len(previous), len(copies))]
                near = copies[kinds[copies] >= 0.10]
                redrawn = rng.random((len(near), hashes)).argsort(axis=1)[:, :12]
                sig[near[:, None], redrawn] = rng.integers(0, 1 << 32, redrawn.shape, dtype=np.uint32)
                result["copies"] += len(copies)
            dp.stage_keys(layout, len(bases) - 1, {"keys": keys, "signatures": sig})
            bases.append(bases[-1] + n)
            previous = sig
            print(f"  staged {bases[-1]:,} of {documents:,} documents", file=sys.stderr, flush=True)
        result["stage_cpu_s"] = time.process_time() - started
        result["scratch_mb"] = sum(p.stat().st_size for p in (Path(tmp) / STAGING).iterdir()) / 1e6
        tracemalloc.start()
        peaks, cpu = [], [0.0]

        def tasks():
            for p in range(partitions):
                before, at = tracemalloc.get_traced_memory()[0], time.process_time()
                tracemalloc.reset_peak()
                links = dp.partition_links(dp.PartitionTask(layout, p, tuple(bases)))
                peaks.append(tracemalloc.get_traced_memory()[1] - before)
                cpu[0] += time.process_time() - at
                yield links

        at = time.process_time()
        held = dp.joined_links(tasks())
        join_at = time.process_time()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kept_documents, first, _ = dp.join(held)
        result["join_peak_mb"] = (tracemalloc.get_traced_memory()[1] - before + held.nbytes) / 1e6
        tracemalloc.stop()
        result.update(partition_cpu_s=cpu[0], join_cpu_s=time.process_time() - join_at + (join_at - at - cpu[0]),
                      largest_task_mb=max(peaks) / 1e6, links=held.shape[1], links_mb=held.nbytes / 1e6,
                      dropped=int(np.count_nonzero(kept_documents != first)), load=os.getloadavg()[0])
    print(json.dumps(result, indent=1))
    return result


def simulated_figures(r: dict) -> list[Figure]:
    per_million = 1e6 / r["documents"]
    return [Figure("simulated near dedup: documents / partitions", f"{r['documents']:,} / {r['partitions']}"),
            Figure("dropped / planted copies", f"{r['dropped']:,} / {r['copies']:,}", "equal",
                   r["dropped"] == r["copies"]),
            Figure("CPU: staging (the reading tasks' share) / partition tasks / the driver's join",
                   f"{r['stage_cpu_s']:.1f} / {r['partition_cpu_s']:.1f} / {r['join_cpu_s']:.1f} s"),
            Figure("scratch disk in all, per million documents",
                   f"{r['scratch_mb']:,.0f} MB, {r['scratch_mb'] * per_million:,.0f} MB"),
            Figure("largest partition task's peak", f"{r['largest_task_mb']:,.0f} MB"),
            Figure("driver: links held / the join's peak, per million documents",
                   f"{r['links_mb'] * per_million:,.1f} / {r['join_peak_mb'] * per_million:,.1f} MB"),
            Figure("load average at the end", f"{r['load']:.1f}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="512 KB of pydocs and 600 generated documents, one timed build each (CI)")
    parser.add_argument("--scale-mb", type=float, metavar="N",
                        help="instead: build generated corpora of N MB and N/10 MB (exact, near) and report wall time "
                             "and peak memory of driver and workers")
    parser.add_argument("--tokenizer", help="with --scale-mb: the tokenizer to build with (else one trained on the "
                                            "first 3,000 documents)")
    parser.add_argument("--workers", type=int, default=0, help="with --scale-mb: build processes (0: all cores)")
    parser.add_argument("--partitions", type=int, default=16, help="with --scale-mb or --simulate-documents: "
                                                                   "--dedup-partitions")
    parser.add_argument("--no-decontaminate", action="store_true",
                        help="with --scale-mb: build without decontamination (on by default), so that the driver's "
                             "memory is dedup's alone")
    parser.add_argument("--simulate-documents", type=int, metavar="N",
                        help="instead: near dedup in --partitions partitions of N documents of generated signatures, "
                             "without their text (memory, CPU time and disk of the dedup alone)")
    docs.add_arguments(parser, "dedup")
    args = parser.parse_args()
    if args.simulate_documents:
        print_figures(simulated_figures(simulate(args.simulate_documents, args.partitions)))
        return
    if args.scale_mb:
        print_figures(scale_figures(run_scale(args.scale_mb, args.tokenizer, args.workers, args.partitions,
                                              not args.no_decontaminate)))
        return
    result = run(args.quick)
    print_figures(figures(result))
    if args.write_docs:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.dedup")


if __name__ == "__main__":
    main()
