"""Mixtures of builds: the weights' strategies against the T5 paper's formulas written out here, achieved token
fractions against the weights (a statistical test), a repeated source reading a new seed on each pass (on the rows
trained), resume bit for bit and resume with new weights (nothing repeated or skipped, on the rows read), the
Hugging Face Trainer on a two-source mixture, and bad input as one line with exit 2."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from mlmprep.cli import app
from mlmprep.config import TrainConfig
from mlmprep.format.html import report_page, report_sources
from mlmprep.format.load import open_epoch, open_split
from mlmprep.train import mixture
from mlmprep.train.batch import Budget
from mlmprep.train.checkpoint import checkpoints
from mlmprep.train.loop import fit
from mlmprep.train.mixture import mix_weights, open_mixture
from tests.conftest import build_tiny, tiny_documents
from tests.fakes import write_fake_build

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = dict(max_tokens_per_batch=512, max_tokens_per_microbatch=256, max_examples_per_microbatch=8, warmup_steps=2,
             eval_every=0, log_every=2, save_every=0, deterministic=True)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Three builds of one tokenizer: 80 rows of 32-token windows, 24 of 96 (six seeds), 40 ragged rows."""
    root = tmp_path_factory.mktemp("mix")
    lengths = np.random.default_rng(5).integers(12, 40, size=40)
    return (write_fake_build(root / "big", n_rows=80),
            write_fake_build(root / "small", n_rows=24, window_length=96, n_seeds=6, seed=1),
            write_fake_build(root / "ragged", lengths=lengths, seed=2))


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of ~4 batches, so that short runs cross chunk boundaries."""
    monkeypatch.setattr(mixture, "CHUNK_BATCHES", 4)


# ----------------------------------------------------------------------------- weights
def test_strategies_follow_the_t5_papers_formulas():
    """Reference written from the paper: r_i = min(e_i, K) / sum_j min(e_j, K); temperature: r_i proportional to
    e_i ** (1 / T), renormalised; proportional: e_i / sum e."""
    sizes = [1_000_000, 30_000, 2_500]
    total = sum(sizes)
    assert mix_weights(sizes, "proportional").tolist() == pytest.approx([e / total for e in sizes], rel=1e-12)
    for t in (1.0, 2.0, 3.5):
        scaled = [e ** (1 / t) for e in sizes]
        assert mix_weights(sizes, f"temperature:{t}").tolist() == pytest.approx([x / sum(scaled) for x in scaled],
                                                                                rel=1e-12)
    for k in (10_000, 100_000, 10**9):
        capped = [min(e, k) for e in sizes]
        assert mix_weights(sizes, f"cap:{k}").tolist() == pytest.approx([x / sum(capped) for x in capped], rel=1e-12)
    assert mix_weights(sizes, "temperature:1").tolist() == pytest.approx(mix_weights(sizes, "proportional").tolist())


def test_rows_a_source_gives_for_a_quota_follow_a_running_sum():
    """The rows a take gives for a quota, also past the first heads of rows it sums: a plain running sum says."""
    rng = np.random.default_rng(4)
    window = rng.integers(1, 50, size=5000)
    rows = rng.permutation(5000)
    for quota in (0.0, 0.5, 30.0, 20_000.0, 60_000.5, float(window.sum()), 1e12):
        k, total = 0, 0
        while k < len(rows) and total + window[rows[k]] <= quota:
            total += window[rows[k]]
            k += 1
        assert mixture.rows_within(window, rows, quota) == (k, float(total)), quota
    assert mixture.rows_within(window, rows[:0], 10.0) == (0, 0.0)


def test_open_mixture_sizes_come_from_the_window_tokens(builds):
    big, small, ragged = builds
    m = open_mixture([big, small], mix="temperature:2")
    assert [s.tokens for s in m.sources] == [80 * 32, 24 * 96]
    assert m.weights.tolist() == pytest.approx([math.sqrt(2560) / (math.sqrt(2560) + math.sqrt(2304)),
                                               math.sqrt(2304) / (math.sqrt(2560) + math.sqrt(2304))])
    assert open_mixture([big, small], weights="3,1").weights.tolist() == [0.75, 0.25]
    assert open_mixture(["web=" + str(big), small]).names == ["web", "small"]


# ----------------------------------------------------------------------------- the plan
def step_tokens(plan, steps):
    """Window tokens per source of each step of the whole chunks holding the first `steps` steps, int64 [n, sources]."""
    out = []
    for chunk in plan.chunks():
        out += [chunk.batch_tokens(b, len(plan.mixture.sources)) for b in chunk.plan]
        if len(out) >= steps:
            return np.array(out)


def test_achieved_token_fractions_match_the_weights(builds):
    """Over 3000 steps the window tokens from each source match its weight: in total to within the tokens of a row or
    two (what a source is owed is carried to the next chunk), and the per-step fractions' mean to within 4 standard
    errors (a t test at a fixed seed)."""
    weights = np.array([0.5, 0.3, 0.2])
    m = open_mixture(builds, weights=weights)
    tokens = step_tokens(m.plan(Budget(512, 256, 8), seed=11), 3000)
    total = tokens.sum()
    assert np.abs(tokens.sum(0) - weights * total).max() <= 2 * 96
    per_step = tokens / tokens.sum(1, keepdims=True)
    t = (per_step.mean(0) - weights) / (per_step.std(0, ddof=1) / math.sqrt(len(per_step)))
    assert np.abs(t).max() < 4, t
    other = step_tokens(open_mixture(builds, weights=[0.2, 0.3, 0.5]).plan(Budget(512, 256, 8), seed=11), 3000)
    assert other.sum(0)[2] / other.sum() == pytest.approx(0.5, abs=0.001)  # the weights act


def test_plan_is_the_same_for_the_same_seed_and_differs_for_another(builds):
    budget = Budget(512, 256, 8)
    rows = [[mb.rows.tolist() for b in open_mixture(builds).plan(budget, seed=s).chunk(1).plan for mb in b.ranks[0]]
            for s in (1, 1, 2)]
    assert rows[0] == rows[1] != rows[2]


def test_each_chunk_starts_from_the_window_tokens_and_passes_trained_before_it(builds, small_chunks):
    """A chunk's `before` and `reading_before` are the window tokens and the last pass of the rows trained in the
    chunks before it, added up here row by row over every real microbatch: across a chunk cut short where the
    weights change (its untrained rows are not counted) and with two ranks (their stand-in rows are not)."""
    for world, schedule in ((1, [(0, [0.5, 0.3, 0.2]), (9, [0.2, 0.3, 0.5])]), (2, None)):
        plan = open_mixture(builds, weights=[0.5, 0.3, 0.2]).plan(Budget(512, 256, 8), seed=3, world_size=world,
                                                                 schedule=schedule)
        tokens, reading, ends, stand_ins = [0, 0, 0], [-1, -1, -1], [], 0
        for k in range(8):
            chunk = plan.chunk(k)
            assert chunk.before.tolist() == tokens and chunk.reading_before.tolist() == reading
            stand_ins += sum(mb.padding for batch in chunk.plan for rank in batch.ranks for mb in rank)
            for mb in (mb for batch in chunk.plan for rank in batch.ranks for mb in rank if not mb.padding):
                for r in mb.rows.tolist():
                    source = int(chunk.source[r])
                    tokens[source] += int(chunk.window[r])
                    reading[source] = max(reading[source], int(chunk.pass_of[r]))
            ends.append(chunk.start + len(chunk.plan))
        assert max(reading) >= 1  # past a source's first pass
        if schedule:
            assert 9 in ends and 9 % mixture.CHUNK_BATCHES  # a chunk was cut at the change
        else:
            assert stand_ins  # a rank was short of microbatches in some step


def row_identity(builds):
    """{(input_ids bytes, labels bytes): (source, seed split index, row)} of every seed split of every build; None
    for a row whose tokens another row has too (two seeds may mask a short window alike)."""
    out = {}
    for i, build in enumerate(builds):
        k = 0
        while (build / f"seed-{k}").is_dir():
            split = open_epoch(build, k)
            for r in range(len(split)):
                row = split.row(r)
                key = (row["input_ids"].tobytes(), row["labels"].tobytes())
                out[key] = None if key in out else (i, k, r)
            k += 1
    return out


def trained_rows(cfg, **kwargs):
    """(step, source, seed index, row) of every real row trained by fit(cfg), from the rows' tokens."""
    seen = []

    def hook(step, k, rows, padding):
        if not padding:
            seen.append((step, rows.copy()))

    final = fit(cfg, hook=hook, **kwargs)
    plan = open_mixture(cfg.sources, weights=cfg.weights).plan(
        Budget(cfg.max_tokens_per_batch, cfg.max_tokens_per_microbatch, cfg.max_examples_per_microbatch), seed=cfg.seed)
    return final, seen, plan


def identify(seen, splits_by_step, identity):
    out = []
    for step, rows in seen:
        split = splits_by_step(step)
        for r in rows:
            row = split.row(int(r))
            found = identity[(row["input_ids"].tobytes(), row["labels"].tobytes())]
            out.append((step, *(found or (None, None, None))))
    return out


def chunk_split_of(plan):
    starts = []

    def split(step):
        while not starts or starts[-1].start + len(starts[-1].plan) <= step:
            starts.append(plan.chunk(len(starts)))
        return next(c for c in starts if c.start <= step < c.start + len(c.plan)).split

    return split


def test_a_repeated_source_reads_a_new_seed_on_each_pass(tmp_path, builds, small_chunks):
    """`small` (24 rows, 6 seeds) at weight 0.8 passes over its rows three times or more in 36 steps: each window it
    trains again comes from another seed split, by the rows' tokens."""
    big, small, _ = builds
    cfg = TrainConfig(sources=(str(big), str(small)), weights="0.2,0.8", max_steps=36, out=str(tmp_path / "r"),
                      **SMALL)
    _, seen, plan = trained_rows(cfg)
    identity = row_identity([big, small])
    assert sum(1 for v in identity.values() if v and v[0] == 1) == 24 * 6  # small's rows are told apart by tokens
    rows = identify(seen, chunk_split_of(plan), identity)
    reads: dict[int, list[int]] = {}
    for _, source, k, r in rows:
        if source == 1:
            reads.setdefault(r, []).append(k)
    assert max(map(len, reads.values())) >= 3  # past three passes
    assert all(len(set(ks)) == len(ks) for ks in reads.values())  # never the same seed twice (6 > passes made)
    assert len(reads) == 24


def weights_of(run, step):
    return load_file(str(run / f"checkpoint-{step}" / "model" / "model.safetensors"))


def test_resume_continues_a_mixture_bit_for_bit(tmp_path, builds, small_chunks):
    big, small, ragged = builds
    base = dict(sources=(str(big), str(small), str(ragged)), weights="0.5,0.3,0.2", max_steps=14, decay_steps=14,
                keep_checkpoints=5, log_every=1, **{k: v for k, v in SMALL.items() if k != "log_every"})
    plan = open_mixture(base["sources"], weights=base["weights"]).plan(Budget(512, 256, 8), seed=0)
    stop = next(c.start + 1 for c in plan.chunks() if c.index and len(c.plan) > 1)  # inside a chunk past the first
    a = fit(TrainConfig(**base, out=str(tmp_path / "a")))
    cfg = TrainConfig(**base, out=str(tmp_path / "b"), resume=True)
    fit(replace(cfg, max_steps=stop, resume=False))
    state = json.loads((tmp_path / "b" / f"checkpoint-{stop}" / "state.json").read_text())
    assert state["cursor"] > 0 and state["mixture"]["names"] == ["big", "small", "ragged"]
    b = fit(cfg)
    wa, wb = weights_of(tmp_path / "a", 14), weights_of(tmp_path / "b", 14)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert {k: v for k, v in a.items() if "_s" not in k} == {k: v for k, v in b.items() if "_s" not in k}
    lines = [(tmp_path / r / "metrics.jsonl").read_text().splitlines() for r in "ab"]
    strip = [[{k: v for k, v in json.loads(x).items() if "_s" not in k and k != "tflops"} for x in r if '"lr"' in x]
             for r in lines]  # training lines: the stopped run's last evaluation stays in b's
    assert strip[0] == strip[1]
    assert "big/fraction" in strip[0][-1] and "small/seed" in strip[0][-1] and "ragged/loss" in strip[0][-1]


def test_a_sources_training_loss_is_its_rows_summed_loss_over_its_label_tokens(tmp_path, builds):
    """Each step's line (--log-every 1): the sources' losses weighted by their rows' label tokens, counted here from
    the rows the step trained, add up to the step's loss times all its label tokens; a source with no row is None."""
    big, _, ragged = builds
    cfg = TrainConfig(sources=(str(big), str(ragged)), weights="0.6,0.4", max_steps=4, out=str(tmp_path / "r"),
                      log_every=1, **{k: v for k, v in SMALL.items() if k != "log_every"})
    _, seen, plan = trained_rows(cfg)
    chunk = plan.chunk(0)
    assert len(chunk.plan) >= 4
    lines = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    for line in (x for x in lines if "lr" in x):
        rows = np.concatenate([rows for step, rows in seen if step == line["step"] - 1])
        targets = np.bincount(chunk.source[rows], weights=chunk.split.n_targets[rows], minlength=2)
        losses = [line["big/loss"], line["ragged/loss"]]
        assert [loss is None for loss in losses] == [t == 0 for t in targets]
        summed = sum(loss * t for loss, t in zip(losses, targets) if loss is not None)
        assert summed == pytest.approx(line["loss"] * targets.sum(), rel=1e-6)


def test_resume_with_new_weights_repeats_and_skips_nothing(tmp_path, builds, small_chunks, capsys):
    """Stopped mid-chunk at 0.5/0.5 and resumed at 0.9/0.1 up to the end of a chunk: no row (source, seed split,
    row) is trained twice, and each source has trained every row of its passes before its last and a prefix of
    its last pass's order (none skipped: the untrained rows of the cut chunk came back first); the new weights show
    in the rows trained after it."""
    _, small, _ = builds
    big = write_fake_build(tmp_path / "big", n_rows=80, n_seeds=6, window_length=96)  # a pass is its seed split
    base = dict(sources=(str(big), str(small)), weights="0.5,0.5", max_steps=7, out=str(tmp_path / "w"), **SMALL)
    resumed = open_mixture(base["sources"], weights="0.9,0.1").plan(
        Budget(512, 256, 8), seed=0, schedule=[(0, [0.5, 0.5]), (7, [0.9, 0.1])])
    end = next(c.start + len(c.plan) for c in resumed.chunks() if c.start + len(c.plan) >= 20)
    _, seen_a, plan_a = trained_rows(TrainConfig(**base))
    out = capsys.readouterr().err
    _, seen_b, _ = trained_rows(TrainConfig(**{**base, "weights": "0.9,0.1", "max_steps": end, "resume": True}))
    assert "mixture weights change at step 7: big 0.500 -> 0.900, small 0.500 -> 0.100" in capsys.readouterr().err
    assert "change" not in out
    state = json.loads((checkpoints(tmp_path / "w")[-1] / "state.json").read_text())
    assert state["mixture"]["schedule"] == [[0, [0.5, 0.5]], [7, [0.9, 0.1]]]
    identity = row_identity([big, small])
    rows = identify(seen_a, chunk_split_of(plan_a), identity) + identify(seen_b, chunk_split_of(resumed), identity)
    keys = [(s, k, r) for _, s, k, r in rows]
    assert None not in {s for s, _, _ in keys}  # every row told apart by its tokens
    assert len(keys) == len(set(keys))  # nothing twice
    for source, name, n in ((0, "big", 80), (1, "small", 24)):
        by_pass: dict[int, set] = {}
        for s, k, r in keys:
            if s == source:
                by_pass.setdefault(k, set()).add(r)
        last = max(by_pass)
        assert all(by_pass.get(k) == set(range(n)) for k in range(last))
        assert by_pass[last] == set(mixture.row_order(0, name, last, n)[: len(by_pass[last])].tolist())
    late = [s for step, s, _, _ in rows if step >= 14]
    assert late.count(0) / len(late) > 0.8


# ----------------------------------------------------------------------------- for your own loop
def test_hf_trainer_trains_on_a_two_source_mixture(tmp_path, builds):
    """The Trainer's DataLoader takes MixtureSampler as batch_sampler over MixtureRows, collated by Collator."""
    from transformers import Trainer, TrainingArguments

    from mlmprep.train.collate import Collator
    from mlmprep.train.mixture import MixtureRows
    from mlmprep.train.model import build_model

    big, small, _ = builds
    m = open_mixture([big, small], weights=[0.7, 0.3])
    tok = m.sources[0].manifest.tokenizer
    sampler = m.sampler(Budget(512, 256, 8), seed=0, steps=6)
    rows = MixtureRows(sampler)
    collator = Collator("span", tok.pad_id, tok.decoder_start_id, vocab_size=tok.vocab_size)
    seen = []

    class MixtureTrainer(Trainer):
        def get_train_dataloader(self):
            return torch.utils.data.DataLoader(rows, batch_sampler=sampler, collate_fn=self.collate)

        def collate(self, examples):
            seen.append(len(examples))
            return collator(examples)

    torch.manual_seed(0)
    model = build_model("tiny", "span", tok, max_length=64)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), max_steps=6, per_device_train_batch_size=1,
                             learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=True, logging_steps=1,
                             disable_tqdm=True)
    result = MixtureTrainer(model=model, args=args, train_dataset=rows).train()
    assert result.global_step == 6 and math.isfinite(result.training_loss)
    expected = [sum(len(mb.rows) for mb in b.ranks[0]) for b in m.plan(Budget(512, 256, 8), seed=0).chunk(0).plan[:6]]
    assert seen == expected
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())


# ----------------------------------------------------------------------------- ul2 builds mixed
@pytest.fixture(scope="module")
def ul2_builds(tmp_path_factory, tiny_tokenizer_path):
    """Two real ul2 builds (UL2's seven denoisers, input length 64, two seeds) of two corpora, one tokenizer."""
    root = tmp_path_factory.mktemp("ul2mix")
    out = []
    for k, name in enumerate(("a", "b")):
        corpus = root / f"{name}.txt"
        corpus.write_text("\n".join(tiny_documents(260 - 100 * k, seed=10 + k)) + "\n", encoding="utf-8")
        out.append(build_tiny(root / name, corpus, tiny_tokenizer_path, objective="ul2", input_length=64))
    return out


def window_tokens_counted(build: Path, row: dict) -> int:
    """A variable-length row's window tokens by the rule mixtures document: its real tokens (input_ids + labels)
    times window_length / (input_length + target_length), rounded, at least 1; from the build's manifest.json."""
    m = json.loads((build / "manifest.json").read_text())
    real = len(row["input_ids"]) + len(row["labels"])
    return max(1, round(real * m["window_length"] / (m["input_length"] + m["target_length"])))


def test_a_mixture_of_ul2_builds_takes_the_right_rows_in_the_weights_shares_and_logs_each_denoiser(tmp_path,
                                                                                                  ul2_builds):
    """a and b at 0.7/0.3: every row of the plan's first chunk, found by its tokens in the builds' own seed splits,
    is a row of the source the plan names, and the window tokens counted here per build are the weights' shares to
    within the longest row. Trained 5 steps (a line each): the logged a/tokens and b/tokens are the counts of the
    rows trained; the per-source and the per-denoiser losses, weighted by label tokens counted here (per denoiser:
    the denoiser column of the row's own build), each add up to the step's loss; each source's set is evaluated per
    denoiser too."""
    a, b = ul2_builds
    identity = row_identity([a, b])
    assert sum(v is not None for v in identity.values()) >= 0.99 * len(identity)  # rows are told apart by tokens
    splits = {(i, k): open_epoch(build, k) for i, build in enumerate((a, b)) for k in (0, 1)}
    names = splits[0, 0].denoisers
    assert len(names) == 7 and splits[1, 0].denoisers == names

    budget = Budget(2048, 1024, 16)
    chunk = open_mixture([a, b], weights=[0.7, 0.3]).plan(budget, seed=3).chunk(0)
    found = [identity[(row["input_ids"].tobytes(), row["labels"].tobytes())]
             for row in map(chunk.split.row, range(len(chunk.split)))]
    assert [f[0] for f in found if f] == [int(s) for s, f in zip(chunk.source, found) if f]
    tokens = np.zeros(2)
    for source, k, r in filter(None, found):
        tokens[source] += window_tokens_counted((a, b)[source], splits[source, k].row(r))
    assert np.abs(tokens - np.array([0.7, 0.3]) * tokens.sum()).max() <= 2 * 128  # two rows of at most 128

    cfg = TrainConfig(sources=(f"a={a}", f"b={b}"), weights="0.7,0.3", max_steps=5, out=str(tmp_path / "r"), seed=3,
                      max_tokens_per_batch=2048, max_tokens_per_microbatch=1024, max_examples_per_microbatch=16,
                      warmup_steps=1, log_every=1, eval_every=5, save_every=0)
    _, seen, plan = trained_rows(cfg)
    rows_of = chunk_split_of(plan)
    lines = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    done = np.zeros(2)
    for line in (x for x in lines if "lr" in x):
        per_source, per_denoiser = np.zeros(2), np.zeros(len(names))
        for step, rows in seen:
            if step != line["step"] - 1:
                continue
            for r in rows:
                trained_row = rows_of(step).row(int(r))
                source, k, row = identity[(trained_row["input_ids"].tobytes(), trained_row["labels"].tobytes())]
                own = splits[source, k].row(row)
                per_source[source] += len(own["labels"])  # every ul2 label is a target
                per_denoiser[int(own["denoiser"])] += len(own["labels"])
                done[source] += window_tokens_counted((a, b)[source], own)
        assert [line["a/tokens"], line["b/tokens"]] == done.tolist()
        for losses, targets in (([line["a/loss"], line["b/loss"]], per_source),
                                ([line.get(f"train/denoiser/{n}/loss") for n in names], per_denoiser)):
            assert [loss is None for loss in losses] == [t == 0 for t in targets]
            summed = sum(loss * t for loss, t in zip(losses, targets) if loss is not None)
            assert summed == pytest.approx(line["loss"] * targets.sum(), rel=1e-5)
    evaluated = next(x for x in lines if "eval/a/loss" in x)
    for build, source in ((a, "a"), (b, "b")):
        shown = {n for n in names if f"eval/{source}/denoiser/{n}/loss" in evaluated}
        assert shown == {names[d] for d in np.unique(open_split(build / "validation").denoiser)}
        assert all(math.isfinite(evaluated[f"eval/{source}/denoiser/{n}/loss"]) for n in shown)


# ----------------------------------------------------------------------------- bad input
STOP = ["--max-steps", "2"]


@pytest.mark.parametrize("extra, words", [
    (["--weights", "0.5,-1", *STOP], "--weights: '-1' is not a positive finite number"),
    (["--weights", "0.5,nan", *STOP], "--weights: 'nan' is not a positive finite number"),
    (["--weights", "0,1", *STOP], "--weights: '0' is not a positive finite number"),
    (["--weights", "0.5,0.3,0.2", *STOP], "--weights: 3 weights for 2 sources"),
    (["--weights", "1,1", "--mix", "cap:100", *STOP], "--weights and --mix cap:100 both set the proportions"),
    (["--mix", "temperature:0", *STOP], "--mix temperature:0: give proportional"),
    (["--epochs", "2"], "--epochs 2: a mixture's builds each keep their own passes"),
    ([], "has no epoch to end at; give --max-steps or --max-tokens"),
])
def test_bad_mixture_options_are_one_line(tmp_path, builds, extra, words):
    big, small, _ = builds
    result = CliRunner().invoke(app, ["train", str(big), str(small), "--out", str(tmp_path / "r"), *extra])
    assert result.exit_code == 2, result.output
    assert words in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "r").exists()


def test_weights_for_one_build_are_one_line(tmp_path, builds):
    result = CliRunner().invoke(app, ["train", str(builds[0]), "--weights", "1", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "--weights 1: applies to a mixture of builds" in result.output, result.output


def test_bad_builds_are_one_line(tmp_path, builds):
    big, small, _ = builds
    mlm = write_fake_build(tmp_path / "mlm", objective="mlm", n_rows=40)
    other = write_fake_build(tmp_path / "other", n_rows=40, vocab_size=170)
    tiny = write_fake_build(tmp_path / "tiny", n_rows=2, window_length=8)
    for data, words in (([big, big], "given twice in the mixture"),
                        ([big, tmp_path / "nothing"], "nothing: no such directory"),
                        ([big, mlm], "mlm is mlm data and"),
                        ([big, other], "built with different tokenizers"),
                        ([big, tiny], "source tiny (" + str(tiny) + "): 2 rows, less than one microbatch"),
                        ([big, "web=s3://bucket/web"], "s3://bucket/web: a mixture reads builds on local disk")):
        result = CliRunner().invoke(app, ["train", *map(str, data), "--out", str(tmp_path / "r"), "--max-steps", "2",
                                          "--max-tokens-per-batch", "512", "--max-tokens-per-microbatch", "256"])
        assert result.exit_code == 2, result.output
        assert words in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert not (tmp_path / "r").exists()


def test_a_config_file_lists_sources_and_validation_name_dir_adds_a_set(tmp_path, builds):
    """Sources from a --config file, --max-tokens as the stop, and --validation NAME=DIR evaluated beside the
    sources' own sets but left out of their weighted mean."""
    big, small, ragged = builds
    config = tmp_path / "mix.yaml"
    config.write_text(f"sources:\n  - path: {big}\n    weight: 0.8\n    name: web\n  - path: {small}\n    weight: 0.2\n"
                      "max_tokens: 1500\nmax_tokens_per_batch: 512\nmax_tokens_per_microbatch: 256\neval_every: 0\n")
    result = CliRunner().invoke(app, ["train", "--config", str(config), "--out", str(tmp_path / "r"),
                                      "--validation", f"held={ragged / 'validation'}", "--log-every", "1"])
    assert result.exit_code == 0, result.output
    # no epochs in a mixture's words: its logs say chunk, and so do its metrics
    steps = [line for line in result.output.splitlines() if line.startswith("step ") and "loss" in line]
    assert steps and all(" (chunk 0): loss " in line for line in steps), result.output
    assert "epoch" not in result.output
    lines = [json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert all("epoch" not in r for r in lines) and all(r["chunk"] == 0 for r in lines if "lr" in r)
    assert (tmp_path / "r" / "plots.png").stat().st_size > 0  # drawn at the mixture's evaluation too
    assert report_sources(tmp_path / "r", None) == (None, tmp_path / "r")  # not the first source's build alone
    page = report_page(None, tmp_path / "r")
    facts = page[page.index('<section id="run">'):][:page[page.index('<section id="run">'):].index("</table>")]
    assert f"web={big}" in facts and str(small) in facts and "0.8,0.2" in facts  # every source, and the weights
    final = json.loads((tmp_path / "r" / "final_metrics.json").read_text())
    assert "epoch" not in final and final["chunk"] == 0
    assert (final["web/target"], final["small/target"]) == (0.8, 0.2)
    assert 1500 <= final["tokens"] < 1500 + 512
    assert {"eval/held/loss", "eval/web/loss", "eval/small/accuracy"} <= final.keys()
    assert final["eval_loss"] == pytest.approx(0.8 * final["eval/web/loss"] + 0.2 * final["eval/small/loss"])
    assert "weighted mean" in result.output
    # one row per source and per extra validation set, with the figures of final_metrics.json; none left as facts
    table = page[page.index('<table class="splits sources">'):]
    rows = [re.findall(r"<td>([^<]*)</td>", row) for row in table[:table.index("</table>")].split("</tr>")[1:-1]]
    want = [[n, f"{final.get(f'{n}/target', 0):.3f}", f"{final.get(f'{n}/fraction', 0):.3f}",
             f"{final.get(f'{n}/tokens', 0):,}", str(final.get(f"{n}/pass")), str(final.get(f"{n}/seed")),
             f"{final[f'eval/{n}/loss']:.4f}", f"{final[f'eval/{n}/accuracy']:.4f}"] for n in ("web", "small", "held")]
    want[2][1:6] = ["-"] * 5  # held is evaluated only
    assert sorted(rows[:2]) == sorted(want[:2]) and rows[2] == want[2]
    assert "web/fraction" not in facts and "eval/held/loss" not in page and f"{final['tokens']:,}" in page


# ----------------------------------------------------------------------------- DDP
DDP_WORKER = """
import json, os, sys
from mlmprep.config import TrainConfig
from mlmprep.train import mixture
from mlmprep.train.loop import fit

mixture.CHUNK_BATCHES = 4
for port, options in json.loads(sys.argv[1]):  # each fit makes its own process group
    os.environ.update(MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="False")
    fit(TrainConfig(**options))
"""


@pytest.mark.slow  # torchrun, two ranks, twice; test_ddp.py keeps DDP in the default run
def test_ddp_resume_of_a_mixture_is_exact(tmp_path, builds):
    """Two gloo ranks: a mixture stopped inside a chunk and resumed ends bit for bit as the uninterrupted run."""
    import os
    import subprocess
    import sys

    from tests.train.test_ddp import free_port

    big, small, ragged = builds
    base = dict(sources=[str(big), str(small), str(ragged)], weights="0.5,0.3,0.2", max_steps=8, decay_steps=8,
                **{**SMALL, "max_tokens_per_batch": 1024})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mixture, "CHUNK_BATCHES", 4)
        plan = open_mixture(base["sources"], weights=base["weights"]).plan(Budget(1024, 256, 8), seed=0, world_size=2)
        stop = next(c.start + 1 for c in plan.chunks() if c.index and len(c.plan) > 1)
    runs = [{**base, "out": str(tmp_path / "a")}, {**base, "out": str(tmp_path / "b"), "max_steps": stop},
            {**base, "out": str(tmp_path / "b"), "resume": True}]
    (tmp_path / "worker.py").write_text(DDP_WORKER)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), str(tmp_path / "worker.py"),
               json.dumps([(free_port(), options) for options in runs])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"})
    assert done.returncode == 0, done.stderr[-3000:]
    state = json.loads((tmp_path / "b" / f"checkpoint-{stop}" / "state.json").read_text())
    assert state["world_size"] == 2 and state["cursor"] > 0
    wa, wb = weights_of(tmp_path / "a", 8), weights_of(tmp_path / "b", 8)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    fa, fb = (json.loads((tmp_path / r / "final_metrics.json").read_text()) for r in "ab")
    assert {k: v for k, v in fa.items() if "_s" not in k} == {k: v for k, v in fb.items() if "_s" not in k}


def test_the_worked_example_of_the_mixtures_page_is_exact():
    """docs/mixtures.md's figures, from the span arithmetic: --max-tokens counts encoder + decoder tokens, the
    weights window tokens."""
    from mlmprep.builder.mask import compute_input_and_target_lengths

    page = " ".join((Path(__file__).resolve().parents[2] / "docs" / "mixtures.md").read_text().split())
    window, target = compute_input_and_target_lengths(512, 0.15, 3)
    windows = 2e9 * window / (512 + target)
    web, wiki = 0.8 * windows, 0.2 * windows
    expected = (f"a window of {window} tokens becomes 512 encoder and {target} decoder tokens, {512 + target} in all, "
                f"so 2 B tokens are 2 B × {window} / {512 + target} ≈ {windows / 1e9:.2f} B window tokens. Web gives "
                f"80% of them, {web / 1e9:.2f} B ({web / 5e9:.0%} of one pass), and wiki {wiki / 1e6:.0f} M: "
                f"{wiki / 50e6:.1f} passes")
    assert expected in page
    assert f"give `--max-tokens` 2 B × {512 + target} / {window} ≈ {2e9 * (512 + target) / window / 1e9:.1f} B" in page

