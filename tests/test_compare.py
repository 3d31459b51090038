"""compare: word-fragment spans and row-edge cuts on hand-made rows, the document hold-out, and the whole
comparison in a tiny mode through `mlmprep compare-methods` (results.json fields, both curves, plots)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.compare import OUTPUTS, compare_config, fragment_spans, split_documents, stream_row_cuts
from mlmprep.errors import CacheError, CorpusError
from mlmprep.format.rows import Rows
from mlmprep.tokenizer.encode import WordTables
from tests.cli.test_build import assert_refused, cli
from tests.conftest import WORDS, tiny_documents

# A hand-made vocabulary: id, piece, starts a word, first and last characters alphanumeric.
#   0 <pad>  1 </s>  2 ▁The  3 ▁fun  4 ction  5 ▁is  6 ▁here  7 s  8 ,   and sentinels E0 = 99, E1 = 98
PAD, EOS, THE, FUN, CTION, IS, HERE, S, COMMA, E0, E1 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 99, 98
SENTINELS = np.array([E0, E1], dtype=np.int32)


def tables() -> WordTables:
    starts = np.ones(100, dtype=bool)
    alnum = np.zeros(100, dtype=bool)
    starts[[CTION, S, COMMA]] = False  # continuation pieces
    alnum[[THE, FUN, CTION, IS, HERE, S]] = True
    return WordTables(starts_word=starts, first_alnum=alnum, last_alnum=alnum)


def rows(*lists) -> Rows:
    lengths = [len(x) for x in lists]
    return Rows(np.concatenate([np.asarray(x, np.int32) for x in lists]),
                np.append(0, np.cumsum(lengths)).astype(np.int64))


# row 0: ▁The ▁fun [ction] ▁is [▁here] s   -> [ction] continues ▁fun, [▁here] is continued by s: 2 fragments
# row 1: ▁is [▁The] ▁fun [▁fun]            -> [▁The] is whole; [▁fun] ends the row: a fragment iff the row does
# row 2: [ction] ▁is ▁The                   -> [ction] begins the row: a fragment iff the row begins in a word
WINDOWS = rows([THE, FUN, CTION, IS, HERE, S], [IS, THE, FUN, FUN], [CTION, IS, THE])
INPUTS = rows([THE, FUN, E0, IS, E1, S, EOS], [IS, E0, FUN, E1, EOS], [E0, IS, THE, EOS])
LABELS = rows([E0, CTION, E1, HERE, EOS], [E0, THE, E1, FUN, EOS], [E0, CTION, EOS])


def test_fragment_spans_inside_rows_and_at_their_edges():
    inside = fragment_spans(WINDOWS, INPUTS, LABELS, SENTINELS, tables(), np.zeros(3, bool), np.zeros(3, bool))
    assert inside == (5, 2)
    edges = fragment_spans(WINDOWS, INPUTS, LABELS, SENTINELS, tables(), np.array([0, 0, 1], bool),
                           np.array([0, 1, 0], bool))
    assert edges == (5, 4)
    row_0_begins_in_a_word = np.array([1, 0, 0], bool)
    # no span starts row 0
    assert fragment_spans(WINDOWS, INPUTS, LABELS, SENTINELS, tables(), row_0_begins_in_a_word,
                          np.zeros(3, bool)) == (5, 2)


def test_fragment_spans_reject_rows_that_do_not_match_their_windows():
    short = rows([THE, FUN, CTION, IS, HERE], [IS, THE, FUN, FUN], [CTION, IS, THE])  # row 0 lost its last token
    with pytest.raises(CacheError, match="do not cover"):
        fragment_spans(short, INPUTS, LABELS, SENTINELS, tables(), np.zeros(3, bool), np.zeros(3, bool))


def test_stream_row_cuts_mark_both_sides_of_a_boundary_inside_a_word():
    begins, ends = stream_row_cuts(rows([THE, FUN], [CTION, IS], [HERE, S]), tables())
    assert begins.tolist() == [False, True, False]  # ▁fun | ction cuts a word; ▁is | ▁here does not
    assert ends.tolist() == [True, False, False]


def test_documents_are_held_out_deterministically_and_whole(tiny_corpus, tmp_path):
    cfg = compare_config("default", {"corpus": (str(tiny_corpus),), "heldout_fraction": 0.1})
    counts = split_documents(cfg, tmp_path / "a")
    split_documents(cfg, tmp_path / "b")
    for name in ("train.jsonl", "heldout.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    read = {name: [json.loads(x)["text"] for x in (tmp_path / "a" / f"{name}.jsonl").read_text().splitlines()]
            for name in ("train", "heldout")}
    source = tiny_corpus.read_text(encoding="utf-8").splitlines()
    assert sorted(read["train"] + read["heldout"]) == sorted(source)  # every document once, on one side
    assert not set(read["train"]) & set(read["heldout"])
    assert counts == {"train": len(read["train"]), "heldout": len(read["heldout"])}
    assert 0.03 < counts["heldout"] / len(source) < 0.2


def test_copies_of_a_document_fall_on_one_side_of_the_hold_out(tmp_path):
    """A corpus repeats lines (headers, boilerplate: 21% of pydocs' held-out documents are also training ones
    when cut by index); a held-out text must never be one the models train on."""
    import random

    docs = tiny_documents(100) * 3
    random.Random(0).shuffle(docs)
    corpus = tmp_path / "copies.txt"
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    split_documents(compare_config("default", {"corpus": (str(corpus),), "heldout_fraction": 0.2}), tmp_path / "data")
    read = {name: [json.loads(x)["text"] for x in (tmp_path / "data" / f"{name}.jsonl").read_text().splitlines()]
            for name in ("train", "heldout")}
    assert sorted(read["train"] + read["heldout"]) == sorted(docs) and read["heldout"]
    assert not set(read["train"]) & set(read["heldout"])


def test_a_lone_surrogate_in_a_json_corpus_is_split_like_any_text(tmp_path):
    """JSON may escape a lone surrogate ("\\ud800"), which no UTF-8 file can hold: the split keeps it escaped
    (the builds drop it when cleaning, as a build of the corpus itself does) instead of a UnicodeEncodeError."""
    docs = [f"document {i} with text" for i in range(40)] + ["odd \ud800 one", "café 日本"]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="ascii")
    split_documents(compare_config("default", {"corpus": (str(corpus),), "heldout_fraction": 0.3}), tmp_path / "data")
    read = [json.loads(x)["text"] for name in ("train", "heldout")
            for x in (tmp_path / "data" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(read) == sorted(docs)


@pytest.fixture(scope="module")
def tiny_run(tiny_corpus, tmp_path_factory):
    """The whole comparison on the tiny corpus: 20 steps, evaluated every 10, through the CLI."""
    out = tmp_path_factory.mktemp("compare") / "out"
    result = CliRunner().invoke(app, [
        "compare-methods", str(tiny_corpus), "--quick", "--out", str(out), "--vocab-size", "400",
        "--input-length", "64", "--steps", "20", "--eval-every", "10", "--heldout-fraction", "0.1",
        "--max-tokens-per-batch", "1024",
    ])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_tiny_comparison_writes_results_for_both_methods(tiny_run):
    out, output = tiny_run
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["steps"] == 20 and results["validation"]["rows"] > 0
    for method in ("text", "tokens"):
        build, train = results["methods"][method]["build"], results["methods"][method]["train"]
        assert build["rows"] > 0 and 0 < build["token_utilisation"] <= 1
        assert 0 <= build["fragment_spans"] <= build["masked_spans"] and build["masked_spans"] > 0
        assert train["steps"] == 20 and train["training_tokens"] > 0
        curve = train["curve"]
        assert [p["step"] for p in curve] == [0, 10, 20]
        assert curve[0]["tokens"] == 0 < curve[1]["tokens"] < curve[2]["tokens"] == train["training_tokens"]
        assert curve[-1]["eval_loss"] < curve[0]["eval_loss"]  # 20 steps already learn token frequencies
        assert curve[-1]["eval_loss"] == train["final_loss"]
    text, tokens = results["methods"]["text"]["build"], results["methods"]["tokens"]["build"]
    assert tokens["token_utilisation"] == 1.0 and text["token_utilisation"] < 1.0  # segments are padded
    assert text["fragment_rate"] > tokens["fragment_rate"]  # character cuts fall inside words more often
    # the replayed row edges agree with the build's own count: exactly for text segments (truncated ones too:
    # test_windows), and for the token stream but for its last row (the build also looks at the dropped tail)
    assert text["fragment_rate"] == text["manifest_fragment_rate"]
    rows_apart = abs(tokens["fragment_rate"] - tokens["manifest_fragment_rate"]) * tokens["rows"]
    assert round(rows_apart, 6) <= 1
    assert "| final validation loss |" in output and "token splitting" in output


def test_tiny_comparison_draws_both_plots(tiny_run):
    out, _ = tiny_run
    for name in ("val_loss.png", "val_accuracy.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / name).stat().st_size > 10_000
    assert "![val_loss.png](val_loss.png)" in (out / "results.md").read_text()


def test_compare_methods_rejects_contradicting_modes(tmp_path):
    result = CliRunner().invoke(app, ["compare-methods", "--full", "--quick", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--full and --quick" in result.output


def test_compare_methods_keeps_an_out_holding_other_files(tiny_corpus, tmp_path):
    notes = tmp_path / "out" / "run-text" / "notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text("precious")
    for force in ([], ["--force"]):
        result = cli("compare-methods", tiny_corpus, "--quick", "--out", tmp_path / "out", *force)
        assert_refused(result.exit_code, result.stderr, "--out", "no compare-methods result", "choose another --out")
    assert notes.read_text() == "precious" and [p.name for p in (tmp_path / "out").iterdir()] == ["run-text"]


def test_compare_methods_replaces_a_previous_result_only_with_force(tiny_run, tmp_path):
    out = shutil.copytree(tiny_run[0], tmp_path / "out")
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    result = cli("compare-methods", "--quick", "--out", out, "--steps", "1", "--eval-every", "1")
    assert_refused(result.exit_code, result.stderr, "--out", "compare-methods result", "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    result = cli("compare-methods", "--quick", "--out", out, "--steps", "1", "--eval-every", "1", "--max-mb", "0.05",
                 "--vocab-size", "400", "--force")
    assert result.exit_code == 0, result.output
    assert json.loads((out / "results.json").read_text())["settings"]["steps"] == 1
    assert {p.name for p in out.iterdir()} == OUTPUTS  # the previous result set aside is gone


def test_a_failed_comparison_leaves_files_it_did_not_write(tmp_path):
    """compare() run without check_compare (a library caller) into a directory holding a user's file: a failure
    removes only what the run wrote, and the file stays."""
    from mlmprep.compare import compare

    notes = tmp_path / "out" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("precious")
    corpus = tmp_path / "short.txt"
    corpus.write_text("\n".join(WORDS[:40]) + "\n", encoding="utf-8")
    cfg = compare_config("quick", {"corpus": (str(corpus),), "out": str(notes.parent), "vocab_size": 400,
                                   "heldout_fraction": 0.9})
    with pytest.raises(CorpusError, match="training documents"):
        compare(cfg, log=lambda _: None)
    assert [p.name for p in notes.parent.iterdir()] == ["notes.txt"] and notes.read_text() == "precious"


@pytest.mark.parametrize("option", [["--vocab-size", "50"], ["--model", "nosuch"], ["--max-tokens-per-batch", "0"],
                                    ["--max-mb", "-1"], ["--max-mb", "nan"], ["--max-mb", "inf"]])
def test_compare_methods_refuses_bad_options_before_any_work(tiny_corpus, tmp_path, option):
    result = cli("compare-methods", tiny_corpus, "--quick", "--out", tmp_path / "out", *option)
    assert_refused(result.exit_code, result.stderr, option[0])
    assert not (tmp_path / "out").exists()


def test_compare_methods_help_documents_force_and_a_zero_max_mb():
    help_text = " ".join(cli("compare-methods", "--help").output.split())
    assert "--force" in help_text and "0: the whole corpus" in help_text


@pytest.mark.parametrize(("lines", "fraction", "part", "fix"), [
    (40, "0.05", "held-out", "raise --heldout-fraction"),  # ~2 held-out sentences: under one 70-token window
    (0, "0.9", "training", "lower --heldout-fraction"),  # ~4 training documents of one word each
])
def test_compare_methods_refuses_too_little_text_in_one_line_naming_its_fix(tmp_path, lines, fraction, part, fix):
    """Too few held-out (or training) tokens for one window is found after the split: still one error line,
    naming compare-methods' own options (it has no --pack), and nothing left under --out."""
    corpus = tmp_path / "short.txt"
    docs = [doc.split(".")[0] for doc in tiny_documents(lines)] if lines else WORDS[:40]
    corpus.write_text("\n".join(docs) + "\n", encoding="utf-8")
    result = cli("compare-methods", corpus, "--quick", "--out", tmp_path / "out", "--vocab-size", "400",
                 "--heldout-fraction", fraction)
    assert_refused(result.exit_code, result.stderr, f"{part} documents", fix, "--input-length")
    assert "--pack" not in result.stderr and not (tmp_path / "out").exists()


def test_a_failed_force_run_leaves_the_previous_result_as_it_was(tiny_run, tmp_path):
    """--force replaces a previous result only by one that completes: a run that fails after its work began
    (here too little training text, found by the build after the split and the validation build) restores
    every file it had."""
    out = shutil.copytree(tiny_run[0], tmp_path / "out")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    corpus = tmp_path / "short.txt"
    corpus.write_text("\n".join(WORDS[:40]) + "\n", encoding="utf-8")
    result = cli("compare-methods", corpus, "--quick", "--out", out, "--vocab-size", "400", "--force",
                 "--heldout-fraction", "0.9")
    assert_refused(result.exit_code, result.stderr, "training documents hold too little text")
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("had_result", [True, False])
def test_ctrl_c_says_what_it_left_a_previous_result_or_nothing(tiny_run, tmp_path, monkeypatch, had_result):
    """Ctrl-C during a --force run puts the previous result back, and the last line says so (exit 130)."""
    import mlmprep.compare

    out = shutil.copytree(tiny_run[0], tmp_path / "out") if had_result else tmp_path / "out"
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(mlmprep.compare, "split_documents", stop)
    result = cli("compare-methods", "--quick", "--out", out, "--force")
    assert result.exit_code == 130
    expected = f"interrupted; {out} is as it was before this run" if had_result else \
        "interrupted; nothing was left under the output name"
    assert result.stderr.splitlines() == [expected]
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert out.exists() is had_result


def test_the_segmentation_benchmark_refuses_an_out_holding_other_files(tiny_corpus, tmp_path):
    """benchmarks.segmentation writes where compare-methods does: an --out holding anything but a previous
    result is refused before any work (one error line, exit 2), and its files are left alone."""
    import subprocess
    import sys
    from pathlib import Path

    notes = tmp_path / "out" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("precious")
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-m", "benchmarks.segmentation", "--quick", "--corpus", str(tiny_corpus),
                             "--out", str(notes.parent)], cwd=root, capture_output=True, text=True, timeout=300)
    assert_refused(result.returncode, result.stderr, "--out", "no compare-methods result")
    assert notes.read_text() == "precious" and [p.name for p in notes.parent.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("max_mb, chars", [(0.0, 0), (1e-9, 1), (0.05, 50_000), (2.5, 2_500_000)])
def test_max_mb_counts_million_characters_and_a_tiny_positive_limit_is_not_the_whole_corpus(max_mb, chars):
    from mlmprep.config import CompareConfig

    assert CompareConfig(max_mb=max_mb).max_chars == chars


@pytest.mark.parametrize("mode", ["quick", "full"])
def test_compare_methods_help_lists_every_setting_of_each_preset(mode):
    """The help's entry for --quick / --full names each setting the preset gives (an option of the command
    where it has one, with its value as typed there) and the value compare_config then holds."""
    import re
    from dataclasses import fields

    from mlmprep.config import CompareConfig

    result = CliRunner().invoke(app, ["compare-methods", "--help"], prog_name="mlmprep")
    help_text = " ".join(result.output.split())
    section = help_text.split("What the presets set")[1].split("Examples:")[0]
    entry = re.search(rf" --{mode} (.*?)(?= --(?:quick|full) |$)", section.rstrip()).group(1)
    given, _, fixed = entry.partition("; and, having no option, ")
    named = {}
    for part in given.split(", "):
        option, value = part.split(" ")
        assert f" {option} " in help_text.split("What the presets set")[0]  # an option the command has
        named[option[2:].replace("-", "_")] = value
    for part in filter(None, fixed.split(", ")):
        field, value = part.split(" ")
        assert f"--{field.replace('_', '-')} " not in help_text  # said to have no option: it has none
        named[field] = value
    preset, default = compare_config(mode, {}), CompareConfig()
    changed = {f.name for f in fields(CompareConfig) if getattr(preset, f.name) != getattr(default, f.name)}
    assert changed - {"mode"} <= named.keys()
    for field, value in named.items():
        held = getattr(preset, field)
        assert float(held) == float(value) if isinstance(held, float) else str(held) == value, field


def test_a_corpus_with_copies_of_documents_compares_both_arms_on_every_training_document(tiny_corpus, tmp_path):
    lines = tiny_corpus.read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "copies.txt"
    corpus.write_text("\n".join(lines + lines[: len(lines) // 3]) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [
        "compare-methods", str(corpus), "--quick", "--out", str(out), "--vocab-size", "400", "--input-length", "64",
        "--steps", "2", "--eval-every", "2", "--heldout-fraction", "0.1", "--max-tokens-per-batch", "1024",
    ])
    assert result.exit_code == 0, result.output
    builds = {m: json.loads((out / f"build-{m}" / "manifest.json").read_text()) for m in ("tokens", "text")}
    dropped = {method: b["corpus"]["stats"]["dedup"]["documents_dropped"] for method, b in builds.items()}
    assert dropped == {"tokens": 0, "text": 0}


@pytest.mark.parametrize("preset, mode", [([], "quick"), (["--full"], "full")])
def test_a_config_file_gives_compare_methods_options_over_its_preset_and_under_the_command_line(
        tmp_path, monkeypatch, preset, mode):
    """Defaults, then the preset (the file's `mode`, unless --quick or --full names one), then the --config file
    (options, and settings that have none), then the command line: each layer acts, in that order."""
    import mlmprep.compare
    from mlmprep.config import COMPARE_MODES
    from mlmprep.errors import ConfigError

    seen = []

    def stop(cfg, **kwargs):
        seen.append(cfg)
        raise ConfigError("stopped before the work")

    monkeypatch.setattr(mlmprep.compare, "compare", stop)
    (tmp_path / "c.yaml").write_text("mode: quick\nsteps: 3\neval-every: 3\nlr: 0.01\nmax_mb: 0.5\n", encoding="utf-8")
    result = cli("compare-methods", "--config", tmp_path / "c.yaml", "--steps", "2", "--out", tmp_path / "out",
                 *preset)
    assert_refused(result.exit_code, result.stderr, "stopped before the work")
    (cfg,) = seen
    assert (cfg.mode, cfg.vocab_size) == (mode, COMPARE_MODES[mode]["vocab_size"])  # the preset under the file
    assert (cfg.steps, cfg.eval_every, cfg.lr, cfg.max_chars) == (2, 3, 0.01, 500_000)  # the file, the command line
    assert cfg.out == str(tmp_path / "out")
