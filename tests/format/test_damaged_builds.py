"""`remask` and `inspect` refuse a damaged build with one line naming the file and what to do (exit 2), and
leave it exactly as it was: a missing or truncated file, a changed tokenizer, and (remask) stored windows
whose bytes differ from the sha256 the manifest records, which would otherwise mask new seeds from them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli.test_build import assert_refused, cli, data_files, leftovers, manifest
from tests.conftest import build_tiny, format_1_copy, int32_copy


@pytest.fixture(scope="module")
def several_files(tmp_path_factory, tiny_corpus, tiny_tokenizer_path) -> Path:
    """A build whose windows/ has several data files; tests copy it before damaging it."""
    out = build_tiny(tmp_path_factory.mktemp("several") / "data", tiny_corpus, tiny_tokenizer_path, rows_per_file=40)
    assert len(list((out / "windows").glob("data-*.arrow"))) >= 3
    return out


def flip(path: Path, at: int) -> None:
    """Invert two bytes of `path` from byte `at` on (a negative `at` counts from the end): same size, other bytes."""
    data = bytearray(path.read_bytes())
    at %= len(data)
    data[at] ^= 0xFF
    data[at + 1] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def second_data_file(split: Path) -> Path:
    return sorted(split.glob("data-*.arrow"))[1]


def changed_tokenizer(d: Path) -> None:
    """The tokenizer with one piece renamed: a valid tokenizer.json, but not the build's."""
    tok = json.loads((d / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    vocab[10] = ["zzzq", vocab[10][1]]
    (d / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")


def snapshot(d: Path) -> dict[str, bytes | None]:
    """Every path under d's parent (hidden staging and lock names included) and every file's bytes."""
    return {str(p.relative_to(d.parent)): p.read_bytes() if p.is_file() else None for p in sorted(d.parent.rglob("*"))}


# damage -> (what it does to a copy of the build, the path the error line names relative to it, words it holds)
REMASK_DAMAGES = {
    "windows-removed": (lambda d: shutil.rmtree(d / "windows"), "windows/data-00000-of-", "missing"),
    "state-json-removed": (lambda d: (d / "windows/state.json").unlink(), "windows/state.json", "missing"),
    "state-json-changed": (lambda d: flip(d / "windows/state.json", 40), "windows/state.json", "sha256"),
    "data-file-removed": (lambda d: second_data_file(d / "windows").unlink(), "windows/data-00001-of-", "missing"),
    "data-file-truncated": (lambda d: truncate(second_data_file(d / "windows")), "windows/data-00001-of-", "bytes"),
    "data-file-flipped": (lambda d: flip(second_data_file(d / "windows"), -600), "windows/data-00001-of-", "sha256"),
    "data-file-header-flipped": (lambda d: flip(second_data_file(d / "windows"), 60), "windows/data-00001-of-", ""),
    "tokenizer-removed": (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json", "missing"),
    "tokenizer-changed": (changed_tokenizer, "tokenizer.json", "sha256"),
}


@pytest.mark.parametrize("damage", REMASK_DAMAGES)
def test_remask_refuses_a_damaged_build_in_one_line_and_changes_nothing(tmp_path, several_files, damage):
    harm, named, words = REMASK_DAMAGES[damage]
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    harm(d)
    before = snapshot(d)
    result = cli("remask", d, "--seeds", "3")
    assert_refused(result.exit_code, result.stderr, f"{d}/{named}", words, f"mlmprep verify {d}", "--force")
    assert result.stdout == ""
    assert snapshot(d) == before  # no seed-2, no manifest change, no staging or lock left
    assert leftovers(d) == ["data"]


def test_remask_of_several_checked_files_equals_a_build_with_more_seeds(tmp_path, several_files, tiny_corpus,
                                                                        tiny_tokenizer_path):
    """The checks refuse no sound build and change no byte: two workers remask several files, each checked."""
    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.remask import remask

    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    assert remask(d, 3, engine=LocalEngine(workers=2)) == ["seed-2"]
    direct = build_tiny(tmp_path / "direct", tiny_corpus, tiny_tokenizer_path, rows_per_file=40, seeds=3)
    assert data_files(d) == data_files(direct)
    assert manifest(d)["splits"] == manifest(direct)["splits"]


def test_a_format_1_build_with_changed_windows_is_not_remasked(tmp_path, tiny_build):
    """Format 1 manifests record each file's bytes and sha256 as format 2 does: remask checks them the same way."""
    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.remask import remask
    from mlmprep.errors import CacheError

    old = tmp_path / "old"
    recorded = format_1_copy(tiny_build, old)
    flip(old / "windows/data-00000-of-00001.arrow", -600)
    with pytest.raises(CacheError, match=r"windows/data-00000-of-00001.arrow: sha256 differs"):
        remask(old, 3, engine=LocalEngine(workers=1))
    assert not (old / "seed-2").exists() and manifest(old) == recorded


INSPECT_DAMAGES = {
    "split-removed": (lambda d: shutil.rmtree(d / "validation"), ["--split", "validation"], "validation/data-00000-of-",
                      "missing"),
    "state-json-removed": (lambda d: (d / "seed-0/state.json").unlink(), [], "seed-0/state.json", "missing"),
    "data-file-removed": (lambda d: second_data_file(d / "seed-0").unlink(), [], "seed-0/data-00001-of-", "missing"),
    "data-file-truncated": (lambda d: truncate(min((d / "windows").glob("data-*"))), ["--split", "windows"],
                            "windows/data-00000-of-", "bytes"),
    "tokenizer-removed": (lambda d: (d / "tokenizer.json").unlink(), [], "tokenizer.json", "missing"),
    "data-file-header-flipped": (lambda d: flip(min((d / "seed-0").glob("data-*")), 60), [], "seed-0/data-00000-of-",
                                 "not a readable Arrow stream"),
    # splits the summary shows but does not examine: each checked against its files all the same
    "another-split-removed": (lambda d: shutil.rmtree(d / "seed-1"), [], "seed-1/data-00000-of-", "missing"),
    "rows-edited": (lambda d: edit_manifest(d, lambda m: m["splits"]["windows"].update(rows=7)), [], "windows:",
                    "its files hold"),
    "split-cut-and-rehashed": (lambda d: cut_split(d, "seed-1", 50), [], "seed-1:", "its files hold 50 rows"),
}


def edit_manifest(d: Path, edit) -> None:
    data = manifest(d)
    edit(data)
    (d / "manifest.json").write_text(json.dumps(data), encoding="utf-8")


def cut_split(d: Path, name: str, rows: int, *, record_rows: bool = False) -> None:
    """Split `name` cut to its first `rows` rows in one data file (the others removed), its manifest entry re-hashed
    to match (and with `record_rows`, its row count too): only the row count, or the other seeds, tell."""
    import hashlib

    import pyarrow as pa

    files = sorted((d / name).glob("data-*.arrow"))
    tables = [pa.ipc.open_stream(pa.BufferReader(f.read_bytes())).read_all() for f in files]
    table = pa.concat_tables(tables).slice(0, rows).combine_chunks()
    for f in files[1:]:
        f.unlink()
    with pa.OSFile(str(files[0]), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    state = json.loads((d / name / "state.json").read_text(encoding="utf-8"))
    state["_data_files"] = [{"filename": files[0].name}]
    (d / name / "state.json").write_text(json.dumps(state), encoding="utf-8")
    data = manifest(d)
    entry = data["splits"][name]
    kept = {files[0].name, "state.json"}
    entry["files"] = [f for f in entry["files"] if f["name"] in kept or not f["name"].startswith("data-")]
    for f in entry["files"]:
        blob = (d / name / f["name"]).read_bytes()
        f.update(bytes=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    if record_rows:
        entry["rows"] = rows
    (d / "manifest.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("damage", ["another-split-removed", "rows-edited", "split-cut-and-rehashed"])
def test_the_html_report_refuses_splits_whose_files_disagree_with_the_manifest(tmp_path, several_files, damage):
    harm, _, named, words = INSPECT_DAMAGES[damage]
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    harm(d)
    result = cli("inspect", d, "--html", tmp_path / "r.html")
    assert_refused(result.exit_code, result.stderr, f"{d}/{named}", words, f"mlmprep verify {d}")
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("rows", [0, 30])
def test_a_windows_split_cut_with_its_rows_recorded_is_found_by_verify(tmp_path, several_files, rows):
    """The windows cut (and re-hashed, its row count recorded): every seed still has a row for each window the
    build made, so the seeds and their windows no longer pair one for one."""
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    seed_rows = manifest(d)["splits"]["seed-0"]["rows"]
    cut_split(d, "windows", rows, record_rows=True)
    result = cli("verify", d)
    assert result.exit_code == 1
    assert f"seed-0: {seed_rows:,} rows, but windows has {rows:,}" in result.stdout + result.stderr


def test_the_report_of_a_seed_cut_short_shows_only_rows_every_seed_has(tmp_path, several_files):
    """A seed split cut to 50 rows, its manifest entry re-hashed and its rows recorded: the page is written, its
    examples taken from rows every seed has; verify still finds the cut."""
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    cut_split(d, "seed-1", 50, record_rows=True)
    result = cli("inspect", d, "--html", tmp_path / "r.html", "--examples", "6")
    assert result.exit_code == 0, result.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    shown = [row["row"] for row in data["rows"]]
    assert len(shown) == 6 and max(shown) == 49 and min(shown) == 0
    assert cli("verify", d).exit_code == 1


@pytest.mark.parametrize("damage", INSPECT_DAMAGES)
def test_inspect_refuses_a_damaged_build_in_one_line(tmp_path, several_files, damage):
    harm, options, named, words = INSPECT_DAMAGES[damage]
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    harm(d)
    before = snapshot(d)
    result = cli("inspect", d, *options)
    assert_refused(result.exit_code, result.stderr, f"{d}/{named}", words, f"mlmprep verify {d}", "--force")
    assert result.stdout == ""
    assert snapshot(d) == before


def test_training_refuses_a_data_file_with_a_damaged_header_in_one_line(tmp_path, several_files):
    """Same size, so the manifest's cheap size check passes: the first epoch's sha256, taken before anything is
    read, finds the damage."""
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    flip(min((d / "seed-0").glob("data-*")), 60)
    result = cli("train", d, "--model", "tiny", "--out", tmp_path / "run", "--max-steps", "1", "--warmup-steps", "0")
    assert_refused(result.exit_code, result.stderr, f"{d}/seed-0/data-00000-of-", "sha256 differs",
                   f"mlmprep verify {d}")
    assert not (tmp_path / "run").exists()


TRAIN_NEEDS = {  # damage -> the path the error names, relative to the build, and words it holds
    "tokenizer-removed": (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json", "missing"),
    "tokenizer-changed": (changed_tokenizer, "tokenizer.json", "sha256 differs"),
    "a-later-seed-removed": (lambda d: shutil.rmtree(d / "seed-1"), "seed-1/data-00000-of-", "missing"),
    "validation-file-truncated": (lambda d: truncate(min((d / "validation").glob("data-*"))), "validation/data-",
                                  "bytes"),
    "validation-file-flipped": (lambda d: flip(min((d / "validation").glob("data-*")), -600), "validation/data-",
                                "sha256 differs"),
    "state-json-names-an-unlisted-file": (lambda d: name_unlisted_file(d, "seed-1"), "seed-1/state.json",
                                          "a data file the manifest does not list"),
}


def name_unlisted_file(d: Path, split: str) -> None:
    """A copy of another seed's first data file beside the split's, which its state.json, at its size, names instead."""
    text = (d / split / "state.json").read_text(encoding="utf-8")
    first = json.loads(text)["_data_files"][0]["filename"]
    shutil.copy(d / "seed-0" / first, d / split / f"X{first[1:]}")
    (d / split / "state.json").write_text(text.replace(f'"{first}"', f'"X{first[1:]}"'), encoding="utf-8")


@pytest.mark.parametrize("damage", TRAIN_NEEDS)
def test_training_checks_every_file_it_needs_before_its_first_step(tmp_path, several_files, damage):
    """A file the run needs only when it saves (the tokenizer) or in a later epoch (seed-1) stops it before its
    first step, in one line, with no RUN written: one step would otherwise train, evaluate and then fail."""
    harm, named, words = TRAIN_NEEDS[damage]
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    harm(d)
    result = cli("train", d, "--model", "tiny", "--out", tmp_path / "run", "--max-steps", "1", "--warmup-steps", "0",
                 "--eval-every", "1")
    assert_refused(result.exit_code, result.stderr, f"{d}/{named}", words)
    assert not (tmp_path / "run").exists()


def overwrite_token(path: Path, value: int) -> int:
    """Write `value` over the first token of row 0's input_ids in an Arrow data file, found by its bytes (the
    row's first 8 tokens as pyarrow reads them, in the column's stored type): the size and the headers stay
    valid. Returns that row's length, so a caller can tell it was found."""
    import numpy as np
    import pyarrow as pa

    with pa.ipc.open_stream(pa.BufferReader(path.read_bytes())) as reader:
        column = reader.read_next_batch().column("input_ids")
        dtype = np.dtype(column.type.value_type.to_pandas_dtype()).newbyteorder("<")
        row = np.asarray(column[0].as_py(), dtype=dtype)
    data = bytearray(path.read_bytes())
    at = bytes(data).index(row[:8].tobytes())
    data[at : at + dtype.itemsize] = np.array([value], dtype=dtype).tobytes()
    path.write_bytes(bytes(data))
    return len(row)


@pytest.mark.parametrize("value, int32", [(60_000, False), (10**6, True), (-7, True)])
def test_training_refuses_token_ids_outside_the_vocabulary_in_one_line(tmp_path, several_files, value, int32):
    """A data file of the right size with valid headers but a token id no tokenizer gave, its manifest entry
    re-hashed (a faulty build, which every sha256 check passes): the run stops in one line naming the split and the
    row, where the model's embedding would raise (or, on CUDA, assert). A uint16 column holds ids up to 65,535; an
    int32 one (format 2) any."""
    import hashlib

    d = tmp_path / "data"
    if int32:
        int32_copy(several_files, d)
    else:
        shutil.copytree(several_files, d)
    path = min((d / "seed-0").glob("data-*"))
    assert overwrite_token(path, value) > 8
    edit_manifest(d, lambda m: next(f for f in m["splits"]["seed-0"]["files"] if f["name"] == path.name).update(
        sha256=hashlib.sha256(path.read_bytes()).hexdigest()))
    result = cli("train", d, "--model", "tiny", "--out", tmp_path / "run", "--epochs", "1", "--warmup-steps", "0",
                 "--log-every", "1000", "--eval-every", "0")
    assert result.exit_code == 2, result.stderr
    last = result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert last.startswith(f"error: {d}/seed-0: row 0 holds token id {value}, outside the tokenizer's ")
    assert f"mlmprep verify {d}" in last


def test_a_remask_stopped_while_publishing_takes_back_the_splits_it_published(tmp_path, several_files, monkeypatch):
    """The new splits count once the manifest lists them: a failure after the first is published (here a Ctrl-C
    at the second) leaves the build as it was, with no unlisted seed-k directory."""
    import mlmprep.builder.remask
    from mlmprep.builder.engine.local import LocalEngine
    from mlmprep.builder.remask import remask

    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    before, publish, calls = snapshot(d), mlmprep.builder.remask.publish, []

    def publish_then_stop(stage, dest):
        calls.append(dest.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        publish(stage, dest)

    monkeypatch.setattr(mlmprep.builder.remask, "publish", publish_then_stop)
    with pytest.raises(KeyboardInterrupt):
        remask(d, 4, engine=LocalEngine(workers=1))
    assert calls == ["seed-2", "seed-3"]
    assert snapshot(d) == before and leftovers(d) == ["data"]


@pytest.mark.parametrize("options, words", [(["--seeds", "100000000000000000000"], "--seeds must be at most 10,000"),
                                            (["--seeds", "1", "--threads", "-1"], "--threads must be at least 0")])
def test_remask_refuses_a_huge_seed_count_and_negative_threads_with_nothing_to_add(tmp_path, several_files, options,
                                                                                     words):
    d = tmp_path / "data"
    shutil.copytree(several_files, d)
    before = snapshot(d)
    result = cli("remask", d, *options)
    assert_refused(result.exit_code, result.stderr, words)
    assert snapshot(d) == before and leftovers(d) == ["data"]
