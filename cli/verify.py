"""`mlmprep verify`: re-hash and re-check a build against its manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mlmprep.cli import app
from mlmprep.cli._util import cli_errors


@app.command()
@cli_errors
def verify(
    directory: Annotated[Path, typer.Argument(help="A directory written by mlmprep build.")],
    *,
    sample: Annotated[Optional[int], typer.Option(help="Check this many random rows per split instead of every row.")] = None,
) -> None:
    """Check every file's sha256, every split's rows and every row's invariants; exit 1 listing what is wrong."""
    from mlmprep.verify import verify as run_verify

    report = run_verify(directory, sample=sample)
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(code=1)
