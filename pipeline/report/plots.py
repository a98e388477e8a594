"""Report figures as PNG files. Each function draws one figure and returns the PNG's path.

Figures are drawn on a bare ``matplotlib.figure.Figure`` with the Agg canvas (no pyplot state,
no GUI backend), at a fixed size and dpi, and saved without the "Software" tag, so the same inputs
give the same bytes.
"""

from __future__ import annotations

import io as _io
import re
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contract import io

DPI = 110
TITLE, LABEL, TICK = 13, 11, 9
COMPONENTS = ("score", "dense", "lexical", "fused", "graph", "residual", "signal", "recency")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
NOT_COMPONENTS = {"query_id", "rank", "node_id", "doc_id", "channel", "query_idx", "node_idx"}


def available() -> bool:
    """Whether matplotlib can be imported (checked at call time, so tests can patch it)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def recall_curve(runs: dict[str, dict], path: str | Path, title: str = "Recall@k") -> Path:
    """runs: name → flat metrics (``recall@k`` keys) → one line per run, k on a log axis."""
    fig, ax = _figure(7.0, 4.2)
    all_k: set[int] = set()
    for i, (name, metrics) in enumerate(runs.items()):
        ks = sorted(int(m.split("@")[1]) for m in metrics if re.fullmatch(r"recall@\d+", m))
        all_k |= set(ks)
        ax.plot(
            ks,
            [metrics[f"recall@{k}"] for k in ks],
            marker=MARKERS[i % len(MARKERS)],
            ms=6,
            lw=1.8,
            label=name,
            color=_color(i),
        )
    if all_k:
        ax.set_xscale("log")
        ax.set_xticks(sorted(all_k), [str(k) for k in sorted(all_k)])
        ax.minorticks_off()
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    _labels(ax, title, "k (cut-off)", "recall@k")
    if runs:
        ax.legend(fontsize=TICK, loc="lower right")
    return _save(fig, path)


def group_bars(runs: dict[str, dict], path: str | Path, metric: str = "ndcg@10") -> Path:
    """runs: name → ``by_group`` dict (group → metrics) → grouped bars, one colour per run."""
    groups = sorted({g for by in runs.values() for g in by})
    fig, ax = _figure(max(6.0, 1.2 * len(groups) + 2), 4.2)
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(groups))
    for i, (name, by) in enumerate(runs.items()):
        vals = [by.get(g, {}).get(metric, np.nan) for g in groups]
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, vals, width, label=name, color=_color(i))
    ax.set_xticks(x, [_short(g) for g in groups], fontsize=TICK)
    ax.set_ylim(0, 1.02)
    ax.grid(axis="y", alpha=0.3)
    _labels(ax, f"{metric} per query group", "query group", metric)
    if runs:
        ax.legend(fontsize=TICK)
    return _save(fig, path)


def score_components(recall: pl.DataFrame, path: str | Path) -> Path:
    """Histograms of each numeric score column of a recall.parquet frame (nulls dropped)."""
    cols = [c for c in recall.columns if c not in NOT_COMPONENTS and recall[c].dtype.is_numeric()]
    cols = sorted(
        cols, key=lambda c: (COMPONENTS.index(c) if c in COMPONENTS else len(COMPONENTS), c)
    )
    n_col = min(3, max(len(cols), 1))
    n_row = max(1, -(-len(cols) // n_col))
    fig, axes = _figure(3.4 * n_col, 2.8 * n_row, n_row, n_col)
    for i, ax in enumerate(np.ravel(axes)):
        if i >= len(cols):
            ax.set_axis_off()
            continue
        vals = recall[cols[i]].drop_nulls().drop_nans().cast(pl.Float64).to_numpy()
        ax.hist(vals, bins=30, color=_color(i), alpha=0.85)
        ax.set_title(f"{cols[i]} (n={len(vals)})", fontsize=LABEL)
        ax.set_xlabel("value", fontsize=TICK)
        ax.set_ylabel("rows", fontsize=TICK)
        ax.tick_params(labelsize=TICK - 1)
    fig.suptitle("Score components of recalled rows", fontsize=TITLE)
    return _save(fig, path)


def stage_latency(timings_s: dict[str, float], path: str | Path) -> Path:
    """Horizontal bars of seconds per stage (manifest ``timings_s``), in run order, top to bottom."""
    names, secs = list(timings_s), [float(v) for v in timings_s.values()]
    fig, ax = _figure(7.0, max(2.4, 0.4 * len(names) + 1.2))
    y = np.arange(len(names))
    ax.barh(y, secs, color=_color(0))
    ax.set_yticks(y, names, fontsize=TICK)
    ax.invert_yaxis()
    for yi, s in zip(y, secs):
        ax.text(s, yi, f" {s:.3g}s", va="center", fontsize=TICK - 1)
    ax.set_xlim(0, max(secs, default=1) * 1.18 or 1)
    ax.grid(axis="x", alpha=0.3)
    _labels(ax, f"Time per stage (total {sum(secs):.2f} s)", "seconds", "stage")
    return _save(fig, path)


def novelty(
    table: pl.DataFrame,
    path: str | Path,
    novelty_threshold: float | None = None,
    residual_threshold: float | None = None,
) -> Path:
    """novelty.parquet → histograms of novelty and residual norm, and the gates' pass rates."""
    fig, axes = _figure(12.0, 3.8, 1, 3)
    for ax, col, thr, i in (
        (axes[0], "novelty", novelty_threshold, 0),
        (axes[1], "residual_norm", residual_threshold, 1),
    ):
        vals = (
            table[col].drop_nulls().drop_nans().to_numpy() if col in table.columns else np.array([])
        )
        ax.hist(vals, bins=20, color=_color(i), alpha=0.85)
        if thr is not None:
            ax.axvline(thr, color="black", ls="--", lw=1.2, label=f"threshold {thr:g}")
            ax.legend(fontsize=TICK)
        _labels(ax, f"{col} (n={len(vals)})", col, "queries")
        ax.yaxis.get_major_locator().set_params(integer=True)
    gates = [c for c in ("novelty_gate", "residual_gate") if c in table.columns]
    rates = [float(table[c].cast(pl.Float64).mean() or 0.0) for c in gates]
    bars = axes[2].bar(gates, rates, color=[_color(2), _color(3)][: len(gates)])
    for b, r in zip(bars, rates):
        axes[2].text(
            b.get_x() + b.get_width() / 2, r, f"{r:.0%}", ha="center", va="bottom", fontsize=TICK
        )
    axes[2].set_ylim(0, 1.1)
    axes[2].tick_params(labelsize=TICK)
    _labels(axes[2], f"Gate pass rate ({table.height} queries)", "gate", "share of queries passing")
    return _save(fig, path)


def _figure(w: float, h: float, rows: int = 1, cols: int = 1):
    try:
        from matplotlib.figure import Figure
    except ImportError:  # matplotlib is optional: reports without figures still work
        raise ImportError("plots need matplotlib: pip install matplotlib") from None

    fig = Figure(figsize=(w, h), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=rows * cols == 1)
    return fig, (axes if rows * cols == 1 else np.ravel(axes))


def _labels(ax, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=TITLE)
    ax.set_xlabel(xlabel, fontsize=LABEL)
    ax.set_ylabel(ylabel, fontsize=LABEL)
    ax.tick_params(labelsize=TICK)


def _color(i: int) -> str:
    return f"C{i % 10}"


def _short(text: str, n: int = 18) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _save(fig, path: str | Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    io.atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def topics(topics_df: pl.DataFrame, recall_topics: pl.DataFrame | None, path: str | Path) -> Path:
    """topics.parquet (+ recall_topics.parquet) → topic sizes and how many topics each recall set spans."""
    fig, axes = _figure(12.0, 3.8, 1, 2)
    t = topics_df.sort("topic")
    axes[0].bar([str(x) for x in t["topic"].to_list()], t["size"].to_list(), color=_color(0))
    _labels(axes[0], f"Topic sizes ({t.height} topics)", "topic", "nodes (dominant topic)")
    if recall_topics is not None and recall_topics.height:
        counts = recall_topics["n_topics"].value_counts().sort("n_topics")
        axes[1].bar(
            [str(x) for x in counts["n_topics"].to_list()],
            counts["count"].to_list(),
            color=_color(1),
        )
    _labels(
        axes[1], "Recall spread over topics", "distinct topics in a query's recall set", "queries"
    )
    return _save(fig, path)
