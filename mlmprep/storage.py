"""Paths that may be URLs (s3://, gs://, any installed fsspec protocol): the one place mlmprep talks to fsspec.

Plain functions over (url, storage options), shared by every room: a path without a protocol stays a local
path and never comes here. Credentials and endpoints come from where the protocol's library looks (for S3:
the environment, ~/.aws, AWS_ENDPOINT_URL); `--storage-options JSON` adds what those cannot say. Every
failure of the store becomes one line naming the URL (`errors`), and S3 requests are retried with bounded
exponential backoff (RETRIES).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from mlmprep.errors import CacheError, ConfigError, CorpusError, MlmprepError

# protocol -> the extra that installs its fsspec implementation
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
# S3 attempts per request, botocore's "standard" mode: 500/503, throttling, refused and dropped connections, and
# attempts the store leaves unanswered for READ_TIMEOUT seconds (a connection gone silent, no reset ever sent) are
# retried with exponential backoff and jitter (at most 20 s a wait); s3fs repeats a request still failing or cut
# off mid-transfer as many times (S3FileSystem.retries). AWS_MAX_ATTEMPTS (botocore's own variable) sets both
# counts; a connection attempt waits CONNECT_TIMEOUT seconds. Bounded: a store gone silent fails a request within
# RETRIES**2 * READ_TIMEOUT seconds and the waits (AWS_MAX_ATTEMPTS=2: about a minute). --storage-options
# '{"config_kwargs": {"read_timeout": 60}}' changes a timeout and keeps the rest.
RETRIES = 5
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 15
LOCK = ".mlmprep-lock"  # the object that says a build is writing under a prefix
# --storage-options for the corpus URLs this process reads: set by the build in its driver and in each task
# (readers open files by name alone, deep inside formats that know nothing of options)
CORPUS_OPTIONS: dict = {}
CORPUS_BLOCK = 1 << 16  # bytes a corpus read fetches at least: a probe of a first byte or a line start costs no more


def is_url(path) -> bool:
    """Whether `path` names object storage (PROTOCOL://...) rather than a local file (file:// is local)."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def protocol(url: str) -> str:
    return url.split("://", 1)[0]


def join(url: str, *parts: str) -> str:
    """`url`/part/part, with one slash between each."""
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts)])


def parse_options(text: str | None, option: str = "--storage-options") -> dict:
    """The JSON object of `--storage-options` as a dict ({} for None), refused in one line if it is not one."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{option}: not JSON ({exc}); give an object such as "
                          "'{\"endpoint_url\": \"http://host:9000\"}'") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{option}: a JSON object of the file system's options, got {type(value).__name__}")
    return value


def filesystem(url: str, options: dict | None = None, block: int | None = None):
    """(fsspec file system, path inside it) for `url`; one whose files are read in ranges of at least `block`
    bytes, given one. A protocol whose library is missing is one line naming the extra that installs it; an
    unknown protocol is one line too."""
    try:
        fs = _filesystem(protocol(url), json.dumps(options or {}, sort_keys=True),
                         tuple(os.environ.get(name) for name in CLIENT_ENVIRONMENT), block)
    except ConfigError as exc:
        raise ConfigError(f"{url}: {exc}") from None
    return fs, fs._strip_protocol(url)


# what a client reads from the environment when it is made: a file system made before any of it changed is stale
CLIENT_ENVIRONMENT = ("AWS_ENDPOINT_URL", "AWS_MAX_ATTEMPTS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                      "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "GOOGLE_APPLICATION_CREDENTIALS")


@functools.lru_cache(maxsize=8)
def _filesystem(proto: str, options: str, environment: tuple, block: int | None):
    """One file system per protocol, options, environment and block size, made once: making an S3 client loads
    botocore's service model, a good part of a second."""
    import fsspec

    try:
        fs = fsspec.filesystem(proto, **client_options(proto, json.loads(options)))
    except ImportError:
        extra = EXTRAS.get(proto)
        hint = f"pip install 'mlmprep[{extra}]'" if extra else f"install the fsspec implementation of {proto}://"
        raise ConfigError(f"{proto}:// needs a package that is not installed; {hint}") from None
    except ValueError as exc:
        if "protocol" in str(exc).lower():
            raise ConfigError(f"unknown protocol {proto}://; use s3://, gs:// or a local path") from None
        raise
    if proto in ("s3", "s3a"):
        fs.retries = attempts_per_request()
    if (loop := getattr(fs, "loop", None)) is not None:
        loop.set_exception_handler(quiet_dropped_connections)
    if block:
        fs.default_block_size = block
    return fs


def quiet_dropped_connections(loop, context: dict) -> None:
    """The exception handler of the file system's event loop: a task of the HTTP client that failed on a dropped
    connection (aiohttp's "Cannot write to closing transport" while a store is down) is not printed, since the
    request it served is retried or fails as one line; anything else is printed as asyncio prints it."""
    exc = context.get("exception")
    if exc is not None and unreachable(exc):
        return
    loop.default_exception_handler(context)


def client_options(proto: str, given: dict) -> dict:
    """The options a file system of `proto` is made with: --storage-options (`given`) over mlmprep's defaults,
    bounded retries and waits on S3 (a `config_kwargs` given is merged key by key: a read timeout of its own keeps
    the retries), and an S3 session that never asks the store to confirm an upload before its body is sent."""
    options: dict = {"skip_instance_cache": True, **given}  # the caller's cache is the one that knows the environment
    if proto in ("s3", "s3a"):
        config = given.get("config_kwargs", {})
        if isinstance(config, dict):  # anything else is the file system's to refuse
            options["config_kwargs"] = {"retries": {"total_max_attempts": attempts_per_request(), "mode": "standard"},
                                        "connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT, **config}
        if "session" not in given:
            options["session"] = s3_session(given.get("profile"))
    return options


def s3_session(profile: str | None):
    """An aiobotocore session whose S3 requests go without `Expect: 100-continue`: the HTTP client waits for the
    store's "100 Continue" with no timeout (the read timeout starts once the body is sent), so a store that stops
    answering without closing the connection would hold an upload for ever."""
    from aiobotocore.session import AioSession

    session = AioSession(profile=profile)
    session.register("before-send.s3", send_without_expect)
    return session


def send_without_expect(request, **_) -> None:
    """Drop the `Expect: 100-continue` header botocore puts on every upload (unsigned, so the signature holds)."""
    request.headers.pop("Expect", None)


def attempts_per_request() -> int:
    """RETRIES, or AWS_MAX_ATTEMPTS where it is a positive whole number."""
    given = os.environ.get("AWS_MAX_ATTEMPTS", "")
    return int(given) if given.isdigit() and int(given) > 0 else RETRIES


def unreachable(exc: BaseException) -> bool:
    """Whether `exc` says the store could not be reached or stopped answering: refused, no such host, timed out,
    the connection closed (botocore's and aiohttp's classes are matched by name: neither need be installed)."""
    return isinstance(exc, (TimeoutError, ConnectionError)) or any(
        c.__module__.split(".")[0] in ("botocore", "aiohttp", "urllib3")
        and c.__name__ in ("ConnectionError", "HTTPClientError", "ClientConnectionError", "ServerTimeoutError")
        for c in type(exc).__mro__)


@contextlib.contextmanager
def errors(url: str, error: type[MlmprepError] = CacheError) -> Iterator[None]:
    """Turn what the store says (missing bucket or object, access denied, an error that outlived the retries)
    into one `error` line naming `url`."""
    try:
        yield
    except MlmprepError:
        raise
    except TypeError as exc:  # the file system was given an option it does not take
        raise ConfigError(f"{url}: {first_line(exc)}; check --storage-options") from None
    except FileNotFoundError as exc:
        raise error(f"{url}: not found ({first_line(exc)}); check the bucket and the path") from None
    except PermissionError as exc:
        raise error(f"{url}: access denied ({first_line(exc)}); check the credentials (environment, ~/.aws, "
                    "--storage-options) and the bucket's permissions") from None
    except Exception as exc:
        if unreachable(exc):
            raise error(f"{url}: {unanswered(exc)}; check the endpoint (AWS_ENDPOINT_URL, --storage-options), "
                        "the network and that the store is up, then run it again") from None
        if isinstance(exc, (OSError, ValueError)):
            raise error(f"{url}: the storage failed ({first_line(exc)}); check the endpoint and try again") from None
        if "credentials" in type(exc).__name__.lower():  # botocore's NoCredentialsError, google-auth's
            raise error(f"{url}: no credentials ({first_line(exc)}); give them in the environment, ~/.aws or "
                        "--storage-options") from None
        raise


def unanswered(exc: BaseException) -> str:
    """What a store that could not be reached did, for an error line: how often it was asked, and its error."""
    n = attempts_per_request()
    return f"the store did not answer in {n} attempt{'s' if n > 1 else ''} per request ({first_line(exc)})"


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def preflight(url: str, options: dict | None, option: str) -> None:
    """Before any work: write and delete a probe object under `url`, so wrong credentials, a missing bucket or
    no permission to write is one line now, not a failure after the build."""
    fs, path = filesystem(url, options)
    probe = join(path, f".mlmprep-probe-{uuid.uuid4().hex}")
    with errors(f"{option} {url}", ConfigError):
        fs.pipe_file(probe, b"")
        fs.rm_file(probe)


def exists(url: str, options: dict | None = None) -> bool:
    fs, path = filesystem(url, options)
    with errors(url):
        return fs.exists(path)


def read_bytes(url: str, options: dict | None = None) -> bytes:
    fs, path = filesystem(url, options)
    with errors(url):
        return fs.cat_file(path)


def sizes(url: str, options: dict | None = None) -> dict[str, int]:
    """Every object under the prefix `url`, by its name relative to it, with its size."""
    fs, path = filesystem(url, options)
    with errors(url):
        found = fs.find(path, detail=True)
    root = path.rstrip("/") + "/"
    return {name[len(root):]: info["size"] for name, info in found.items() if name.startswith(root)}


def files(pattern: str, options: dict | None = None) -> list[tuple[str, int]]:
    """(url, size) of the objects a URL names: one object, every object under a prefix, or a glob's matches,
    sorted; each url keeps the pattern's protocol."""
    fs, path = filesystem(pattern, options)
    proto = protocol(pattern)
    with errors(pattern, CorpusError):
        if any(c in path for c in "*?["):
            found = {name: info for name, info in fs.glob(path, detail=True).items() if info["type"] == "file"}
        elif fs.isfile(path):
            found = {path: fs.info(path)}
        else:
            found = fs.find(path, detail=True)
    if not found:
        raise CorpusError(f"{pattern}: no such object, prefix or match; check the URL")
    return [(f"{proto}://{name}", info["size"]) for name, info in sorted(found.items())]


def use_corpus_options(options: dict) -> None:
    """Read corpus URLs in this process with `options` (a build's --storage-options)."""
    CORPUS_OPTIONS.clear()
    CORPUS_OPTIONS.update(options)


def open_corpus_url(url: str, compression: str | None = None, block: int = CORPUS_BLOCK):
    """An fsspec OpenFile reading corpus object `url` in place (ranges on demand, at least `block` bytes each,
    decompressed as a stream given a `compression`), with the corpus's storage options."""
    from fsspec.core import OpenFile

    # blocks of its own: the store's default (s3fs: 50 MiB) would fetch that much to find a line start
    fs, path = filesystem(url, CORPUS_OPTIONS, block)
    return OpenFile(fs, path, "rb", compression=compression)


def size(url: str, options: dict | None = None) -> int:
    """An object's size in bytes, asked of the store (not a listing cached earlier)."""
    fs, path = filesystem(url, CORPUS_OPTIONS if options is None else options)
    with errors(url, CorpusError):
        fs.invalidate_cache(path)
        return fs.size(path)


def get(url: str, local: str | Path, options: dict | None = None) -> None:
    """Copy one object (or every object under a prefix, with a trailing slash on neither) to `local`."""
    fs, path = filesystem(url, options)
    with errors(url):
        if fs.isfile(path):
            fs.get_file(path, str(local))
        else:
            fs.get(path.rstrip("/") + "/", str(local).rstrip("/") + "/", recursive=True)


def fetch(pairs: list[tuple[str, Path]], options: dict | None = None) -> None:
    """Download objects to their local paths (one file system: the urls share a prefix), concurrently where it can."""
    if not pairs:
        return
    fs, _ = filesystem(pairs[0][0], options)
    for _, local in pairs:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
    with errors(pairs[0][0]):
        fs.get([fs._strip_protocol(url) for url, _ in pairs], [str(local) for _, local in pairs])


def put(pairs: list[tuple[Path, str]], options: dict | None = None) -> None:
    """Upload local files to their URLs (one file system: the urls share a prefix), concurrently where it can."""
    if not pairs:
        return
    fs, _ = filesystem(pairs[0][1], options)
    with errors(pairs[0][1]):
        fs.put([str(local) for local, _ in pairs], [fs._strip_protocol(url) for _, url in pairs])


def remove(urls: list[str], options: dict | None = None) -> None:
    """Delete objects (missing ones are fine)."""
    if not urls:
        return
    fs, _ = filesystem(urls[0], options)
    paths = [fs._strip_protocol(url) for url in urls]
    with errors(urls[0]):
        existing = [p for p in paths if fs.exists(p)]
        if existing:
            fs.rm(existing)


def write(url: str, data: bytes, options: dict | None = None) -> None:
    """Write `data` to `url`, replacing what is there."""
    fs, path = filesystem(url, options)
    with errors(url):
        fs.pipe_file(path, data)


def create(url: str, data: bytes, options: dict | None = None) -> bool:
    """Write `data` to `url` only if nothing is there (S3: a conditional put, If-None-Match: *, which the store
    decides atomically); False when something already is."""
    fs, path = filesystem(url, options)
    with errors(url):
        try:
            fs.pipe_file(path, data, mode="create")
        except FileExistsError:
            return False
    return True

