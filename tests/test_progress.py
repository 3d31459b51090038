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
    """Call 3k waits until call 3k + 1 has finished, so results complete out of order; they come in order."""
    finished = [threading.Event() for _ in range(31)]
    order = []

    def late_first(x: int) -> int:
        if x % 3 == 0:
            assert finished[x + 1].wait(30), f"call {x + 1} never ran beside call {x}"
        order.append(x)
        finished[x].set()
        return x * x

    assert list(prefetch_map(late_first, range(30), workers=3)) == [x * x for x in range(30)]
    assert all(order.index(x + 1) < order.index(x) for x in range(0, 30, 3))


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
    done, consumed, ahead = [], [0], []
    lock = threading.Lock()

    def items():
        for x in range(100):
            ahead.append(x - consumed[0])  # how far ahead of the consumer each item is taken
            yield x

    def fn(x: int) -> int:
        with lock:
            done.append(x)
        return x

    results = prefetch_map(fn, items(), workers=2, depth=8)
    assert wait_until(lambda: len(done) >= 8), f"only {len(done)} calls ran ahead"  # nothing consumed yet
    for x in results:
        assert x == consumed[0]
        assert wait_until(lambda x=x: len(ahead) >= min(100, x + 9))  # the producer refills up to `depth` ahead ...
        consumed[0] += 1
    assert max(ahead) <= 8 + 1  # ... and never further: one item in hand beyond the `depth` queued


def test_prefetch_takes_at_most_depth_items_beyond_the_one_in_hand_and_the_one_being_queued():
    taken = []

    def items():
        for x in range(50):
            taken.append(x)
            yield x

    for x in prefetch(items(), depth=3):
        assert wait_until(lambda x=x: len(taken) >= min(50, x + 5))
        time.sleep(0.02)  # time to run further ahead, were it unbounded
        assert len(taken) == min(50, x + 5)  # x in hand, 3 queued, 1 waiting to be queued


def test_prefetch_map_with_depth_1_runs_only_the_next_call_ahead():
    """The trainer's collation: while the consumer uses result x, call x + 1 runs and no later one (each holds
    a microbatch in pinned memory)."""
    started = []

    def fn(x: int) -> int:
        started.append(x)
        return x

    for x in prefetch_map(fn, range(10), workers=1, depth=1):
        assert wait_until(lambda x=x: started[-1] >= min(9, x + 1))
        time.sleep(0.02)  # time to run further ahead, were it allowed
        assert started[-1] == min(9, x + 1)


def test_stages_log_a_line_each_interval_when_stderr_is_not_a_terminal(monkeypatch):
    """A fake clock, one update a second: a line at 10 s and at 20 s only, with the stage, what is done of all,
    the note, and the tokens with their rate over the stage (100 k^2 tokens after k seconds: 1,000 then 2,000/s)."""
    import io

    from mlmprep.progress import Stages

    log, now = io.StringIO(), [0.0]
    monkeypatch.setattr("sys.stderr", log)
    with Stages(every=10, clock=lambda: now[0]) as stages:
        stages.stage("read, clean, tokenize", 50_000_000, "B")
        for k in range(1, 26):
            now[0] = float(k)
            stages.update(2_000_000, f"{k}/25 shards", tokens=100 * k * k)
        stages.stage("window, mask, write", 4, "output file", done=1)
        now[0] = 35.0
        stages.update(2)
    assert log.getvalue().splitlines() == [
        "read, clean, tokenize: 20.0 of 50.0 MB (40%, 10 s), 10/25 shards, 10,000 tokens, 1,000 tokens/s",
        "read, clean, tokenize: 40.0 of 50.0 MB (80%, 20 s), 20/25 shards, 40,000 tokens, 2,000 tokens/s",
        "window, mask, write: 3 of 4 output files (75%, 10 s)",
    ]


def test_stages_heartbeat_prints_while_a_long_task_sends_no_update(monkeypatch):
    """stderr not a terminal and no update for a while (one task of a long stage still running): the current
    line is printed every `every` seconds of real time anyway, and nothing once the stages are closed."""
    import io
    import re

    from mlmprep.progress import Stages

    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    with Stages(every=0.1) as stages:
        stages.stage("read, clean, tokenize", 4_000_000, "B")
        stages.update(1_000_000, "1/4 shards", tokens=5_000)
        time.sleep(0.75)
    lines = log.getvalue().splitlines()
    assert 4 <= len(lines) <= 9, lines
    assert all(re.fullmatch(r"read, clean, tokenize: 1\.0 of 4\.0 MB \(25%, \d s\), 1/4 shards, 5,000 tokens, "
                            r"[\d,]+ tokens/s", line) for line in lines), lines
    time.sleep(0.3)
    assert log.getvalue().splitlines() == lines


def test_tokenizer_training_reports_the_sample_read(monkeypatch):
    """Off a terminal, training a tokenizer begins with a stage counting the sample's characters as the trainer
    takes them (every text passed on unchanged); the trainer's own stages follow (test_tokenizer_training)."""
    import io

    from mlmprep.builder.tokenizer_file import logged_sample
    from mlmprep.progress import Stages

    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    texts = ["x" * 600_000, "y" * 600_000, "z" * 10]
    with Stages(every=0.0) as bar:
        assert list(logged_sample(iter(texts), bar, 1_200_010)) == texts
        assert (bar.desc, bar.total, bar.done) == ("train tokenizer: read the sample", 1_200_010, 1_200_010)
    assert [line.split(" (")[0] for line in log.getvalue().splitlines()] == [
        "train tokenizer: read the sample: 1,200,000 of 1,200,010 characters",
        "train tokenizer: read the sample: 1,200,010 of 1,200,010 characters"]
