"""What a user of `mlmprep train` meets: T5 v1.1 presets and T5's
inverse_sqrt schedule, resume of a finished or missing run, log lines off a terminal, integer step counts,
wall time and tokens/s in final_metrics.json, TensorBoard event files."""

from __future__ import annotations

import json
import math
import os
import sys

import pytest
import torch
from fakes import write_fake_build

from mlmprep.config import TrainConfig
from mlmprep.format.load import read_manifest
from mlmprep.format.manifest import TokenizerRecord
from mlmprep.train.loop import fit, lr_at
from mlmprep.train.model import PRESETS, build_model

SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8,
             warmup_steps=2, eval_every=0, log_every=2, save_every=0)
T5_VOCAB = TokenizerRecord(file="tokenizer.json", sha256="0" * 64, vocab_size=32100, pad_id=0, eos_id=1,
                            decoder_start_id=0)  # T5's tokenizer: 32128 embedding rows


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def span_data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("span") / "data", n_rows=40)


# ----------------------------------------------------------------------------- item 15: T5 v1.1 and inverse_sqrt
@pytest.mark.parametrize("name, parameters, v1_1", [
    ("t5-small", 60_506_624, False), ("t5-base", 222_903_552, False),  # google-t5/t5-small, t5-base
    ("t5-v1_1-small", 76_961_152, True), ("t5-v1_1-base", 247_577_856, True),  # google/t5-v1_1-small, -base
])
def test_presets_have_the_published_shapes(name, parameters, v1_1):
    with torch.device("meta"):  # shapes only: no memory, no initialisation time
        model = build_model(name, "span", T5_VOCAB)
    assert sum(p.numel() for p in model.parameters()) == parameters
    ff = model.encoder.block[0].layer[1].DenseReluDense
    assert hasattr(ff, "wi_0") == v1_1 and (model.config.feed_forward_proj == "gated-gelu") == v1_1
    assert (model.lm_head.weight is model.shared.weight) != v1_1  # v1.1: untied input and output embeddings
    assert model.config.dropout_rate == 0.0  # pretraining, as nanoT5


@pytest.mark.parametrize("name, untied", [("t5-small", False), ("t5-v1_1-small", True), ("t5-v1_1-base", True)])
def test_presets_give_mlm_data_a_bert_of_their_width_and_depth(name, untied):
    with torch.device("meta"):
        model = build_model(name, "mlm", T5_VOCAB)
    t5 = PRESETS[name]
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (t5["d_model"], t5["num_layers"])
    assert (model.cls.predictions.decoder.weight is not model.bert.embeddings.word_embeddings.weight) == untied


def test_an_untied_t5_keeps_its_own_head_through_training_and_a_checkpoint(tmp_path, span_data, capfd):
    """A v1.1-style config.json: lm_head trains apart from the shared embedding, and reloads untied."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "t5", "d_model": 32, "d_ff": 64, "d_kv": 8, "num_heads": 2,
                                  "num_layers": 1, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False,
                                  "dropout_rate": 0.0}))
    run = tmp_path / "run"
    fit(TrainConfig(data=str(span_data), out=str(run), model=str(config), **SMALL, max_steps=2))
    tok = read_manifest(span_data).tokenizer
    capfd.readouterr()
    model = build_model(str(run / "checkpoint-2"), "span", tok)
    assert "lm_head" not in capfd.readouterr().err  # no warning that the untied head is not tied
    assert model.lm_head.weight is not model.shared.weight
    assert not torch.equal(model.lm_head.weight, model.shared.weight)


def test_inverse_sqrt_schedule_is_transformers_one(tmp_path):
    """transformers' get_inverse_sqrt_schedule as the reference. Its LambdaLR gives the first step lambda(0)
    = 0; mlmprep's warmup gives step k (0-based) (k + 1) / warmup, so step k matches lambda(k + 1)."""
    from transformers import get_inverse_sqrt_schedule

    cfg = TrainConfig(schedule="inverse_sqrt", lr=0.01, min_lr=1e-9, warmup_steps=10)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.lr)
    reference = get_inverse_sqrt_schedule(optimizer, num_warmup_steps=cfg.warmup_steps).lr_lambdas[0]
    for k in range(300):
        assert lr_at(k, cfg, horizon=300) == pytest.approx(cfg.lr * reference(k + 1), rel=1e-12)
    assert lr_at(9, cfg, 300) == cfg.lr and lr_at(39, cfg, 300) == pytest.approx(cfg.lr / 2)
    floored = TrainConfig(schedule="inverse_sqrt", lr=0.01, min_lr=0.004, warmup_steps=10)
    assert lr_at(10_000, floored, horizon=300) == 0.004  # never below --min-lr; the horizon does not end it
    assert lr_at(0, TrainConfig(schedule="inverse_sqrt", warmup_steps=0), 10) == TrainConfig().lr
    assert math.isclose(lr_at(3, TrainConfig(schedule="inverse_sqrt", warmup_steps=0, min_lr=1e-9), 10),
                        TrainConfig().lr / 2)


# ----------------------------------------------------------------------------- item 7: --resume and --warmup-steps
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
    from conftest import build_tiny

    from mlmprep.build.run import remask

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


@pytest.mark.parametrize("decay_steps, warned", [(1, True), (2, True), (3, True), (4, False), (0, False)])
def test_a_decay_that_ends_before_the_warmup_does_is_warned_about(tmp_path, span_data, capsys, decay_steps, warned):
    """With --decay-steps at most --warmup-steps + 1 the rate jumps from --lr to --min-lr after the warmup."""
    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"),
                      **{**SMALL, "warmup_steps": 2, "decay_steps": decay_steps}, max_steps=4)
    fit(cfg)
    assert ("warning: --decay-steps" in capsys.readouterr().err) is warned
    assert (lr_at(3, cfg, cfg.decay_steps or 4) == cfg.min_lr) is warned  # step warmup + 1; run_fit's horizon


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


def test_warmup_longer_than_the_run_is_warned(tmp_path, span_data, capsys):
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "a"), **{**SMALL, "warmup_steps": 50}, max_steps=3))
    assert "--warmup-steps 50 is longer than the run (3 steps)" in capsys.readouterr().err
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "b"), **{**SMALL, "warmup_steps": 3}, max_steps=3))
    assert "--warmup-steps" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- item 13: the console and final metrics
class FakeTerminal:
    """stderr as a terminal: the progress bar draws into it."""

    def __init__(self):
        self.parts = []

    def isatty(self):
        return True

    def write(self, text):
        self.parts.append(text)

    def flush(self):
        pass

    def getvalue(self):
        return "".join(self.parts)


class Stop(Exception):
    pass


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


# ----------------------------------------------------------------------------- item 16: --report-to tensorboard
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


@pytest.mark.parametrize("args", [
    ["--grad-clip", "nan"], ["--weight-decay", "nan"], ["--weight-decay", "inf"], ["--lr", "inf"], ["--alpha", "nan"],
    ["--seed", "-1"], ["--seed", "4294967296"], ["--max-tokens-per-batch", "99999999999999999999"],
    ["--max-encoder-len", "0"], ["--max-decoder-len", "-3"], ["--model", "nosuch"],  # no warmup warning before it
])
def test_bad_numbers_are_one_line_before_the_run_directory(tmp_path, span_data, args):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "1", *args])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.count("\n") == 1 and result.output.startswith(f"error: {args[0]}")
    assert not run.exists()


def test_a_non_finite_lr_in_a_config_file_is_refused(tmp_path, span_data):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    (tmp_path / "train.yaml").write_text("lr: .inf\n")
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(tmp_path / "run"), "--config",
                                      str(tmp_path / "train.yaml")])
    assert result.exit_code == 2 and result.output == "error: --lr must be a finite number, got inf\n"
    assert not (tmp_path / "run").exists()


def test_ctrl_c_in_train_says_what_is_kept_and_how_to_resume(tmp_path, span_data, monkeypatch):
    from typer.testing import CliRunner

    import mlmprep.train.loop
    from mlmprep.cli import app

    real_fit = mlmprep.train.loop.fit

    def stop_at_step_3(step, k, rows, padding):
        if step == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(mlmprep.train.loop, "fit", lambda cfg: real_fit(cfg, hook=stop_at_step_3))
    run = tmp_path / "run"
    args = ["--max-tokens-per-batch", "512", "--max-tokens-per-microbatch", "256", "--eval-every", "0"]
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "4",
                                      "--save-every", "2", *args])
    assert result.exit_code == 130
    assert result.output.splitlines()[-1] == (f"interrupted; {run} is kept (last checkpoint checkpoint-2): "
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


def test_each_step_logs_its_own_epoch(tmp_path, span_data):
    from mlmprep.train.loop import World, epoch_plan

    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **{**SMALL, "log_every": 1}, epochs=3)
    per_epoch = [len(epoch_plan(cfg, World(0, 1, torch.device("cpu")), e)[1]) for e in range(3)]
    final = fit(cfg)
    logged = [r["epoch"] for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").open()) if "loss" in r]
    assert logged == [e for e, n in enumerate(per_epoch) for _ in range(n)] and final["epoch"] == 2


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


@pytest.mark.parametrize("objective, args, refused", [
    ("span", ["--optimizer", "adafactor", "--beta1", "0.5"], "--beta1 applies to --optimizer adamw only"),
    ("span", ["--optimizer", "adafactor", "--beta2", "0.5"], "--beta2 applies to --optimizer adamw only"),
    ("span", ["--schedule", "constant", "--decay-steps", "2"],
     "--decay-steps applies to --schedule cosine or linear only"),
    ("span", ["--schedule", "inverse_sqrt", "--decay-steps", "2"],
     "--decay-steps applies to --schedule cosine or linear"),
    ("span", ["--schedule", "constant", "--min-lr", "0.0005"], "--min-lr applies to --schedule cosine or linear or"),
    ("mlm", ["--max-decoder-len", "8"], "--max-decoder-len applies to span data only"),
    ("mlm", ["--alpha", "7"], "--alpha applies to span data only"),
])
def test_an_option_that_would_be_ignored_is_refused(tmp_path, span_data, objective, args, refused):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    data = span_data if objective == "span" else write_fake_build(tmp_path / "mlm", objective="mlm", n_rows=12)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(data), "--out", str(run), "--max-steps", "1", *args])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {refused}")
    assert not run.exists()
