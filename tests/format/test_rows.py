"""rows: the ragged-array helpers against Python loops over the same runs."""

from __future__ import annotations

import numpy as np
import pytest

from mlmprep.format.rows import Rows, concat_rows, span_indices, starts_of


@pytest.mark.parametrize("sizes", [[], [0], [3], [2, 0, 5, 1], [0, 0, 4, 0]])
def test_starts_of_is_each_runs_start_and_the_end(sizes):
    expected, at = [], 0
    for size in sizes:
        expected.append(at)
        at += size
    got = starts_of(np.array(sizes, dtype=np.int32))
    assert got.dtype == np.int64 and got.tolist() == expected + [at]
    assert starts_of(sizes).tolist() == expected + [at]  # a list as well as an array


def test_span_indices_are_the_spans_one_after_another():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(0, 12))
        sizes = rng.integers(0, 6, n)
        starts = rng.integers(0, 100, n)
        expected = [s + k for s, size in zip(starts.tolist(), sizes.tolist()) for k in range(size)]
        assert span_indices(starts, sizes).tolist() == expected
        assert span_indices(0, sizes).tolist() == [k for size in sizes.tolist() for k in range(size)]


def test_concat_rows_keeps_every_row_in_order():
    parts = [Rows(np.arange(5, dtype=np.int32), np.array([0, 2, 5])), Rows(np.zeros(0, np.int32), np.array([0, 0])),
             Rows(np.array([7], np.int32), np.array([0, 1]))]
    joined = concat_rows(parts)
    assert [joined.values[a:b].tolist() for a, b in zip(joined.offsets[:-1], joined.offsets[1:])] == [
        [0, 1], [2, 3, 4], [], [7]]
