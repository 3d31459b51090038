"""DDP: two gloo processes on CPU under torchrun (127.0.0.1, a free port) train on a fake build. Each rank
takes its share of the shared plan: the ranks' rows are disjoint and together cover every row of an epoch
once; both ranks end with identical weights, whose first step's gradient is the whole batch's; only rank 0
writes logs and checkpoints; one process cannot resume a two-process run; with dropout on, a run stopped
mid-epoch and resumed ends bit for bit as the uninterrupted one. One torchrun launch runs every two-rank
training of this module (starting two ranks costs more than their runs)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from mlmprep.config import TrainConfig, to_dict
from mlmprep.errors import ConfigError
from mlmprep.train.epochs import epoch_plan
from mlmprep.train.loop import fit
from mlmprep.train.world import World
from tests.fakes import write_fake_build

WORKER = """
import json, os, sys
import torch, torch.distributed as dist
from mlmprep.config import TrainConfig
from mlmprep.train.loop import fit

cfg, out = TrainConfig(**json.loads(sys.argv[1])), sys.argv[2]
seen = []  # (step, rows) of every real microbatch this rank ran

def hook(step, k, rows, padding):
    if not padding:
        seen.append([step, rows.tolist()])

def on_end(model):
    rank = dist.get_rank()
    torch.save(model.state_dict(), f"{out}/weights-{rank}.pt")
    with open(f"{out}/rows-{rank}.json", "w") as f:
        json.dump(seen, f)

fit(cfg, hook=hook, on_end=on_end)
for port, options in json.loads(sys.argv[3]) if len(sys.argv) > 3 else []:  # more runs in the same two ranks
    os.environ.update(MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="False")  # each fit makes its own group
    fit(TrainConfig(**options))
if len(sys.argv) > 4:  # one more run, through the command line
    port, args = json.loads(sys.argv[4])
    os.environ.update(MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="False")
    from mlmprep.cli import app
    app(args, standalone_mode=False)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def launch(tmp_path_factory):
    """One torchrun launch of two gloo ranks: the plan run, then the dropout runs (uninterrupted; stopped after
    step 1; resumed). Returns (directory, the plan run's config)."""
    from tests.train.test_options import BASE, dropout_config

    tmp_path = tmp_path_factory.mktemp("ddp")
    data = write_fake_build(tmp_path / "data", n_rows=48)
    cfg = TrainConfig(data=str(data), out=str(tmp_path / "run"), epochs=2, max_tokens_per_batch=1024,
                      max_tokens_per_microbatch=256, max_examples_per_microbatch=8, warmup_steps=2, eval_every=4,
                      log_every=1, save_every=4)
    dropout_data = write_fake_build(tmp_path / "dropout-data", n_rows=40)
    common = {**BASE, "data": str(dropout_data), "model": str(dropout_config(tmp_path / "dropout.json", dropout_data)),
              "max_steps": 4, "decay_steps": 4, "epochs": 2, "max_tokens_per_batch": 1024}
    dropout_runs = [{**common, "out": str(tmp_path / "a")}, {**common, "out": str(tmp_path / "b"), "max_steps": 1},
                    {**common, "out": str(tmp_path / "b"), "resume": True}]
    (tmp_path / "worker.py").write_text(WORKER)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), str(tmp_path / "worker.py"), json.dumps(to_dict(cfg)), str(tmp_path),
               json.dumps([(free_port(), options) for options in dropout_runs]),
               json.dumps([free_port(), ["train", str(dropout_data), "--out", str(tmp_path / "cli"), "--max-steps", "2",
                                         "--max-tokens-per-batch", "1024", "--max-tokens-per-microbatch", "512",
                                         "--model", common["model"]]])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    assert done.returncode == 0, done.stderr[-3000:]
    (tmp_path / "stdout.txt").write_text(done.stdout)
    (tmp_path / "stderr.txt").write_text(done.stderr)
    return tmp_path, cfg


def test_the_command_prints_its_final_line_once_not_once_per_rank(launch):
    tmp_path, _ = launch
    finals = [line for line in (tmp_path / "stdout.txt").read_text().splitlines() if line.startswith("step=")]
    assert len(finals) == 1 and finals[0].startswith("step=2 ")
    assert json.loads((tmp_path / "cli" / "final_metrics.json").read_text())["step"] == 2


def test_two_ranks_share_the_plan_and_end_equal(launch):
    tmp_path, cfg = launch
    seen = [json.loads((tmp_path / f"rows-{rank}.json").read_text()) for rank in (0, 1)]
    steps0 = len(epoch_plan(cfg, World(rank=0, size=2, device=torch.device("cpu")), 0)[1])
    epoch0 = [np.concatenate([rows for step, rows in ranks if step < steps0]).astype(int) for ranks in seen]
    assert not set(epoch0[0]) & set(epoch0[1])  # disjoint
    assert np.array_equal(np.sort(np.concatenate(epoch0)), np.arange(48))  # every row exactly once
    assert {step for step, _ in seen[0]} == {step for step, _ in seen[1]}  # every rank worked in every step

    w0, w1 = (torch.load(tmp_path / f"weights-{rank}.pt") for rank in (0, 1))
    assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
    run = tmp_path / "run"
    final = json.loads((run / "final_metrics.json").read_text())
    saved = load_file(str(run / f"checkpoint-{final['step']}" / "model" / "model.safetensors"))
    assert all(torch.equal(saved[k], w0[k]) for k in saved)
    assert len(torch.load(run / f"checkpoint-{final['step']}" / "rng.pt", weights_only=True)) == 2  # every rank's RNG
    lines = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    train_steps = [r["step"] for r in lines if "loss" in r]
    assert train_steps == sorted(set(train_steps))  # one writer: no line twice
    assert final["examples"] == 2 * 48  # two epochs, counted over both ranks
    evals = [r["eval_loss"] for r in lines if "eval_loss" in r]
    assert evals[-1] < evals[0]
    with pytest.raises(ConfigError, match="saved by 2 processes"):  # its plan, so its position, needs 2 ranks
        fit(replace(cfg, resume=True, epochs=3))
    first = next(r for r in lines if r.get("step") == 1 and "grad_norm" in r)
    assert abs(first["grad_norm"] - full_batch_grad_norm(cfg)) < 1e-4 * first["grad_norm"]


def full_batch_grad_norm(cfg: TrainConfig) -> float:
    """The gradient norm of step 0's whole batch (both ranks' rows) at the initial weights, in one process:
    what the ranks' scaled, all-reduced microbatch gradients must add up to."""
    from mlmprep.format.load import read_manifest
    from mlmprep.train.collate import Collator
    from mlmprep.train.model import build_model
    from mlmprep.train.world import seed_everything

    manifest = read_manifest(cfg.data)
    tok = manifest.tokenizer
    split, plan = epoch_plan(cfg, World(rank=0, size=2, device=torch.device("cpu")), 0)
    rows = np.concatenate([mb.rows for rank in plan[0].ranks for mb in rank if not mb.padding])
    seed_everything(cfg.seed)
    model = build_model(cfg.model, "span", tok, max_length=manifest.input_length)
    batch = Collator("span", tok.pad_id, tok.decoder_start_id).from_split(split, rows)
    model(**batch).loss.backward()  # transformers' mean token cross-entropy
    return float(torch.sqrt(sum((p.grad**2).sum() for p in model.parameters())))


def test_ddp_resume_with_dropout_is_exact(launch):
    """Two gloo ranks, dropout on: stopped mid-epoch and resumed == uninterrupted, bit for bit."""
    from tests.train.test_options import final_weights, same

    tmp_path, _ = launch
    state = json.loads((tmp_path / "b" / "checkpoint-1" / "state.json").read_text())
    assert (state["epoch"], state["world_size"]) == (0, 2) and state["cursor"] == 1
    assert same(final_weights(tmp_path / "a"), final_weights(tmp_path / "b"))
