"""`mlmprep verify`: re-hash and re-check a build against its manifest."""

from __future__ import annotations

from typing import Annotated

import typer

from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, StorageOptions, cli_errors

VERIFY_EXAMPLES = """Examples:

  mlmprep verify mlmprep-data               # every file's sha256 and every row; exit 1 listing what is wrong
  mlmprep verify mlmprep-data --sample 1000 # 1,000 random rows per split: a quick check of a large build
  mlmprep verify s3://bucket/data           # a build on object storage: every file fetched and re-hashed
"""


@app.command(epilog=VERIFY_EXAMPLES, cls=HelpCommand)
@cli_errors
def verify(
    directory: Annotated[str, typer.Argument(help="A directory (or URL) written by mlmprep build.")],
    *,
    sample: Annotated[int | None, typer.Option(
        help="Check this many random rows per split instead of every row.")] = None,
    storage_options: Annotated[str | None, StorageOptions] = None,
) -> None:
    """Check every file's sha256, every split's rows and every row's invariants; exit 1 listing what is wrong."""
    from mlmprep.builder.verify import verify as run_verify
    from mlmprep.config import check_range
    from mlmprep.storage import parse_options

    if sample is not None:  # 0 rows would check nothing and say ok
        check_range("--sample", sample, low=1)
    report = run_verify(directory, sample=sample, storage_options=parse_options(storage_options))
    typer.echo(report.summary())
    if not report.ok:
        raise typer.Exit(code=1)
