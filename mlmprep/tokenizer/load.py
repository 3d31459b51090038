"""Loading a tokenizer (a tokenizer.json file or a transformers directory) and looking up, by name, the special ids
mlmprep needs: pad, EOS, unk, mask and the <extra_id_k> sentinels. Special ids are never assumed."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmprep.errors import TokenizerError

PAD, EOS, UNK, MASK = "<pad>", "</s>", "<unk>", "<mask>"
SPECIAL_TOKENS = (PAD, EOS, UNK, MASK)  # ids 0, 1, 2, 3 in a tokenizer mlmprep trains
N_SENTINELS = 100
def sentinel_name(k: int) -> str:
    return f"<extra_id_{k}>"


@dataclass(frozen=True)
class SpecialIds:
    """The ids mlmprep needs, looked up by name in a tokenizer."""

    pad: int
    eos: int
    unk: int | None
    mask: int | None
    sentinels: np.ndarray  # int32; sentinels[k] is the id of <extra_id_k>
    vocab_size: int
    others: tuple[int, ...] = ()  # the tokenizer's other special tokens ([CLS], <s>, ...)

    def all(self) -> np.ndarray:
        """Every special id (sorted, int32): never an MLM target, never drawn as a random replacement, never a
        word piece."""
        ids = [self.pad, self.eos, *(x for x in (self.unk, self.mask) if x is not None), *self.sentinels.tolist(),
               *self.others]
        return np.unique(np.asarray(ids, dtype=np.int32))


def load_tokenizer(path: str | Path):
    """A `tokenizers.Tokenizer` from a tokenizer.json file or a local transformers-style directory."""
    from tokenizers import Tokenizer

    path = Path(path)
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            path = path / "tokenizer.json"
        else:
            return _from_transformers_dir(path)
    if not path.is_file():
        raise TokenizerError(f"--tokenizer {path}: no such file or directory")
    try:  # read here, not by from_file, which cannot open a path whose name is not UTF-8
        tok = Tokenizer.from_str(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise TokenizerError(f"--tokenizer {path}: not a tokenizer.json file ({str(exc).splitlines()[0]})") from None
    if is_eos_frame(tok.post_processor, tok):  # a build's or checkpoint's file: the tokenizer the build used
        tok.post_processor = None
    return tok


def eos_frame(tok):
    """The post-processor mlmprep writes for transformers into a tokenizer that has none: `text </s>` (the
    tokenizer's EOS), as every row ends and T5's tokenizers encode. A one-item Sequence, so load_tokenizer
    tells it from a tokenizer's own frame and takes it off again: the build's tokenizer stays the one it used."""
    from tokenizers import processors

    eos = tok.id_to_token(special_ids(tok).eos)
    return processors.Sequence([processors.TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B:1 {eos}:1", special_tokens=[(eos, tok.token_to_id(eos))])])


def is_eos_frame(processor, tok) -> bool:
    """Whether `processor` is eos_frame(tok)."""
    if processor is None or type(processor).__name__ != "Sequence":
        return False
    try:
        frame = eos_frame(tok)
    except TokenizerError:  # no EOS token: not a frame mlmprep wrote
        return False
    return json.loads(processor.__getstate__()) == json.loads(frame.__getstate__())


def _from_transformers_dir(path: Path):
    """Convert a slow transformers tokenizer directory (e.g. spiece.model) to a fast one, offline."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True, use_fast=True)
        return tok.backend_tokenizer
    except Exception as exc:
        raise TokenizerError(
            f"--tokenizer {path}: directory has no tokenizer.json and transformers could not load it "
            f"({str(exc).splitlines()[0]}); pass a tokenizer.json file"
        ) from None


def tokenizer_sha256(tok) -> str:
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()


def _first_id(tok, names: Iterable[str]) -> int | None:
    for name in names:
        idx = tok.token_to_id(name)
        if idx is not None:
            return idx
    return None


def special_ids(tok, *, where: str = "tokenizer") -> SpecialIds:
    """Look up pad, EOS, unk, mask and the <extra_id_k> sentinels by name; check the sentinels' order."""
    pad = _first_id(tok, (PAD, "[PAD]"))
    eos = _first_id(tok, (EOS, "[SEP]", "<|endoftext|>"))
    if eos is None:
        raise TokenizerError(f"{where}: has no end-of-sequence token ({EOS} or [SEP]); add one or train with mlmprep")
    if pad is None:
        raise TokenizerError(f"{where}: has no padding token ({PAD} or [PAD]); add one or train with mlmprep")
    sentinels = []
    while (idx := tok.token_to_id(sentinel_name(len(sentinels)))) is not None:
        sentinels.append(idx)
    arr = np.asarray(sentinels, dtype=np.int32)
    if arr.size > 1:
        steps = np.diff(arr)
        if not (np.all(steps == -1) or np.all(steps == 1)):
            raise TokenizerError(f"{where}: sentinel ids <extra_id_k> are not consecutive in k; "
                                 "the tokenizer is damaged")
    return SpecialIds(
        pad=pad,
        eos=eos,
        unk=_first_id(tok, (UNK, "[UNK]")),
        mask=_first_id(tok, (MASK, "[MASK]")),
        sentinels=arr,
        vocab_size=tok.get_vocab_size(with_added_tokens=True),
        others=tuple(sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)),
    )


def frame_ids(tok) -> tuple[np.ndarray, np.ndarray]:
    """The ids the tokenizer's post-processor puts before and after one sequence (int32 prefix, suffix):
    [CLS] and [SEP] for BERT, <s> and </s> for RoBERTa, none and </s> for T5; both empty without one."""
    from tokenizers import Tokenizer

    empty = np.zeros(0, dtype=np.int32)
    if tok.post_processor is None:
        return empty, empty
    plain = Tokenizer.from_str(tok.to_str())  # without the file's padding and truncation settings
    plain.no_padding()
    plain.no_truncation()
    framed = tok.post_processor.process(plain.encode("a", add_special_tokens=False))
    ids = np.asarray(framed.ids, dtype=np.int32)
    content = np.flatnonzero(np.asarray(framed.special_tokens_mask) == 0)
    if content.size == 0:
        raise TokenizerError("tokenizer: its post-processor's frame cannot be told apart from the text it frames")
    return ids[: content[0]], ids[content[-1] + 1 :]


