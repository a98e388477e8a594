"""What the write-backs share: the store a finished run read."""

from __future__ import annotations

from pathlib import Path

from pipeline.contract.errors import UserError


def store_root(
    run_dir: Path, cfg: dict, target: str, what: str, fix: str, out: str | None = None
) -> Path:
    """The store to write into: ``out`` when given, else the ``data.path`` of the run whose
    config is ``cfg`` when it read ``data=<target>``; a run that read other data is a UserError
    naming the run, what it read, ``what`` the write-back needs and ``fix``."""
    if out:
        return Path(out)
    data = cfg.get("data") or {}
    if data.get("_target_") != target or not data.get("path"):
        raise UserError(
            f"{run_dir}: the run read data={data.get('_target_')!r}, not {what} "
            f"(data={target}); {fix}"
        )
    return Path(data["path"])
