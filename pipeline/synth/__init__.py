"""Synthetic data for benchmarks and parity runs: corpora at sizes the real data does not reach, and
stores written in a system's own on-disk format (``reme_store``)."""
