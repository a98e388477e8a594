"""Batch recall for agent memory: the ST-BME / ReMe / OKS family of recall algorithms, run over
thousands to millions of queries at once on a GPU or the CPU.

Importing the package loads only the standard library (``pipeline.resolvers``): the hooks
(``pipeline.hooks``) run inside OKS's and Hermes' processes, which may have none of the batch
engine's dependencies."""

from pipeline import resolvers

__version__ = "0.1.0"

resolvers.install()
__all__ = ["__version__"]
