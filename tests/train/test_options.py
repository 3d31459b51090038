"""train: every option that changes the maths acts (each test fails if fit ignored it), resume with dropout
is exact (one process here; two DDP processes in test_ddp), and a SIGKILL while a checkpoint is written never leaves a
half checkpoint to resume from."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.config import TrainConfig, to_dict
from mlmprep.errors import ConfigError
from mlmprep.format.load import read_manifest
from mlmprep.train.checkpoint import checkpoints
from mlmprep.train.epochs import epoch_plan
from mlmprep.train.loop import fit
from mlmprep.train.model import PRESETS, round_up
from mlmprep.train.world import World, autocast
from tests.fakes import write_fake_build

CPU = World(rank=0, size=1, device=torch.device("cpu"))
BASE = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8, warmup_steps=1,
            eval_every=0, log_every=1, save_every=0, max_steps=4, seed=3,  # ~10 rows a step, 4 steps a 40-row epoch
            deterministic=True)  # on a GPU, runs compared bit for bit need deterministic kernels


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("options") / "data", n_rows=40)


def final_weights(run: Path) -> dict:
    last = checkpoints(run)[-1]
    return load_file(str(last / "model" / "model.safetensors"))


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").open()]


def train(tmp_path: Path, data: Path, name: str, hook=None, **options) -> tuple[dict, dict, list[dict]]:
    """(final metrics, final weights, metrics.jsonl lines) of a short run with BASE changed by `options`."""
    run = tmp_path / name
    final = fit(TrainConfig(data=str(data), out=str(run), **{**BASE, **options}), hook=hook)
    return final, final_weights(run), lines(run)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, data, one_thread):
    """The defaults' (final metrics, weights, metrics lines, run directory)."""
    tmp = tmp_path_factory.mktemp("baseline")
    return (*train(tmp, data, "run"), tmp / "run")


# ---------------------------------------------------------------------------- options that change the update


def test_the_same_options_train_the_same_weights(tmp_path, data, baseline):
    """The control for the tests below: a difference in weights comes from the option, not from the run."""
    assert same(train(tmp_path, data, "run")[1], baseline[1])


@pytest.mark.parametrize("options", [
    dict(lr=3e-3), dict(min_lr=5e-4), dict(schedule="linear"), dict(schedule="constant"), dict(warmup_steps=3),
    dict(decay_steps=20), dict(weight_decay=0.5), dict(beta1=0.5), dict(beta2=0.9), dict(grad_clip=1e-3),
    dict(grad_clip=0.0), dict(seed=4), dict(alpha=1.0), dict(max_tokens_per_batch=300), dict(max_encoder_len=10),
    dict(max_decoder_len=3),
], ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_option_changes_the_trained_weights(tmp_path, data, baseline, options):
    _, weights, _ = train(tmp_path, data, "run", **options)
    assert not same(weights, baseline[1]), f"{options} trained the same weights as the defaults"


@pytest.mark.parametrize("caps", [{}, {"max_encoder_len": 8, "max_decoder_len": 4}], ids=["whole", "capped"])
def test_max_tokens_stops_at_the_step_whose_tokens_reach_it(tmp_path, data, caps):
    """--max-tokens N trains to the first step at which the tokens the model was fed (metrics.jsonl, counted
    from the collated tensors) reach N, past --epochs when N needs more."""
    def steps(run: list[dict]) -> list[dict]:
        return [line for line in run if "tokens" in line]

    epoch = steps(train(tmp_path, data, "epoch", max_steps=0, epochs=1, **caps)[2])
    one_epoch = sum(line["tokens"] for line in epoch)
    for wanted, taken in ((one_epoch, len(epoch)), (one_epoch + 1, len(epoch) + 1), (one_epoch - 1, len(epoch))):
        seen = steps(train(tmp_path, data, f"tokens-{wanted}", max_steps=0, epochs=1, max_tokens=wanted, **caps)[2])
        assert len(seen) == taken
        assert sum(line["tokens"] for line in seen[:-1]) < wanted <= sum(line["tokens"] for line in seen)


def test_max_tokens_and_max_steps_are_not_both_given(tmp_path, data):
    with pytest.raises(ConfigError, match="--max-steps 4 and --max-tokens 100 both say when to stop"):
        TrainConfig(data=str(data), max_steps=4, max_tokens=100)


def test_adafactor_is_adafactor(tmp_path, data, baseline):
    """Adafactor keeps factored second moments (a row and a column vector per matrix), AdamW two full moments."""
    _, weights, _ = train(tmp_path, data, "run", optimizer="adafactor")
    assert not same(weights, baseline[1])
    state = torch.load(checkpoints(tmp_path / "run")[-1] / "optimizer.pt", weights_only=True)["state"]
    matrix = next(s for s in state.values() if "exp_avg_sq_row" in s)
    assert matrix["exp_avg_sq_row"].dim() == 1 and "exp_avg" not in matrix
    adamw = torch.load(checkpoints(baseline[3])[-1] / "optimizer.pt", weights_only=True)["state"]
    assert all("exp_avg" in s and "exp_avg_sq_row" not in s for s in adamw.values())


def test_caps_cut_the_tokens_the_model_sees(tmp_path, data, baseline):
    """--max-encoder-len and --max-decoder-len truncate rows: fewer real tokens per step than without."""
    tokens = baseline[0]["tokens"]
    assert train(tmp_path, data, "enc", max_encoder_len=10)[0]["tokens"] < tokens
    assert train(tmp_path, data, "dec", max_decoder_len=3)[0]["tokens"] < tokens


def test_alpha_and_budgets_shape_the_batches_fit_runs(tmp_path, data):
    """The rows of each step are those of the plan of the run's own alpha and budgets (which differ)."""
    for name, options in (("alpha", dict(alpha=0.5)), ("budget", dict(max_tokens_per_batch=300)),
                          ("microbatch", dict(max_tokens_per_microbatch=100))):
        seen: dict[int, list] = {}

        def hook(step, k, rows, padding, seen=seen):
            seen.setdefault(step, []).extend(rows.tolist())

        train(tmp_path, data, name, hook=hook, **options)
        cfg, default = TrainConfig(data=str(data), **{**BASE, **options}), TrainConfig(data=str(data), **BASE)
        plan, default_plan = epoch_plan(cfg, CPU, 0)[1], epoch_plan(default, CPU, 0)[1]
        n = min(len(plan), 4)  # the steps of epoch 0
        rows = [sorted(r for mb in batch.ranks[0] for r in mb.rows.tolist()) for batch in plan[:n]]
        assert [sorted(seen[s]) for s in range(n)] == rows
        assert rows != [sorted(r for mb in b.ranks[0] for r in mb.rows.tolist()) for b in default_plan[:n]]


def test_microbatch_limits_cut_the_forwards(tmp_path, data):
    """A smaller microbatch limit runs more, smaller forwards (the gradient stays exact: test_train)."""
    sizes: list[int] = []

    def hook(step, k, rows, padding):
        if not padding:
            sizes.append(len(rows))

    train(tmp_path, data, "run", hook=hook, max_examples_per_microbatch=2)
    assert max(sizes) == 2 and len(sizes) >= 4 * 4


def test_pad_to_multiple_of_pads(tmp_path, data, baseline):
    _, _, logged = train(tmp_path, data, "run", pad_to_multiple_of=64)
    efficiency = [r["padding_efficiency"] for r in logged if "padding_efficiency" in r]
    assert max(efficiency) < min(r["padding_efficiency"] for r in baseline[2] if "padding_efficiency" in r)


def test_grad_clip_logs_the_norm_before_clipping(tmp_path, data, baseline):
    """The logged norm of step 1 is the unclipped one (same for any clip); the update is clipped."""
    _, weights, logged = train(tmp_path, data, "run", grad_clip=1e-3)
    first = next(r for r in logged if r.get("step") == 1)["grad_norm"]
    assert first == pytest.approx(next(r for r in baseline[2] if r.get("step") == 1)["grad_norm"]) and first > 1e-3


@pytest.mark.filterwarnings("ignore:CUDA is not available")  # torch.autocast("cuda") on a CPU-only machine
def test_bf16_autocast_only_when_asked_and_on_cuda():
    cuda = World(rank=0, size=1, device=torch.device("cuda"))
    on = autocast(cuda, TrainConfig(bf16=True))
    assert isinstance(on, torch.autocast) and on.fast_dtype == torch.bfloat16
    assert not isinstance(autocast(cuda, TrainConfig(bf16=False)), torch.autocast)
    assert not isinstance(autocast(CPU, TrainConfig(bf16=True)), torch.autocast)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 autocast applies on CUDA only")
def test_bf16_computes_in_bfloat16_on_cuda():
    from mlmprep.train.model import build_model

    model = build_model("tiny", "span", {"vocab_size": 200, "pad_id": 0, "eos_id": 1, "decoder_start_id": 0}).cuda()
    ids = torch.randint(4, 200, (2, 8), device="cuda")
    cuda = World(rank=0, size=1, device=torch.device("cuda"))
    for flag, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        with autocast(cuda, TrainConfig(bf16=flag)):
            assert model(input_ids=ids, decoder_input_ids=ids).logits.dtype == dtype


def test_deterministic_holds_for_the_run_and_is_restored_after(tmp_path, data):
    """--deterministic turns torch's deterministic algorithms on while fit runs (what makes a CUDA rerun or
    resume exact, test_compile) and leaves the process as it found it."""
    seen = {}
    for flag in (True, False):
        def hook(*_, flag=flag):
            seen.setdefault(flag, torch.are_deterministic_algorithms_enabled())

        train(tmp_path, data, f"run-{flag}", hook=hook, deterministic=flag, max_steps=1)
    assert seen == {True: True, False: False} and not torch.are_deterministic_algorithms_enabled()
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ


def test_every_train_option_reaches_the_config(monkeypatch, tmp_path):
    """`mlmprep train` passes each option it has to TrainConfig: each set to a non-default value arrives."""
    import mlmprep.train.loop

    given = dict(model="t5-small", epochs=3, max_tokens=7000, max_tokens_per_batch=999, max_tokens_per_microbatch=333,
                 max_examples_per_microbatch=5, alpha=1.5, pad_to_multiple_of=8, max_encoder_len=40, max_decoder_len=16,
                 optimizer="adafactor", lr=0.02, min_lr=0.001, schedule="linear", warmup_steps=11, decay_steps=13,
                 weight_decay=0.1, grad_clip=2.0, eval_every=17, validation="v",
                 eval_max_tokens_per_microbatch=777, log_every=19, save_every=23, keep_checkpoints=4, seed=29,
                 grow_after=31, max_bad_steps=3, report_to="tensorboard", cache_dir="c", cache_limit="40G",
                 prefetch_epochs=2, fetch_threads=3, fetch_bandwidth="200M",
                 storage_options='{"anon": true}')
    adamw = dict(beta1=0.8, beta2=0.95)  # AdamW's only: refused with adafactor
    flags = {"bf16": False, "compile": True, "deterministic": True, "rehash_data": True}
    mixture = dict(weights="1,2", mix="temperature:2")  # with several DATA (sources)
    missing = {f.name for f in fields(TrainConfig)} - {"data", "sources", "out", "resume", "max_steps", *given, *adamw,
                                                       *flags, *mixture}
    assert not missing, f"give {missing} a non-default value here"
    monkeypatch.setattr(mlmprep.train.loop, "fit", lambda cfg: got.setdefault("cfg", cfg) and {})
    steps = {k: v for k, v in given.items() if k != "max_tokens"} | {"max_steps": 7}  # the other way to stop
    for options in (given, {**given, "optimizer": "adamw", **adamw}, steps):
        got = {}
        args = ["train", "d", "--out", str(tmp_path / "r"), "--no-bf16", "--compile", "--deterministic",
                "--rehash-data"]
        for key, value in options.items():
            args += ["--" + key.replace("_", "-"), str(value)]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        cfg = to_dict(got["cfg"])
        assert {k: cfg[k] for k in options} == options | {"validation": ["v"]} and {k: cfg[k] for k in flags} == flags
    got = {}
    args = ["train", "d1", "web=d2", "--out", str(tmp_path / "m"), "--max-steps", "7"]
    result = CliRunner().invoke(app, [*args, *(f"--{k}={v}" for k, v in mixture.items())])
    assert result.exit_code == 0, result.output
    cfg = to_dict(got["cfg"])
    assert {k: cfg[k] for k in ("data", "sources", *mixture)} == {"data": "d1", "sources": ["d1", "web=d2"], **mixture}


# ---------------------------------------------------------------------------- exact resume with dropout


def dropout_config(path: Path, data: Path) -> Path:
    """A config.json of the tiny T5 with dropout 0.1: resume must restore the RNG to be exact."""
    from transformers import T5Config

    tok = read_manifest(data).tokenizer
    config = T5Config(vocab_size=round_up(tok.vocab_size, 128), **PRESETS["tiny"], dropout_rate=0.1,
                      pad_token_id=tok.pad_id, eos_token_id=tok.eos_id,
                      decoder_start_token_id=tok.decoder_start_id)
    path.write_text(config.to_json_string())
    return path


def test_resume_with_dropout_is_exact(tmp_path, data):
    """A run stopped mid-epoch (step 2 of 4) and resumed to step 6 ends with the uninterrupted run's weights."""
    model = str(dropout_config(tmp_path / "dropout.json", data))
    options = dict(model=model, max_steps=6, decay_steps=6, epochs=2)
    full, weights, _ = train(tmp_path, data, "a", **options)
    fit(TrainConfig(data=str(data), out=str(tmp_path / "b"), **{**BASE, **options, "max_steps": 2}))
    state = json.loads((tmp_path / "b" / "checkpoint-2" / "state.json").read_text())
    assert (state["epoch"], state["cursor"]) == (0, 2)  # mid-epoch
    resumed = fit(TrainConfig(data=str(data), out=str(tmp_path / "b"), **{**BASE, **options}, resume=True))
    assert same(final_weights(tmp_path / "b"), weights)
    assert resumed["loss"] == full["loss"]
    no_dropout = train(tmp_path, data, "c", **{**options, "model": "tiny"})[1]
    assert not same(no_dropout, weights)  # dropout acted (same init seed, same steps)


# ---------------------------------------------------------------------------- SIGKILL while a checkpoint is written

def train_pausing_in_checkpoint(args: list[str], pause_at: int, paused: Path) -> None:
    """`mlmprep train ARGS` that, writing checkpoint-{pause_at}, stops after its model and before its
    optimizer.pt, says so in `paused`, and waits there for its SIGKILL. Runs in a forked child."""
    real_save = torch.save

    def save(obj, path, *args, **kwargs):
        if Path(path).name == "optimizer.pt" and Path(path).parent.name.startswith(f".checkpoint-{pause_at}."):
            paused.write_text("paused")
            while True:
                time.sleep(60)
        return real_save(obj, path, *args, **kwargs)

    torch.save = save
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # the child's progress bars would interleave with pytest's output
    app(args, prog_name="mlmprep")


def test_sigkill_while_writing_a_checkpoint_resumes_from_the_last_whole_one(tmp_path, data):
    options = {**BASE, "save_every": 2, "max_steps": 6, "decay_steps": 6, "epochs": 2}
    flags = (f"--{k.replace('_', '-')}" + ("" if v is True else f"={v}") for k, v in options.items())
    args = ["train", str(data), *flags]
    assert CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")]).exit_code == 0

    # a forked child (torch already imported: a fresh interpreter would spend seconds importing it) is killed
    paused = tmp_path / "paused"
    child = multiprocessing.get_context("fork").Process(
        target=train_pausing_in_checkpoint, args=([*args, "--out", str(tmp_path / "b")], 4, paused))
    child.start()
    try:
        deadline = time.monotonic() + 300  # a bound on a hang only: the kill waits for the pause, not for time
        while not paused.exists() and child.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        ended = f"the child ended with exit code {child.exitcode}"
        assert paused.exists(), ended if not child.is_alive() else "no pause"
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
        assert child.exitcode == -signal.SIGKILL
    finally:
        if child.is_alive():
            child.kill()
            child.join()

    run = tmp_path / "b"
    assert [p.name for p in checkpoints(run)] == ["checkpoint-2"]  # the half-written one is not a checkpoint
    assert (run / ".checkpoint-4.tmp" / "model").is_dir()  # (it was killed inside the write)
    result = CliRunner().invoke(app, ["train", "--out", str(run), "--resume"])
    assert result.exit_code == 0, result.output
    assert [p.name for p in checkpoints(run)] == ["checkpoint-4", "checkpoint-6"]
    assert not list(run.glob(".*"))  # the leftover was replaced, nothing half-written remains
    assert same(final_weights(run), final_weights(tmp_path / "a"))
