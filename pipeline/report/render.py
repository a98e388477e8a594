"""Markdown and HTML reports for one run directory or for a comparison.

The markdown links the PNGs by relative path (they sit next to it); the HTML inlines them as
base64 data URIs so it can be mailed or opened anywhere on its own. All files are written atomically.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from pipeline.contract import io
from pipeline.contract.errors import DataError
from pipeline.contract.rundir import upgrade_config
from pipeline.metrics.evaluate import judged_warning, metric_names
from pipeline.report import plots
from pipeline.report.compare import CompareResult, cells, format_table, markdown_table
from pipeline.report.per_query import wins_losses, worst_queries

CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px}"
    "td{text-align:right;font-variant-numeric:tabular-nums}td:first-child{text-align:left}"
    "th{background:#f3f3f3}img{max-width:100%;margin:0.5em 0}code{background:#f3f3f3;padding:0 3px}"
)


def run_report(run_dir: str | Path) -> tuple[Path, Path]:
    """Write report.md, report.html and report-*.png into a finished run directory."""
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise DataError(
            str(run_dir),
            "no manifest.json: not a run directory, or the run did not finish",
            "pass a finished run directory",
        )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    metrics = _json(run_dir / "metrics.json")
    cfg = upgrade_config(manifest.get("config", {}), f"{run_dir / 'manifest.json'}: config")
    facts = _run_facts(manifest, cfg)
    blocks: list[tuple[str, object]] = [
        ("h1", f"Run report: {run_dir.resolve().name}"),
        ("table", (["field", "value"], [[k, str(v)] for k, v in facts.items() if v is not None])),
    ]
    figures: list[tuple[str, Callable[[], Path]]] = []  # drawn only when matplotlib is present
    if metrics:
        blocks += [
            ("h2", "Metrics"),
            ("table", metrics_cells(metrics, cfg.get("evaluate", {}).get("metrics"))),
        ]
        blocks += _judged_blocks(metrics) + _worst_blocks(
            run_dir / "per_query.parquet", _main_metric(metrics)
        )
        figures += _metric_figures(metrics, run_dir)
    else:
        blocks.append(("p", "No metrics.json: the dataset has no qrels, so nothing was scored."))
    figures += _artifact_figures(run_dir, manifest, cfg)
    blocks += _figure_blocks(figures)
    return _write(blocks, run_dir / "report.md", run_dir / "report.html")


def _run_facts(manifest: dict, cfg: dict) -> dict:
    """The run's facts (dataset, preset, config hash, device, finish time, row counts) by label."""
    return {
        "dataset": manifest.get("dataset") or cfg.get("data", {}).get("name"),
        "preset": cfg.get("preset_name"),
        "config hash": manifest.get("config_hash"),
        "device": manifest.get("device"),
        "finished at": manifest.get("finished_at"),
        **{f"rows: {k}": v for k, v in manifest.get("rows", {}).items()},
    }


def _metric_figures(metrics: dict, run_dir: Path) -> list[tuple[str, Callable[[], Path]]]:
    """The (title, draw) pairs of a run's metric plots: recall@k curve, main metric per group."""
    name = run_dir.resolve().name
    figures: list[tuple[str, Callable[[], Path]]] = []
    if any(m.startswith("recall@") for m in metrics):
        figures.append(
            (
                "Recall@k",
                lambda: plots.recall_curve({name: metrics}, run_dir / "report-recall.png"),
            )
        )
    if metrics.get("by_group"):
        metric = _main_metric(metrics)
        figures.append(
            (
                f"{metric} per group",
                lambda: plots.group_bars(
                    {name: metrics["by_group"]}, run_dir / "report-groups.png", metric
                ),
            )
        )
    return figures


def _artifact_figures(
    run_dir: Path, manifest: dict, cfg: dict
) -> list[tuple[str, Callable[[], Path]]]:
    """The (title, draw) pairs of plots from the run's files: scores, latency, novelty, topics."""
    figures: list[tuple[str, Callable[[], Path]]] = []
    if (run_dir / "recall.parquet").is_file():
        figures.append(
            (
                "Score components",
                lambda: plots.score_components(
                    pl.read_parquet(run_dir / "recall.parquet"), run_dir / "report-scores.png"
                ),
            )
        )
    if manifest.get("timings_s"):
        figures.append(
            (
                "Latency per stage",
                lambda: plots.stage_latency(manifest["timings_s"], run_dir / "report-latency.png"),
            )
        )
    if (run_dir / "novelty.parquet").is_file():
        nov = cfg.get("novelty", {})
        figures.append(
            (
                "Novelty gate",
                lambda: plots.novelty(
                    pl.read_parquet(run_dir / "novelty.parquet"),
                    run_dir / "report-novelty.png",
                    nov.get("novelty_threshold"),
                    nov.get("residual_threshold"),
                ),
            )
        )
    if (run_dir / "topics.parquet").is_file():
        rt = run_dir / "recall_topics.parquet"
        figures.append(
            (
                "Corpus topics",
                lambda: plots.topics(
                    pl.read_parquet(run_dir / "topics.parquet"),
                    pl.read_parquet(rt) if rt.is_file() else None,
                    run_dir / "report-topics.png",
                ),
            )
        )
    return figures


def compare_report(result: CompareResult, out_dir: str | Path) -> tuple[Path, Path]:
    """Write compare.md, compare.html and compare-*.png into ``out_dir``."""
    out_dir = Path(out_dir)
    legend = format_table(result).split("\n\n")[1].split("\n")[0]  # the markers' legend line
    parts = [_html_table(*cells(result)), f"<p>{html.escape(legend.replace('`', ''))}</p>"]
    parts += [f"<h3>{html.escape(g)}</h3>{_html_table(*cells(result, g))}" for g in result.groups]
    blocks: list[tuple[str, object]] = [
        ("h1", f"Comparison of {len(result.runs)} runs"),
        ("h2", "Metrics"),
        ("md", format_table(result)),
        ("html", "\n".join(parts)),
    ]
    if len(result.runs) > 1:
        wl = wins_losses(result.per_query, result.baseline, result.metrics)
        blocks += [
            ("h2", f"Wins and losses per query against {result.baseline}"),
            ("table", (wl.columns, [[str(c) for c in r] for r in wl.iter_rows()])),
        ]
    means = {
        r: dict(zip(result.metrics, row))
        for r, row in zip(result.table["run"], result.table.select(result.metrics).iter_rows())
    }
    figures: list[tuple[str, Callable[[], Path]]] = []
    if any(m.startswith("recall@") for m in result.metrics):
        figures.append(
            ("Recall@k", lambda: plots.recall_curve(means, out_dir / "compare-recall.png"))
        )
    if result.groups:
        metric = "ndcg@10" if "ndcg@10" in result.metrics else result.metrics[0]
        by = {
            r: {
                g: dict(
                    zip(result.metrics, t.filter(pl.col("run") == r).select(result.metrics).row(0))
                )
                for g, t in result.groups.items()
            }
            for r in result.runs
        }
        figures.append(
            (
                f"{metric} per group",
                lambda: plots.group_bars(by, out_dir / "compare-groups.png", metric),
            )
        )
    blocks += _figure_blocks(figures)
    return _write(blocks, out_dir / "compare.md", out_dir / "compare.html")


def metrics_cells(
    metrics: dict, order: list[str] | None = None, digits: int = 4
) -> tuple[list[str], list[list[str]]]:
    """metrics.json → (header, rows): one row for all queries, then one per group.

    Columns follow ``order`` (the run's ``evaluate.metrics``), then the rest by name and cut-off.
    """
    names = metric_names(metrics)
    rank = {m: i for i, m in enumerate(order or [])}
    names.sort(key=lambda m: (rank.get(m, len(rank)), m.split("@")[0], _cutoff(m)))
    rows = [("all", metrics)] + sorted(metrics.get("by_group", {}).items())
    return (
        ["group", "n", *names],
        [
            [
                g,
                str(m.get("n_queries", "")),
                *[f"{m[x]:.{digits}f}" if x in m else "" for x in names],
            ]
            for g, m in rows
        ],
    )


def _figure_blocks(figures: list[tuple[str, Callable[[], Path]]]) -> list[tuple[str, object]]:
    if not figures:
        return []
    if not plots.available():
        return [
            ("h2", "Figures"),
            ("p", "matplotlib is not installed, so there are no figures (pip install matplotlib)."),
        ]
    return [("h2", "Figures")] + [("img", (title, draw())) for title, draw in figures]


def _write(blocks: list[tuple[str, object]], md_path: Path, html_path: Path) -> tuple[Path, Path]:
    md, body = [], []
    for kind, val in blocks:
        if kind in ("h1", "h2", "h3"):
            md.append("#" * int(kind[1]) + f" {val}\n")
            body.append(f"<{kind}>{html.escape(str(val))}</{kind}>")
        elif kind == "p":
            md.append(f"{val}\n")
            body.append(f"<p>{html.escape(str(val))}</p>")
        elif kind == "md":  # markdown only; its HTML twin is an "html" block
            md.append(f"{val}\n")
        elif kind == "html":
            body.append(str(val))
        elif kind == "table":
            md.append(markdown_table(*val) + "\n")
            body.append(_html_table(*val))
        elif kind == "img":
            title, path = val
            md.append(f"![{title}]({path.name})\n")
            data = base64.b64encode(path.read_bytes()).decode()
            body.append(
                f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(title)}</figcaption></figure>"
            )
    title = html.escape(str(blocks[0][1]))
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
    io.atomic_write_bytes(md_path, "\n".join(md).encode())
    io.atomic_write_bytes(html_path, page.encode())
    return md_path, html_path


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cutoff(metric: str) -> int:
    k = metric.split("@")[-1]
    return int(k) if k.isdigit() else 0


def _json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _main_metric(metrics: dict) -> str:
    return "ndcg@10" if "ndcg@10" in metrics else metric_names(metrics)[0]


def _judged_blocks(metrics: dict) -> list[tuple[str, object]]:
    return [("p", line) for line in judged_warning(metrics)]


def _worst_blocks(path: Path, metric: str, n: int = 10) -> list[tuple[str, object]]:
    """The run's worst queries on ``metric``, from per_query.parquet (absent in older runs)."""
    if not path.is_file():
        return []
    worst = worst_queries(pl.read_parquet(path), metric, n)
    rows = [
        [f"{v:.4f}" if isinstance(v, float) else "" if v is None else str(v) for v in r]
        for r in worst.iter_rows()
    ]
    return [("h2", f"Worst {worst.height} queries by {metric}"), ("table", (worst.columns, rows))]
