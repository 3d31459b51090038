"""The README is a map: it opens with the two commands CI runs, stays short, and every link in it leads to a
file of the repository (its pages are the docs site's, whose own checks are in tests/repo/test_docs.py)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_readme_opens_with_the_two_commands_ci_runs():
    (first_block,) = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)[:1]
    install, tests = first_block.strip().splitlines()
    assert install.startswith("pip install") and "mlmprep build" in install
    assert tests == "python -m pytest -q"


def test_readme_is_a_map_of_at_most_100_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 100


def test_every_link_and_picture_of_the_readme_is_there():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert any(t.endswith(".png") for t in local) and sum(t.startswith("docs/") for t in local) >= 8
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_the_readme_links_only_pages_the_site_shows():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+- [^#\n]*: (\S+\.md)$", nav, flags=re.M))
    linked = re.findall(r"\]\((docs/[^)#\s]+\.md)", README.read_text(encoding="utf-8"))
    pages = {t.removeprefix("docs/") for t in linked}
    assert pages and pages <= listed, pages - listed
