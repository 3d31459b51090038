"""Tokenizers: load one, train a T5-style Unigram one, encode documents to int32 arrays.

No special tokens are added while encoding; the pipeline adds EOS between documents and the masking
kernels add sentinels. Special ids are looked up by name, never assumed.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlmprep.errors import TokenizerError

PAD, EOS, UNK, MASK = "<pad>", "</s>", "<unk>", "<mask>"
SPECIAL_TOKENS = (PAD, EOS, UNK, MASK)  # ids 0, 1, 2, 3 in a tokenizer mlmprep trains
N_SENTINELS = 100
PIECE_CHARS = 1 << 20  # documents longer than this are encoded in whitespace-aligned pieces
SPELLED_SPECIAL = re.compile(r"</s>|<pad>|<unk>|<mask>|<extra_id_\d+>")  # never learnt as ordinary pieces
UNSPACED_SCRIPTS = ("CJK ", "HIRAGANA", "KATAKANA", "HALFWIDTH KATAKANA", "BOPOMOFO", "THAI", "LAO", "KHMER", "MYANMAR",
                    "TIBETAN", "YI ")  # Unicode names of scripts written without spaces between words
CLEAN_SPACE = re.compile(r"(?<=\S) (?=\S)")  # where a long document is cut into pieces (whitespace_pieces)
CALL_CHARS = 1 << 18  # characters per tokenizer call (one piece at least): bounds the memory of its encodings,
# which a worker keeps at its high-water mark (1 << 20: 2 workers on 3.8 MB shards peaked 90 MB higher)


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


def train_tokenizer(texts: Iterable[str], vocab_size: int, *, kind: str = "unigram", n_sentinels: int = N_SENTINELS,
                    bar=None):
    """Train a tokenizer of `kind` (unigram, wordpiece or bpe: see train_unigram, train_wordpiece, train_bpe) whose
    sentinels follow its pieces, <extra_id_0> at the highest id; `vocab_size` counts everything. Text that spells
    a special token is blanked for training: the trainer would learn it as a second, ordinary piece. `bar` (a
    progress.Stages) shows how the training advances."""
    check_vocab_size(vocab_size, n_sentinels)
    texts = (SPELLED_SPECIAL.sub(" ", t) for t in texts)
    if kind == "unigram":
        tok = train_unigram(texts, vocab_size, n_sentinels, bar)
    elif kind == "wordpiece":
        tok = train_wordpiece(texts, vocab_size, n_sentinels, bar)
    elif kind == "bpe":
        if bar is not None:
            bar.stage(f"train tokenizer: fit the {kind} model", 1, "step")
        tok = train_bpe(texts, vocab_size - n_sentinels)
        if bar is not None:
            bar.update(1)
    else:
        raise TokenizerError(f"--tokenizer-type {kind}: not one of unigram, wordpiece, bpe")
    tok.add_special_tokens([sentinel_name(k) for k in reversed(range(n_sentinels))])
    return tok


def train_bpe(texts: Iterable[str], n_pieces: int):
    """A byte-level BPE tokenizer (GPT-2's pre-tokenizer with a space before the text, T5's <pad> </s> <unk> <mask>
    first). The `tokenizers` trainer runs in a thread that Ctrl-C abandons (interruptible); it numbers its byte
    alphabet in code point order and breaks ties between merges by those numbers, so the same text gives the same
    bytes in every process (no "##" forms numbered in hash-map order, as its WordPiece trainer has)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=n_pieces, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    interruptible(tok.train_from_iterator, texts, trainer)
    return tok


def train_wordpiece(texts: Iterable[str], vocab_size: int, n_sentinels: int, bar):
    """A WordPiece tokenizer laid out like BERT's (mlmprep.builder.wordpiece): SentencePiece's BPE trainer learns the
    pieces from the sample's words, in a child process with a fixed thread count, so the same text gives the same
    bytes on any machine; `bar` shows the counting and the merges."""
    from mlmprep.builder import wordpiece as wp
    from mlmprep.builder.unigram import EmptySample, train_model

    if bar is not None:
        bar.stage("train tokenizer: count words", 1, "step")
    counts = wp.word_counts(texts)
    chars = wp.alphabet(counts)
    joining = wp.continuations(chars)
    if bar is not None:
        bar.update(1)
    n_pieces, needed = vocab_size - n_sentinels, len(wp.BERT_SPECIALS) + len(chars) + len(joining)
    if n_pieces < needed:
        raise TokenizerError(f"--vocab-size {vocab_size} cannot hold the training text's {len(chars)} distinct "
                             f"characters, {len(joining)} of them also as ## continuations, and {n_sentinels} "
                             f"sentinels; raise --vocab-size to at least {needed + n_sentinels}")
    stage, rounds_done = progress_callbacks(bar)
    try:  # SentencePiece's "▁x" and "x" are one WordPiece piece "x": it learns a few more than are kept
        model = train_model(wp.trainer_lines(counts), n_pieces + len(chars) + 1, options=wp.BPE_OPTIONS,
                            on_stage=stage, on_round=rounds_done)
    except EmptySample:
        model = None
    except ValueError as exc:
        raise TokenizerError(f"training the tokenizer failed: {exc}") from None
    return wp.wordpiece_tokenizer(wp.wordpiece_vocab(model, chars, joining, n_pieces))


def progress_callbacks(bar) -> tuple[Callable[[str, int], None], Callable[[int, int], None]]:
    """The on_stage and on_round callbacks of mlmprep.builder.unigram.train_model that move `bar` (none: no-ops)."""
    if bar is None:
        return (lambda name, total: None), (lambda rounds, size: None)

    def stage(name: str, total: int) -> None:
        bar.stage(f"train tokenizer: {name}", total or 1, "round" if total else "step")

    def rounds_done(rounds: int, size: int) -> None:
        bar.update(max(0, min(rounds, bar.total) - bar.done), note=f"{size:,} pieces")
    return stage, rounds_done


def train_unigram(texts: Iterable[str], vocab_size: int, n_sentinels: int, bar):
    """A Unigram tokenizer laid out like T5's: <pad>=0, </s>=1, <unk>=2, <mask>=3, then pieces. SentencePiece
    learns the pieces (mlmprep.builder.unigram), with a fixed thread count, so the same text gives the same bytes on
    any machine; `bar` shows its stages and EM rounds."""
    from mlmprep.builder.unigram import EmptySample, train_model, unigram_tokenizer

    stage, rounds_done = progress_callbacks(bar)
    try:
        model = train_model(texts, vocab_size - n_sentinels, on_stage=stage, on_round=rounds_done)
    except EmptySample:
        model = None
    except ValueError as exc:
        # SentencePiece's words: "Vocabulary size is smaller than required_chars. PIECES vs CHARACTERS + SPECIALS."
        if (found := re.search(r"required_chars\. \d+ vs (\d+)", str(exc))) is None:
            raise TokenizerError(f"training the tokenizer failed: {exc}") from None
        needed = int(found.group(1))
        raise TokenizerError(f"--vocab-size {vocab_size} cannot hold the training text's "
                             f"{needed - len(SPECIAL_TOKENS)} distinct characters and {n_sentinels} sentinels; "
                             f"raise --vocab-size to at least {needed + n_sentinels}") from None
    return unigram_tokenizer(model) if model is not None else empty_unigram()


def empty_unigram():
    """The tokenizer of an empty sample: the special tokens alone (the build then says the corpus holds no text)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.Unigram([(name, 0.0) for name in SPECIAL_TOKENS], unk_id=SPECIAL_TOKENS.index(UNK)))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens([AddedToken(name, special=True, normalized=False) for name in SPECIAL_TOKENS])
    return tok


def check_vocab_size(vocab_size: int, n_sentinels: int = N_SENTINELS) -> None:
    """Refuse a --vocab-size with no room for pieces beside the special tokens and sentinels."""
    if vocab_size - n_sentinels <= len(SPECIAL_TOKENS) + 1:
        raise TokenizerError(f"--vocab-size {vocab_size} is too small to hold {n_sentinels} sentinels and pieces")


def interruptible(fn: Callable, *args):
    """fn(*args), run in a daemon thread while this one waits in short steps. Python takes Ctrl-C in the
    main thread only between bytecodes, and the tokenizers trainer holds its calling thread in Rust for
    minutes; waiting here, the main thread raises KeyboardInterrupt at once and the abandoned call ends
    with the process."""
    outcome: dict = {}

    def call() -> None:
        try:
            outcome["value"] = fn(*args)
        except BaseException as exc:  # re-raised in the waiting thread
            outcome["error"] = exc

    thread = threading.Thread(target=call, name=INTERRUPTIBLE_THREAD, daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.05)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


INTERRUPTIBLE_THREAD = "mlmprep-interruptible"


def abandoned_calls() -> bool:
    """Whether an interruptible() call still runs after its waiter was interrupted: the process must then
    end without the interpreter's shutdown, which would stop that thread by unwinding it through Rust (an abort)."""
    return any(t.name == INTERRUPTIBLE_THREAD and t.is_alive() for t in threading.enumerate())


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
    """encode() without the special-token check."""
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
        ids: list[int] = []  # one list per call, converted once: the cheapest way out of Encoding objects
        for e in tok.encode_batch_fast(pieces[start:stop], add_special_tokens=False):
            piece_ids = e.ids
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

