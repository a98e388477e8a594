"""BEIR adapter: ``corpus.jsonl[.gz]`` docs as nodes, ``queries.jsonl`` and ``qrels/{split}.tsv``.

Only queries judged in the split are kept. Qrels are node-level; score-0 rows stay as relevance 0.
``max_docs`` shrinks the corpus to the judged docs of the kept queries plus the first ``max_docs``
docs in corpus order (for quick slices).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from pipeline.adapters.common import QREL_COLUMNS, finish, read_jsonl, read_text, require_file
from pipeline.contract import schema
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError

_QREL_COLS = ("query-id", "corpus-id", "score")


def _corpus_file(root: Path) -> Path:
    for cand in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (root / cand).is_file():
            return root / cand
    return require_file(root / "corpus.jsonl", "BEIR corpus (corpus.jsonl or corpus.jsonl.gz)")


def _field(obj: dict, key: str, where: str, row: int, *, default: str | None = None) -> str:
    value = obj.get(key, default)
    if value is None or isinstance(value, (dict, list, bool)):
        raise DataError(
            where, "missing or not a string", f"give every line a '{key}'", row=row, field=key
        )
    return str(value)


def _read_qrels(path: Path) -> list[tuple[str, str, int]]:
    where = str(path)
    lines = read_text(path).splitlines()
    header = [h.strip() for h in lines[0].split("\t")] if lines else []
    lacking = [c for c in _QREL_COLS if c not in header]
    if lacking:
        raise DataError(
            where,
            f"header {header} lacks {lacking}",
            "start the file with 'query-id\\tcorpus-id\\tscore'",
            row="line 1",
            field=lacking[0],
        )
    at = [header.index(c) for c in _QREL_COLS]
    out = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        for col, j in zip(_QREL_COLS, at):
            if j >= len(cells) or not cells[j].strip():
                raise DataError(
                    where,
                    f"no '{col}' value",
                    "write query-id, corpus-id and score, tab-separated",
                    row=f"line {i}",
                    field=col,
                )
        qid, did, score = (cells[j].strip() for j in at)
        try:
            rel = int(float(score))
        except ValueError:
            raise DataError(
                where,
                f"score {score!r} is not a number",
                "use an integer score",
                row=f"line {i}",
                field="score",
            ) from None
        out.append((qid, did, rel))
    return out


def _files(root: Path, split: str) -> tuple[Path, Path, Path]:
    """The corpus, queries and qrels files of a BEIR folder, each checked to exist."""
    if not root.is_dir():
        raise DataError(
            str(root), "BEIR folder not found", "point data.path at a BEIR dataset folder"
        )
    corpus_p = _corpus_file(root)
    queries_p = require_file(root / "queries.jsonl", "BEIR queries.jsonl")
    qrels_p = require_file(root / "qrels" / f"{split}.tsv", f"BEIR qrels for split '{split}'")
    return corpus_p, queries_p, qrels_p


def _read_corpus(corpus_p: Path) -> list[dict]:
    """One node row per corpus doc (title and text joined), in corpus order."""
    cw = str(corpus_p)
    nodes = []
    for i, doc in enumerate(read_jsonl(corpus_p)):
        did, title = _field(doc, "_id", cw, i), _field(doc, "title", cw, i, default="")
        body = _field(doc, "text", cw, i)
        nodes.append(
            {
                "node_id": did,
                "text": f"{title}\n{body}" if title else body,
                "title": title,
                "doc_id": did,
            }
        )
    return nodes


def _read_judged(qrels_p: Path, texts: dict[str, str], qw: str) -> list[tuple[str, str, int]]:
    """The qrels rows of the split; a query-id with no query text is a DataError."""
    judged = _read_qrels(qrels_p)
    for i, (qid, _, _) in enumerate(judged):
        if qid not in texts:
            raise DataError(
                str(qrels_p),
                f"query-id {qid!r} is not in {qw}",
                "add the query or drop its qrels",
                row=f"line {i + 2}",
                field="query-id",
            )
    return judged


def _qrel_rows(judged: list[tuple[str, str, int]]) -> list[dict]:
    """The qrels as rows, keeping the first of each repeated (query, doc) pair."""
    seen: set[tuple[str, str]] = set()
    qrels = []
    for qid, did, rel in judged:
        if (qid, did) not in seen:
            seen.add((qid, did))
            qrels.append({"query_id": qid, "node_id": did, "relevance": rel})
    return qrels


def _frames(
    nodes: list[dict], queries: list[dict], qrels: list[dict], cw: str, qw: str, rw: str
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The conformed nodes, queries and qrels tables."""
    return (
        schema.frame(nodes, "nodes", ("node_id", "text", "title", "doc_id"), cw),
        schema.frame(queries, "queries", ("query_id", "text"), qw),
        schema.frame(qrels, "qrels", QREL_COLUMNS, rw),
    )


def _keep_docs(ds: Dataset, max_docs: int | None) -> Dataset:
    """``ds`` with its nodes cut to the first ``max_docs`` plus the judged ones (all when None)."""
    if max_docs is not None:
        keep = pl.int_range(pl.len()) < int(max_docs)
        ds.nodes = ds.nodes.filter(keep | pl.col("node_id").is_in(ds.qrels["node_id"].implode()))
    return ds


def load(
    path: str,
    *,
    name: str = "beir",
    split: str = "test",
    limit_queries: int | None = None,
    max_docs: int | None = None,
) -> Dataset:
    """Load a BEIR folder (``corpus.jsonl[.gz]``, ``queries.jsonl``, ``qrels/<split>.tsv``)."""
    corpus_p, queries_p, qrels_p = _files(Path(path), split)
    cw, qw, rw = str(corpus_p), str(queries_p), str(qrels_p)
    nodes = _read_corpus(corpus_p)
    texts = {
        _field(q, "_id", qw, i): _field(q, "text", qw, i)
        for i, q in enumerate(read_jsonl(queries_p))
    }
    judged = _read_judged(qrels_p, texts, qw)
    in_split = {qid for qid, _, _ in judged}
    queries = [{"query_id": q, "text": t} for q, t in texts.items() if q in in_split]
    node_df, query_df, qrel_df = _frames(nodes, queries, _qrel_rows(judged), cw, qw, rw)
    skipped: Counter = Counter()
    missing = qrel_df.filter(~pl.col("node_id").is_in(node_df["node_id"].implode())).height
    if missing:
        skipped["qrel_doc_missing"] = missing
    ds = finish(
        name,
        node_df,
        query_df,
        (corpus_p, queries_p, qrels_p),
        limit_queries,
        qrels=qrel_df,
        skipped=skipped,
    )
    return _keep_docs(ds, max_docs)
