"""Tests of the command line (mlmprep.cli): the commands end to end, their refusals and their help."""
