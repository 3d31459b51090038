"""End-to-end `mlmprep build --seeds 4` against tokenizing the same corpus alone, at several corpus sizes.

    python -m benchmarks.build                 # pydocs.txt at 1x and 4x
    python -m benchmarks.build --scales 1,4,16 # the scale run (16x pydocs is about 177 MB)
    python -m benchmarks.build --quick         # a 2 MB slice, for CI
    python -m benchmarks.build --workers 1,2   # builds with 1 and 2 worker processes: the scaling table
    python -m benchmarks.build --workers 1,2,4,8,16 --scales 4 --repeats 1   # on a 16-core machine
    python -m benchmarks.build --compression gz,zst   # compressed copies of the corpus beside the plain build
    python -m benchmarks.build --storage s3    # also from and to a local S3 server, beside the local-disk build

Each run is a child process so its wall time and peak RSS are its own. Both sides use the same tokenizer
(trained once, passed with --tokenizer) and all cores, and start as an installed copy does: with mlmprep's
bytecode written and the Numba cache warm (both paid once, before the timed runs). They run in turn, a
tokenize-only run and then a build, several times; each pair's ratio compares runs taken back to back, and the
ratio reported is the median of the pairs' (the best time of each side is printed too). The CPU time of each side
(every process and thread of it) is compared the same way, with the machine's load average: on cores shared with
other jobs the wall-time ratio moves toward the CPU-time ratio. Also measured: the
output's size (bytes on disk per corpus byte), the Numba compile a first build pays and a second does not,
whether --threads 1 and --threads 2 give identical bytes, and how fast `mlmprep --help`,
`mlmprep build --help` and `mlmprep train --help` answer (the best of a few fresh processes each). With
--workers W1,W2,... every scale is built with each worker count in turn, one core each (--threads 1; the ratio
then compares the largest count with tokenize-only on all cores), and a scaling table gives each count's
throughput in corpus tokens per second and its speed-up over the first count. Peak RSS is the whole process
tree's (the driver and its workers summed), sampled every 20 ms.

With --compression gz,zst,... the corpus is also built from compressed copies (.txt.gz, .txt.zst, ...) on 2
workers, timed in turn with the plain .txt on 2 workers (same bytes out, checked), and as one .jsonl.gz file of
JSON records on 1 and 2 workers, beside the plain .jsonl: a compressed file is read by one reader per part, each
decompressing from its start, and this shows what that costs and whether both workers stay busy.
With --storage s3 the first scale is also built from and to moto's S3 server on loopback (corpus, tokenizer and
--out as s3:// URLs), in turn with the same build on local disk: the time ratio and whether the bytes are equal.

--write-docs writes the figures into the `build` section of docs/benchmarks.md (--section names another).
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import json
import lzma
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

from benchmarks import docs
from benchmarks.common import CORPORA, Figure, compile_bytecode, ratio, timed

RATIO_TARGET = 1.3  # build time / tokenize-only time, on the whole corpus
STORAGE_TARGET = 1.25  # build time from and to S3 / the same build on local disk
SPEED_UP_TARGETS = {2: 1.8, 16: 10.0}  # from 1 worker to this many, on a machine with as many cores
OUTPUT_TARGET = 3.1  # bytes of a --seeds 4 build per corpus byte: 0.55x the 5.7 of int32 columns (pydocs, 32 k vocab)
HELP_TARGETS = {"mlmprep --help": 0.2, "mlmprep build --help": 0.3, "mlmprep train --help": 0.3}  # seconds
COMPRESSED_TARGET = 1.10  # build time from a .txt.gz / .txt.zst / ... over the plain .txt's, 2 workers each
COMPRESSED_SPEED_UP_TARGET = 1.7  # one .jsonl.gz from 1 to 2 workers
CODECS = {  # what a published corpus uses: gzip -6, zstd -3, bzip2 -9, xz -6
    "gz": lambda data: gzip.compress(data, 6, mtime=0),
    "zst": lambda data: zstandard.ZstdCompressor(level=3).compress(data),
    "bz2": bz2.compress,
    "xz": lzma.compress,
}

TOKENIZE_ONLY = """
import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as mlmprep build starts: no BLAS threads spinning
from mlmprep.tokenizer.load import load_tokenizer
tok = load_tokenizer(sys.argv[1])
batch, size = [], 0
with open(sys.argv[2], encoding="utf-8") as f:
    for line in f:
        if line.strip():
            batch.append(line.rstrip("\\n")); size += len(line)
        if size >= 4 << 20:
            tok.encode_batch_fast(batch, add_special_tokens=False); batch, size = [], 0
tok.encode_batch_fast(batch, add_special_tokens=False)
"""


def make_corpus(source: Path, work: Path, scale: int, limit_bytes: int | None) -> Path:
    text = source.read_bytes()[:limit_bytes] if limit_bytes else source.read_bytes()
    path = work / f"corpus-{scale}x.txt"
    with open(path, "wb") as f:
        for _ in range(scale):
            f.write(text)
    return path


def tree_digest(path: Path) -> str:
    """sha256 over every data file of a build (the manifest's timings differ by design)."""
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and p.name != "manifest.json"):
        digest.update(file.relative_to(path).as_posix().encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def tree_bytes(path: Path) -> int:
    """Bytes of every file of a build."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def corpus_tokens(build: Path) -> int:
    """Tokens of the corpus in a build (documents and their EOS, kept in windows or dropped)."""
    windows = json.loads((build / "manifest.json").read_text())["statistics"]["windows"]
    return windows["tokens_kept"] + windows["tokens_dropped"]


def run(quick: bool = False, scales: tuple[int, ...] = (1, 4), corpus: Path | None = None,
        repeats: int | None = None, workers: tuple[int, ...] = (), compression: tuple[str, ...] = (),
        storage: tuple[str, ...] = ()) -> dict:
    source = corpus or CORPORA / "pydocs.txt"
    if not source.is_file():
        print(f"benchmarks.build: {source} is absent; skipped")
        return {}
    limit = 2 << 20 if quick else None
    scales = (1,) if quick else scales
    repeats = repeats or (1 if quick else 5)
    work = Path(tempfile.mkdtemp(prefix="mlmprep-bench-build-"))
    mlmprep = [sys.executable, "-m", "mlmprep"]
    try:
        base = make_corpus(source, work, 1, limit)
        tok = work / "tok.json"
        subprocess.run([*mlmprep, "tokenizer", "train", str(base), "--vocab-size", "8000" if quick else "32000",
                        "--out", str(tok)], check=True, stdout=subprocess.DEVNULL)
        results: dict = {"corpus": source.name, "quick": quick, "repeats": repeats, "workers": list(workers),
                         "runs": [], "scaling": [], "compression": []}
        compile_bytecode()
        warm_up = work / "warm-up.txt"  # compiles or loads the Numba cache untimed; startup() times that part
        warm_up.write_bytes(base.read_bytes()[:200_000])
        subprocess.run([*mlmprep, "build", str(warm_up), "--tokenizer", str(tok), "--out", str(work / "warm-up")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for scale in scales:
            path = make_corpus(source, work, scale, limit)
            out = work / f"out-{scale}x"
            tok_runs, build_runs, by_workers, tokens, out_bytes = [], [], {w: [] for w in workers}, 0, 0
            loads = []  # the machine's load average (1 minute) after each pair: how shared the cores were
            for _ in range(repeats):  # in turn, so drift on a shared machine slows both sides alike
                tok_runs.append(timed([sys.executable, "-c", TOKENIZE_ONLY, str(tok), str(path)]))
                for w in workers or (0,):
                    run_ = timed([*mlmprep, "build", str(path), "--tokenizer", str(tok), "--seeds", "4",
                                  "--out", str(out), *(["--workers", str(w), "--threads", "1"] if w else [])])
                    if w:
                        by_workers[w].append(run_)
                    tokens, out_bytes = corpus_tokens(out), tree_bytes(out)
                    shutil.rmtree(out)
                build_runs.append(by_workers[workers[-1]][-1] if workers else run_)
                loads.append(os.getloadavg()[0])
            for w, runs in by_workers.items():
                best = min(r.wall_s for r in runs)
                results["scaling"].append({"scale": scale, "workers": w, "build_s": best, "tokens_per_s": tokens / best,
                                           "rss_mb": max(r.rss_mb for r in runs)})
            ratios = [b.wall_s / t.wall_s for t, b in zip(tok_runs, build_runs)]
            cpu_ratios = [b.cpu_s / t.cpu_s for t, b in zip(tok_runs, build_runs)]
            results["runs"].append({
                "scale": scale, "mb": path.stat().st_size / 1e6, "tokenize_s": min(r.wall_s for r in tok_runs),
                "build_s": min(r.wall_s for r in build_runs), "ratio": statistics.median(ratios), "ratios": ratios,
                "tokenize_cpu_s": min(r.cpu_s for r in tok_runs), "build_cpu_s": min(r.cpu_s for r in build_runs),
                "cpu_ratio": statistics.median(cpu_ratios), "load": statistics.median(loads),
                "tokenize_rss_mb": max(r.rss_mb for r in tok_runs), "build_rss_mb": max(r.rss_mb for r in build_runs),
                "out_mb": out_bytes / 1e6, "out_per_input": out_bytes / path.stat().st_size,
            })
            if compression:
                results["compression"].append(compressed_runs(work, path, tok, compression, repeats, scale))
            if scale != 1:
                path.unlink()
        results.update(startup(work, base, tok, mlmprep))
        if "s3" in storage:
            results["storage"] = s3_case(work, make_corpus(source, work, scales[0], limit), tok, mlmprep, repeats)
        if "ray" in storage:
            results["ray"] = ray_case(work, make_corpus(source, work, scales[0], limit), tok, mlmprep, repeats)
        print_table(results)
        return results
    finally:
        shutil.rmtree(work, ignore_errors=True)


def compressed_runs(work: Path, path: Path, tok: Path, codecs: tuple[str, ...], repeats: int, scale: int) -> dict:
    """The corpus built from each compressed copy and from the plain file on 2 workers, and one .jsonl.gz of it (one
    record per line) on 1 and 2 workers beside the plain .jsonl; the runs taken in turn, every output compared."""
    data = path.read_bytes()
    files = {"txt": path}
    for codec in codecs:
        files[f"txt.{codec}"] = work / f"c.txt.{codec}"
        files[f"txt.{codec}"].write_bytes(CODECS[codec](data))
    records = b"".join(json.dumps({"text": line}).encode() + b"\n"
                       for line in data.decode("utf-8", "replace").splitlines() if line.strip())
    files["jsonl"] = work / "c.jsonl"
    files["jsonl"].write_bytes(records)
    files["jsonl.gz"] = work / "c.jsonl.gz"
    files["jsonl.gz"].write_bytes(CODECS["gz"](records))
    sizes = {name: file.stat().st_size / 1e6 for name, file in files.items()}
    cases = [(name, 2) for name in files if name.startswith("txt")] + [(n, w) for n in ("jsonl", "jsonl.gz")
                                                                        for w in (1, 2)]
    runs: dict = {case: [] for case in cases}
    digests: dict = {}
    for _ in range(repeats):
        for name, w in cases:
            out = work / "out-compressed"
            runs[(name, w)].append(timed([sys.executable, "-m", "mlmprep", "build", str(files[name]), "--tokenizer",
                                          str(tok), "--seeds", "4", "--out", str(out), "--workers", str(w),
                                          "--threads", "1"]))
            digests[(name, w)] = tree_digest(out)
            shutil.rmtree(out)
    for file in files.values():
        if file != path:
            file.unlink()
    plain = runs[("txt", 2)]
    result = {"scale": scale, "mb": len(data) / 1e6, "codecs": {}, "jsonl": {}}
    for codec in codecs:
        mine = runs[(f"txt.{codec}", 2)]
        result["codecs"][codec] = {
            "mb": sizes[f"txt.{codec}"],
            "build_s": min(r.wall_s for r in mine),
            "ratio": statistics.median(m.wall_s / p.wall_s for m, p in zip(mine, plain)),
            "rss_mb": max(r.rss_mb for r in mine), "identical": digests[(f"txt.{codec}", 2)] == digests[("txt", 2)]}
    for name in ("jsonl", "jsonl.gz"):
        one, two = runs[(name, 1)], runs[(name, 2)]
        result["jsonl"][name] = {"build_1_s": min(r.wall_s for r in one), "build_2_s": min(r.wall_s for r in two),
                                 "speed_up": statistics.median(a.wall_s / b.wall_s for a, b in zip(one, two)),
                                 "identical": digests[(name, 1)] == digests[(name, 2)] == digests[("jsonl", 1)]}
    result["plain_build_s"], result["plain_rss_mb"] = min(r.wall_s for r in plain), max(r.rss_mb for r in plain)
    return result
def s3_case(work: Path, corpus: Path, tok: Path, mlmprep: list[str], repeats: int) -> dict:
    """The build from and to a local S3 server (moto's, on loopback, in this process), in turn with the same
    build on local disk: their times (the median of the pairs' ratios) and whether the data files are equal."""
    from tests.s3server import s3_server

    with s3_server() as server:
        fs, bucket = server.fs(), server.bucket()
        fs.put(str(corpus), f"{bucket}/corpus/{corpus.name}")
        fs.put(str(tok), f"{bucket}/tok.json")
        env = {**os.environ, **server.env}
        args = ["build", "--seeds", "4", "--force"]
        local, remote = [], []
        for _ in range(repeats):
            local.append(timed([*mlmprep, *args, str(corpus), "--tokenizer", str(tok), "--out", str(work / "disk")],
                               env)[0])
            remote.append(timed([*mlmprep, *args, f"s3://{bucket}/corpus/", "--tokenizer", f"s3://{bucket}/tok.json",
                                 "--out", f"s3://{bucket}/out"], env)[0])
        shutil.rmtree(work / "from-s3", ignore_errors=True)
        fs.get(f"{bucket}/out/", str(work / "from-s3") + "/", recursive=True)
        same = tree_digest(work / "disk") == tree_digest(work / "from-s3")
    return {"mb": corpus.stat().st_size / 1e6, "local_s": min(local), "s3_s": min(remote), "same": same,
            "ratio": statistics.median(r / d for d, r in zip(local, remote))}


def ray_case(work: Path, corpus: Path, tok: Path, mlmprep: list[str], repeats: int) -> dict:
    """Builds on a one-node Ray cluster started here (2 CPUs), in turn: on local disk (the stage every node sees),
    from local disk to S3 and from S3 to S3 (moto on loopback; tasks detached: staged token files through Ray's
    object store, output files back to the driver; the S3 corpus read in place by the tasks). Their times (best),
    the medians of the pairs' ratios against the local-disk one, and whether all three built the same bytes."""
    from tests.s3server import s3_server

    home = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    with s3_server() as server:
        fs, bucket = server.fs(), server.bucket()
        fs.put(str(corpus), f"{bucket}/corpus/{corpus.name}")
        # Ray's files (sessions, the cluster's token) under `home`, for the cluster and the builds that join it
        env = {**os.environ, **server.env, "RAY_TMPDIR": str(home), "HOME": str(home), "RAY_AUTH_MODE": "token",
               "RAY_AUTH_TOKEN": secrets.token_hex(32)}
        port = str(6400 + os.getpid() % 1000)
        subprocess.run(["ray", "start", "--head", "--num-cpus", "2", "--port", port, "--node-ip-address", "127.0.0.1",
                        "--disable-usage-stats", "--include-dashboard", "false"], env=env, check=True,
                       capture_output=True)
        try:
            args = ["build", "--seeds", "4", "--force", "--tokenizer", str(tok), "--engine", "ray", "--ray-address",
                    f"127.0.0.1:{port}"]
            cases = {"disk": (str(corpus), str(work / "ray-disk")), "to_s3": (str(corpus), f"s3://{bucket}/to"),
                     "s3": (f"s3://{bucket}/corpus/", f"s3://{bucket}/both")}
            seconds: dict[str, list[float]] = {name: [] for name in cases}
            for _ in range(repeats):
                for name, (source, out) in cases.items():
                    seconds[name].append(timed([*mlmprep, *args, source, "--out", out], env)[0])
        finally:
            subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True)
            shutil.rmtree(home, ignore_errors=True)
        digests = {"disk": tree_digest(work / "ray-disk")}
        for name in ("to_s3", "s3"):
            shutil.rmtree(work / f"ray-{name}", ignore_errors=True)
            fs.get(cases[name][1][len("s3://"):] + "/", str(work / f"ray-{name}") + "/", recursive=True)
            digests[name] = tree_digest(work / f"ray-{name}")
    return {"mb": corpus.stat().st_size / 1e6, "seconds": {name: min(t) for name, t in seconds.items()},
            "ratio": {name: statistics.median(t / d for d, t in zip(seconds["disk"], seconds[name]))
                      for name in ("to_s3", "s3")},
            "same": len(set(digests.values())) == 1}


def wall_seconds(cmd: list[str]) -> float:
    """Wall time of a short child process, from start to exit (`timed` polls every 20 ms: too coarse here)."""
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def help_seconds(repeats: int = 5) -> dict[str, float]:
    """The fastest of `repeats` runs of each HELP_TARGETS command, each a fresh process of the installed
    `mlmprep` script, the commands taken in turn. The script is the one beside this interpreter where there is
    one: a shim found first on PATH (pyenv's is a shell script) would add its own start-up."""
    beside = Path(sys.executable).parent / "mlmprep"
    script = str(beside) if beside.is_file() else "mlmprep"
    times: dict[str, list[float]] = {cmd: [] for cmd in HELP_TARGETS}
    for _ in range(repeats):
        for cmd in HELP_TARGETS:
            times[cmd].append(wall_seconds([script, *cmd.split()[1:]]))
    return {cmd: min(t) for cmd, t in times.items()}


def startup(work: Path, corpus: Path, tok: Path, mlmprep: list[str]) -> dict:
    """Compile cost (a cold Numba cache vs a warm one), --threads 1 vs 2 bytes, and the help commands' time."""
    small = work / "small.txt"
    small.write_bytes(corpus.read_bytes()[: 200_000])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(work / "numba-cache")}
    args = ["build", str(small), "--tokenizer", str(tok), "--seeds", "4"]
    cold = timed([*mlmprep, *args, "--out", str(work / "cold"), "--threads", "1"], env).wall_s
    warm = timed([*mlmprep, *args, "--out", str(work / "warm"), "--threads", "2"], env).wall_s
    same = tree_digest(work / "cold") == tree_digest(work / "warm")
    return {"cold_build_s": cold, "warm_build_s": warm, "threads_1_vs_2_identical": same, "help_s": help_seconds()}


def print_table(r: dict) -> None:
    print(f"\nbuild --seeds 4 vs tokenize-only, {r['corpus']} (same tokenizer, all cores; {r['repeats']} pairs of "
          "runs taken in turn: best times, median of the pairs' ratios)")
    print(f"{'scale':>6}{'MB':>9}{'tokenize s':>12}{'build s':>10}{'ratio':>8}{'tok CPU s':>11}{'build CPU s':>13}"
          f"{'CPU ratio':>11}{'load':>6}{'tok RSS MB':>12}{'build RSS MB':>14}{'out MB':>9}  ratio of each pair")
    for x in r["runs"]:
        pairs = " ".join(f"{q:.2f}" for q in x["ratios"])
        print(f"{x['scale']:>5}x{x['mb']:>9.1f}{x['tokenize_s']:>12.2f}{x['build_s']:>10.2f}{x['ratio']:>8.2f}"
              f"{x['tokenize_cpu_s']:>11.2f}{x['build_cpu_s']:>13.2f}{x['cpu_ratio']:>11.2f}{x['load']:>6.1f}"
              f"{x['tokenize_rss_mb']:>12.0f}{x['build_rss_mb']:>14.0f}{x['out_mb']:>9.1f}  {pairs}")
    print(f"target: ratio <= {RATIO_TARGET} on the whole corpus (a quick slice is dominated by start-up); "
          "build RSS flat across scales")
    print(f"first build (cold Numba cache) {r['cold_build_s']:.2f} s, second {r['warm_build_s']:.2f} s "
          f"(compile paid once: {r['cold_build_s'] - r['warm_build_s']:.2f} s)")
    print(f"--threads 1 and --threads 2 byte-identical: {r['threads_1_vs_2_identical']}")
    if r["scaling"]:
        print(f"\nbuild --seeds 4 by --workers (best of {r['repeats']}; throughput in corpus tokens per second; "
              "the build ratio above is the largest count's)")
        print(f"{'scale':>6}{'workers':>9}{'build s':>10}{'M tok/s':>9}{'speed-up':>10}{'RSS MB':>9}")
        for x in r["scaling"]:
            first = next(y for y in r["scaling"] if y["scale"] == x["scale"])
            print(f"{x['scale']:>5}x{x['workers']:>9}{x['build_s']:>10.2f}{x['tokens_per_s'] / 1e6:>9.2f}"
                  f"{x['tokens_per_s'] / first['tokens_per_s']:>9.2f}x{x['rss_mb']:>9.0f}")
    for c in r["compression"]:
        print(f"\ncompressed corpus files, {c['scale']}x ({c['mb']:.1f} MB of text), --workers 2 --threads 1 (best "
              f"of {r['repeats']}; time ratio: median of the pairs' against the plain .txt, "
              f"{c['plain_build_s']:.2f} s)")
        print(f"{'file':>10}{'MB':>8}{'build s':>10}{'/ .txt':>8}{'RSS MB':>9}  same bytes")
        for codec, x in c["codecs"].items():
            print(f"{'.txt.' + codec:>10}{x['mb']:>8.1f}{x['build_s']:>10.2f}{x['ratio']:>7.2f}x{x['rss_mb']:>9.0f}"
                  f"  {x['identical']}")
        for name, x in c["jsonl"].items():
            print(f"one .{name}: 1 worker {x['build_1_s']:.2f} s, 2 workers {x['build_2_s']:.2f} s, speed-up "
                  f"{x['speed_up']:.2f}x; same bytes on 1 and 2 workers and as the plain .jsonl: {x['identical']}")
        print(f"targets: .txt.gz/.txt.zst <= {COMPRESSED_TARGET}x the .txt; .jsonl.gz 1 -> 2 workers >= "
              f"{COMPRESSED_SPEED_UP_TARGET}x (whole corpus)")
    for cmd, seconds in r["help_s"].items():
        print(f"{cmd}: {seconds:.2f} s (target <= {HELP_TARGETS[cmd]} s)")
    if "storage" in r:
        x = r["storage"]
        print(f"\nbuild --seeds 4 of {x['mb']:.1f} MB from and to S3 (moto on loopback) {x['s3_s']:.2f} s, "
              f"on local disk {x['local_s']:.2f} s: {x['ratio']:.2f}x (target <= {STORAGE_TARGET}x); "
              f"bytes identical: {x['same']}")
    if "ray" in r:
        x, t = r["ray"], r["ray"]["seconds"]
        print(f"\nbuild --seeds 4 of {x['mb']:.1f} MB on a one-node Ray cluster (2 CPUs): local disk "
              f"{t['disk']:.2f} s, local disk to S3 {t['to_s3']:.2f} s ({x['ratio']['to_s3']:.2f}x), "
              f"S3 to S3 {t['s3']:.2f} s ({x['ratio']['s3']:.2f}x); bytes identical: {x['same']}")


def figures(r: dict) -> list[Figure]:
    # a quick slice measures start-up more than throughput: its ratio is shown, the target judged on the whole corpus
    target = f"<= {RATIO_TARGET}x" + (" (whole corpus)" if r["quick"] else "")
    side = f"build --seeds 4 ({r['workers'][-1]} workers)" if r["workers"] else "build --seeds 4"
    rows = [Figure(f"{side} time / tokenize-only time, {x['mb']:.0f} MB", f"{x['ratio']:.2f}x", target,
                   None if r["quick"] else x["ratio"] <= RATIO_TARGET) for x in r["runs"]]
    # CPU time, processes and threads summed: what a machine shared with other jobs changes least (its load shown)
    rows += [Figure(f"{side} CPU time / tokenize-only CPU time, {x['mb']:.0f} MB (load {x['load']:.1f} on "
                    f"{os.cpu_count()} cores)", f"{x['cpu_ratio']:.2f}x") for x in r["runs"]]
    out = r["runs"][0]  # bytes per corpus byte hardly change with the scale
    rows.append(Figure(f"build output bytes per corpus byte, {out['mb']:.0f} MB", f"{out['out_per_input']:.2f}",
                       f"<= {OUTPUT_TARGET}" + (" (whole corpus)" if r["quick"] else ""),
                       None if r["quick"] else out["out_per_input"] <= OUTPUT_TARGET))
    rss = [x["build_rss_mb"] for x in r["runs"]]
    if len(rss) > 1:
        rows.append(Figure("build peak RSS, largest / smallest corpus", ratio(rss[-1], rss[0]), "flat (<= 1.2x)",
                           rss[-1] <= 1.2 * rss[0]))
    for x in r["scaling"]:  # the largest worker count against the first, at each scale
        first = next(y for y in r["scaling"] if y["scale"] == x["scale"])
        if x["workers"] != r["workers"][-1] or x is first:
            continue
        mb = next(y["mb"] for y in r["runs"] if y["scale"] == x["scale"])
        speed_up = x["tokens_per_s"] / first["tokens_per_s"]
        goal = SPEED_UP_TARGETS.get(x["workers"]) if first["workers"] == 1 else None
        rows.append(Figure(f"speed-up, {first['workers']} -> {x['workers']} workers, {mb:.0f} MB", f"{speed_up:.2f}x",
                           f">= {goal:g}x" if goal else "", speed_up >= goal if goal else None))
    for c in r["compression"]:
        judged = None if r["quick"] else True
        for codec, x in c["codecs"].items():
            target = f"<= {COMPRESSED_TARGET}x" if codec in ("gz", "zst") else ""
            rows.append(Figure(f"build from .txt.{codec} time / from .txt time, 2 workers, {c['mb']:.0f} MB",
                               f"{x['ratio']:.2f}x", target + (" (whole corpus)" if r["quick"] and target else ""),
                               judged and x["ratio"] <= COMPRESSED_TARGET if target else None))
            rows.append(Figure(f"build from .txt.{codec} byte-identical to the .txt build", str(x["identical"]), "True",
                               x["identical"]))
        for name, x in c["jsonl"].items():
            target = f">= {COMPRESSED_SPEED_UP_TARGET}x" + (" (whole corpus)" if r["quick"] else "")
            rows.append(Figure(f"speed-up, one .{name} of {c['mb']:.0f} MB, 1 -> 2 workers", f"{x['speed_up']:.2f}x",
                               target, judged and x["speed_up"] >= COMPRESSED_SPEED_UP_TARGET))
    rows += [
        Figure("Numba compile paid by the first build", f"{r['cold_build_s'] - r['warm_build_s']:.1f} s"),
        Figure("--threads 1 and 2 byte-identical", str(r["threads_1_vs_2_identical"]), "True",
               r["threads_1_vs_2_identical"]),
    ]
    rows += storage_figures(r) + ray_figures(r)
    return rows + [Figure(cmd, f"{seconds:.2f} s", f"<= {HELP_TARGETS[cmd]} s", seconds <= HELP_TARGETS[cmd])
                   for cmd, seconds in r["help_s"].items()]


def storage_figures(r: dict) -> list[Figure]:
    """The --storage s3 case: its time against the local-disk build, and whether their bytes are equal."""
    if "storage" not in r:
        return []
    x = r["storage"]  # a quick slice is dominated by the fixed cost of the S3 client: judged on the whole corpus
    return [Figure(f"build from and to S3 (moto, loopback) time / local-disk build time, {x['mb']:.0f} MB",
                   f"{x['ratio']:.2f}x", f"<= {STORAGE_TARGET}x" + (" (whole corpus)" if r["quick"] else ""),
                   None if r["quick"] else x["ratio"] <= STORAGE_TARGET),
            Figure("build from and to S3 byte-identical to the local-disk build", str(x["same"]), "True", x["same"])]


def ray_figures(r: dict) -> list[Figure]:
    """The --storage ray case: Ray builds from and to S3 (no disk shared with the driver) against Ray on local disk."""
    if "ray" not in r:
        return []
    x = r["ray"]
    return [Figure(f"Ray build, local disk to S3 / on local disk, {x['mb']:.0f} MB", f"{x['ratio']['to_s3']:.2f}x"),
            Figure(f"Ray build, S3 to S3 / on local disk, {x['mb']:.0f} MB", f"{x['ratio']['s3']:.2f}x"),
            Figure("Ray builds on disk, to S3 and from S3 byte-identical", str(x["same"]), "True", x["same"])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2 MB slice at 1x only")
    parser.add_argument("--scales", default="1,4", help="corpus repetitions, e.g. 1,4,16")
    parser.add_argument("--corpus", type=Path, default=None, help="a .txt corpus (default: shared pydocs.txt)")
    parser.add_argument("--repeats", type=int, default=None, help="pairs of runs per scale (default 5; quick 1)")
    parser.add_argument("--workers", default="", help="build with each of these worker counts, e.g. 1,2 or 1,2,4,8,16")
    parser.add_argument("--compression", default="", help=f"also build compressed copies: any of {','.join(CODECS)}")
    parser.add_argument("--storage", default="",
                        help="also build from and to these: s3 (a local S3 server), ray (S3 and a local Ray cluster)")
    docs.add_arguments(parser, "build")
    args = parser.parse_args()
    workers = tuple(int(w) for w in args.workers.split(",") if w)
    compression = tuple(c for c in args.compression.split(",") if c)
    if unknown := set(compression) - set(CODECS):
        parser.error(f"--compression: unknown {', '.join(sorted(unknown))}; use any of {','.join(CODECS)}")
    result = run(args.quick, tuple(int(s) for s in args.scales.split(",")), args.corpus, args.repeats, workers,
                 compression, tuple(x for x in args.storage.split(",") if x))
    if args.write_docs and result:
        docs.write(args.write_docs, {args.section: figures(result)}, "benchmarks.build")


if __name__ == "__main__":
    main()
