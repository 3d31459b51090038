"""What the run reports as it goes: a metrics line every --log-every steps (metrics.jsonl, TensorBoard, the
progress bar or a console line), the epoch's data fetch, and final_metrics.json."""

from __future__ import annotations

import time
from dataclasses import astuple

import torch

from mlmprep.format import cache as remote
from mlmprep.format.write import write_json
from mlmprep.train import reporters
from mlmprep.train.mixture_run import denoiser_fields, source_fields
from mlmprep.train.speed import peak_memory_gb
from mlmprep.train.state import Run, TrainState, Window
from mlmprep.train.world import World, all_sum, record, say


def due(step: int, every: int, total: int) -> bool:
    """Periodic work runs every `every` steps (0: never) and after the last step."""
    return (every > 0 and step % every == 0) or step == total


def window_metrics(world: World, window: Window) -> dict:
    """The metrics line of the steps since the last log, summed over ranks; the loss is the mean over the
    steps applied (None if none was)."""
    sums = all_sum(world, torch.tensor(astuple(window)[:7], dtype=torch.float64)).tolist()
    loss, real, slots, rows, flops, applied, seconds = sums
    seconds, applied = seconds / world.size, applied / world.size  # each rank timed and counted the same steps
    line = {"loss": loss / applied if applied else None, "tokens": int(real), "examples": int(rows),
            "tokens_per_s": real / seconds, "padding_efficiency": real / max(slots, 1.0),
            "tflops": flops / seconds / 1e12}
    peak = peak_memory_gb(world.device)
    return line if peak is None else {**line, "peak_memory_gb": peak}


def epoch_of_last(epoch: int, cursor: int, step: int) -> int:
    """The 0-based epoch of the step just taken, given the loader's position (epoch, cursor) after it: an
    epoch's last step has already moved the position to the next epoch."""
    return epoch - 1 if cursor == 0 and step > 0 else epoch


def position(run: Run, epoch: int) -> dict:
    """Where a step is in the data, for logs and metrics: {"epoch": e}, or {"chunk": c} for a mixture, which has
    no epochs (each source keeps its own passes)."""
    return {"epoch" if run.mix is None else "chunk": epoch}


def log_line(step: int, total: int, where: dict, lr: float, line: dict) -> str:
    """A metrics line for the console when there is no progress bar to show it; `where`: see position()."""
    loss = "-" if line["loss"] is None else f"{line['loss']:.4f}"
    memory = f", peak memory {line['peak_memory_gb']:.1f} GB" if "peak_memory_gb" in line else ""
    ((unit, index),) = where.items()
    return (f"step {step}/{total} ({unit} {index}): loss {loss}, lr {lr:.2e}, {line['tokens_per_s']:,.0f} tokens/s, "
            f"padding efficiency {line['padding_efficiency']:.2f}, {line['tflops']:.3g} TFLOP/s{memory}")


def log_window(run: Run, state: TrainState, window: Window, lr: float, norm: float, bar) -> float | None:
    """Log the steps since the last metrics line (metrics.jsonl, TensorBoard, the bar or a console line) and
    add them to the run's totals; returns their mean loss (None if none was applied)."""
    line = window_metrics(run.world, window) | source_fields(run, state, window) | denoiser_fields(run, window)
    state.logged_step, state.train_s = state.step, state.train_s + window.seconds
    state.tokens, state.examples = state.tokens + line["tokens"], state.examples + line["examples"]
    where = position(run, epoch_of_last(state.epoch, state.cursor, state.step))
    record(run.out, run.world, step=state.step, **where, lr=lr, grad_norm=norm, **line)
    reporters.report(run.writer, {"step": state.step, **where, "lr": lr, "grad_norm": norm, **line})
    if bar.disable:  # off a terminal (a log file, a batch job): the bar's figures as a line
        say(run.world, log_line(state.step, run.total, where, lr, line))
    bar.set_postfix(loss=f"{line['loss']:.3f}" if line["loss"] is not None else "-", lr=f"{lr:.2e}",
                    tok_s=f"{line['tokens_per_s']:.0f}", pad=f"{line['padding_efficiency']:.2f}",
                    tflops=f"{line['tflops']:.3g}",
                    **({"mem_gb": f"{line['peak_memory_gb']:.1f}"} if "peak_memory_gb" in line else {}))
    return line["loss"]


def finish(run: Run, state: TrainState, loss: float | None, metrics: dict, started: float) -> dict:
    """final_metrics.json: the last logged loss and evaluation, and the run's totals."""
    where = position(run, epoch_of_last(state.epoch, state.cursor, state.step))
    final = {"step": state.step, **where, "loss": loss, **metrics, "tokens": state.tokens,
             "examples": state.examples, "wall_s": time.perf_counter() - started, "train_s": state.train_s,
             "tokens_per_s": state.tokens / state.train_s if state.train_s else 0.0, **source_fields(run, state)}
    if run.world.main:
        write_json(run.out / "final_metrics.json", final)
    if run.writer is not None:
        run.writer.close()
    return final


def record_fetch(run: Run, state: TrainState) -> None:
    """How long the start of the epoch at `state` waited for a DATA URL's split (metrics.jsonl's fetch_wait_s)."""
    wait = remote.fetch_wait(run.cfg.data)
    if wait is not None:
        record(run.out, run.world, event="fetch", step=state.step, epoch=state.epoch, fetch_wait_s=wait)
        say(run.world, f"epoch {state.epoch}: waited {wait:.2f} s for its data")
