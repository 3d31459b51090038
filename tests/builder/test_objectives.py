"""UL2's mixture of denoisers, the prefix LM and masked diffusion, checked row by row against references computed
here: T5's random_spans_noise_mask arithmetic, the prefix split's distribution, MDLM's binomial masking; every
corpus token in exactly one row of every seed; the same bytes on one and several workers and after remask."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tests.cli.test_build import assert_refused, cli
from tests.conftest import build_tiny, tiny_documents

INPUT = 64
SPECS = {"R3-0.15": ("[NLU]", 3, 0.15), "R8-0.15": ("[NLU]", 8, 0.15), "X3-0.5": ("[NLG]", 3, 0.5),
         "X8-0.5": ("[NLG]", 8, 0.5), "X64-0.15": ("[NLG]", 64, 0.15), "X64-0.5": ("[NLG]", 64, 0.5)}


def t5_counts(length: int, density: float, mean: float) -> tuple[int, int]:
    """T5's random_spans_noise_mask: noise round(L * r) in [1, L - 1], spans max(1, round(noise / mean)); Python's
    round is half-to-even as np.round."""
    noise = min(max(round(length * density), 1), length - 1)
    return noise, max(round(noise / mean), 1)


def t5_raw_length(input_length: int, density: float, mean: float) -> int:
    """The largest row whose input, mode + kept + one sentinel per span + EOS, is exactly input_length."""
    fits = [L for L in range(2, 4 * input_length) if 1 + L - t5_counts(L, density, mean)[0]
            + t5_counts(L, density, mean)[1] + 1 == input_length]
    return max(fits)


def test_the_denoisers_arithmetic_is_t5_s_at_every_length():
    """Noise and spans at every row length, and each denoiser's raw length at several input lengths, against
    T5's formulas as written above (the short last row of a stream can have any length)."""
    from mlmprep.builder import mask
    from mlmprep.builder.denoisers import Mixture

    lengths = np.arange(2, 3000)
    for _, mean, density in SPECS.values():
        noise, spans = mask.span_counts(lengths, density, mean, exact_t5=True)
        assert [(int(n), int(k)) for n, k in zip(noise, spans)] == [t5_counts(int(L), density, mean) for L in lengths]
    for input_length in (64, 100, 128, 333, 512):
        mixture = Mixture.of("ul2", ",".join(SPECS), None, input_length)
        assert mixture.raw.tolist() == [t5_raw_length(input_length, d, m) for _, m, d in SPECS.values()]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("objectives") / "corpus.txt"
    path.write_text("\n".join(tiny_documents(1500, seed=3)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ul2(tmp_path_factory, corpus, tiny_tokenizer_path) -> Path:
    return build_tiny(tmp_path_factory.mktemp("ul2") / "b", corpus, tiny_tokenizer_path, objective="ul2",
                      input_length=INPUT, seeds=3, rows_per_file=100)


def columns(split: Path) -> dict[str, list]:
    import datasets

    ds = datasets.load_from_disk(str(split))
    return {name: ds[name] for name in ds.column_names}


def stream(build: Path, side: str = "windows") -> list[int]:
    return [t for row in columns(build / side)["tokens"] for t in row]


def vocabulary(build: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(build / "tokenizer.json"))
    sentinel = {tok.token_to_id(f"<extra_id_{k}>"): k for k in range(100)}
    return tok, sentinel, tok.token_to_id("</s>")


def test_every_span_denoiser_s_rows_follow_t5_s_arithmetic_and_every_token_is_in_one_row_of_each_seed(ul2, corpus):
    tok, sentinel, eos = vocabulary(ul2)
    manifest = json.loads((ul2 / "manifest.json").read_text())
    names = [d["name"] for d in manifest["denoisers"]]
    assert names == [*SPECS, "S"]
    whole = stream(ul2)
    for split in ("seed-0", "seed-1", "seed-2"):
        data, rebuilt, seen = columns(ul2 / split), [], set()
        n = len(data["input_ids"])
        for r, (x, y, d) in enumerate(zip(data["input_ids"], data["labels"], data["denoiser"])):
            name = names[d]
            seen.add(name)
            last = r == n - 1
            assert x[-1] == eos and y[-1] == eos
            assert last or len(x) == INPUT
            if name == "S":  # prefix LM: the input is [S2S] prefix </s>, the target the rest, no sentinels
                assert x[0] == tok.token_to_id("[S2S]")
                assert not set(x + y) & sentinel.keys()
                assert last or len(x) == INPUT
                rebuilt += x[1:-1] + y[:-1]
                continue
            mode, mean, density = SPECS[name]
            assert x[0] == tok.token_to_id(mode)
            body, target = x[1:-1], y[:-1]
            marks = [sentinel[t] for t in body if t in sentinel]
            length = len(body) - len(marks) + len(target) - len(marks)  # the row's raw tokens
            if not last:
                assert length == t5_raw_length(INPUT, density, mean), (split, r, name)
            noise, spans = t5_counts(length, density, mean)
            assert marks == list(range(spans)) == [sentinel[t] for t in target if t in sentinel]
            assert len(target) - spans == noise
            assert body[0] not in sentinel and body[-1] in sentinel  # kept part first, noise part last (no roll)
            pieces, k = {}, None
            for t in target:
                k = sentinel[t] if t in sentinel else k
                pieces.setdefault(k, [])
                if t not in sentinel:
                    pieces[k].append(t)
            assert all(pieces[k] for k in range(spans))  # no empty noise span
            rebuilt += [u for t in body for u in (pieces[sentinel[t]] if t in sentinel else [t])]
        assert rebuilt == whole, split  # every token once, in order: none dropped or repeated
        assert seen == set(names)
    assert manifest["statistics"]["windows"]["tokens_dropped"] == 0
    # the two sides' streams hold every document of the corpus and its </s>, tokenized here
    documents = corpus.read_text(encoding="utf-8").splitlines()
    assert len(set(documents)) == len(documents)  # nothing for dedup to drop
    expected = sum(len(tok.encode(doc, add_special_tokens=False).ids) + 1 for doc in documents)
    assert len(whole) + len(stream(ul2, "validation-windows")) == expected


def test_each_seed_draws_its_own_mixture_and_the_shares_follow_the_weights(tmp_path, corpus, tiny_tokenizer_path, ul2):
    seeds = [columns(ul2 / f"seed-{k}")["denoiser"] for k in range(2)]
    assert seeds[0][:50] != seeds[1][:50]
    n = len(seeds[0])
    for d in range(7):  # uniform weights: each share within 4 standard deviations of 1/7
        assert abs(seeds[0].count(d) / n - 1 / 7) < 4 * math.sqrt(1 / 7 * 6 / 7 / n)
    out = build_tiny(tmp_path / "w", corpus, tiny_tokenizer_path, objective="ul2", input_length=INPUT, seeds=1,
                     denoisers="R3-0.15,S", denoiser_weights="3,1")
    which = columns(out / "seed-0")["denoiser"]
    share = which.count(0) / len(which)
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / len(which))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["statistics"]["masking"]["seed-0"]["R3-0.15/share"] == pytest.approx(share)


def test_the_prefix_lm_s_target_share_is_uniform_on_0_to_half(tmp_path, corpus, tiny_tokenizer_path):
    out = build_tiny(tmp_path / "p", corpus, tiny_tokenizer_path, objective="prefix", input_length=INPUT, seeds=2)
    whole, shares = stream(out), []
    for split in ("seed-0", "seed-1"):
        data = columns(out / split)
        assert set(data["denoiser"]) == {0}
        rebuilt = []
        for r, (x, y) in enumerate(zip(data["input_ids"], data["labels"])):
            rebuilt += x[:-1] + y[:-1]
            if r < len(data["input_ids"]) - 1:
                assert len(x) == INPUT  # no mode token: the prefix is input_length - 1 tokens and </s>
                shares.append((len(y) - 1) / (len(x) - 1 + len(y) - 1))
        assert rebuilt == whole
    assert stats.kstest(shares, stats.uniform(0, 0.5).cdf).pvalue > 1e-3
    assert np.mean(shares) == pytest.approx(0.25, abs=0.03)


def test_the_s_denoiser_s_share_is_uniform_over_many_rows():
    """The plan alone, over 200,000 rows: the split is T5's random_prefix_noise_mask at density 0.25 (a target
    share uniform on (0, 0.5)), seen through the row lengths."""
    from mlmprep.builder.denoisers import Mixture

    mixture = Mixture.of("prefix", "", None, 512)
    _, lengths = mixture.plan(7, 0, 200_000)
    prefix = 511
    shares = (lengths - prefix) / lengths
    assert stats.kstest(shares, stats.uniform(0, 0.5).cdf).statistic < 0.01


@pytest.fixture(scope="module")
def mdlm(tmp_path_factory, corpus, wordpiece_path) -> Path:
    return build_tiny(tmp_path_factory.mktemp("mdlm") / "b", corpus, wordpiece_path, objective="mdlm",
                      input_length=INPUT, seeds=2)


def test_mdlm_rates_are_uniform_and_each_row_masks_within_the_binomial_bound(mdlm):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(mdlm / "tokenizer.json"))
    specials = {tok.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    mask_id = tok.token_to_id("[MASK]")
    windows = columns(mdlm / "windows")["tokens"]
    for split in ("seed-0", "seed-1"):
        data = columns(mdlm / split)
        rates = np.array(data["rate"], dtype=np.float64)
        assert stats.kstest(rates, stats.uniform(0.001, 0.999).cdf).pvalue > 1e-3
        assert rates.min() > 0.001 and rates.max() <= 1.0
        inside = 0
        for window, x, y, t in zip(windows, data["input_ids"], data["labels"], rates):
            masked = [p for p, label in enumerate(y) if label != -100]
            assert all(x[p] == mask_id and y[p] == window[p] and window[p] not in specials for p in masked)
            assert all(x[p] == window[p] for p in range(len(x)) if y[p] == -100)
            n = sum(token not in specials for token in window)
            inside += abs(len(masked) - n * t) <= 2.6 * math.sqrt(n * t * (1 - t)) + 1
        assert inside >= 0.99 * len(rates), (split, inside, len(rates))
    assert columns(mdlm / "seed-0")["rate"][:20] != columns(mdlm / "seed-1")["rate"][:20]


def test_ul2_bytes_do_not_depend_on_workers_shards_or_remask(tmp_path, corpus, tiny_tokenizer_path, ul2):
    one = build_tiny(tmp_path / "one", corpus, tiny_tokenizer_path, objective="ul2", input_length=INPUT, seeds=2,
                     rows_per_file=100, workers=1)
    many = build_tiny(tmp_path / "many", corpus, tiny_tokenizer_path, objective="ul2", input_length=INPUT, seeds=2,
                      rows_per_file=100, workers=2, shard_bytes=20_000)
    files = sorted(p.relative_to(one) for p in one.rglob("*.arrow"))
    assert len(files) > 10
    assert all((one / f).read_bytes() == (many / f).read_bytes() for f in files)
    from mlmprep.builder.remask import remask

    assert remask(one, 3, threads=1) == ["seed-2"]
    assert sorted((one / "seed-2").glob("*.arrow")) and all(
        p.read_bytes() == (ul2 / "seed-2" / p.name).read_bytes() for p in (one / "seed-2").glob("*.arrow"))
    from mlmprep.builder.verify import verify

    assert verify(one).ok


def test_verify_finds_a_ul2_row_that_is_not_its_seed_s(tmp_path, ul2):
    """A row swapped for another (re-hashed into the manifest, so only the rows can tell)."""
    import hashlib
    import shutil

    import pyarrow as pa

    copy = tmp_path / "copy"
    shutil.copytree(ul2, copy)
    path = sorted((copy / "seed-0").glob("*.arrow"))[0]
    with pa.memory_map(str(path)) as source:
        reader = pa.ipc.open_stream(source)
        schema, batches = reader.schema, list(reader)
    table = pa.Table.from_batches(batches).to_pydict()
    table["denoiser"][3] = (table["denoiser"][3] + 1) % 7
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(pa.Table.from_pydict(table, schema=schema))
    manifest = json.loads((copy / "manifest.json").read_text())
    for record in manifest["splits"]["seed-0"]["files"]:
        if record["name"] == path.name:
            record["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
            record["bytes"] = path.stat().st_size
    (copy / "manifest.json").write_text(json.dumps(manifest))
    from mlmprep.builder.verify import verify

    report = verify(copy)
    assert any("seed-0 row 3: denoiser" in p for p in report.problems), report.problems


@pytest.mark.parametrize(("args", "words"), [
    (["--denoisers", "R3-0.15,Q2"], ("--denoisers", "'Q2' is not a denoiser")),
    (["--denoisers", "R3-1.5"], ("R3-1.5", "density in (0, 1)")),
    (["--denoisers", "S-0.6"], ("S-0.6", "(0, 0.5)")),
    (["--denoisers", "S,S"], ("named twice",)),
    (["--denoiser-weights", "1,2"], ("--denoiser-weights 1,2", "give 7 weights")),
    (["--pack", "doc"], ("--objective ul2", "--pack doc")),
], ids=["unknown", "density", "ratio", "twice", "weights", "pack-doc"])
def test_bad_denoiser_options_are_refused_in_one_line(tmp_path, corpus, tok, args, words):
    result = cli("build", corpus, "--out", tmp_path / "out", "--tokenizer", tok, "--objective", "ul2",
                 "--input-length", str(INPUT), *args)
    assert_refused(result.exit_code, result.stderr, *words)
    assert not (tmp_path / "out").exists()


def test_denoiser_options_apply_to_ul2_only(tmp_path, corpus, tok):
    result = cli("build", corpus, "--out", tmp_path / "out", "--tokenizer", tok, "--denoisers", "S")
    assert_refused(result.exit_code, result.stderr, "--denoisers applies to --objective ul2 only")


def test_a_given_tokenizer_gets_the_mode_tokens_and_a_note(tmp_path, corpus, tok):
    result = cli("build", corpus, "--out", tmp_path / "out", "--tokenizer", tok, "--objective", "ul2",
                 "--input-length", str(INPUT), "--seeds", "1", "--denoisers", "R3-0.15,S")
    assert result.exit_code == 0, result.stderr
    assert "vocabulary 402; mode tokens [NLU] 400, [S2S] 401 (special tokens: added to it" in result.stdout
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [d["mode"] for d in manifest["denoisers"]] == ["[NLU]", "[S2S]"]
    assert manifest["tokenizer"]["vocab_size"] == 402


def test_the_summary_and_the_report_show_each_denoiser_and_mdlm_s_rates(ul2, mdlm):
    from mlmprep.format.html import report_page
    from mlmprep.format.load import read_manifest
    from mlmprep.format.report import build_summary, show_examples

    manifest = read_manifest(ul2)
    shares = manifest.masking_stats["seed-0"]
    text = build_summary(ul2, manifest)
    for name in SPECS:
        assert f"  {name:<20}" in text and f"{shares[f'{name}/share']:>6.3f} (0.143)" in text
    shown = show_examples(ul2, manifest, n=3)
    first = columns(ul2 / "seed-0")["denoiser"][0]
    assert f"denoiser {manifest.denoisers[first]['name']} {manifest.denoisers[first]['mode']}" in shown
    page = report_page(ul2, None)
    assert "Denoisers: share of the rows of seed-0" in page
    assert re.search(r"seed-0: (R|X)\d+-0\.\d+ \[NLU|NLG\]|seed-0: S \[S2S\]", page)  # an example row's denoiser
    page = report_page(mdlm, None)
    assert "Masking rates t:" in page
    assert "rows per tenth of t:" in build_summary(mdlm, read_manifest(mdlm))
