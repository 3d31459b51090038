"""`mlmprep compare-methods`: a thin wrapper over mlmprep.compare."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from mlmprep.cli import app
from mlmprep.cli._util import INTERRUPTED, HelpCommand, cli_errors, given, note, option
from mlmprep.config import COMPARE_MODES, CompareConfig

DEFAULT = CompareConfig()  # the defaults help states; --quick and --full presets override some of them

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
        if field == "max_chars":  # the option counts millions of characters
            given.append(f"--max-mb {value / 1e6:g}")
        elif field in options:
            given.append(f"--{field.replace('_', '-')} {value}")
        else:
            fixed.append(f"{field} {value}")
    return ", ".join(given) + (f"; and, having no option, {', '.join(fixed)}" if fixed else "")


@app.command("compare-methods", epilog=COMPARE_EXAMPLES, cls=PresetsHelp)
@cli_errors
def compare_methods(
    corpus: Annotated[list[str] | None, typer.Argument(help="Files, directories or globs. None: the built-in sample.",
                                                       show_default=False)] = None,
    *,
    full: Annotated[bool, typer.Option("--full", help="GPU-sized: t5-small shapes; --help ends listing all it sets.",
                                       rich_help_panel="Presets")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="A smoke run; --help ends listing all it sets.",
                                        rich_help_panel="Presets")] = False,
    max_mb: Annotated[float | None, option(
        "Use only the corpus' first documents, up to this many million characters (0: the whole corpus). "
        f"[default: {DEFAULT.max_chars}]", rich_help_panel="Input")] = None,
    heldout_fraction: Annotated[float | None, option(
        f"Share of documents held out for the common validation set. [default: {DEFAULT.heldout_fraction}]",
        rich_help_panel="Input")] = None,
    text_column: Annotated[str | None, option(
        f"Text field of structured corpus files. [default: {DEFAULT.text_column}]", rich_help_panel="Input",
        metavar="FIELD")] = None,
    doc_sep: Annotated[Literal["line", "blank"] | None, option(
        f"In .txt files a document is a 'line' or a 'blank'-line separated paragraph. [default: {DEFAULT.doc_sep}]",
        rich_help_panel="Input")] = None,
    vocab_size: Annotated[int | None, option(
        f"Vocabulary of the one tokenizer both methods use. [default: {DEFAULT.vocab_size}]",
        rich_help_panel="Build")] = None,
    input_length: Annotated[int | None, option(f"Encoder input length after masking. [default: {DEFAULT.input_length}]",
                                               rich_help_panel="Build")] = None,
    model: Annotated[str | None, option(f"Model preset or config.json, the same for both. [default: {DEFAULT.model}]",
                                        rich_help_panel="Training", metavar="NAME|PATH")] = None,
    steps: Annotated[int | None, option(f"Optimizer steps of each run. [default: {DEFAULT.steps}]",
                                        rich_help_panel="Training")] = None,
    eval_every: Annotated[int | None, option(
        f"Evaluate on the common validation set every N steps. [default: {DEFAULT.eval_every}]",
        rich_help_panel="Training")] = None,
    max_tokens_per_batch: Annotated[int | None, option(
        f"Padded effective tokens per step. [default: {DEFAULT.max_tokens_per_batch}]",
        rich_help_panel="Training")] = None,
    seed: Annotated[int | None, option(
        f"Seed of the hold-out, masks, weights and batch plans. [default: {DEFAULT.seed}]",
        rich_help_panel="Training")] = None,
    out: Annotated[str | None, option(
        f"Directory for the builds, runs, results.json, results.md and plots. [default: {DEFAULT.out}]",
        rich_help_panel="Output", metavar="DIR")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace a previous compare-methods result in --out, its build and run directories with all "
        "they hold. An --out holding anything else is refused, with or without it.", rich_help_panel="Output")] = False,
    threads: Annotated[int | None, option(
        "Torch CPU threads while training (0: torch's default). "
        f"[default: {DEFAULT.threads}; --full: {COMPARE_MODES['full']['threads']}]", rich_help_panel="Speed")] = None,
) -> None:
    """Text segmentation vs token splitting: build both from the same documents, train the same T5 on each,
    evaluate both on one held-out validation set, and write results.json, results.md and plots."""
    from mlmprep.compare import check_compare, compare, compare_config, results_markdown
    from mlmprep.errors import ConfigError

    if full and quick:
        raise ConfigError("--full and --quick contradict each other; give at most one")
    options = given(
        corpus=tuple(corpus) if corpus else None, out=out, heldout_fraction=heldout_fraction, text_column=text_column,
        doc_sep=doc_sep, vocab_size=vocab_size, input_length=input_length, model=model, steps=steps,
        eval_every=eval_every, max_tokens_per_batch=max_tokens_per_batch, seed=seed, threads=threads,
        max_chars=million_chars(max_mb) if max_mb is not None else None,
    )
    cfg = compare_config("full" if full else "quick" if quick else "default", options)
    check_compare(cfg, force=force)
    kept = Path(cfg.out).is_dir()  # a run that stops leaves --out as it was: an earlier result, or nothing
    try:
        results = compare(cfg, log=note)  # progress at a terminal only, so that an error stays one line
    except KeyboardInterrupt:
        typer.echo(f"interrupted; {cfg.out} is as it was before this run" if kept else
                   "interrupted; nothing was left under the output name", err=True)
        raise typer.Exit(code=INTERRUPTED) from None
    typer.echo(results_markdown(results))
    typer.echo(f"wrote {cfg.out}/results.json, results.md, {', '.join(results['plots'])}")


def million_chars(max_mb: float) -> int:
    """--max-mb in characters: a number >= 0 (NaN and infinity are refused, not a traceback)."""
    from mlmprep.errors import ConfigError

    if not (math.isfinite(max_mb) and max_mb >= 0):
        raise ConfigError(f"--max-mb must be a number >= 0 (0: the whole corpus), got {max_mb}")
    return max(1, round(max_mb * 1e6)) if max_mb else 0  # a tiny positive limit is not 0, the whole corpus
