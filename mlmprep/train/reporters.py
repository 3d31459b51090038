"""`--report-to tensorboard`: the metrics.jsonl lines also go to TensorBoard event files in RUN, beside
metrics.jsonl, through torch's SummaryWriter (the optional `tensorboard` extra). Local files only: no network.
"""

from __future__ import annotations

from pathlib import Path

from mlmprep.config import TrainConfig
from mlmprep.errors import ConfigError


def check(cfg: TrainConfig) -> None:
    """Refuse a tracker whose package is missing, before any work starts."""
    if cfg.report_to == "tensorboard":
        writer_class()


def writer_class():
    """torch's SummaryWriter, or a one-line error naming the extra that provides its tensorboard package."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise ConfigError(
            "--report-to tensorboard: the tensorboard package is not installed; pip install 'mlmprep[tensorboard]'"
        ) from None
    return SummaryWriter


def open_writer(cfg: TrainConfig, run: Path, step: int):
    """A SummaryWriter on RUN (None for --report-to none). Events logged after checkpoint-{step} are purged
    (all of them from step 0), as metrics.jsonl drops its lines: TensorBoard then shows each step once."""
    if cfg.report_to != "tensorboard":
        return None
    return writer_class()(log_dir=str(run), purge_step=step + 1 if step else 0)


def report(writer, fields: dict) -> None:
    """One metrics.jsonl line as scalars at its step: train/NAME, or eval/NAME for an evaluation's eval_NAME."""
    if writer is None:
        return
    group = "eval" if any(key.startswith("eval_") for key in fields) else "train"
    for key, value in fields.items():
        if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
            name = key if key.startswith("eval/") else f"{group}/{key.removeprefix('eval_')}"  # eval/SOURCE/loss
            writer.add_scalar(name, value, fields["step"])
    writer.flush()  # a killed run keeps what it logged
