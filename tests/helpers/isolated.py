"""Isolated runs for comparisons: a reference never shares state with the run it checks.

Every test (and the differential harness) that compares two runs — a full run against a
precompute, Ray against local, before against after an edit, packed against one group at a time,
a reordered dataset against the original — makes each side with :func:`fresh_run` (or, for
``recall precompute``, takes its config from :func:`fresh_cfg`). Each side then has

- its own, new ``cache_dir`` (``<root>/<name>/cache``: the embedding cache, the candidate cache
  ``candidates/``, the recall cache ``recall/``, the memmaps), so no side reads back what the
  other one wrote (issue 26, items 7 and 8: a shared candidate cache let a before/after test
  compare a group's cached candidates with themselves);
- its own, new ``out_dir`` (``<root>/<name>/out``);
- its own memo: none (``runner.run``'s per-group memo) or, with ``with_memo=True``, a new empty
  dict kept across all of that run's groups — the path a Ray worker takes — and never one that
  another run has filled.

``<root>/<name>`` must not exist yet: giving two sides the same name is an error, not a silent
share. Typical use::

    from tests.helpers.isolated import fresh_run

    ref = fresh_run(cfg, tmp_path, "reference", dataset=ds)
    got = fresh_run(cfg_ray, tmp_path, "ray", dataset=ds)
    assert got.recall_bytes() == ref.recall_bytes()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from omegaconf import DictConfig, OmegaConf

from pipeline.run import runner


@dataclass
class Run:
    """One isolated run: its folders and what ``runner.run`` returned (out_dir, metrics, manifest)."""

    out_dir: Path
    cache_dir: Path
    result: dict

    @property
    def manifest(self) -> dict:
        """The run's manifest (as ``runner.run`` returned it)."""
        return self.result["manifest"]

    def recall(self) -> pl.DataFrame:
        """The run's ``recall.parquet`` as written (query order, then rank)."""
        return pl.read_parquet(self.out_dir / "recall.parquet")

    def recall_bytes(self) -> bytes:
        """The bytes of the run's ``recall.parquet``."""
        return (self.out_dir / "recall.parquet").read_bytes()


def fresh_cfg(cfg: DictConfig, root: str | Path, name: str) -> DictConfig:
    """A copy of ``cfg`` whose ``cache_dir`` and ``out_dir`` are new folders under ``root/name``
    (created empty here); a ValueError when ``root/name`` exists already, so two sides of a
    comparison can never be handed the same folders."""
    home = Path(root) / name
    if home.exists():
        raise ValueError(f"{home} exists: each side of a comparison needs its own fresh folder")
    (home / "cache").mkdir(parents=True)
    (home / "out").mkdir()
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    out.cache_dir, out.out_dir = str(home / "cache"), str(home / "out")
    return out


def fresh_run(
    cfg: DictConfig,
    root: str | Path,
    name: str,
    *,
    dataset=None,
    with_memo: bool = False,
) -> Run:
    """``runner.run`` of ``cfg`` (on ``dataset`` when given, else ``cfg.data``) with its own new
    cache, output folder and memo (:func:`fresh_cfg`); ``with_memo``: a new empty memo dict kept
    across the run's groups, as a Ray worker keeps one."""
    cfg = fresh_cfg(cfg, root, name)
    result = runner.run(cfg, cfg.out_dir, dataset=dataset, memo={} if with_memo else None)
    return Run(Path(cfg.out_dir), Path(cfg.cache_dir), result)
