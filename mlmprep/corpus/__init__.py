"""Reading a corpus: which files paths and globs name (`sources`), how each format is read (`readers`: the
reader of each format, in `text`, `jsonl` and `columnar`; what they share in `files`; compressed files streamed
by `streams`), how files are cut into byte ranges for parallel reading (`shards`), a `datasets` dataset
(`hub`), the built-in sample (`sample`), and the whole corpus as one object with a fingerprint (`documents`).
Imports only `errors`, `config`, `storage` and `tokenizer` from the rest of mlmprep; never torch."""
