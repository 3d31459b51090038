"""Benchmarks: `python -m benchmarks.<name> [--quick]`; each has `run(quick) -> dict` and prints a table."""
