"""A build's Destination: a local directory and an object-store prefix (moto's S3 server, tests/s3server.py)
answer the build's questions alike: whether a build is there, what it holds, one writer at a time."""

from __future__ import annotations

import json
import shutil

import pytest

from mlmprep.builder.destination import destination
from mlmprep.errors import CacheError
from tests.format.test_write import GIVEN


@pytest.fixture(params=["local", "s3"])
def out(request, tmp_path) -> str:
    """An empty output of each kind."""
    if request.param == "local":
        return str(tmp_path / "out")
    pytest.importorskip("s3fs")
    pytest.importorskip("moto")
    return f"s3://{request.getfixturevalue('s3').bucket()}/out"


def test_a_committed_build_is_there_and_given_back_one_writer_at_a_time(out, tmp_path, tiny_build):
    manifest = json.loads((tiny_build / "manifest.json").read_text())
    identity, fingerprint = manifest["config"], manifest["corpus"]["fingerprint"]
    place = destination(out, {})
    assert not place.has_build()
    with place.lock():
        with pytest.raises(CacheError, match="another mlmprep build is writing it"), destination(out, {}).lock():
            pass
        assert place.existing(identity, fingerprint, **GIVEN, force=False) is None
        (tmp_path / "scratch").mkdir()
        with place.staging(str(tmp_path / "scratch")) as stage:
            shutil.copytree(tiny_build, stage, dirs_exist_ok=True)
            place.commit(stage)
    again = destination(out, {})
    assert again.has_build()
    with again.lock():
        assert again.existing(identity, fingerprint, **GIVEN, force=False).to_json() == manifest
        assert again.existing(identity, fingerprint, **GIVEN, force=True) is None  # --force rebuilds
        with pytest.raises(CacheError, match="made differently"):
            again.existing({**identity, "seed": identity["seed"] + 1}, fingerprint, **GIVEN, force=False)
