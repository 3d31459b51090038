"""Reading a corpus: which files paths and globs name (`sources`), how each format is read (`readers`), how
files are cut into byte ranges for parallel reading (`shards`), the built-in sample (`sample`), and the
whole corpus as one object with a fingerprint (`documents`). Imports only `errors`, `config` and
`tokenize` from the rest of mlmprep; never torch."""
