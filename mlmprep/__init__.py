"""mlmprep: pretraining data for T5- and BERT-style models.

The stages of the data's way each live in their own module (corpus, clean, tokenize, windows, mask,
write, load, batch, collate, train); `mlmprep.build.build` runs the first six end to end.
"""

__version__ = "0.1.0"
