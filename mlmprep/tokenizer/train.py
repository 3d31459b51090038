"""Training a tokenizer on a sample of text: Unigram laid out like T5's (SentencePiece, in `unigram`), WordPiece laid
out like BERT's (SentencePiece's BPE made a WordPiece vocabulary, in `wordpiece`) or byte-level BPE (`tokenizers`),
with <extra_id_k> sentinels after the pieces."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable

from mlmprep.errors import TokenizerError
from mlmprep.tokenizer import wordpiece as wp
from mlmprep.tokenizer.load import N_SENTINELS, SPECIAL_TOKENS, UNK, sentinel_name
from mlmprep.tokenizer.unigram import EmptySample, train_model, unigram_tokenizer

SPELLED_SPECIAL = re.compile(r"</s>|<pad>|<unk>|<mask>|<extra_id_\d+>")  # never learnt as ordinary pieces
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
    """A WordPiece tokenizer laid out like BERT's (mlmprep.tokenizer.wordpiece): SentencePiece's BPE trainer learns the
    pieces from the sample's words, in a child process with a fixed thread count, so the same text gives the same
    bytes on any machine; `bar` shows the counting and the merges."""
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
    """The on_stage and on_round callbacks of mlmprep.tokenizer.unigram.train_model that move `bar` (none: no-ops)."""
    if bar is None:
        return (lambda name, total: None), (lambda rounds, size: None)

    def stage(name: str, total: int) -> None:
        bar.stage(f"train tokenizer: {name}", total or 1, "round" if total else "step")

    def rounds_done(rounds: int, size: int) -> None:
        bar.update(max(0, min(rounds, bar.total) - bar.done), note=f"{size:,} pieces")
    return stage, rounds_done


def train_unigram(texts: Iterable[str], vocab_size: int, n_sentinels: int, bar):
    """A Unigram tokenizer laid out like T5's: <pad>=0, </s>=1, <unk>=2, <mask>=3, then pieces. SentencePiece
    learns the pieces (mlmprep.tokenizer.unigram), with a fixed thread count, so the same text gives the same bytes on
    any machine; `bar` shows its stages and EM rounds."""
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


