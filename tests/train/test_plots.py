"""RUN/plots.png: drawn from metrics.jsonl at each evaluation of a real run; a plot that fails warns once and
never stops training."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

from mlmprep.config import TrainConfig
from mlmprep.train import plots
from mlmprep.train.loop import fit
from tests.fakes import write_fake_build

SMALL = dict(model="tiny", max_tokens_per_batch=512, max_tokens_per_microbatch=512, max_examples_per_microbatch=16,
             warmup_steps=1, log_every=1, save_every=0, eval_every=2, max_steps=4)


def write_metrics(run, losses):
    run.mkdir(exist_ok=True)
    lines = [{"step": i + 1, "loss": loss, "lr": 1e-3, "tokens": 10} for i, loss in enumerate(losses)]
    lines.append({"step": len(losses), "eval_loss": losses[-1], "eval_accuracy": 0.5})
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def pixels(path):
    from PIL import Image

    return np.asarray(Image.open(path).convert("RGB"))


def test_the_plot_draws_the_metrics(tmp_path):
    write_metrics(tmp_path / "a", [5.0, 4.0, 3.0, 2.5])
    write_metrics(tmp_path / "b", [5.0, 2.0, 4.0, 2.5])
    a, b = pixels(plots.update(tmp_path / "a")), pixels(plots.update(tmp_path / "b"))
    assert a.shape == b.shape and a.shape[1] > 2 * a.shape[0]  # three panels side by side
    assert (a != b).any(axis=2).sum() > 50  # another training curve, another picture
    assert not list(tmp_path.glob("*/.*.partial"))


@pytest.fixture
def fresh_warning(monkeypatch):
    monkeypatch.setattr(plots, "_warned", False)


def test_a_failed_plot_warns_once(tmp_path, fresh_warning):
    write_metrics(tmp_path, [1.0])
    (tmp_path / "metrics.jsonl").write_text("not json\n")
    with pytest.warns(RuntimeWarning, match="plots.png not written"):
        assert plots.update(tmp_path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plots.update(tmp_path) is None  # the second failure is silent
    assert not (tmp_path / "plots.png").exists()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("plots") / "data", n_rows=24)


def test_training_writes_the_plot_at_each_evaluation(tmp_path, data, one_thread):
    run = tmp_path / "run"
    fit(TrainConfig(data=str(data), out=str(run), **SMALL))
    drawn = pixels(run / "plots.png")
    evals = [r["step"] for r in map(json.loads, (run / "metrics.jsonl").open()) if "eval_loss" in r]
    assert evals == [0, 2, 4] and drawn.shape[0] > 100


def test_training_goes_on_without_matplotlib(tmp_path, data, one_thread, monkeypatch, fresh_warning):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    run = tmp_path / "run"
    with pytest.warns(RuntimeWarning) as caught:
        final = fit(TrainConfig(data=str(data), out=str(run), **SMALL))
    assert final["step"] == 4 and not (run / "plots.png").exists()
    assert len([w for w in caught if "plots.png" in str(w.message)]) == 1
