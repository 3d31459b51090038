"""mlmprep: pretraining data for T5- and BERT-style models.

The package follows the data's way, one room per stage:

- `tokenizer/` loads, trains and converts tokenizers and encodes documents; below every other room;
- `corpus/`   finds and reads corpus files and datasets into documents;
- `builder/`  cleans, tokenizes, cuts windows and masks them, on local processes or Ray (`builder.run.build`);
- `format/`   the on-disk format: writing and publishing splits, reading them back, the text summary;
- `train/`    token-budget batching, collation, the model and the training loop (`train.loop.fit`);

with what every stage shares at the top: `config` (the options; `config_files` reads their values), `errors`,
`progress`, `storage`, and `compare`, which builds and trains both segmentation methods. The command line,
`mlmprep.cli`, lives in the repository's top-level `cli/` folder (installed as `mlmprep.cli`).
"""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it from here
# In mlmprep's own processes (the command line, a build's workers), the collector's youngest collection comes
# after this many new objects, not Python's 700: imports and reading make many that live to the end, which
# every collection would walk again (and every tenth, all of them).
GC_YOUNG = 10_000
