"""The build's bytes depend on the corpus, options and seed only: not on chunk sizes or thread counts."""

import pytest

from conftest import build_tiny


def data_files(build):
    return {str(p.relative_to(build)): p.read_bytes() for p in sorted(build.rglob("*")) if p.is_file() and p.name != "manifest.json"}


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


@pytest.mark.parametrize(("call_chars", "piece_chars"), [(1, 1 << 20), (500, 1 << 20), (300, 200)])
def test_how_documents_are_grouped_into_tokenizer_calls_does_not_change_their_ids(tiny_tokenizer, monkeypatch,
                                                                                   call_chars, piece_chars):
    """encode() groups documents into calls of about CALL_CHARS characters and cuts longer ones into pieces at
    whitespace: the ids must be each document's own, as one plain call gives them."""
    import numpy as np
    from tokenizers import Tokenizer

    from conftest import tiny_documents
    from mlmprep import tokenize

    docs = tiny_documents(40) + [" ".join(tiny_documents(30))]  # the last is about 2,500 characters
    monkeypatch.setattr(tokenize, "CALL_CHARS", call_chars)
    monkeypatch.setattr(tokenize, "PIECE_CHARS", piece_chars)
    flat, lengths = tokenize.encode(Tokenizer.from_str(tiny_tokenizer.to_str()), docs)
    plain = Tokenizer.from_str(tiny_tokenizer.to_str())
    expected = [plain.encode(doc, add_special_tokens=False).ids for doc in docs]
    assert lengths.tolist() == [len(ids) for ids in expected]
    assert flat.tolist() == [i for ids in expected for i in ids] and flat.dtype == np.int32
