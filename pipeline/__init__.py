"""Batch recall for agent memory: the ST-BME / ReMe / OKS family of recall algorithms, run over
thousands to millions of queries at once on a GPU or the CPU."""

from omegaconf import OmegaConf

__version__ = "0.1.0"

# Arithmetic for config values derived from others, e.g. ReMe's candidates = min(200, int(k × 5)):
# ``${min:200,${mul:${k},5}}``.
OmegaConf.register_new_resolver("min", lambda *xs: min(xs), replace=True)
OmegaConf.register_new_resolver(
    "mul", lambda a, b: max(1, int(a * b)), replace=True
)  # integer, ≥ 1
OmegaConf.register_new_resolver(
    "if_eq", lambda a, b, then, other: then if str(a) == str(b) else other, replace=True
)  # ${if_eq:${inject.format},oks,10,5}: one value for one setting of another key
__all__ = ["__version__"]
