"""adapt: length regimes, which limit an OOM halves, growth back to the user's limits, per-regime state.
(The trainer's retry of the same batch is tested in test_training.py.)"""

from __future__ import annotations

import json

import numpy as np

from mlmprep.train.adapt import Adapter, Limits, regime_of

USER = Limits(examples=28, tokens=4096)


def test_regime_is_the_power_of_two_bucket_of_the_longest_effective_row():
    enc = np.array([10, 60, 100, 500])
    dec = np.array([2, 2, 14, 20])
    assert regime_of(enc, dec, np.array([0]), 2.0) == 4  # 14 effective tokens: (8, 16]
    assert regime_of(enc, dec, np.array([0, 1]), 2.0) == 6  # 64: (32, 64]
    assert regime_of(enc, dec, np.array([0, 2]), 2.0) == 7  # 128: (64, 128]
    assert regime_of(enc, dec, np.array([0, 2]), 0.0) == 7  # 100
    assert regime_of(enc, dec, np.array([3, 0]), 2.0) == 10  # 540


def test_shrink_halves_the_binding_limit_and_only_in_its_regime():
    adapter = Adapter(USER, grow_after=3)
    assert adapter.shrink(9, examples_run=28, tokens_run=3000) == Limits(14, 4096)  # example cap was binding
    assert adapter.shrink(9, examples_run=10, tokens_run=4000) == Limits(14, 2000)  # token cap was binding
    assert adapter.shrink(9, examples_run=6, tokens_run=1500) == Limits(14, 750)  # halved below what ran
    assert adapter.limits(9) == Limits(14, 750)
    assert adapter.limits(5) == USER  # short rows keep the user's limits
    assert adapter.shrink(9, examples_run=1, tokens_run=900) is None  # one row did not fit: give up
    assert adapter.limits(9) == Limits(14, 750)


def test_limits_grow_back_after_good_steps_capped_at_the_users():
    adapter = Adapter(USER, grow_after=2)
    adapter.shrink(7, examples_run=28, tokens_run=4096)
    adapter.shrink(7, examples_run=14, tokens_run=4096)  # Limits(7, 4096)
    assert adapter.succeeded(7) is None and adapter.succeeded(5) is None
    assert adapter.succeeded(7) == Limits(9, 4096)  # ceil(7 * 1.25)
    grown = []
    while (new := adapter.succeeded(7)) != USER:
        grown.append(new)
    assert [g.examples for g in grown if g is not None] == [12, 15, 19, 24]
    assert adapter.limits(7) == USER and adapter.state_dict() == {}  # back to normal: nothing to remember
    assert adapter.succeeded(7) is None


def test_an_oom_during_growth_restarts_the_count():
    adapter = Adapter(USER, grow_after=2)
    adapter.shrink(7, examples_run=28, tokens_run=1000)
    adapter.succeeded(7)
    adapter.shrink(7, examples_run=14, tokens_run=1000)  # Limits(7, 4096)
    assert adapter.succeeded(7) is None  # one good step since the last OOM, not two
    assert adapter.succeeded(7) == Limits(9, 4096)


def test_state_round_trips_through_json():
    adapter = Adapter(USER, grow_after=5)
    adapter.shrink(8, examples_run=28, tokens_run=2000)
    adapter.succeeded(8)
    adapter.shrink(11, examples_run=3, tokens_run=3000)
    restored = Adapter(USER, grow_after=5)
    restored.load_state_dict(json.loads(json.dumps(adapter.state_dict())))
    assert restored.current == adapter.current and restored.good_steps == adapter.good_steps
    assert restored.limits(11) == Limits(28, 1500)
