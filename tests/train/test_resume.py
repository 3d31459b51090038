"""Resuming a run: a finished run is left as it is, a run resumes only on its own data (wherever that build or the
run moved, however --out is spelled), a missing, damaged or foreign run is one line, and Ctrl-C or a refusal says
how the run goes on (from its last checkpoint, or again from step 0 before the first)."""

from __future__ import annotations

import json
import os

import pytest

from mlmprep.config import TrainConfig
from mlmprep.train.loop import fit
from tests.fakes import write_fake_build
from tests.train.conftest import SMALL, Stop

pytestmark = pytest.mark.usefixtures("one_thread")


def run_files(run):
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_resuming_a_finished_run_changes_nothing(tmp_path, span_data, capsys):
    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **{**SMALL, "eval_every": 2}, max_steps=4)
    final = fit(cfg)
    assert final["loss"] is not None
    before = run_files(tmp_path / "run")
    capsys.readouterr()
    again = fit(TrainConfig(**{**vars(cfg), "resume": True}))
    assert again == final and run_files(tmp_path / "run") == before  # no re-evaluation, no duplicate lines
    assert "already trained to step 4 of 4; nothing to do" in capsys.readouterr().err
    fewer = fit(TrainConfig(**{**vars(cfg), "resume": True, "max_steps": 3}))  # a lower --max-steps: nothing either
    assert fewer == final and run_files(tmp_path / "run") == before


def test_resuming_a_finished_run_after_a_remask_says_only_that_it_is_finished(
        tmp_path, tiny_corpus, tiny_tokenizer_path, capsys):
    """A real build of 4 seeds, trained to the end, remasked to 6: the resume trains nothing, so the note that
    it goes on reading its 4 seeds does not apply; stderr is the one line that the run is finished."""
    from mlmprep.builder.remask import remask
    from tests.conftest import build_tiny

    data = build_tiny(tmp_path / "data", tiny_corpus, tiny_tokenizer_path, seeds=4)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), **SMALL, max_steps=2)
    final = fit(cfg)
    assert remask(data, 6) == ["seed-4", "seed-5"]
    capsys.readouterr()
    assert fit(TrainConfig(**{**vars(cfg), "resume": True})) == final
    assert capsys.readouterr().err.splitlines() == [
        f"{tmp_path / 'run'}: already trained to step 2 of 2; nothing to do (raise --max-steps or --epochs to train "
        "further)"]
    fit(TrainConfig(**{**vars(cfg), "resume": True, "max_steps": 3}))  # one that trains on still says it
    assert f"{data}: has 6 seed splits now; this run goes on reading the 4" in capsys.readouterr().err


def test_resume_on_other_data_is_refused_and_a_moved_copy_of_the_same_data_resumes(tmp_path, span_data):
    """A run resumes only on the data it trained on: another build (here the same rows masked with another
    seed) is refused in one line, before the run changes; a copy of its own build elsewhere resumes."""
    import shutil

    from mlmprep.errors import CacheError

    other = write_fake_build(tmp_path / "other", n_rows=40, seed=1)
    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **{**SMALL, "save_every": 1}, max_steps=2)
    fit(cfg)
    before = run_files(tmp_path / "run")
    with pytest.raises(CacheError, match=f"^{other}: not the data the run in {tmp_path / 'run'} trained on"):
        fit(TrainConfig(**{**vars(cfg), "data": str(other), "resume": True, "max_steps": 3}))
    assert run_files(tmp_path / "run") == before
    moved = shutil.copytree(span_data, tmp_path / "moved")
    assert fit(TrainConfig(**{**vars(cfg), "data": str(moved), "resume": True, "max_steps": 3}))["step"] == 3


def test_resume_without_a_run_to_resume_is_refused(tmp_path, span_data):
    from mlmprep.errors import CacheError

    for out in (tmp_path / "missing", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        with pytest.raises(CacheError, match="holds no run to resume"):
            fit(TrainConfig(data=str(span_data), out=str(out), **SMALL, max_steps=2, resume=True))
        assert not out.exists() or not any(out.iterdir())


def test_cli_resume_without_a_run_is_one_line_exit_2(tmp_path, span_data):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(tmp_path / "nothing"), "--resume"])
    assert result.exit_code == 2 and "holds no run to resume" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "nothing").exists()


def test_a_run_stopped_before_its_first_checkpoint_is_not_told_to_continue(tmp_path, span_data):
    """Neither the refusal of a new run into it nor the Ctrl-C line speak of continuing a run with no checkpoint:
    --resume starts it again from step 0."""
    from typer.testing import CliRunner

    from mlmprep.cli import app
    from mlmprep.cli.train import interrupted_line

    run = tmp_path / "run"
    cfg = TrainConfig(data=str(span_data), out=str(run), **{**SMALL, "save_every": 0}, max_steps=3)
    with pytest.raises(Stop):
        fit(cfg, hook=lambda step, k, rows, padding: (_ for _ in ()).throw(Stop))
    again = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run)])
    assert again.exit_code == 2
    assert again.output.splitlines()[-1] == (
        f"error: --out {run}: holds a run that stopped before its first checkpoint, so there is nothing to continue; "
        "pass --resume to start it again from step 0 with its saved options, or choose another --out")
    assert interrupted_line(run) == (f"interrupted before the first checkpoint; {run} keeps the run's options: "
                                     f"`mlmprep train --out {run} --resume` starts it again from step 0")


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_in_train_says_what_is_kept_and_how_to_resume(tmp_path, span_data, monkeypatch, stop):
    """Ctrl-C, or SIGTERM (a scheduler preempting the job: the CLI raises Terminated for it), keeps the run."""
    from typer.testing import CliRunner

    import mlmprep.train.loop
    from mlmprep.cli import app
    from mlmprep.cli._util import Terminated

    real_fit = mlmprep.train.loop.fit
    word, code = ("interrupted", 130) if stop == "ctrl-c" else ("terminated", 143)

    def stop_at_step_3(step, k, rows, padding):
        if step == 3:
            raise KeyboardInterrupt if stop == "ctrl-c" else Terminated

    monkeypatch.setattr(mlmprep.train.loop, "fit", lambda cfg: real_fit(cfg, hook=stop_at_step_3))
    run = tmp_path / "run"
    args = ["--max-tokens-per-batch", "512", "--max-tokens-per-microbatch", "256", "--eval-every", "0"]
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "4",
                                      "--save-every", "2", *args])
    assert result.exit_code == code
    assert result.output.splitlines()[-1] == (f"{word}; {run} is kept (last checkpoint checkpoint-2): "
                             f"`mlmprep train --out {run} --resume` continues the run")
    monkeypatch.setattr(mlmprep.train.loop, "fit", real_fit)
    resumed = CliRunner().invoke(app, ["train", "--out", str(run), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run / "final_metrics.json").read_text())["step"] == 4


def test_resume_finds_the_run_however_out_is_spelled_or_wherever_it_moved(tmp_path, span_data, monkeypatch):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    monkeypatch.chdir(tmp_path)
    args = ["--max-tokens-per-batch", "512", "--max-tokens-per-microbatch", "256", "--eval-every", "0",
            "--save-every", "1"]
    assert CliRunner().invoke(app, ["train", str(span_data), "--out", "runs/a", "--max-steps", "1",
                                    *args]).exit_code == 0
    for step, out in enumerate([str(tmp_path / "runs" / "a"), "runs/a/", "./runs/a"], start=2):
        result = CliRunner().invoke(app, ["train", "--out", out, "--resume", "--max-steps", str(step)])
        assert result.exit_code == 0 and f"from step {step - 1}" in result.output, result.output
    (tmp_path / "runs" / "a").rename(tmp_path / "moved")
    result = CliRunner().invoke(app, ["train", "--out", "moved", "--resume", "--max-steps", "5"])
    assert result.exit_code == 0 and "from step 4" in result.output, result.output


def test_a_run_saved_with_an_option_now_refused_still_resumes(tmp_path, span_data):
    """A run started before --beta1 with adafactor was refused holds it in train_config.json: resume drops it."""
    from typer.testing import CliRunner

    from mlmprep.cli import app

    run = tmp_path / "run"
    args = ["--max-tokens-per-batch", "512", "--max-tokens-per-microbatch", "256", "--eval-every", "0",
            "--save-every", "1", "--optimizer", "adafactor"]
    assert CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "1",
                                    *args]).exit_code == 0
    saved = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**saved, "beta1": 0.5}))
    result = CliRunner().invoke(app, ["train", "--out", str(run), "--resume", "--max-steps", "2"])
    assert result.exit_code == 0 and "from step 1" in result.output, result.output


@pytest.mark.parametrize("damage, named", [
    (lambda run: (run / "checkpoint-2" / "rng.pt").unlink(), "checkpoint-2/rng.pt: damaged (missing)"),
    (lambda run: os.truncate(run / "checkpoint-2" / "optimizer.pt", 100), "checkpoint-2/optimizer.pt: damaged"),
    (lambda run: os.truncate(run / "checkpoint-2" / "model" / "model.safetensors", 300), "checkpoint-2/model: damaged"),
    (lambda run: (run / "checkpoint-2" / "state.json").write_text("{"), "checkpoint-2/state.json: damaged"),
    (lambda run: (run / "train_config.json").write_text("{"), "train_config.json: damaged"),
    (lambda run: (run / "train_config.json").unlink(), "not an mlmprep run: choose a new --out"),
])
def test_a_damaged_run_on_resume_is_one_line_naming_the_file(tmp_path, span_data, damage, named):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    run = tmp_path / "run"
    fit(TrainConfig(data=str(span_data), out=str(run), **SMALL, max_steps=2))
    damage(run)
    result = CliRunner().invoke(app, ["train", "--out", str(run), "--resume", "--max-steps", "3"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: ") and named in result.output
    assert "drop --resume" not in result.output


def test_a_directory_that_is_no_run_is_not_sent_back_and_forth(tmp_path, span_data):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "not an mlmprep run" in result.output and "--resume" not in result.output
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"


