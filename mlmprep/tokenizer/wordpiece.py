"""WordPiece training for BERT-style builds: SentencePiece's BPE trainer learns pieces from the sample's words (split
by BERT's normaliser and pre-tokenizer, counted here), and its model becomes a WordPiece vocabulary in BERT's layout.

SentencePiece's merges depend on no process's hash seed or thread count, so the same sample gives the same
vocabulary in every run (tests/test_tokenizer_training.py trains in separate processes); the `tokenizers`
WordPieceTrainer numbers its `##` characters, which break its ties, in hash-map order, so its vocabulary changes
from run to run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mlmprep.tokenizer.unigram import SPM_THREADS

BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # ids 0 .. 4 of a WordPiece tokenizer mlmprep trains
PREFIX = "##"  # a piece that continues a word
MAX_WORD = 100  # WordPiece's max_input_chars_per_word: a longer word encodes as [UNK], so it is not learnt from
BPE_OPTIONS = dict(  # one "word<TAB>count" a line; "▁" marks a word's start, as "##" marks the rest
    model_type="bpe", input_format="tsv", unk_id=0, bos_id=-1, eos_id=-1, pad_id=-1,
    normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
    character_coverage=1.0, hard_vocab_limit=False, split_by_unicode_script=False, split_by_number=False,
    max_sentence_length=4 * MAX_WORD + 32, num_threads=SPM_THREADS, minloglevel=0,
)


def bert_parts():
    """BERT's normaliser (cased: no lowercasing, no accent stripping) and pre-tokenizer."""
    from tokenizers import normalizers, pre_tokenizers

    return (normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=False,
                                       lowercase=False), pre_tokenizers.BertPreTokenizer())


def word_counts(texts: Iterable[str]) -> Counter:
    """How often each word of `texts` occurs, as BERT's normaliser and pre-tokenizer cut them."""
    normalizer, pre_tokenizer = bert_parts()
    counts: Counter = Counter()
    for text in texts:
        counts.update(word for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    return counts


def trainer_lines(counts: Counter) -> list[str]:
    """The trainer's input, "word<TAB>count" in the words' order (the trainer's own order follows its input's)."""
    return [f"{word}\t{n}" for word, n in sorted(counts.items()) if len(word) <= MAX_WORD]


def alphabet(counts: Counter) -> list[str]:
    """The characters of the words learnt from, in code point order."""
    return sorted({char for word, _ in counts.items() if len(word) <= MAX_WORD for char in word})


def continuations(chars: list[str]) -> list[str]:
    """Those of `chars` that can continue a word: all but the ones BERT's normaliser and pre-tokenizer always cut
    off as words of their own (punctuation, CJK ideographs), whose "##" form no text could use."""
    normalizer, pre_tokenizer = bert_parts()
    return [char for char in chars if len(pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(f"a{char}a"))) == 1]


def wordpiece_vocab(model: bytes | None, chars: list[str], joining: list[str], n_pieces: int) -> dict[str, int]:
    """BERT's specials at 0 .. 4, every character alone ("x") and each of `joining` as a continuation ("##x"), so
    that only a character the sample lacks encodes as [UNK]; then the merged pieces of the SentencePiece BPE
    `model` in the order learnt ("▁xy" -> "xy", "xy" -> "##xy") up to `n_pieces` in all."""
    vocab = {name: i for i, name in enumerate(BERT_SPECIALS)}
    for form in chars + [PREFIX + char for char in joining]:
        vocab.setdefault(form, len(vocab))
    if model is None:
        return vocab
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model)
    for i in range(sp.get_piece_size()):
        if len(vocab) >= n_pieces:
            break
        piece = sp.id_to_piece(i)
        if sp.is_unknown(i) or sp.is_control(i) or len(piece) == 1:  # "▁", and the characters placed above
            continue
        vocab.setdefault(piece[1:] if piece.startswith("▁") else PREFIX + piece, len(vocab))
    return vocab


def wordpiece_tokenizer(vocab: dict[str, int]):
    """A `tokenizers` WordPiece tokenizer laid out like BERT's (cased): `vocab`, BERT's normaliser and
    pre-tokenizer, its specials as special tokens, one sequence framed [CLS] $A [SEP]."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors

    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=MAX_WORD))
    tok.normalizer, tok.pre_tokenizer = bert_parts()
    tok.decoder = decoders.WordPiece(prefix=PREFIX)
    tok.add_special_tokens([AddedToken(name, special=True, normalized=False) for name in BERT_SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tok
