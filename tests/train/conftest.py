"""Shared by the trainer's tests: small plan settings, a fake span build per module, and an exception a hook raises
to stop a run mid-way."""

import pytest

from tests.fakes import write_fake_build

SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8,
             warmup_steps=2, eval_every=0, log_every=2, save_every=0)


class Stop(Exception):
    """Raised by a test's step hook: the run stops there, as a crash would."""


@pytest.fixture(scope="module")
def span_data(tmp_path_factory):
    """A fake span-corruption build of 40 rows, one per test module."""
    return write_fake_build(tmp_path_factory.mktemp("span") / "data", n_rows=40)
