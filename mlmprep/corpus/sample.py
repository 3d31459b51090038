"""The built-in sample corpus: real English harvested from the running Python's own documentation.

Documents are the docstrings of standard-library modules, classes and functions, read by parsing the
`.py` sources with `ast` (never importing them: `antigravity` opens a browser, `this` prints), followed by
the `pydoc_data.topics` help texts. Files are read in sorted order and repeated docstrings ("Return
self.") are kept once, so the sample is the same on every call for a given Python install.
"""

from __future__ import annotations

import ast
import functools
import gc
import hashlib
import os
import platform
import sysconfig
from collections.abc import Iterator
from pathlib import Path

# Not harvested: tests and demos (code, not prose), vendored or third-party code, deprecated copies of
# other modules, codec tables with no docstrings, and pydoc_data (its topics are read directly).
SKIP_DIRS = frozenset(
    {"test", "tests", "idlelib", "lib2to3", "turtledemo", "ensurepip", "venv", "distutils", "encodings",
     "site-packages", "dist-packages", "pydoc_data", "__pycache__"}
)
DOC_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def stdlib_sources(root: Path) -> list[Path]:
    """The `.py` files under `root` (sorted), leaving out SKIP_DIRS and build-config directories."""
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("config-")]  # prune
        files.extend(Path(folder, n) for n in names if n.endswith(".py"))
    return sorted(files)


def docstrings(tree: ast.AST) -> Iterator[str]:
    """The docstrings of a module and of the classes and functions in it, in source order, cleaned
    with inspect.cleandoc. Visits statements only: walking every expression node would double the cost."""
    if isinstance(tree, DOC_NODES) and (doc := ast.get_docstring(tree)):
        yield doc
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.stmt):
            yield from docstrings(node)


def harvest(root: Path | None = None, *, topics: bool = True) -> list[str]:
    """Unique non-blank docstrings of the stdlib at `root` (default: the running Python's), then the
    pydoc topics sorted by name. Uncached; see sample_documents."""
    root = Path(sysconfig.get_paths()["stdlib"]) if root is None else root
    docs: dict[str, None] = {}  # insertion-ordered set
    gc_was_enabled = gc.isenabled()
    gc.disable()  # parsing allocates millions of acyclic nodes; collecting meanwhile triples the time
    try:
        for path in stdlib_sources(root):
            try:
                tree = ast.parse(path.read_bytes(), filename=str(path))
            except (SyntaxError, ValueError):  # e.g. a file written for another Python version
                continue
            docs.update(dict.fromkeys(d for d in docstrings(tree) if d.strip()))
    finally:
        if gc_was_enabled:
            gc.enable()
    if topics:
        from pydoc_data.topics import topics as pydoc_topics

        docs.update(dict.fromkeys(pydoc_topics[k].strip() for k in sorted(pydoc_topics) if pydoc_topics[k].strip()))
    return list(docs)


@functools.lru_cache(maxsize=1)
def _sample() -> tuple[str, ...]:
    return tuple(harvest())


def _utf8(doc: str) -> bytes:
    return doc.encode("utf-8", "surrogatepass")  # a docstring may spell a lone surrogate ("\\udc80")


def sample_documents() -> Iterator[str]:
    """The sample, one document per docstring or topic. Harvested once per process (it walks the standard
    library's modules), then cached."""
    return iter(_sample())


def sample_description() -> str:
    docs = _sample()
    return (
        f"built-in sample: Python {platform.python_version()} standard-library docstrings and pydoc topics "
        f"({len(docs)} documents, {sum(len(_utf8(d)) for d in docs) / 1e6:.1f} MB)"
    )


def sample_fingerprint() -> str:
    """sha256 over the documents, each prefixed by its UTF-8 length so boundaries count too."""
    h = hashlib.sha256()
    for doc in _sample():
        data = _utf8(doc)
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


__all__ = ["harvest", "sample_description", "sample_documents", "sample_fingerprint"]
