"""What every command shares: turning library errors into one line and exit code 2 (1 for a failed build task)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import typer

from mlmprep.engine import TaskFailed
from mlmprep.errors import MlmprepError


def cli_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; a MlmprepError becomes `error: <message>` on stderr and exit code 2."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MlmprepError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=2) from None
        except TaskFailed as exc:  # not the input's fault: a worker died or a task hit a bug
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(code=1) from None
        except KeyboardInterrupt:
            typer.echo("interrupted; nothing was left under the output name", err=True)
            raise typer.Exit(code=130) from None

    return run


def given(**options: Any) -> dict[str, Any]:
    """The options the user gave: Typer passes None for the rest, so the config file can fill them."""
    return {k: v for k, v in options.items() if v is not None and v != ()}


def note(line: str) -> None:
    """A progress note on stderr for a person at a terminal; silent otherwise, so that an error stays one line."""
    if sys.stderr.isatty():
        typer.echo(line, err=True)


def option(text: str):
    """An option whose help text states its own default (the value None means "not given")."""
    return typer.Option(help=text, show_default=False)
