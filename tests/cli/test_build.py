"""`mlmprep build` from the command line: bad input is refused in one line with nothing left behind;
good builds are incremental, never replace what is not theirs, and are byte-for-byte reproducible.

Refusals run as real processes (exit code, stderr, no traceback); builds that succeed run in-process
through Typer's CliRunner, which is faster, except where threads or a fresh process are the point.
The helpers here (cli, run_cli, run_many, leftovers, assert_refused, data_files, ...) are shared by the tests of
every folder that drive the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mlmprep
from tests.conftest import tiny_documents

# ----------------------------------------------------------------------------------------------- helpers

PARALLEL_RUNS = 4  # processes at once in run_many: imports wait on disk as much as on the 2 cores


def cli_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "mlmprep", *map(str, args)]


def cli_env() -> dict[str, str]:
    """This environment without RAYON_NUM_THREADS, which an in-process build sets and a child would inherit."""
    return {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}


def run_cli(*args: str | Path, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m mlmprep ARGS` as a real process."""
    return subprocess.run(cli_command(*args), cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout)


def run_many(commands: dict[str, list], cwd: Path | None = None) -> dict[str, subprocess.CompletedProcess]:
    """run_cli for each named command line, a few at a time (start-up is most of each one's time)."""
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        futures = {name: pool.submit(run_cli, *args, cwd=cwd) for name, args in commands.items()}
        return {name: f.result() for name, f in futures.items()}


def cli(*args: str | Path):
    """The CLI in-process; result.exit_code, .stdout and .stderr (a traceback would be result.exception)."""
    from mlmprep.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def leftovers(out: Path) -> list[str]:
    """Which of DIR, .DIR.partial and .DIR.lock exist."""
    names = [out.name, f".{out.name}.partial", f".{out.name}.lock"]
    return [name for name in names if os.path.lexists(out.parent / name)]


def data_files(build: Path) -> dict[str, bytes]:
    """Every file of a build but manifest.json (data, split metadata, tokenizer.json), by relative path."""
    return {
        str(p.relative_to(build)): p.read_bytes()
        for p in sorted(build.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def manifest(build: Path) -> dict:
    return json.loads((build / "manifest.json").read_text(encoding="utf-8"))


def assert_refused(code: int, stderr: str, *mentions: str) -> None:
    """Exit 2, and stderr is one `error:` line (no traceback, no notes) naming what is wrong and the fix."""
    assert code == 2, stderr
    (line,) = stderr.splitlines()
    assert line.startswith("error: ")
    for words in mentions:
        assert words in line


def build_args(corpus: Path, out: Path, tok: str, *more: str) -> list[str]:
    """A fast build: the tiny tokenizer, 32-token inputs, 2 seeds."""
    return ["build", str(corpus), "--out", str(out), "--tokenizer", tok, "--input-length", "32", "--seeds", "2", *more]


# ----------------------------------------------------------------------------------------------- bad input


def write_bad_inputs(d: Path, tiny_corpus: Path) -> None:
    """The files the refusal cases read, in `d`."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    (d / "tiny.txt").write_bytes(tiny_corpus.read_bytes())
    (d / "empty-dir").mkdir()
    (d / "notext.jsonl").write_text('{"body": "a record without the text field"}\n', encoding="utf-8")
    good = "\n".join(tiny_documents(40))
    (d / "bad.txt").write_bytes(f"{good}\n".encode() + b"an undecodable \xff\xfe line\n" + f"{good}\n".encode())
    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2}
    vocab.update((w, len(vocab) + i) for i, w in enumerate(sorted(set(good.split()))))
    no_sentinels = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    no_sentinels.pre_tokenizer = pre_tokenizers.Whitespace()
    no_sentinels.save(str(d / "no-sentinels.json"))
    (d / "unknown-key.json").write_text('{"input_length": 32, "input_lenght": 64}\n', encoding="utf-8")
    (d / "bad-type.yaml").write_text("input_length: 'long'\n", encoding="utf-8")


# case -> (corpus, more options, words the error line must contain); paths are relative to write_bad_inputs' d
REFUSALS = {
    "missing-path": ("missing.txt", [], ("missing.txt", "no such file")),
    "empty-corpus": ("empty-dir", [], ("empty-dir", "no corpus files")),
    "no-text-column": ("notext.jsonl", [],
                       ("notext.jsonl", "none of its 1 records has a 'text' field", "--text-column")),
    "decode-fail": ("bad.txt", ["--on-decode-error", "fail"], ("bad.txt line 41", "--on-decode-error replace")),
    "noise-0": ("tiny.txt", ["--noise-density", "0"], ("--noise-density", "(0, 1)")),
    "noise-1": ("tiny.txt", ["--noise-density", "1"], ("--noise-density", "(0, 1)")),
    "noise-1.5": ("tiny.txt", ["--noise-density", "1.5"], ("--noise-density", "(0, 1)")),
    "shard-bytes-1": ("tiny.txt", ["--shard-bytes", "1"], ("--shard-bytes", "at least 1024", "got 1")),
    "mean-span-0.5": ("tiny.txt", ["--mean-span-length", "0.5"], ("--mean-span-length", ">= 1")),
    "input-length-2": ("tiny.txt", ["--input-length", "2"], ("--input-length 2", "at least 3")),
    "spans-over-sentinels": ("tiny.txt", ["--input-length", "2048"], ("100 sentinels", "lower --input-length")),
    "no-sentinels": ("tiny.txt", ["--tokenizer", "no-sentinels.json"], ("no <extra_id_k> sentinel", "--objective mlm")),
    "config-unknown-key": (
        "tiny.txt", ["--config", "unknown-key.json"], ("unknown-key.json", "'input_lenght'", "valid options")
    ),
    "config-bad-type": ("tiny.txt", ["--config", "bad-type.yaml"], ("--input-length", "whole number", "'long'")),
}


@pytest.fixture(scope="module")
def refusals(tmp_path_factory, tok, tiny_corpus) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every refusal case, run once as a real process in the cases' directory: case -> (result, its --out)."""
    d = tmp_path_factory.mktemp("bad-input")
    write_bad_inputs(d, tiny_corpus)
    commands = {case: build_args(Path(src), Path(f"out-{case}"), tok, *more)
                for case, (src, more, _) in REFUSALS.items()}
    results = run_many(commands, cwd=d)
    return {case: (results[case], d / f"out-{case}") for case in REFUSALS}


@pytest.mark.parametrize("case", REFUSALS)
def test_bad_input_is_refused_in_one_line_leaving_nothing(refusals, case):
    result, out = refusals[case]
    assert_refused(result.returncode, result.stderr, *REFUSALS[case][2])
    assert result.stdout == "" and leftovers(out) == []  # no DIR, no .DIR.partial, no .DIR.lock


# ----------------------------------------------------------------------------------------------- config files


@pytest.mark.parametrize(
    "name, text",
    [
        ("opts.json", '{"input-length": 64, "seeds": 3, "seed": 5, "noise_density": 0.2, "mean_span_length": 2}'),
        ("opts.yaml", "input-length: 64\nseeds: 3\nseed: 5\nnoise_density: 0.2\nmean-span-length: 2\n"),
    ],
)
def test_config_file_fills_options_and_the_command_line_wins(tmp_path, tok, tiny_corpus, name, text):
    (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    result = cli(*build_args(tiny_corpus, out, tok, "--config", tmp_path / name, "--seed", "7"))  # 32, 2 seeds
    assert result.exit_code == 0, result.stderr
    config = manifest(out)["config"]
    assert (config["noise_density"], config["mean_span_length"]) == (0.2, 2.0)  # from the file
    assert (config["input_length"], config["seeds"], config["seed"]) == (32, 2, 7)  # the command line wins
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("seed-")) == ["seed-0", "seed-1"]


# ----------------------------------------------------------------------------------------------- re-running


def test_the_early_reading_of_build_arguments_knows_which_options_take_no_value():
    """start_workers_before_parsing reads `mlmprep build` arguments without typer: its flags are the command's,
    and every other option of the command takes exactly one value."""
    import typer.main

    from mlmprep.cli import app
    from mlmprep.cli.build import FLAGS

    options = [p for p in typer.main.get_command(app).commands["build"].params if p.opts[0].startswith("--")]
    assert FLAGS == {name for p in options if p.is_flag for name in [*p.opts, *p.secondary_opts]}
    assert all(p.nargs == 1 for p in options if not p.is_flag)


@pytest.mark.parametrize("args, expected", [
    (["a.txt", "b/", "--tokenizer", "t.json", "--workers=2"],
     (["a.txt", "b/"], {"--tokenizer": "t.json", "--workers": "2"})),
    (["--force", "a.txt", "--nfkc", "--out", "o"], (["a.txt"], {"--force": "", "--nfkc": "", "--out": "o"})),
    (["--seeds", "4"], ([], {"--seeds": "4"})),  # an option's value is not a corpus
    (["--", "--odd-name.txt"], (["--odd-name.txt"], {})),
    (["a.txt", "--out"], None),  # a value missing: left to the parse
    (["-x", "a.txt"], None),  # a short option (build has none)
])
def test_build_arguments_read_before_parsing(args, expected):
    from mlmprep.cli.build import scan_build_args

    assert scan_build_args(args) == expected


def test_the_early_start_acts_only_on_a_command_line_it_is_sure_of(tmp_path, monkeypatch, tiny_corpus):
    from mlmprep.cli.build import start_workers_before_parsing

    calls: list = []
    monkeypatch.setattr("mlmprep.builder.engine.local.LocalEngine.prestart", lambda *args: calls.append(args))
    monkeypatch.setattr("mlmprep.cli.build.STARTED_EARLY", False)

    def started(*args) -> list:
        calls.clear()
        start_workers_before_parsing([str(a) for a in args])
        return list(calls)

    from mlmprep.cli import build

    out = tmp_path / "out"
    assert started(tiny_corpus, "--config", tmp_path / "c.yaml") == []  # options from a file: after the parse
    assert not build.STARTED_EARLY  # so the build command starts the workers itself
    [(engine, size, shard_bytes, module, tok)] = started(tiny_corpus, "--tokenizer", "t.json", "--workers", "3",
                                                          "--shard-bytes", "5000", "--out", out)
    assert (engine.workers, size, shard_bytes, module, tok) == (
        3, tiny_corpus.stat().st_size, 5000, "mlmprep.builder.pipeline", "t.json")
    assert build.STARTED_EARLY  # the build command need not read the corpus's sizes again
    assert started("--seeds", "4") == []  # the built-in sample
    assert started(tiny_corpus, "--workers", "two") == [] and started(tiny_corpus, "--workers", "-1") == []
    out.mkdir()
    (out / "manifest.json").write_text("{}")
    assert started(tiny_corpus, "--out", out) == []  # it may be up to date
    assert len(started(tiny_corpus, "--out", out, "--force")) == 1


def mtimes(build: Path) -> dict[str, int]:
    return {str(p.relative_to(build)): p.stat().st_mtime_ns for p in [build, *build.rglob("*")]}


def test_same_command_twice_is_up_to_date_and_changes_nothing(tmp_path, tok, tiny_corpus):
    out = tmp_path / "out"
    first = cli(*build_args(tiny_corpus, out, tok))
    assert first.exit_code == 0 and "seed-1" in first.stdout
    before = mtimes(out)
    again = cli(*build_args(tiny_corpus, out, tok, "--threads", "1"))  # speed-only options do not matter
    assert again.exit_code == 0
    assert again.stdout.strip() == f"{out}: up to date (same corpus and options); --force rebuilds it"
    assert mtimes(out) == before and leftovers(out) == ["out"]


def test_up_to_date_names_an_older_mlmprep_that_wrote_the_build(tmp_path, tok, tiny_corpus):
    """Data written by another version is kept (its options and corpus are the same), but the line says which
    version wrote it, since a fix in between may change what a rebuild would write."""
    out = tmp_path / "out"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "mlmprep_version": "0.0.1"}))
    again = cli(*build_args(tiny_corpus, out, tok))
    assert again.exit_code == 0
    assert again.stdout.strip() == (f"{out}: up to date (same corpus and options, written by mlmprep 0.0.1, "
                                    f"this is {mlmprep.__version__}); --force rebuilds it")


def test_other_options_into_the_same_out_need_force(tmp_path, tok, tiny_corpus):
    out = tmp_path / "out"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    before, old_bytes = mtimes(out), data_files(out)
    refused = cli(*build_args(tiny_corpus, out, tok, "--seed", "1"))
    assert_refused(refused.exit_code, refused.stderr, "--force", "seed: 0 -> 1")
    assert mtimes(out) == before and leftovers(out) == ["out"]  # the old build is untouched
    forced = cli(*build_args(tiny_corpus, out, tok, "--seed", "1", "--force"))
    assert forced.exit_code == 0 and manifest(out)["config"]["seed"] == 1
    assert data_files(out)["seed-0/data-00000-of-00001.arrow"] != old_bytes["seed-0/data-00000-of-00001.arrow"]
    assert leftovers(out) == ["out"]


@pytest.mark.parametrize("force", [False, True])
def test_a_directory_that_is_not_a_build_is_never_replaced(tmp_path, tok, tiny_corpus, force):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("precious", encoding="utf-8")
    result = cli(*build_args(tiny_corpus, out, tok, *(["--force"] if force else [])))
    assert_refused(result.exit_code, result.stderr, str(out), "not an mlmprep build")
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and (out / "notes.txt").read_text() == "precious"
    assert leftovers(out) == ["mine"]


@pytest.mark.parametrize("text", ['{"name": "my web app"}', "{not json"])
def test_a_directory_whose_manifest_is_not_mlmprep_s_is_never_replaced(tmp_path, tok, tiny_corpus, text):
    out = tmp_path / "app"
    out.mkdir()
    (out / "manifest.json").write_text(text, encoding="utf-8")
    (out / "data.txt").write_text("precious", encoding="utf-8")
    for force in ([], ["--force"]):
        result = cli(*build_args(tiny_corpus, out, tok, *force))
        assert_refused(result.exit_code, result.stderr, str(out), "not an mlmprep build")
        assert "pass --force" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["data.txt", "manifest.json"]
    assert (out / "data.txt").read_text() == "precious" and leftovers(out) == ["app"]


def test_a_build_in_another_format_version_is_never_taken_as_up_to_date(tmp_path, tok, tiny_corpus):
    out = tmp_path / "out"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    older = {**manifest(out), "format_version": 2}  # int32 columns, where this vocabulary now gets uint16
    (out / "manifest.json").write_text(json.dumps(older), encoding="utf-8")
    refused = cli(*build_args(tiny_corpus, out, tok))
    assert_refused(refused.exit_code, refused.stderr, "format_version: 2 -> 3", "--force")
    assert manifest(out) == older
    assert cli(*build_args(tiny_corpus, out, tok, "--force")).exit_code == 0 and manifest(out)["format_version"] == 3


def test_an_out_that_is_a_symbolic_link_is_written_through(tmp_path, tok, tiny_corpus):
    target, link = tmp_path / "disk" / "target", tmp_path / "link"
    target.mkdir(parents=True)
    link.symlink_to(target)
    first = cli(*build_args(tiny_corpus, link, tok))
    assert first.exit_code == 0, first.stderr
    assert link.is_symlink() and (target / "manifest.json").is_file()
    assert sorted(os.listdir(tmp_path)) == ["disk", "link"] and os.listdir(tmp_path / "disk") == ["target"]
    again = cli(*build_args(tiny_corpus, link, tok, "--seed", "1", "--force"))
    assert again.exit_code == 0 and manifest(target)["config"]["seed"] == 1 and link.is_symlink()
    assert os.listdir(tmp_path / "disk") == ["target"]


def test_out_dot_builds_into_the_current_directory_and_the_root_is_refused(tmp_path, tok, tiny_corpus):
    here = tmp_path / "here"
    here.mkdir()
    result = run_cli(*build_args(tiny_corpus, Path("."), tok), cwd=here)
    assert result.returncode == 0, result.stderr
    assert (here / "manifest.json").is_file() and sorted(os.listdir(tmp_path)) == ["here"]
    root = cli(*build_args(tiny_corpus, Path("/"), tok))
    assert_refused(root.exit_code, root.stderr, "--out /", "root")


def test_a_failed_build_leaves_no_directory_it_made_for_out(tmp_path, tok):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"an undecodable \xff line\n")
    result = cli(*build_args(bad, tmp_path / "new" / "deep" / "out", tok, "--on-decode-error", "fail"))
    assert_refused(result.exit_code, result.stderr, "bad.txt line 1")
    assert sorted(os.listdir(tmp_path)) == ["bad.txt"]


def test_an_out_inside_a_corpus_directory_is_refused(tmp_path, tok, tiny_corpus):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(tiny_corpus.read_bytes())
    for out, named in ((corpus / "out", str(corpus)), (corpus / "sub" / "out", str(corpus))):
        result = cli(*build_args(corpus, out, tok))
        assert_refused(result.exit_code, result.stderr, f"--out {out}", named, "outside")
    glob = cli(*build_args(Path(f"{tmp_path}/corp*"), corpus / "out", tok))
    assert_refused(glob.exit_code, glob.stderr, str(corpus), "outside")
    assert sorted(os.listdir(corpus)) == ["a.txt"]


# ----------------------------------------------------------------------------------------------- inspect, remask


def test_inspect_shows_the_summary_and_decoded_examples(tmp_path, tok, tiny_corpus):
    out = tmp_path / "out"
    assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    result = cli("inspect", out, "--examples", "2")
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "seed-0" in text and "validation" in text and "noise 0.1" in text
    assert text.count("--- seed-0 row ") == 2 and "--- seed-0 row 1 (32 input, 8 label tokens)" in text
    shown = [line for line in text.splitlines() if line.startswith("text:")]
    assert all("[[" in line and "]]" in line for line in shown)  # masked spans, decoded in place
    assert "<extra_id_0>" in text and "</s>" in text
    first_words = tiny_documents(1)[0].lower().split()[:3]
    assert " ".join(first_words) in shown[0].lower().replace("[[", "").replace("]]", "")


def test_remask_adds_seeds_identical_to_a_direct_build(tmp_path, tok, tiny_corpus):
    grown, direct = tmp_path / "grown", tmp_path / "direct"
    assert cli(*build_args(tiny_corpus, grown, tok)).exit_code == 0
    result = cli("remask", grown, "--seeds", "4")
    assert result.exit_code == 0 and result.stdout.strip() == f"{grown}: added seed-2, seed-3"
    assert cli(*build_args(tiny_corpus, direct, tok, "--seeds", "4")).exit_code == 0
    assert data_files(grown) == data_files(direct)
    assert [s["seed"] for s in manifest(grown)["seeds"]] == [s["seed"] for s in manifest(direct)["seeds"]]
    assert manifest(grown)["splits"] == manifest(direct)["splits"]
    again = cli(*build_args(tiny_corpus, grown, tok, "--seeds", "4"))  # the grown build is that build now
    assert "up to date" in again.stdout
    assert cli("remask", grown, "--seeds", "3").stdout.strip() == f"{grown}: already has 4 seeds (>= 3); nothing to add"


def test_a_build_with_more_seeds_satisfies_a_request_for_fewer(tmp_path, tiny_corpus, tok):
    out = tmp_path / "b"
    build = ["build", tiny_corpus, "--out", out, "--tokenizer", tok, "--input-length", "32", "--seeds", "2"]
    assert cli(*build).exit_code == 0
    assert cli("remask", out, "--seeds", "5").exit_code == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    again = cli(*build)  # the original command: the 5-seed build holds its 2 seeds
    assert again.exit_code == 0 and "up to date" in again.stdout
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    said = cli("remask", out, "--seeds", "2")
    assert said.exit_code == 0 and "already has 5 seeds" in said.stdout
    more = cli(*build[:-1], "7")  # more seeds than the build has: remask says how
    assert more.exit_code == 2 and f"mlmprep remask {out} --seeds 7" in more.stderr
    for bad in ("0", "-1"):
        refused = cli("remask", out, "--seeds", bad)
        assert refused.exit_code == 2 and "--seeds must be at least 1" in refused.stderr
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# ----------------------------------------------------------------------------------------------- variants


@pytest.mark.parametrize(
    "options, fixed",
    [
        (["--method", "text"], False),
        (["--pack", "doc"], False),
        (["--objective", "mlm"], True),
        (["--objective", "mlm", "--whole-word"], True),
        (["--random-roll"], True),
    ],
)
def test_build_variants_load_with_datasets(tmp_path, tok, tiny_corpus, options, fixed):
    from datasets import load_from_disk

    out = tmp_path / "out"
    result = cli(*build_args(tiny_corpus, out, tok, *options))
    assert result.exit_code == 0, result.stderr
    m = manifest(out)
    assert m["fixed_length"] is fixed
    for split in ("seed-0", "seed-1", "validation"):
        ds = load_from_disk(str(out / split))
        assert len(ds) == m["splits"][split]["rows"] > 0 and ds.column_names == ["input_ids", "labels"]
        lengths = {len(row) for row in ds["input_ids"][:50]}
        assert max(lengths) <= 32 and (lengths == {32}) is fixed
        labels = ds["labels"][:50]
        if "mlm" in options:
            flat = [x for row in labels for x in row]
            assert -100 in flat and any(x != -100 for x in flat)
        else:
            assert all(row[-1] == 1 for row in labels)  # each target ends with </s>
    assert len(load_from_disk(str(out / "windows"))) == m["splits"]["seed-0"]["rows"]


# ----------------------------------------------------------------------------------------------- determinism


def comparable(m: dict) -> dict:
    """A manifest without the fields that may differ between identical builds."""
    return {k: v for k, v in m.items() if k not in ("timings", "build_options")}


def test_same_command_into_two_directories_gives_identical_bytes(tmp_path, tok, tiny_corpus):
    a, b, other_seed = tmp_path / "a", tmp_path / "b", tmp_path / "s"
    for out in (a, b):
        assert cli(*build_args(tiny_corpus, out, tok)).exit_code == 0
    assert data_files(a) == data_files(b)
    assert comparable(manifest(a)) == comparable(manifest(b))
    assert manifest(a)["build_options"]["out"] == str(a)
    assert cli(*build_args(tiny_corpus, other_seed, tok, "--seed", "1")).exit_code == 0
    for split in ("seed-0", "windows"):  # other masks, and another hold-out
        name = f"{split}/data-00000-of-00001.arrow"
        assert data_files(other_seed)[name] != data_files(a)[name]


def test_data_is_identical_across_processes_and_thread_counts(tmp_path, tok, tiny_corpus):
    results = run_many({t: build_args(tiny_corpus, tmp_path / f"t{t}", tok, "--threads", t) for t in ("1", "2")})
    assert [r.returncode for r in results.values()] == [0, 0], [r.stderr for r in results.values()]
    assert data_files(tmp_path / "t1") == data_files(tmp_path / "t2")
    assert comparable(manifest(tmp_path / "t1")) == comparable(manifest(tmp_path / "t2"))
    assert manifest(tmp_path / "t1")["build_options"]["threads"] == 1


def test_a_trained_tokenizer_is_identical_across_processes(tmp_path, tiny_corpus):
    options = ["--vocab-size", "300", "--input-length", "32", "--seeds", "1"]
    runs = {out: ["build", tiny_corpus, "--out", tmp_path / out, *options] for out in ("a", "b")}
    results = run_many(runs)
    assert [r.returncode for r in results.values()] == [0, 0], [r.stderr for r in results.values()]
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()
    assert data_files(tmp_path / "a") == data_files(tmp_path / "b")


def test_the_summary_calls_an_empty_validation_split_masked_not_windows(tmp_path, tiny_corpus, tok):
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary
    from tests.conftest import build_tiny

    out = build_tiny(tmp_path / "data", tiny_corpus, tok, validation_fraction=0.0)
    summary = build_summary(out, read_manifest(out))
    lines = {line.split()[0]: line for line in summary.splitlines() if line[:1].isalpha()}
    assert lines["validation"].split()[1:] == ["0", "0.0", "masked,", "no", "rows"]
    assert lines["validation-windows"].endswith("unmasked windows") and lines["windows"].endswith("unmasked windows")
    assert "noise" in lines["seed-0"]


def test_the_summary_lists_splits_in_build_order_whether_built_now_or_read_from_disk(tmp_path, tiny_corpus, tok):
    """The manifest on disk has its keys sorted as text (seed-10 before seed-2); the table keeps one order."""
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary

    out = tmp_path / "data"
    result = cli(*build_args(tiny_corpus, out, tok, "--seeds", "11"))
    assert result.exit_code == 0, result.stderr
    expected = ["windows", "validation-windows", *(f"seed-{k}" for k in range(11)), "validation"]

    def table(text: str) -> list[str]:
        return [line.split()[0] for line in text.splitlines() if line.startswith(("seed-", "valid", "windows"))]

    assert table(result.stdout) == expected
    assert table(build_summary(out, read_manifest(out))) == expected
    assert table(cli("inspect", out, "--examples", "0").stdout) == expected
