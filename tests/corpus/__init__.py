"""Tests of mlmprep.corpus: finding corpus files, reading each format, shards, the built-in sample."""
