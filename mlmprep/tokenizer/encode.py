"""Encoding documents to int32 arrays, and the per-id word facts (word starts, letters) that whole-word masking and
the windows' statistics read.

No special tokens are added while encoding; the pipeline adds EOS between documents and the masking
kernels add sentinels.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from mlmprep.tokenizer.load import special_ids

PIECE_CHARS = 1 << 20  # documents longer than this are encoded in whitespace-aligned pieces
UNSPACED_SCRIPTS = ("CJK ", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA", "BOPOMOFO", "THAI", "LAO", "KHMER", "MYANMAR",
                    "TIBETAN", "YI ")  # Unicode names of scripts written without spaces between words
CLEAN_SPACE = re.compile(r"(?<=\S) (?=\S)")  # where a long document is cut into pieces (whitespace_pieces)
CALL_CHARS = 1 << 18  # characters per tokenizer call (one piece at least): bounds the memory of its encodings,
# which a worker keeps at its high-water mark (1 << 20: 2 workers on 3.8 MB shards peaked 90 MB higher)


def plain_encoder(tok):
    """`tok`, changed to encode documents as the build needs: without the padding or truncation its file may
    carry (a tokenizer.json saved from transformers can: truncation would drop tokens, padding add pad ids to
    the stream), and with text that spells a special token encoded as text. Returns it."""
    tok.no_padding()
    tok.no_truncation()
    tok.encode_special_tokens = True  # before any thread encodes (see encode)
    return tok


def encode(tok, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode documents without special tokens: (flat int32 ids, int64 lengths per document).

    Text that spells a special token (say "<extra_id_0>" in a T5 tutorial, or "</s>" in HTML) is encoded as
    plain text, so a sentinel, EOS or pad id only ever comes from the pipeline. A long document is encoded
    in pieces cut just before whitespace (see whitespace_pieces) and a few MB per call, so a 50 MB line costs
    bounded memory. The first call makes `tok` a plain_encoder.
    """
    if not tok.encode_special_tokens:  # once: calls running in other threads must not see `tok` change
        plain_encoder(tok)
    flat, lengths = encode_pieces(tok, texts)
    if spelled_specials(tok)[flat].any():  # a Unigram model's own piece for a special token matched its text
        flat, lengths = respell(tok, texts)
    return flat, lengths


def encode_pieces(tok, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """encode() without the special-token check. Each distinct piece of a call is encoded once: a repeated one
    (boilerplate, a heading, a line of code) takes its first copy's ids, since a piece's ids depend on its text
    alone."""
    if max(map(len, texts), default=0) <= PIECE_CHARS:  # the usual case: each document is one piece
        pieces, owners = texts, range(len(texts))
    else:
        pieces, owners = [], []
        for i, text in enumerate(texts):
            for piece in whitespace_pieces(text, PIECE_CHARS):
                pieces.append(piece)
                owners.append(i)
    arrays, piece_lengths = [], []
    for start, stop in call_groups([len(p) for p in pieces], CALL_CHARS):
        first: dict[str, int] = {}  # each distinct piece -> its place among them
        copy_of = [first.setdefault(piece, len(first)) for piece in pieces[start:stop]]
        encoded = [e.ids for e in tok.encode_batch_fast(list(first), add_special_tokens=False)]
        ids: list[int] = []  # one list per call, converted once: the cheapest way out of Encoding objects
        for k in copy_of:
            piece_ids = encoded[k]
            ids += piece_ids
            piece_lengths.append(len(piece_ids))
        arrays.append(np.array(ids, dtype=np.int32))
    lengths = np.bincount(np.asarray(owners, dtype=np.int64), weights=piece_lengths, minlength=len(texts))
    flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int32)
    return flat, lengths.astype(np.int64)


SPELLED_KEPT = 4  # tokenizers whose tables are kept: a process uses one or two; a notebook may load many
_SPELLED: dict[int, list] = {}  # id(tok) -> [tok, spelled_specials table, respelling tokenizer or None]


def spelled_entry(tok) -> list:
    """The cache entry of `tok`, made on first use; it holds `tok`, so its id names no other tokenizer
    while the entry lives, and only the SPELLED_KEPT most recently made entries are kept."""
    entry = _SPELLED.get(id(tok))
    if entry is None:
        table = np.zeros(tok.get_vocab_size(with_added_tokens=True), dtype=np.bool_)
        if type(tok.model).__name__ == "Unigram":
            pieces, unk = tok.get_vocab(with_added_tokens=False), special_ids(tok).unk
            for idx, token in tok.get_added_tokens_decoder().items():
                if token.special and idx != unk and pieces.get(token.content) == idx:
                    table[idx] = True
        entry = [tok, table, None]
        while len(_SPELLED) >= SPELLED_KEPT:
            _SPELLED.pop(next(iter(_SPELLED), None), None)
        _SPELLED[id(tok)] = entry
    return entry


def spelled_specials(tok) -> np.ndarray:
    """A bool table over ids: True for the special tokens (not <unk>) that `tok`'s Unigram vocabulary also
    holds as ordinary pieces, which text spelling them would match (T5's own tokenizer has all of them)."""
    return spelled_entry(tok)[1]


def respell(tok, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """encode_pieces() with a copy of `tok` whose pieces for special tokens are renamed out of reach; its
    scores are the same, so only text spelling a special token is encoded differently."""
    entry = spelled_entry(tok)
    if entry[2] is None:
        from tokenizers import Tokenizer

        data = json.loads(tok.to_str())
        for idx in np.flatnonzero(entry[1]):  # renamed to noncharacters no text holds
            data["model"]["vocab"][idx][0] = f"\ufdd0{idx}\ufdd1"
        entry[2] = plain_encoder(Tokenizer.from_str(json.dumps(data, ensure_ascii=False)))
    return encode_pieces(entry[2], texts)


def whitespace_pieces(text: str, size: int) -> list[str]:
    """`text` cut into pieces of at most about `size` characters, each cut just before a single space between
    two other characters (which every common pre-tokenizer splits at, so the ids are those of the whole text),
    else before a space or newline, else hard at `size` where a stretch has no whitespace."""
    if len(text) <= size:
        return [text]
    pieces, start = [], 0
    while len(text) - start > size:
        cut = clean_cut(text, start + 1, start + size)
        if cut < 0:
            cut = max(text.rfind(" ", start + 1, start + size), text.rfind("\n", start + 1, start + size))
        cut = cut if cut > start else start + size
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def clean_cut(text: str, low: int, high: int) -> int:
    """The last index in [low, high) of a space with no whitespace on either side, or -1; looks back from
    `high` in growing windows, so text with many spaces costs one short regex scan."""
    if text.rfind(" ", low, high) < 0:
        return -1
    for window in (1 << 12, 1 << 16, high - low):
        last = -1
        for match in CLEAN_SPACE.finditer(text, max(low, high - window), high + 1):
            last = match.start() if match.start() < high else last
        if last >= 0 or window >= high - low:
            return last
    return -1


def call_groups(sizes: list[int], limit: int) -> list[tuple[int, int]]:
    """Consecutive (start, stop) ranges of items whose sizes add up to about `limit` (at least one item each)."""
    groups, start, total = [], 0, 0
    for i, n in enumerate(sizes):
        if total and total + n > limit:
            groups.append((start, i))
            start, total = i, 0
        total += n
    if start < len(sizes):
        groups.append((start, len(sizes)))
    return groups


@dataclass(frozen=True)
class WordTables:
    """Per-id facts about a token's text, for word-boundary statistics and whole-word masking."""

    starts_word: np.ndarray  # bool: a word boundary precedes this token (▁/Ġ prefix, or special)
    first_alnum: np.ndarray  # bool: the token's first visible character is a letter or digit of a spaced script
    last_alnum: np.ndarray  # bool: the token's last character is a letter or digit of a spaced script

    def cuts_word(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """True where a boundary between token `left` and token `right` falls inside a word: between two letters
        or digits of a script that puts spaces between words (in Han or Thai text no token shows where words end)."""
        return ~self.starts_word[right] & self.last_alnum[left] & self.first_alnum[right]


def word_tables(tok) -> WordTables:
    size = tok.get_vocab_size(with_added_tokens=True)
    starts = np.zeros(size, dtype=bool)
    first = np.zeros(size, dtype=bool)
    last = np.zeros(size, dtype=bool)
    specials = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    wordpiece = type(tok.model).__name__ == "WordPiece"
    for piece, idx in tok.get_vocab(with_added_tokens=True).items():
        if piece in specials:
            starts[idx] = True
            continue
        text = piece
        if text.startswith(("▁", "Ġ")):
            starts[idx] = True
            text = text[1:]
        elif wordpiece:
            starts[idx] = not text.startswith("##")
            text = text.removeprefix("##")
        first[idx] = bool(text) and spaced_alnum(text[0])
        last[idx] = bool(text) and spaced_alnum(text[-1])
    return WordTables(starts_word=starts, first_alnum=first, last_alnum=last)


def spaced_alnum(char: str) -> bool:
    """Whether `char` is a letter or digit of a script that separates its words with spaces."""
    return char.isalnum() and not unicodedata.name(char, "").startswith(UNSPACED_SCRIPTS)

