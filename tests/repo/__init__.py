"""Tests of the repository itself: the docs site, the README, the rooms, the mutant list, the benchmarks docs."""
