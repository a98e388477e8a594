"""TREC run and qrels files: write ours, read anyone's, and import a run file as a run directory.

Run lines are ``q_id Q0 doc_id rank score tag``; qrels lines are ``q_id 0 doc_id relevance``.
Tools that read run files (trec_eval, ranx) order a query's results by score, not by the rank
column, and trec_eval (pytrec_eval too) keeps a score as a 32-bit float. ``score="score"`` (the
default) writes the stored scores, except that a score whose float32 is not strictly below the
float32 of the one written on the row above (a tie, scores closer than float32 tells apart, or a
selection stage such as ``select=dpp|mmr`` that ranks a higher score lower) is written as one
float32 step below that one: sorting the file by score then gives exactly the rank order, and
every other score is written as stored (float64).
``score="rank"`` writes ``1/rank`` instead.
"""

from __future__ import annotations

import datetime as dt
import io as _io
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contract import io
from pipeline.contract.errors import ConfigError, DataError, require_one_of
from pipeline.metrics import evaluate

LEVELS = ("node_id", "doc_id")
SCORES = ("score", "rank")
QRELS_FILE = "qrels.txt"


def to_ranking(recall: pl.DataFrame, level: str = "node_id") -> pl.DataFrame:
    """recall (query_id, rank, <level>, score) → (query_id, <level>, rank, score), ranks 1..n per query.

    ``level="doc_id"`` maps units to their document and keeps each document's first (best) rank,
    as evaluation does (an item repeated at node level also keeps its first rank).
    """
    require_one_of("level", level, LEVELS)
    missing = [c for c in ("query_id", "rank", level, "score") if c not in recall.columns]
    if missing:
        raise ConfigError(f"recall frame lacks columns {missing}; it has {recall.columns}")
    return evaluate.first_occurrence(recall, level, "score")


def rank_safe_scores(run: pl.DataFrame) -> pl.DataFrame:
    """``run`` (query_id, rank-sorted within each query) with ``score`` strictly decreasing in
    float32 down each query: a score whose float32 is not below the previous written one's becomes
    one float32 step below that (module docstring)."""
    scores = run["score"].cast(pl.Float64).to_numpy().copy()
    qids = run["query_id"].to_list()
    down = np.float32(-np.inf)
    prev = np.float32(0)
    for i in range(len(scores)):
        cur = np.float32(scores[i])
        if i and qids[i] == qids[i - 1] and not cur < prev:
            cur = np.nextafter(prev, down)
            scores[i] = float(cur)
        prev = cur
    return run.with_columns(score=pl.Series(scores, dtype=pl.Float64))


def write_run(
    recall: pl.DataFrame, path: str | Path, tag: str, level: str = "node_id", score: str = "score"
) -> Path:
    """Write ``recall`` as a TREC run file (atomically); returns the path.

    score: ``"score"`` writes the stored scores, nudged one float32 step where needed so that
    sorting by score gives the rank order (``rank_safe_scores``); ``"rank"`` writes ``1/rank``.
    """
    require_one_of("score", score, SCORES)
    if not tag or any(c.isspace() for c in tag):
        raise ConfigError(f"tag={tag!r}: a TREC tag must be one non-empty word without spaces")
    run = to_ranking(recall, level)
    _check_no_space(run, ("query_id", level), str(path))
    if score == "rank":
        run = run.with_columns(score=1.0 / pl.col("rank"))
    else:
        run = rank_safe_scores(run.sort("query_id", "rank"))
    out = run.select(
        "query_id",
        pl.lit("Q0").alias("q0"),
        level,
        "rank",
        pl.col("score").cast(pl.Float64),
        pl.lit(tag).alias("tag"),
    )
    return _write_lines(out, path)


def _write_lines(df: pl.DataFrame, path: str | Path) -> Path:
    """Space-separated lines, no header, written atomically."""
    buf = _io.BytesIO()
    df.write_csv(buf, separator=" ", include_header=False, quote_style="never")
    io.atomic_write_bytes(path, buf.getvalue())
    return Path(path)


def read_run(path: str | Path, level: str = "node_id") -> pl.DataFrame:
    """Read a TREC run file → (query_id, <level>, rank, score); raises DataError on a bad line."""
    require_one_of("level", level, LEVELS)
    rows: list[tuple[str, str, int, float]] = []
    seen: set[tuple[str, str]] = set()
    for n, fields in _lines(path, 6, "q_id Q0 doc_id rank score tag"):
        rank = _number(int, fields[3], path, n, "rank", "an integer rank ≥ 1")
        score = _number(float, fields[4], path, n, "score", "a number")
        if rank < 1:
            raise DataError(
                str(path), f"rank {rank} is below 1", "ranks start at 1", row=n, field="rank"
            )
        if (fields[0], fields[2]) in seen:
            raise DataError(
                str(path),
                f"doc {fields[2]!r} appears twice for query {fields[0]!r}",
                "keep one line per (query, doc)",
                row=n,
            )
        seen.add((fields[0], fields[2]))
        rows.append((fields[0], fields[2], rank, score))
    return pl.DataFrame(
        rows,
        schema={"query_id": pl.String, level: pl.String, "rank": pl.Int32, "score": pl.Float64},
        orient="row",
    )


def write_qrels(qrels: pl.DataFrame, path: str | Path) -> Path:
    """Write qrels (query_id, node_id|doc_id, relevance) as a TREC qrels file; returns the path."""
    level = "doc_id" if "doc_id" in qrels.columns else "node_id"
    out = qrels.select(
        "query_id", pl.lit(0).alias("iter"), level, pl.col("relevance").cast(pl.Int64)
    )
    out = out.sort("query_id", level)
    _check_no_space(out, ("query_id", level), str(path))
    return _write_lines(out, path)


def read_qrels(path: str | Path, level: str = "node_id") -> pl.DataFrame:
    """Read a TREC qrels file → (query_id, <level>, relevance); raises DataError on a bad line."""
    require_one_of("level", level, LEVELS)
    rows = [
        (f[0], f[2], _number(int, f[3], path, n, "relevance", "an integer relevance"))
        for n, f in _lines(path, 4, "q_id 0 doc_id relevance")
    ]
    return pl.DataFrame(
        rows, schema={"query_id": pl.String, level: pl.String, "relevance": pl.Int32}, orient="row"
    )


def _contract_qrels(path: str | Path) -> bool:
    """Whether a qrels file is in a format ``data.qrels`` takes: a TSV whose header names
    ``query_id``, or an OKS recall-case file; else it is read as TREC qrels."""
    from pipeline.adapters.query_files import is_recall_case

    p = Path(path)
    if not p.is_file():
        return False  # read_qrels names the missing file
    with p.open(encoding="utf-8", errors="replace") as fh:
        first = next((ln.rstrip("\n").split("\t") for ln in fh if ln.strip()), [])
    return "query_id" in first or is_recall_case(p)


def load_qrels(path: str | Path, level: str = "node_id") -> pl.DataFrame:
    """Qrels in any format ``data.qrels`` takes (``query_files``: a TSV with a header or an OKS
    recall-case file) or a TREC qrels file → (query_id, <level>, relevance). A run file names
    one kind of id, so the judged ids become ``level``'s whatever the file calls them."""
    require_one_of("level", level, LEVELS)
    if not _contract_qrels(path):
        return read_qrels(path, level)
    from pipeline.adapters.workspace import load_qrels as contract_qrels

    qrels = contract_qrels(path)
    target = "doc_id" if "doc_id" in qrels.columns else "node_id"
    return qrels.select("query_id", pl.col(target).alias(level), "relevance")


def import_run(
    run_path: str | Path,
    out_dir: str | Path,
    qrels_path: str | Path | None = None,
    level: str = "node_id",
    name: str | None = None,
) -> Path:
    """Turn a TREC run file into a run directory that ``report`` and ``compare`` accept.

    ``qrels_path``: a TREC qrels file or any format ``data.qrels`` takes (``load_qrels``).
    Writes recall.parquet, metrics.json and per_query.parquet (when qrels are given; the qrels are
    copied to ``qrels.txt`` so ``compare`` finds them) and manifest.json last. Returns ``out_dir``.
    """
    out_dir = Path(out_dir)
    run = read_run(run_path, level).sort(
        "query_id", "rank", pl.col("score"), descending=[False, False, True]
    )
    run = run.with_columns(rank=pl.int_range(1, pl.len() + 1).over("query_id").cast(pl.Int32))
    other = "doc_id" if level == "node_id" else "node_id"
    recall = run.select(
        "query_id", "rank", level, pl.col(level).alias(other), "score", channel=pl.lit("trec")
    )
    recall = recall.select("query_id", "rank", "node_id", "doc_id", "score", "channel")
    (out_dir / "manifest.json").unlink(missing_ok=True)
    io.write_parquet(out_dir / "recall.parquet", recall)
    outputs, data = ["recall.parquet"], {"name": "trec", "run_file": str(run_path)}
    if qrels_path is not None:
        qrels = load_qrels(qrels_path, level)
        write_qrels(qrels, out_dir / QRELS_FILE)
        queries = recall.select("query_id").unique(maintain_order=True)
        metrics, per_query = evaluate.evaluate(recall, qrels, queries, level)
        io.write_json(out_dir / "metrics.json", metrics)
        io.write_parquet(out_dir / "per_query.parquet", per_query)
        outputs += [QRELS_FILE, "metrics.json", "per_query.parquet"]
        data |= {"qrels_file": QRELS_FILE, "qrels_level": level}
    manifest = {
        "config": {"preset_name": name or Path(run_path).stem, "data": data},
        "dataset": "trec",
        "imported_from": str(run_path),
        "outputs": sorted(outputs),
        "rows": {"recall": recall.height, "queries": recall["query_id"].n_unique()},
        "timings_s": {},
        "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    io.write_json(out_dir / "manifest.json", manifest)
    return out_dir


def _lines(path: str | Path, n_fields: int, layout: str):
    """Yield (line number, fields) of the non-blank lines; DataError on a wrong field count."""
    path = Path(path)
    if not path.is_file():
        raise DataError(str(path), "file not found", "pass the path of an existing TREC file")
    any_line = False
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != n_fields:
                raise DataError(
                    str(path),
                    f"{len(fields)} fields in {line.strip()[:80]!r}, expected {n_fields}",
                    f"write each line as '{layout}', separated by spaces",
                    row=n,
                )
            any_line = True
            yield n, fields
    if not any_line:
        raise DataError(str(path), "the file has no lines", f"write one '{layout}' line per result")


def _number(kind: type, text: str, path, n: int, field: str, want: str):
    try:
        return kind(text)
    except ValueError:
        raise DataError(
            str(path),
            f"{field} {text!r} is not {want}",
            f"put {want} in the {field} column",
            row=n,
            field=field,
        ) from None


def _check_no_space(frame: pl.DataFrame, columns, where: str) -> None:
    for col in columns:
        bad = frame.filter(pl.col(col).cast(pl.String).str.contains(r"\s"))
        if bad.height:
            raise DataError(
                where,
                f"{col} {bad[col][0]!r} contains whitespace, which TREC files cannot hold",
                f"rename the ids so that no {col} contains spaces",
                field=col,
            )
