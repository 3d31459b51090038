"""`mlmprep train` refuses, in one line and before it makes the run directory, a number out of range (on the command
line or in a --config file) and an option the chosen optimizer, schedule or objective would ignore."""

from __future__ import annotations

import pytest

from tests.fakes import write_fake_build

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("args", [
    ["--grad-clip", "nan"], ["--weight-decay", "nan"], ["--weight-decay", "inf"], ["--lr", "inf"], ["--alpha", "nan"],
    ["--seed", "-1"], ["--seed", "4294967296"], ["--max-tokens-per-batch", "99999999999999999999"],
    ["--max-encoder-len", "0"], ["--max-decoder-len", "-3"], ["--model", "nosuch"],  # no warmup warning before it
])
def test_bad_numbers_are_one_line_before_the_run_directory(tmp_path, span_data, args):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(run), "--max-steps", "1", *args])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert result.output.count("\n") == 1 and result.output.startswith(f"error: {args[0]}")
    assert not run.exists()


def test_a_non_finite_lr_in_a_config_file_is_refused(tmp_path, span_data):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    (tmp_path / "train.yaml").write_text("lr: .inf\n")
    result = CliRunner().invoke(app, ["train", str(span_data), "--out", str(tmp_path / "run"), "--config",
                                      str(tmp_path / "train.yaml")])
    assert result.exit_code == 2 and result.output == "error: --lr must be a finite number, got inf\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("objective, args, refused", [
    ("span", ["--optimizer", "adafactor", "--beta1", "0.5"], "--beta1 applies to --optimizer adamw only"),
    ("span", ["--optimizer", "adafactor", "--beta2", "0.5"], "--beta2 applies to --optimizer adamw only"),
    ("span", ["--schedule", "constant", "--decay-steps", "2"],
     "--decay-steps applies to --schedule cosine or linear only"),
    ("span", ["--schedule", "inverse_sqrt", "--decay-steps", "2"],
     "--decay-steps applies to --schedule cosine or linear"),
    ("span", ["--schedule", "constant", "--min-lr", "0.0005"], "--min-lr applies to --schedule cosine or linear or"),
    ("mlm", ["--max-decoder-len", "8"], "--max-decoder-len applies to span, ul2, prefix data only"),
    ("mlm", ["--alpha", "7"], "--alpha applies to span, ul2, prefix data only"),
])
def test_an_option_that_would_be_ignored_is_refused(tmp_path, span_data, objective, args, refused):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    data = span_data if objective == "span" else write_fake_build(tmp_path / "mlm", objective="mlm", n_rows=12)
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", str(data), "--out", str(run), "--max-steps", "1", *args])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {refused}")
    assert not run.exists()
