"""`mlmprep train`: a thin wrapper over mlmprep.train.loop.fit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from mlmprep.cli import app
from mlmprep.cli._util import INTERRUPTED, HelpCommand, cli_errors, error_line
from mlmprep.cli.options import config_options
from mlmprep.config import TrainConfig

TRAIN_EXAMPLES = """Examples:

  mlmprep train mlmprep-data --model tiny --out runs/a --epochs 3 \\
      --max-tokens-per-batch 16384 --max-tokens-per-microbatch 4096 --max-examples-per-microbatch 28
  mlmprep train mlmprep-data --out runs/a --resume         # continue from the last checkpoint, same options
  mlmprep train mlmprep-data --config train.yaml --out runs/b --report-to tensorboard
  torchrun --nproc_per_node 2 -m mlmprep train mlmprep-data --out runs/c   # DDP: one process per device
  mlmprep train s3://bucket/data --cache-dir /local/ssd --out runs/d     # each epoch's seed fetched ahead
"""


@app.command(epilog=TRAIN_EXAMPLES, cls=HelpCommand)
@cli_errors
@config_options(TrainConfig)
def train(
    data: Annotated[str | None, typer.Argument(
        help=f"A directory written by mlmprep build, or its URL (s3://, gs://), read through a local cache. "
             f"[default: {TrainConfig.data}]", show_default=False)] = None,
    *,
    config: Annotated[Path | None, typer.Option(help="JSON/YAML file of options; the command line overrides it.",
                                                rich_help_panel="Data", metavar="FILE")] = None,
    options: dict,
) -> None:
    """Pretrain T5 (span data) or a BERT-style model (mlm data) on a build, with token-budget batches."""
    from mlmprep.config import read_config_file
    from mlmprep.train.loop import fit
    from mlmprep.train.numerics import Diverged

    if data is not None:
        options = {"data": data, **options}
    cfg = run_config(read_config_file(config) if config else {}, options)
    try:
        final = fit(cfg)
    except Diverged as exc:  # not the user's input: exit 1, one line
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(code=1) from None
    except KeyboardInterrupt:
        typer.echo(interrupted_line(Path(cfg.out)), err=True)
        raise typer.Exit(code=INTERRUPTED) from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one line for the run, not one per rank
        typer.echo(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in final.items()))


def run_config(file_values: dict, options: dict):
    """The run's TrainConfig: defaults, the --config file, the command line; on --resume the run's saved
    options come first, and only that whole is checked (a resume may repeat --lr 1e-6 of a run whose
    --min-lr is below it, though the default --min-lr is not)."""
    from mlmprep.config import Options, config_values, make_config
    from mlmprep.format.publish import check_output_path
    from mlmprep.train import checkpoint

    given_values = config_values(TrainConfig, file_values, options)
    out = Path(given_values.get("out", TrainConfig.out))
    check_output_path(out, directory=True)
    if not given_values.get("resume"):
        return make_config(TrainConfig, given_values, microbatch_default(given_values))
    saved = Options(checkpoint.saved_config(out), str(out / checkpoint.CONFIG))  # a damaged value names the file
    return make_config(TrainConfig, saved, given_values)


def microbatch_default(given_values: dict) -> dict:
    """A --max-tokens-per-batch below the default --max-tokens-per-microbatch lowers that default to it: the
    run is not refused for an option it was never given."""
    if "max_tokens_per_microbatch" in given_values or "max_tokens_per_batch" not in given_values:
        return {}
    batch = given_values["max_tokens_per_batch"]
    return {"max_tokens_per_microbatch": min(TrainConfig.max_tokens_per_microbatch, batch)}


def interrupted_line(run: Path) -> str:
    """What Ctrl-C left of a run: nothing, or RUN with its last checkpoint, which --resume continues from."""
    from mlmprep.train.checkpoint import latest

    if not run.is_dir() or not any(run.iterdir()):
        return "interrupted; nothing was left under the output name"
    last = latest(run)
    kept = f"last checkpoint {last.name}" if last else "no checkpoint yet, so a resume starts again at step 0"
    return f"interrupted; {run} is kept ({kept}): `mlmprep train --out {run} --resume` continues the run"
