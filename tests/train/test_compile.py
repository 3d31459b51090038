"""--compile keeps the trainer's guarantees: exact microbatch gradients, exact resume, OOM retries.

On a CUDA machine they run with inductor, as `mlmprep train` does. On a CPU they run only with
MLMPREP_COMPILE_TESTS=1, and with the "aot_eager" backend: the same dynamo tracing, per-shape guards and AOT
autograd graphs, without inductor's C++ code generation; even so, tracing T5 takes minutes on 2 cores."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import mlmprep.train.speed as speed
from mlmprep.config import TrainConfig
from mlmprep.format.load import open_epoch, read_manifest
from mlmprep.train.batch import Budget, split_microbatches
from mlmprep.train.collate import Collator
from mlmprep.train.loop import fit
from mlmprep.train.model import build_model
from mlmprep.train.step import accumulate, make_forward
from mlmprep.train.world import World
from tests.fakes import write_fake_build

CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not (CUDA or os.environ.get("MLMPREP_COMPILE_TESTS")),
                                reason="compiling T5 takes minutes on a CPU: set MLMPREP_COMPILE_TESTS=1 to run these")
WORLD = World(rank=0, size=1, device=torch.device("cuda" if CUDA else "cpu"))
SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8,
             warmup_steps=2, eval_every=0, log_every=2, compile=True, bf16=False)


@pytest.fixture(autouse=True)
def aot_eager_on_cpu(monkeypatch):
    if not CUDA:
        monkeypatch.setattr(speed, "BACKEND", "aot_eager")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
    torch._dynamo.reset()


@pytest.fixture(scope="module")
def span_data(tmp_path_factory):
    return write_fake_build(tmp_path_factory.mktemp("compile") / "data", n_rows=40)


def weights(run, step):
    return load_file(str(run / f"checkpoint-{step}" / "model" / "model.safetensors"))


def test_compiled_microbatch_gradients_equal_the_eager_full_batch_gradient(tmp_path):
    lengths = np.random.default_rng(1).integers(6, 40, size=24)
    data = write_fake_build(tmp_path / "data", n_rows=24, lengths=lengths)
    tok, split = read_manifest(data).tokenizer, open_epoch(data, 0)
    collator = Collator("span", tok.pad_id, tok.decoder_start_id, pad_to_multiple_of=8)
    rows = np.arange(len(split))
    parts = split_microbatches(rows, split.enc_lengths, split.dec_lengths, Budget(10**6, 300, 6, pad_to_multiple_of=8))
    grads = []
    for compile_ in (True, False):
        torch.manual_seed(0)
        model = build_model("tiny", "span", tok).double().to(WORLD.device)
        forward = make_forward(model, TrainConfig(compile=compile_), WORLD, "span")
        assert forward.compiled == compile_
        accumulate(model, split, collator, [(p, False) for p in parts], int(split.n_targets.sum()), world=WORLD,
                   cfg=TrainConfig(), forward=forward)
        grads.append([p.grad.clone() for p in model.parameters()])
    # inductor fuses T5LayerNorm's cast to float32 without rounding to it, as eager does: on an H100 the float64
    # gradients differed by 2.6e-8 at most (largest 0.116); a wrong microbatch weighting is off by 1e-2 or more
    worst = max((a - b).abs().max().item() for a, b in zip(*grads))
    assert worst <= (1e-6 if CUDA else 1e-10), worst


def test_compiled_run_resumes_exactly_and_says_when_it_compiles(tmp_path, span_data, capsys):
    base = TrainConfig(data=str(span_data), **SMALL, max_steps=6, decay_steps=6, save_every=3, seed=2,
                       deterministic=True)  # on CUDA inductor's backward adds with atomics unless told not to
    fit(replace(base, out=str(tmp_path / "a")))
    assert "compiling for microbatches of" in capsys.readouterr().err
    fit(replace(base, out=str(tmp_path / "b"), max_steps=3))
    fit(replace(base, out=str(tmp_path / "b"), resume=True))
    a, b = weights(tmp_path / "a", 6), weights(tmp_path / "b", 6)
    assert all(torch.equal(a[k], b[k]) for k in a), max((a[k] - b[k]).abs().max().item() for k in a)


def test_compiled_out_of_memory_retry_matches_a_run_without(tmp_path, span_data, monkeypatch):
    tries = []
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)  # the retry regroups the sums: TF32's
    monkeypatch.setattr("mlmprep.train.prepare.setup_device", lambda device: None)  # 1e-3 would show through AdamW

    def hook(step, k, rows, padding):
        tries.append((step, k))
        if (step, k) == (1, 1) and tries.count((1, 1)) == 1:
            raise torch.OutOfMemoryError("injected")

    cfg = TrainConfig(data=str(span_data), **SMALL, max_steps=3, save_every=3, deterministic=True)
    fit(replace(cfg, out=str(tmp_path / "plain")))
    fit(replace(cfg, out=str(tmp_path / "oom")), hook=hook)
    plain, oom = weights(tmp_path / "plain", 3), weights(tmp_path / "oom", 3)
    worst = max((plain[k] - oom[k]).abs().max().item() for k in plain)
    assert worst <= 1e-5, worst


def test_two_compiled_ranks_end_equal_with_the_full_batch_gradient(tmp_path):
    """DDP with --compile: two gloo ranks on the CPU, each compiling its own model; equal weights at the end and a
    first-step gradient norm equal to the whole batch's, as without compiling (test_ddp)."""
    import json
    import subprocess
    import sys

    from mlmprep.config import to_dict
    from tests.train.test_ddp import WORKER, free_port, full_batch_grad_norm

    data = write_fake_build(tmp_path / "data", n_rows=48)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), max_tokens_per_batch=1024,
                      max_tokens_per_microbatch=256, max_examples_per_microbatch=8, warmup_steps=2, eval_every=0,
                      log_every=1, max_steps=3, compile=True)
    # the ranks run on the CPU
    worker = "import mlmprep.train.speed\nmlmprep.train.speed.BACKEND = 'aot_eager'\n" + WORKER
    (tmp_path / "worker.py").write_text(worker)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), str(tmp_path / "worker.py"), json.dumps(to_dict(cfg)), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
                               "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "compiling for microbatches" in done.stderr
    w0, w1 = (torch.load(tmp_path / f"weights-{rank}.pt") for rank in (0, 1))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    first = next(r for r in lines if r.get("step") == 1 and "grad_norm" in r)
    assert abs(first["grad_norm"] - full_batch_grad_norm(cfg)) < 1e-4 * first["grad_norm"]
