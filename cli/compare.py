"""`mlmprep compare-methods`: a thin wrapper over mlmprep.compare."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer

from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, cli_errors, note, stopped
from mlmprep.cli.options import config_options
from mlmprep.config import COMPARE_MODES, CompareConfig

COMPARE_EXAMPLES = """Examples:

  mlmprep compare-methods corpus.txt --out bench-out/         # CPU-sized: tiny T5, 400 steps, minutes on 2 cores
  mlmprep compare-methods corpus.txt --out bench-out/ --full  # GPU-sized: t5-small shapes, input length 512
  mlmprep compare-methods --quick --out /tmp/cmp              # the built-in sample, 20 steps: a smoke run
"""


class PresetsHelp(HelpCommand):
    """compare-methods' help, with what each preset sets (read from COMPARE_MODES) before the examples."""

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        options = {param.name for param in self.get_params(ctx)}
        with formatter.section("What the presets set (an option given as well overrides its preset)"):
            indent = " " * formatter.current_indent
            for mode, settings in COMPARE_MODES.items():
                if settings:  # wrapped here, never inside an option's name as click's wrapping would
                    lines = textwrap.wrap(preset_settings(mode, options), formatter.width - len(indent) - 9,
                                          break_on_hyphens=False)
                    formatter.write("".join(f"{indent}{f'--{mode}' if i == 0 else '':<9}{line}\n"
                                            for i, line in enumerate(lines)))
        super().format_epilog(ctx, formatter)


def preset_settings(mode: str, options: set[str]) -> str:
    """The settings of preset `mode` as options and values; the ones the command has no option for, by field."""
    given, fixed = [], []
    for field, value in COMPARE_MODES[mode].items():
        if field in options:
            given.append(f"--{field.replace('_', '-')} {value}")
        else:
            fixed.append(f"{field} {value}")
    return ", ".join(given) + (f"; and, having no option, {', '.join(fixed)}" if fixed else "")


@app.command("compare-methods", epilog=COMPARE_EXAMPLES, cls=PresetsHelp)
@cli_errors
@config_options(CompareConfig)
def compare_methods(
    corpus: Annotated[list[str] | None, typer.Argument(help="Files, directories or globs. None: the built-in sample.",
                                                       show_default=False)] = None,
    *,
    full: Annotated[bool, typer.Option("--full", help="GPU-sized: t5-small shapes; --help ends listing all it sets.",
                                       rich_help_panel="Presets")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="A smoke run; --help ends listing all it sets.",
                                        rich_help_panel="Presets")] = False,
    config: Annotated[Path | None, typer.Option(help="JSON/YAML file of options (a preset as `mode`); the command "
                                                "line overrides it.", rich_help_panel="Input", metavar="FILE")] = None,
    options: dict,
) -> None:
    """Text segmentation vs token splitting: build both from the same documents, train the same T5 on each,
    evaluate both on one held-out validation set, and write results.json, results.md and plots."""
    from mlmprep.compare import check_compare, compare, compare_config, results_markdown
    from mlmprep.config_files import read_config_file
    from mlmprep.errors import ConfigError

    if full and quick:
        raise ConfigError("--full and --quick contradict each other; give at most one")
    if corpus:
        options = {"corpus": tuple(corpus), **options}
    file_values = read_config_file(config) if config else {}
    mode = "full" if full else "quick" if quick else file_values.get("mode", "default")
    cfg = compare_config(mode, file_values, options)
    check_compare(cfg)
    kept = Path(cfg.out).is_dir()  # a run that stops leaves --out as it was: an earlier result, or nothing
    try:
        results = compare(cfg, log=note)  # progress at a terminal only, so that an error stays one line
    except KeyboardInterrupt as exc:
        word, code = stopped(exc)
        typer.echo(f"{word}; {cfg.out} is as it was before this run" if kept else
                   f"{word}; nothing was left under the output name", err=True)
        raise typer.Exit(code=code) from None
    typer.echo(results_markdown(results))
    typer.echo(f"wrote {cfg.out}/results.json, results.md, {', '.join(results['plots'])}")
