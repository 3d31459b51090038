"""Corpus sources: the files that paths, directories and globs name, found without reading any of them.

Light on purpose (no NumPy, no Arrow): the command line sizes a build from them before it imports the pipeline.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.files import COMPRESSIONS, SUPPORTED, TEXT_FORMATS, file_format
from mlmprep.errors import CorpusError, printable


def resolve_sources(patterns: Sequence[str]) -> list[Path]:
    """Files, directories (searched recursively, sorted) and globs -> the corpus files, each once."""
    return resolve(patterns)[0]


def resolve(patterns: Sequence[str]) -> tuple[list[Path], list[str]]:
    """(files to read, entries skipped in directories and globs); a path named explicitly must be readable."""
    patterns = [str(p) for p in patterns]  # Path objects are welcome too
    found: list[Path] = []
    skipped: list[str] = []
    for pattern in patterns:
        path = Path(pattern)
        if not os.path.lexists(path) and any(c in pattern for c in "*?["):
            matches = sorted(Path(m) for m in glob.glob(pattern, recursive=True))
            if not matches:
                raise CorpusError(f"{pattern}: the glob matches nothing; check it (and quote it from the shell)")
            for match in matches:
                _add_member(match, found, skipped)
        elif path.is_symlink() and not path.exists():
            raise CorpusError(f"{path}: broken symbolic link; point it at a corpus file or remove it")
        elif not path.exists():
            raise CorpusError(f"{path}: no such file or directory; corpus paths are files, directories or globs")
        elif path.is_dir():
            _walk(path, found, skipped)
        elif not path.is_file():  # a FIFO would block the build until something writes to it
            raise CorpusError(f"{path}: not a regular file (a pipe or a device); save the corpus to a file")
        elif not file_format(path)[0]:
            raise CorpusError(f"{path}: unsupported file type {_kind(path)}; use one of {', '.join(SUPPORTED)}, "
                              f"or {'/'.join(TEXT_FORMATS)} compressed as {'/'.join(COMPRESSIONS)}")
        else:
            found.append(path)
    if not found:
        raise CorpusError(f"{', '.join(patterns)}: no corpus files ({', '.join(SUPPORTED)}; {'/'.join(TEXT_FORMATS)} "
                          f"also as {'/'.join(COMPRESSIONS)}) found{_listed(skipped)}")
    unique: dict[Path, Path] = {}
    for path in found:  # a file named twice (itself and in its directory) is read once, where first named
        unique.setdefault(path.resolve(), path)
    return list(unique.values()), skipped


def _kind(path: Path) -> str:
    """A file's type as its name gives it, for a message: ".tar.gz" for a compressed archive."""
    if file_format(path)[1]:
        return "".join(path.suffixes[-2:]) if len(path.suffixes) > 1 else f"{path.suffix} (no format before it)"
    return path.suffix or "(no extension)"


def remote_sources(pattern: str, options: dict | None = None) -> list[str]:
    """The corpus files a URL names (one object, every object under a prefix, or a glob's matches), sorted, as a
    local directory or glob picks them: hidden names and other file types skipped; one named alone must be one."""
    found = storage.files(pattern, options)
    if len(found) == 1 and found[0][0] == pattern.rstrip("/"):
        if not file_format(pattern)[0]:
            raise CorpusError(f"{pattern}: unsupported file type {_kind(Path(pattern))}; use one of "
                              f"{', '.join(SUPPORTED)}, or {'/'.join(TEXT_FORMATS)} compressed as "
                              f"{'/'.join(COMPRESSIONS)}")
        return [pattern]
    kept = [url for url, _ in found if not url.rsplit("/", 1)[-1].startswith(".") and file_format(url)[0]]
    if not kept:
        raise CorpusError(f"{pattern}: no corpus files ({', '.join(SUPPORTED)}; {'/'.join(TEXT_FORMATS)} also as "
                          f"{'/'.join(COMPRESSIONS)}) found "
                          f"({len(found)} other object{'s' * (len(found) != 1)}); check the URL")
    return kept


def _listed(skipped: list[str]) -> str:
    """The files a search that found no corpus file skipped (archives, say), for its error message;
    skipped directories (.git/) are left out."""
    files = [entry for entry in skipped if not entry.endswith("/")]
    if not files:
        return ""
    names = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    return f"; {len(files)} other file{'s' * (len(files) != 1)} skipped ({names}): convert them"


def _walk(folder: Path, found: list[Path], skipped: list[str]) -> None:
    """Add the files under `folder` in sorted order; hidden and symlinked directories are not entered, and
    hidden files (macOS `._NAME` forks, `.DS_Store`) are skipped, as a glob skips them."""
    members: list[Path] = []
    for root, dirs, names in os.walk(folder, onerror=lambda exc: skipped.append(f"{printable(exc.filename)}/")):
        if _saved_dataset(Path(root)):
            raise CorpusError(f"{root}: a `datasets` save_to_disk directory; pass --dataset {root} to read it "
                              "(one split), not its files")
        for d in list(dirs):
            if d.startswith(".") or Path(root, d).is_symlink():  # .git, caches; links may loop
                skipped.append(f"{printable(Path(root, d))}/")
                dirs.remove(d)
        members.extend(Path(root, n) for n in names)
    for path in sorted(members):
        if path.name.startswith("."):
            skipped.append(printable(path))
        else:
            _add_member(path, found, skipped)


def _saved_dataset(folder: Path) -> bool:
    """Whether `folder` is what `datasets` save_to_disk writes: read as files, its metadata JSON would be
    records and a DatasetDict's splits one corpus."""
    if (folder / "dataset_dict.json").is_file():
        return True
    return (folder / "state.json").is_file() and (folder / "dataset_info.json").is_file()


def _add_member(path: Path, found: list[Path], skipped: list[str]) -> None:
    if path.is_dir():
        _walk(path, found, skipped)
    elif path.is_file() and file_format(path)[0]:
        found.append(path)
    else:
        skipped.append(printable(path))
