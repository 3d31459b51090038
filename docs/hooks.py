"""mkdocs hook: the CLI reference page, options.md, generated from the Typer app each time the site builds, so it
lists exactly what `mlmprep COMMAND --help` shows and is never edited by hand."""

from __future__ import annotations

from mkdocs.structure.files import File

from mlmprep.cli.reference import reference

PAGE = "options.md"


def on_files(files, config):
    files.append(File.generated(config, PAGE, content=reference()))
    return files
