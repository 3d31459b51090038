"""The learning-rate schedule as a user sets it: inverse_sqrt against transformers' own, and the warnings for a
decay that ends before the warmup does and a warmup longer than the run."""

from __future__ import annotations

import math

import pytest
import torch

from mlmprep.config import TrainConfig
from mlmprep.train.loop import fit
from mlmprep.train.optim import lr_at
from tests.train.conftest import SMALL

pytestmark = pytest.mark.usefixtures("one_thread")


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


@pytest.mark.parametrize("decay_steps, warned", [(1, True), (2, True), (3, True), (4, False), (0, False)])
def test_a_decay_that_ends_before_the_warmup_does_is_warned_about(tmp_path, span_data, capsys, decay_steps, warned):
    """With --decay-steps at most --warmup-steps + 1 the rate jumps from --lr to --min-lr after the warmup."""
    cfg = TrainConfig(data=str(span_data), out=str(tmp_path / "run"),
                      **{**SMALL, "warmup_steps": 2, "decay_steps": decay_steps}, max_steps=4)
    fit(cfg)
    assert ("warning: --decay-steps" in capsys.readouterr().err) is warned
    assert (lr_at(3, cfg, cfg.decay_steps or 4) == cfg.min_lr) is warned  # step warmup + 1; run_fit's horizon


def test_warmup_longer_than_the_run_is_warned(tmp_path, span_data, capsys):
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "a"), **{**SMALL, "warmup_steps": 50}, max_steps=3))
    assert "--warmup-steps 50 is longer than the run (3 steps)" in capsys.readouterr().err
    fit(TrainConfig(data=str(span_data), out=str(tmp_path / "b"), **{**SMALL, "warmup_steps": 3}, max_steps=3))
    assert "--warmup-steps" not in capsys.readouterr().err
