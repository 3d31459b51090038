"""`--help` reads well: options under titled groups, choices as choices, no Python placeholders, examples under
every command printed as written, `mlmprep --version`; and help stays fast (no rich, numba, torch imports).
The options of build and train are made from the config dataclasses' fields (the docs site's CLI reference is
checked in tests/repo/test_docs.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import pytest
import typer
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, OneLineErrors, cli_errors
from mlmprep.cli.options import config_options, option_fields
from mlmprep.config import BuildConfig, CompareConfig, TrainConfig, opt
from mlmprep.config_files import make_config, read_config_file

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = {  # command words -> the option groups its help shows, in order (the lone --help goes under "Options")
    ("build",): ["Input", "Dedup", "Filters", "Tokenizer", "Windows", "Masking", "Output", "Speed"],
    ("train",): ["Data", "Mixture", "Model", "Batching", "Optimizer", "Schedule", "Checkpoints and logs", "Speed",
                 "Remote data"],
    ("compare-methods",): ["Presets", "Input", "Build", "Training", "Output", "Speed"],
    ("remask",): [],
    ("inspect",): [],
    ("verify",): [],
    ("tokenizer", "train"): ["Output", "Input", "Tokenizer"],
    ("cache", "ls"): [],
    ("cache", "clear"): [],
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
        (("compare-methods",), "--doc-sep", "CompareConfig", "doc_sep"),
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


# ------------------------------------------------------------------ options made from the config dataclasses

CONFIG_COMMANDS = {("build",): BuildConfig, ("train",): TrainConfig, ("compare-methods",): CompareConfig}
PRESETS = {"full", "quick"}  # compare-methods' presets: which defaults the options are given over


def expected_names(cls, field) -> list[str]:
    """The names an option field should have: its declared flags, else --name, and --no-name for a bool."""
    if field.metadata["flags"]:
        return field.metadata["flags"].split("/")
    name = "--" + field.name.replace("_", "-")
    return [name, "--no-" + name[2:]] if typing.get_type_hints(cls)[field.name] in (bool, bool | None) else [name]


def default_matches(text: str | None, field) -> bool:
    """Whether the default help states (None: it states none) is the field's."""
    if field.metadata["shown"] is not None or field.default is None:
        return text == field.metadata["shown"]
    if isinstance(field.default, bool):
        return text == ("on" if field.default else "off")
    if isinstance(field.default, (int, float)):
        return text is not None and float(text) == field.default
    return text == field.default


def stated(help: str) -> str | None:
    found = re.search(r"\[default: (.*)\]$", help)
    return found.group(1) if found else None


@pytest.mark.parametrize("words", CONFIG_COMMANDS, ids=" ".join)
def test_every_config_option_is_in_help_with_its_default_flags_and_panel(words):
    cls = CONFIG_COMMANDS[words]
    params = {p.name: p for p in command(*words).params}
    text = help_text(*words)
    fields = option_fields(cls)
    options = {name for name, p in params.items() if p.param_type_name == "option"}
    assert {f.name for f in fields} == options - {"config", "help", *PRESETS}
    for field in fields:
        param = params[field.name]
        names = [*param.opts, *param.secondary_opts]
        assert names == expected_names(cls, field), field.name
        assert param.rich_help_panel == field.metadata["panel"], field.name
        assert param.default is None  # not given: the --config file's value or the field's default applies
        assert param.help.startswith(field.metadata["help"]) and default_matches(stated(param.help), field), param.help
        shown = " / ".join(names) + (f" {field.metadata['metavar']}" if field.metadata["metavar"] else "")
        assert re.search(rf"^  {re.escape(shown)}(\s|$)", text, flags=re.M), shown


@pytest.mark.parametrize("words", CONFIG_COMMANDS, ids=" ".join)
def test_an_option_that_defaults_to_none_says_what_none_does(words):
    cls = CONFIG_COMMANDS[words]
    for field in option_fields(cls):
        if field.default is None:
            assert field.metadata["shown"] or "None:" in field.metadata["help"], field.name


def test_the_early_start_knows_every_flag_of_build():
    from mlmprep.cli.build import FLAGS

    assert FLAGS == {name for f in option_fields(BuildConfig) if isinstance(f.default, bool)
                     for name in expected_names(BuildConfig, f)}


@dataclass(frozen=True)
class Toy:
    """A config as a developer extends one: each opt() field becomes an option with no other edit."""

    corpus: tuple[str, ...] = ()
    level: int = opt(3, "How much.", panel="Output")
    storage_options: str | None = opt(None, "fsspec options as JSON. None: the defaults.", panel="Output",
                                      metavar="JSON")
    loud: bool = opt(False, "Say more.", panel="Speed")
    sep: Literal["line", "blank"] = opt("line", "Separator.", panel="Speed", flags="--sep")


def toy_app(got: dict) -> typer.Typer:
    toy = typer.Typer(cls=OneLineErrors, rich_markup_mode=None, add_completion=False)

    @toy.command(cls=HelpCommand)
    @cli_errors
    @config_options(Toy)
    def run(config: Annotated[str | None, typer.Option(rich_help_panel="Output")] = None, *, options: dict) -> None:
        got["cfg"] = make_config(Toy, read_config_file(config) if config else {}, options, source="options")

    @toy.command()
    def other() -> None:
        """A second command, so that `run` is a subcommand as build and train are."""

    return toy


def test_a_new_config_field_is_an_option_and_a_config_file_key_with_no_other_edit(tmp_path):
    got: dict = {}
    toy = toy_app(got)
    text = CliRunner().invoke(toy, ["run", "--help"], terminal_width=200).stdout
    assert re.search(r"^Output:\n  --config <str>\n  --level <int> +How much. \[default: 3\]$", text, re.M), text
    assert re.search(r"^  --storage-options JSON +fsspec options as JSON. None: the defaults.$", text, flags=re.M)
    assert re.search(r"^Speed:\n  --loud / --no-loud +Say more. \[default: off\]$", text, flags=re.M), text
    result = CliRunner().invoke(toy, ["run", "--storage-options", "{}", "--loud"])
    assert result.exit_code == 0, result.output
    assert (got["cfg"].storage_options, got["cfg"].loud, got["cfg"].level) == ("{}", True, 3)
    (tmp_path / "c.yaml").write_text("storage-options: '{\"a\": 1}'\nlevel: 5\nloud: true\n", encoding="utf-8")
    result = CliRunner().invoke(toy, ["run", "--config", str(tmp_path / "c.yaml"), "--no-loud"])
    assert result.exit_code == 0, result.output
    assert (got["cfg"].storage_options, got["cfg"].loud, got["cfg"].level) == ('{"a": 1}', False, 5)
    (tmp_path / "c.yaml").write_text("levle: 5\n", encoding="utf-8")
    result = CliRunner().invoke(toy, ["run", "--config", str(tmp_path / "c.yaml")])
    assert result.exit_code == 2 and "unknown option 'levle' (did you mean 'level'?)" in result.output


def test_tokenizer_train_takes_builds_options_by_the_same_names_and_words():
    """One option, one name: what `tokenizer train` shares with `build` is declared once, in BuildConfig."""
    build = {p.name: (p.opts, p.help) for p in command("build").params}
    names = {"vocab_size", "tokenizer_train_chars", "text_column", "doc_sep", "storage_options"}
    shared = [p for p in command("tokenizer", "train").params if p.name in names]
    assert {p.name for p in shared} == names
    for param in shared:
        assert (param.opts, param.help) == build[param.name], param.name
    assert "--train-chars" not in help_text("tokenizer", "train")  # the old name: accepted, not shown


@pytest.mark.parametrize("words", [("build",), ("train",)], ids=" ".join)
def test_every_flag_a_config_file_can_set_the_command_line_can_unset(words):
    """The command line overrides a --config file, so each on/off option has both spellings (a file's
    `deterministic: true` is turned off for one run with --no-deterministic)."""
    one_way = [p.opts[0] for p in command(*words).params if getattr(p, "is_flag", False) and not p.secondary_opts]
    assert one_way == []


BLAS_IN_CHILD = """
import os, sys
from mlmprep.cli import main
sys.argv = ["mlmprep", *sys.argv[1:], "--help"]
try:
    main()
except SystemExit:
    pass
import gc, mlmprep
print(gc.get_threshold()[0] == mlmprep.GC_YOUNG, os.environ.get("OPENBLAS_NUM_THREADS"), file=sys.stderr)
"""


@pytest.mark.parametrize(("words", "given", "expected"), [
    (("build",), None, "1"), (("inspect",), None, "1"), (("tokenizer", "train"), None, "1"),
    (("train",), None, "None"), (("compare-methods",), None, "None"), (("build",), "4", "4"),
])
def test_commands_that_multiply_no_matrices_start_numpy_without_blas_threads(words, given, expected):
    """NumPy's OpenBLAS threads spin on a core of their own after the import; commands that multiply no matrices
    (the build's driver, and its workers' server, which inherits the environment) start with one BLAS thread,
    training keeps them all, and a value the user set is kept. Every command collects at mlmprep's threshold."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", BLAS_IN_CHILD, *words], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.stderr.strip().splitlines()[-1] == f"True {expected}", done.stderr
