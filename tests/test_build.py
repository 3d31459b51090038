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
