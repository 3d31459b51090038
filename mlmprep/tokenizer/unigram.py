"""Unigram training with SentencePiece, T5's own trainer, in a child process (its log shows the EM rounds as they
pass, and Ctrl-C ends it at once), and the model converted exactly into the `tokenizers` Unigram layout. The same
child runs SentencePiece's BPE trainer for WordPiece vocabularies (mlmprep.tokenizer.wordpiece).

Run as `python -m mlmprep.tokenizer.unigram MODEL PIECES OPTIONS`: train a model of PIECES pieces with SentencePiece's
OPTIONS (JSON) on the sentences of stdin (one JSON string a line) and write the SentencePiece model to MODEL.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from json.encoder import encode_basestring  # a str as JSON writes it (ensure_ascii off)
from pathlib import Path

SENTENCE_CHARS = 4096  # a document is given to the trainer in whitespace-aligned sentences of at most this many
SPM_THREADS = 8  # fixed, never the cores: SentencePiece's EM sums per-thread counts, so its pieces depend on it
PARSED_LINES = 10_000  # the child parses the sentences this many lines at a time
SCORE_DECIMALS = 6  # scores are rounded: a float's full digits do not survive tokenizers' JSON round trip
SHRINK = 0.6  # SentencePiece's shrinking_factor: each pruning round keeps this share of the pieces
SEED_PIECES, SEEDS_PER_PIECE, CHARS_PER_SEED = 200_000, 4, 500  # the EM's seed pieces: see seed_pieces
# T5's layout and the Metaspace pre-tokenizer of mlmprep's tokenizer.json: no normalisation, every character kept.
# Pieces may cross scripts and digits (split_by_*: off), as the tokenizers trainer's could: splitting them costs
# tokens per character. The cost is the EM rounds, each about one pass over the sample's words whatever the pieces
# left, the first (over every seed piece) the dearest: one EM round per pruning round (num_sub_iterations),
# pruning to 0.6 of the pieces (SentencePiece's 0.75) and fewer seed pieces (seed_pieces; SentencePiece's
# 1,000,000) take less time for as good a vocabulary, which pieces of up to SentencePiece's 16 characters make
# better (docs/building.md and benchmarks.tokenizer give the measurements). Unigram's seed_sentencepiece_size is
# set by the child, which knows the sample's size once it has read it.
SPM_OPTIONS = dict(
    model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, control_symbols=["<mask>"],
    normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
    character_coverage=1.0, hard_vocab_limit=False, split_by_unicode_script=False, split_by_number=False,
    max_sentence_length=4 * SENTENCE_CHARS, num_threads=SPM_THREADS, shrinking_factor=SHRINK, num_sub_iterations=1,
    minloglevel=0,
)
SEEDS = re.compile(r"Initialized (\d+) seed (?:sentence)?pieces")
EM_ROUND = re.compile(r"EM sub_iter=(\d+) size=(\d+)")
ALPHABET = re.compile(r"Alphabet size=(\d+)")
MERGED = re.compile(r"Merged: freq=\d+ merges=(\d+)")  # BPE's log line every 100 merges
INFO = re.compile(r"I\d{4} ")  # an information line of the trainer's log (absl format)
STAGE_WORDS = (("Extracting seed", "find seed pieces"), ("Extracting frequent sub strings", "find seed pieces"))


def seed_pieces(n_pieces: int, chars: int) -> int:
    """How many of the sample's commonest pieces the EM starts from: SEEDS_PER_PIECE per piece wanted, or one per
    CHARS_PER_SEED of its `chars` (at most SEED_PIECES) where that is more, as from 8 MB at 4,000 pieces. More
    seeds cost EM time and, measured on 1 to 10 MB, gave no fewer tokens per character (but 1% at 4,000 pieces on
    10 MB): most of them are pieces seen a few times, which the first EM round weighs and then prunes."""
    return max(SEEDS_PER_PIECE * n_pieces, min(SEED_PIECES, chars // CHARS_PER_SEED))


def train_model(texts: Iterable[str], n_pieces: int, *, options: dict | None = None,
                on_stage: Callable[[str, int], None] | None = None,
                on_round: Callable[[int, int], None] | None = None) -> bytes:
    """The SentencePiece model (bytes) of a Unigram vocabulary of `n_pieces`, <pad> </s> <unk> <mask> first,
    learnt from `texts` (SPM_OPTIONS; with mlmprep.tokenizer.wordpiece's BPE_OPTIONS: a BPE one learnt from
    its word counts).
    `on_stage(name, rounds)` hears each stage begin (rounds: the pruning rounds or merges to go, once known),
    `on_round(rounds, size)` each EM round or hundred merges (the rounds done, the pieces reached).
    Raises ValueError with the trainer's last words where it fails, EmptySample where `texts` hold no text."""
    with tempfile.TemporaryDirectory(prefix="mlmprep-spm-") as scratch:
        model = Path(scratch, "model")
        # the child starts and loads the sentences while this process still reads the corpus for them; it logs
        # nothing that could fill its stderr pipe before its stdin ends
        args = [sys.executable, "-m", "mlmprep.tokenizer.unigram", str(model), str(n_pieces),
                json.dumps(SPM_OPTIONS if options is None else options)]
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                encoding="utf-8", errors="replace")
        try:
            lines = feed(proc.stdin, texts)
            if lines == 0:
                raise EmptySample("no text to train a tokenizer on")
            last = follow_log(proc.stderr, n_pieces, on_stage or (lambda name, rounds: None),
                              on_round or (lambda rounds, size: None))
            if proc.wait() != 0:
                raise ValueError(" ".join(last.split()) or f"the trainer ended with status {proc.returncode}")
        finally:  # Ctrl-C or any error here: the child goes at once (it never returns to Python during its EM)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
        return model.read_bytes()


def feed(stdin, texts: Iterable[str]) -> int:
    """Write the sentences of `texts` to the trainer's `stdin`, one JSON string a line, and close it; returns how
    many. A trainer that ended early (its error follows on its stderr) stops the writing."""
    from mlmprep.tokenizer.encode import whitespace_pieces

    lines = 0
    try:
        with stdin:
            for text in texts:
                sentences = [encode_basestring(s) for s in whitespace_pieces(text, SENTENCE_CHARS) if s.strip()]
                if sentences:
                    stdin.write("\n".join(sentences) + "\n")
                    lines += len(sentences)
    except BrokenPipeError:
        pass
    return lines


class EmptySample(ValueError):
    """The training sample holds no text."""


def follow_log(stream, n_pieces: int, on_stage: Callable[[str, int], None],
               on_round: Callable[[int, int], None]) -> str:
    """Read the trainer's log to its end, calling on_stage and on_round as it goes; returns its last lines that
    are not information (an error's words)."""
    tail: list[str] = []
    seeds = alphabet = merges = 0
    for line in stream:
        if not INFO.match(line):
            tail = (tail + [line])[-6:]
        if (found := MERGED.search(line)) is not None:
            if not merges:
                on_stage("merging pieces", max(1, n_pieces - alphabet - 1))  # the chars and <unk> are no merges
            merges = int(found.group(1))
            on_round(merges, merges + alphabet + 1)
        elif (found := ALPHABET.search(line)) is not None:
            alphabet = int(found.group(1))
        elif (found := EM_ROUND.search(line)) is not None and seeds:
            on_round(pruned(seeds, int(found.group(2))), int(found.group(2)))
        elif (found := SEEDS.search(line)) is not None:
            seeds = int(found.group(1))
            on_stage("EM rounds, pruning pieces", pruned(seeds, int(n_pieces * 1.1)))
        else:
            for words, name in STAGE_WORDS:
                if words in line:
                    on_stage(name, 0)
    return "".join(tail)


def pruned(seeds: int, size: int) -> int:
    """How many pruning rounds (each keeps SHRINK of the pieces) take `seeds` pieces down to `size`."""
    return round(math.log(seeds / size) / math.log(1 / SHRINK)) if seeds > size > 0 else 0


def unigram_tokenizer(model: bytes):
    """The SentencePiece Unigram `model` as a `tokenizers` Tokenizer that encodes text to the same pieces: the
    same vocabulary, ids and scores (rounded), a Metaspace pre-tokenizer and decoder, the control pieces as
    special tokens."""
    import sentencepiece as spm
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    sp = spm.SentencePieceProcessor(model_proto=model)
    special = [sp.is_control(i) or sp.is_unknown(i) for i in range(sp.get_piece_size())]
    vocab = [(sp.id_to_piece(i), 0.0 if special[i] else round(sp.get_score(i), SCORE_DECIMALS))
             for i in range(sp.get_piece_size())]
    tok = Tokenizer(models.Unigram(vocab, unk_id=sp.unk_id(), byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False) for (p, _), s in zip(vocab, special) if s])
    return tok


def main(argv: list[str]) -> None:
    """The child: every sentence read first (as SentencePiece reads them anyway), so that a Unigram model's seed
    pieces follow the sample's size."""
    import sentencepiece as spm

    model, n_pieces, options = argv
    with open(sys.stdin.fileno(), encoding="utf-8", closefd=False) as stdin:
        sentences = read_sentences(stdin)
    options = json.loads(options)
    if options["model_type"] == "unigram":
        options.setdefault("seed_sentencepiece_size", seed_pieces(int(n_pieces), sum(map(len, sentences))))
    with open(model, "wb") as out:
        spm.SentencePieceTrainer.train(sentence_iterator=drained(sentences), model_writer=out,
                                       vocab_size=int(n_pieces), **options)


def read_sentences(stream, lines_at_once: int = PARSED_LINES) -> list[str]:
    """The sentences `feed` wrote to `stream` (one JSON string a line), parsed `lines_at_once` lines at a time as
    one JSON array: one parse for many, not one each."""
    sentences: list[str] = []
    while lines := list(islice(stream, lines_at_once)):
        sentences += json.loads("[" + ",".join(lines) + "]")
    return sentences


def drained(items: list) -> Iterator:
    """The items in order, each let go once taken (SentencePiece keeps its own copy: the sample is not held twice)."""
    for i in range(len(items)):
        yield items[i]
        items[i] = None


if __name__ == "__main__":
    main(sys.argv[1:])
