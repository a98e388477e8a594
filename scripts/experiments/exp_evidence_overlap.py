"""Diagnostic (issue 17): per LoCoMo category, how many judged evidence turns share no content word
with their question, and where a run ranks those turns against the ones that do.

    python scripts/experiments/exp_evidence_overlap.py RUN_DIR [--data ../shared/data/locomo/locomo_dev5.json.gz]

A content word: lower-cased `\\w\\w+`, Snowball-stemmed (English), not a bm25s English stopword, not a
speaker's name, not one of the question words below. An evidence turn counts once per question
that cites it; "top 10 / top 50" is its rank in RUN_DIR's recall.parquet. Results: docs/results.md
("Why multi-hop and open-domain evidence is missed").
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import polars as pl
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from pipeline.adapters import locomo
from pipeline.contract.errors import reported

QUESTION_WORDS = {"would", "likely", "did", "does", "has", "have", "what", "when", "how", "many"}
NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "5": "adversarial",
}


def stop_words(nodes: pl.DataFrame) -> set[str]:
    """bm25s's English stopwords, the speakers' names (lower-cased) and QUESTION_WORDS."""
    return (
        set(STOPWORDS_EN)
        | {s.lower() for s in nodes["speaker"].drop_nulls().unique()}
        | (QUESTION_WORDS)
    )


def content_words(text: str, stop: set[str], stem) -> set[str]:
    return {stem(w) for w in re.findall(r"\w\w+", text.lower()) if w not in stop}


def evidence_table(run_dir: Path, data: Path) -> pl.DataFrame:
    ds = locomo.load(str(data))
    text = dict(zip(ds.nodes["node_id"], ds.nodes["text"]))
    stop = stop_words(ds.nodes)
    stem = Stemmer.Stemmer("english").stemWord
    question = dict(zip(ds.queries["query_id"], ds.queries["text"]))
    group = dict(zip(ds.queries["query_id"], ds.queries["group"]))
    recall = pl.read_parquet(run_dir / "recall.parquet")
    rank = {(q, n): r for q, n, r in recall.select("query_id", "node_id", "rank").iter_rows()}
    judged = set(pl.read_parquet(run_dir / "per_query.parquet")["query_id"])
    rows = []
    for qid, nid in ds.qrels.select("query_id", "node_id").iter_rows():
        if qid not in judged or nid not in text:
            continue
        body = re.sub(r"^\w+: ", "", text[nid])  # the turn without its "Speaker: " prefix
        shared = content_words(question[qid], stop, stem) & content_words(body, stop, stem)
        r = rank.get((qid, nid), 10**9)
        rows.append((group[qid], bool(shared), r <= 10, r <= 50))
    return pl.DataFrame(rows, schema=["category", "shares", "top10", "top50"], orient="row")


def report(table: pl.DataFrame) -> str:
    lines = [
        "| category | evidence turns | share no content word | of those, top 10 / top 50 "
        "| turns that share a word, top 10 / top 50 |",
        "|---|---:|---:|---:|---:|",
    ]
    for cat in sorted(table["category"].unique()):
        sub = table.filter(pl.col("category") == cat)
        no, yes = sub.filter(~pl.col("shares")), sub.filter(pl.col("shares"))

        def pct(t: pl.DataFrame, c: str) -> str:
            return f"{100 * t[c].mean():.1f}%" if t.height else "-"

        lines.append(
            f"| {cat} {NAMES.get(cat, '')} | {sub.height} | {no.height} "
            f"({100 * no.height / sub.height:.0f}%) | {pct(no, 'top10')} / {pct(no, 'top50')} "
            f"| {pct(yes, 'top10')} / {pct(yes, 'top50')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/locomo/locomo_dev5.json.gz"))
    args = ap.parse_args(argv)
    return reported(lambda: print(report(evidence_table(args.run_dir, args.data)), end=""))


if __name__ == "__main__":
    sys.exit(main())
