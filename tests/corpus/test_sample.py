"""The built-in sample: harvested by parsing (never importing) stdlib sources, deterministic, English."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import platform
import re
import subprocess
import sys

from mlmprep.corpus import sample

FAKE_STDLIB = {
    # path: source
    "zeta.py": '"""Zeta module."""\n',
    "alpha.py": '''"""Alpha module docstring."""

class Thing:
    """A thing.

        Indented continuation.
            Deeper.
    """

    def method(self):
        """Return self."""

        def inner():
            """Inner helper."""

    async def later(self):
        """Wait a while."""

if True:
    def conditional():
        """Defined under an if."""

def no_doc():
    x = "not a docstring"

def duplicate():
    """Return self."""
''',
    "pkg/__init__.py": '"""Package docstring."""\n',
    "pkg/broken.py": "def broken(:\n",  # a syntax error: skipped
    "antigravity.py": 'import pathlib\npathlib.Path(__file__).with_name("IMPORTED").touch()\n"""Side effects."""\n',
    "test/test_alpha.py": '"""Test docstring."""\n',
    "idlelib/editor.py": '"""IDLE docstring."""\n',
    "site-packages/third.py": '"""Third-party docstring."""\n',
    "encodings/cp1252.py": '"""Codec docstring."""\n',
    "config-3.11-x86_64-linux-gnu/python-config.py": '"""Config docstring."""\n',
}


def make_stdlib(root):
    for rel, source in FAKE_STDLIB.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


def test_harvest_parses_sources_in_sorted_order_without_importing(tmp_path):
    root = make_stdlib(tmp_path / "lib")
    docs = sample.harvest(root, topics=False)
    assert docs == [
        "Alpha module docstring.",
        "A thing.\n\nIndented continuation.\n    Deeper.",  # inspect.cleandoc: common indent removed
        "Return self.",  # kept once although two functions carry it
        "Inner helper.",
        "Wait a while.",
        "Defined under an if.",
        "Package docstring.",
        "Zeta module.",
    ]
    assert not (root / "IMPORTED").exists()  # antigravity.py was parsed, never run


def test_harvest_is_deterministic_across_processes(tmp_path):
    """Two processes with different hash seeds, over two copies of the sources written in opposite orders
    (so the directories list differently), harvest the same documents as this process."""
    first = make_stdlib(tmp_path / "a")
    second = tmp_path / "b"
    for rel, source in reversed(FAKE_STDLIB.items()):
        (second / rel).parent.mkdir(parents=True, exist_ok=True)
        (second / rel).write_text(source, encoding="utf-8")
    code = "import json, sys; from pathlib import Path; from mlmprep.corpus import sample; " \
           "print(json.dumps(sample.harvest(Path(sys.argv[1]))))"
    runs = [subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": hash_seed}).stdout
            for root, hash_seed in ((first, "1"), (second, "2"))]
    assert json.loads(runs[0]) == json.loads(runs[1]) == sample.harvest(first)


def test_builtin_sample_is_real_english_of_sane_size():
    docs = list(sample.sample_documents())
    n_bytes = sum(len(d.encode("utf-8")) for d in docs)
    assert len(docs) > 1000
    assert 0.5e6 < n_bytes < 6e6
    assert all(d.strip() for d in docs)
    text = "\n".join(docs)
    assert sum(c.isascii() for c in text) / len(text) > 0.99
    words = collections.Counter(re.findall(r"[a-z]+", text.lower()))
    assert {"the", "of", "to"} <= {w for w, _ in words.most_common(6)}


def test_builtin_sample_holds_docstrings_and_pydoc_topics():
    from pydoc_data.topics import topics

    docs = set(sample.sample_documents())
    assert topics["assert"].strip() in docs
    assert any(d.startswith("Shared support for scanning document type declarations") for d in docs)  # _markupbase


def test_fingerprint_and_description_match_a_fresh_harvest():
    fresh = sample.harvest()  # uncached: a second, independent harvest
    assert tuple(fresh) == tuple(sample.sample_documents())
    h = hashlib.sha256()
    for doc in fresh:
        data = doc.encode("utf-8")
        h.update(len(data).to_bytes(8, "little") + data)
    assert sample.sample_fingerprint() == h.hexdigest()
    description = sample.sample_description()
    assert description.startswith(f"built-in sample: Python {platform.python_version()} ")
    assert f"{len(fresh)} documents" in description and description.endswith(" MB)")
