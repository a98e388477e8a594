"""Batch recall for agent memory: the ST-BME / ReMe / OKS family of recall algorithms, run over
thousands to millions of queries at once on a GPU or the CPU."""

__version__ = "0.1.0"
__all__ = ["__version__"]
