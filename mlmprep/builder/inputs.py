"""What a build reads, from where the user named it: corpus files and a tokenizer on object storage are copied
to scratch disk first, and an error that names a copy names the URL the user gave instead."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from mlmprep import storage
from mlmprep.corpus.documents import Corpus
from mlmprep.corpus.sources import remote_sources
from mlmprep.errors import MlmprepError, TokenizerError


def fetch_sources(patterns: Iterable[str], directory: Path, options: dict) -> tuple[list[str], dict[str, str]]:
    """The corpus paths with every URL among them replaced by local copies of the files it names, in `directory`
    (streamed to disk by fsspec, never held in memory, several at once); and each copy's URL by its path."""
    paths: list[str] = []
    copies: dict[str, str] = {}
    for pattern in patterns:
        if not storage.is_url(pattern):
            paths.append(pattern)
            continue
        pairs = [(url, directory / f"{len(copies) + k:06d}" / url.rsplit("/", 1)[-1])
                 for k, url in enumerate(remote_sources(pattern, options))]
        storage.fetch(pairs, options)
        paths += [str(local) for _, local in pairs]
        copies.update((str(local), url) for url, local in pairs)
    return paths, copies


@contextlib.contextmanager
def named_as(copies: dict[str, str]) -> Iterator[None]:
    """An error that names a local copy of a corpus file names its URL instead, as the user gave it."""
    try:
        yield
    except MlmprepError as exc:
        text = str(exc)
        for local, url in copies.items():
            text = text.replace(local, url)
        if text == str(exc):
            raise
        raise type(exc)(text) from None


def fetch_tokenizer(tokenizer: str | None, directory: Path, options: dict) -> str | None:
    """--tokenizer as a local path: a URL (a tokenizer.json or a transformers directory) is copied into `directory`."""
    if not storage.is_url(tokenizer):
        return tokenizer
    name = tokenizer.rstrip("/").rsplit("/", 1)[-1]
    directory.mkdir(parents=True)
    with storage.errors(f"--tokenizer {tokenizer}", TokenizerError):
        storage.get(tokenizer, directory / name, options)
    return str(directory / name)


def corpus_name(corpus: Corpus) -> str:
    """The corpus's paths (the first three) for messages, or its description for a dataset or the sample."""
    paths = [f["path"] for f in corpus.files]
    if not paths:
        return corpus.description
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
