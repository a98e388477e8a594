"""Access feedback: what a run recalled (or injected) goes back into the signals as a new table.

``recall feedback <run_dir> [--signals T] [--out P] [--injected] [--now ISO]`` reads the run's
recall (every (query, node) row; with ``--injected`` only the rows the injection layer kept), and
writes a **new** signals table (the input is never touched; ``revision`` = input revision + 1):

- BME reinforcement, once per (query, node) access: ``access_count + 1``, ``importance + 0.1``
  capped at 10 (a missing importance counts as 5), ``last_access_at = now``;
- ReMe's access log: ``access_days`` (list of UTC dates, one entry per (node, day)), from which
  ``hits_30d`` = the number of logged days in the 30 days up to the latest day the table has seen
  (``now``, its ``computed_at`` or a logged day, whichever is last), so feeding runs in any order
  gives the same table; ``last_access_at`` and ``computed_at`` keep the latest time.

Start values come from the input table's columns when it has them (an earlier feedback), else from
the run's node table. A run with ``signals.path=<new table>`` reads it through ``signals.for_group``: node
``access_count`` / ``importance`` / ``hits_30d`` are taken from it, and the per-node signals are
recomputed with them (ReMe recency counts ``hits_30d``; the OKS memory curve ``access_count``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import polars as pl

from pipeline.contract.errors import ConfigError, UserError
from pipeline.contract.rundir import upgrade_config
from pipeline.stages import signals

log = logging.getLogger(__name__)
WINDOW_DAYS = 30


def accesses(rows: pl.DataFrame) -> pl.DataFrame:
    """(node_id, n): the number of distinct queries that recalled each node."""
    return (
        rows.filter(pl.col("node_id").is_not_null())
        .unique(["query_id", "node_id"])
        .group_by("node_id")
        .agg(n=pl.len().cast(pl.Int64))
        .sort("node_id")
    )


def _start(table: pl.DataFrame, nodes: pl.DataFrame | None, col: str, dtype) -> pl.Expr:
    if col in table.columns:
        return pl.col(col).cast(dtype)
    if nodes is not None and col in nodes.columns:
        return pl.col(f"{col}__node").cast(dtype)
    return pl.lit(None, dtype=dtype)


def _old_times(table: pl.DataFrame) -> list[dt.datetime]:
    """The input table's ``computed_at`` (an earlier feedback's time), if any."""
    if "computed_at" not in table.columns:
        return []
    return [signals._utc(x) for x in table["computed_at"].drop_nulls().to_list()[:1]]


def _window_end(table: pl.DataFrame, days: pl.Series, now: dt.datetime) -> dt.date:
    """The last day of the hits window: the latest of ``now``, the table's ``computed_at`` and
    every logged access day (so the result does not depend on the order runs are fed in)."""
    logged = days.explode().drop_nulls()
    return max([now.date(), *(t.date() for t in _old_times(table)), *logged.to_list()])


def apply(
    table: pl.DataFrame, acc: pl.DataFrame, now: dt.datetime, nodes: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The next revision of ``table`` (one row per node, row order kept) after the accesses ``acc``."""
    now = signals._utc(now)
    today = now.date()
    t = table.join(acc, on="node_id", how="left", maintain_order="left").with_columns(
        pl.col("n").fill_null(0)
    )
    if nodes is not None:
        cols = [c for c in ("access_count", "importance", "last_access_at") if c in nodes.columns]
        t = t.join(
            nodes.select("node_id", *[pl.col(c).alias(f"{c}__node") for c in cols]),
            on="node_id",
            how="left",
            maintain_order="left",
        )
    hit = pl.col("n") > 0
    ts = pl.Datetime("us", "UTC")
    days = (
        pl.col("access_days")
        if "access_days" in t.columns
        else pl.lit(None, dtype=pl.List(pl.Date))
    )
    days = days.fill_null(pl.lit([], dtype=pl.List(pl.Date)))
    last = _start(t, nodes, "last_access_at", ts)
    t = t.with_columns(
        access_count=_start(t, nodes, "access_count", pl.Int64).fill_null(0) + pl.col("n"),
        importance=pl.min_horizontal(
            pl.lit(10.0),
            _start(t, nodes, "importance", pl.Float64).fill_null(5.0) + 0.1 * pl.col("n"),
        ),
        last_access_at=pl.when(hit)
        .then(pl.max_horizontal(last, pl.lit(now, dtype=ts)))
        .otherwise(last),
        access_days=pl.when(hit)
        .then(pl.concat_list(days, pl.lit(today, dtype=pl.Date)).list.unique().list.sort())
        .otherwise(days),
    )
    end = _window_end(table, t["access_days"], now)
    lo = end - dt.timedelta(days=WINDOW_DAYS - 1)
    t = t.with_columns(
        hits_30d=pl.col("access_days")
        .list.eval(pl.element().is_between(lo, end).sum())
        .list.first()
        .fill_null(0)
        .cast(pl.Int64)
    )
    now = max([now, *_old_times(table)])
    rev = (table["revision"].max() or 0) if "revision" in table.columns else 0
    t = t.with_columns(
        revision=pl.lit(rev + 1, pl.Int32),
        computed_at=pl.lit(now, dtype=ts),
        version=pl.lit(signals.SIGNALS_VERSION, pl.Int32),
    )
    return t.drop("n", *[c for c in t.columns if c.endswith("__node")])


def run_inputs(run_dir: Path, injected: bool) -> tuple[dict, pl.DataFrame]:
    """(the run's config, its recall rows; with ``injected`` only the rows the injection kept)."""
    man = run_dir / "manifest.json"
    if not man.is_file() or not (run_dir / "recall.parquet").is_file():
        raise UserError(
            f"{run_dir}: no manifest.json / recall.parquet; pass a finished run directory"
        )
    cfg = upgrade_config(json.loads(man.read_text())["config"], f"{man}: config")
    rows = pl.read_parquet(run_dir / "recall.parquet")
    if injected:
        if not (run_dir / "injection.parquet").is_file():
            raise UserError(
                f"{run_dir}: no injection.parquet; run with inject.format=bme|reme|oks or drop --injected"
            )
        shown = pl.read_parquet(run_dir / "injection.parquet")
        if "node_ids" not in shown.columns:
            raise UserError(
                f"{run_dir}: injection.parquet predates its node_ids column; rerun the run or drop --injected"
            )
        shown = shown.select("query_id", node_id="node_ids").explode("node_id")
        rows = rows.join(shown, on=["query_id", "node_id"], how="semi")
    return cfg, rows


def feedback_run(
    run_dir: str | Path,
    signals_path: str | None = None,
    out: str | None = None,
    injected: bool = False,
    now: dt.datetime | None = None,
) -> Path:
    """Write the next signals revision for a finished run; returns its path."""
    from pipeline.contract import io
    from pipeline.contract.ingest import drop_empty
    from pipeline.contract.registry import call_target

    run_dir = Path(run_dir)
    cfg, rows = run_inputs(run_dir, injected)
    src = Path(signals_path or cfg["signals"].get("path") or run_dir / "signals.parquet")
    if not src.is_file():
        raise UserError(
            f"{src}: no signals table; pass --signals <table> or run with signals=default"
        )
    table = pl.read_parquet(src)
    if "node_id" not in table.columns:
        raise ConfigError(f"{src}: not a signals table (no node_id column)")
    rev = ((table["revision"].max() or 0) if "revision" in table.columns else 0) + 1
    dst = Path(out) if out else run_dir / f"signals-r{rev}.parquet"
    if dst.exists() or dst.resolve() == src.resolve():
        raise UserError(f"{dst} exists; feedback never overwrites a table: pass another --out")
    nodes = None
    if not {"access_count", "importance"} <= set(table.columns):
        nodes, _q = drop_empty(
            call_target(cfg["data"], f"{run_dir / 'manifest.json'}: config.data")
        )
    acc = accesses(rows)
    unknown = acc.join(table.select("node_id"), on="node_id", how="anti").height
    if unknown:
        log.warning("%d recalled nodes are not in %s; they get no feedback", unknown, src)
    io.write_parquet(dst, apply(table, acc, now or dt.datetime.now(dt.timezone.utc), nodes))
    return dst
