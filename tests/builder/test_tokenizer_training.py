"""Training tokenizers: the Unigram one converted from SentencePiece's own model, the WordPiece one against the
`tokenizers` trainer's vocabulary, the special ids' layouts, the same bytes in every process and on any cores,
progress from the trainer's log, old files."""

from __future__ import annotations

import io
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from mlmprep.errors import TokenizerError
from mlmprep.tokenizer.load import N_SENTINELS, load_tokenizer, special_ids
from mlmprep.tokenizer.train import train_tokenizer
from mlmprep.tokenizer.unigram import SPM_OPTIONS, follow_log, train_model, unigram_tokenizer

KINDS = ("unigram", "wordpiece", "bpe")

spm = pytest.importorskip("sentencepiece")

OLD_TOKENIZER = Path(__file__).parents[1] / "data" / "unigram-tokenizers-0.23.json"  # made by mlmprep's earlier trainer
EDGE_CASES = [
    "In the beginning God created the heaven and the earth.",
    "  leading spaces and  double   spaces and a trailing one ",
    "digits 1234567890 and 3.14159 and 2024-11-27",
    "日本語のテキストと中文文本混合 mixed with English",
    "emoji 😀🎉 and symbols ∑∫ and unknown ☃ characters",
    "tabs\tand\nnewlines\n\nin one text",
    "x",
    " ",
]


def held_out(corpus: Path, train_chars: int, held_chars: int) -> tuple[list[str], list[str]]:
    """The first lines of `corpus` up to `train_chars` characters, and the last lines up to `held_chars`."""
    lines = [line for line in corpus.read_text(encoding="utf-8").split("\n") if line.strip()]
    train, held, size = [], [], 0
    for line in lines:
        if size >= train_chars:
            break
        train.append(line)
        size += len(line)
    size = 0
    for line in reversed(lines):
        if size >= held_chars:
            break
        held.append(line)
        size += len(line)
    return train, held


def assert_same_encoding(model: bytes, texts: list[str]) -> None:
    """The converted tokenizer gives SentencePiece's own ids for every text, and its pieces where known. One
    difference, the Metaspace pre-tokenizer's that mlmprep's tokenizers have always had: text that starts with a
    space gets no second "▁" before it, where SentencePiece's dummy prefix adds one."""
    sp = spm.SentencePieceProcessor(model_proto=model)
    tok = unigram_tokenizer(model)
    for text in texts:
        ours = tok.encode(text, add_special_tokens=False)
        theirs = sp.encode(text)
        if text.startswith(" "):
            assert theirs[0] == sp.piece_to_id("▁"), text
            theirs = theirs[1:]
        if ours.ids != theirs:  # an exact tie ("=" * 31): the same pieces in another order score the same, and
            assert sorted(ours.ids) == sorted(theirs), text  # the two Viterbi searches break ties differently
            continue
        assert [t for t, i in zip(ours.tokens, ours.ids) if i != sp.unk_id()] == \
            [sp.id_to_piece(i) for i in theirs if i != sp.unk_id()], text


@pytest.mark.parametrize("name", ["kjv.txt", "pydocs.txt"])
def test_the_converted_tokenizer_encodes_held_out_text_as_sentencepiece_does(corpora, name):
    train, held = held_out(corpora / name, 400_000, 60_000)
    model = train_model(train, 1000)
    assert_same_encoding(model, held + EDGE_CASES)


def test_edge_cases_encode_as_sentencepiece_does_with_cjk_and_digits_in_the_training_text():
    texts = [f"第{k}章 数字 {k * 37} 的测试 テスト{k % 7} emoji 😀 x{k}y" for k in range(400)] + EDGE_CASES[:3] * 20
    model = train_model(texts, 300)
    assert_same_encoding(model, EDGE_CASES + ["第九章", "测试😀😀", "12 345", "   "])


def test_special_ids_are_t5s_and_text_spelling_them_is_not_learnt():
    texts = [f"use <mask> and </s> or <pad> with <extra_id_{k % 3}> in line {k}, word{k % 89}" for k in range(900)]
    tok = train_tokenizer(texts, 300)
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "</s>", "<unk>", "<mask>"]
    ids = special_ids(tok)
    assert (ids.pad, ids.eos, ids.unk, ids.mask) == (0, 1, 2, 3)
    top = tok.get_vocab_size() - 1
    assert ids.sentinels.tolist() == list(range(top, top - N_SENTINELS, -1))
    pieces = tok.get_vocab(with_added_tokens=False)
    assert not [p for p, i in pieces.items() if i > 3 and p.strip("▁") in ("<mask>", "</s>", "<pad>", "mask>")], \
        "a special token's text was learnt as an ordinary piece"
    added = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    assert {"<pad>", "</s>", "<unk>", "<mask>", "<extra_id_0>"} <= added


def test_the_vocabulary_reaches_vocab_size_when_the_text_allows(corpora):
    train, _ = held_out(corpora / "kjv.txt", 500_000, 0)
    assert train_tokenizer(train, 3000).get_vocab_size() == 3000


def test_the_same_text_gives_the_same_bytes_on_one_core_and_on_several():
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two cores to tell a thread count taken from the machine")
    texts = [f"word{k % 97} and more words {k % 13} here, then numbers {k * 7919 % 10007}" for k in range(3000)]
    every = os.sched_getaffinity(0)
    first = train_tokenizer(texts, 500).to_str()
    try:
        os.sched_setaffinity(0, {min(every)})  # the trainer's process inherits one core
        one_core = train_tokenizer(texts, 500).to_str()
    finally:
        os.sched_setaffinity(0, every)
    assert one_core == first
    assert train_tokenizer(texts, 500).to_str() == first


def test_a_vocab_size_below_the_characters_is_refused_in_words():
    texts = ["".join(chr(0x4E00 + (k * 31 + j) % 400) for j in range(20)) for k in range(200)]
    with pytest.raises(TokenizerError, match=r"text.s 40[01] distinct characters") as refused:  # 400, and ▁
        train_tokenizer(texts, 150)
    needed = int(str(refused.value).rsplit("at least ", 1)[1])
    assert train_tokenizer(texts, needed).get_vocab_size() == needed  # the figure named is enough


def test_the_log_of_the_trainer_moves_the_progress():
    log = io.StringIO("\n".join([
        "I0000 00:00:1.1 1 unigram_model_trainer.cc:327] Extracting seed sentencepieces (libsais_omp, 8 threads)",
        "I0000 00:00:1.2 1 unigram_model_trainer.cc:514] Initialized 100000 seed pieces",
        "I0000 00:00:1.3 1 unigram_model_trainer.cc:903] EM sub_iter=0 size=60000 obj=8.6 num_tokens=9 bytes/tok=5.6",
        "I0000 00:00:1.4 1 unigram_model_trainer.cc:903] EM sub_iter=1 size=60000 obj=7.1 num_tokens=9 bytes/tok=5.6",
        "I0000 00:00:1.5 1 unigram_model_trainer.cc:903] EM sub_iter=0 size=45000 obj=7.1 num_tokens=9 bytes/tok=5.5",
        "I0000 00:00:1.6 1 unigram_model_trainer.cc:903] EM sub_iter=0 size=1100 obj=7.1 num_tokens=9 bytes/tok=5.5",
        "E0000 00:00:1.7 1 trainer.cc:1] something went wrong",
    ]))
    stages, rounds = [], []
    last = follow_log(log, 1000, lambda name, total: stages.append((name, total)),
                      lambda done, size: rounds.append((done, size)))
    assert stages == [("find seed pieces", 0), ("EM rounds, pruning pieces", 9)]  # 0.6 ** 9 * 100000 ~ 1000
    assert rounds == [(1, 60000), (1, 60000), (2, 45000), (9, 1100)]
    assert last.strip().endswith("something went wrong")


class Bar:
    """A progress.Stages that records its stages (name, total) and updates (done, note)."""

    total = done = 0

    def __init__(self):
        self.lines = []

    def stage(self, desc, total, unit, done=0):
        self.total, self.done = total, done
        self.lines.append((desc, total))

    def update(self, n=1, note=None, tokens=None):
        self.done += n
        self.lines.append((self.done, note))


def test_the_build_shows_the_training_stages_and_rounds(tmp_path, corpora):
    bar = Bar()
    train, _ = held_out(corpora / "kjv.txt", 300_000, 0)
    train_tokenizer(train, 180, bar=bar)  # 80 pieces: 600 seeds (one per 500 characters), four pruning rounds
    names = [line[0] for line in bar.lines if isinstance(line[0], str)]
    assert names == ["train tokenizer: find seed pieces", "train tokenizer: EM rounds, pruning pieces"]
    total = bar.lines[1][1]
    done = [line[0] for line in bar.lines[2:]]
    assert total > 3 and done == sorted(done) and total - 2 <= done[-1] <= total
    assert all(note.endswith(" pieces") for _, note in bar.lines[2:])


def test_a_tokenizer_file_made_by_an_earlier_version_still_loads_and_encodes():
    tok = load_tokenizer(OLD_TOKENIZER)
    ids = special_ids(tok)
    assert (ids.pad, ids.eos, ids.unk, ids.mask, len(ids.sentinels)) == (0, 1, 2, 3, N_SENTINELS)
    encoding = tok.encode("In the beginning God created the heaven", add_special_tokens=False)
    data = json.loads(OLD_TOKENIZER.read_text(encoding="utf-8"))
    scores = dict((p, s) for p, s in data["model"]["vocab"])
    assert encoding.tokens[0].startswith("▁") and all(t in scores for t in encoding.tokens)
    assert np.all(np.asarray(encoding.ids) > 3)


def test_a_document_far_longer_than_the_trainers_sentence_limit_is_learnt_from():
    words = [f"{a}{b}ing" for a in ("walk", "talk", "sing", "read") for b in ("", "er", "est")]
    document = " ".join(words[k * 7 % len(words)] for k in range(20_000))  # 150 K characters, one line
    tok = train_tokenizer([document], 300)
    assert tok.encode("walkering", add_special_tokens=False).tokens == ["▁walkering"]


def test_a_sample_of_blank_text_gives_the_special_tokens_alone_and_the_trainer_is_not_left_running():
    import psutil

    before = {p.pid for p in psutil.Process().children()}
    tok = train_tokenizer(["", "  \n ", "\t"], 300)
    assert tok.get_vocab_size() == 4 + N_SENTINELS
    assert {p.pid for p in psutil.Process().children()} == before


def test_pieces_reach_sentencepieces_16_characters_where_long_words_are_common():
    import random

    rng = random.Random(0)
    long = ["internationalisation", "counterrevolutionary", "characteristically", "incomprehensibility"]
    short = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 6))) for _ in range(300)]
    text = " ".join(rng.choice(long) if rng.random() < 0.2 else rng.choice(short) for _ in range(30_000))
    pieces = [p for p in train_tokenizer([text], 600).get_vocab() if not p.startswith("<")]
    assert max(map(len, pieces)) == 16  # "▁internationalis" and the like; a shorter limit costs tokens per character


def test_each_pruning_round_keeps_six_tenths_of_the_pieces(corpora):
    train, _ = held_out(corpora / "kjv.txt", 300_000, 0)
    sizes = []
    train_model(train, 300, options={**SPM_OPTIONS, "seed_sentencepiece_size": 6000},  # rounds down to 330
                on_round=lambda rounds, size: sizes.append(size))
    shares = [after / before for before, after in zip(sizes, sizes[1:-1])]  # the last prunes to the vocabulary
    assert len(shares) >= 3 and all(abs(share - 0.6) < 0.01 for share in shares), sizes


def test_the_sentences_reach_the_trainer_as_they_were_cut_whatever_they_hold():
    """feed's JSON lines, parsed a few lines at a time as the child parses them, are the documents' non-blank
    sentences in order: quotes, backslashes, tabs, line and paragraph separators and lone escapes included."""
    import io

    from mlmprep.tokenizer.encode import whitespace_pieces
    from mlmprep.tokenizer.unigram import SENTENCE_CHARS, feed, read_sentences

    texts = ['say "hi"\tthere', "back\\slash \\n", "line\u2028sep and\u2029para", "   ", "é 漢字 \x7f",
             "word " * 2000, "new\nline", "", "last"]

    class Kept(io.StringIO):
        def close(self):  # feed closes the trainer's stdin; keep what it wrote
            self.written = self.getvalue()

    stream = Kept()
    lines = feed(stream, texts)
    expected = [s for t in texts for s in whitespace_pieces(t, SENTENCE_CHARS) if s.strip()]
    assert lines == len(expected) > len(texts) - 3  # the long text is cut in pieces, the blank ones dropped
    for at_once in (1, 3, 10_000):
        assert read_sentences(io.StringIO(stream.written), at_once) == expected


@pytest.mark.parametrize(("n_pieces", "chars", "seeds"), [(4000, 1_000_000, 16_000), (32_000, 10**7, 128_000),
                                                       (4000, 5_400_000, 16_000), (1000, 5_000_000, 10_000),
                                                       (4000, 10**9, 200_000), (64_000, 10**9, 256_000)])
def test_the_seed_pieces_follow_the_pieces_wanted_and_a_large_sample_up_to_the_cap(n_pieces, chars, seeds):
    from mlmprep.tokenizer.unigram import seed_pieces

    assert seed_pieces(n_pieces, chars) == seeds  # 4 a piece, or one per 500 characters up to 200,000 if more


@pytest.mark.parametrize(("n_pieces", "seeds"), [(80, 600), (1500, 6000)])
def test_the_trainer_starts_its_em_from_the_seeds_its_sample_gives(corpora, n_pieces, seeds):
    """300,000 characters of kjv hold more candidate pieces than either count: 600 (a seed per 500 characters)
    for 80 pieces, 6,000 (four a piece) for 1,500; the trainer's own log gives the seeds it started from."""
    train, _ = held_out(corpora / "kjv.txt", 300_000, 0)
    assert 300_000 <= sum(map(len, train)) < 300_500
    stages = []
    train_model(train, n_pieces, on_stage=lambda name, rounds: stages.append((name, rounds)))
    rounds = round(math.log(seeds / (n_pieces * 1.1)) / math.log(1 / 0.6))  # each round keeps 0.6 of the pieces
    assert ("EM rounds, pruning pieces", rounds) in stages


@pytest.mark.parametrize("spelling", ["--tokenizer-train-chars", "--train-chars"])
def test_tokenizer_train_takes_the_sample_size_by_builds_name_and_the_old_one(tmp_path, tiny_corpus, spelling):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, ["tokenizer", "train", str(tiny_corpus), "--out", str(tmp_path / "t.json"),
                                      "--vocab-size", "300", spelling, "5000"])
    assert result.exit_code == 0, result.output
    used = int(re.search(r"trained on ([\d,]+) characters", result.output).group(1).replace(",", ""))
    assert 4000 < used <= 5000
    assert ("now called --tokenizer-train-chars" in result.output) == (spelling == "--train-chars")


def rows_of(split: Path) -> tuple[np.ndarray, np.ndarray]:
    import pyarrow as pa

    tables = [pa.ipc.open_stream(str(f)).read_all() for f in sorted(split.glob("data-*.arrow"))]
    table = pa.concat_tables(tables)
    return (np.asarray(table["input_ids"].to_pylist(), dtype=np.int64),
            np.asarray(table["labels"].to_pylist(), dtype=np.int64))


def test_an_mlm_build_trains_berts_wordpiece_that_transformers_loads_and_masks_whole_words(tmp_path, corpora):
    AutoTokenizer = pytest.importorskip("transformers").AutoTokenizer  # noqa: N806 (a class)
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig
    from mlmprep.tokenizer.encode import word_tables

    corpus = tmp_path / "kjv.txt"
    corpus.write_text((corpora / "kjv.txt").read_text(encoding="utf-8")[:300_000], encoding="utf-8")
    out = tmp_path / "out"
    build(BuildConfig(corpus=(str(corpus),), out=str(out), objective="mlm", whole_word=True, vocab_size=1500,
                      input_length=64, seeds=1, mlm_probability=0.3), log=lambda _: None)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["tokenizer"]["type"] == "wordpiece"
    tok = load_tokenizer(out / "tokenizer.json")
    assert [tok.id_to_token(i) for i in range(5)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert (manifest["tokenizer"]["pad_id"], manifest["tokenizer"]["mask_id"]) == (0, 4)
    hf = AutoTokenizer.from_pretrained(str(out))
    assert "Bert" in type(hf).__name__
    ids = hf("In the beginning God created the Godhead")["input_ids"]
    assert ids[0] == 2 and ids[-1] == 3 and any(t.startswith("##") for t in hf.convert_ids_to_tokens(ids))
    assert hf.decode(ids, skip_special_tokens=True) == "In the beginning God created the Godhead"

    inputs, labels = rows_of(out / "seed-0")
    assert (inputs[:, 0] == 2).all() and (inputs[:, -1] == 3).all()  # every row framed [CLS] ... [SEP]
    original = np.where(labels >= 0, labels, inputs)
    masked = labels >= 0
    starts = word_tables(tok).starts_word
    after_special = np.isin(original[:, :-1], special_ids(tok).all())  # [CLS] before a word the window cut
    inside = ~starts[original[:, 1:]] & ~after_special  # a ## continuation: masked exactly when the token before is
    assert inside.sum() > 1000 and masked[:, 1:].any()
    assert (masked[:, 1:][inside] == masked[:, :-1][inside]).all()


@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
def test_tokenizer_type_acts_on_a_span_build(tmp_path, tiny_corpus, kind):
    from mlmprep.builder.run import build
    from mlmprep.config import BuildConfig

    out = tmp_path / "out"
    build(BuildConfig(corpus=(str(tiny_corpus),), out=str(out), tokenizer_type=kind, vocab_size=500, input_length=32,
                      seeds=1), log=lambda _: None)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    tok = load_tokenizer(out / "tokenizer.json")
    assert manifest["tokenizer"]["type"] == kind
    assert type(tok.model).__name__ == {"bpe": "BPE", "wordpiece": "WordPiece"}[kind]
    assert manifest["tokenizer"]["sentinels"] == N_SENTINELS
    assert 300 < tok.get_vocab_size() <= 500
    pieces = tok.encode("the window is open", add_special_tokens=False).tokens
    assert pieces[0].startswith("Ġ") if kind == "bpe" else not pieces[0].startswith(("Ġ", "▁", "##"))


def test_a_span_build_trains_unigram_by_default_and_tokenizer_type_with_a_tokenizer_is_refused(tmp_path, tiny_corpus,
                                                                                             tok):
    from typer.testing import CliRunner

    from mlmprep.cli import app

    result = CliRunner().invoke(app, ["build", str(tiny_corpus), "--out", str(tmp_path / "a"), "--tokenizer", tok,
                                      "--tokenizer-type", "wordpiece"])
    assert result.exit_code == 2 and "--tokenizer-type applies only to a tokenizer mlmprep trains" in result.output
    result = CliRunner().invoke(app, ["build", str(tiny_corpus), "--out", str(tmp_path / "b"), "--vocab-size", "400",
                                      "--input-length", "32", "--seeds", "1"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["tokenizer"]["type"] == "unigram" and "Unigram trained on the corpus" in result.output


TRAIN_IN_A_PROCESS = """
import hashlib, sys
from mlmprep.tokenizer.train import train_tokenizer
lines = open(sys.argv[1], encoding="utf-8").read().split("\\n")[:20_000]
print(hashlib.sha256(train_tokenizer(lines, 4000, kind=sys.argv[2]).to_str().encode()).hexdigest())
"""


@pytest.mark.parametrize("kind", KINDS)
def test_each_tokenizer_type_gives_the_same_bytes_in_separate_processes_thread_counts_and_cores(corpora, kind):
    import subprocess
    import sys

    digests = set()
    cores = sorted(os.sched_getaffinity(0))
    for threads, allowed in (("1", cores[:1]), ("2", cores)):  # a process of its own: other hash seeds
        # the tokenizers trainers' threads, and the cores the process may run on (as on a smaller machine)
        env = {**os.environ, "RAYON_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", TRAIN_IN_A_PROCESS, str(corpora / "kjv.txt"), kind], env=env,
                              capture_output=True, text=True, check=True,
                              preexec_fn=lambda allowed=allowed: os.sched_setaffinity(0, allowed))
        digests.add(done.stdout.strip())
    assert len(digests) == 1, f"{kind}: {digests}"


def tokens_per_char(tok, texts: list[str]) -> float:
    return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)) / sum(map(len, texts))


def test_the_wordpiece_vocabulary_is_as_good_as_the_tokenizers_trainers_and_laid_out_like_berts(corpora):
    from tokenizers import trainers

    from mlmprep.tokenizer import wordpiece as wp

    train, held = held_out(corpora / "kjv.txt", 400_000, 60_000)
    ours = train_tokenizer(train, 3000, kind="wordpiece")
    reference = wp.wordpiece_tokenizer({name: i for i, name in enumerate(wp.BERT_SPECIALS)})
    reference.train_from_iterator(train, trainers.WordPieceTrainer(
        vocab_size=3000 - N_SENTINELS, special_tokens=list(wp.BERT_SPECIALS), show_progress=False))
    assert tokens_per_char(ours, held) <= 1.01 * tokens_per_char(reference, held)
    assert ours.get_vocab_size() == 3000
    assert [ours.id_to_token(i) for i in range(5)] == list(wp.BERT_SPECIALS)
    vocab = ours.get_vocab(with_added_tokens=False)
    chars = {c for line in train for c in line if not c.isspace()}
    unk = ours.token_to_id("[UNK]")
    unknown = [c for c in chars if unk in ours.encode(f"{c} xq{c}zq", add_special_tokens=False).ids]
    assert not unknown, "a character of the sample is unknown alone or inside a word"
    assert "##," not in vocab and "##." not in vocab, "punctuation, always a word of its own, as a continuation"
    assert not [p for p in vocab if "▁" in p], "a SentencePiece word start was kept"
    unknown = sum(e.ids.count(1) for e in ours.encode_batch(held, add_special_tokens=False))
    assert unknown == sum(1 for line in held for c in line if not c.isspace() and c not in chars)


def test_a_wordpiece_vocab_size_below_both_forms_of_the_characters_is_refused_in_words():
    texts = ["".join(chr(0x100 + (k * 31 + j) % 300) for j in range(20)) for k in range(200)]
    with pytest.raises(TokenizerError, match=r"text.s 300 distinct characters, 300 of them also as ##") as refused:
        train_tokenizer(texts, 600, kind="wordpiece")
    needed = int(str(refused.value).rsplit("at least ", 1)[1])
    assert needed == 5 + 2 * 300 + N_SENTINELS
    assert train_tokenizer(texts, needed, kind="wordpiece").get_vocab_size() == needed  # the figure named is enough


def test_the_wordpiece_training_shows_its_counting_and_merges(corpora):
    bar = Bar()
    train, _ = held_out(corpora / "kjv.txt", 300_000, 0)
    train_tokenizer(train, 2000, kind="wordpiece", bar=bar)
    names = [line[0] for line in bar.lines if isinstance(line[0], str)]
    assert names == ["train tokenizer: count words", "train tokenizer: merging pieces"]
    start = bar.lines.index(("train tokenizer: merging pieces", bar.total))
    done = [line[0] for line in bar.lines[start + 1:]]
    assert len(done) > 5 and done == sorted(done) and bar.total - 100 <= done[-1] <= bar.total


def test_a_blank_sample_gives_a_wordpiece_tokenizer_of_the_special_tokens_alone():
    tok = train_tokenizer(["", "  \n ", "\t"], 300, kind="wordpiece")
    assert tok.get_vocab_size() == 5 + N_SENTINELS
    assert tok.encode("text", add_special_tokens=False).tokens == ["[UNK]"]


def test_a_word_longer_than_wordpiece_encodes_is_not_learnt_from():
    from mlmprep.tokenizer.wordpiece import MAX_WORD

    blob = "".join(chr(ord("a") + (k * 7) % 26) for k in range(5000))  # one 5,000-character word, as in base64
    tok = train_tokenizer([blob] + [f"walking talking {k % 17} singing" for k in range(300)], 400, kind="wordpiece")
    assert tok.encode("walking", add_special_tokens=False).tokens == ["walking"]
    assert tok.encode(blob[:MAX_WORD + 1], add_special_tokens=False).tokens == ["[UNK]"]


def test_cjk_characters_which_bert_always_splits_off_take_one_wordpiece_id_each():
    texts = ["".join(chr(0x4E00 + (k * 31 + j) % 600) for j in range(20)) + " abc" for k in range(300)]
    tok = train_tokenizer(texts, 5 + 600 + 3 * 2 + 30 + N_SENTINELS, kind="wordpiece")  # 600 ideographs, a b c twice
    vocab = tok.get_vocab(with_added_tokens=False)
    assert chr(0x4E00) in vocab and "##" + chr(0x4E00) not in vocab and "##b" in vocab
    assert "[UNK]" not in tok.encode(texts[0], add_special_tokens=False).tokens
