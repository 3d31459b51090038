"""`mlmprep train`: a thin wrapper over mlmprep.train.loop.fit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import typer

from mlmprep.cli import app
from mlmprep.cli._util import INTERRUPTED, HelpCommand, cli_errors, error_line, given, option

TRAIN_EXAMPLES = """Examples:

  mlmprep train mlmprep-data --model tiny --out runs/a --epochs 3 \\
      --max-tokens-per-batch 16384 --max-tokens-per-microbatch 4096 --max-examples-per-microbatch 28
  mlmprep train mlmprep-data --out runs/a --resume         # continue from the last checkpoint, same options
  mlmprep train mlmprep-data --config train.yaml --out runs/b --report-to tensorboard
  torchrun --nproc_per_node 2 -m mlmprep train mlmprep-data --out runs/c   # DDP: one process per device
"""


@app.command(epilog=TRAIN_EXAMPLES, cls=HelpCommand)
@cli_errors
def train(
    data: Annotated[str | None, typer.Argument(help="A directory written by mlmprep build. [default: mlmprep-data]", show_default=False)] = None,
    *,
    config: Annotated[Path | None, typer.Option(help="JSON/YAML file of options; the command line overrides it.", rich_help_panel="Data", metavar="FILE")] = None,
    max_encoder_len: Annotated[int | None, option("Truncate longer inputs (keeping </s>). [default: none]", rich_help_panel="Data")] = None,
    max_decoder_len: Annotated[int | None, option("Truncate longer span targets (keeping </s>). [default: none]", rich_help_panel="Data")] = None,
    validation: Annotated[str | None, option("A split directory of another build (same tokenizer) to evaluate on. [default: DATA/validation]", rich_help_panel="Data", metavar="DIR")] = None,
    seed: Annotated[int | None, option("Seed of the model's initial weights and the batch plan. [default: 0]", rich_help_panel="Data")] = None,
    model: Annotated[str | None, option("tiny, t5-small, t5-base, t5-v1_1-small, t5-v1_1-base, a config.json, or a local checkpoint directory. T5 for span data, BERT-like for mlm. [default: tiny]", rich_help_panel="Model", metavar="NAME|PATH")] = None,
    max_tokens_per_batch: Annotated[int | None, option("Padded effective tokens (enc + alpha*dec) per optimizer step, all ranks. [default: 16384]", rich_help_panel="Batching")] = None,
    max_tokens_per_microbatch: Annotated[int | None, option("Padded effective tokens per forward/backward. [default: 4096; at most --max-tokens-per-batch]", rich_help_panel="Batching")] = None,
    max_examples_per_microbatch: Annotated[int | None, option("Rows per forward/backward. [default: 28]", rich_help_panel="Batching")] = None,
    alpha: Annotated[float | None, option("Cost of a decoder token relative to an encoder token. [default: 2.0]", rich_help_panel="Batching")] = None,
    pad_to_multiple_of: Annotated[int | None, option("Pad batch widths to a multiple of this. [default: 1]", rich_help_panel="Batching")] = None,
    eval_max_tokens_per_microbatch: Annotated[int | None, option("Padded effective tokens per evaluation forward. [default: 4096]", rich_help_panel="Batching")] = None,
    grow_after: Annotated[int | None, option("After an out-of-memory error, good steps before the shrunk limits grow x1.25. [default: 100]", rich_help_panel="Batching")] = None,
    optimizer: Annotated[Literal["adamw", "adafactor"] | None, option("adamw or adafactor. [default: adamw]", rich_help_panel="Optimizer")] = None,
    lr: Annotated[float | None, option("Peak learning rate. [default: 1e-3]", rich_help_panel="Optimizer")] = None,
    weight_decay: Annotated[float | None, option("AdamW weight decay on matrices. [default: 0]", rich_help_panel="Optimizer")] = None,
    beta1: Annotated[float | None, option("AdamW beta1. [default: 0.9]", rich_help_panel="Optimizer")] = None,
    beta2: Annotated[float | None, option("AdamW beta2. [default: 0.999]", rich_help_panel="Optimizer")] = None,
    grad_clip: Annotated[float | None, option("Clip the global gradient norm to this (0: off). [default: 1.0]", rich_help_panel="Optimizer")] = None,
    max_bad_steps: Annotated[int | None, option("Steps with a non-finite loss or gradient are skipped; stop (exit 1) after this many in a row. [default: 8]", rich_help_panel="Optimizer")] = None,
    epochs: Annotated[int | None, option("Passes over the data; epoch e reads split seed-{e % N}. [default: 1]", rich_help_panel="Schedule")] = None,
    max_steps: Annotated[int | None, option("Exactly this many optimizer steps, whatever --epochs says (0: off). [default: 0]", rich_help_panel="Schedule")] = None,
    min_lr: Annotated[float | None, option("Learning rate at the end of the decay. [default: 1e-5]", rich_help_panel="Schedule")] = None,
    schedule: Annotated[Literal["cosine", "linear", "constant", "inverse_sqrt"] | None, option("After warmup: cosine, linear or constant; or inverse_sqrt, T5's lr*sqrt(warmup/step). [default: cosine]", rich_help_panel="Schedule")] = None,
    warmup_steps: Annotated[int | None, option("Linear warmup steps. [default: 100]", rich_help_panel="Schedule")] = None,
    decay_steps: Annotated[int | None, option("Step at which the decay reaches --min-lr (0: the last step). [default: 0]", rich_help_panel="Schedule")] = None,
    out: Annotated[str | None, option("Run directory: metrics.jsonl, checkpoint-{step}/, final_metrics.json. [default: runs/run]", rich_help_panel="Checkpoints and logs", metavar="DIR")] = None,
    resume: Annotated[bool | None, typer.Option("--resume/--no-resume", help="Continue the run in --out from its last checkpoint, with its saved options. [default: no]", show_default=False, rich_help_panel="Checkpoints and logs")] = None,
    eval_every: Annotated[int | None, option("Evaluate on the validation split every N steps (0: at the end only). [default: 500]", rich_help_panel="Checkpoints and logs")] = None,
    log_every: Annotated[int | None, option("Write a metrics.jsonl line every N steps. [default: 10]", rich_help_panel="Checkpoints and logs")] = None,
    report_to: Annotated[Literal["none", "tensorboard"] | None, option("none, or tensorboard: event files in --out beside metrics.jsonl (pip install 'mlmprep[tensorboard]'). [default: none]", rich_help_panel="Checkpoints and logs")] = None,
    save_every: Annotated[int | None, option("Write checkpoint-{step} every N steps (0: at the end only). [default: 1000]", rich_help_panel="Checkpoints and logs")] = None,
    keep_checkpoints: Annotated[int | None, option("Keep the last K checkpoints. [default: 2]", rich_help_panel="Checkpoints and logs")] = None,
    bf16: Annotated[bool | None, typer.Option("--bf16/--no-bf16", help="bfloat16 autocast on CUDA; CPU always runs float32. [default: bf16]", show_default=False, rich_help_panel="Speed")] = None,
    compile: Annotated[bool | None, typer.Option("--compile/--no-compile", help="torch.compile the model and loss, one graph per microbatch shape. [default: on CUDA when an epoch has at most 16 shapes; off on CPU]", show_default=False, rich_help_panel="Speed")] = None,
    deterministic: Annotated[bool | None, typer.Option("--deterministic/--no-deterministic", help="Deterministic CUDA kernels, so a rerun or a resume on a GPU gives the same bits (slower); CPU runs already do. [default: no]", show_default=False, rich_help_panel="Speed")] = None,
) -> None:
    """Pretrain T5 (span data) or a BERT-style model (mlm data) on a build, with token-budget batches."""
    from mlmprep.config import read_config_file
    from mlmprep.train.loop import fit
    from mlmprep.train.numerics import Diverged

    options = given(
        data=data, out=out, resume=resume, model=model, epochs=epochs, max_steps=max_steps,
        max_tokens_per_batch=max_tokens_per_batch, max_tokens_per_microbatch=max_tokens_per_microbatch,
        max_examples_per_microbatch=max_examples_per_microbatch, alpha=alpha, pad_to_multiple_of=pad_to_multiple_of,
        max_encoder_len=max_encoder_len, max_decoder_len=max_decoder_len, optimizer=optimizer, lr=lr, min_lr=min_lr,
        schedule=schedule, warmup_steps=warmup_steps, decay_steps=decay_steps, weight_decay=weight_decay,
        beta1=beta1, beta2=beta2, grad_clip=grad_clip, bf16=bf16, eval_every=eval_every, validation=validation,
        eval_max_tokens_per_microbatch=eval_max_tokens_per_microbatch, log_every=log_every, report_to=report_to, save_every=save_every,
        keep_checkpoints=keep_checkpoints, seed=seed, grow_after=grow_after, compile=compile, max_bad_steps=max_bad_steps,
        deterministic=deterministic,
    )
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
    from mlmprep.config import Options, TrainConfig, config_values, make_config
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
    from mlmprep.config import TrainConfig

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
