"""What a run reports: a progress bar counting whole steps on a terminal, a log line every --log-every steps off
one, each step's own epoch, wall time and tokens/s in final_metrics.json, and TensorBoard event files (each step
once across a resume; none without --report-to tensorboard; one line if the package is missing)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from mlmprep.config import TrainConfig
from mlmprep.train.loop import fit
from tests.fakes import FakeTerminal
from tests.train.conftest import SMALL, Stop

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_bar_counts_steps_as_integers(tmp_path, span_data, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)

    def stop(step, k, rows, padding):
        if step == 1:
            raise Stop

    with pytest.raises(Stop):
        fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **SMALL, max_steps=2500), hook=stop)
    drawn = terminal.getvalue()
    assert "/2500 [" in drawn and "2.50k" not in drawn  # tqdm's unit_scale would draw 0.00/2.50k
    assert "step 1/2500" not in drawn  # on a terminal the bar shows the figures: no log lines


def test_off_a_terminal_a_line_every_log_every_steps(tmp_path, span_data, capsys):
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **{**SMALL, "log_every": 2}, max_steps=5))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("step ") and "tokens/s" in line]
    assert [line.split(" (")[0] for line in lines] == ["step 2/5", "step 4/5", "step 5/5"]
    logged = [r for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").open()) if "loss" in r]
    assert [f"loss {r['loss']:.4f}" in line for r, line in zip(logged, lines)] == [True] * 3


def test_each_step_logs_its_own_epoch(tmp_path, span_data):
    from mlmprep.train.epochs import epoch_plan
    from mlmprep.train.world import World

    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **{**SMALL, "log_every": 1}, epochs=3)
    per_epoch = [len(epoch_plan(cfg, World(0, 1, torch.device("cpu")), e)[1]) for e in range(3)]
    final = fit(cfg)
    logged = [r["epoch"] for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").open()) if "loss" in r]
    assert logged == [e for e, n in enumerate(per_epoch) for _ in range(n)] and final["epoch"] == 2


def test_final_metrics_have_wall_time_and_tokens_per_second(tmp_path, span_data):
    run = tmp_path / "run"
    cfg = TrainConfig(data=str(span_data), out=str(run), **{**SMALL, "save_every": 2}, max_steps=6, keep_checkpoints=5)
    fit(TrainConfig(**{**vars(cfg), "max_steps": 4}))
    final = fit(TrainConfig(**{**vars(cfg), "resume": True}))  # the figures cover the whole run, across the resume
    assert json.loads((run / "final_metrics.json").read_text()) == final
    lines = [r for r in map(json.loads, (run / "metrics.jsonl").open()) if "tokens_per_s" in r]
    seconds = sum(r["tokens"] / r["tokens_per_s"] for r in lines)  # each line's own time, from its own figures
    assert final["tokens"] == sum(r["tokens"] for r in lines)
    assert final["train_s"] == pytest.approx(seconds, rel=1e-6)
    assert final["tokens_per_s"] == pytest.approx(final["tokens"] / seconds, rel=1e-6)
    assert 0 < final["train_s"] and final["wall_s"] > 0


def scalars(run, tag):
    """(step, value) pairs of a scalar as TensorBoard itself reads the run directory (all event files)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_report_to_tensorboard_writes_the_metrics_as_event_files(tmp_path, span_data):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    cfg = TrainConfig(data=str(span_data), out=str(run), **{**SMALL, "log_every": 1, "eval_every": 2, "save_every": 2},
                      max_steps=4, report_to="tensorboard")
    with pytest.raises(Stop):  # killed in step 3, after logging it: checkpoint-2 is the last
        fit(cfg, hook=lambda step, k, rows, padding: (_ for _ in ()).throw(Stop) if step == 3 else None)
    fit(TrainConfig(**{**vars(cfg), "resume": True}))
    assert list(run.glob("events.out.tfevents.*"))  # in RUN, beside metrics.jsonl
    lines = list(map(json.loads, (run / "metrics.jsonl").open()))
    train = {r["step"]: r for r in lines if "loss" in r}
    evals = {r["step"]: r for r in lines if "eval_loss" in r}
    assert [s for s, _ in scalars(run, "train/loss")] == [1, 2, 3, 4]  # step 3 once: the killed run's is purged
    assert scalars(run, "train/loss") == [(s, pytest.approx(train[s]["loss"], rel=1e-6)) for s in (1, 2, 3, 4)]
    assert scalars(run, "train/tokens_per_s") == [(s, pytest.approx(train[s]["tokens_per_s"], rel=1e-6))
                                                  for s in (1, 2, 3, 4)]
    assert scalars(run, "eval/loss") == [(s, pytest.approx(evals[s]["eval_loss"], rel=1e-6)) for s in (0, 2, 4)]


def test_resume_of_a_run_killed_before_its_first_checkpoint_logs_each_step_once(tmp_path, span_data):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    cfg = TrainConfig(data=str(span_data), out=str(run), **{**SMALL, "log_every": 1, "eval_every": 2, "save_every": 0},
                      max_steps=3, report_to="tensorboard")
    with pytest.raises(Stop):  # steps 1 and 2 logged, no checkpoint yet
        fit(cfg, hook=lambda step, k, rows, padding: (_ for _ in ()).throw(Stop) if step == 2 else None)
    fit(TrainConfig(**{**vars(cfg), "resume": True}))  # starts again from step 0
    lines = list(map(json.loads, (run / "metrics.jsonl").open()))
    assert [r["step"] for r in lines if "loss" in r] == [1, 2, 3]
    assert [r["step"] for r in lines if "eval_loss" in r] == [0, 2, 3]
    assert [s for s, _ in scalars(run, "train/loss")] == [1, 2, 3]
    assert [s for s, _ in scalars(run, "eval/loss")] == [0, 2, 3]


def test_report_to_none_writes_no_event_files(tmp_path, span_data):
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **SMALL, max_steps=2))
    assert not list((tmp_path / "run").glob("events.out.tfevents.*"))


def test_report_to_tensorboard_without_the_package_is_one_line_before_any_work(tmp_path, span_data, monkeypatch):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails as if not installed
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "2",
                                      "--report-to", "tensorboard"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--report-to tensorboard: the tensorboard package is not installed" in result.output
    assert not run.exists()
    bad = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--report-to", "wandb"])
    assert bad.exit_code == 2 and "wandb" in bad.output and "tensorboard" in bad.output  # the choices are named
