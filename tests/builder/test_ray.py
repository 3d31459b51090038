"""The Ray engine on a two-node cluster simulated on this machine, inside a fresh network namespace, so that
Ray binds only to the namespace's loopback: the same bytes as the local engine (a span and a ul2 build, and
builds with --exclude and --keep-dropped on nodes that share the driver's disk and on nodes that do not, from and
to S3), a task error arriving as itself, a worker killed mid-task retried to the same bytes, Ctrl-C. Skipped, with
the reason, without Ray or without a network namespace (`unshare -n` as root, `unshare -rn` where user
namespaces are allowed)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from mlmprep.builder.dropped import split_rows
from mlmprep.builder.engine.base import run_tasks
from mlmprep.builder.engine.ray import RayEngine
from mlmprep.errors import ConfigError
from tests.cli.test_build import cli_command, cli_env, comparable, data_files, manifest
from tests.conftest import tiny_documents
from tests.s3server import CREDENTIALS

pytest.importorskip("ray", reason='Ray is not installed (pip install "mlmprep[ray]")')

BLOCKS = 6

# Runs inside the namespace: a head and a second node (one CPU each), then tasks through the engine and
# builds through the CLI, each CLI build a separate Ray driver joining the cluster by its address.
SCRIPT = r'''
import hashlib, json, os, signal, subprocess, sys, threading, time

import psutil
from ray.cluster_utils import Cluster

from mlmprep.builder.engine.base import TaskRun, run_tasks
from mlmprep.builder.engine.ray import RayEngine
from mlmprep.errors import CorpusError


def write_block(task):
    """Deterministic bytes to a deterministic path through a temporary name, so a rerun is safe."""
    import ray
    out, i = task
    time.sleep(1.0)
    data = hashlib.sha256(str(i).encode()).digest() * 4096
    tmp = os.path.join(out, f".block-{i}.{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(out, f"block-{i}"))
    return ray.get_runtime_context().get_node_id()


def one_at_a_time(task):
    """Records its start and end: with --workers 1 on the cluster the spans must not overlap."""
    out, i = task
    start = time.time()
    time.sleep(0.3)
    with open(os.path.join(out, f"span-{i}"), "w") as f:
        f.write(f"{start} {time.time()}")


def sleep_for(task):
    """(name, start time) of a task that sleeps `wait` seconds."""
    name, wait = task
    started = time.time()
    time.sleep(wait)
    return name, started


def ship_small(i):
    """A task that ships a payload part of 1 KB, which Ray would return inline into the driver's memory."""
    from mlmprep.builder.engine.base import Shipped

    return Shipped(i, ({"part": bytes(1000)},), (("part",),))


def refuse_7(i):
    if i == 7:
        raise CorpusError(f"corpus.txt at byte {i}: not UTF-8")
    return i


def first_task(stop):
    """The first worker of this namespace seen running an mlmprep task (process title ray::mlmprep ...)."""
    netns = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            try:
                title = (p.info["cmdline"] or [""])[0]
                if title.startswith("ray::mlmprep") and os.readlink(f"/proc/{p.pid}/ns/net") == netns:
                    return p, title.strip()
            except (OSError, psutil.Error):
                pass
        time.sleep(0.02)
    return None, None


def kill_first_task(killed, stop):
    process, title = first_task(stop)
    if process is not None:
        process.kill()
        killed.append(title)


def with_a_kill(work):
    killed, stop = [], threading.Event()
    killer = threading.Thread(target=kill_first_task, args=(killed, stop))
    killer.start()
    try:
        return work(), killed
    finally:
        stop.set()
        killer.join()


def s3_build(cfg, address, s3_args, copy):
    """A build from and to S3 (moto, on this namespace's loopback; the nodes are told its endpoint only by
    --storage-options) whose driver stages in a tmpfs of its own mount namespace, which no node sees; the build
    is then copied here (`copy`) for comparison, with what its detached tasks fetched (see FETCH_LOG)."""
    sys.path.insert(0, cfg["tests"])
    from s3server import s3_server

    with s3_server() as s3:
        fs, bucket = s3.fs(), s3.bucket()
        fs.put(cfg["corpus"], f"{bucket}/corpus/corpus.txt")
        fs.put(cfg["tokenizer"], f"{bucket}/tokenizer.json")
        fs.put(cfg["evaluation"], f"{bucket}/evaluation.txt")  # --exclude read in place too
        args = [f"s3://{bucket}/evaluation.txt" if a == cfg["evaluation"] else a for a in s3_args]
        private = os.path.join(os.path.dirname(cfg["blocks"]), f"driver-tmp-{os.path.basename(copy)}")
        os.mkdir(private)
        command = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs tmpfs "$TMPDIR" && exec "$0" "$@"', *cfg["cli"],
                   "build", f"s3://{bucket}/corpus/", "--out", f"s3://{bucket}/out", "--tokenizer",
                   f"s3://{bucket}/tokenizer.json", *args, "--storage-options",
                   json.dumps({"endpoint_url": s3.endpoint}), "--engine", "ray", "--ray-address", address]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TMPDIR": private})
        if proc.returncode == 0:
            fs.get(f"{bucket}/out/", copy + "/", recursive=True)
        fetches = []
        if os.path.isdir(os.environ["MLMPREP_FETCH_LOG"]):
            os.rename(os.environ["MLMPREP_FETCH_LOG"], copy + ".fetches")
            for log in os.listdir(copy + ".fetches"):
                with open(os.path.join(copy + ".fetches", log)) as f:
                    fetches += [line.rstrip("\n").split("\t") for line in f]
        return {"rc": proc.returncode, "stderr": proc.stderr[-3000:], "driver_tmp_left": os.listdir(private),
                "fetches": fetches}


def main(cfg):
    started = time.monotonic()
    # the nodes' environment: credentials, an endpoint where nothing listens, and the hook that logs fetches
    os.environ.update({**cfg["credentials"], "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "PYTHONPATH": os.pathsep.join(
        [cfg["site"], *filter(None, [os.environ.get("PYTHONPATH")])]), "MLMPREP_FETCH_LOG": cfg["fetch_log"]})
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    report = {"address": cluster.address, "seconds": {"cluster": time.monotonic() - started}}
    lap = lambda name: report["seconds"].__setitem__(name, time.monotonic() - started - sum(report["seconds"].values()))
    try:
        engine = RayEngine(ray_address=cluster.address)
        with engine.session():
            tasks = [(cfg["blocks"], i) for i in range(cfg["n_blocks"])]
            nodes, report["blocks_killed"] = with_a_kill(lambda: run_tasks(write_block, tasks, engine=engine))
            report["block_nodes"] = len(set(nodes))
            spans = os.path.join(os.path.dirname(cfg["blocks"]), "spans")
            os.mkdir(spans)
            run_tasks(one_at_a_time, [(spans, i) for i in range(3)],
                      engine=RayEngine(workers=1, ray_address=cluster.address))
            report["spans"] = sorted(tuple(map(float, open(os.path.join(spans, n)).read().split()))
                                     for n in os.listdir(spans))
            with TaskRun(sleep_for, [(f"read-{i}", 0.3) for i in range(12)], engine=engine) as run:
                for i, _ in run:
                    if i == 0:
                        run.add(sleep_for, [("write", 0.0)])
            report["added"] = [started for _, started in run.results[:12]], run.results[12]
            with TaskRun(ship_small, [0], engine=engine) as run:
                part = [run.payloads[i].payload[0] for i, _ in run][0]
            import ray

            report["small_part_nodes"] = len(ray.experimental.get_object_locations([part])[part]["node_ids"])
            try:
                run_tasks(refuse_7, [6, 7, 8], engine=engine)
            except CorpusError as exc:
                report["error"] = [type(exc).__name__, str(exc)]
        lap("tasks")
        for name, kill in (("build", False), ("build_ul2", False), ("build_killed", True), ("build_bad", False)):
            command = cfg[name] + ["--engine", "ray", "--ray-address", cluster.address]
            run = lambda: subprocess.run(command, capture_output=True, text=True, timeout=300)
            proc, killed = with_a_kill(run) if kill else (run(), [])
            report[name] = {"rc": proc.returncode, "stderr": proc.stderr[-3000:], "killed": killed}
            lap(name)
        # Ctrl-C at the terminal of a build running on the cluster: its own process group, like a shell's job
        command = cfg["build_interrupted"] + ["--engine", "ray", "--ray-address", cluster.address]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        _, title = first_task(threading.Event())
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        report["build_interrupted"] = {"rc": proc.returncode, "stderr": err[-3000:], "during": title}
        lap("build_interrupted")
        report["build_s3"] = s3_build(cfg, cluster.address, cfg["s3_args"], cfg["s3_copy"])
        lap("build_s3")
        report["build_s3_exact"] = s3_build(cfg, cluster.address, cfg["s3_exact_args"], cfg["s3_exact_copy"])
        lap("build_s3_exact")
    finally:
        cluster.shutdown()
    lap("shutdown")
    print(json.dumps(report))


main(json.loads(sys.argv[1]))
'''


# On the cluster's processes (as sitecustomize, on PYTHONPATH): each staged file a detached task fetches, logged as
# (task, file, bytes sent, file size) to a file per process under $MLMPREP_FETCH_LOG.
FETCH_LOG = r'''
import importlib.abc, importlib.util, os, sys


class LogFetches(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "mlmprep.builder.staged":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            write = module.write_fetched

            def write_fetched(path, data):
                import ray

                size, pieces = (len(data), [(0, data)]) if isinstance(data, bytes) else data
                os.makedirs(os.environ["MLMPREP_FETCH_LOG"], exist_ok=True)
                with open(os.path.join(os.environ["MLMPREP_FETCH_LOG"], str(os.getpid())), "a") as f:
                    f.write(f"{ray.get_runtime_context().get_task_name()}\t{path.name}\t"
                            f"{sum(len(p) for _, p in pieces)}\t{size}\n")
                write(path, data)

            module.write_fetched = write_fetched

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("MLMPREP_FETCH_LOG"):
    sys.meta_path.insert(0, LogFetches())
'''


def unshare_command() -> tuple[list[str] | None, str]:
    """`unshare` with the options that give this user a network namespace (-n as root, -rn in a user
    namespace otherwise), or None and why there are none."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None, "needs unshare and ip (util-linux, iproute2)"
    errors = []
    for options in (["-n"], ["-rn"]):
        probe = subprocess.run(["unshare", *options, "sh", "-c", "ip link set lo up"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ["unshare", *options], ""
        errors.append(f"unshare {' '.join(options)}: {probe.stderr.strip()}")
    return None, "cannot make a network namespace: " + "; ".join(errors)


def netns_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def kill_namespace(netns: str) -> list[str]:
    """SIGKILL every process left in the network namespace `netns`; their names."""
    left = []
    for p in psutil.process_iter(["name"]):
        if p.pid != os.getpid() and netns_of(p.pid) == netns:
            left.append(p.info["name"])
            try:
                p.kill()
            except psutil.Error:
                pass
    return left


def run_in_netns(unshare: list[str], args: list[str], home: str,
                 timeout: float) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`python ARGS` in a fresh network namespace with only loopback up, Ray's files (its token, sessions)
    under `home`, not the user's; afterwards every process still in the namespace is killed, and named in
    the second return value."""
    command = [*unshare, "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable, *args]
    env = {**cli_env(), "HOME": home, "RAY_TMPDIR": home}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    ours, netns = netns_of(os.getpid()), None
    for _ in range(1000):
        netns = netns_of(proc.pid)
        if netns != ours or proc.poll() is not None:
            break
        time.sleep(0.01)
    left = []
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for _ in range(100):  # Ray's own processes may take a moment to follow the cluster's shutdown
            if netns == ours or not any(netns_of(pid) == netns for pid in psutil.pids() if pid != os.getpid()):
                break
            time.sleep(0.1)
        else:
            left = kill_namespace(netns)
    return subprocess.CompletedProcess(command, proc.returncode, out, err), left


def cluster_work(root: Path) -> tuple[Path, dict] | str:
    """Build a corpus locally, then run SCRIPT on a fresh two-node cluster: (root, report), or why not."""
    unshare, reason = unshare_command()
    if unshare is None:
        return f"Ray tests skipped: {reason}"
    from mlmprep.tokenizer.train import train_tokenizer

    tok = root / "tokenizer.json"
    train_tokenizer(tiny_documents(), vocab_size=400).save(str(tok))
    corpus = root / "corpus.txt"
    docs = tiny_documents(2000)
    docs += [f" {doc}  " for doc in docs[::9]] + [f"{doc} And so on." for doc in docs[1::9]]  # planted duplicates
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    evaluation = root / "evaluation.txt"  # --exclude: documents none of the planted copies repeats
    evaluation.write_text("\n".join(docs[4:1800:180]) + "\n", encoding="utf-8")
    args = ["build", str(corpus), "--tokenizer", str(tok), "--input-length", "32", "--seeds", "2",
            "--rows-per-file", "500", "--dedup", "near", "--dedup-paragraphs", "--exclude", str(evaluation),
            "--keep-dropped"]
    local = subprocess.run(cli_command(*args, "--out", root / "local", "--workers", "2"), env=cli_env(),
                           capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    ul2_args = ["build", str(corpus), "--tokenizer", str(tok), "--objective", "ul2", "--input-length", "64",
                "--seeds", "2", "--rows-per-file", "200"]  # UL2's seven denoisers, rows cut from the stream per seed
    local_ul2 = subprocess.run(cli_command(*ul2_args, "--out", root / "local-ul2", "--workers", "2"), env=cli_env(),
                               capture_output=True, text=True, timeout=300)
    assert local_ul2.returncode == 0, local_ul2.stderr
    bad = root / "bad.txt"
    bad.write_bytes(b"a good line\nthen \xff\xfe bytes\n" + corpus.read_bytes())
    bad_args = ["build", str(bad), "--tokenizer", str(tok), "--input-length", "32", "--on-decode-error", "fail"]
    local_bad = subprocess.run(cli_command(*bad_args, "--out", root / "local-bad", "--workers", "2"), env=cli_env(),
                               capture_output=True, text=True, timeout=300)
    assert local_bad.returncode == 2, local_bad.stderr
    exact_args = ["exact" if a == "near" else a for a in args]
    local_exact = subprocess.run(cli_command(*exact_args, "--out", root / "local-exact", "--workers", "2"),
                                 env=cli_env(), capture_output=True, text=True, timeout=300)
    assert local_exact.returncode == 0, local_exact.stderr
    (root / "blocks").mkdir()
    (root / "site").mkdir()
    (root / "site" / "sitecustomize.py").write_text(FETCH_LOG, encoding="utf-8")
    cfg = {
        "blocks": str(root / "blocks"), "n_blocks": BLOCKS,
        # ~10 reading tasks; near dedup in partition tasks, held against the local build's in the driver
        "build": cli_command(*args, "--out", root / "ray", "--shard-bytes", "40000", "--dedup-partitions", "3"),
        "build_ul2": cli_command(*ul2_args, "--out", root / "ray-ul2", "--shard-bytes", "40000"),
        "build_killed": cli_command(*args, "--out", root / "ray-killed"),  # one long reading task: sure to be hit
        "build_interrupted": cli_command(*args, "--out", root / "ray-interrupted"),
        "build_bad": cli_command(*bad_args, "--out", root / "ray-bad"),
        "cli": cli_command(), "tests": str(Path(__file__).parents[1]), "corpus": str(corpus), "tokenizer": str(tok),
        "evaluation": str(evaluation),
        "s3_args": args[4:] + ["--shard-bytes", "40000", "--dedup-partitions", "3"], "s3_copy": str(root / "ray-s3"),
        "s3_exact_args": exact_args[4:] + ["--shard-bytes", "40000", "--dedup-partitions", "3"],
        "s3_exact_copy": str(root / "ray-s3-exact"), "site": str(root / "site"), "fetch_log": str(root / "fetches"),
        "credentials": CREDENTIALS,
    }
    (root / "script.py").write_text(SCRIPT, encoding="utf-8")
    home = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths under it must fit 107 bytes
    try:
        proc, left = run_in_netns(unshare, [str(root / "script.py"), json.dumps(cfg, default=str)], home, timeout=540)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-5000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["left"] = left
    report["local_bad"] = local_bad.stderr
    return root, report


def start_early(root: Path) -> Future:
    """cluster_work in a thread, started by conftest when collection ends: the run takes ~40 s, more than half of
    it waiting on Ray's processes, so it overlaps the tests before this module instead of adding to the suite."""
    pool = ThreadPoolExecutor(1, thread_name_prefix="ray-cluster")
    future = pool.submit(cluster_work, root)
    pool.shutdown(wait=False)
    return future


@pytest.fixture(scope="module")
def cluster_run(request, tmp_path_factory):
    """The report of one cluster_work run (started early by conftest when the whole suite runs)."""
    future = getattr(request.config, "ray_cluster_run", None) or start_early(tmp_path_factory.mktemp("ray"))
    result = future.result(timeout=900)
    if isinstance(result, str):
        pytest.skip(result)
    root, report = result
    print("Ray phases (s):", json.dumps({k: round(v, 1) for k, v in report["seconds"].items()}))
    return root, report


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_tasks_run_on_both_nodes_and_a_killed_worker_is_retried_to_the_same_bytes(cluster_run):
    root, report = cluster_run
    assert report["block_nodes"] == 2
    assert len(report["blocks_killed"]) == 1 and report["blocks_killed"][0].startswith("ray::mlmprep (")
    for i in range(BLOCKS):
        data = (root / "blocks" / f"block-{i}").read_bytes()
        assert data == hashlib.sha256(str(i).encode()).digest() * 4096
    assert sorted(p.name for p in (root / "blocks").iterdir()) == sorted(f"block-{i}" for i in range(BLOCKS))


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_workers_caps_the_tasks_in_flight_on_the_cluster(cluster_run):
    _, report = cluster_run
    spans = report["spans"]
    assert len(spans) == 3 and all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_task_made_ready_goes_ahead_of_the_tasks_not_submitted(cluster_run):
    """With --workers 0 the cluster is given two tasks per CPU at a time, so a task that a result makes ready
    (a write whose shards are read) starts before most of the reads given before it."""
    _, report = cluster_run
    reads, (name, write_started) = report["added"]
    assert name == "write" and sum(started > write_started for started in reads) >= 6, report["added"]


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_small_payload_part_is_in_the_object_store_not_the_driver_s_memory(cluster_run):
    """Ray returns an object of 100 KB or less inline to the driver, which would then hold every partition's small
    slice of every shard; the build's workers put them in the object store (on a node: not inline)."""
    _, report = cluster_run
    assert report["small_part_nodes"] == 1


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_task_error_arrives_as_its_own_class_and_message(cluster_run):
    _, report = cluster_run
    assert report["error"] == ["CorpusError", "corpus.txt at byte 7: not UTF-8"]


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_two_node_build_equals_the_local_engine_build(cluster_run):
    root, report = cluster_run
    assert report["build"]["rc"] == 0, report["build"]["stderr"]
    assert data_files(root / "ray") == data_files(root / "local")
    # the 223 exact copies, and the near copies of the longer documents (a short one's Jaccard falls below 0.8),
    # emptied by --dedup-paragraphs (each document is one line) or dropped by near dedup
    stats = manifest(root / "local")["corpus"]["stats"]
    assert stats["dedup"]["documents_dropped"] + stats["paragraphs"]["documents_emptied"] >= 223 + 100
    assert stats["paragraphs"]["documents_emptied"] >= 223 and stats["contamination"]["before"]["documents"] > 0
    assert stats["exclusion"]["documents_matched"] >= 8  # --exclude cut the evaluation set's documents out
    assert comparable(manifest(root / "ray")) == comparable(manifest(root / "local"))


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_two_node_ul2_build_equals_the_local_engine_build(cluster_run):
    """UL2's mixture of denoisers on ~10 reading tasks over two nodes: each seed's assignment of denoisers, its
    rows cut from the stream and their masks are the bytes of the local build on two workers."""
    root, report = cluster_run
    assert report["build_ul2"]["rc"] == 0, report["build_ul2"]["stderr"]
    files = data_files(root / "ray-ul2")
    assert files == data_files(root / "local-ul2")
    assert sum(name.startswith("seed-1/data-") for name in files) >= 2  # several files per seed split
    ray_manifest = manifest(root / "ray-ul2")
    assert len(ray_manifest["denoisers"]) == 7 and ray_manifest["objective"] == "ul2"
    assert comparable(ray_manifest) == comparable(manifest(root / "local-ul2"))


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_build_whose_worker_is_killed_mid_task_retries_to_the_same_bytes(cluster_run):
    root, report = cluster_run
    assert report["build_killed"]["rc"] == 0, report["build_killed"]["stderr"]
    assert report["build_killed"]["killed"], "no build task was seen running on the cluster"
    assert data_files(root / "ray-killed") == data_files(root / "local")
    assert comparable(manifest(root / "ray-killed")) == comparable(manifest(root / "local"))


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_bad_input_on_the_cluster_is_the_local_engine_s_one_line_and_exit_2(cluster_run):
    root, report = cluster_run
    bad = report["build_bad"]
    assert bad["rc"] == 2, bad["stderr"]
    line = bad["stderr"].splitlines()[-1]  # Ray logs a line of its own first in a namespace without a route
    assert line == report["local_bad"].strip() and line.startswith(f"error: {root / 'bad.txt'} line 2 (byte 17)")
    assert not (root / "ray-bad").exists()


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_ctrl_c_stops_a_build_on_the_cluster_and_publishes_nothing(cluster_run):
    root, report = cluster_run
    interrupted = report["build_interrupted"]
    assert interrupted["during"] is not None, "no build task was seen running on the cluster"
    assert interrupted["rc"] == 130, interrupted["stderr"]
    assert interrupted["stderr"].splitlines()[-1] == "interrupted; nothing was left under the output name"
    assert not (root / "ray-interrupted").exists()


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_a_build_from_and_to_s3_on_nodes_that_share_no_disk_with_the_driver_equals_the_local_build(cluster_run):
    """--exclude read from S3 and --keep-dropped too: the `dropped` split (the evaluation set's text, the lines
    paragraph dedup removed, the near copies) is the local build's."""
    root, report = cluster_run
    built = report["build_s3"]
    assert built["rc"] == 0, built["stderr"]
    assert data_files(root / "ray-s3") == data_files(root / "local")
    reasons = {reason for _, reason, _ in split_rows(root / "ray-s3")}
    assert {"exclude", "dedup_paragraphs", "dedup_near"} <= reasons, reasons
    assert built["driver_tmp_left"] == []  # the driver's tmpfs, seen from outside its mount namespace: empty


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
@pytest.mark.parametrize("dedup", ["near", "exact"])
def test_a_partition_task_on_nodes_that_share_no_disk_fetches_its_own_partition_s_share(cluster_run, dedup):
    """The detached builds from and to S3, with --dedup near or exact, 3 partitions and decontamination: the local
    build's bytes; each partition task fetched scratch files alone, never a token file, and of each a slice: every
    shard's `.dedup` and `.hashes` split among the 3 partition tasks (the index sent to each), about a third each;
    near dedup's signatures, the rows of the documents compared (a part of each shard's); a write task, no scratch
    file. Near dedup's partition tasks read their slices twice: for the documents whose signatures they need, then
    for the links."""
    root, report = cluster_run
    built = report["build_s3" if dedup == "near" else "build_s3_exact"]
    assert built["rc"] == 0, built["stderr"]
    assert data_files(root / ("ray-s3" if dedup == "near" else "ray-s3-exact")) == data_files(
        root / ("local" if dedup == "near" else "local-exact"))
    parts, index = 3, {"dedup": 8 * 4, "hashes": 16 * 4 * 2}  # --dedup-partitions 3; two kinds of hashes
    sent: dict[str, list[tuple[int, int]]] = {}  # file -> (bytes sent, its size) of each partition task's fetch
    signatures: dict[str, int] = {}  # partition task -> signature bytes it was sent
    for task, file, got, size in built["fetches"]:
        scratch = file.endswith((".dedup", ".sig", ".hashes", ".fates"))
        assert scratch == (" partition " in task), (task, file)  # a token file to a partition task, or the reverse
        if scratch and not file.endswith(".fates"):
            sent.setdefault(file, []).append((int(got), int(size)))
        if file.endswith(".sig"):
            signatures[task] = signatures.get(task, 0) + int(got)
    partition_tasks = {task for task, *_ in built["fetches"] if " partition " in task}
    assert len(partition_tasks) == 2 * parts, partition_tasks  # dedup's and decontamination's
    shards = {file.rsplit(".", 1)[0] for file in sent}
    assert len(shards) >= 8, shards
    # near: a third of the documents are planted copies or their originals, each compared in every partition
    whole = sum(fetched[0][1] for file, fetched in sent.items() if file.endswith(".sig"))
    assert len(signatures) == (parts if dedup == "near" else 0), signatures
    assert all(0 < got < whole / 2 for got in signatures.values()), (whole, signatures)
    for file, fetched in sent.items():
        suffix = file.rsplit(".", 1)[1]
        if suffix == "sig":
            continue
        times = 2 if suffix == "dedup" and dedup == "near" else 1  # near: read for its members, then for its links
        assert len(fetched) == times * parts and all(got < 0.6 * size for got, size in fetched), (file, fetched)
        assert sum(got for got, _ in fetched) == times * (fetched[0][1] + (parts - 1) * index[suffix]), (file, fetched)


@pytest.mark.slow  # the two-node cluster run: minutes of both cores
def test_nothing_is_left_running_in_the_namespace(cluster_run):
    _, report = cluster_run
    assert report["left"] == []


def test_an_address_where_nothing_listens_fails_in_seconds_with_one_line():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    address = f"127.0.0.1:{probe.getsockname()[1]}"
    probe.close()  # the port is free now: nothing listens there
    with pytest.raises(ConfigError, match=f"--ray-address {address}: nothing answers there"):
        run_tasks(abs, [1], engine=RayEngine(ray_address=address))
