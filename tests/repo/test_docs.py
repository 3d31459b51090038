"""The docs site: `mkdocs build --strict` passes offline, a broken link or anchor fails it, the CLI reference it
generates lists every option `--help` shows for every command, and the code on its pages runs."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from mlmprep.cli import app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(filter(None, (
        str(ROOT), os.environ.get("PYTHONPATH"))))}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = mkdocs_build(ROOT / "mkdocs.yml", out)
    assert done.returncode == 0, done.stderr
    return out


def text(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags dropped, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def sections(page: str) -> dict[str, str]:
    """The rendered text under each h2 heading of a page, by the heading's text."""
    article = page[page.index("<article"):page.index("</article>")]
    found = {}
    for chunk in article.split("<h2")[1:]:
        heading, _, body = chunk.partition("</h2>")
        found[text("<h2" + heading).rstrip("¶").strip()] = text(body)
    return found


def leaf_commands(command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The words of the root command and of every command that is not a group, walking the app's tree."""
    subs = getattr(command, "commands", {})
    found = [path] if not subs or not path else []
    for name, sub in subs.items():
        found += leaf_commands(sub, (*path, name))
    return found


def help_text(*words: str) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.stdout


COMMANDS = leaf_commands(typer.main.get_command(app))


def test_the_walk_finds_every_command():
    assert {("build",), ("train",), ("tokenizer", "train"), ("verify",), ()} <= set(COMMANDS)


@pytest.mark.parametrize("words", COMMANDS, ids=lambda words: " ".join(words) or "mlmprep")
def test_the_generated_cli_reference_lists_every_option_help_shows(site, words):
    """Each command's section of the built reference page names every option and argument of its --help, and
    shows every <...> it shows (</s>, <int>, <tokens|text>), which Markdown would otherwise take for HTML."""
    reference = sections((site / "options" / "index.html").read_text(encoding="utf-8"))
    section = reference[" ".join(["mlmprep", *words])]
    shown = help_text(*words)
    names = {n for pair in re.findall(r"^  (--[\w-]+)(?: / (--[\w-]+))?", shown, flags=re.M) for n in pair if n}
    names -= {"--help"}
    names |= set(re.findall(r"^  ([A-Z]+)  ", shown.partition("Arguments:")[2], flags=re.M))
    assert names or not words, shown
    assert {n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", section)} == set()
    assert {t for t in re.findall(r"<[^<>\s]+>", shown) if t not in section} == set()


def test_the_reference_in_the_tree_is_the_one_the_code_generates():
    from mlmprep.cli.reference import reference

    page = DOCS / "options.md"
    assert page.is_file() and page.read_text(encoding="utf-8") == reference(), \
        "docs/options.md is stale: python -m mlmprep.cli.reference > docs/options.md"


def test_relative_links_name_files_of_the_tree_as_github_reads_them():
    """A link between Markdown files works on GitHub only if its target is a file of the repository (the site
    can hold pages that are not); anchors are mkdocs --strict's to check."""
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    dead = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            path = target.split("#")[0]
            if path and "://" not in path and not path.startswith("mailto:") and not (page.parent / path).exists():
                dead.append(f"{page.relative_to(ROOT)}: {target}")
    assert dead == []


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "getting-started.md"
    clean = page.read_text(encoding="utf-8")
    page.write_text(clean + "\nSee [the format](format.md#no-such-heading).\n", encoding="utf-8")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stderr, done.stderr
    page.write_text(clean + "\nSee [the masks](masks.md).\n", encoding="utf-8")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "masks.md" in done.stderr, done.stderr


def test_the_site_loads_nothing_from_the_network(site):
    """Built offline and read offline: no stylesheet, script, font or image fetched from another host."""
    remote = re.compile(r"""<(?:link|script|img|source|iframe)\b[^>]*\b(?:href|src)=["']?(?:https?:)?//""", re.I)
    for path in site.rglob("*.html"):
        page = path.read_text(encoding="utf-8")
        assert not remote.search(page), (path, remote.search(page).group(0))
        assert "fonts.googleapis" not in page and "fonts.gstatic" not in page, path


def test_the_benchmark_markers_stay_invisible(site):
    """docs/benchmarks.md's blocks are delimited by HTML comments (benchmarks.docs rewrites between them): the
    page shows their tables, never the markers."""
    page = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    shown = text(page[page.index("<article"):page.index("</article>")])
    assert "<!-- begin: span_corruption -->" in (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "begin: span_corruption" not in shown.replace("<!-- begin: NAME -->", "")
    assert "Numba 1 thread vs per-example NumPy" in shown


def test_the_training_page_python_example_runs(tiny_build, tmp_path):
    """The loop and BudgetTrainer example of docs/training.md runs as written, on a real build."""
    (block,) = re.findall(r"```python\n(.*?)```", (DOCS / "training.md").read_text(encoding="utf-8"), flags=re.S)
    namespace: dict = {}
    code = block.replace('"mlmprep-data', '"' + str(tiny_build)).replace('"runs/hf"', repr(str(tmp_path / "hf")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(code, namespace)  # noqa: S102  (our own docs)
    assert namespace["tensors"]["input_ids"].shape[1] == 32  # the tiny build's input length
    assert not [str(w.message) for w in caught if "pin_memory" in str(w.message)]  # no pinning without a GPU
    assert len(namespace["plan"]) > 0
