"""A Hugging Face `datasets` dataset for --dataset: loaded from a save_to_disk directory or the hub's local cache,
any failure one line. Both the corpus (`documents`) and the tasks reading its row ranges (`shards`) load it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from mlmprep.errors import CorpusError


def _load_dataset(spec: str, split: str):
    """A `datasets.Dataset` from a save_to_disk directory, or load_dataset(NAME, CONFIG) (cache, then hub)."""
    import datasets

    name, _, config = spec.partition(":")
    if Path(spec).is_file():
        raise CorpusError(f"--dataset {spec}: a file; give corpus files as arguments (mlmprep build {spec}), "
                          "--dataset a dataset's name or directory")
    if any((Path(name) / f).is_file() for f in ("state.json", "dataset_dict.json")):
        ds = datasets.load_from_disk(name)
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise CorpusError(f"--dataset {spec}: no split {split!r}; pass --dataset-split {'|'.join(ds)}")
            ds = ds[split]
        return ds
    # not streaming: a cached dataset is read from its memory-mapped Arrow files, which works offline
    with quiet("huggingface_hub", "datasets"):
        return datasets.load_dataset(name, config or None, split=split)


@contextlib.contextmanager
def quiet(*names: str) -> Iterator[None]:
    """Loggers `names` at ERROR for a while: offline, the hub client warns of each of its retries, and a
    failure should read as the one line load_dataset gives."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def load_dataset(spec: str, split: str):
    """_load_dataset, with any failure as one CorpusError line."""
    try:
        return _load_dataset(spec, split)
    except CorpusError:
        raise
    except Exception as exc:  # datasets raises many types (connection, missing files, bad config or split)
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise CorpusError(
            f"--dataset {spec} [{split}]: cannot load ({reason}); offline use needs the dataset in the local "
            "Hugging Face cache (load it once online) or a save_to_disk directory"
        ) from None


__all__ = ["load_dataset"]
