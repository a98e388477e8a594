"""Synthetic corpora for benchmarks at sizes the real data does not reach."""
