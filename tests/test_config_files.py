"""--config files and option values: a mistake in a file is one line naming the file and the key (a key given
twice, a null, a misspelt key with the nearest ones suggested), whole numbers however JSON or YAML spell them
are accepted, and `train --resume` checks the run's options as they will act, naming train_config.json for
a damaged value there."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from mlmprep.config import BuildConfig
from mlmprep.config_files import make_config, read_config_file
from tests.cli.test_build import assert_refused, cli, leftovers
from tests.fakes import write_fake_build

# case -> (file name, text, words the error line must contain; FILE stands for the file's path)
BUILD_FILE_REFUSALS = {
    "yaml-key-twice": ("c.yaml", "seeds: 2\nseeds: 3\n", ("--config FILE: 'seeds' is given twice",)),
    "json-key-twice": ("c.json", '{"seeds": 2, "seeds": 3}', ("--config FILE: 'seeds' is given twice",)),
    "dash-and-underscore": ("c.yaml", "input-length: 32\ninput_length: 64\n",
                            ("--config FILE: 'input-length' and 'input_length' name the same option",)),
    "null": ("c.yaml", "seeds: null\n", ("--config FILE: --seeds expects a whole number, got null",)),
    "misspelt": ("c.json", '{"seedz": 2}',
                 ("--config FILE: unknown option 'seedz' (did you mean 'seed' or 'seeds'?)",)),
    "wrong-case": ("c.yaml", "Seeds: 2\n", ("unknown option 'Seeds' (did you mean 'seeds'", "valid options")),
    "empty-out": ("c.yaml", 'out: ""\n', ("--config FILE: --out is empty",)),
    "split-without-dataset": ("c.yaml", "dataset_split: validation\n", ("--dataset-split applies to --dataset only",)),
    "a-fraction-for-a-count": ("c.json", '{"seeds": 2.5}', ("--config FILE: --seeds expects a whole number, got 2.5",)),
    "a-number-for-a-path": ("c.yaml", "corpus: [a.txt, 1]\n", ("--config FILE: CORPUS expects a string, got 1",)),
}


@pytest.mark.parametrize("case", BUILD_FILE_REFUSALS)
def test_a_config_file_mistake_is_one_line_naming_the_file_and_the_key(tmp_path, tiny_corpus, tok, case):
    name, text, words = BUILD_FILE_REFUSALS[case]
    path, out = tmp_path / name, tmp_path / "out"
    path.write_text(text, encoding="utf-8")
    result = cli("build", tiny_corpus, "--out", out, "--tokenizer", tok, "--config", path)
    assert_refused(result.exit_code, result.stderr, *(w.replace("FILE", str(path)) for w in words))
    assert leftovers(out) == []


def test_a_directory_as_config_is_named_as_one(tmp_path, tiny_corpus, tok):
    result = cli("build", tiny_corpus, "--out", tmp_path / "out", "--tokenizer", tok, "--config", tmp_path)
    assert_refused(result.exit_code, result.stderr, f"--config {tmp_path}: is a directory")
    assert leftovers(tmp_path / "out") == []


@pytest.mark.parametrize("name, text, key, expected", [
    ("c.json", '{"seeds": 3.0}', "seeds", 3),  # JSON writers often write whole numbers as floats
    ("c.json", '{"chunk_chars": 1e6}', "chunk_chars", 1_000_000),
    ("c.yaml", "chunk_chars: 1e6\n", "chunk_chars", 1_000_000),  # a string to YAML 1.1
    ("c.yaml", "seeds: 3.0\n", "seeds", 3),
    ("c.json", '\ufeff{"seeds": 3}', "seeds", 3),  # a byte-order mark, as Windows editors write
    ("opts", "seeds: 3\n", "seeds", 3),  # no suffix: read as YAML, which reads JSON too
    ("c.yaml", "tokenizer: null\n", "tokenizer", None),
    ("c.yaml", "<<: {seeds: 2}\nseeds: 3\n", "seeds", 3),  # a YAML merge key may be overridden: not a repeat
    ("c.yaml", "dataset: wikitext\ndataset_split: validation\n", "dataset_split", "validation"),
])
def test_config_file_values_that_are_accepted(tmp_path, name, text, key, expected):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    value = getattr(make_config(BuildConfig, read_config_file(path)), key)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("ignored, needed", [({"dataset_split": "validation"}, {"dataset": "wikitext"}),
                                            ({"pack": "doc", "method": "text"}, {"method": "tokens"})])
def test_a_stored_build_with_an_option_it_ignored_still_remasks(ignored, needed):
    """A build made before an ignored option was refused records it: remask drops it, and keeps it where it acted."""
    stored = {**BuildConfig().identity(), **ignored}
    key = next(iter(ignored))
    assert key not in BuildConfig.used(stored)
    assert BuildConfig.used({**stored, **needed})[key] == ignored[key]


# ----------------------------------------------------------------------------------------------- train

TRAIN_REFUSALS = {  # case -> (options, a --config file's text or None, words of the error line)
    "alpha-overflows": (["--alpha", "1e308"], None, ("--alpha must be at most",)),
    "decay-flips-weights": (["--lr", "0.1", "--weight-decay", "10"], None,
                            ("--lr 0.1 times --weight-decay 10.0 must be below 1",)),
    "empty-validation": (["--validation", ""], None, ("--validation is empty",)),
    "int-past-any-float": ([], f"lr: 1{'0' * 400}\n", ("--lr must be a finite number, got inf",)),
    "padding-past-the-microbatch": (["--pad-to-multiple-of", "1000000000000"], None,
                                    ("--pad-to-multiple-of must be from 1 to --max-tokens-per-microbatch (4096)",)),
    "examples-past-int64": (["--max-examples-per-microbatch", "100000000000000000000"], None,
                            ("--max-examples-per-microbatch must be at most 1,099,511,627,776",)),
    "eval-budget-past-int64": (["--eval-max-tokens-per-microbatch", "100000000000000000000"], None,
                               ("--eval-max-tokens-per-microbatch must be at most 1,099,511,627,776",)),
}


@pytest.mark.parametrize("case", TRAIN_REFUSALS)
def test_train_options_that_cannot_work_are_refused_before_the_run_directory(tmp_path, case):
    options, text, words = TRAIN_REFUSALS[case]
    if text is not None:
        (tmp_path / "c.yaml").write_text(text, encoding="utf-8")
        options = [*options, "--config", tmp_path / "c.yaml"]
    result = cli("train", tmp_path / "no-data", "--out", tmp_path / "run", *options)
    assert_refused(result.exit_code, result.stderr, *words)
    assert not (tmp_path / "run").exists()


TRAIN = ["--max-steps", "1", "--eval-every", "0", "--save-every", "0", "--max-tokens-per-batch", "512",
         "--max-tokens-per-microbatch", "256", "--warmup-steps", "0"]


@pytest.fixture(scope="module")
def low_lr_run(tmp_path_factory) -> Path:
    """A one-step run at --lr 1e-6 and --min-lr 1e-7 (below the default --min-lr 1e-5)."""
    d = tmp_path_factory.mktemp("resume")
    data = write_fake_build(d / "data", n_rows=40)
    result = cli("train", data, "--out", d / "run", *TRAIN, "--lr", "1e-6", "--min-lr", "1e-7")
    assert result.exit_code == 0, result.stderr
    return d / "run"


def test_resume_checks_the_options_that_act_not_the_defaults_beneath_them(low_lr_run):
    """Repeating --lr 1e-6 on a resume is no change, checked against the run's --min-lr, not the default 1e-5."""
    result = cli("train", "--out", low_lr_run, "--resume", "--lr", "1e-6", "--max-steps", "2")
    assert result.exit_code == 0, result.stderr
    saved = json.loads((low_lr_run / "train_config.json").read_text())
    assert (saved["lr"], saved["min_lr"], saved["max_steps"]) == (1e-6, 1e-7, 2)


def test_a_damaged_saved_option_is_named_in_train_config_json(low_lr_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for path in low_lr_run.iterdir():
        if path.is_file():
            (run / path.name).write_bytes(path.read_bytes())
    saved = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**saved, "lr": "fast"}))
    (tmp_path / "more.yaml").write_text("log_every: 5\n", encoding="utf-8")
    result = cli("train", "--out", run, "--resume", "--config", tmp_path / "more.yaml")
    assert_refused(result.exit_code, result.stderr, f"{run / 'train_config.json'}: --lr expects a number, got 'fast'")
    assert "more.yaml" not in result.stderr


@pytest.mark.parametrize("options, expected", [
    (["--max-tokens-per-batch", "2048"], 2048),  # below the default 4096: the default gives way
    (["--max-tokens-per-batch", "8192"], 4096),
    (["--max-tokens-per-batch", "8192", "--max-tokens-per-microbatch", "1024"], 1024),
])
def test_a_small_batch_budget_lowers_the_default_microbatch_budget(monkeypatch, tmp_path, options, expected):
    import mlmprep.train.loop

    got = {}
    monkeypatch.setattr(mlmprep.train.loop, "fit", lambda cfg: got.setdefault("cfg", cfg) and {})
    result = cli("train", tmp_path / "data", "--out", tmp_path / "run", *options)
    assert result.exit_code == 0, result.stderr
    assert got["cfg"].max_tokens_per_microbatch == expected


def test_a_microbatch_budget_given_above_the_batch_budget_is_still_refused(tmp_path):
    result = cli("train", tmp_path / "data", "--out", tmp_path / "run", "--max-tokens-per-batch", "2048",
                 "--max-tokens-per-microbatch", "4096")
    assert_refused(result.exit_code, result.stderr, "--max-tokens-per-microbatch (4096) must not exceed")


def test_the_command_line_turns_off_a_flag_the_config_file_turns_on(monkeypatch, tmp_path):
    import mlmprep.train.loop

    got = {}
    monkeypatch.setattr(mlmprep.train.loop, "fit", lambda cfg: got.setdefault("cfg", cfg) and {})
    (tmp_path / "c.yaml").write_text("deterministic: true\nbf16: false\n", encoding="utf-8")
    result = cli("train", tmp_path / "data", "--out", tmp_path / "run", "--config", tmp_path / "c.yaml",
                 "--no-deterministic", "--bf16")
    assert result.exit_code == 0, result.stderr
    assert (got["cfg"].deterministic, got["cfg"].bf16) == (False, True)


@pytest.mark.parametrize("command", [["build"], ["tokenizer", "train"]], ids=" ".join)
def test_a_vocabulary_no_trainer_could_reserve_is_refused(tmp_path, tiny_corpus, command):
    """A vocabulary past MAX_VOCAB is refused in one line, however large (the trainer reserves memory per piece)."""
    for size in ("2147483648", "100000000000000000000"):
        result = cli(*command, tiny_corpus, "--out", tmp_path / "out", "--vocab-size", size)
        assert_refused(result.exit_code, result.stderr, f"--vocab-size must be at most 16,777,216, got {int(size):,}")
        assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["config file", "--out=~/..."])
def test_a_leading_tilde_in_a_path_is_the_home_directory(monkeypatch, tmp_path, tiny_corpus, tok, where):
    """No shell expands ~ in a config file (nor after --out=): mlmprep makes it the home directory itself."""
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir(), cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    (cwd / "c.yaml").write_text(f"tokenizer: {tok}\ninput_length: 32\nseeds: 1\n"
                                + ("out: ~/data\n" if where == "config file" else ""), encoding="utf-8")
    more = [] if where == "config file" else ["--out=~/data"]
    result = cli("build", tiny_corpus, "--config", cwd / "c.yaml", *more)
    assert result.exit_code == 0, result.stderr
    assert (home / "data" / "manifest.json").is_file() and sorted(p.name for p in cwd.iterdir()) == ["c.yaml"]


@pytest.mark.parametrize("text, command_line, expected", [
    ("dataset: wikitext\ndataset_split: validation\n", ["CORPUS"], ("CORPUS", None, "train")),
    ("corpus: [a.txt]\n", ["--dataset", "wikitext"], ((), "wikitext", "train")),
    ("corpus: [a.txt]\ndataset_split: test\n", ["--dataset", "wikitext"], ((), "wikitext", "test")),
])
def test_an_input_on_the_command_line_replaces_the_config_files(monkeypatch, tmp_path, tiny_corpus, text,
                                                                 command_line, expected):
    """Corpus paths and --dataset are alternatives: either on the command line overrides the file's (both
    together are not refused as given twice)."""
    import mlmprep.builder.run
    from mlmprep.errors import ConfigError

    got = {}

    def build(cfg, log):
        got["cfg"] = cfg
        raise ConfigError("stopped here")

    monkeypatch.setattr(mlmprep.builder.run, "build", build)
    monkeypatch.setattr("mlmprep.cli.build.start_workers_early", lambda cfg: None)
    (tmp_path / "c.yaml").write_text(text, encoding="utf-8")
    args = [str(tiny_corpus) if a == "CORPUS" else a for a in command_line]
    cli("build", *args, "--config", tmp_path / "c.yaml", "--out", tmp_path / "out")
    corpus = (str(tiny_corpus),) if expected[0] == "CORPUS" else expected[0]
    assert (got["cfg"].corpus, got["cfg"].dataset, got["cfg"].dataset_split) == (corpus, *expected[1:])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_config_from_a_pipe_is_read(tmp_path):
    """`--config <(...)` names a pipe, which is no regular file, and is read like one."""
    fifo = tmp_path / "opts"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=("seeds: 3\n",), daemon=True)
    writer.start()
    try:
        assert make_config(BuildConfig, read_config_file(fifo)).seeds == 3
    finally:
        writer.join(5)


@pytest.mark.parametrize("value", [["TOPSECRET"], 7, "TOPSECRET not json"])
def test_storage_options_in_a_config_file_never_echo_their_value(tmp_path, tiny_corpus, tok, value):
    config = tmp_path / "opts.json"
    config.write_text(json.dumps({"storage_options": value}))
    result = cli("build", str(tiny_corpus), "--out", str(tmp_path / "out"), "--tokenizer", tok, "--config", config)
    assert result.exit_code == 2 and "--storage-options" in result.stderr and "TOPSECRET" not in result.stderr
    assert "7" not in result.stderr.replace(str(tmp_path), "")


def test_storage_options_may_be_a_mapping_in_a_config_file(tmp_path):
    config = tmp_path / "opts.yaml"
    config.write_text("storage_options:\n  key: AKIA\n  secret: TOPSECRET\n")
    cfg = make_config(BuildConfig, read_config_file(config), source=str(config))
    assert json.loads(cfg.storage_options) == {"key": "AKIA", "secret": "TOPSECRET"}


def test_each_train_section_declares_one_help_panel_and_a_file_sets_its_options_by_flat_keys(tmp_path):
    """TrainConfig is declared in sections, one per `--help` panel, which together hold every field once; a
    config file names an option of any section by its own key, as before the sections."""
    import dataclasses

    from mlmprep.config import TrainConfig

    sections = [base for base in TrainConfig.__mro__[1:] if dataclasses.is_dataclass(base)]
    names = [f.name for section in sections for f in dataclasses.fields(section)]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(TrainConfig)) and len(set(names)) == len(names)
    panels = [{f.metadata["panel"] for f in dataclasses.fields(section) if "panel" in f.metadata}
              for section in sections]
    assert all(len(p) == 1 for p in panels) and len({p.pop() for p in panels}) == len(sections)
    path = tmp_path / "train.yaml"
    path.write_text("sources: [a, b]\nmax_steps: 5\nmax-encoder-len: 64\nmix: temperature:2\nmodel: t5-small\n"
                    "alpha: 1.5\nlr: 3e-4\nwarmup_steps: 7\nlog_every: 3\nbf16: false\nfetch_threads: 2\n",
                    encoding="utf-8")
    cfg = make_config(TrainConfig, read_config_file(path))
    assert cfg.sources == ("a", "b") and cfg.max_steps == 5
    assert (cfg.max_encoder_len, cfg.mix, cfg.model, cfg.alpha, cfg.lr, cfg.warmup_steps, cfg.log_every, cfg.bf16,
            cfg.fetch_threads) == (64, "temperature:2", "t5-small", 1.5, 3e-4, 7, 3, False, 2)


@pytest.mark.parametrize("suffix, text", [(".yaml", "lr: 1e-3\nmin_lr: 1e-5\nmax_steps: 1e2\n"),
                                          (".json", '{"lr": "1e-3", "min_lr": "1e-5", "max_steps": "100"}')])
def test_config_files_accept_numbers_written_as_strings(tmp_path, suffix, text):
    from mlmprep.config import TrainConfig
    from mlmprep.config_files import config_from
    from mlmprep.errors import ConfigError

    path = tmp_path / f"c{suffix}"
    path.write_text(text, encoding="utf-8")
    cfg = config_from(TrainConfig, str(path), {})
    assert (cfg.lr, cfg.min_lr, cfg.max_steps) == (1e-3, 1e-5, 100)
    for bad, words in (("max_steps: 2.5\n", "whole number"), ("lr: fast\n", "expects a number"),
                       ("lr: .nan\n", "--lr")):
        path = tmp_path / "bad.yaml"
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(ConfigError, match=words):
            config_from(TrainConfig, str(path), {})
