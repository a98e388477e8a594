"""``pipeline.recall``: ``recall run`` called from Python, returning its outputs in memory.

The config is composed as ``recall run`` composes it: the same overrides, checked by the same
``pipeline.cli.main.check_overrides`` (a mistyped option is the same one-line ``UserError``), then
Hydra's compose of ``conf/config.yaml`` under the same guarded loader (``pipeline.cli.hydra_guard``),
then the same ``pipeline.run.runner.run``. So ``recall(...)`` and ``recall run ...`` with the same
overrides write the same ``recall.parquet`` bytes (tests/system/test_api.py runs both).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from pipeline.cli import hydra_guard
from pipeline.cli.main import check_overrides
from pipeline.contract.dataset import Dataset, require_queries
from pipeline.contract.errors import ConfigError
from pipeline.contract.schema import conform
from pipeline.run import runner

if TYPE_CHECKING:
    from omegaconf import DictConfig

__all__ = ["recall", "RecallResult", "overrides_of", "compose", "spell"]


@dataclass(frozen=True, eq=False)
class RecallResult:
    """What :func:`recall` returns: a run's outputs, read back from its run directory.

    Attributes:
        recall: the recall frame, one row per (query_id, rank) (the run's ``recall.parquet``).
        metrics: the metrics (the run's ``metrics.json``), or None when the data has no qrels.
        manifest: the run's manifest (resolved config and its hash, inputs, versions, device,
            per-stage seconds and row counts).
        out_dir: the run directory, or None when the run went to a temporary one, now removed.
        injection: the injection blocks (the run's ``injection.parquet``), or None unless
            ``inject.format`` names a format.
    """

    recall: pl.DataFrame
    metrics: dict | None
    manifest: dict
    out_dir: Path | None
    injection: pl.DataFrame | None = None


def spell(value: Any) -> str:
    """``value`` written as a command-line override value: a bool as ``true``/``false``, None as
    ``null``, a list or tuple as ``[a,b]``, a dict as ``{a:b}``, anything else (a str, a number, a
    Path) as ``str(value)`` (so a str is read by Hydra's override grammar, as on the command line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(spell(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{spell(v)}" for k, v in value.items()) + "}"
    return str(value)


def overrides_of(
    data: str | Dataset, preset: str, k: int | None, overrides: dict[str, Any]
) -> list[str]:
    """The ``recall run`` arguments that :func:`recall`'s arguments stand for.

    Args:
        data: a dataset name of ``conf/data`` (``data=<name>``), or a Dataset (no ``data=``).
        preset: a preset name of ``conf/preset`` (``preset=<name>``).
        k: the recall set size (``k=<k>``), or None for the preset's.
        overrides: ``{key: value}``; ``__`` in a key stands for ``.`` (``fuse__weights__lexical``
            is ``fuse.weights.lexical``), each value is written by :func:`spell`.

    Returns:
        The overrides, in that order (``data``, ``preset``, ``k``, then ``overrides``).

    Raises:
        ConfigError: for a ``hydra.*`` key (it configures Hydra's command-line job, which
            :func:`recall` does not start).
    """
    args = [] if isinstance(data, Dataset) else [f"data={data}"]
    args += [f"preset={preset}"] + ([] if k is None else [f"k={spell(k)}"])
    for key, value in overrides.items():
        key = key.replace("__", ".")
        if key.split(".")[0].lstrip("+~") == "hydra":
            raise ConfigError(
                f"{key}={spell(value)}: hydra settings configure the command line's Hydra job, "
                "which recall() does not start; use recall run for them"
            )
        args.append(f"{key}={spell(value)}")
    return args


def compose(args: list[str]) -> DictConfig:
    """The config ``recall run <args>`` runs with (its overrides checked first, as there).

    Args:
        args: Hydra overrides (``key=value``), as :func:`overrides_of` writes them.

    Returns:
        The composed config (without Hydra's own ``hydra`` node, as a ``recall run`` job sees it).

    Raises:
        UserError: a mistyped option or group choice (``check_overrides``'s line); a value Hydra
            cannot compose, as a ConfigError on one line.
    """
    check_overrides(args)
    for arg in args:  # Hydra's parse error names no override: name it here
        try:
            OverridesParser.create().parse_override(arg)
        except HydraException as exc:
            raise ConfigError(f"{arg!r}: {' '.join(str(exc).split())}") from None
    outer = GlobalHydra.instance().hydra  # a Hydra app calling recall(): its state is put back
    GlobalHydra.instance().clear()
    try:
        return hydra_guard.compose(args)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(" ".join(str(exc).split())) from None
    finally:
        GlobalHydra.instance().hydra = outer


def _conformed(ds: Dataset) -> Dataset:
    """``ds`` with each of its tables checked against the data contract (a DataError names the
    table and the row), and its queries present."""
    tables = {"nodes": ds.nodes, "queries": ds.queries, "edges": ds.edges, "qrels": ds.qrels}
    checked = {
        name: None if df is None else conform(df, name, f"Dataset {ds.name!r}: {name}")
        for name, df in tables.items()
    }
    require_queries(ds.name, checked["queries"])
    return replace(ds, **checked)


def _read(cfg: DictConfig, out_dir: str, dataset: Dataset | None, keep: bool) -> RecallResult:
    """Run ``cfg`` into ``out_dir`` and read its outputs back into memory."""
    cfg.out_dir = out_dir  # as `recall run out_dir=<out_dir>` has it
    out = Path(out_dir)
    got = runner.run(cfg, out, dataset=dataset)
    inj = out / "injection.parquet"
    return RecallResult(
        recall=pl.read_parquet(out / "recall.parquet", memory_map=False),
        metrics=got["metrics"],
        manifest=got["manifest"],
        out_dir=out if keep else None,
        injection=pl.read_parquet(inj, memory_map=False) if inj.exists() else None,
    )


def recall(
    data: str | Dataset = "sample",
    preset: str = "best",
    k: int | None = None,
    out_dir: str | Path | None = None,
    **overrides: Any,
) -> RecallResult:
    """Recall every query of ``data`` with ``preset``, as ``recall run`` does.

    ``recall("locomo", preset="bm25", k=10, embed="hashing", fuse__weights__lexical=0.3)`` is
    ``recall run data=locomo preset=bm25 k=10 embed=hashing fuse.weights.lexical=0.3``: the same
    config, the same checks and errors, the same recall rows.

    Args:
        data: a dataset name of ``conf/data`` (``"sample"``, ``"locomo"``, ``"workspace"``, …; its
            options as overrides: ``data__path="notes/"``), or a :class:`Dataset` built in Python
            (its tables are checked against the data contract; the config's ``data`` node stays
            the default and is not read).
        preset: a preset of ``conf/preset`` (``best``, ``bm25``, ``reme``, ``oks``, ``bme``, …).
        k: recall set size per query; None keeps the preset's (50 unless the preset sets it).
        out_dir: the run directory to write (as ``out_dir=``; it is kept); None runs in a
            temporary directory that is removed once the outputs are read back.
        **overrides: any other config key, as ``recall run`` takes it: ``__`` stands for ``.``
            in a nested key (``embed="hashing"``, ``device="cpu"``, ``report=False``,
            ``data__limit_queries=5``); a value is written as on the command line (a str as is,
            a bool as true/false, None as null, a list as ``[a,b]``).

    Returns:
        A :class:`RecallResult`: the recall frame, the metrics (None without qrels), the
        manifest, the run directory (None for a temporary one) and the injection blocks (None
        unless ``inject.format`` is set).

    Raises:
        UserError: bad input or options, with the same one-line message ``recall run`` prints
            (a :class:`~pipeline.contract.errors.DataError` names the file or table, the row and
            the field; a :class:`~pipeline.contract.errors.ConfigError` the option).
    """
    cfg = compose(overrides_of(data, preset, k, overrides))
    dataset = _conformed(data) if isinstance(data, Dataset) else None
    if out_dir is not None:
        return _read(cfg, str(out_dir), dataset, keep=True)
    with tempfile.TemporaryDirectory(prefix="recall-") as tmp:
        return _read(cfg, tmp, dataset, keep=False)
