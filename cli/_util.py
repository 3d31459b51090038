"""What every command shares: turning library errors and command-line mistakes into one line and exit code 2
(1 for a failed build task), and the plain help layout."""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
from collections.abc import Callable, Iterator
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

try:  # typer 0.26 on carries its own copy of click, whose exceptions it catches (pyproject.toml bounds typer for it)
    from typer import _click as click
except ImportError:
    import click

from mlmprep.config import STORAGE_OPTIONS_HELP
from mlmprep.errors import MlmprepError

# --storage-options of the commands that read a build: the build command's own comes from BuildConfig
StorageOptions = typer.Option("--storage-options", help=STORAGE_OPTIONS_HELP, metavar="JSON")
INTERRUPTED = 130  # the exit code of a command stopped by Ctrl-C (128 + SIGINT, as shells report it)
TERMINATED = 143  # ... and by SIGTERM (128 + SIGTERM)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout`, a scheduler or container stopping the job): the command stops as Ctrl-C stops
    it, and cleans up the same way."""


def stop_on_sigterm() -> None:
    """Make SIGTERM raise Terminated in the main thread, so a command stopped politely leaves what Ctrl-C leaves
    (nothing partial) and its worker processes end with it; a SIGTERM ignored by whoever started it stays so."""
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, raise_terminated)


def raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


def stopped(exc: KeyboardInterrupt) -> tuple[str, int]:
    """How a command stopped by `exc` says so: its word and its exit code."""
    return ("terminated", TERMINATED) if isinstance(exc, Terminated) else ("interrupted", INTERRUPTED)


def cli_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; a MlmprepError becomes `error: <message>` on stderr and exit code 2."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except MlmprepError as exc:
            typer.echo(error_line(exc), err=True)
            raise typer.Exit(code=2) from None
        except Exception as exc:
            # Only a build's engine raises TaskFailed, so it is looked up once loaded: `--help` need not load it.
            engine = sys.modules.get("mlmprep.builder.engine.base")
            if engine is None or not isinstance(exc, engine.TaskFailed):
                raise
            typer.echo(error_line(exc), err=True)  # not the input's fault: a worker died or a task hit a bug
            raise typer.Exit(code=1) from None
        except KeyboardInterrupt as exc:
            word, code = stopped(exc)
            typer.echo(f"{word}; nothing was left under the output name", err=True)
            raise typer.Exit(code=code) from None

    return run


def error_line(message: object) -> str:
    """`error: <message>` as one line, whatever it quotes: a line break in a file name shows as \\n."""
    return "error: " + str(message).replace("\r", "\\r").replace("\n", "\\n")


def note(line: str) -> None:
    """A progress note on stderr for a person at a terminal; silent otherwise, so that an error stays one line."""
    if sys.stderr.isatty():
        typer.echo(line, err=True)


class HelpCommand(TyperCommand):
    """Plain click help (rich costs a tenth of a second per call) laid out for reading: options under titled
    groups (each option's rich_help_panel, in order of first use), arguments by their upper-case names, and
    the epilog's examples printed line for line as written, never re-wrapped."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = argument_name(param)
                pieces.append((name if param.required else f"[{name}]") + ("..." if param.nargs != 1 else ""))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments = [(argument_name(p), p.help or "") for p in self.get_params(ctx) if p.param_type_name == "argument"]
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if param.param_type_name == "option" and (record := param.get_help_record(ctx)) is not None:
                groups.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for title, records in ([("Arguments", arguments)] if arguments else []) + list(groups.items()):
            with formatter.section(title):
                formatter.write_dl(records)

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        if self.epilog:
            formatter.write_paragraph()
            for line in self.epilog.strip("\n").splitlines():
                formatter.write(f"{'':>{formatter.current_indent + 2}}{line}\n" if line else "\n")


def argument_name(param: Any) -> str:
    return param.metavar or param.name.upper()


class OneLineErrors(TyperGroup):
    """The command group: a command-line mistake (an unknown option, a value of the wrong type, a missing one)
    is one `error:` line like every other refusal, not click's usage, hint and error over four lines."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        with one_line_usage_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        with one_line_usage_errors():
            return super().invoke(ctx)


class OneLineUsageError(click.exceptions.UsageError):
    """A usage error that shows itself as `error: <message>; see <command> --help`."""

    def show(self, file: Any = None) -> None:
        message = self.format_message().rstrip(".")
        hint = f"; see {self.ctx.command_path} --help" if self.ctx else ""
        typer.echo(error_line(f"{message[:1].lower()}{message[1:]}{hint}"), err=True)


@contextlib.contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Re-raise click's usage errors as OneLineUsageError (a bare `mlmprep` still shows the help)."""
    try:
        yield
    except (click.exceptions.NoArgsIsHelpError, OneLineUsageError):
        raise
    except click.exceptions.UsageError as exc:
        raise OneLineUsageError(exc.format_message(), exc.ctx) from None
