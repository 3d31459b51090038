"""Write a benchmark's result into docs/benchmarks.md: each benchmark owns one section between the markers
`<!-- begin: NAME -->` and `<!-- end: NAME -->`, replaced in place, holding the command that produced it, the
machine it ran on and its table of figures. Everything outside the markers is hand-written and kept as it is.

    python -m benchmarks --write-docs                        # every benchmark's section of docs/benchmarks.md
    python -m benchmarks.build --write-docs /tmp/page.md     # one benchmark, into another copy of the page
    python -m benchmarks.build --workers 1,16 --write-docs --section build_16_cores
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shlex
import sys
from pathlib import Path

from benchmarks.common import Figure

PAGE = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
PACKAGES = ("torch", "numba", "tokenizers", "transformers")  # versions the figures depend on


def markers(section: str) -> tuple[str, str]:
    return f"<!-- begin: {section} -->", f"<!-- end: {section} -->"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def gpu_name() -> str:
    """The GPUs torch sees ("2 x NVIDIA H100 80GB HBM3"), or "none"."""
    try:
        import torch
    except ImportError:
        return "none"
    if not torch.cuda.is_available():
        return "none"
    count, name = torch.cuda.device_count(), torch.cuda.get_device_name(0)
    return name if count == 1 else f"{count} x {name}"


def machine() -> dict[str, str]:
    """The machine running this process, as the page shows it: CPU and the cores this process may use, memory,
    GPU, the software versions the figures depend on, and today's date."""
    import psutil

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    versions = [f"Python {platform.python_version()}"]
    for package in PACKAGES:
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"CPU": f"{cpu_model()}, {cores} cores", "memory": f"{psutil.virtual_memory().total / 1e9:.0f} GB",
            "GPU": gpu_name(), "software": ", ".join(versions), "date": datetime.date.today().isoformat()}


def command(module: str, argv: list[str]) -> str:
    """The command line that reproduces the figures: `python -m MODULE ARGS`, without the options that only say
    where to write them (--write-docs and its page, --section and its name)."""
    kept, skip = [], False
    for k, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--write-docs":
            skip = k + 1 < len(argv) and not argv[k + 1].startswith("-")  # its page is optional
        elif arg == "--section":
            skip = True
        elif not arg.startswith(("--write-docs=", "--section=")):
            kept.append(arg)
    return shlex.join(["python", "-m", module, *kept])


def row(cells: list[str]) -> str:
    """A Markdown table row; a `|` inside a cell is escaped."""
    escaped = (c.replace("|", "\\|") for c in cells)
    return "|" + "|".join(f" {c} " if c else " " for c in escaped) + "|"


def render(section: str, cmd: str, machine_: dict[str, str], figures: list[Figure]) -> str:
    """The section's text, markers included: command, machine, then one table row per figure."""
    begin, end = markers(section)
    met = {None: "", True: "yes", False: "NO"}
    rows = [row([f.name, f.value, f.target, met[f.met]]) for f in figures]
    return "\n".join([
        begin,
        f"- command: `{cmd}`",
        "- machine: " + "; ".join(f"{key} {value}" for key, value in machine_.items()),
        "",
        row(["figure", "value", "target", "met"]),
        "|---|---:|---|---|",
        *rows,
        end,
    ])


def write_section(page: Path, section: str, text: str) -> None:
    """Replace the section's text between its markers in `page`, keeping every other byte; a page without the
    section gets it at the end (said on stderr). A marker without its pair, one found twice, or a section holding
    another's marker is refused: writing then could drop hand-written text."""
    content = page.read_text(encoding="utf-8")
    begin, end = markers(section)
    counts = (content.count(begin), content.count(end))
    if counts == (0, 0):
        print(f"{page}: no section {section!r}; added at the end", file=sys.stderr)
        page.write_text(content + ("" if content.endswith("\n") or not content else "\n") + "\n" + text + "\n",
                        encoding="utf-8")
        return
    start, stop = content.find(begin), content.find(end)
    if counts != (1, 1) or stop < start:
        raise ValueError(f"{page}: the markers of section {section!r} are not one {begin} before one {end}")
    if "<!-- begin: " in content[start + len(begin):stop] or "<!-- end: " in content[start + len(begin):stop]:
        raise ValueError(f"{page}: another section's marker lies inside section {section!r}")
    page.write_text(content[:start] + text + content[stop + len(end):], encoding="utf-8")


def add_arguments(parser: argparse.ArgumentParser, section: str | None = None) -> None:
    """--write-docs [PAGE] and, for a single benchmark, --section NAME (default `section`)."""
    parser.add_argument("--write-docs", nargs="?", const=PAGE, type=Path, metavar="PAGE",
                        help=f"write the result into its section of PAGE (default {PAGE.relative_to(PAGE.parents[1])})")
    if section is not None:
        parser.add_argument("--section", default=section,
                            help=f"the page's section to write (default {section}; e.g. one per machine)")


def write(page: Path, sections: dict[str, list[Figure]], module: str, argv: list[str] | None = None) -> None:
    """Write each section's figures, with this run's command line and machine, into `page`."""
    cmd, here = command(module, sys.argv[1:] if argv is None else argv), machine()
    for section, figures in sections.items():
        write_section(page, section, render(section, cmd, here, figures))
        print(f"wrote section {section} of {page}", file=sys.stderr)
