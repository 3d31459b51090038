"""Damaged and hostile builds, fuzzed: random edits of manifest.json, state.json, tokenizer.json and the Arrow files
(truncation, flipped bytes, other types, path traversal, huge numbers, deep nesting, NaN, missing keys), links out
of the build for any file (manifest.json too) or split, same-size files swapped, FIFOs and directories where files
belong, splits cut short with their manifest entries re-hashed, row counts edited, run through verify, inspect,
inspect --html and train start-up. Each command either works or refuses in one line, never a traceback, and never
waits (a FIFO left unopened is the only way to block: a watchdog opens it after HANG_S and fails the case);
nothing outside the build is opened (an audit hook watches a canary directory beside it whose files are copies of
the build's, so a read of one would pass every other check); every damage is refused by the reader or caught by
verify; and train refuses, before its first step, any change to the bytes it reads there (seed-0, validation,
the tokenizer) that the manifest does not record.

MLMPREP_FUZZ_CASES=N runs N cases (default 300, a minute or two); MLMPREP_FUZZ_SEED=S another sequence.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.config import TrainConfig
from mlmprep.errors import MlmprepError
from mlmprep.train.loop import fit
from tests.cli.test_build import build_args, cli_command, cli_env, data_files
from tests.cli.test_build import cli as cli_in_process
from tests.conftest import build_tiny
from tests.format.test_damaged_builds import cut_split

CASES = int(os.environ.get("MLMPREP_FUZZ_CASES", "300"))
HANG_S = 120.0  # a case's readers still running after this long are waiting on a FIFO
SEED = int(os.environ.get("MLMPREP_FUZZ_SEED", "0"))
JSON_FILES = ("manifest.json", "seed-0/state.json", "seed-1/state.json", "validation/state.json", "windows/state.json",
              "tokenizer.json")
DEEP = "\x00deep"  # stands for a value nested far deeper than any parser's stack
OUTSIDE = "\x00outside"  # stands for the canary directory's absolute path
HUGE = "\x00huge"  # stands for a string of a million characters
# manifest fields no reader checks against anything else: editing them changes what is shown, not what is read
# (statistics is an open mapping: a key added there is shown, never read; verify recomputes only the masking's)
DESCRIPTIVE = ("timings", "build_options", "corpus", "mlmprep_version", "statistics.", "rows_per_file",
               "tokenizer.trained_on", "config.")
CHECKED = ("config.input_length", "config.seed", "config.noise_density", "config.mean_span_length",
           "config.mlm_probability", "config.whole_word", "statistics.masking")


# ----------------------------------------------------------------------------- watching for reads outside
class Watch:
    """Opens of paths under `root` (links resolved) while armed: Python's own (an audit hook) and pyarrow's
    memory maps and files (wrapped, since they open in C++)."""

    root: str | None = None
    reads: list[str] = []

    @classmethod
    def audit(cls, event: str, args: tuple) -> None:
        if event == "open" and cls.root is not None and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if path == cls.root or path.startswith(cls.root + os.sep):
                cls.reads.append(path)


def audited(open_file):
    def wrapper(path, *args, **kwargs):
        if isinstance(path, (str, bytes, os.PathLike)):
            sys.audit("open", path, "r", 0)
        return open_file(path, *args, **kwargs)

    return wrapper


@pytest.fixture(scope="module")
def watched():
    if not getattr(sys, "_mlmprep_fuzz_hook", False):  # an audit hook cannot be removed: one per process
        sys.addaudithook(Watch.audit)
        sys._mlmprep_fuzz_hook = True
    with mock.patch.object(pa, "memory_map", audited(pa.memory_map)), mock.patch.object(pa, "OSFile",
                                                                                        audited(pa.OSFile)):
        yield Watch


@contextmanager
def armed(root: Path):
    Watch.root, Watch.reads = os.path.realpath(root), []
    try:
        yield Watch.reads
    finally:
        Watch.root = None


def test_the_watch_sees_python_and_arrow_reads(watched, tmp_path, fuzz_build):
    """The detector itself: an open through a link, and a memory map, of a canary are both seen."""
    outside = tmp_path / "outside"
    shutil.copytree(fuzz_build / "seed-0", outside)
    (tmp_path / "link.json").symlink_to(outside / "state.json")
    with armed(outside) as reads:
        (tmp_path / "link.json").read_bytes()
        pa.memory_map(str(outside / "data-00000-of-00001.arrow")).close()
        (fuzz_build / "manifest.json").read_bytes()  # inside: not counted
    assert [Path(p).name for p in reads] == ["state.json", "data-00000-of-00001.arrow"]


# ----------------------------------------------------------------------------- the shared build and its damage
@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path) -> Path:
    """A small real build every case copies (2 seeds, validation, input length 32)."""
    return build_tiny(tmp_path_factory.mktemp("fuzz") / "b", tiny_corpus, tiny_tokenizer_path, seeds=2)


def json_paths(value, prefix=()) -> list[tuple]:
    """Every key path into a JSON value (objects and lists), parents first."""
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            paths += json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:8]):
            paths += json_paths(item, (*prefix, i))
    return paths


def dump(value) -> str:
    text = json.dumps(value, allow_nan=True)
    text = text.replace(json.dumps(DEEP), "[" * 100_000 + "]" * 100_000)
    return text.replace(json.dumps(HUGE), json.dumps("x" * 1_000_000))


def hostile_values() -> list:
    return [None, True, False, 0, -1, 7, 2**31, 2**64, 10**30, -(2**63), 1.5, math.nan, math.inf, -math.inf, "",
            "x", ".", "..", "seed-0", "validation", "data-00000-of-00001.arrow", "tokenizer.json",
            "../outside/data-00000-of-00001.arrow", "../../outside/data-00000-of-00001.arrow",
            "../outside/tokenizer.json", f"{OUTSIDE}/data-00000-of-00001.arrow", f"{OUTSIDE}/tokenizer.json",
            "seed-0/../../outside/state.json", "a\\b", "nul\x00byte", "<script>alert(1)</script>", [], {}, [1, "a"],
            {"a": 1}, {"filename": "../outside/data-00000-of-00001.arrow"}, DEEP, HUGE]


SPLITS = ["windows", "validation-windows", "validation", "seed-0", "seed-1"]


@st.composite
def damages(draw, files: list[str], pairs: list[tuple[str, str]]):
    """(kind, what) of one damage: an edit of a JSON file's field, of any file's bytes, a link out of the build, a
    same-size swap, a FIFO or directory for a file, a split cut short (its manifest entry re-hashed), an edited
    row count."""
    kind = draw(st.sampled_from(["json", "json", "json", "bytes", "link", "unlist", "swap", "special", "cut",
                                 "rows"]))
    if kind == "swap":
        return kind, draw(st.sampled_from(pairs))
    if kind == "special":
        return kind, (draw(st.sampled_from(files)), draw(st.sampled_from(["fifo", "directory"])))
    if kind == "cut":
        return kind, (draw(st.sampled_from(SPLITS)), draw(st.integers(0, 60)), draw(st.booleans()))
    if kind == "rows":
        return kind, (draw(st.sampled_from(SPLITS)), draw(st.sampled_from([-7, -1, 1, 7, 10**6])))
    if kind == "link":
        return kind, draw(st.sampled_from(files + ["seed-0", "seed-1", "validation", "windows"]))
    if kind == "json":
        return kind, (draw(st.sampled_from(JSON_FILES)), draw(st.integers(0, 10**6)),
                      draw(st.sampled_from(["set", "set", "set", "delete", "add", "rename"])),
                      draw(st.sampled_from(hostile_values())))
    if kind == "bytes":
        return kind, (draw(st.sampled_from(files)), draw(st.sampled_from(["truncate", "flip", "append", "empty",
                                                                          "delete"])),
                      draw(st.floats(0, 1)), draw(st.integers(1, 255)))
    if kind == "unlist":  # the manifest forgets a split or one of its files, which stay on disk
        return kind, (draw(st.sampled_from(["windows", "validation-windows", "validation", "seed-0", "seed-1"])),
                      draw(st.integers(-1, 2)))
    raise AssertionError(kind)


def damage(build: Path, outside: Path, kind: str, what) -> tuple | None:
    """Apply one damage; the manifest path edited (None for other damage)."""
    if kind == "link":
        target = build / what
        copy = outside / what.replace("/", "-")
        (shutil.copytree if target.is_dir() else shutil.copy)(target, copy)
        (shutil.rmtree if target.is_dir() else Path.unlink)(target)
        target.symlink_to(copy)
        return None
    if kind == "swap":
        a, b = build / what[0], build / what[1]
        first, second = a.read_bytes(), b.read_bytes()
        a.write_bytes(second)
        b.write_bytes(first)
        return None
    if kind == "special":
        name, form = what
        (build / name).unlink()
        os.mkfifo(build / name) if form == "fifo" else (build / name).mkdir()
        return None
    if kind == "cut":  # at least one row goes: a cut that keeps every row is the same split written again
        split, rows, record_rows = what
        held = json.loads((build / "manifest.json").read_text(encoding="utf-8"))["splits"][split]["rows"]
        if held:
            cut_split(build, split, min(rows, held - 1), record_rows=record_rows)
        return ("splits", split)
    if kind == "rows":
        split, delta = what
        manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))
        manifest["splits"][split]["rows"] = max(0, manifest["splits"][split]["rows"] + delta)
        (build / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return ("splits", split, "rows")
    if kind == "unlist":
        split, index = what
        manifest = json.loads((build / "manifest.json").read_text(encoding="utf-8"))
        if index < 0:
            del manifest["splits"][split]
        else:
            del manifest["splits"][split]["files"][index]
        (build / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return ("splits", split)
    if kind == "bytes":
        name, op, where, byte = what
        path = build / name
        data = path.read_bytes()
        at = min(int(where * len(data)), max(len(data) - 1, 0))
        if op == "delete":
            path.unlink()
            return None
        new = {"truncate": data[:at], "empty": b"", "append": data + bytes([byte]) * 16,
               "flip": data[:at] + bytes([data[at] ^ byte]) + data[at + 1:] if data else b"\xff"}[op]
        path.write_bytes(new)
        if name == "manifest.json":  # a manifest that still parses: the field the bytes changed, as a JSON edit
            with contextlib.suppress(ValueError):
                paths = differing(json.loads(data), json.loads(new))
                return next((p for p in paths if not descriptive(p)), paths[0] if paths else None)
        return None
    name, index, op, value = what
    if isinstance(value, str):
        value = value.replace(OUTSIDE, str(outside))
    path = build / name
    data = json.loads(path.read_text(encoding="utf-8"))
    paths = json_paths(data)
    key_path = paths[index % len(paths)]
    *parents, last = key_path
    parent = data
    for key in parents:
        parent = parent[key]
    if op == "set":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif isinstance(parent, dict):  # add a key beside it, or rename it
        new_key = value if isinstance(value, str) else "extra"
        if op == "rename":
            parent[new_key] = parent.pop(last)
        else:
            parent[new_key] = value
            key_path = (*parents, new_key)  # what the edit touched: a new field beside the one drawn
    else:
        parent.append(value)
    path.write_text(dump(data), encoding="utf-8")
    return key_path if name == "manifest.json" else None


def differing(a, b, prefix: tuple = ()) -> list[tuple]:
    """The key paths where two JSON values differ (a whole object or list where their keys or lengths do)."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [p for k in a for p in differing(a[k], b[k], (*prefix, k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in differing(x, y, (*prefix, i))]
    return [] if a == b else [prefix]


def descriptive(key_path: tuple | None) -> bool:
    """Whether a manifest edit at `key_path` (None: another damage) touches only DESCRIPTIVE fields."""
    if key_path is None:
        return False
    dotted = ".".join(map(str, key_path))
    checked = any(dotted == key or dotted.startswith(key + ".") for key in CHECKED)  # config.seeds is not seed
    return dotted.startswith(DESCRIPTIVE) and not checked


def meaning(build: Path) -> dict:
    """What each file of `build` says: JSON files as parsed (a re-serialised file says the same), the tokenizer as
    mlmprep loads it (keys the tokenizers library ignores, and the `</s>` frame a build adds for transformers and
    mlmprep takes off again, change nothing), other files as bytes."""
    from mlmprep.tokenizer.load import load_tokenizer

    out = {}
    for path in sorted(p for p in build.rglob("*") if p.is_file()):
        data = path.read_bytes()
        try:
            if path.name == "tokenizer.json":
                data = load_tokenizer(path).to_str()
            elif path.suffix == ".json":
                data = json.loads(data)
        except Exception:  # unreadable: compared as bytes
            pass
        out[str(path.relative_to(build))] = data
    return out


# ----------------------------------------------------------------------------- running the readers
def cli(args: list[str]) -> tuple[int, str]:
    """(exit code, output) of an mlmprep command run in this process; a traceback fails the case."""
    result = CliRunner().invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"mlmprep {' '.join(args)}: {type(result.exception).__name__}: {result.exception}")
    assert "Traceback" not in result.output, result.output
    if result.exit_code == 2:
        assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output
    return result.exit_code, result.output


class Started(Exception):
    """Raised by the hook at the first microbatch: everything train reads before it trains was read."""


def train_start(build: Path, out: Path) -> tuple[int, str]:
    """(2, the message) if train refuses the build before its first step, else (0, "")."""

    def hook(*_):
        raise Started

    try:
        fit(TrainConfig(data=str(build), out=str(out), max_steps=1, eval_every=0, save_every=0, warmup_steps=1),
            hook=hook)
    except Started:
        return 0, ""
    except MlmprepError as exc:
        assert "\n" not in str(exc), str(exc)
        return 2, str(exc)
    raise AssertionError("the hook never ran")


def read(reader: str, build: Path, work: Path) -> tuple[int, str]:
    if reader == "train":
        return train_start(build, work / "run")
    if reader == "html":
        return cli(["inspect", str(build), "--html", str(work / "report.html")])
    return cli(["inspect", str(build), "--examples", "2"])


READ_AT_START = ("seed-0/", "validation/", "tokenizer.json")  # what train reads before its first step
RECORDED = ("bytes", "swap", "special", "link")  # damage the manifest does not follow (cut and rows edit it)


def changed_paths(before: dict, after: dict, build: Path) -> set[str]:
    """The files whose meaning changed, appeared or went, and every path that is a link, a FIFO or a directory
    where a file was."""
    odd = {str(p.relative_to(build)) for p in build.rglob("*") if p.is_symlink() or p.is_fifo()}
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)} | odd


def watchdog(build: Path, hung: list) -> threading.Timer:
    """After HANG_S, note a hang and open each FIFO in `build` for writing, so that a reader waiting on one goes
    on (and the case fails) rather than the run hanging."""

    def release() -> None:
        hung.append(True)
        for fifo in (p for p in build.rglob("*") if p.is_fifo()):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(HANG_S, release)
    timer.start()
    return timer


def fuzz_case(fuzz_build: Path, root: Path, kind: str, what, reader: str) -> dict:
    """Copy the build, damage it, run verify and `reader`; the case's outcome, its properties asserted."""
    build, outside = root / "b", root / "outside"
    shutil.copytree(fuzz_build, build)
    outside.mkdir()
    for name in ("data-00000-of-00001.arrow", "state.json"):  # canaries: what a traversal name would reach
        shutil.copy(fuzz_build / "seed-0" / name, outside / name)
    shutil.copy(fuzz_build / "tokenizer.json", outside / "tokenizer.json")
    before = meaning(build)
    key_path = damage(build, outside, kind, what)
    changed = changed_paths(before, meaning(build), build)
    hung: list = []
    timer = watchdog(build, hung)
    try:
        with armed(outside) as reads:
            verified, report = cli(["verify", str(build)])
            code, said = read(reader, build, root)
    finally:
        timer.cancel()
    assert not hung, f"{kind} {what!r}: verify or {reader} waited on a FIFO"
    assert not reads, f"{kind} {what!r}: {reader} or verify read {reads} outside the build"
    assert verified in (0, 1, 2), report
    if changed and not descriptive(key_path):
        assert verified != 0 or code == 2, f"{kind} {what!r}: verify said ok and {reader} used the damage"
    if reader == "train" and kind in RECORDED and any(p.startswith(READ_AT_START) for p in changed):
        assert code == 2, f"{kind} {what!r}: train began on bytes the manifest does not record ({sorted(changed)})"
    return {"refused": code == 2, "caught": verified != 0, "kind": kind}


def test_fuzzed_damage_is_refused_or_caught_never_a_traceback_or_a_read_outside(watched, fuzz_build):
    root = Path(tempfile.mkdtemp(prefix="mlmprep-fuzz-"))
    files = sorted(str(p.relative_to(fuzz_build)) for p in fuzz_build.rglob("*") if p.is_file())
    sizes = {name: (fuzz_build / name).stat().st_size for name in files}
    pairs = [(a, b) for a in files for b in files if a < b and sizes[a] == sizes[b]
             and (fuzz_build / a).read_bytes() != (fuzz_build / b).read_bytes()]
    assert ("seed-0/data-00000-of-00001.arrow", "seed-1/data-00000-of-00001.arrow") in pairs
    outcomes = []

    @seed(SEED)
    @settings(max_examples=CASES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(damage_=damages(files, pairs), reader=st.sampled_from(["inspect", "html", "train"]))
    def case(damage_, reader):
        work = Path(tempfile.mkdtemp(dir=root))
        try:
            outcomes.append(fuzz_case(fuzz_build, work, *damage_, reader))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    try:
        case()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    refused, caught = sum(o["refused"] for o in outcomes), sum(o["caught"] for o in outcomes)
    kinds = {kind: sum(o["kind"] == kind for o in outcomes) for kind in sorted({o["kind"] for o in outcomes})}
    print(f"\nfuzz: {len(outcomes)} cases ({', '.join(f'{k} {n}' for k, n in kinds.items())}), 0 tracebacks, 0 hangs, "
          f"0 reads outside the build, 0 uses of changed bytes; {refused} refused by the reader, {caught} caught by "
          "verify")
    assert len(outcomes) >= min(CASES, 300) * 0.9  # hypothesis may skip a few duplicates, not the run
    assert refused and caught


# ----------------------------------------------------------------------------- object-store outages
OUTAGE_CASES = int(os.environ.get("MLMPREP_FUZZ_OUTAGES", "8"))
STORE_COMMANDS = ("build", "verify", "inspect", "train")
MLMPREP_LINES = ("note: ", "warning: ", "error: ")  # what mlmprep itself prints on stderr
NOISE = ("Task exception", "future: ", "Traceback", "Exception ", "Unclosed ")  # asyncio's and aiohttp's, before


@st.composite
def outages(draw):
    """(command, the request at which the store goes, for how many seconds, silent or not): resets or a black hole,
    short enough to ride out or longer than any retry."""
    return (draw(st.sampled_from(STORE_COMMANDS)), draw(st.integers(1, 12)), draw(st.sampled_from([1.0, 4.0, 3600.0])),
            draw(st.booleans()))


@pytest.mark.slow  # each case is a fresh process and an outage: half a minute
def test_fuzzed_store_outages_end_in_a_result_or_one_line_never_a_traceback_a_hang_or_noise(
        s3, tmp_path, tiny_corpus, tok):
    """Each of build (to the store), verify, inspect and train (from it) meets a store that goes down at a drawn
    request, for a drawn time, with resets or silently: it ends in a result with nothing on stderr but mlmprep's own
    lines, or in one line naming the store and exit 2; never a traceback, never a wait past the bounded retries
    (2 attempts, a 2 s read timeout); a build leaves no scratch, and never a prefix that reads as a build but is not
    the build."""
    from urllib.parse import urlsplit

    from tests.s3server import SwitchProxy
    from tests.test_storage import listing, remote_files  # skips the test, not the module, without s3fs and moto

    local_reference = tmp_path / "reference"
    assert cli_in_process(*build_args(tiny_corpus, local_reference, tok)).exit_code == 0
    bucket = s3.bucket()
    stored = f"s3://{bucket}/stored"
    s3.fs().put(str(local_reference), stored.removeprefix("s3://"), recursive=True)
    upstream = urlsplit(s3.endpoint)
    quick = json.dumps({"config_kwargs": {"read_timeout": 2}})
    outcomes = []

    @seed(SEED)
    @settings(max_examples=OUTAGE_CASES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(outage=outages())
    def case(outage):
        command, at, seconds, silent = outage
        work = Path(tempfile.mkdtemp(dir=tmp_path))
        proxy = SwitchProxy((upstream.hostname, upstream.port))
        proxy.down_at(at, seconds, silent=silent, any_request=True)
        out = f"s3://{bucket}/{work.name}"
        args = {"build": build_args(tiny_corpus, out, tok),
                "verify": ["verify", stored], "inspect": ["inspect", stored, "--examples", "1"],
                "train": ["train", stored, "--cache-dir", str(work / "cache"), "--out", str(work / "run"),
                          "--max-steps", "1"]}[command]
        env = {**cli_env(), "AWS_ENDPOINT_URL": proxy.endpoint, "AWS_MAX_ATTEMPTS": "2", "TMPDIR": str(work)}
        try:
            result = subprocess.run(cli_command(*args, "--storage-options", quick), env=env, capture_output=True,
                                    text=True, timeout=300)  # a hang fails the case here
        finally:
            proxy.close()
        said = f"{command}, down at request {at} for {seconds} s{' silently' if silent else ''}: {result.stderr}"
        assert result.returncode in (0, 2) and "Traceback" not in result.stderr, said
        lines = result.stderr.splitlines()
        assert not [line for line in lines if line.lstrip().startswith(NOISE)], said
        if command == "train":  # its log is on stderr too
            lines = lines[-1:] if result.returncode == 2 else []
        if result.returncode == 2:
            assert len(lines) == 1 and lines[0].startswith("error: ") and "s3://" in lines[0], said
        else:
            assert all(line.startswith(MLMPREP_LINES) for line in lines), said
        if command == "build":
            assert not list(work.glob("mlmprep-*")), said  # its scratch, and its workers' sockets, gone
            names = listing(s3, out)
            assert "manifest.json" not in names or remote_files(s3, out) == data_files(local_reference), said
            assert result.returncode == 2 or "manifest.json" in names, said
        outcomes.append((command, result.returncode, proxy.requests >= at))

    case()
    met = [o for o in outcomes if o[2]]
    print(f"\nstore outages: {len(outcomes)} cases, {len(met)} met an outage, "
          f"{sum(o[1] == 0 for o in met)} of them rode it out, 0 tracebacks, 0 hangs, no noise on stderr")
    assert len(outcomes) >= min(OUTAGE_CASES, 8) * 0.9 and met
