"""Command-line options made from the config dataclasses: each opt() field of BuildConfig or TrainConfig
(mlmprep.config.opt) is declared once, and `mlmprep build` and `mlmprep train` get their options, help texts,
stated defaults and flag names from it."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Annotated, Any

import typer


def option_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of a config dataclass that are command-line options, in the order `--help` lists them."""
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """The field types of a config dataclass (its annotations are strings until evaluated)."""
    return typing.get_type_hints(cls)


def is_flag(cls: type, field: dataclasses.Field) -> bool:
    """Whether the option takes no value: a bool field (None allowed), which has an on and an off name."""
    return hints(cls)[field.name] in (bool, bool | None)


def flag_names(cls: type, field: dataclasses.Field) -> list[str]:
    """The option's names on the command line: --name, or a flag's declared "--on/--off" (default --name/--no-name)."""
    name = "--" + field.name.replace("_", "-")
    declared = field.metadata["flags"] or (f"{name}/--no-{name[2:]}" if is_flag(cls, field) else name)
    return declared.split("/")


def stated_default(cls: type, field: dataclasses.Field) -> str | None:
    """The default as help states it: the declared words, on or off for a flag, the value; for None, nothing
    (the help text says what None does)."""
    if field.metadata["shown"] is not None:
        return field.metadata["shown"]
    if field.default is None:
        return None
    if is_flag(cls, field):
        return "on" if field.default else "off"
    return str(field.default)


def help_text(cls: type, field: dataclasses.Field) -> str:
    default = stated_default(cls, field)
    return field.metadata["help"] + (f" [default: {default}]" if default is not None else "")


def option_parameter(cls: type, field: dataclasses.Field) -> inspect.Parameter:
    """The keyword parameter Typer reads the option from: None when the command line leaves it out, so that a
    --config file (or a resumed run's saved options) can give it."""
    hint = hints(cls)[field.name]
    if typing.get_origin(hint) is tuple:  # a repeatable option
        hint = list[typing.get_args(hint)[0]]
    names = flag_names(cls, field)
    info = typer.Option("/".join(names) if is_flag(cls, field) else names[0], help=help_text(cls, field),
                        show_default=False, rich_help_panel=field.metadata["panel"], metavar=field.metadata["metavar"])
    return inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                             annotation=Annotated[hint | None, info])


def config_options(cls: type,
                   only: tuple[str, ...] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command `f(ARGUMENTS..., *, config, options)`: the command gains an option per opt() field of
    `cls` (or of those named in `only`), after its own parameters, and `f` receives those the command line gave
    as the dict `options`."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]
        generated = [option_parameter(cls, f) for f in option_fields(cls) if only is None or f.name in only]
        names = [p.name for p in generated]

        def run(**values: Any) -> Any:
            given = {name: value for name in names if (value := values.pop(name)) not in (None, [], ())}
            return command(**values, options=given)

        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(run, attribute, getattr(command, attribute))
        run.__signature__ = inspect.Signature([*own, *generated])
        run.__annotations__ = {p.name: p.annotation for p in [*own, *generated]}
        return run

    return decorate
