"""Publish a build safely: one writer at a time, a staging directory beside the output, and one atomic
rename at the end, so a reader never meets half a build and nothing the user had is replaced silently.
A mount point (a Docker volume, a bind mount) cannot be renamed: there the lock and the staging directory are
inside it, and the files move in one by one with manifest.json last, the commit, as on object storage, which
has no rename either (see the section below). build/destination.py puts these to work for each kind of output."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from mlmprep import storage
from mlmprep.errors import CacheError, ConfigError, disk_error, printable
from mlmprep.format.manifest import Manifest, ManifestError
from mlmprep.format.scratch import pid_alive, scratch_directory
from mlmprep.format.write import MANIFEST, format_version, manifest_path


def build_directory(given: str | Path) -> Path:
    """The directory a build's --out names, absolute and with links resolved: a link to a directory is written
    through (its target is what the build replaces, the link stays), and "." is the current directory."""
    return Path(os.path.realpath(given or "."))


def check_output_path(out: Path, option: str = "--out", *, directory: bool = False) -> None:
    """Refuse an output path nothing can be written under, before any long work: a file on the way to it
    (FILE/sub), a directory where nothing may be created (/proc, /sys, read-only), or with `directory`, a
    file in the output directory's place, or a name that is not UTF-8 (tokenizers and JSON cannot hold it).
    Leaves nothing behind."""
    check_utf8_path(out, option)
    if directory and os.path.lexists(out) and not os.path.isdir(out):
        raise ConfigError(f"{option} {out}: exists and is not a directory; choose another {option}")
    existing = next((p for p in Path(os.path.abspath(out)).parents if os.path.lexists(p)), None)
    if existing is None:
        raise ConfigError(f"{option} {out}: the root directory cannot be replaced; choose another {option}")
    if not existing.is_dir():
        raise ConfigError(f"{option} {out}: {existing} is a file, not a directory; choose another {option}")
    if directory and mount_point(out):  # written inside it, not beside
        existing = Path(out)
    try:
        fd, probe = tempfile.mkstemp(prefix=".mlmprep-probe-", dir=existing)
    except OSError as exc:
        raise ConfigError(f"{option} {out}: cannot create files in {existing} ({exc.strerror}); "
                          f"choose another {option}") from None
    os.close(fd)
    os.unlink(probe)


def check_utf8_path(path: str | Path, option: str) -> None:
    """Refuse a path whose name (or its directories') holds bytes that are not UTF-8: the run's own JSON files
    record it, and could not give it back (they escape such bytes)."""
    if printable(os.path.abspath(path)) != os.path.abspath(path):
        raise ConfigError(f"{option} {printable(path)}: the path holds bytes that are not UTF-8; "
                          "choose or rename to a UTF-8 name")


INSIDE = (".mlmprep.lock", ".mlmprep.partial")  # the lock and the staging directory of a build inside a mount point
FOREIGN_KEPT = ("lost+found",)  # what a fresh file system's mount point holds; never a reason to refuse it


MOUNTINFO = "/proc/self/mountinfo"  # Linux: every mount point of this process's namespace


def mount_point(out: Path | str) -> bool:
    """Whether `out` is a mount point, which no rename can replace: a build is locked, staged and published
    inside it. The system's mount table decides where there is one: os.path.ismount compares devices, so it
    misses a bind mount of the same file system (a container volume can be one)."""
    path = os.path.realpath(out)
    try:
        with open(MOUNTINFO, "rb") as f:
            table = f.read()
    except OSError:  # no /proc (not Linux)
        return os.path.ismount(path)
    return os.fsencode(path) in mount_points(table)


def mount_points(table: bytes) -> set[bytes]:
    """The mount points a mountinfo table lists: each line's fifth field, where space, tab, newline and
    backslash are written as octal escapes."""
    return {re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])
            for fields in (line.split(b" ") for line in table.splitlines()) if len(fields) > 4}


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on `out` for the whole build; a second build into it fails at once. Directories
    made for `out` (its missing parents) are removed again if the build fails."""
    made = [p for p in Path(out).parents if not os.path.lexists(p)]
    out.parent.mkdir(parents=True, exist_ok=True)
    path = out / INSIDE[0] if mount_point(out) else out.parent / f".{out.name}.lock"
    try:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise (disk_error(path, exc, f"give a build in a writable place (its lock is written beside {out})")
                   or exc) from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise CacheError(f"--out {out}: another mlmprep build is writing it now (lock {path}); "
                                 "wait for it") from None
            if not path.exists() or os.stat(path).st_ino != os.fstat(fd).st_ino:
                raise CacheError(f"--out {out}: another mlmprep build just finished with it; run the command again")
            try:
                yield
            finally:
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)  # closing releases the lock
    except BaseException:
        for directory in made:  # innermost first; one that holds something now stays
            with contextlib.suppress(OSError):
                directory.rmdir()
        raise


@contextlib.contextmanager
def staging_dir(out: Path) -> Iterator[Path]:
    """A fresh `.NAME.partial` beside `out`, or inside it when it is a mount point (a leftover from a killed
    build is removed); removed on failure."""
    stage = out / INSIDE[1] if mount_point(out) else out.parent / f".{out.name}.partial"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def publish(stage: Path, out: Path) -> None:
    """Move the finished `stage` to `out`, replacing an old build (only reached with --force or an empty dir).

    A replacement is one atomic exchange of the two names where the system has it (Linux renameat2), so
    `out` is never missing; elsewhere two renames, and a kill between them leaves the old build in `.NAME.old`.
    A rename the system refuses as busy or across devices (a mount point mount_point did not see) publishes
    inside `out` instead.
    """
    if stage.parent == out:
        publish_inside(stage, out)
        return
    try:
        replace(stage, out)
    except OSError as exc:
        if exc.errno not in (errno.EBUSY, errno.EXDEV):
            raise
        publish_inside(moved_inside(stage, out), out)


def replace(stage: Path, out: Path) -> None:
    """Rename `stage` to `out`, swapping out an old build there (see publish)."""
    if not out.exists():
        stage.rename(out)
        return
    if exchange(stage, out):
        shutil.rmtree(stage)  # now holds the old build
        return
    old = out.parent / f".{out.name}.old"
    if old.exists():
        shutil.rmtree(old)
    out.rename(old)
    stage.rename(out)
    shutil.rmtree(old)


def moved_inside(stage: Path, out: Path) -> Path:
    """Move `stage` (beside `out`) to `out`'s own staging directory, copying where no rename reaches it (into
    another mount); nothing of it stays inside if this fails."""
    inside = out / INSIDE[1]
    out.mkdir(exist_ok=True)
    if inside.exists():
        shutil.rmtree(inside)
    try:
        shutil.move(stage, inside)
    except BaseException as exc:
        shutil.rmtree(inside, ignore_errors=True)
        raise (disk_error(inside, exc, f"free some space where --out {out} is") or exc) from None
    return inside


def publish_inside(stage: Path, out: Path) -> None:
    """Move the finished `stage` (inside the mount point `out`) into `out` entry by entry: the old build's manifest
    goes first (it stops being a build), then its files, then the new files, and the new manifest.json last."""
    (out / MANIFEST).unlink(missing_ok=True)
    for old in out.iterdir():
        if old.name not in INSIDE + FOREIGN_KEPT:
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old)
            else:
                old.unlink()
    for new in sorted(stage.iterdir(), key=lambda p: p.name == MANIFEST):
        new.rename(out / new.name)
    stage.rmdir()


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (renameat2 RENAME_EXCHANGE); False where the system cannot."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def read_existing(out: Path, identity: dict, fingerprint: str, *, tokenizer_sha: str | None, option_files: dict,
                  force: bool) -> dict | None:
    """The manifest of `out` if it already holds this very build (then there is nothing to do), else None.

    Raises CacheError when `out` holds something else and `--force` was not given: nothing the user has
    is overwritten silently.
    """
    if not out.exists():
        return None
    if not out.is_dir():
        raise CacheError(f"--out {out}: exists and is not a directory; choose another --out")
    path = manifest_path(out)
    if not path.is_file():
        if any(p.name not in INSIDE + FOREIGN_KEPT for p in out.iterdir()):  # not ours: not replaced with --force
            raise CacheError(f"--out {out}: exists and is not an mlmprep build (no {MANIFEST}); choose another --out")
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    return judge_existing(out, manifest, identity, fingerprint, tokenizer_sha=tokenizer_sha,
                          option_files=option_files, force=force, intact=lambda m: files_intact(out, m))


def judge_existing(out: Path | str, data, identity: dict, fingerprint: str, *, tokenizer_sha: str | None,
                   option_files: dict, force: bool, intact) -> Manifest | None:
    """The decision of read_existing on a read manifest `data` (None: unreadable) of `out`; `intact(manifest)`
    says whether every file it lists is there at its size. `option_files`: by option, the records ({path, bytes,
    sha256}) of the files it names (--exclude, --c4-badwords), which the build's corpus.stats.option_files must
    hold: an evaluation set edited since is a different build, as an edited corpus file is."""
    if not isinstance(data, dict) or not {"format_version", "mlmprep_version"} <= data.keys():
        # not ours (or not readable as ours): --force does not replace it either
        raise CacheError(f"--out {out}: exists and is not an mlmprep build ({MANIFEST} is not an mlmprep manifest); "
                         "choose another --out")
    try:
        manifest = Manifest.from_json(data, out)
    except ManifestError:  # ours, but damaged: --force replaces it
        manifest = None
    differences = ["its manifest is damaged"] if manifest is None else []
    if manifest is not None:
        version = format_version(manifest.tokenizer.vocab_size)  # the one this build writes
        if manifest.format_version != version:
            differences.append(f"format_version: {manifest.format_version!r} -> {version}")
        differences += [f"{key}: {manifest.config.get(key)!r} -> {value!r}" for key, value in identity.items()
                        if manifest.config.get(key) != value and not enough_seeds(key, manifest, value)]
        if manifest.corpus.fingerprint != fingerprint:
            differences.append("the corpus changed")
        if tokenizer_sha is not None and manifest.tokenizer.sha256 != tokenizer_sha:
            differences.append("the tokenizer changed")
        differences += changed_files(manifest.corpus.stats.get("option_files", {}), option_files)
    if not differences and intact(manifest):
        return None if force else manifest
    if force:
        return None
    what = "; ".join(differences[:4]) if differences else "its files are damaged"
    if len(differences) == 1 and differences[0].startswith("seeds:"):
        raise CacheError(f"--out {out}: holds this build with fewer seeds ({what}); `mlmprep remask {out} --seeds "
                         f"{identity['seeds']}` adds the others, or pass --force to rebuild it")
    raise CacheError(f"--out {out}: holds a build made differently ({what}); "
                     "pass --force to rebuild it or choose another --out")


def changed_files(recorded: dict, given: dict) -> list[str]:
    """What differs between the files options named for a build (`recorded`, its corpus.stats.option_files) and
    for this one (`given`), option by option: the files whose content (or size, or name) changed."""
    differences = []
    for option in sorted(given.keys() | recorded.keys()):
        before, now = recorded.get(option, []), given.get(option, [])
        if before != now:
            changed = [f["path"] for f in now if f not in before] or ["its files"]
            differences.append(f"--{option.replace('_', '-')} {', '.join(changed[:3])} changed")
    return differences


def enough_seeds(key: str, manifest: Manifest, wanted) -> bool:
    """A build with more seeded splits satisfies a request for fewer (`remask` adds seeds to a build)."""
    have = manifest.config.get("seeds")
    return key == "seeds" and isinstance(have, int) and isinstance(wanted, int) and have >= wanted


def files_intact(out: Path, manifest: Manifest) -> bool:
    """Every file the manifest lists is there with its recorded size (sizes only: `verify` re-hashes)."""
    for name, split in manifest.splits.items():
        for f in split.files:
            path = out / name / f.name
            if not path.is_file() or path.stat().st_size != f.bytes:
                return False
    return (out / manifest.tokenizer.file).is_file()


# ------------------------------------------------------------------------------------------------ object storage
# No rename there, so the commit point is manifest.json, written after every file it lists: a prefix without
# one is not a build. A build is staged on local disk, then uploaded; --force first deletes the old manifest
# (the old build stops being one), then the old files, then uploads the new files and the new manifest last.
# One writer at a time: a lock object created with a conditional put (If-None-Match: *), which the store decides.

BUILD_NAMES = re.compile(r"(tokenizer\.json|special_tokens_map\.json|tokenizer_config\.json|manifest\.json"
                         r"|(windows|validation-windows|validation|seed-\d+)/[^/]+)")  # what a build writes


@contextlib.contextmanager
def remote_lock(url: str, options: dict, *, force: bool = False, log=lambda _: None) -> Iterator[bool]:
    """Hold the lock object of the prefix `url` for the whole build; a second build into it fails at once. The
    lock names its owner (host, pid, time): one left by a build that no longer runs on this host is taken over,
    and one from another host with `force`; each takeover is logged. Gives whether the lock was a build's that no
    longer runs here (what it left unfinished is its leftovers, which the next build may replace)."""
    lock = storage.join(url, storage.LOCK)
    ours = uuid.uuid4().hex
    token = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "id": ours,
                        "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode()
    dead = False
    if not storage.create(lock, token, options):
        dead = take_over(url, lock, options, force, log)
        if not storage.create(lock, token, options):
            raise CacheError(f"--out {url}: another mlmprep build took the lock {lock} first; wait for it")
    try:
        yield dead
    finally:
        if url in UNCLEAN:  # left to the next build, which takes it over with what is under it (take_over)
            UNCLEAN.discard(url)
        else:
            with contextlib.suppress(CacheError):  # never remove a lock another build took after ours was removed
                if lock_owner(storage.read_bytes(lock, options)).get("id") == ours:
                    storage.remove([lock], options)


def lock_owner(held: bytes) -> dict:
    """The lock object's fields (host, pid, id, since; committing once its build commits), or {} if unreadable."""
    try:
        owner = json.loads(held)
    except ValueError:
        return {}
    return owner if isinstance(owner, dict) else {}


def mark_committing(url: str, options: dict, manifest: bytes) -> None:
    """Before the commit, this process's lock on `url` records the sha256 of the manifest it is about to put
    there: a build killed between its commit and the lock's removal leaves a lock that any later build, on any
    host, sees belongs to a build that finished (take_over)."""
    lock = storage.join(url, storage.LOCK)
    with contextlib.suppress(CacheError):
        owner = lock_owner(storage.read_bytes(lock, options))
        if owner.get("host") == socket.gethostname() and owner.get("pid") == os.getpid():
            storage.write(lock, json.dumps({**owner, "committing": hashlib.sha256(manifest).hexdigest()}).encode(),
                          options)


def take_over(url: str, lock: str, options: dict, force: bool, log) -> bool:
    """Remove the lock another build holds on `url` if that build no longer runs (on this host) or `force`;
    otherwise one line naming its owner and what to do. Whether its build no longer runs here and had not
    committed."""
    try:
        held = storage.read_bytes(lock, options)
    except CacheError:
        return False  # released meanwhile: the caller tries again
    owner = lock_owner(held)
    try:
        host, pid, since = str(owner["host"]), int(owner["pid"]), str(owner.get("since", "an unknown time"))
    except (ValueError, KeyError, TypeError):
        host, pid, since = "an unknown host", 0, "an unknown time"
    who = printable(f"pid {pid} on {host}, since {since}")
    if committed(url, options, owner):
        log(f"--out {url}: removing the lock of {who}, a build that finished (its manifest is there) but was "
            "stopped before it removed its lock")
        if storage.read_bytes(lock, options) == held:
            storage.remove([lock], options)
        return False
    here = host == socket.gethostname()
    if here and pid_alive(pid):
        raise CacheError(f"--out {url}: another mlmprep build is writing it now ({who}, lock {lock}); wait for it")
    if not here and not force:
        raise CacheError(f"--out {url}: locked by a build of {who} ({lock}); wait for it, or, if it no longer runs "
                         f"(killed), build again with --force to take the lock over (or delete {lock})")
    reason = "that build no longer runs" if here else "--force"
    log(f"--out {url}: taking over the lock of {who} ({reason})")
    if storage.read_bytes(lock, options) == held:
        storage.remove([lock], options)
    return here


def committed(url: str, options: dict, owner: dict) -> bool:
    """Whether the lock `owner` belongs to a build that committed: the manifest at `url` is the one it recorded."""
    digest = owner.get("committing")
    if not isinstance(digest, str):
        return False
    try:
        return hashlib.sha256(storage.read_bytes(storage.join(url, MANIFEST), options)).hexdigest() == digest
    except CacheError:
        return False


def remote_contents(url: str, options: dict) -> dict[str, int]:
    """The objects under the prefix `url` (name relative to it -> size), the lock and probes left out."""
    return {name: size for name, size in storage.sizes(url, options).items()
            if name != storage.LOCK and not name.startswith(".mlmprep-probe-")}


def read_existing_remote(url: str, present: dict[str, int], options: dict, identity: dict, fingerprint: str, *,
                         tokenizer_sha: str | None, option_files: dict, force: bool) -> dict | None:
    """read_existing for a prefix holding `present`. Objects without a manifest are an unfinished build (a killed
    one's files, which --force replaces) or not an mlmprep build (refused even with --force)."""
    if not present:
        return None
    if MANIFEST not in present:
        if not all(BUILD_NAMES.fullmatch(name) for name in present):
            raise CacheError(f"--out {url}: holds objects that are not an mlmprep build (no {MANIFEST}); "
                             "choose another --out")
        if force:
            return None
        raise CacheError(f"--out {url}: holds an unfinished build (files, no {MANIFEST}); pass --force to replace "
                         "it or choose another --out")
    try:
        manifest = json.loads(storage.read_bytes(storage.join(url, MANIFEST), options))
    except ValueError:
        manifest = None
    return judge_existing(url, manifest, identity, fingerprint, tokenizer_sha=tokenizer_sha,
                          option_files=option_files, force=force, intact=lambda m: listed_present(m, present))


def listed_present(manifest: Manifest, present: dict[str, int]) -> bool:
    """Every file the manifest lists is among `present` at its recorded size."""
    listed = {f"{name}/{f.name}": f.bytes for name, split in manifest.splits.items() for f in split.files}
    return all(present.get(name) == size for name, size in listed.items()) and manifest.tokenizer.file in present


def commit_remote(stage: Path, url: str, present: dict[str, int], options: dict, *, names: list[str] | None = None
                  ) -> None:
    """Upload the finished `stage` to `url`, replacing the objects `present` there: uncommit (delete the old
    manifest if present lists it), delete the old files, upload the new ones, then stage's manifest.json last.
    With `names` (remask), only the files under those top-level names and the manifest, which replaces the old
    one in a single put. A failure takes back what was uploaded, so no manifest lists a file that is not
    there and no old file stays beside a new manifest."""
    manifest = storage.join(url, MANIFEST)
    if MANIFEST in present:
        storage.remove([manifest], options)
    storage.remove([storage.join(url, name) for name in present if name != MANIFEST], options)
    roots = [stage / name for name in names] if names is not None else [stage]
    local = sorted(p for root in roots for p in ([root] if root.is_file() else root.rglob("*"))
                   if p.is_file() and p != stage / MANIFEST)
    pairs = [(p, storage.join(url, p.relative_to(stage).as_posix())) for p in local]
    try:
        storage.put(pairs, options)
        mark_committing(url, options, (stage / MANIFEST).read_bytes())
        storage.put([(stage / MANIFEST, manifest)], options)
    except BaseException:  # a whole build's manifest goes too; one only added to stays
        if not take_back(url, [remote for _, remote in pairs] + ([manifest] if names is None else []), options):
            UNCLEAN.add(url)  # the lock stays, so the next build knows what is there for leftovers
        raise


UNCLEAN: set[str] = set()  # prefixes whose failed upload could not be taken back: remote_lock keeps their lock
SETTLE = (0.5, 2.0)  # seconds before each look for an upload the store finished after its client gave up on it


def take_back(url: str, uploaded: list[str], options: dict) -> bool:
    """Remove what a failed upload may have put (`uploaded`, URLs under `url`), then look again after a moment,
    twice: an upload cancelled once the store had its body lands a little after its client gave up. Whether none
    of them is left (not when the store is still away, or one was still landing at the last look)."""
    ours = {remote.removeprefix(url + "/") for remote in uploaded}
    try:
        storage.remove(uploaded, options)
        for wait in SETTLE:
            time.sleep(wait)
            landed = [storage.join(url, name) for name in remote_contents(url, options) if name in ours]
            if not landed:
                return True
            storage.remove(landed, options)
    except CacheError:
        pass
    return False


@contextlib.contextmanager
def fetched_build(url: str, options: dict, splits: list[str] | None = None) -> Iterator[Path]:
    """A local copy of the build at the prefix `url`, in a temporary directory removed after: all of it, or with
    `splits` only the manifest, the tokenizer files and those splits. A prefix without a manifest is refused
    in one line: it is not a build (an unfinished or failed one, or another prefix)."""
    url = url.rstrip("/")
    present = remote_contents(url, options)
    if MANIFEST not in present:
        what = "an unfinished or failed build" if present else "nothing there"
        raise CacheError(f"{url}: no {MANIFEST}, so not a finished mlmprep build ({what}); give the --out of a "
                         "finished build, or build it again")
    with scratch_directory() as tmp:
        local = Path(tmp, url.rsplit("/", 1)[-1] or "build")
        wanted = [name for name in present if splits is None or "/" not in name or name.split("/")[0] in splits]
        storage.fetch([(storage.join(url, name), local / name) for name in wanted], options)
        yield local
