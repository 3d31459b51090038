"""Train from a build in object storage: each epoch's seed split fetched ahead into a bounded local cache.

A build at a URL (s3://, gs://, any fsspec protocol) is mirrored under CACHE/<name>-<url hash>-<manifest hash>/
as a build directory that holds only what a run reads now: manifest.json, the tokenizer, validation and the
seed splits of the current and the coming epochs. The schedule is known in advance (epoch e reads
seed-{e % N}), so while epoch e trains the next seeds download in the background, with bounded threads and
bandwidth; the epoch then opens its split memory-mapped like any local build. Each file is checked against
the manifest's sha256 as it lands, under a temporary name renamed into place, with a lock per file: runs and
ranks that share the cache download each file once and never read half of one. Seeds no longer needed are
evicted unless --cache-limit leaves room for them; a split some process is reading or fetching holds a
shared lock and is never evicted.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import queue
import re
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmprep.config import SEQ2SEQ, parse_size, size_text
from mlmprep.errors import CacheError, ConfigError, MlmprepError
from mlmprep.format import load
from mlmprep.format.manifest import FileRecord
from mlmprep.format.write import MANIFEST
from mlmprep.storage import client_options, is_url, parse_options, protocol, unanswered, unreachable

CHUNK = 8 << 20  # bytes per ranged read: one request, retried on its own
ATTEMPTS = 5  # tries of one ranged read before the run stops
BACKOFF_S = 0.25  # the first retry's wait, doubled at each
SOURCE = "source.json"  # in each mirror: the URL and manifest it mirrors, for `mlmprep cache ls`
LOCKS = ".locks"


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/mlmprep, else ~/.cache/mlmprep."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mlmprep"


# ----------------------------------------------------------------------------- locks
def lock_file(path: Path, *, shared: bool = False, wait: bool = True) -> int | None:
    """An fcntl lock on `path` (created if needed), held until the returned descriptor is closed; None when
    `wait` is off and another holder has it. Each call opens its own descriptor, so threads of one process
    exclude one another as processes do."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def locked(path: Path, *, shared: bool = False, wait: bool = True) -> Iterator[bool]:
    """lock_file for a `with` block; yields whether the lock was taken."""
    fd = lock_file(path, shared=shared, wait=wait)
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


# ----------------------------------------------------------------------------- downloads
class Throttle:
    """Bytes per second shared by every download thread (0: unlimited): each chunk books the next free slot."""

    def __init__(self, rate: float):
        self.rate, self.free_at, self.lock = rate, 0.0, threading.Lock()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.free_at = max(self.free_at, now) + n / self.rate
            wait = self.free_at - now
        time.sleep(wait)


class Workers:
    """A fixed number of daemon threads running submitted calls: a download still running when the run ends
    is dropped with the process (its temporary file is redone by the next run), never waited for."""

    def __init__(self, n: int, name: str):
        self.tasks: queue.Queue = queue.Queue()
        self.n = n
        for k in range(n):
            threading.Thread(target=self.work, name=f"{name}-{k}", daemon=True).start()

    def stop(self) -> None:
        """End each thread once the calls submitted before are done."""
        for _ in range(self.n):
            self.tasks.put(None)

    def submit(self, fn: Callable, *args) -> Future:
        future: Future = Future()
        self.tasks.put((future, fn, args))
        return future

    def work(self) -> None:
        while (task := self.tasks.get()) is not None:
            future, fn, args = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to whoever waits on the future
                future.set_exception(exc)


class Stopped(Exception):
    """A background fetch abandoned because its cache was closed."""


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


@dataclass(frozen=True)
class RowLengths:
    """A seed split's row lengths without its tokens: what planning the steps of an epoch reads."""

    path: str
    enc_lengths: np.ndarray  # int64 [n]
    dec_lengths: np.ndarray  # int64 [n]; zeros for mlm

    def __len__(self) -> int:
        return len(self.enc_lengths)


# ----------------------------------------------------------------------------- the cache of one build
class SeedCache:
    """The local mirror of the build at `url` under `cache_dir`, opened for one run (or one rank of it)."""

    def __init__(self, url: str, cache_dir: str | Path | None = None, *, limit: int | None = None,
                 prefetch_epochs: int = 1, threads: int = 4, bandwidth: int | None = None,
                 options: dict | None = None, log: Callable[[str], None] = lambda _: None):
        import fsspec.core

        self.url, self.log, self.prefetch_epochs = str(url).rstrip("/"), log, prefetch_epochs
        try:
            self.fs, self.remote = fsspec.core.url_to_fs(self.url, **client_options(protocol(self.url), options or {}))
        except (ImportError, ValueError) as exc:
            raise CacheError(f"{self.url}: no file system for this URL ({one_line(exc)}); install the extra it "
                             "needs, e.g. pip install 'mlmprep[s3]' or 'mlmprep[gcs]'") from None
        except TypeError as exc:  # an option the file system does not take (some clients say so only when used)
            raise ConfigError(f"{self.url}: {one_line(exc)}; check --storage-options") from None
        raw = self.manifest_bytes()
        base = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.key = hashlib.sha256(self.url.encode("utf-8")).hexdigest()[:10]
        name = re.sub(r"[^A-Za-z0-9._-]", "_", self.url.rsplit("/", 1)[-1]) or "build"
        self.root = base / f"{name}-{self.key}-{hashlib.sha256(raw).hexdigest()[:10]}"
        self.locks = self.root / LOCKS
        self.open_fd = lock_file(self.locks / "open.lock", shared=True)  # `cache clear` leaves a mirror in use
        self.held: dict[str, int] = {}  # split -> shared lock fd: splits this run reads
        self.jobs: dict[str, Future] = {}  # split -> its background fetch
        self.stopping = threading.Event()
        self.throttle = Throttle(bandwidth or 0)
        self.workers, self.prefetcher = Workers(threads, "fetch"), Workers(1, "prefetch")
        self.limit, self.wait_s, self.skipped = limit, None, set()
        self.last_epoch: int | None = None  # the run's last epoch, when known: no seed is prefetched past it
        try:
            self.open(base, raw)
        except BaseException:
            self.close()
            raise

    # -- opening
    def open(self, base: Path, raw: bytes) -> None:
        """Install the manifest, check it and the limit, then fetch the tokenizer and validation."""
        self.remove_stale(base)
        self.install(MANIFEST, raw)
        self.manifest = load.read_manifest(self.root)
        self.sizes = {name: entry.bytes for name, entry in self.manifest.splits.items()}
        if unlisted := [name for name, entry in self.manifest.splits.items() if entry.record("state.json") is None]:
            raise CacheError(f"{self.url}/{MANIFEST}: lists no state.json for {', '.join(unlisted)}, so those splits "
                             "cannot be checked as they download; rebuild it with this mlmprep")
        self.check_limit()
        write_json_once(self.root / SOURCE, {"url": self.url, "manifest_sha256": hashlib.sha256(raw).hexdigest()})
        self.fetch_tokenizer()
        if "validation" in self.manifest.splits:
            self.hold("validation")
            self.fetch_split("validation")

    def manifest_bytes(self) -> bytes:
        """The build's manifest.json, its commit point: a prefix without one is no build."""
        try:
            return self.read_range(f"{self.remote}/{MANIFEST}", f"{self.url}/{MANIFEST}", None, None)
        except CacheError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                raise CacheError(f"{self.url}: no {MANIFEST}, so no finished build there; give the URL mlmprep build "
                                 "wrote to (its manifest is written last)") from None
            if isinstance(exc.__cause__, TypeError):  # the client was given an option it does not take
                raise ConfigError(f"{self.url}: {one_line(exc.__cause__)}; check --storage-options") from None
            if unreachable(exc.__cause__):  # before the run: no checkpoint to speak of
                raise CacheError(f"{self.url}: {unanswered(exc.__cause__)}; check the endpoint (AWS_ENDPOINT_URL, "
                                 "--storage-options), the network and that the store is up") from None
            raise

    def remove_stale(self, base: Path) -> None:
        """Delete mirrors of older versions of this URL's build (rebuilt since) that no run has open."""
        for other in base.glob(f"*-{self.key}-*"):
            if other != self.root and (other / SOURCE).is_file():
                with locked(other / LOCKS / "open.lock", wait=False) as free:
                    if free:
                        shutil.rmtree(other, ignore_errors=True)

    def install(self, name: str, data: bytes) -> None:
        """Write a small top-level file (the manifest) under a temporary name and rename it into place."""
        path = self.root / name
        with locked(self.locks / f"{name}.lock"):
            if not path.is_file() or path.read_bytes() != data:
                tmp = path.with_name(f"{name}.part")
                tmp.write_bytes(data)
                os.replace(tmp, path)

    def check_limit(self) -> None:
        """Refuse, before any data is fetched, a --cache-limit that cannot hold one seed split and validation."""
        largest = max(self.sizes[name] for name in self.manifest.seed_splits)
        need = largest + self.sizes.get("validation", 0)
        if self.limit is not None and self.limit < need:
            validation = self.sizes.get("validation", 0)
            raise ConfigError(f"--cache-limit {size_text(self.limit)} is too small for {self.url}: one seed split "
                              f"takes up to {size_text(largest)} and validation {size_text(validation)}; give at least "
                              f"{size_text(need)} (two seeds, {size_text(largest + need)}, let the next one download "
                              "during an epoch)")

    def fetch_tokenizer(self) -> None:
        """The build's tokenizer.json, checked against the manifest's tokenizer sha256 before it is renamed in."""
        from mlmprep.tokenizer.load import load_tokenizer, tokenizer_sha256

        record = self.manifest.tokenizer
        path = self.root / record.file
        if path.is_file():
            return
        with locked(self.locks / "tokenizer.lock"):
            if path.is_file():
                return
            url = f"{self.url}/{record.file}"
            tmp = path.with_name(path.name + ".part.json")
            tmp.write_bytes(self.read_range(f"{self.remote}/{record.file}", url, None, None))
            try:
                same = tokenizer_sha256(load_tokenizer(tmp)) == record.sha256
            except MlmprepError:
                same = False
            if not same:
                tmp.unlink()
                raise CacheError(f"{url}: not the tokenizer the build used (sha256 differs from the manifest); the "
                                 f"build in the store is damaged: run `mlmprep verify` on it or rebuild it")
            os.replace(tmp, path)

    # -- what an epoch reads
    def ensure(self, name: str, upcoming: list[str]) -> Path:
        """Make split `name` local and checked (waiting for its background fetch, if one runs) and keep it from
        eviction while it is read; evict what neither it nor `upcoming` needs; start fetching `upcoming` in the
        background. Returns the mirror's root, a build directory; `wait_s` is how long this waited."""
        start = time.monotonic()
        self.hold(name)
        for other in [s for s in self.held if s not in (name, "validation")]:
            os.close(self.held.pop(other))
        if (job := self.jobs.pop(name, None)) is not None:
            with contextlib.suppress(Exception):  # a failed background fetch is redone here, where errors stop the run
                job.result()
        keep = [name, *upcoming]
        self.make_room(name, keep, required=True)
        self.fetch_split(name)
        self.wait_s = time.monotonic() - start
        for later in dict.fromkeys(upcoming):
            if later != name and later not in self.jobs and not self.complete(later):
                self.jobs[later] = self.prefetcher.submit(self.prefetch, later, keep)
        return self.root

    def prefetch(self, name: str, keep: list[str]) -> None:
        """Fetch split `name` ahead of its epoch if the limit has room; failures wait for the boundary."""
        if (full := self.make_room(name, keep, required=False)) is not None:
            if name not in self.skipped:
                self.skipped.add(name)
                self.log(f"{self.url}: not prefetching {name}: {full}; it is fetched when its epoch starts")
            return
        try:
            with locked(self.locks / f"{name}.use", shared=True):
                self.fetch_split(name)
        except Stopped:
            pass
        except MlmprepError as exc:
            self.log(f"prefetching {name} failed ({exc}); it is tried again when its epoch starts")

    def lengths(self, name: str) -> RowLengths | load.Split:
        """Split `name`'s row lengths for planning. Where the Arrow schema stores fixed-size lists (exact token
        windows) every row has the schema's widths, and the manifest has the row count: no download. Otherwise
        the split is fetched (evicting as an epoch would) and opened."""
        rows, objective = self.manifest.splits[name].rows, self.manifest.objective
        widths = self.fixed_widths(name)
        if widths is not None:
            enc, dec = widths
            return RowLengths(f"{self.url}/{name}", np.full(rows, enc, np.int64),
                              np.full(rows, dec if objective in SEQ2SEQ else 0, np.int64))
        with locked(self.locks / f"{name}.use", shared=True):
            self.make_room(name, [name], required=True)
            self.fetch_split(name)
            return load.open_split(self.root / name, objective=objective)

    def fixed_widths(self, name: str) -> tuple[int, int] | None:
        """(input_ids, labels) widths of split `name` when both columns are fixed-size lists, else None. The schema
        is the head of the split's first data file: every split of a build is written with the same one, so the
        local validation split's answers when there is one."""
        import pyarrow as pa

        source = "validation" if (self.root / "validation" / "state.json").is_file() else name
        record = next((f for f in self.manifest.splits[source].files if f.name.endswith(".arrow")), None)
        if record is None:
            return None
        local = self.root / source / record.name
        if self.landed(local, record):
            with pa.memory_map(str(local)) as head:
                schema = pa.ipc.open_stream(head).schema
        else:
            head = self.read_range(f"{self.remote}/{source}/{record.name}", f"{self.url}/{source}/{record.name}",
                                   0, min(record.bytes, 1 << 16))
            schema = pa.ipc.open_stream(pa.BufferReader(head)).schema
        types = [schema.field(column).type for column in load.COLUMNS if column in schema.names]
        if len(types) != 2 or not all(pa.types.is_fixed_size_list(t) for t in types):
            return None
        return types[0].list_size, types[1].list_size

    # -- bounded disk
    def hold(self, name: str) -> None:
        if name not in self.held:
            self.held[name] = lock_file(self.locks / f"{name}.use", shared=True)

    def used(self) -> int:
        return tree_bytes(self.root)

    def missing(self, name: str) -> int:
        """Bytes of split `name` not yet in the mirror."""
        return sum(f.bytes for f in self.manifest.splits[name].files if not self.landed(self.root / name / f.name, f))

    def complete(self, name: str) -> bool:
        return self.missing(name) == 0

    def make_room(self, name: str, keep: list[str], *, required: bool) -> str | None:
        """Evict seed splits outside `keep` that no process reads (without a limit, all of them; with one, the
        least recently fetched until `name` fits), then check the free disk. Returns why `name` does not fit,
        or None; when `required`, a disk without room for it stops the run in one line."""
        need = self.missing(name)
        seeds = set(self.manifest.seed_splits)
        present = sorted((p for p in self.root.iterdir() if p.name in seeds and p.name not in keep),
                         key=lambda p: getattr(stat_or_none(p), "st_mtime", 0.0))
        for path in present:
            if self.limit is not None and self.used() + need <= self.limit:
                break
            with locked(self.locks / f"{path.name}.use", wait=False) as free:
                if free:
                    self.log(f"{self.url}: evicting {path.name} from the cache ({size_text(self.sizes[path.name])})")
                    shutil.rmtree(path, ignore_errors=True)  # (another thread may have evicted it just now)
        free = shutil.disk_usage(self.root).free
        if need > free:
            if not required:
                return f"{self.root} has {size_text(free)} free, {name} needs {size_text(need)}"
            raise CacheError(f"{self.root}: {size_text(free)} free, but {name} of {self.url} needs {size_text(need)}; "
                             "free disk space or give --cache-dir on a larger disk")
        if self.limit is not None and self.used() + need > self.limit:
            return f"--cache-limit {size_text(self.limit)} has no room for it beside the splits in use"
        return None

    # -- files
    @staticmethod
    def landed(path: Path, record: FileRecord) -> bool:
        """A file is in the mirror once renamed into place, which only a checked download does."""
        found = stat_or_none(path)
        return found is not None and found.st_size == record.bytes

    def fetch_split(self, name: str) -> None:
        """Download split `name`'s missing files (fetch_threads at once), logging its size and speed."""
        records = [f for f in self.manifest.splits[name].files if not self.landed(self.root / name / f.name, f)]
        if not records:
            return
        size, start = sum(f.bytes for f in records), time.monotonic()
        self.log(f"fetching {name} of {self.url}: {size_text(size)} in {len(records)} files")
        futures = [self.workers.submit(self.fetch_file, name, f) for f in records]
        errors = [f.exception() for f in futures]
        if error := next((e for e in errors if e is not None), None):
            raise error
        seconds = time.monotonic() - start
        self.log(f"fetched {name}: {size_text(size)} in {seconds:.1f} s ({size_text(size / max(seconds, 1e-9))}/s)")

    def fetch_file(self, split: str, record: FileRecord) -> None:
        """One file: under its lock, downloaded to a temporary name, checked against the manifest's sha256 and
        renamed into place; a mismatch is downloaded once more, then stops the run naming the file."""
        path = self.root / split / record.name
        url = f"{self.url}/{split}/{record.name}"
        with locked(self.locks / f"{split}--{record.name}.lock"):
            if self.landed(path, record):  # another run or rank fetched it while this one waited
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".part")
            for attempt in (1, 2):
                if self.download(f"{self.remote}/{split}/{record.name}", url, tmp, record.bytes) == record.sha256:
                    os.replace(tmp, path)
                    return
                if attempt == 1:
                    self.log(f"{url}: sha256 differs from the manifest's; downloading it once more")
            tmp.unlink()
            raise CacheError(f"{url}: sha256 differs from the manifest's in two downloads, so the build in the store "
                             f"is damaged and nothing is trained on it; run `mlmprep verify` on it, or rebuild it")

    def download(self, remote: str, url: str, tmp: Path, size: int) -> str:
        """Copy `size` bytes of `remote` to `tmp` in ranged reads, each retried on its own; returns their sha256
        ("short" when the object has fewer bytes)."""
        digest, done = hashlib.sha256(), 0
        with open(tmp, "wb") as out:
            while done < size:
                if self.stopping.is_set():
                    raise Stopped
                data = self.read_range(remote, url, done, min(done + CHUNK, size))
                if not data:
                    return "short"
                self.throttle.take(len(data))
                out.write(data)
                digest.update(data)
                done += len(data)
            out.flush()
            os.fsync(out.fileno())
        return digest.hexdigest()

    def read_range(self, remote: str, url: str, start: int | None, end: int | None) -> bytes:
        """Bytes [start, end) of `remote` (all of it for None), retried with backoff; a store that stays down
        stops the run in one line naming the URL."""
        for attempt in range(ATTEMPTS):
            try:
                return self.fs.cat_file(remote, start=start, end=end)
            except Exception as exc:  # whatever the store's client raises: retried, then one line
                if attempt == ATTEMPTS - 1 or isinstance(exc, (FileNotFoundError, PermissionError, TypeError)):
                    tries = f"{attempt + 1} tries" if attempt else "1 try"
                    raise CacheError(f"{url}: cannot be read ({one_line(exc)}) after {tries}; the run stops here, its "
                                     "checkpoints kept: resume it with --resume once the store answers") from exc
                time.sleep(BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop background fetches and release this run's locks."""
        self.stopping.set()
        self.workers.stop()
        self.prefetcher.stop()
        for fd in [*self.held.values(), self.open_fd]:
            os.close(fd)
        self.held = {}


def stat_or_none(path: Path) -> os.stat_result | None:
    """The file's stat, or None once it is gone (renamed into place or evicted by another thread or run)."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def tree_bytes(root: Path) -> int:
    """Bytes of the files under a mirror (its locks left out), while other threads and runs change it."""
    sizes = (stat_or_none(p) for p in root.rglob("*") if LOCKS not in p.parts)
    return sum(st.st_size for st in sizes if st is not None and stat.S_ISREG(st.st_mode))


def write_json_once(path: Path, data: dict) -> None:
    if not path.is_file():
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)


# ----------------------------------------------------------------------------- what the trainer calls
OPEN: dict[str, SeedCache] = {}  # DATA URL -> the cache this process's run opened for it


def open_data(cfg, log: Callable[[str], None] = lambda _: None) -> str:
    """The build directory a run reads: DATA itself, or for a URL its cache mirror, opened now (the manifest,
    tokenizer and validation fetched; a --cache-limit too small for one seed refused)."""
    if not is_url(cfg.data):
        return cfg.data
    if (old := OPEN.pop(cfg.data, None)) is not None:
        old.close()
    limit, bandwidth = (None if value is None else parse_size(value, option) for option, value in
                        (("--cache-limit", cfg.cache_limit), ("--fetch-bandwidth", cfg.fetch_bandwidth)))
    OPEN[cfg.data] = SeedCache(cfg.data, cfg.cache_dir, limit=limit, prefetch_epochs=cfg.prefetch_epochs,
                               threads=cfg.fetch_threads, bandwidth=bandwidth,
                               options=parse_options(cfg.storage_options), log=log)
    if not cfg.max_steps and not cfg.max_tokens:  # the run ends with epoch --epochs - 1: nothing past it is fetched
        OPEN[cfg.data].last_epoch = cfg.epochs - 1
    return str(OPEN[cfg.data].root)


def close(data: str) -> None:
    """The run on `data` is over: stop its background fetches and release its locks."""
    if (cache := OPEN.pop(data, None)) is not None:
        cache.close()


def local_build(data: str) -> Path:
    """Where build `data` is read from on this machine: its cache mirror for an opened URL, else itself."""
    return OPEN[data].root if data in OPEN else Path(data)


def open_epoch(data: str, epoch: int, seeds: int | None = None, *, planning: bool = False,
               identity: str | None = None, rehash: bool = False):
    """Epoch `epoch`'s split of build `data` (load.open_epoch: `identity`, `rehash`). For a URL the split is first
    made local and the next --prefetch-epochs seeds start downloading; `planning` needs only the row lengths
    (RowLengths)."""
    cache = OPEN.get(data)
    if cache is None:
        return load.open_epoch(data, epoch, seeds, identity=identity, rehash=rehash)
    name = load.epoch_split(cache.manifest, epoch, seeds)
    if planning:
        return cache.lengths(name)
    last = epoch + cache.prefetch_epochs
    if cache.last_epoch is not None:
        last = min(last, cache.last_epoch)
    upcoming = [load.epoch_split(cache.manifest, later, seeds) for later in range(epoch + 1, last + 1)]
    return load.open_epoch(cache.ensure(name, upcoming), epoch, seeds, identity=identity, rehash=rehash)


def fetch_wait(data: str) -> float | None:
    """Seconds the last epoch start of URL `data` waited for its split (None for a local build)."""
    return OPEN[data].wait_s if data in OPEN else None


# ----------------------------------------------------------------------------- `mlmprep cache`
def mirrors(cache_dir: str | Path | None = None) -> list[dict]:
    """The builds in the cache: directory, URL, bytes, splits held and whether a run has it open."""
    base = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    found = []
    for root in sorted(base.glob("*/" + SOURCE)):
        root = root.parent
        source = json.loads((root / SOURCE).read_text(encoding="utf-8"))
        with locked(root / LOCKS / "open.lock", wait=False) as free:
            in_use = not free
        splits = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != LOCKS)
        found.append({"dir": root, "url": source["url"], "bytes": tree_bytes(root), "splits": splits, "in_use": in_use})
    return found


def clear(cache_dir: str | Path | None = None, url: str | None = None) -> tuple[list[dict], list[dict]]:
    """Delete the cache's mirrors (of `url` only, if given) that no run has open; returns (removed, in use)."""
    removed, busy = [], []
    for mirror in mirrors(cache_dir):
        if url is not None and mirror["url"] != url.rstrip("/"):
            continue
        with locked(mirror["dir"] / LOCKS / "open.lock", wait=False) as free:
            if free:
                shutil.rmtree(mirror["dir"])
        (removed if free else busy).append(mirror)
    return removed, busy


__all__ = ["RowLengths", "SeedCache", "clear", "close", "default_cache_dir", "fetch_wait", "local_build",
           "mirrors", "open_data", "open_epoch"]
