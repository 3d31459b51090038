"""The test S3 server and its fault proxy behave as the storage tests assume."""

from __future__ import annotations

import time

import pytest

from tests.s3server import Fault

pytest.importorskip("s3fs")
pytest.importorskip("moto")


def test_objects_round_trip(s3):
    fs = s3.fs()
    bucket = s3.bucket()
    fs.pipe(f"{bucket}/a/b.bin", b"x" * 100_000)
    assert fs.cat(f"{bucket}/a/b.bin") == b"x" * 100_000
    assert fs.ls(f"{bucket}/a") == [f"{bucket}/a/b.bin"]


def _proxy_fs(s3, proxy, retries=5):
    import s3fs

    return s3fs.S3FileSystem(key="testing", secret="testing", token="testing", skip_instance_cache=True,
                             endpoint_url=proxy.endpoint, config_kwargs={"retries": {"max_attempts": retries}})


def test_proxy_injects_faults_a_retrying_client_survives(s3, s3_proxy):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/obj", bytes(range(256)) * 4000)
    gets = s3_proxy.add(Fault(lambda method, path: method == "GET" and "/obj" in path, kind="503", times=2))
    drops = s3_proxy.add(Fault(lambda method, path: method == "GET" and "/obj" in path, kind="drop", times=1))
    assert _proxy_fs(s3, s3_proxy).cat(f"{bucket}/obj") == bytes(range(256)) * 4000
    assert (gets.hits, drops.hits) == (2, 1)
    assert sum(1 for m, p in s3_proxy.requests if m == "GET" and "/obj" in p) >= 4


def test_proxy_faults_reach_a_client_that_does_not_retry(s3, s3_proxy):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/obj", b"y" * 1000)
    s3_proxy.add(Fault(lambda method, path: "/obj" in path, kind="503", times=10))
    with pytest.raises(OSError):
        _proxy_fs(s3, s3_proxy, retries=1).cat(f"{bucket}/obj")


def test_proxy_throttles_responses(s3, s3_proxy):
    bucket = s3.bucket()
    s3.fs().pipe(f"{bucket}/big", b"z" * 400_000)
    s3_proxy.bandwidth = 1_000_000
    start = time.monotonic()
    assert len(_proxy_fs(s3, s3_proxy).cat(f"{bucket}/big")) == 400_000
    assert time.monotonic() - start >= 0.35
