"""Where a build goes: a local directory or a prefix on object storage. Each kind has its own lock, its own way
to read what is already there, to stage and commit a build and to add splits to one (remask); the build asks
its Destination and never which kind it is. The mechanics of each are in format/publish.py."""

from __future__ import annotations

import contextlib
import glob
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from mlmprep import storage
from mlmprep.errors import ConfigError
from mlmprep.format.manifest import Manifest
from mlmprep.format.publish import (
    build_directory,
    build_lock,
    check_output_path,
    commit_remote,
    fetched_build,
    publish,
    read_existing,
    read_existing_remote,
    remote_contents,
    remote_lock,
    staging_dir,
)
from mlmprep.format.write import MANIFEST, manifest_path


def say(line: str) -> None:
    """A note that stays on stderr whoever reads it (not progress): a lock taken over from another build."""
    print(f"note: {line}", file=sys.stderr, flush=True)


class Destination:
    """A build's output. `out` is what the build reports (a resolved path, or the prefix's URL); `stages_apart`
    says whether the build is staged on this machine's scratch disk rather than beside its output."""

    out: Path | str
    stages_apart = False

    def check_outside(self, patterns: Iterable[str]) -> None:
        """Refuse an output the corpus `patterns` would read back as corpus."""

    def has_build(self) -> bool:
        """Whether a finished build (its manifest) is there."""
        raise NotImplementedError

    def lock(self, *, force: bool = False) -> AbstractContextManager:
        """Held for the whole build: a second writer fails at once."""
        raise NotImplementedError

    def existing(self, identity: dict, fingerprint: str, *, tokenizer_sha: str | None, option_files: dict,
                 force: bool) -> Manifest | None:
        """The manifest if this very build is already there (nothing to do), else None; refuses (CacheError)
        to replace what is not an mlmprep build, or a different build without `force`. `option_files`: the
        records ({path, bytes, sha256}) of the files options name, by option, which the build must have too."""
        raise NotImplementedError

    def staging(self, scratch: str) -> AbstractContextManager[Path]:
        """A fresh local directory the build is written into, removed on failure."""
        raise NotImplementedError

    def commit(self, stage: Path) -> None:
        """Make the finished `stage` the output, replacing what `existing` found; the manifest lands last."""
        raise NotImplementedError

    def add_splits(self, add: Callable[[Path], list[str]]) -> list[str]:
        """Under the lock, `add(directory)` adds splits to a local directory holding the build (this one, or a
        copy of its manifest, tokenizer and windows) and returns their names, which then count at the output."""
        raise NotImplementedError


class LocalDirectory(Destination):
    """A directory on a local (or mounted) disk: a lock file and a staging directory beside it (inside it on a
    mount point), published by one atomic rename."""

    def __init__(self, path: Path):
        self.out = path

    def check_outside(self, patterns: Iterable[str]) -> None:
        """Refuse an --out inside a corpus directory (named, or matched by a glob): the next build would read it."""
        for pattern in patterns:
            matches = glob.glob(pattern, recursive=True) if not os.path.lexists(pattern) else [pattern]
            for directory in filter(os.path.isdir, matches):
                if Path(os.path.realpath(directory)) in (self.out, *self.out.parents):
                    raise ConfigError(f"--out {self.out}: inside the corpus directory {directory}, whose files the "
                                      "next build would read as corpus; choose an --out outside it")

    def has_build(self) -> bool:
        return manifest_path(self.out).exists()

    def lock(self, *, force: bool = False) -> AbstractContextManager:
        return build_lock(self.out)

    def existing(self, identity: dict, fingerprint: str, *, tokenizer_sha: str | None, option_files: dict,
                 force: bool) -> Manifest | None:
        return read_existing(self.out, identity, fingerprint, tokenizer_sha=tokenizer_sha, option_files=option_files,
                             force=force)

    def staging(self, scratch: str) -> AbstractContextManager[Path]:
        return staging_dir(self.out)

    def commit(self, stage: Path) -> None:
        publish(stage, self.out)

    def add_splits(self, add: Callable[[Path], list[str]]) -> list[str]:
        with build_lock(self.out):
            return add(self.out)


class ObjectPrefix(Destination):
    """A prefix on object storage (s3://, gs://, ...): a lock object made by a conditional put, the build staged
    on local scratch disk and uploaded with manifest.json last, the commit (the store has no rename)."""

    stages_apart = True

    def __init__(self, url: str, options: dict):
        self.out, self.options = url.rstrip("/"), options
        self.present: dict[str, int] = {}  # the objects there when `existing` looked, which `commit` replaces
        self.after_dead = False  # the lock was a build's that no longer runs here: its unfinished files are leftovers

    def has_build(self) -> bool:
        return storage.exists(storage.join(self.out, MANIFEST), self.options)

    @contextlib.contextmanager
    def lock(self, *, force: bool = False) -> Iterator[None]:
        with remote_lock(self.out, self.options, force=force, log=say) as self.after_dead:
            yield

    def existing(self, identity: dict, fingerprint: str, *, tokenizer_sha: str | None, option_files: dict,
                 force: bool) -> Manifest | None:
        self.present = remote_contents(self.out, self.options)
        if self.after_dead and self.present and MANIFEST not in self.present and not force:
            say(f"--out {self.out}: replacing the unfinished files that build left ({len(self.present)} objects)")
            force = True  # an unfinished build's files under its lock, not anyone's build: its own leftovers
        return read_existing_remote(self.out, self.present, self.options, identity, fingerprint,
                                    tokenizer_sha=tokenizer_sha, option_files=option_files, force=force)

    def staging(self, scratch: str) -> AbstractContextManager[Path]:
        return staging_dir(Path(scratch, "build"))

    def commit(self, stage: Path) -> None:
        commit_remote(stage, self.out, self.present, self.options)

    def add_splits(self, add: Callable[[Path], list[str]]) -> list[str]:
        """The windows are fetched, the new splits made locally and uploaded, then the manifest that lists them
        replaces the old one in one put (the commit)."""
        storage.preflight(self.out, self.options, "remask")
        with remote_lock(self.out, self.options, log=say), fetched_build(self.out, self.options,
                                                                         splits=["windows"]) as local:
            names = add(local)
            if names:  # what a failed remask left under the new names goes first
                leftovers = {n: size for n, size in remote_contents(self.out, self.options).items()
                             if n.split("/")[0] in names}
                commit_remote(local, self.out, leftovers, self.options, names=names)
        return names


def destination(out: str | Path, options: dict) -> Destination:
    """The Destination `out` names: an object-store prefix for a URL, else a local directory as given."""
    return ObjectPrefix(out, options) if storage.is_url(out) else LocalDirectory(Path(out))


def build_destination(out: str, options: dict) -> Destination:
    """A build's --out, checked before any work (the store answers; a directory can be made there), a local
    one resolved (a link is written through)."""
    if storage.is_url(out):
        storage.preflight(out, options, "--out")
        return ObjectPrefix(out, options)
    check_output_path(Path(out), directory=True)
    return LocalDirectory(build_directory(out))


# ------------------------------------------------------------------------------------------------ one file
class OutputFile:
    """One file an option names (`tokenizer train --out`), replaced whole or not at all; `where` names it."""

    where: str

    def check(self, force: bool) -> None:
        """Refuse, before any long work, a file that cannot be written, or exists without `force`."""
        if self.exists() and not force:
            raise ConfigError(f"--out {self.where}: exists; pass --force to overwrite it or choose another --out")

    def exists(self) -> bool:
        raise NotImplementedError

    def write(self, save: Callable[[str], None], scratch: str) -> str:
        """`save(path)` writes the file locally; it replaces the output in one step. Returns where it went."""
        raise NotImplementedError


class LocalFile(OutputFile):
    def __init__(self, where: str):
        self.where = where

    def exists(self) -> bool:
        check_output_path(Path(self.where))
        if Path(self.where).is_dir():
            raise ConfigError(f"--out {self.where}: is a directory; choose a file name or another --out")
        return Path(self.where).exists()

    def write(self, save: Callable[[str], None], scratch: str) -> str:
        path = Path(self.where)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        try:
            save(str(tmp))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return str(path)


class StoredFile(OutputFile):
    def __init__(self, url: str, options: dict):
        self.where, self.options = url, options

    def exists(self) -> bool:
        storage.preflight(self.where.rsplit("/", 1)[0], self.options, "--out")
        return storage.exists(self.where, self.options)

    def write(self, save: Callable[[str], None], scratch: str) -> str:
        local = Path(scratch, "output-file")
        save(str(local))
        storage.put([(local, self.where)], self.options)  # one put: the old file or the new
        return self.where


def output_file(out: str | Path, name: str, options: dict) -> OutputFile:
    """The file `--out` names: OUT/NAME for a directory or a name ending in a slash, else OUT itself."""
    out = str(out)
    if storage.is_url(out):
        return StoredFile(storage.join(out, name) if out.endswith("/") else out, options)
    return LocalFile(str(Path(out, name)) if out.endswith(("/", os.sep)) or Path(out).is_dir() else out)
