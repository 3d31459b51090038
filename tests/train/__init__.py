"""Tests of mlmprep.train: plans, collation, models, checkpoints, resume, mixtures, DDP and the loop."""
