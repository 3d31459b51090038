"""Option values from where users write them: a --config file (JSON or YAML), a saved run, the command line;
each layer checked against the config dataclass's types (mlmprep.config) and applied over its defaults."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar

from mlmprep.config import PATH_OPTIONS, SECRET, shown
from mlmprep.errors import ConfigError

C = TypeVar("C")


class Options(dict):
    """Option values from one named place (a --config file, a saved run), which error messages name."""

    def __init__(self, values: dict[str, Any], source: str) -> None:
        super().__init__(values)
        self.source = source


def read_config_file(path: str | Path) -> Options:
    """Read a JSON (.json) or YAML (any other name: YAML reads JSON too) mapping; keys may use dashes or
    underscores. A key given twice is refused: a parser would silently keep one of the two."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"--config {path}: is a directory; give a JSON or YAML file")
    if not path.exists():
        raise ConfigError(f"--config {path}: no such file")
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not content
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--config {path}: not valid UTF-8 (byte {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"--config {path}: cannot read it ({exc.strerror})") from None
    try:
        data = parse_mapping(text, json_syntax=path.suffix.lower() == ".json")
        if not isinstance(data, (dict, type(None))):
            raise ConfigError("expected a mapping of option names to values")
        pairs = ((str(k).replace("-", "_"), v, k) for k, v in (data or {}).items())
        return Options(unique_pairs(pairs), f"--config {path}")
    except ConfigError as exc:
        raise ConfigError(f"--config {path}: {exc}") from None
    except Exception as exc:  # parse errors of either format
        raise ConfigError(f"--config {path}: cannot parse ({str(exc).splitlines()[0]})") from None


def parse_mapping(text: str, *, json_syntax: bool) -> Any:
    """The document in `text`, as JSON or YAML, refusing a key repeated in any mapping."""
    if json_syntax:
        return json.loads(text, object_pairs_hook=lambda pairs: unique_pairs((k, v, k) for k, v in pairs))
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader whose mappings refuse a repeated key."""

    def mapping(loader: Loader, node: Any) -> dict:
        written = [loader.construct_object(k, deep=True) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        unique_pairs((k, None, k) for k in written)  # a merged (<<) key may be overridden, as YAML allows
        return loader.construct_mapping(node, deep=True)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=Loader)


def unique_pairs(triples: Any) -> dict:
    """A dict of (key, value, key as written) triples; a key met twice is refused, naming both spellings."""
    out: dict = {}
    written: dict = {}
    for key, value, spelled in triples:
        if key in out:
            same = f"{spelled!r} is given twice" if written[key] == spelled else \
                f"{written[key]!r} and {spelled!r} name the same option"
            raise ConfigError(f"{same}; keep one")
        out[key], written[key] = value, spelled
    return out


def make_config(cls: type[C], *layers: dict[str, Any], source: str = "config") -> C:
    """Build `cls` from mappings applied in order (see config_values), then check the whole."""
    return cls(**config_values(cls, *layers, source=source))


def config_values(cls: type[C], *layers: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """The options `layers` give, later layers winning, each checked against its type in `cls`. An Options
    layer's errors name its source, other layers' unknown keys name `source`. A null value sets an option
    that may be None, and is refused elsewhere."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for layer in layers:
        where = getattr(layer, "source", None)
        for key, value in layer.items():
            if key not in fields:
                raise ConfigError(f"{where or source}: unknown option {key!r}{nearest(key, fields)}; "
                                  f"valid options: {', '.join(sorted(fields))}")
            try:
                values[key] = coerce(key, value, hints[key])
                if key in PATH_OPTIONS:
                    values[key] = expand_home(values[key])
            except ConfigError as exc:
                raise ConfigError(f"{where}: {exc}" if where else str(exc)) from None
    return values


def expand_home(value: Any) -> Any:
    """A path option's value with a leading ~ made the home directory (a tuple's element by element)."""
    if isinstance(value, tuple):
        return tuple(map(expand_home, value))
    return os.path.expanduser(value) if isinstance(value, str) else value


def nearest(key: str, names: Any) -> str:
    """" (did you mean 'seed' or 'seeds'?)" for the known names closest to a mistyped `key`, or ""."""
    import difflib

    close = difflib.get_close_matches(key.lower().lstrip("_"), list(names), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


POSITIONAL = {"corpus": "CORPUS", "data": "DATA"}  # fields the command line takes as arguments, not options


def coerce(key: str, value: Any, hint: Any) -> Any:
    """Check `value` against the annotation `hint`, converting lists to tuples and numbers to the type wanted."""
    option = POSITIONAL.get(key) or "--" + key.replace("_", "-")
    if key in SECRET and isinstance(value, dict):  # a config file may write the JSON object as a mapping
        value = json.dumps(value)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        errors = []
        for arg in typing.get_args(hint):
            if arg is type(None):
                continue
            try:
                return coerce(key, value, arg)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0])
    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{option} must be one of {', '.join(map(str, choices))}; got {shown(value, key)}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{option} expects a list, got {shown(value, key)}")
        return tuple(coerce(key, v, typing.get_args(hint)[0]) for v in value)
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{option} expects true or false, got {shown(value, key)}")
    if hint is int:
        whole = whole_number(value)
        if whole is None:
            raise ConfigError(f"{option} expects a whole number, got {shown(value, key)}")
        return whole
    if hint is float:
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else numeric_string(value)
        if number is None:
            raise ConfigError(f"{option} expects a number, got {shown(value, key)}")
        try:
            return float(number)
        except OverflowError:  # an int past the largest float: infinite, which the config's checks refuse
            return math.inf if number > 0 else -math.inf
    if hint is str:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{option} expects a string, got {shown(value, key)}")
        if not str(value):  # Path("") is ".": an empty --out would be the current directory
            raise ConfigError(f"{option} is empty; give a value or leave it out")
        return str(value)
    return value




def whole_number(value: Any) -> int | None:
    """The integer `value` is exactly: an int, a float or numeric string without a fraction (JSON's 3.0 or
    1e3, YAML's string '1e3'), else None. Floats past 2**53 are refused: their digits are not the ones typed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            value = numeric_string(value)
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return None


def numeric_string(value: Any) -> float | None:
    """The finite number a string spells ("1e-3", "32"), else None. YAML 1.1 (PyYAML) reads `lr: 1e-3`
    as a string, having no dot, so config files would otherwise reject T5's own learning rates."""
    if not isinstance(value, str):
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def config_from(cls: type[C], config_file: str | None, cli_values: dict[str, Any]) -> C:
    """Defaults, then the --config file, then the options given on the command line."""
    return make_config(cls, read_config_file(config_file) if config_file else {}, cli_values, source="options")
