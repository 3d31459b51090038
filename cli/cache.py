"""`mlmprep cache ls|clear`: the local cache that holds a DATA URL's splits while they are trained on."""

from __future__ import annotations

from typing import Annotated

import typer

from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, cli_errors

CACHE_EXAMPLES = """Examples:

  mlmprep cache ls                                  # each cached build: its URL, size and the splits held
  mlmprep cache clear                               # empty the cache (builds a run has open are left)
  mlmprep cache clear s3://bucket/data --cache-dir /ssd/mlmprep   # one build's copy in another cache
"""

cache_app = typer.Typer(help="Show or empty the local cache of builds trained from object storage.",
                        no_args_is_help=True)
app.add_typer(cache_app, name="cache")

CacheDir = Annotated[str | None, typer.Option(
    "--cache-dir", help="The cache directory. [default: $XDG_CACHE_HOME/mlmprep, else ~/.cache/mlmprep]",
    metavar="DIR", show_default=False)]


@cache_app.command("ls", epilog=CACHE_EXAMPLES, cls=HelpCommand)
@cli_errors
def ls(cache_dir: CacheDir = None) -> None:
    """List the cached builds: URL, bytes on disk, splits held, and whether a run has it open."""
    from mlmprep.config import size_text
    from mlmprep.format.cache import default_cache_dir, mirrors

    found = mirrors(cache_dir)
    where = cache_dir or default_cache_dir()
    if not found:
        typer.echo(f"{where}: no cached builds")
        return
    for mirror in found:
        busy = "  (open in a run)" if mirror["in_use"] else ""
        typer.echo(f"{mirror['url']}  {size_text(mirror['bytes'])}  {', '.join(mirror['splits']) or '-'}{busy}")
        typer.echo(f"    {mirror['dir']}")
    typer.echo(f"{len(found)} cached build{'s' * (len(found) != 1)}, "
               f"{size_text(sum(m['bytes'] for m in found))} in {where}")


@cache_app.command("clear", epilog=CACHE_EXAMPLES, cls=HelpCommand)
@cli_errors
def clear(
    url: Annotated[str | None, typer.Argument(help="Only this build's copy. [default: every build]",
                                              show_default=False)] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Delete the cached builds no run has open (a run fetches what it needs again)."""
    from mlmprep.config import size_text
    from mlmprep.format.cache import clear as clear_cache
    from mlmprep.format.cache import default_cache_dir

    removed, busy = clear_cache(cache_dir, url)
    where = cache_dir or default_cache_dir()
    typer.echo(f"removed {len(removed)} cached build{'s' * (len(removed) != 1)} "
               f"({size_text(sum(m['bytes'] for m in removed))}) from {where}")
    for mirror in busy:
        typer.echo(f"left {mirror['url']} ({size_text(mirror['bytes'])}): a run has it open")
