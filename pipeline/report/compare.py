"""Compare finished run directories: per-query metrics against shared qrels, paired t-tests
against a baseline run, and a markdown table with significance (``*``) and best (``†``) markers.

A run's name is its folder name. Per-query values are read from each run's per_query.parquet when
every run has one with the metrics asked for, the same data config and the same queries; otherwise
they are computed as ``pipeline.metrics.evaluate`` computes metrics.json (trec_eval; doc-level qrels
rank documents by their best unit). Either way a run's mean equals its metrics.json value.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contract.errors import ConfigError, DataError, require_one_of


@dataclass
class Truth:
    """What runs are judged against: qrels (query_id, node_id|doc_id, relevance) and query groups."""

    qrels: pl.DataFrame
    groups: dict[str, str] = field(default_factory=dict)  # query_id → group; empty if ungrouped

    @property
    def level(self) -> str:
        """``doc_id`` or ``node_id``: the column the qrels judge."""
        return "doc_id" if "doc_id" in self.qrels.columns else "node_id"


@dataclass
class CompareResult:
    """``table``/``groups[g]``: one row per run: run, n_queries, <metric>, <metric>_p (vs baseline)."""

    runs: list[str]
    baseline: str
    metrics: list[str]
    table: pl.DataFrame
    groups: dict[str, pl.DataFrame]
    per_query: pl.DataFrame  # run, query_id, group, <metric>...
    run_dirs: dict[str, Path]
    max_p: float = 0.05
    ci: bool = False  # cells carry ± the half-width of each mean's 95% bootstrap interval


def compare(
    run_dirs: list[str | Path],
    baseline: str | None = None,
    metrics: list[str] | None = None,
    qrels: pl.DataFrame | None = None,
    queries: pl.DataFrame | None = None,
    max_p: float = 0.05,
    ci: bool = False,
) -> CompareResult:
    """Compare runs against ``baseline`` (a run name; default the first) with paired t-tests;
    with ``ci``, each mean also gets the half-width of its 95% percentile bootstrap interval over
    the table's queries (``pipeline.report.bootstrap``: the larger side, as ``ci_table.py`` shows).

    qrels/queries: the judgements (and optional ``group`` per query); when ``qrels`` is None they
    are re-loaded from the first run's manifest (``config.data``), and every run must share it.
    """
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ConfigError("compare needs at least one run directory")
    manifests = {d: _manifest(d) for d in dirs}
    names = _names(dirs)
    baseline = names[0] if baseline is None else baseline
    require_one_of("baseline", baseline, names)
    if metrics is None:
        metrics = list(
            manifests[dirs[0]].get("config", {}).get("evaluate", {}).get("metrics")
            or _default_metrics()
        )
    per_query = _stored_per_query(dirs, names, manifests, metrics) if qrels is None else None
    if per_query is None:
        truth = (
            Truth(qrels, _groups(queries)) if qrels is not None else _load_truth(dirs, manifests)
        )
        per_query = _computed_per_query(dirs, names, metrics, truth)
    per_query = per_query.select("run", "query_id", "group", *metrics)
    table = _table(per_query, names, baseline, metrics, ci)
    groups = {
        g: _table(per_query.filter(pl.col("group") == g), names, baseline, metrics, ci)
        for g in sorted(per_query["group"].drop_nulls().unique())
    }
    return CompareResult(
        names, baseline, list(metrics), table, groups, per_query, dict(zip(names, dirs)), max_p, ci
    )


def compare_dir(sweep_dir: str | Path, **kwargs) -> CompareResult:
    """``compare`` over every subfolder of ``sweep_dir`` (sorted by name) that holds a manifest.json."""
    sweep_dir = Path(sweep_dir)
    dirs = sorted(p.parent for p in sweep_dir.glob("*/manifest.json"))
    if not dirs:
        raise DataError(
            str(sweep_dir),
            "no subfolder holds a manifest.json (a finished run)",
            "pass the folder that holds the run directories, e.g. a --multirun sweep folder",
        )
    return compare(dirs, **kwargs)


def per_query_metrics(recall: pl.DataFrame, truth: Truth, metrics: list[str]) -> pl.DataFrame:
    """recall.parquet frame → (query_id, <metric>...) for every query with a relevant item."""
    from pipeline.metrics.evaluate import per_query

    out = per_query(recall, truth.qrels, truth.level, list(metrics))
    if not out.height:
        raise DataError("qrels", "no query has a relevant item", "pass qrels with relevance > 0")
    return out


def _computed_per_query(
    dirs: list[Path], names: list[str], metrics: list[str], truth: Truth
) -> pl.DataFrame:
    per_query = pl.concat(
        [
            per_query_metrics(pl.read_parquet(d / "recall.parquet"), truth, metrics).select(
                pl.lit(n).alias("run"), pl.all()
            )
            for n, d in zip(names, dirs)
        ]
    )
    if truth.groups:
        return per_query.with_columns(
            group=pl.col("query_id").replace_strict(truth.groups, default="none")
        )
    return per_query.with_columns(group=pl.lit(None, pl.String))


def _stored_per_query(
    dirs: list[Path], names: list[str], manifests: dict[Path, dict], metrics: list[str]
) -> pl.DataFrame | None:
    """The runs' per_query.parquet tables, or None when any run lacks one
    or the metrics, or the runs differ in data config or in the queries judged: then recompute."""
    data = {json.dumps(m.get("config", {}).get("data"), sort_keys=True) for m in manifests.values()}
    paths = [d / "per_query.parquet" for d in dirs]
    if len(data) != 1 or not all(p.is_file() for p in paths):
        return None
    tables = [pl.read_parquet(p) for p in paths]
    if any(not {"query_id", "group", *metrics} <= set(t.columns) for t in tables):
        return None
    qids = tables[0]["query_id"].sort()
    if not qids.len() or any(not t["query_id"].sort().equals(qids) for t in tables[1:]):
        return None
    return pl.concat(
        [
            t.select(pl.lit(n).alias("run"), "query_id", pl.col("group").cast(pl.String), *metrics)
            for n, t in zip(names, tables)
        ]
    )


def format_table(result: CompareResult, digits: int = 4) -> str:
    """Markdown: the overall table, then one per group, with a legend for the markers."""
    n = result.table["n_queries"].max()
    half = " `± h`: half-width of the 95% bootstrap interval over queries." if result.ci else ""
    parts = [
        markdown_table(*_cells(result, result.table, digits)),
        f"\nBaseline: `{result.baseline}`. `*` p < {result.max_p:g} vs the baseline (paired t-test over "
        f"{n} queries); `†` best in the column.{half}",
    ]
    for g, table in result.groups.items():
        parts += [f"\n### {g}\n", markdown_table(*_cells(result, table, digits))]
    return "\n".join(parts) + "\n"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured markdown table; the first column left-aligned, the rest right-aligned."""
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join([":---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def cells(
    result: CompareResult, group: str | None = None, digits: int = 4
) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of display strings for the overall table or one group's table."""
    return _cells(result, result.table if group is None else result.groups[group], digits)


def _cells(
    result: CompareResult, table: pl.DataFrame, digits: int
) -> tuple[list[str], list[list[str]]]:
    best = {m: table[m].max() for m in result.metrics}
    rows = []
    for row in table.iter_rows(named=True):
        name = row["run"] + (" (baseline)" if row["run"] == result.baseline else "")
        out = [name, str(row["n_queries"])]
        for m in result.metrics:
            p = row[f"{m}_p"]
            mark = "*" if p is not None and p < result.max_p else ""
            mark += "†" if abs(row[m] - best[m]) <= 1e-12 else ""
            half = f" ± {row[f'{m}_ci']:.{digits}f}" if result.ci else ""
            out.append(f"{row[m]:.{digits}f}{half}{mark}")
        rows.append(out)
    return ["run", "n", *result.metrics], rows


def _table(
    per_query: pl.DataFrame, names: list[str], baseline: str, metrics: list[str], ci: bool = False
) -> pl.DataFrame:
    from scipy.stats import ttest_rel

    from pipeline.report.bootstrap import bootstrap_ci

    wide = {n: per_query.filter(pl.col("run") == n).sort("query_id") for n in names}
    base = wide[baseline]
    rows = []
    for n in names:
        row: dict = {"run": n, "n_queries": wide[n].height}
        for m in metrics:
            row[m] = float(wide[n][m].mean()) if wide[n].height else float("nan")
            if ci:
                row[f"{m}_ci"] = (
                    bootstrap_ci(wide[n][m].to_numpy()).half if wide[n].height else float("nan")
                )
            diff = wide[n][m].to_numpy() - base[m].to_numpy()
            if n == baseline or len(diff) < 2:
                row[f"{m}_p"] = None
            elif np.abs(diff).max() <= 1e-12:
                row[f"{m}_p"] = 1.0  # identical per-query values: no evidence of a difference
            elif np.ptp(diff) <= 1e-12:
                row[f"{m}_p"] = 0.0  # the same nonzero difference on every query: t is infinite
            else:
                p = float(ttest_rel(wide[n][m].to_numpy(), base[m].to_numpy()).pvalue)
                row[f"{m}_p"] = None if math.isnan(p) else p
        rows.append(row)
    extra = ("_p", "_ci") if ci else ("_p",)
    schema = {
        "run": pl.String,
        "n_queries": pl.Int64,
        **{c: pl.Float64 for m in metrics for c in (m, *[m + e for e in extra])},
    }
    return pl.DataFrame(rows, schema=schema).select(
        "run", "n_queries", *metrics, *[m + e for e in extra for m in metrics]
    )


def _manifest(run_dir: Path) -> dict:
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise DataError(
            str(run_dir),
            "no manifest.json: not a run directory, or the run did not finish",
            "pass finished run directories (rerun the failed one)",
        )
    if not (run_dir / "recall.parquet").is_file():
        raise DataError(
            str(run_dir), "no recall.parquet", "pass a run directory written by 'recall run'"
        )
    from pipeline.contract.rundir import upgrade_config

    manifest = json.loads(path.read_text())
    return {**manifest, "config": upgrade_config(manifest.get("config", {}), f"{path}: config")}


def _names(dirs: list[Path]) -> list[str]:
    names = [d.resolve().name for d in dirs]
    if len(set(names)) < len(names):  # same folder name under different parents
        names = [f"{d.resolve().parent.name}/{d.resolve().name}" for d in dirs]
    if len(set(names)) < len(names):
        raise ConfigError(
            f"run directories {[str(d) for d in dirs]} repeat a name; pass each run once"
        )
    return names


def _groups(queries: pl.DataFrame | None) -> dict[str, str]:
    if queries is None or "group" not in queries.columns:
        return {}
    return dict(
        queries.select("query_id", pl.col("group").fill_null("none").cast(pl.String)).iter_rows()
    )


def _load_truth(dirs: list[Path], manifests: dict[Path, dict]) -> Truth:
    """Qrels from each run's data config (an imported TREC run's qrels file); all must agree."""
    cache: dict[str, Truth] = {}
    truths = []
    for d in dirs:
        spec = manifests[d].get("config", {}).get("data") or {}
        key = json.dumps(spec, sort_keys=True) if "_target_" in spec else str(d)
        if key not in cache:
            cache[key] = _truth_of(d, spec)
        truths.append(cache[key])
    first = truths[0]
    for d, t in zip(dirs[1:], truths[1:]):
        if not _same_qrels(first, t):
            raise ConfigError(
                f"runs {dirs[0]} and {d} are judged by different qrels; compare runs of one "
                "dataset, or pass the qrels to judge them all by"
            )
    return next((t for t in truths if t.groups), first)


def _truth_of(run_dir: Path, spec: dict) -> Truth:
    from pipeline.contract.registry import call_target
    from pipeline.report.trec import read_qrels

    if spec.get("qrels_file"):
        return Truth(read_qrels(run_dir / spec["qrels_file"], spec.get("qrels_level", "node_id")))
    if "_target_" not in spec:
        raise DataError(
            str(run_dir / "manifest.json"),
            "config.data has no _target_ to reload the qrels from",
            "pass the qrels explicitly",
            field="config.data",
        )
    ds = call_target(spec, f"{run_dir / 'manifest.json'}: config.data")
    if ds.qrels is None:
        raise DataError(
            str(run_dir),
            f"dataset {spec.get('name')!r} has no qrels",
            "compare runs of a judged dataset",
        )
    return Truth(ds.qrels, _groups(ds.queries))


def _same_qrels(a: Truth, b: Truth) -> bool:
    if a.level != b.level:
        return False
    cols = ["query_id", a.level, "relevance"]
    fa, fb = (
        t.qrels.select(*cols[:2], pl.col("relevance").cast(pl.Int64)).sort(cols) for t in (a, b)
    )
    return fa.equals(fb)


def _default_metrics() -> tuple[str, ...]:
    from pipeline.metrics.evaluate import DEFAULT_METRICS

    return DEFAULT_METRICS
