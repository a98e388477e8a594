"""Where the oracles are: ``$RECALL_ORACLES``, else ``shared/oracles`` next to the repository or
next to any folder above it (``../shared/oracles`` from the main checkout, ``../../shared/oracles``
from a worktree under ``wt/``), so the parity scripts run from any clone."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def oracles() -> Path:
    """The oracles folder (``../shared/oracles/README.md`` describes it); the first candidate
    when none exists, so the error that follows names where it was looked for."""
    if os.environ.get("RECALL_ORACLES"):
        return Path(os.environ["RECALL_ORACLES"])
    tried = [up / "shared" / "oracles" for up in REPO.parents]
    return next((p for p in tried if (p / "README.md").is_file()), tried[0])
