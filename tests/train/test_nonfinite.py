"""The non-finite guard: a step whose loss or gradient norm is not finite is skipped, not applied;
--max-bad-steps in a row stop the run with exit 1 and one line; every JSON the trainer writes is strict."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

import mlmprep.train.loop as train
import mlmprep.train.step as step
from mlmprep.cli import app
from mlmprep.config import TrainConfig
from mlmprep.format.write import strict
from mlmprep.train.checkpoint import checkpoints
from mlmprep.train.epochs import epoch_plan
from mlmprep.train.world import World
from tests.fakes import write_fake_build

SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8,
             warmup_steps=2, eval_every=0, log_every=1)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("nonfinite") / "data", n_rows=40)


def reject(name):
    raise ValueError(f"not strict JSON: {name}")


def strict_lines(path):
    """Parse a JSON-lines file, failing on the NaN / Infinity literals strict readers reject."""
    return [json.loads(line, parse_constant=reject) for line in path.read_text().splitlines()]


def poison_logits(monkeypatch, calls: set[int]):
    """Make the forward calls numbered in `calls` (0-based, over the whole run) return NaN logits."""
    real, count = step.logits_of, [0]

    def logits_of(model, mb):
        logits = real(model, mb)
        count[0] += 1
        return logits * math.nan if count[0] - 1 in calls else logits

    monkeypatch.setattr(step, "logits_of", logits_of)


def test_one_nan_step_is_skipped_and_the_run_ends_finite(tmp_path, data, monkeypatch):
    """Without the guard (the bug planted: apply every step), one NaN loss made every weight NaN and the
    rotation kept only NaN checkpoints."""
    poison_logits(monkeypatch, {4})  # step 2's first microbatch (2 microbatches per step)
    run = tmp_path / "run"
    cfg = TrainConfig(data=str(data), out=str(run), max_steps=6, save_every=2, keep_checkpoints=1, **SMALL)
    final = train.fit(cfg)
    assert final["step"] == 6 and math.isfinite(final["loss"])
    lines = strict_lines(run / "metrics.jsonl")
    events = [line for line in lines if line.get("event") == "nonfinite"]
    assert [(e["step"], e["value"]) for e in events] == [(2, "loss")]
    assert events[0]["loss"] is None and len(events[0]["rows"]) > 0  # NaN is written as null, never as NaN
    weights = load_file(str(checkpoints(run)[-1] / "model" / "model.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())
    state = torch.load(checkpoints(run)[-1] / "optimizer.pt", weights_only=True)["state"]
    assert {int(s["step"]) for s in state.values()} == {5}  # AdamW applied 5 of the 6 steps
    logged = [line["step"] for line in lines if "loss" in line and "event" not in line]
    assert logged == [1, 2, 3, 4, 5, 6] and next(line for line in lines
                                                 if line.get("step") == 3 and "tokens" in line)["tokens"] == 0


class NanGradient(torch.autograd.Function):
    """Identity forward, NaN backward: a finite loss whose gradient is not (what the H100 run met)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * math.nan


def test_a_finite_loss_with_a_nan_gradient_is_skipped_too(tmp_path, data, monkeypatch):
    real, count = step.logits_of, [0]

    def logits_of(model, mb):
        count[0] += 1
        logits = real(model, mb)
        return NanGradient.apply(logits) if count[0] == 3 else logits  # step 1, first microbatch

    monkeypatch.setattr(step, "logits_of", logits_of)
    run = tmp_path / "run"
    final = train.fit(TrainConfig(data=str(data), out=str(run), max_steps=3, save_every=3, grad_clip=0.0, **SMALL))
    events = [line for line in strict_lines(run / "metrics.jsonl") if line.get("event") == "nonfinite"]
    assert [(e["step"], e["value"]) for e in events] == [(1, "grad_norm")] and math.isfinite(events[0]["loss"])
    weights = load_file(str(run / "checkpoint-3" / "model" / "model.safetensors"))
    assert math.isfinite(final["loss"]) and all(torch.isfinite(w).all() for w in weights.values())


def test_cuda_setup_turns_off_cudnn_attention_and_leaves_the_cpu_alone():
    """The bf16 NaN seen on an H100: T5's gradients went NaN in the backward of bf16 SDPA as torch
    dispatched it (cuDNN attention), the loss finite; float32 and HF's eager attention stayed finite on the
    same weights and rows;
    with it off, 520 steps of the issue's recipe met none (with it on, the first came between steps 400 and
    500). The kernel cannot run on a CPU, so this checks the switch the fix is."""
    from mlmprep.train.speed import setup_device

    before = torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        setup_device(torch.device("cpu"))
        assert torch.backends.cuda.cudnn_sdp_enabled()
        setup_device(torch.device("cuda"))
        assert not torch.backends.cuda.cudnn_sdp_enabled() and torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before[0])
        torch.backends.cuda.matmul.allow_tf32 = before[1]


def test_consecutive_bad_steps_stop_the_run_with_exit_1(tmp_path, data):
    """The issue's recipe: --lr 1000 diverges at once; --max-bad-steps 3 stops it on the third bad step in a row."""
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(data), "--out", str(run), "--model", "tiny", "--lr", "1000",
                                      "--min-lr", "1", "--warmup-steps", "0", "--max-steps", "30", "--save-every", "1",
                                      "--max-bad-steps", "3", "--max-tokens-per-batch", "512",
                                      "--max-tokens-per-microbatch", "256", "--log-every", "1"])
    assert result.exit_code == 1, result.output
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "3 steps in a row with a non-finite" in error[0] and "--lr" in error[0]
    lines = strict_lines(run / "metrics.jsonl")
    events = [line for line in lines if line.get("event") == "nonfinite"]
    assert len(events) == 3 and np.all(np.diff([e["step"] for e in events]) == 1)
    assert events[-1]["step"] < 30 and not (run / "final_metrics.json").exists()
    for path in checkpoints(run):  # whatever was saved holds the weights of good steps
        weights = load_file(str(path / "model" / "model.safetensors"))
        assert all(torch.isfinite(w).all() for w in weights.values())


def test_strict_replaces_non_finite_numbers():
    assert strict({"a": math.nan, "b": [1.5, -math.inf], "c": "x"}) == {"a": None, "b": [1.5, None], "c": "x"}


def test_compare_methods_reports_a_diverged_arm_as_diverged(tmp_path, monkeypatch):
    """An arm whose training stops with Diverged is reported "diverged at step N", never as a number."""
    import mlmprep.compare as compare
    from mlmprep.train.numerics import Diverged

    def diverging_fit(cfg):
        (tmp_path / "out" / "run-text").mkdir(parents=True)
        (tmp_path / "out" / "run-text" / "metrics.jsonl").write_text(
            '{"step": 5, "loss": 4.0, "tokens": 100, "tokens_per_s": 50.0}\n'
            '{"step": 5, "eval_loss": 4.5, "eval_accuracy": 0.2}\n')
        raise Diverged("step 9: 4 steps in a row with a non-finite loss", step=6)

    monkeypatch.setattr(train, "fit", diverging_fit)
    cfg = compare.compare_config("quick", {"out": str(tmp_path / "out")})
    arm = compare.train_arm(cfg, "text")
    assert arm["diverged_at"] == 6 and arm["final_loss"] is None and arm["curve"][0]["eval_loss"] == 4.5
    assert compare.cell(arm, "final_loss", "{:.4f}") == "diverged at step 6"
    assert compare.cell({"final_loss": 4.25, "diverged_at": None}, "final_loss", "{:.4f}") == "4.2500"


def test_plan_shapes_count_the_shapes_the_collator_makes_and_decide_the_default_compile(tmp_path):
    """Unset --compile compiles on CUDA only when an epoch needs few graphs (one per microbatch shape)."""
    from mlmprep.format.load import open_epoch, read_manifest
    from mlmprep.train.collate import Collator
    from mlmprep.train.speed import DEFAULT_MAX_SHAPES, compile_wanted, plan_shapes

    lengths = np.random.default_rng(3).integers(8, 60, size=80)
    data = write_fake_build(tmp_path / "data", n_rows=80, lengths=lengths)
    tok, split = read_manifest(data).tokenizer, open_epoch(data, 0)
    for multiple in (1, 16):
        cfg = TrainConfig(data=str(data), pad_to_multiple_of=multiple, **SMALL)
        collator = Collator("span", tok.pad_id, tok.decoder_start_id, pad_to_multiple_of=multiple)
        plan = epoch_plan(cfg, World(0, 1, torch.device("cpu")), 0)[1]
        made = {tuple(t.shape for t in collator.from_split(split, mb.rows).values()) for b in plan for mb in b.ranks[0]}
        assert plan_shapes(plan, split.enc_lengths, split.dec_lengths, 0, collator) == len(made)
    assert len(made) < plan_shapes(plan, split.enc_lengths, split.dec_lengths, 0,
                                   Collator("span", tok.pad_id, tok.decoder_start_id))  # buckets help
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert compile_wanted(None, cuda, DEFAULT_MAX_SHAPES) and not compile_wanted(None, cuda, DEFAULT_MAX_SHAPES + 1)
    assert not compile_wanted(None, cpu, 1) and compile_wanted(True, cpu, 100) and not compile_wanted(False, cuda, 1)
