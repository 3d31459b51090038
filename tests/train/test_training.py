"""train: exact microbatch gradients (float64), the learning-rate schedule, models from presets, files and
checkpoints, resume == uninterrupted run (bit for bit on CPU), the CLI, and a smoke run whose validation
loss drops."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.config import TrainConfig
from mlmprep.errors import CacheError, ConfigError
from mlmprep.format.load import open_epoch, read_manifest
from mlmprep.format.manifest import TokenizerRecord
from mlmprep.train.batch import Budget, split_microbatches
from mlmprep.train.checkpoint import checkpoints
from mlmprep.train.collate import Collator
from mlmprep.train.epochs import epoch_plan
from mlmprep.train.loop import fit
from mlmprep.train.model import build_model
from mlmprep.train.optim import lr_at
from mlmprep.train.step import accumulate
from mlmprep.train.world import World
from tests.conftest import build_tiny
from tests.fakes import write_fake_build

CPU = World(rank=0, size=1, device=torch.device("cpu"))
SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8,
             warmup_steps=2, eval_every=0, log_every=2, save_every=0,  # ~10 rows and 2 microbatches per step
             deterministic=True)  # on a GPU, runs compared bit for bit need deterministic kernels


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def span_data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("span") / "data", n_rows=40)


def weights(run, step):
    return load_file(str(run / f"checkpoint-{step}" / "model" / "model.safetensors"))


@pytest.mark.parametrize("objective", ["span", "mlm"])
def test_microbatch_gradients_equal_the_full_batch_gradient(tmp_path, objective):
    lengths = np.random.default_rng(1).integers(6, 40, size=24)  # variable lengths: real padding differences
    data = write_fake_build(tmp_path / "data", objective=objective, n_rows=24, lengths=lengths)
    tok = read_manifest(data).tokenizer
    split = open_epoch(data, 0)
    torch.manual_seed(0)
    model = build_model("tiny", objective, tok).double()
    collator = Collator(objective, tok.pad_id, tok.decoder_start_id)
    rows = np.arange(len(split))
    parts = split_microbatches(rows, split.enc_lengths, split.dec_lengths, Budget(10**6, 200, 5))
    assert len(parts) >= 4
    microbatches = [(part, False) for part in parts] + [(rows[:3], True)]  # a padding microbatch adds nothing
    _, sums = accumulate(model, split, collator, microbatches, int(split.n_targets.sum()), world=CPU, cfg=TrainConfig())
    summed = [p.grad.clone() for p in model.parameters()]

    model.zero_grad()
    full = collator.from_split(split, rows)
    logits = model(**{k: v for k, v in full.items() if k != "labels"}).logits
    F.cross_entropy(logits.flatten(0, 1), full["labels"].flatten(), ignore_index=-100).backward()  # mean per token
    for mine, reference in zip(summed, (p.grad for p in model.parameters())):
        assert torch.allclose(mine, reference, rtol=0, atol=1e-10)
    assert sums[2] == len(rows)  # every row once; the padding microbatch is not counted


def test_lr_schedule():
    cfg = TrainConfig(lr=1.0, min_lr=0.1, warmup_steps=4, schedule="cosine")
    assert [lr_at(s, cfg, 14) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_at(9, cfg, 14) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)))
    assert lr_at(14, cfg, 14) == pytest.approx(0.1) and lr_at(50, cfg, 14) == pytest.approx(0.1)
    linear = TrainConfig(lr=1.0, min_lr=0.1, warmup_steps=4, schedule="linear")
    assert lr_at(9, linear, 14) == pytest.approx(0.55)
    assert lr_at(50, TrainConfig(lr=1.0, warmup_steps=4, schedule="constant"), 14) == 1.0


def test_models_follow_the_tokenizer(tmp_path):
    tok = TokenizerRecord(file="tokenizer.json", sha256="0" * 64, vocab_size=400, pad_id=0, eos_id=1,
                          decoder_start_id=0)
    t5 = build_model("tiny", "span", tok)
    bert = build_model("tiny", "mlm", tok, max_length=1000)
    assert type(t5).__name__ == "T5ForConditionalGeneration" and t5.config.vocab_size == 512  # 400 rounded up to 128s
    assert t5.config.decoder_start_token_id == 0 and t5.config.d_model == 64
    assert type(bert).__name__ == "BertForMaskedLM" and bert.config.max_position_embeddings == 1024
    t5.save_pretrained(str(tmp_path / "ckpt"))
    again = build_model(str(tmp_path / "ckpt"), "span", tok)
    assert all(torch.equal(a, b) for a, b in zip(t5.state_dict().values(), again.state_dict().values()))
    (tmp_path / "c.json").write_text(json.dumps(bert.config.to_dict()))
    assert build_model(str(tmp_path / "c.json"), "mlm", tok).config.hidden_size == 64
    with pytest.raises(ConfigError, match="masked-LM"):
        build_model(str(tmp_path / "ckpt"), "mlm", tok)
    with pytest.raises(ConfigError, match="tiny, t5-small, t5-base"):
        build_model("t5-huge", "span", tok)
    with pytest.raises(ConfigError, match="fewer than"):
        build_model(str(tmp_path / "ckpt"), "span", replace(tok, vocab_size=600))


def test_checkpoints_keep_the_last_k_and_a_full_run_dir_needs_resume(tmp_path, span_data):
    run = tmp_path / "run"
    cfg = TrainConfig(data=str(span_data), out=str(run), **{**SMALL, "save_every": 1}, max_steps=4, keep_checkpoints=2)
    final = fit(cfg)
    assert [p.name for p in checkpoints(run)] == ["checkpoint-3", "checkpoint-4"]
    assert not list(run.glob(".*"))  # no temporary directories left behind
    state = json.loads((run / "checkpoint-4" / "state.json").read_text())
    assert state["step"] == 4 and state["examples"] == final["examples"]
    assert json.loads((run / "final_metrics.json").read_text()) == final
    assert [r["step"] for r in map(json.loads, (run / "metrics.jsonl").open()) if "loss" in r] == [1, 2, 3, 4]
    with pytest.raises(CacheError, match="--resume"):
        fit(cfg)
    with pytest.raises(ConfigError, match="--lr"):
        fit(replace(cfg, resume=True, lr=0.5))


class Crash(Exception):
    pass


def crash_at(step):
    def hook(now, k, rows, padding):
        if now == step:
            raise Crash
    return hook


def test_resume_continues_bit_for_bit(tmp_path, span_data):
    """One run of T steps == a run stopped at an epoch boundary (into epoch 2), resumed to inside epoch 2,
    resumed and killed mid-way, resumed to T."""
    base = dict(data=str(span_data), **SMALL, epochs=4, seed=3, keep_checkpoints=5)
    steps = [len(epoch_plan(TrainConfig(**base), CPU, e)[1]) for e in range(4)]
    boundary = steps[0] + steps[1]  # resumes at (epoch 2, cursor 0)
    inside = boundary + 2  # resumes at (epoch 2, cursor 2)
    total = boundary + steps[2] + 1  # ends in epoch 3
    a = fit(TrainConfig(**base, out=str(tmp_path / "a"), max_steps=total, decay_steps=total))
    b_cfg = TrainConfig(**base, out=str(tmp_path / "b"), max_steps=total, decay_steps=total, resume=True)
    fit(replace(b_cfg, max_steps=boundary, resume=False))
    fit(replace(b_cfg, max_steps=inside))
    with pytest.raises(Crash):  # after logging steps past the last checkpoint
        fit(b_cfg, hook=crash_at(total - 1))
    b = fit(b_cfg)

    state = json.loads((tmp_path / "b" / f"checkpoint-{boundary}" / "state.json").read_text())
    assert (state["epoch"], state["cursor"]) == (2, 0)
    wa, wb = weights(tmp_path / "a", total), weights(tmp_path / "b", total)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (a["eval_loss"], a["examples"], a["tokens"]) == (b["eval_loss"], b["examples"], b["tokens"])
    logged = [r["step"] for r in map(json.loads, (tmp_path / "b" / "metrics.jsonl").open()) if "loss" in r]
    assert logged == sorted(set(logged))  # the killed run's lines past checkpoint-{inside} were dropped, then redone


def test_a_remask_between_stop_and_resume_leaves_the_run_on_the_seeds_it_started_with(tmp_path, capsys):
    """Epoch e reads seed-{e % N} with the N the run started with: a build given a third seed (as `mlmprep
    remask` does) while the run is stopped changes none of its epochs, so the resume still ends bit for bit."""
    import shutil

    data = write_fake_build(tmp_path / "data", n_rows=40, n_seeds=3)  # seed-2: the one a remask will add
    manifest = json.loads((data / "manifest.json").read_text())
    (data / "manifest.json").write_text(json.dumps({**manifest, "seeds": manifest["seeds"][:2]}))
    base = dict(data=str(data), **{**SMALL, "save_every": 1}, epochs=3, seed=3)
    steps = [len(epoch_plan(TrainConfig(**base), CPU, e)[1]) for e in range(3)]
    total = base["decay_steps"] = sum(steps)  # the stopped run's learning rates are the whole run's
    a = fit(TrainConfig(**base, out=str(tmp_path / "a")))
    fit(TrainConfig(**base, out=str(tmp_path / "b"), max_steps=steps[0]))  # stopped at the end of epoch 0
    assert json.loads((tmp_path / "b" / f"checkpoint-{steps[0]}" / "state.json").read_text())["seeds"] == 2
    (data / "manifest.json").write_text(json.dumps(manifest))  # "remasked" to 3 seeds
    capsys.readouterr()
    b = fit(TrainConfig(**base, out=str(tmp_path / "b"), resume=True))
    assert f"{data}: has 3 seed splits now; this run goes on reading the 2 it started with" in capsys.readouterr().err
    wa, wb = weights(tmp_path / "a", total), weights(tmp_path / "b", total)
    assert all(torch.equal(wa[k], wb[k]) for k in wa) and a["tokens"] == b["tokens"]
    c = fit(TrainConfig(**base, out=str(tmp_path / "c")))  # a new run reads all three: epoch 2 reads seed-2
    assert not torch.equal(weights(tmp_path / "c", total)["shared.weight"], wa["shared.weight"])
    shutil.rmtree(data / "seed-2")
    (data / "manifest.json").write_text(json.dumps({**manifest, "seeds": manifest["seeds"][:1]}))
    with pytest.raises(CacheError, match="has 1 seed splits, but the run in .* started with 2"):
        fit(TrainConfig(**base, out=str(tmp_path / "b"), resume=True, max_steps=total + 1))
    assert c["tokens"] == a["tokens"]


@pytest.fixture(scope="module")
def real_build(tmp_path_factory, tiny_corpus, tiny_tokenizer_path):
    """`mlmprep build` of the tests' tiny corpus: 64-token inputs, two seeds, 10% validation."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    out = tmp_path_factory.mktemp("build") / "data"
    build(BuildConfig(corpus=(str(tiny_corpus),), tokenizer=str(tiny_tokenizer_path), input_length=64, seeds=2,
                      validation_fraction=0.1, out=str(out)), log=lambda line: None)
    return out


def test_cli_smoke_run_learns(tmp_path, real_build):
    """`mlmprep train` on a real build: validation loss drops within a few dozen steps; a second start
    into the same --out is refused (exit 2), a --resume with only --out continues it."""
    run = tmp_path / "run"
    (tmp_path / "opts.json").write_text(json.dumps({"max-tokens-per-batch": 2048, "lr": 0.1}))
    args = ["train", str(real_build), "--out", str(run), "--config", str(tmp_path / "opts.json"),
            "--max-tokens-per-microbatch", "1024", "--max-examples-per-microbatch", "32", "--lr", "0.003",
            "--warmup-steps", "3", "--max-steps", "15", "--eval-every", "15", "--save-every", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").open()) if "eval_loss" in r]
    assert [r["step"] for r in evals] == [0, 15]
    assert evals[1]["eval_loss"] < evals[0]["eval_loss"] - 1.0 and evals[1]["eval_accuracy"] > evals[0]["eval_accuracy"]
    saved = json.loads((run / "train_config.json").read_text())
    assert (saved["max_tokens_per_batch"], saved["lr"]) == (2048, 0.003)  # the file, overridden by the command line
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2 and "not empty; pass --resume" in again.output
    resumed = CliRunner().invoke(app, ["train", str(real_build), "--out", str(run), "--resume", "--max-steps", "17"])
    assert resumed.exit_code == 0, resumed.output
    assert [p.name for p in checkpoints(run)] == ["checkpoint-15", "checkpoint-17"]


@pytest.mark.slow  # trains on the whole built-in sample until it learns
def test_cli_smoke_run_on_the_builtin_sample_learns(tmp_path):
    """The README's main job, scaled down: build the built-in sample, train `tiny` on it, loss drops."""
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    data = tmp_path / "sample"
    build(BuildConfig(vocab_size=2000, input_length=64, seeds=2, out=str(data), tokenizer_train_chars=400_000),
          log=lambda line: None)  # the tokenizer learns from a fifth of the sample: 8 s instead of 23 s here
    assert "built-in sample" in json.loads((data / "manifest.json").read_text())["corpus"]["description"]
    run = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "train", str(data), "--out", str(run), "--max-tokens-per-batch", "4096", "--max-tokens-per-microbatch", "2048",
        "--lr", "0.003", "--warmup-steps", "5", "--max-steps", "30", "--eval-every", "30", "--save-every", "0",
    ])
    assert result.exit_code == 0, result.output
    evals = [r for r in map(json.loads, (run / "metrics.jsonl").open()) if "eval_loss" in r]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] - 1.0


def test_mlm_with_adafactor_and_caps(tmp_path):
    data = write_fake_build(tmp_path / "data", objective="mlm", n_rows=24)
    final = fit(TrainConfig(data=str(data), out=str(tmp_path / "run"), **SMALL, max_steps=3, optimizer="adafactor",
                            max_encoder_len=16))
    assert final["step"] == 3 and math.isfinite(final["loss"]) and math.isfinite(final["eval_loss"])


def test_out_of_memory_shrinks_retries_the_same_batch_and_grows_back(tmp_path, span_data):
    """An injected OOM in step 2's second microbatch: the batch is re-cut smaller and retried with exactly
    the planned rows; limits grow back after `grow_after` good steps; training matches a run without OOM."""
    attempts: dict[int, list[list[np.ndarray]]] = {}

    def hook(step, k, rows, padding):
        if k == 0:
            attempts.setdefault(step, []).append([])
        attempts[step][-1].append(rows)
        if (step, k, len(attempts[step])) == (2, 1, 1):
            raise torch.OutOfMemoryError("injected")

    cfg = TrainConfig(data=str(span_data), **SMALL, max_steps=8, grow_after=1)
    fit(replace(cfg, out=str(tmp_path / "plain")))
    fit(replace(cfg, out=str(tmp_path / "oom")), hook=hook)

    first, retry = attempts[2]
    planned = np.concatenate([mb.rows for mb in epoch_plan(cfg, CPU, 0)[1][2].ranks[0]])
    assert np.array_equal(np.sort(np.concatenate(retry)), np.sort(planned))  # no row lost or repeated
    assert len(retry) > len(first) and max(map(len, retry)) < max(map(len, first))
    events = [r for r in map(json.loads, (tmp_path / "oom" / "metrics.jsonl").open()) if "event" in r]
    assert events[0]["event"] == "oom" and events[0]["step"] == 2
    assert [e["event"] for e in events[1:]] and {e["event"] for e in events[1:]} == {"grow"}
    assert events[-1]["tokens"] == cfg.max_tokens_per_microbatch  # back to the user's limit
    assert all(len(a) == 1 for step, a in attempts.items() if step != 2)
    plain, oom = weights(tmp_path / "plain", 8), weights(tmp_path / "oom", 8)
    assert all(torch.allclose(plain[k], oom[k], rtol=0, atol=1e-5) for k in plain)  # only summation order differs



def test_after_an_out_of_memory_no_retried_microbatch_is_larger_than_a_planned_one():
    """Rows 4 and 5 are long, planned alone (cut at pool ends, as plans do); rows 0-3 short, a microbatch at the
    example cap. An OOM halves the example cap to 2: the retry must not pair 4 and 5 into a microbatch twice as
    large as anything that ran (re-cutting the rank's rows as one pool did)."""
    from types import SimpleNamespace

    from mlmprep.train.adapt import Limits
    from mlmprep.train.batch import Batch, Microbatch, padded_cost
    from mlmprep.train.epochs import make_budget
    from mlmprep.train.step import rank_microbatches

    enc, dec = np.array([10, 10, 10, 10, 100, 100]), np.array([2, 2, 2, 2, 20, 20])
    split = SimpleNamespace(enc_lengths=enc, dec_lengths=dec)
    cfg = TrainConfig(max_tokens_per_batch=4096, max_tokens_per_microbatch=4096, max_examples_per_microbatch=4)
    planned = [Microbatch(rows=np.arange(4)), Microbatch(rows=np.array([4])), Microbatch(rows=np.array([5]))]
    batch = Batch(ranks=(tuple(planned),))
    limits = Limits(examples=2, tokens=4096)  # what Adapter.shrink gives after this batch ran out of memory
    retry = [rows for rows, padding in rank_microbatches(batch, 0, split, cfg, limits) if not padding]
    assert sorted(np.concatenate(retry).tolist()) == list(range(6)) and max(map(len, retry)) <= 2
    largest_planned = max(padded_cost(enc, dec, mb.rows, make_budget(cfg)) for mb in planned)
    assert max(padded_cost(enc, dec, rows, make_budget(cfg, limits)) for rows in retry) <= largest_planned

def test_out_of_memory_on_a_single_row_is_raised(tmp_path, span_data):
    def hook(step, k, rows, padding):
        raise torch.OutOfMemoryError("injected")

    with pytest.raises(torch.OutOfMemoryError, match="single row"):
        fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **SMALL, max_steps=2), hook=hook)
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open() if "event" in line]
    # a row costs 30 + 2 * 8 = 46; microbatches of 5 rows (230 <= 256 tokens) are cut by tokens, so the token
    # cap halves below what ran (230 -> 115 -> 46: one row each); then one row fails and nothing is left
    assert [(e["examples"], e["tokens"]) for e in events] == [(8, 115), (8, 46), (1, 46)]


def test_evaluates_on_a_split_of_another_build_with_the_same_tokenizer(tmp_path, span_data):
    other = write_fake_build(tmp_path / "other", n_rows=12, seed=5)  # same fake tokenizer, other rows
    final = fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run"), **SMALL, max_steps=1,
                            validation=str(other / "seed-0")))
    assert final["eval_tokens"] == open_epoch(other, 0).n_targets.sum()
    foreign = write_fake_build(tmp_path / "foreign", n_rows=12, vocab_size=200)
    with pytest.raises(ConfigError, match="another tokenizer"):
        fit(TrainConfig(data=str(span_data), out=str(tmp_path / "run2"), **SMALL, max_steps=1,
                        validation=str(foreign / "seed-0")))


def test_an_empty_validation_split_is_skipped_as_a_builds_own(tmp_path, real_build, tiny_corpus, tiny_tokenizer_path):

    empty = build_tiny(tmp_path / "v0", tiny_corpus, tiny_tokenizer_path, input_length=64, validation_fraction=0)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(real_build), "--out", str(run), "--max-steps", "1",
                                      "--eval-every", "1", "--validation", str(empty / "validation")])
    assert result.exit_code == 0, result.output
    assert f"{empty / 'validation'}: no validation rows" in result.output
    assert "eval_loss" not in json.loads((run / "final_metrics.json").read_text())


@pytest.mark.parametrize("name, problem", [("nosuch", "not a split directory of a build"),
                                           ("", "not a split directory"), ("mlm/seed-0", "mlm data, but")])
def test_a_bad_validation_is_one_line_naming_it(tmp_path, span_data, name, problem):
    write_fake_build(tmp_path / "mlm", objective="mlm", n_rows=12)  # the same fake tokenizer, another objective
    path, run = tmp_path / name, tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "1",
                                      "--warmup-steps", "5", "--validation", str(path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: --validation {path}: {problem}")
    assert not run.exists()


def test_a_batch_without_label_tokens_is_skipped_not_a_crash(tmp_path):
    """--max-encoder-len 2 keeps each mlm row's first and last token: a row whose masked tokens all lie between
    has no label token left, and a one-row batch of it had 0 / 0 as its loss scale (ZeroDivisionError)."""
    data = write_fake_build(tmp_path / "data", objective="mlm", n_rows=24, window_length=16)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), **{**SMALL, "max_tokens_per_batch": 16,
                      "max_tokens_per_microbatch": 16, "max_examples_per_microbatch": 1}, max_encoder_len=2, epochs=1)
    collator = Collator("mlm", 0, 0, max_encoder_len=2)
    split = open_epoch(data, 0)
    empty = [r for r in range(len(split)) if not (collator.from_split(split, [r])["labels"] != -100).any()]
    assert 0 < len(empty) < len(split)
    final = fit(cfg)
    assert final["step"] == len(split)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    skipped = [line for line in lines if line.get("event") == "no_targets"]
    assert sorted(r for line in skipped for r in line["rows"]) == empty
    assert sum(line["examples"] for line in lines if "examples" in line) == len(split) - len(empty)


def test_training_without_validation_rows_says_evaluation_is_skipped(tmp_path, tiny_corpus, tiny_tokenizer_path,
                                                                     capsys):
    import torch

    from mlmprep.config import TrainConfig
    from mlmprep.train.loop import fit

    data = build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, validation_fraction=0.0, seeds=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fit(TrainConfig(data=str(data), out=str(tmp_path / "run"), model="tiny", max_steps=1, warmup_steps=0,
                        max_tokens_per_batch=256, max_tokens_per_microbatch=256, eval_every=0, save_every=0))
    finally:
        torch.set_num_threads(threads)
    said = [line for line in capsys.readouterr().err.splitlines() if "evaluation is skipped" in line]
    assert len(said) == 1 and "no validation rows" in said[0]
