"""The rooms of mlmprep import only what their docstrings allow: the build side never loads torch, and the
trainer never loads the build pipeline or the corpus readers. Each check imports every module of a room
(found by walking the package, so a new module is covered too) in a fresh interpreter."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import mlmprep


def room_modules(room: str) -> list[str]:
    package = __import__(f"mlmprep.{room}", fromlist=["_"])
    return [f"mlmprep.{room}"] + [f"mlmprep.{room}.{m.name}" for m in pkgutil.iter_modules(package.__path__)]


def loaded_after_importing(modules: list[str]) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def test_every_module_belongs_to_a_room():
    top = {m.name for m in pkgutil.iter_modules(mlmprep.__path__)} - {"cli"}  # cli/, installed as mlmprep.cli
    # storage: every room's paths may be URLs, and all of them go through its one fsspec module
    assert top == {"__main__", "build", "compare", "config", "corpus", "errors", "format", "progress", "storage",
                   "tokenize", "train"}, \
        "a new top-level module: put it in the room of its stage, or say here why it is shared"


@pytest.mark.parametrize("room", ["corpus", "build", "format"])
def test_build_side_never_imports_torch(room):
    loaded = loaded_after_importing(room_modules(room))
    assert not {m for m in loaded if m == "torch" or m.startswith("torch.")}, f"mlmprep.{room} imported torch"


def test_format_imports_neither_build_nor_train():
    loaded = loaded_after_importing(room_modules("format"))
    assert not {m for m in loaded if m.startswith(("mlmprep.build", "mlmprep.train", "mlmprep.corpus"))}


def test_train_side_never_imports_the_build_pipeline():
    loaded = loaded_after_importing(room_modules("train"))
    assert "torch" in loaded  # the walk did reach the trainer
    assert not {m for m in loaded if m.startswith(("mlmprep.build", "mlmprep.corpus"))}
