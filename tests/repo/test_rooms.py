"""The rooms of mlmprep import only what their docstrings allow: the build side never loads torch, and the
trainer never loads the build pipeline or the corpus readers. Each check imports every module of a room
(found by walking the package, so a new module is covered too) in a fresh interpreter."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

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
    top = {m.name for m in pkgutil.iter_modules(mlmprep.__path__)}
    # storage: every room's paths may be URLs, and all of them go through its one fsspec module
    # config_files: every command reads its options from a --config file and the command line through it
    assert top == {"__main__", "builder", "compare", "config", "config_files", "corpus", "errors", "format",
                   "progress", "storage", "tokenizer", "train"}, \
        "a new top-level module: put it in the room of its stage, or say here why it is shared"


@pytest.mark.parametrize("room", ["corpus", "builder", "format", "tokenizer"])
def test_build_side_never_imports_torch(room):
    loaded = loaded_after_importing(room_modules(room))
    assert not {m for m in loaded if m == "torch" or m.startswith("torch.")}, f"mlmprep.{room} imported torch"


def test_format_imports_neither_build_nor_train():
    loaded = loaded_after_importing(room_modules("format"))
    assert not {m for m in loaded if m.startswith(("mlmprep.builder", "mlmprep.train", "mlmprep.corpus"))}


def test_the_tokenizer_room_sits_below_the_others():
    loaded = loaded_after_importing(room_modules("tokenizer"))
    assert "mlmprep.tokenizer.unigram" in loaded  # the walk did reach the trainers
    assert not {m for m in loaded if m.startswith(("mlmprep.builder", "mlmprep.corpus", "mlmprep.format",
                                                   "mlmprep.train", "mlmprep.cli"))}


def test_the_commands_live_in_the_top_level_cli_folder():
    """The design's layout: cli/ beside mlmprep/, installed as mlmprep.cli (pyproject's package-dir)."""
    import mlmprep.cli

    assert Path(mlmprep.cli.__file__).parent == Path(mlmprep.__file__).parents[1] / "cli"
    assert not (Path(mlmprep.__file__).parent / "cli").exists()


def test_train_side_never_imports_the_build_pipeline():
    loaded = loaded_after_importing(room_modules("train"))
    assert "torch" in loaded  # the walk did reach the trainer
    assert not {m for m in loaded if m.startswith(("mlmprep.builder", "mlmprep.corpus"))}


# ----------------------------------------------------------------------------- import circles


def module_files() -> dict[str, Path]:
    """Every module of mlmprep by its dotted name (cli/ is installed as mlmprep.cli), and its source file."""
    import mlmprep.cli

    files = {}
    roots = (("mlmprep", Path(mlmprep.__file__).parent), ("mlmprep.cli", Path(mlmprep.cli.__file__).parent))
    for package, root in roots:
        for path in root.rglob("*.py"):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported(node: ast.Import | ast.ImportFrom, module: str, modules: dict[str, Path]) -> set[str]:
    """The mlmprep modules an import statement of `module` loads: `from P import name` loads P.name where that
    is a module, else P."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in modules}
    base = node.module or ""
    if node.level:  # relative: from the package of `module`
        package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
        base = ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *filter(None, [base])])
    found = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules}
    return found or ({base} if base in modules else set())


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> mlmprep modules imported when it is imported, module -> those imported only inside its functions)."""
    modules = module_files()
    top: dict[str, set[str]] = {name: set() for name in modules}
    inner: dict[str, set[str]] = {name: set() for name in modules}

    def visit(node: ast.AST, module: str, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top)[module] |= imported(child, module, modules) - {module}
            visit(child, module, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    for name, path in modules.items():
        visit(ast.parse(path.read_text(encoding="utf-8")), name, False)
    return top, inner


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` loads through `graph`, itself excluded unless a path leads back to it."""
    seen, todo = set(), list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += graph[name]
    return seen


def test_no_module_imports_itself_through_others():
    """Module-level imports form no circle (a partly initialised module's names go missing depending on which
    module a program imports first); and no circle hides in functions either, through any mix of module-level and
    function-level imports (two modules that import each other only inside functions included): such a circle
    breaks when someone moves an import up. Lazy imports are for start-up time and optional heavy dependencies,
    never to dodge a circle: move the shared piece instead."""
    top, inner = import_graph()
    assert {"mlmprep.corpus.shards", "mlmprep.builder.mask", "mlmprep.cli.build", "mlmprep.tokenizer.unigram"} \
        <= top.keys()  # the walk found them
    circles = sorted(name for name in top if name in reached(top, name))
    assert circles == [], f"module-level import circles through {circles}"
    # a package's own modules load after it, so a package importing one of them in a function makes no circle
    either = {name: top[name] | {other for other in inner[name] if not other.startswith(f"{name}.")} for name in top}
    hidden = sorted(name for name in top if name in reached(either, name))
    assert hidden == [], f"import circles through imports inside functions: {hidden}"
