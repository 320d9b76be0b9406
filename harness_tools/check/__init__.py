"""Judging a run: inputs (drawn per seed, poisoned tails), the oracle (reference outputs), comparison, one case request."""
