"""Output paths nothing can be written under are refused in one line before any work (every command that
writes), `inspect` shows the stored windows, `tokenizer train --out` takes a directory, and the vocabulary a
trained tokenizer reaches is printed, with options that a given --tokenizer makes meaningless refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.test_build import assert_refused, cli, leftovers, run_many

CAN_PROBE = os.path.isdir("/proc") and os.path.isdir("/sys")

# case -> (arguments, words the error line must contain). Paths are relative to the cases' directory, which
# holds tiny.txt and an empty file empty.txt; missing.txt does not exist, so a case naming it shows that the
# output path is checked before the corpus is read (and so before any tokenizer training).
OUT_REFUSALS = {
    "build-proc": (["build", "tiny.txt", "--out", "/proc/x"], ("--out /proc/x", "cannot create files in /proc")),
    "build-sys": (["build", "tiny.txt", "--out", "/sys/x"], ("--out /sys/x", "cannot create files in /sys")),
    "build-under-a-file": (["build", "tiny.txt", "--out", "empty.txt/sub"],
                           ("--out empty.txt/sub", "empty.txt is a file")),
    "build-a-file": (["build", "tiny.txt", "--out", "empty.txt"], ("--out empty.txt", "not a directory")),
    "build-before-the-corpus": (["build", "missing.txt", "--out", "/proc/x"], ("--out /proc/x",)),
    "tokenizer-proc": (["tokenizer", "train", "missing.txt", "--out", "/proc/tok.json"],
                       ("--out /proc/tok.json", "/proc")),
    "tokenizer-under-a-file": (
        ["tokenizer", "train", "missing.txt", "--out", "empty.txt/tok.json"],
        ("--out empty.txt/tok.json", "empty.txt is a file")
    ),
    "train-proc": (["train", "missing-data", "--out", "/proc/run"], ("--out /proc/run", "/proc")),
    "train-under-a-file": (["train", "missing-data", "--out", "empty.txt/run"],
                           ("--out empty.txt/run", "empty.txt is a file")),
    "compare-proc": (["compare-methods", "missing.txt", "--quick", "--out", "/proc/cmp"], ("--out /proc/cmp", "/proc")),
    "compare-a-file": (["compare-methods", "missing.txt", "--quick", "--out", "empty.txt"],
                       ("--out empty.txt", "not a directory")),
}


@pytest.fixture(scope="module")
def out_refusals(tmp_path_factory, tiny_corpus) -> tuple[dict, Path]:
    d = tmp_path_factory.mktemp("out-refusals")
    (d / "tiny.txt").write_bytes(tiny_corpus.read_bytes())
    (d / "empty.txt").write_bytes(b"")
    return run_many({case: args for case, (args, _) in OUT_REFUSALS.items()}, cwd=d), d


@pytest.mark.skipif(not CAN_PROBE, reason="needs /proc and /sys")
@pytest.mark.parametrize("case", OUT_REFUSALS)
def test_an_output_path_nothing_can_be_written_under_is_refused_before_any_work(out_refusals, case):
    results, d = out_refusals
    result = results[case]
    assert_refused(result.returncode, result.stderr, *OUT_REFUSALS[case][1])
    assert result.stdout == ""
    assert sorted(p.name for p in d.iterdir()) == ["empty.txt", "tiny.txt"]  # nothing left, empty.txt untouched
    assert (d / "empty.txt").read_bytes() == b""


@pytest.mark.parametrize("split", ["windows", "validation-windows"])
def test_inspect_shows_the_stored_windows(tiny_build, split):
    result = cli("inspect", tiny_build, "--split", split, "--examples", "2")
    assert result.exit_code == 0, result.stderr
    assert f"--- {split} row 0 (" in result.stdout and f"--- {split} row 1 (" in result.stdout
    shown = [line for line in result.stdout.splitlines() if line.startswith("tokens:  ")]
    assert len(shown) == 2 and all(len(line) > len("tokens:  ") for line in shown)


def test_tokenizer_train_into_a_new_directory_writes_tokenizer_json_there(tmp_path, tiny_corpus):
    out = tmp_path / "newdir"
    result = cli("tokenizer", "train", tiny_corpus, "--out", f"{out}/", "--vocab-size", "400")
    assert result.exit_code == 0, result.stderr
    assert out.is_dir() and sorted(os.listdir(out)) == ["tokenizer.json"]
    assert f"wrote {out / 'tokenizer.json'}" in result.stdout


def test_tokenizer_train_into_an_existing_directory_needs_force_and_keeps_the_rest(tmp_path, tiny_corpus):
    out = tmp_path / "tokdir"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    first = cli("tokenizer", "train", tiny_corpus, "--out", out, "--vocab-size", "400")
    assert first.exit_code == 0, first.stderr
    again = cli("tokenizer", "train", tiny_corpus, "--out", out, "--vocab-size", "400")
    assert_refused(again.exit_code, again.stderr, f"--out {out / 'tokenizer.json'}", "--force")
    forced = cli("tokenizer", "train", tiny_corpus, "--out", out, "--vocab-size", "400", "--force")
    assert forced.exit_code == 0, forced.stderr
    assert sorted(os.listdir(out)) == ["notes.txt", "tokenizer.json"]  # no tokenizer.json.tmp, notes kept
    assert sorted(os.listdir(tmp_path)) == ["tokdir"]  # no stray tokdir.tmp beside it


def test_tokenizer_train_says_the_vocabulary_reached_and_when_it_falls_short(tmp_path, tiny_corpus):
    from mlmprep.tokenizer.load import load_tokenizer

    full = cli("tokenizer", "train", tiny_corpus, "--out", tmp_path / "a.json", "--vocab-size", "200")
    assert full.exit_code == 0 and "vocabulary 200" in full.stdout and "short" not in full.stdout
    short = cli("tokenizer", "train", tiny_corpus, "--out", tmp_path / "b.json", "--vocab-size", "5000")
    reached = load_tokenizer(tmp_path / "b.json").get_vocab_size()
    assert reached < 5000
    assert f"vocabulary {reached:,}, short of --vocab-size 5,000" in short.stdout


def test_the_build_summary_says_the_vocabulary_reached(tmp_path, tiny_corpus):
    result = cli("build", tiny_corpus, "--out", tmp_path / "out", "--vocab-size", "5000", "--input-length", "32",
                 "--seeds", "1")
    assert result.exit_code == 0, result.stderr
    reached = json.loads((tmp_path / "out" / "manifest.json").read_text())["tokenizer"]["vocab_size"]
    expected = f"tokenizer: Unigram trained on the corpus, vocabulary {reached:,}, short of --vocab-size 5,000"
    assert expected in result.stdout


@pytest.mark.parametrize("where", ["command line", "config file"])
def test_vocab_size_with_a_given_tokenizer_is_refused(tmp_path, tiny_corpus, tok, where):
    out = tmp_path / "out"
    if where == "config file":
        (tmp_path / "opts.json").write_text('{"vocab_size": 500}', encoding="utf-8")
        more = ["--config", tmp_path / "opts.json"]
    else:
        more = ["--vocab-size", "500"]
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", *more)
    assert_refused(result.exit_code, result.stderr, "--vocab-size", f"--tokenizer {tok}")
    assert leftovers(out) == []


@pytest.mark.parametrize(
    "more, words",
    [
        (["--whole-word"], ("--whole-word applies to --objective mlm only", "use --objective mlm")),
        (["--mlm-probability", "0.4"], ("--mlm-probability applies to --objective mlm only",)),
        (["--objective", "mlm", "--noise-density", "0.2"], ("--noise-density applies to --objective span only",)),
        (["--objective", "mlm", "--mean-span-length", "2"], ("--mean-span-length applies to --objective span only",)),
        (["--objective", "mlm", "--random-roll"], ("--random-roll applies to --objective span only",)),
        (["--ray-address", "127.0.0.1:6379"], ("--ray-address applies to --engine ray only", "use --engine ray")),
        (["--method", "text", "--pack", "doc"], ("--pack applies to --method tokens only", "use --method tokens")),
    ],
)
def test_an_option_the_objective_or_engine_ignores_is_refused(tmp_path, tiny_corpus, tok, more, words):
    out = tmp_path / "out"
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", *more)
    assert_refused(result.exit_code, result.stderr, *words)
    assert leftovers(out) == []


def test_an_option_the_objective_ignores_is_refused_from_a_config_file_too(tmp_path, tiny_corpus, tok):
    (tmp_path / "opts.yaml").write_text("whole-word: true\n", encoding="utf-8")
    out = tmp_path / "out"
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, "--config", tmp_path / "opts.yaml")
    assert_refused(result.exit_code, result.stderr, "--whole-word applies to --objective mlm only")
    assert leftovers(out) == []


def test_an_input_length_exact_windows_cannot_reach_is_refused_before_training_a_tokenizer(tmp_path, tiny_corpus, tok):
    """At --noise-density 0.5 and span length 1, windows of 99 tokens give 99 encoder tokens and of 100 give 101:
    token windows would silently be one short of --input-length. Text segments and --pack doc rows are ragged,
    so there it stays a maximum."""
    out = tmp_path / "out"
    span = ["--input-length", "100", "--noise-density", "0.5", "--mean-span-length", "1"]
    result = cli("build", tiny_corpus, "--out", out, *span)  # no --tokenizer: refused before training one
    assert_refused(result.exit_code, result.stderr, "--input-length 100 cannot be met exactly",
                   "use --input-length 99 or 101")
    assert leftovers(out) == []
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, *span, "--pack", "doc", "--seeds", "1")
    assert result.exit_code == 0, result.stderr


def test_options_the_objective_ignores_are_accepted_at_their_defaults():
    from mlmprep.config import BuildConfig
    from mlmprep.config_files import make_config

    span = make_config(BuildConfig, {"whole_word": False, "mlm_probability": 0.15, "engine": "local"})
    mlm = make_config(BuildConfig, {"objective": "mlm", "whole_word": True, "mlm_probability": 0.3,
                                    "noise_density": 0.15, "mean_span_length": 3, "random_roll": False})
    assert span.identity() == BuildConfig().identity() and mlm.whole_word


@pytest.mark.parametrize("name", ["c.yaml", "c.json"])
def test_a_config_file_that_is_not_utf8_is_refused_in_one_line(tmp_path, tiny_corpus, tok, name):
    (tmp_path / name).write_bytes(b"# r\xe9sum\xe9\nseeds: 2\n" if name == "c.yaml" else b'{"seeds": 2, "x": "\xe9"}')
    out = tmp_path / "out"
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, "--config", tmp_path / name)
    assert_refused(result.exit_code, result.stderr, f"--config {tmp_path / name}", "UTF-8")
    assert leftovers(out) == []


def write_bad_string_column(path: Path) -> Path:
    """A .parquet file whose string column `text` holds a value that is not UTF-8 (row 2)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.array([b"good text here", b"bad \xff bytes"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": text}), path)
    return path


def test_invalid_utf8_in_a_string_column_with_decode_error_fail_is_one_line(tmp_path, tok):
    corpus = write_bad_string_column(tmp_path / "badstr.parquet")
    out = tmp_path / "out"
    result = cli("build", corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "1",
                 "--on-decode-error", "fail")
    assert_refused(result.exit_code, result.stderr, "badstr.parquet row 2: invalid UTF-8", "--on-decode-error")
    assert leftovers(out) == []


def test_tokenizer_train_replaces_invalid_utf8_in_a_string_column(tmp_path):
    corpus = write_bad_string_column(tmp_path / "badstr.parquet")
    result = cli("tokenizer", "train", corpus, "--vocab-size", "1000", "--out", tmp_path / "tk.json")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "tk.json").is_file()


@pytest.mark.parametrize("command", ["tokenizer-train", "build"])
def test_a_vocab_size_below_the_corpus_characters_is_one_line_naming_the_size_needed(tmp_path, tiny_corpus, command):
    chars = len(set(tiny_corpus.read_text(encoding="utf-8").replace("\n", "")))
    out = tmp_path / "out"
    args = (["tokenizer", "train", tiny_corpus, "--out", out] if command == "tokenizer-train"
            else ["build", tiny_corpus, "--input-length", "64", "--seeds", "1", "--out", out])
    result = cli(*args, "--vocab-size", "106")
    assert_refused(result.exit_code, result.stderr, "--vocab-size 106", "distinct characters", "raise --vocab-size")
    assert leftovers(out) == []
    assert not [p for p in tmp_path.iterdir()]
    needed = int(result.stderr.rsplit("at least ", 1)[1].strip())
    assert needed >= 100 + chars - 1
    assert cli(*args[:-1], tmp_path / "ok", "--vocab-size", str(needed)).exit_code == 0


def test_a_seed_count_no_disk_could_hold_is_refused_before_any_work(tmp_path, tiny_corpus):
    """Each seed is a whole masked copy of the training data: 10^20 of them hung the build (a typo's cost)."""
    result = cli("build", tiny_corpus, "--out", tmp_path / "out", "--seeds", "100000000000000000000")
    assert_refused(result.exit_code, result.stderr, "--seeds must be at most 10,000, got 100,000,000,000,000,000,000")
    assert leftovers(tmp_path / "out") == []


@pytest.mark.parametrize("sample", ["0", "-1"])
def test_verify_sample_of_no_rows_is_refused(tiny_build, sample):
    """--sample 0 would check no row and say ok, and a negative one makes no sense: both are refused in one line."""
    result = cli("verify", tiny_build, "--sample", sample)
    assert_refused(result.exit_code, result.stderr, f"--sample must be at least 1, got {sample}")
    assert result.stdout == ""


# a command line click cannot parse -> words its one error line must contain
USAGE_MISTAKES = {
    ("build", "--seeds", "abc"): ("'--seeds'", "integer", "see mlmprep build --help"),
    ("build", "--no-such"): ("no such option: --no-such", "see mlmprep build --help"),
    ("build", "--objective", "nope"): ("'--objective'", "'nope'", "see mlmprep build --help"),
    ("remask", "somewhere"): ("missing option '--seeds'", "see mlmprep remask --help"),
    ("inspect",): ("missing argument", "see mlmprep inspect --help"),
    ("train", "--lr"): ("option '--lr' requires an argument",),
    ("tokenizer", "train", "--vocab-size", "x"): ("'--vocab-size'", "see mlmprep tokenizer train --help"),
    ("nosuch",): ("no such command 'nosuch'", "see mlmprep --help"),
}


@pytest.mark.parametrize("args", USAGE_MISTAKES, ids=" ".join)
def test_a_command_line_mistake_is_one_error_line_like_every_refusal(args):
    """Click printed usage, a hint and `Error: ...` over four lines."""
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, list(args), prog_name="mlmprep")
    assert_refused(result.exit_code, result.stderr, *USAGE_MISTAKES[args])


def test_mlmprep_alone_still_shows_its_help():
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, [], prog_name="mlmprep")
    assert "Usage: mlmprep [OPTIONS] COMMAND" in result.output and "build" in result.output


def test_a_line_break_in_a_file_name_keeps_the_error_on_one_line(tmp_path, tok):
    """The error quotes the name; its line break is shown escaped, so stderr stays one `error:` line."""
    from tests.cli.test_build import assert_refused, cli

    result = cli("build", tmp_path / "no\nsuch.txt", "--out", tmp_path / "out", "--tokenizer", tok)
    assert_refused(result.exit_code, result.stderr, "no\\nsuch.txt: no such file")
    assert not (tmp_path / "out").exists()


def test_workers_far_beyond_the_cores_are_refused_on_the_local_engine_only(tmp_path, tiny_corpus, tok):
    """--workers 100000 would start that many tokenizer processes; Ray's --workers counts tasks in flight."""
    import os

    from mlmprep.config import BuildConfig
    from tests.cli.test_build import assert_refused, cli

    limit = max(64, 8 * len(os.sched_getaffinity(0)))
    result = cli("build", tiny_corpus, "--out", tmp_path / "out", "--tokenizer", tok, "--workers", str(limit + 1))
    assert_refused(result.exit_code, result.stderr, f"--workers must be at most {limit}")
    assert not (tmp_path / "out").exists()
    assert BuildConfig(workers=limit).workers == limit
    assert BuildConfig(workers=limit + 1, engine="ray", out=str(tmp_path / "ray")).workers == limit + 1


@pytest.mark.parametrize("command", [["inspect"], ["verify"], ["remask", "--seeds", "6"], ["train", "--out", "run"]])
@pytest.mark.parametrize("target", ["nothere", "afile"])
def test_a_missing_build_directory_is_named_as_such(tmp_path, monkeypatch, command, target):
    """Every command that reads a build says plainly that its directory does not exist (or is a file), rather
    than that a build lacks its manifest; nothing is written (train's --out included)."""
    from tests.cli.test_build import assert_refused, cli

    monkeypatch.chdir(tmp_path)
    Path("afile").write_text("not a build")
    result = cli(command[0], target, *command[1:])
    what = "no such directory" if target == "nothere" else "not a directory"
    assert_refused(result.exit_code, result.stderr, f"{target}: {what}; give the directory mlmprep build wrote")
    assert sorted(os.listdir()) == ["afile"]
