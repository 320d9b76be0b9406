"""Benchmarks: scripts that print a table, run from the repository root as ``python -m benchmarks.NAME``."""
