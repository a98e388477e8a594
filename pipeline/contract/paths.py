"""Where the package finds its Hydra configs (kept import-free: ``recall --help`` reads it)."""

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
