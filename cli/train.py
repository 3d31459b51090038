"""`mlmprep train`: a thin wrapper over mlmprep.train.loop.fit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from mlmprep.cli import app
from mlmprep.cli._util import HelpCommand, cli_errors, error_line, stopped
from mlmprep.cli.options import config_options
from mlmprep.config import TrainConfig

TRAIN_EXAMPLES = """Examples:

  mlmprep train mlmprep-data --model tiny --out runs/a --epochs 3 \\
      --max-tokens-per-batch 16384 --max-tokens-per-microbatch 4096 --max-examples-per-microbatch 28
  mlmprep train mlmprep-data --out runs/a --resume         # continue from the last checkpoint, same options
  mlmprep train mlmprep-data --config train.yaml --out runs/b --report-to tensorboard
  torchrun --nproc_per_node 2 -m mlmprep train mlmprep-data --out runs/c   # DDP: one process per device
  mlmprep train web books wiki=data/wikipedia --weights 0.6,0.3,0.1 --max-tokens 2000000000 --out runs/mix
  mlmprep train web books wiki --mix temperature:2 --max-steps 100000 --out runs/t2   # weights ~ size^(1/2)
  mlmprep train s3://bucket/data --cache-dir /local/ssd --out runs/d     # each epoch's seed fetched ahead
"""


@app.command(epilog=TRAIN_EXAMPLES, cls=HelpCommand)
@cli_errors
@config_options(TrainConfig)
def train(
    data: Annotated[list[str] | None, typer.Argument(
        help=f"A directory written by mlmprep build, or its URL (s3://, gs://: read through a local cache); "
             f"several (PATH or NAME=PATH) train on a mixture, --weights or --mix. [default: {TrainConfig.data}]",
        show_default=False)] = None,
    *,
    config: Annotated[Path | None, typer.Option(help="JSON/YAML file of options; the command line overrides it.",
                                                rich_help_panel="Data", metavar="FILE")] = None,
    options: dict,
) -> None:
    """Pretrain T5 (span data) or a BERT-style model (mlm data) on a build, with token-budget batches."""
    from mlmprep.config_files import read_config_file
    from mlmprep.train.loop import fit
    from mlmprep.train.numerics import Diverged

    if data:
        options = {("data" if len(data) == 1 else "sources"): data[0] if len(data) == 1 else tuple(data), **options}
    cfg = run_config(file_sources(read_config_file(config)) if config else {}, options)
    try:
        final = fit(cfg)
    except Diverged as exc:  # not the user's input: exit 1, one line
        typer.echo(error_line(exc), err=True)
        raise typer.Exit(code=1) from None
    except KeyboardInterrupt as exc:
        word, code = stopped(exc)
        typer.echo(interrupted_line(Path(cfg.out), word), err=True)
        raise typer.Exit(code=code) from None
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one line for the run, not one per rank
        typer.echo(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in final.items()))


def run_config(file_values: dict, options: dict):
    """The run's TrainConfig: defaults, the --config file, the command line; on --resume the run's saved
    options come first, and only that whole is checked (a resume may repeat --lr 1e-6 of a run whose
    --min-lr is below it, though the default --min-lr is not)."""
    from mlmprep.config_files import Options, config_values, make_config
    from mlmprep.format.publish import check_output_path
    from mlmprep.train import checkpoint

    given_values = config_values(TrainConfig, file_values, options)
    out = Path(given_values.get("out", TrainConfig.out))
    check_output_path(out, directory=True)
    if not given_values.get("resume"):
        return make_config(TrainConfig, given_values, microbatch_default(given_values))
    saved = Options(checkpoint.saved_config(out), str(out / checkpoint.CONFIG))  # a damaged value names the file
    return make_config(TrainConfig, saved, given_values)


def file_sources(values: dict) -> dict:
    """A --config file's `sources:` list of {path, weight, name} mappings as the options `sources` and `weights`."""
    from mlmprep.errors import ConfigError

    listed = values.get("sources")
    if not isinstance(listed, list) or not all(isinstance(item, dict) for item in listed):
        return values
    for item in listed:
        if "path" not in item or set(item) - {"path", "weight", "name"}:
            raise ConfigError(f"sources: each entry takes path, and optionally weight and name; got {sorted(item)}")
    weighted = ["weight" in item for item in listed]
    if any(weighted) and not all(weighted):
        raise ConfigError("sources: give every source a weight, or none (then --mix sets them)")
    specs = tuple(f"{item['name']}={item['path']}" if "name" in item else str(item["path"]) for item in listed)
    if len(specs) > 1:
        out = {**values, "sources": specs}
    else:
        out = {key: value for key, value in values.items() if key != "sources"} | {"data": str(listed[0]["path"])}
    if all(weighted):
        out["weights"] = ",".join(str(item["weight"]) for item in listed)
    return out


def microbatch_default(given_values: dict) -> dict:
    """A --max-tokens-per-batch below the default --max-tokens-per-microbatch lowers that default to it: the
    run is not refused for an option it was never given."""
    if "max_tokens_per_microbatch" in given_values or "max_tokens_per_batch" not in given_values:
        return {}
    batch = given_values["max_tokens_per_batch"]
    return {"max_tokens_per_microbatch": min(TrainConfig.max_tokens_per_microbatch, batch)}


def interrupted_line(run: Path, word: str = "interrupted") -> str:
    """What Ctrl-C (or SIGTERM: `word`) left of a run: nothing, or RUN with its last checkpoint, which --resume
    continues from."""
    from mlmprep.train.checkpoint import latest

    if not run.is_dir() or not any(run.iterdir()):
        return f"{word}; nothing was left under the output name"
    last = latest(run)
    if last is None:
        return (f"{word} before the first checkpoint; {run} keeps the run's options: `mlmprep train --out {run} "
                "--resume` starts it again from step 0")
    return (f"{word}; {run} is kept (last checkpoint {last.name}): `mlmprep train --out {run} --resume` "
            "continues the run")
