"""AutoTokenizer on a build or checkpoint directory encodes a document as the build's rows hold it: `text </s>`
for a tokenizer without a post-processor (as T5's tokenizers do), the tokenizer's own frame otherwise; the
build itself (its tokenizer's sha256, its data) is the same as without the frame."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from benchmarks.hf_trainer import windows_of
from mlmprep.format.load import open_split
from mlmprep.format.rows import IGNORE
from tests.conftest import WORDS, build_tiny

pytest.importorskip("transformers")
from transformers import AutoTokenizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def short_docs(tmp_path_factory):
    """Documents of 3 to 8 words, each well inside one 64-token row."""
    rng = random.Random(1)
    docs = sorted({" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(200)})
    path = tmp_path_factory.mktemp("short") / "short.txt"
    path.write_text("\n".join(docs) + "\n", encoding="utf-8")
    return path, docs


def row_tokens(split, i: int, objective: str, sentinels: np.ndarray, eos: int) -> list[int]:
    """Row i with its masking undone: the tokens the model was shown the document as."""
    row = split.row(i)
    if objective == "mlm":
        return np.where(row["labels"] != IGNORE, row["labels"], row["input_ids"]).tolist()
    return windows_of([row["input_ids"]], [row["labels"]], sentinels, eos)[0].tolist() + [eos]


def assert_rows_encoded_as_autotokenizer_does(directory, build, docs):
    manifest = json.loads((build / "manifest.json").read_text())
    record = manifest["tokenizer"]
    sentinels = np.arange(record["vocab_size"] - record["sentinels"], record["vocab_size"])
    hf = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    encoded = {tuple(hf(doc).input_ids) for doc in docs}
    split = open_split(build / "seed-0")
    rows = [tuple(row_tokens(split, i, manifest["objective"], sentinels, record["eos_id"])) for i in range(len(split))]
    assert len(rows) > 50 and set(rows) <= encoded


@pytest.mark.parametrize("objective", ["span", "mlm"])
def test_autotokenizer_ends_inputs_with_eos_as_the_rows_do(tmp_path, short_docs, tiny_tokenizer_path, objective):
    corpus, docs = short_docs
    build = build_tiny(tmp_path / "data", corpus, tiny_tokenizer_path, input_length=64, pack="doc",
                       objective=objective, seeds=1)
    assert_rows_encoded_as_autotokenizer_does(build, build, docs)
    hf = AutoTokenizer.from_pretrained(str(build), local_files_only=True)
    assert hf("the river").input_ids[-1] == hf.eos_token_id == 1  # T5's </s>


def test_a_bert_tokenizer_keeps_its_own_frame(tmp_path, short_docs, wordpiece_path):
    corpus, docs = short_docs
    build = build_tiny(tmp_path / "data", corpus, wordpiece_path, input_length=64, pack="doc", objective="mlm",
                       seeds=1)
    assert_rows_encoded_as_autotokenizer_does(build, build, docs)
    hf = AutoTokenizer.from_pretrained(str(build), local_files_only=True)
    ids = hf("the river").input_ids
    assert (ids[0], ids[-1]) == (hf.cls_token_id, hf.sep_token_id)


def test_a_checkpoint_model_directory_encodes_as_the_rows_do(tmp_path, short_docs, tiny_tokenizer_path):
    from mlmprep.config import TrainConfig
    from mlmprep.train.loop import fit

    corpus, docs = short_docs
    build = build_tiny(tmp_path / "data", corpus, tiny_tokenizer_path, input_length=64, pack="doc", seeds=1)
    fit(TrainConfig(data=str(build), out=str(tmp_path / "run"), max_tokens_per_batch=1024,
                    max_tokens_per_microbatch=512, warmup_steps=1, eval_every=0, save_every=1, max_steps=1))
    assert_rows_encoded_as_autotokenizer_does(tmp_path / "run" / "checkpoint-1" / "model", build, docs)


def test_the_frame_leaves_the_build_as_it_was(tmp_path, tiny_corpus, tiny_tokenizer_path):
    """The manifest records the tokenizer as given (no frame), and a build from the framed file a build wrote
    is the same build: same tokenizer sha256, same data bytes."""
    import hashlib

    from tokenizers import Tokenizer

    first = build_tiny(tmp_path / "first", tiny_corpus, tiny_tokenizer_path, seeds=1)
    assert json.loads((first / "tokenizer.json").read_text())["post_processor"]["type"] == "Sequence"
    given = Tokenizer.from_file(str(tiny_tokenizer_path))
    assert given.post_processor is None
    a = json.loads((first / "manifest.json").read_text())
    assert a["tokenizer"]["sha256"] == hashlib.sha256(given.to_str().encode("utf-8")).hexdigest()
    again = build_tiny(tmp_path / "again", tiny_corpus, first / "tokenizer.json", seeds=1)
    b = json.loads((again / "manifest.json").read_text())
    assert a["tokenizer"] == b["tokenizer"] and a["splits"] == b["splits"]  # splits: every data file's sha256


@pytest.mark.parametrize("fixture", ["tiny_tokenizer_path", "wordpiece_path"])
def test_the_written_tokenizer_is_a_framed_copy_and_the_given_one_is_left_as_it_was(tmp_path, request, fixture):
    """tokenizer.json holds what a framed copy of the tokenizer saves (the frame only where it has no post-processor
    of its own), while the tokenizer written from serialises as before."""
    from tokenizers import Tokenizer

    from mlmprep.format.write import write_hf_tokenizer
    from mlmprep.tokenizer.load import eos_frame, load_tokenizer

    tok = load_tokenizer(request.getfixturevalue(fixture))
    before = tok.to_str()
    copy = Tokenizer.from_str(before)
    if copy.post_processor is None:
        copy.post_processor = eos_frame(copy)
    copy.save(str(tmp_path / "expected.json"))
    write_hf_tokenizer(tok, tmp_path, model_max_length=64)
    assert (tmp_path / "tokenizer.json").read_bytes() == (tmp_path / "expected.json").read_bytes()
    assert tok.to_str() == before
