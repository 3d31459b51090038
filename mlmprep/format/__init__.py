"""The on-disk format (docs/format.md): ragged rows in memory (`rows`), split files and the manifest
(`write`), publishing a build atomically (`publish`), reading it back memory-mapped (`load`), and the text
summary `inspect` prints (`report`). Imports only the shared top-level modules, never `builder`, `train` or
torch, so both the build and the trainer can use it."""
