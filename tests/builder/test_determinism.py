"""The build's bytes depend on the corpus, options and seed only: not on chunk sizes or thread counts."""

import numpy as np
import pytest

from tests.conftest import build_tiny


def data_files(build):
    return {str(p.relative_to(build)): p.read_bytes() for p in sorted(build.rglob("*"))
            if p.is_file() and p.name != "manifest.json"}


@pytest.mark.parametrize(
    "options",
    [{}, {"pack": "doc"}, {"method": "text", "input_length": 64}, {"objective": "mlm", "whole_word": True}],
    ids=["tokens-stream", "tokens-doc", "text", "mlm"],
)
def test_chunk_size_does_not_change_a_byte(tmp_path, tiny_corpus, tiny_tokenizer_path, options):
    big = build_tiny(tmp_path / "big", tiny_corpus, tiny_tokenizer_path, **options)
    small = build_tiny(tmp_path / "small", tiny_corpus, tiny_tokenizer_path, chunk_chars=700, **options)
    assert data_files(big) == data_files(small)
    assert len(data_files(big)) > 10


def test_different_seeds_give_different_masks_of_the_same_windows(tmp_path, tiny_corpus, tiny_tokenizer_path):
    a = data_files(build_tiny(tmp_path / "a", tiny_corpus, tiny_tokenizer_path, seed=1))
    b = data_files(build_tiny(tmp_path / "b", tiny_corpus, tiny_tokenizer_path, seed=2))
    assert a["seed-0/data-00000-of-00001.arrow"] != b["seed-0/data-00000-of-00001.arrow"]
    assert a["seed-0/data-00000-of-00001.arrow"] != a["seed-1/data-00000-of-00001.arrow"]


def byte_level_bpe():
    """A GPT-2-style tokenizer: byte-level BPE, whose pre-tokenizer keeps a space with the word after it."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    from tests.conftest import tiny_documents

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(tiny_documents(),
                            trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


@pytest.mark.parametrize("kind", ["unigram", "wordpiece", "byte-level-bpe"])
@pytest.mark.parametrize(("call_chars", "piece_chars"), [(1, 1 << 20), (500, 1 << 20), (300, 200), (300, 37)])
def test_how_documents_are_grouped_into_tokenizer_calls_does_not_change_their_ids(tiny_tokenizer, wordpiece_path,
                                                                                   monkeypatch, kind, call_chars,
                                                                                   piece_chars):
    """encode() groups documents into calls of about CALL_CHARS characters, cuts longer ones into pieces at
    whitespace and encodes a call's repeated pieces once: the ids must be each document's own, as one plain call
    gives them, for documents whose lines, runs of spaces and tabs fall where a piece could be cut, and for
    documents (and pieces of one) that repeat."""
    import numpy as np
    from tokenizers import Tokenizer

    from mlmprep.tokenizer import encode as tokenize
    from tests.conftest import tiny_documents

    sentences = tiny_documents(60)
    docs = sentences[:40] + [" ".join(sentences[:30]), "\n".join(sentences[:30]), "  ".join(sentences[:20]),
                             " \n ".join(sentences[:20]), "\t".join(sentences[:20]),
                             *sentences[5:15], " ".join([sentences[3]] * 12), sentences[7]]  # repeats
    tok = {"unigram": lambda: tiny_tokenizer, "wordpiece": lambda: Tokenizer.from_file(str(wordpiece_path)),
           "byte-level-bpe": byte_level_bpe}[kind]()
    monkeypatch.setattr(tokenize, "CALL_CHARS", call_chars)
    monkeypatch.setattr(tokenize, "PIECE_CHARS", piece_chars)
    flat, lengths = tokenize.encode(Tokenizer.from_str(tok.to_str()), docs)
    plain = Tokenizer.from_str(tok.to_str())
    expected = [plain.encode(doc, add_special_tokens=False).ids for doc in docs]
    assert lengths.tolist() == [len(ids) for ids in expected]
    assert flat.tolist() == [i for ids in expected for i in ids] and flat.dtype == np.int32


def test_text_that_spells_a_special_token_never_gives_its_id(tmp_path):
    """An mlmprep-trained Unigram vocabulary, like T5's, holds </s>, <pad> and <mask> as pieces too: text spelling
    them is still text (it decodes back, its characters being in the vocabulary), and each document's ids are
    those it gets alone."""
    from tokenizers import Tokenizer

    from mlmprep.tokenizer.encode import encode
    from mlmprep.tokenizer.load import special_ids
    from mlmprep.tokenizer.train import train_tokenizer
    from tests.conftest import tiny_documents

    tiny_tokenizer = train_tokenizer(tiny_documents() + ["if a < b / c > d then", "x<y>z / w_0"] * 20, vocab_size=400)
    tiny_tokenizer.save(str(tmp_path / "tok.json"))
    tiny_tokenizer_path = tmp_path / "tok.json"
    docs = ["he said</s> then <pad>", "a plain line", "<mask> and <extra_id_0></s></s>", "another plain line"]
    flat, lengths = encode(Tokenizer.from_file(str(tiny_tokenizer_path)), docs)
    ids = special_ids(tiny_tokenizer)
    structure = [ids.pad, ids.eos, ids.mask, *ids.sentinels.tolist()]
    assert not np.isin(flat, structure).any()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, doc in enumerate(docs):
        own = flat[starts[i] : starts[i + 1]]
        assert tiny_tokenizer.decode(own.tolist(), skip_special_tokens=False) == doc
        alone, _ = encode(Tokenizer.from_file(str(tiny_tokenizer_path)), [doc])
        assert alone.tolist() == own.tolist()


def test_special_text_tables_are_kept_for_a_few_tokenizers_only(tiny_tokenizer):
    """A process that loads tokenizer after tokenizer (a notebook, a test run) keeps the tables and respelling
    copies of the last few only, and a tokenizer whose entry went still encodes special text as text."""
    from tokenizers import Tokenizer

    from mlmprep.tokenizer import encode as tokenize
    from mlmprep.tokenizer.load import special_ids

    docs = ["he said</s> then <pad>", "<mask> and <extra_id_0></s></s>"]
    first = Tokenizer.from_str(tiny_tokenizer.to_str())
    expected = tokenize.encode(first, docs)[0].tolist()
    ids = special_ids(first)
    assert not np.isin(expected, [ids.pad, ids.eos, ids.mask, *ids.sentinels.tolist()]).any()
    for _ in range(3 * tokenize.SPELLED_KEPT):
        assert tokenize.encode(Tokenizer.from_str(tiny_tokenizer.to_str()), docs)[0].tolist() == expected
        assert len(tokenize._SPELLED) <= tokenize.SPELLED_KEPT
    assert id(first) not in tokenize._SPELLED
    assert tokenize.encode(first, docs)[0].tolist() == expected

def test_a_trained_tokenizer_learns_no_second_piece_for_special_text():
    """A corpus that spells `</s>` or `<extra_id_0>` glued to words: the trainer learnt them as ordinary pieces,
    token_to_id then gave the wrong id and the sentinels were not consecutive (the build refused its own
    tokenizer)."""
    import json

    from mlmprep.tokenizer.load import special_ids
    from mlmprep.tokenizer.train import train_tokenizer
    from tests.conftest import tiny_documents

    glued = [f"{doc}</s> <extra_id_0>{doc} <pad>{doc}<mask> <extra_id_7>" for doc in tiny_documents(300)]
    tok = train_tokenizer(glued, vocab_size=500)
    pieces = [piece for piece, _ in json.loads(tok.to_str())["model"]["vocab"]]
    assert pieces[:4] == ["<pad>", "</s>", "<unk>", "<mask>"]
    assert not any(p in ("<pad>", "</s>", "<unk>", "<mask>") or "extra_id" in p for p in pieces[4:])
    ids = special_ids(tok)
    top = tok.get_vocab_size(with_added_tokens=True) - 1
    assert (ids.pad, ids.eos, ids.mask, int(ids.sentinels[0]), int(ids.sentinels[7])) == (0, 1, 3, top, top - 7)


def test_a_stretch_without_whitespace_is_cut_hard_at_the_piece_size():
    from mlmprep.tokenizer.encode import whitespace_pieces

    text = "ab" * 50 + " c\nd" + "x" * 300  # a clean space at 100, a newline at 102
    pieces = whitespace_pieces(text, 64)
    assert "".join(pieces) == text
    assert pieces[:3] == [text[:64], text[64:100], " c"]  # hard; before the clean space; before the newline
    assert [len(p) for p in pieces[3:]] == [64] * 4 + [302 - 4 * 64]  # "\nd" and x * 300: hard cuts
