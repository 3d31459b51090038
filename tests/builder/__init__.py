"""Tests of the build stage: the driver, its engines, tokenizer training, cleaning, dedup, windows, masking, verify."""
