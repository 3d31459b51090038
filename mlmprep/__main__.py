"""`python -m mlmprep ...` is the `mlmprep` command (torchrun launches it this way)."""

from mlmprep.cli import main

main()
