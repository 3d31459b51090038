"""The section writer of docs/benchmarks.md (benchmarks.docs): a benchmark's section is replaced between its
markers and every other byte of the page is kept; a page without the section gets it added, and a page whose
markers do not pair up is refused rather than rewritten."""

from __future__ import annotations

import re
import shutil

import pytest

from benchmarks import docs
from benchmarks.__main__ import BENCHMARKS
from benchmarks.common import Figure

FIGURES = [Figure("build --seeds 4 time / tokenize-only time, 11 MB", "1.17x", "<= 1.25x", True),
           Figure("Numba compile paid by the first build", "13.2 s"),
           Figure("mlmprep train --help", "0.31 s", "<= 0.2 s", False),
           Figure("a | in a name", "1 | 2")]
MACHINE = {"CPU": "Test CPU, 2 cores", "memory": "23 GB", "GPU": "none", "software": "Python 3.11.7",
           "date": "2026-01-02"}


@pytest.fixture
def page(tmp_path):
    copy = tmp_path / "benchmarks.md"
    shutil.copyfile(docs.PAGE, copy)
    return copy


def test_the_page_has_one_section_for_each_benchmark():
    text = docs.PAGE.read_text(encoding="utf-8")
    for name in BENCHMARKS:
        begin, end = docs.markers(name)
        assert text.count(begin) == 1 and text.count(end) == 1 and text.index(begin) < text.index(end), name


def test_render_gives_the_command_the_machine_and_one_row_per_figure():
    text = docs.render("build", "python -m benchmarks --only build", MACHINE, FIGURES)
    lines = text.splitlines()
    assert lines[0] == "<!-- begin: build -->" and lines[-1] == "<!-- end: build -->"
    assert "- command: `python -m benchmarks --only build`" in lines
    assert "- machine: CPU Test CPU, 2 cores; memory 23 GB; GPU none; software Python 3.11.7; date 2026-01-02" in lines
    assert "| build --seeds 4 time / tokenize-only time, 11 MB | 1.17x | <= 1.25x | yes |" in lines
    assert "| Numba compile paid by the first build | 13.2 s | | |" in lines
    assert "| mlmprep train --help | 0.31 s | <= 0.2 s | NO |" in lines
    assert "| a \\| in a name | 1 \\| 2 | | |" in lines


def test_a_section_is_replaced_in_place_and_the_rest_of_the_page_kept_byte_for_byte(page):
    before = page.read_bytes()
    begin, end = (m.encode() for m in docs.markers("build"))
    head, tail = before[: before.index(begin)], before[before.index(end) + len(end):]
    text = docs.render("build", "python -m benchmarks.build", MACHINE, FIGURES)
    docs.write_section(page, "build", text)
    after = page.read_bytes()
    assert after == head + text.encode() + tail
    docs.write_section(page, "build", text)  # writing the same section again changes nothing
    assert page.read_bytes() == after


def test_a_missing_section_is_added_at_the_end_of_the_page(page, capsys):
    before = page.read_text(encoding="utf-8")
    text = docs.render("build_64_cores", "python -m benchmarks.build --workers 1,64", MACHINE, FIGURES)
    docs.write_section(page, "build_64_cores", text)
    after = page.read_text(encoding="utf-8")
    assert after == before + "\n" + text + "\n"
    assert "no section 'build_64_cores'; added at the end" in capsys.readouterr().err
    docs.write_section(page, "build_64_cores", text.replace("13.2 s", "9.9 s"))  # from now on replaced in place
    assert page.read_text(encoding="utf-8") == before + "\n" + text.replace("13.2 s", "9.9 s") + "\n"


@pytest.mark.parametrize("broken", ["<!-- begin: loader -->\ntext\n",  # no end marker
                                    "<!-- end: loader -->\ntext\n<!-- begin: loader -->\n",  # the wrong way round
                                    "<!-- begin: loader -->\n<!-- end: loader -->\n" * 2,  # twice
                                    # sections crossed: writing loader would drop the heading of train_step
                                    "<!-- begin: loader -->\n## train_step\n<!-- begin: train_step -->\n"
                                    "<!-- end: loader -->\n<!-- end: train_step -->\n"])
def test_markers_that_do_not_pair_up_are_refused_and_the_page_left_alone(tmp_path, broken):
    page = tmp_path / "page.md"
    page.write_text("# Benchmarks\n" + broken, encoding="utf-8")
    with pytest.raises(ValueError, match="loader"):
        docs.write_section(page, "loader", docs.render("loader", "python -m benchmarks.loader", MACHINE, FIGURES))
    assert page.read_text(encoding="utf-8") == "# Benchmarks\n" + broken


def test_the_page_sections_are_apart_each_begin_followed_by_its_own_end():
    text = docs.PAGE.read_text(encoding="utf-8")
    found = re.findall(r"<!-- (begin|end): (\w+) -->", text)
    assert found and found[0::2] == [("begin", name) for _, name in found[0::2]]
    assert found[1::2] == [("end", name) for _, name in found[0::2]]


def test_write_records_the_command_without_the_options_that_only_say_where_to_write(page):
    argv = ["--workers", "1,16", "--write-docs", str(page), "--section", "build_16_cores", "--repeats", "1"]
    docs.write(page, {"build_16_cores": FIGURES}, "benchmarks.build", argv)
    text = page.read_text(encoding="utf-8")
    assert "- command: `python -m benchmarks.build --workers 1,16 --repeats 1`" in text
    assert docs.command("benchmarks", ["--write-docs", "--quick"]) == "python -m benchmarks --quick"
    assert docs.command("benchmarks", ["--quick", "--write-docs=/tmp/p.md"]) == "python -m benchmarks --quick"


def test_machine_names_the_cpu_memory_gpu_software_and_date():
    found = docs.machine()
    assert list(found) == ["CPU", "memory", "GPU", "software", "date"]
    assert found["CPU"].endswith(" cores") and found["memory"].endswith(" GB")
    assert found["software"].startswith("Python ") and "torch " in found["software"]
