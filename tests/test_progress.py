"""Read-ahead threads: order kept, errors re-raised where they belong, work continuing while the consumer is busy."""

import threading
import time

import pytest

from mlmprep.progress import prefetch, prefetch_map


def wait_until(condition, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_prefetch_keeps_order_and_reraises_the_producers_error():
    def items():
        yield from range(5)
        raise ValueError("bad record")

    got = []
    with pytest.raises(ValueError, match="bad record"):
        for x in prefetch(items()):
            got.append(x)
    assert got == [0, 1, 2, 3, 4]


def test_prefetch_map_keeps_order_when_later_calls_finish_first():
    def slow_first(x: int) -> int:
        time.sleep(0.02 if x % 3 == 0 else 0.0)
        return x * x

    assert list(prefetch_map(slow_first, range(30), workers=3)) == [x * x for x in range(30)]


def test_prefetch_map_reraises_a_calls_error_after_the_results_before_it():
    def fn(x: int) -> int:
        if x == 4:
            raise RuntimeError("tokenizer failed on item 4")
        return x

    got = []
    with pytest.raises(RuntimeError, match="item 4"):
        for x in prefetch_map(fn, range(10)):
            got.append(x)
    assert got == [0, 1, 2, 3]


def test_prefetch_map_works_ahead_while_the_consumer_is_busy():
    """Results pile up (to `depth`) while nobody consumes them: a build's tokenizer keeps going while its
    main thread loads Numba. Only then does the producer wait."""
    done = []
    lock = threading.Lock()

    def fn(x: int) -> int:
        with lock:
            done.append(x)
        return x

    results = prefetch_map(fn, range(100), workers=2, depth=8)
    assert wait_until(lambda: len(done) >= 8), f"only {len(done)} calls ran ahead"
    time.sleep(0.1)
    assert len(done) < 100  # bounded: the read-ahead stops at about `depth` results
    assert list(results) == list(range(100))
