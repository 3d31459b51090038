"""`--help` reads well: options under titled groups, choices as choices, no Python placeholders, examples under
every command printed as written, `mlmprep --version`; and help stays fast (no rich, numba, torch imports)."""

from __future__ import annotations

import re
import subprocess
import sys
import typing

import pytest
import typer
from typer.testing import CliRunner

from mlmprep.cli import app

COMMANDS = {  # command words -> the option groups its help shows, in order (the lone --help goes under "Options")
    ("build",): ["Input", "Tokenizer", "Windows", "Masking", "Output", "Speed"],
    ("train",): ["Data", "Model", "Batching", "Optimizer", "Schedule", "Checkpoints and logs", "Speed"],
    ("compare-methods",): ["Presets", "Input", "Build", "Training", "Output", "Speed"],
    ("remask",): [],
    ("inspect",): [],
    ("verify",): [],
    ("tokenizer", "train"): [],
}


def help_text(*words: str) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.stdout


def command(*words: str):
    cmd = typer.main.get_command(app)
    for word in words:
        cmd = cmd.commands[word]
    return cmd


def headings(text: str) -> list[str]:
    return [line.strip()[:-1] for line in text.splitlines() if re.fullmatch(r"[A-Z][A-Za-z ]*:", line.strip())]


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_options_are_grouped_under_titled_headings(words):
    groups = COMMANDS[words]
    params = command(*words).params
    options = [p for p in params if p.param_type_name == "option"]
    if groups:  # every option but --help belongs to one of the command's groups
        assert {p.name: p.rich_help_panel for p in options if p.rich_help_panel not in groups} == {}
    arguments = ["Arguments"] if any(p.param_type_name == "argument" for p in params) else []
    assert headings(help_text(*words)) == [*arguments, *groups, "Options", "Examples"]


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_no_python_placeholders(words):
    text = help_text(*words)
    usage = text.splitlines()[0]
    assert usage.startswith("Usage: ") and not re.search(r"[{}]|<", usage), usage
    for placeholder in ("<list[", "<str>", "<path>", "<bool>"):
        assert placeholder not in text, placeholder


def literal_choices(cls, field: str) -> tuple:
    hint = typing.get_type_hints(cls)[field]
    assert typing.get_origin(hint) is typing.Literal, field
    return typing.get_args(hint)


@pytest.mark.parametrize(
    "words, option, config, field",
    [
        (("build",), "--method", "BuildConfig", "method"),
        (("build",), "--pack", "BuildConfig", "pack"),
        (("build",), "--objective", "BuildConfig", "objective"),
        (("build",), "--doc-sep", "BuildConfig", "doc_sep"),
        (("build",), "--on-decode-error", "BuildConfig", "on_decode_error"),
        (("build",), "--engine", "BuildConfig", "engine"),
        (("train",), "--optimizer", "TrainConfig", "optimizer"),
        (("train",), "--schedule", "TrainConfig", "schedule"),
        (("train",), "--report-to", "TrainConfig", "report_to"),
        (("tokenizer", "train"), "--doc-sep", "BuildConfig", "doc_sep"),
        (("compare-methods",), "--doc-sep", "BuildConfig", "doc_sep"),
    ],
)
def test_choices_are_shown_as_the_configs_choices(words, option, config, field):
    import mlmprep.config

    choices = literal_choices(getattr(mlmprep.config, config), field)
    assert re.search(rf"^\s+{option} <{re.escape('|'.join(choices))}>", help_text(*words), flags=re.M)
    wrong = CliRunner().invoke(app, [*words, option, "no-such-choice"])
    assert wrong.exit_code == 2 and "no-such-choice" in wrong.output


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_every_command_shows_its_examples_line_for_line(words):
    epilog = command(*words).epilog
    assert epilog and epilog.startswith("Examples:")
    shown = {line.strip() for line in help_text(*words).splitlines()}
    for line in epilog.splitlines():
        assert line.strip() in shown, line  # whole lines: never re-wrapped mid-flag


def test_version():
    import mlmprep

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"mlmprep {mlmprep.__version__}\n"


def test_help_loads_no_heavy_module():
    code = (
        "import sys\nfrom mlmprep.cli import main\n"
        "for args in (['--help'], ['build', '--help'], ['train', '--help']):\n"
        "    sys.argv = ['mlmprep', *args]\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "print(sorted(m for m in ('rich', 'numba', 'torch', 'datasets', 'pyarrow', 'tokenizers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


# command words -> (its config class, option -> config field where the names differ, None: none)
CONFIG_OF = {
    ("build",): ("BuildConfig", {}),
    ("train",): ("TrainConfig", {}),
    ("compare-methods",): ("CompareConfig", {"max_mb": "max_chars"}),
    ("tokenizer", "train"): ("BuildConfig", {"train_chars": "tokenizer_train_chars", "out": None}),
}
# stated defaults that are words, not values: (command, option) -> the config default they describe
DESCRIBED = {("build", "normalize_whitespace"): False, ("build", "nfkc"): False, ("build", "random_roll"): False,
             ("build", "whole_word"): False, ("build", "force"): False, ("train", "resume"): False,
             ("train", "deterministic"): False, ("train", "bf16"): True, ("train", "compile"): None,
             ("train", "validation"): None, ("train", "max_encoder_len"): None, ("train", "max_decoder_len"): None,
             ("compare-methods", "max_mb"): 0}


def stated_default(param) -> tuple[bool, object]:
    """(whether help states a default, the text or value it states): `[default: X]` in the help text, or
    the default click shows itself."""
    found = re.search(r"\[default: ([^\];]*)", param.help or "")
    if found:
        return True, found.group(1)
    return (param.show_default and param.default is not None and not param.is_flag), param.default


@pytest.mark.parametrize("words", CONFIG_OF, ids=" ".join)
def test_the_defaults_help_states_are_the_configs(words):
    import dataclasses

    import mlmprep.compare
    import mlmprep.config

    name, renamed = CONFIG_OF[words]
    cls = getattr(mlmprep.config, name, None) or getattr(mlmprep.compare, name)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    compared = 0
    for param in command(*words).params:
        field = renamed.get(param.name, param.name)
        states, text = stated_default(param)
        if not states or field not in defaults:
            continue
        if (words[0], param.name) in DESCRIBED:
            assert DESCRIBED[words[0], param.name] == defaults[field], param.name
        elif isinstance(text, str) and not re.fullmatch(r"[-+.\de]+", text):
            assert text == defaults[field], (param.name, text, defaults[field])
        else:
            assert float(text) == float(defaults[field]), (param.name, text, defaults[field])
        compared += 1
    assert compared >= 4, compared  # the help states defaults at all


@pytest.mark.parametrize("words", [("build",), ("train",)], ids=" ".join)
def test_every_flag_a_config_file_can_set_the_command_line_can_unset(words):
    """The command line overrides a --config file, so each on/off option has both spellings (a file's
    `deterministic: true` is turned off for one run with --no-deterministic)."""
    one_way = [p.opts[0] for p in command(*words).params if getattr(p, "is_flag", False) and not p.secondary_opts]
    assert one_way == []
