"""Shared array primitives: no I/O, no config."""
