"""Typed configuration: frozen dataclasses, filled from defaults, then a JSON/YAML file, then the command line.

Unknown keys and wrong types are rejected with a message naming the key, so a typo in a config file
never silently falls back to a default.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mlmprep.errors import ConfigError

C = TypeVar("C")


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides what `mlmprep build` writes (and a few things that only decide how fast)."""

    # corpus
    corpus: tuple[str, ...] = ()  # files, directories or globs; empty and no dataset: the built-in sample
    dataset: str | None = None  # a `datasets` name, NAME or NAME:CONFIG
    dataset_split: str = "train"
    text_column: str = "text"
    doc_sep: Literal["line", "blank"] = "line"
    on_decode_error: Literal["replace", "skip", "fail"] = "replace"
    # cleaning
    normalize_whitespace: bool = False
    nfkc: bool = False
    # tokenizer
    tokenizer: str | None = None  # tokenizer.json or a local transformers directory; None: train one
    vocab_size: int = 32000
    # windows
    method: Literal["tokens", "text"] = "tokens"
    pack: Literal["stream", "doc"] = "stream"
    input_length: int = 512
    # masking
    objective: Literal["span", "mlm"] = "span"
    noise_density: float = 0.15
    mean_span_length: float = 3.0
    random_roll: bool = False
    mlm_probability: float = 0.15
    whole_word: bool = False
    # output
    seeds: int = 4
    seed: int = 0
    validation_fraction: float = 0.02
    out: str = "mlmprep-data"
    # speed only: these never change the bytes written
    threads: int = 0  # 0: all cores
    chunk_tokens: int = 1 << 20  # tokens per masking/writing chunk
    force: bool = False

    def __post_init__(self) -> None:
        check_range("--input-length", self.input_length, low=2)
        check_range("--seeds", self.seeds, low=1)
        check_range("--vocab-size", self.vocab_size, low=8)
        check_range("--threads", self.threads, low=0)
        check_range("--chunk-tokens", self.chunk_tokens, low=1)
        if not 0.0 < self.noise_density < 1.0:
            raise ConfigError(f"--noise-density must be in (0, 1), got {self.noise_density}; T5 uses 0.15")
        if self.mean_span_length < 1.0:
            raise ConfigError(f"--mean-span-length must be >= 1, got {self.mean_span_length}; T5 uses 3")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(f"--mlm-probability must be in (0, 1), got {self.mlm_probability}; BERT uses 0.15")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise ConfigError(f"--validation-fraction must be in [0, 1), got {self.validation_fraction}")
        if self.corpus and self.dataset:
            raise ConfigError("give either corpus paths or --dataset, not both")

    def identity(self) -> dict[str, Any]:
        """The options that decide the output bytes; two builds with equal identities are the same build."""
        speed_only = {"threads", "chunk_tokens", "force", "out"}
        return {k: v for k, v in to_dict(self).items() if k not in speed_only}


def check_range(option: str, value: int, *, low: int) -> None:
    if value < low:
        raise ConfigError(f"{option} must be at least {low}, got {value}")


def to_dict(cfg: Any) -> dict[str, Any]:
    """A JSON-ready dict of a config dataclass (tuples become lists)."""
    out = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a JSON or YAML mapping; keys may use dashes or underscores."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # parse errors of either format
        raise ConfigError(f"--config {path}: cannot parse ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of option names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}


def make_config(cls: type[C], *layers: dict[str, Any], source: str = "config") -> C:
    """Build `cls` from mappings applied in order; None values in a layer mean "not given"."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if value is None:
                continue
            if key not in fields:
                valid = ", ".join(sorted(fields))
                raise ConfigError(f"{source}: unknown option {key!r}; valid options: {valid}")
            values[key] = coerce(key, value, hints[key])
    return cls(**values)


def coerce(key: str, value: Any, hint: Any) -> Any:
    """Check `value` against the annotation `hint`, converting lists to tuples and ints to floats."""
    option = "--" + key.replace("_", "-")
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
            raise ConfigError(f"{option} must be one of {', '.join(map(str, choices))}; got {value!r}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{option} expects a list, got {value!r}")
        return tuple(coerce(key, v, typing.get_args(hint)[0]) for v in value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{option} expects true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{option} expects a whole number, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{option} expects a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, (str, Path)):
            raise ConfigError(f"{option} expects a string, got {value!r}")
        return str(value)
    return value


def config_from(cls: type[C], config_file: str | None, cli_values: dict[str, Any]) -> C:
    """Defaults, then the --config file, then the options given on the command line."""
    file_values = read_config_file(config_file) if config_file else {}
    return make_config(cls, file_values, cli_values, source=f"--config {config_file}" if config_file else "options")


__all__ = ["BuildConfig", "config_from", "make_config", "read_config_file", "to_dict"]
