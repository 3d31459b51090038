"""Tokenizers: loading one and looking up its special ids (`load`), encoding documents (`encode`), and training one
(`train`) with SentencePiece's trainers, their models converted to `tokenizers` files (`unigram`: T5's Unigram;
`wordpiece`: BERT's WordPiece). Below the builder, the format and the trainer, which all use it; imports none of
them (only `errors`)."""
