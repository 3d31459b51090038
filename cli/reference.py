"""The option reference: every command and option of `mlmprep`, as `--help` shows them, in Markdown.

The docs' CLI reference page, docs/options.md, is this text, kept in the tree so that its links work on GitHub
too; `python -m mlmprep.cli.reference > docs/options.md` writes it, and a test fails while it differs.
"""

from __future__ import annotations

import re
from typing import Any

import typer

from mlmprep.cli import app

HEADER = """# CLI reference

Every command of `mlmprep` and every option it takes, with its default, as `mlmprep COMMAND --help` shows
them (each command also takes `--help`). Options of `build`, `train` and `compare-methods` can also be given
in a `--config` file: JSON or YAML, the option's name as key (`input_length` or `input-length`), the command
line winning.

This page is generated from the command line itself (`python -m mlmprep.cli.reference > docs/options.md`
writes it), and a test fails while it differs from `--help`.
"""
DEFAULT = re.compile(r"\s*\[default: (.*)\]$")


def commands(command: Any, ctx: Any) -> list[tuple[Any, Any]]:
    """(command, its context) for `command` and every command under it, in the order `--help` lists them."""
    found = [(command, ctx)]
    for name in getattr(command, "list_commands", lambda ctx: [])(ctx):
        sub = command.get_command(ctx, name)
        found += commands(sub, typer.Context(sub, info_name=name, parent=ctx))
    return found


def option_lines(command: Any, ctx: Any) -> list[str]:
    """Markdown for the command's arguments and options, under the panel headings `--help` uses."""
    groups: dict[str, list[str]] = {}
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = param.metavar or param.name.upper()
            groups.setdefault("Arguments", []).append(entry(name, param.help or ""))
        elif (record := param.get_help_record(ctx)) is not None and "--help" not in param.opts:
            groups.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(entry(*record))
    lines = []
    for title, entries in groups.items():
        lines += [f"**{title}**", "", *entries, ""]
    return lines


def entry(names: str, help: str) -> str:
    """One option: its names and metavar, its default, its help without the default it states."""
    found = DEFAULT.search(help)
    default = f" (default: `{found.group(1)}`)" if found else ""
    return f"- `{names}`{default}: {markdown(DEFAULT.sub('', help))}"


def markdown(text: str) -> str:
    """Help text as Markdown shows it: outside `code`, < is an entity (`</s>` is no HTML tag) and * escaped."""
    pieces = text.split("`")
    return "`".join(p.replace("<", "&lt;").replace("*", "\\*") if i % 2 == 0 else p for i, p in enumerate(pieces))


def reference() -> str:
    """The reference of every command of the `mlmprep` app, in Markdown."""
    root = typer.main.get_command(app)
    lines = [HEADER]
    for command, ctx in commands(root, typer.Context(root, info_name="mlmprep")):
        if getattr(command, "commands", None) and command is not root:
            continue  # a group of subcommands (`mlmprep tokenizer`): its commands follow
        usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
        about = markdown(" ".join((command.help or "").strip().split("\n\n")[0].split()))  # the first paragraph
        lines += [f"## {ctx.command_path}", "", about, "", f"    {usage}", ""]
        lines += option_lines(command, ctx)
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(reference(), end="")
