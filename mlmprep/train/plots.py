"""RUN/plots.png: the run's training and validation loss, validation token accuracy and learning rate, drawn
from RUN/metrics.jsonl at each evaluation. matplotlib (Agg, no display) is imported on first use; a plot that
fails is a warning, once per process, and never stops training."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

PLOTS = "plots.png"
_warned = False  # a failed plot warns once, not at every evaluation


def read_metrics(run: Path) -> tuple[list[dict], list[dict]]:
    """(training lines, evaluation lines) of RUN/metrics.jsonl."""
    path = Path(run) / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    train = [r for r in records if "lr" in r and r.get("loss") is not None]
    return train, [r for r in records if "eval_loss" in r]


def draw(run: Path) -> Path:
    """Write RUN/plots.png (whole or not at all: a temporary file, then renamed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train, evals = read_metrics(run)
    fig, (loss, accuracy, lr) = plt.subplots(1, 3, figsize=(13, 3.6), dpi=100, layout="constrained")
    loss.plot([r["step"] for r in train], [r["loss"] for r in train], label="training", color="#4c78a8")
    loss.plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", label="validation", color="#e45756",
              markersize=3)
    loss.set(title="Loss", xlabel="step", ylabel="loss per target token")
    loss.legend()
    accuracy.plot([r["step"] for r in evals], [r["eval_accuracy"] for r in evals], "o-", color="#e45756", markersize=3)
    accuracy.set(title="Validation token accuracy", xlabel="step", ylabel="accuracy")
    lr.plot([r["step"] for r in train], [r["lr"] for r in train], color="#54a24b")
    lr.set(title="Learning rate", xlabel="step", ylabel="learning rate")
    lr.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
    for ax in (loss, accuracy, lr):
        ax.grid(alpha=0.3)
    fig.suptitle(str(run), fontsize=10, color="#555555")
    path = Path(run) / PLOTS
    tmp = path.with_name(f".{PLOTS}.partial")
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return path


def update(run: Path) -> Path | None:
    """Redraw RUN/plots.png; a failure (no matplotlib, a full disk) warns once and returns None."""
    global _warned
    try:
        return draw(run)
    except Exception as exc:  # a plot is a convenience: training goes on without it
        if not _warned:
            _warned = True
            warnings.warn(f"{Path(run) / PLOTS} not written ({type(exc).__name__}: {exc}); training goes on",
                          RuntimeWarning, stacklevel=2)
        return None
