"""The mutant list stays current: every site resolves to its snippet exactly once, and a site survives the
code being moved or re-indented (tests/mutants.py finds functions by name, snippets indentation-free)."""

import re
from pathlib import Path

import pytest

from tests import mutants


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    return mutants.copy_repository(tmp_path_factory.mktemp("mutants"))


def test_every_mutant_finds_its_snippet_once_where_its_site_says(copy):
    problems = []
    for m in mutants.MUTANTS:
        found = mutants.locate(copy, m.site, m.old)
        if isinstance(found, str) or found[2] != m.site:
            problems.append(f"{m.name}: {found if isinstance(found, str) else found[2]}")
    assert not problems
    assert len({m.name for m in mutants.MUTANTS}) == len(mutants.MUTANTS)


def test_every_mutant_names_test_files_and_tests_that_exist():
    """A test file moved or a test renamed would leave a mutant running nothing, or pytest refusing its path."""
    missing = []
    for m in mutants.MUTANTS:
        for arg in m.tests:
            path, _, name = arg.partition("::")
            file = mutants.ROOT / path
            if not file.is_file() or (name and not re.search(rf"^\s*def {name}\(", file.read_text(), re.M)):
                missing.append(f"{m.name}: {arg}")
    assert not missing


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def mutate(root: Path, site: str, old: str, new: str) -> str:
    path, match, _ = mutants.locate(root, site, old)
    text = path.read_text()
    return text[: match.start()] + mutants.reindent(old, new, match.group()) + text[match.end():]


def test_a_function_moved_into_another_module_and_reindented_is_still_mutated(tmp_path):
    old = "    if x > 0:\n        return x\n"
    new = "    if x >= 0:\n        return -x\n"
    write(tmp_path, "mlmprep/a.py", "def helper(x):\n    return x\n")
    write(tmp_path, "mlmprep/b/c.py", "class Box:\n    def f(self, x):\n        if x > 0:\n            return x\n"
                                      "        return 0\n")
    found = mutants.locate(tmp_path, "mlmprep.a:Box.f", old)
    assert found[0] == tmp_path / "mlmprep/b/c.py" and "now in mlmprep/b/c.py" in found[2]
    assert mutate(tmp_path, "mlmprep.a:Box.f", old, new) == (
        "class Box:\n    def f(self, x):\n        if x >= 0:\n            return -x\n        return 0\n")


def test_a_partial_line_snippet_keeps_the_rest_of_its_line(tmp_path):
    write(tmp_path, "mlmprep/m.py", "ATTEMPTS = 5  # tries\n\n\ndef g():\n    return f(ATTEMPTS, 1)\n")
    assert mutate(tmp_path, "mlmprep.m", "ATTEMPTS = 5  #", "ATTEMPTS = 1  #").startswith("ATTEMPTS = 1  # tries\n")
    assert mutate(tmp_path, "mlmprep.m:g", "f(ATTEMPTS, 1)", "f(1, 1)").endswith("    return f(1, 1)\n")


def test_a_snippet_outside_its_function_or_twice_in_it_is_stale(tmp_path):
    write(tmp_path, "mlmprep/m.py", "def f():\n    return 1\n\n\ndef g():\n    y = 2\n    y = 2\n    return y\n")
    assert "found 0 times in mlmprep.m:g" in mutants.locate(tmp_path, "mlmprep.m:g", "return 1")
    assert "found 2 times" in mutants.locate(tmp_path, "mlmprep.m:g", "y = 2")
    assert "no h in mlmprep.m" in mutants.locate(tmp_path, "mlmprep.m:h", "return 1")
