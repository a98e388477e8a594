"""MuSiQue / HippoRAG adapter: corpus passages as nodes, questions as queries, supporting paragraphs as qrels.

``path`` is the questions file (``musique_train.json[.gz]`` or HippoRAG's ``sample.json``); the corpus
(a list of ``{title, text}``) defaults to the sibling ``*_corpus.json[.gz]``. A supporting paragraph is
matched to the corpus on (title, text); one that matches no passage is a :class:`DataError`.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.adapters.common import QREL_COLUMNS, finish, read_json, require_file
from pipeline.contract import schema
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import DataError

_HOPS = re.compile(r"(\d+hop)")


def corpus_path(questions: str | Path) -> Path:
    """``musique_train.json.gz`` -> ``musique_train_corpus.json.gz``; ``sample.json`` -> ``sample_corpus.json``."""
    p = Path(questions)
    if ".json" not in p.name:
        raise DataError(
            str(p),
            "cannot derive the corpus file name (no '.json' in the name)",
            "pass data.corpus=<corpus file>",
        )
    return p.with_name(p.name.replace(".json", "_corpus.json", 1))


def _text(obj: object, keys: tuple[str, ...], where: str, row: str) -> str:
    for key in keys:
        if isinstance(obj, dict) and isinstance(obj.get(key), str):
            return obj[key]
    raise DataError(
        where, "missing or not a string", f"give it a '{keys[0]}'", row=row, field=keys[0]
    )


def _list(data: object, where: str, what: str) -> list:
    if not isinstance(data, list):
        raise DataError(
            where, f"expected a JSON list of {what}", f"pass a HippoRAG/MuSiQue {what} file"
        )
    return data


def _read_corpus(cp: Path) -> tuple[list[dict], dict[tuple[str, str], str]]:
    """The node rows of the corpus, and the first node id of each (title, text) passage."""
    cw = str(cp)
    nodes, index = [], {}
    for i, passage in enumerate(_list(read_json(cp), cw, "passages")):
        title, text = _text(passage, ("title",), cw, str(i)), _text(passage, ("text",), cw, str(i))
        nodes.append(
            {"node_id": str(i), "title": title, "text": f"{title}\n{text}", "doc_id": str(i)}
        )
        index.setdefault((title, text), str(i))
    return nodes, index


def _supporting(item: dict, i: int, qid: str, index: dict, qw: str, cw: str) -> list[str]:
    """The node ids of a question's supporting paragraphs, first occurrence order, no repeats."""
    paragraphs = item.get("paragraphs") or []
    if not isinstance(paragraphs, list):
        raise DataError(
            qw, "not a list", "write paragraphs as a list", row=str(i), field="paragraphs"
        )
    found: list[str] = []
    for j, para in enumerate(paragraphs):
        if not (isinstance(para, dict) and para.get("is_supporting")):
            continue
        row = f"{i} ({qid}) paragraphs[{j}]"
        key = (
            _text(para, ("title",), qw, row),
            _text(para, ("paragraph_text", "text"), qw, row),
        )
        if key not in index:
            raise DataError(
                qw,
                f"supporting paragraph {key[0]!r} matches no passage in {cw}",
                "use the corpus file built for these questions (data.corpus)",
                row=row,
                field="paragraph_text",
            )
        if index[key] not in found:
            found.append(index[key])
    return found


def _read_questions(qp: Path, index: dict, cw: str) -> tuple[list[dict], list[dict]]:
    """The query rows (hop count as group) and the qrel rows of their supporting passages."""
    qw = str(qp)
    queries, qrels = [], []
    for i, item in enumerate(_list(read_json(qp), qw, "questions")):
        qid = _text(item, ("id", "_id"), qw, str(i))
        hops = _HOPS.match(qid)
        queries.append(
            {
                "query_id": qid,
                "text": _text(item, ("question",), qw, str(i)),
                "group": hops.group(1) if hops else None,
            }
        )
        for node_id in _supporting(item, i, qid, index, qw, cw):
            qrels.append({"query_id": qid, "node_id": node_id, "relevance": 1})
    return queries, qrels


def load(
    path: str, *, name: str = "musique", limit_queries: int | None = None, corpus: str | None = None
) -> Dataset:
    """Load MuSiQue-style questions and their passage corpus; ``limit_queries`` keeps the whole corpus."""
    qp = require_file(path, "MuSiQue questions file")
    cp = require_file(corpus if corpus is not None else corpus_path(qp), "MuSiQue corpus file")
    qw, cw = str(qp), str(cp)
    nodes, index = _read_corpus(cp)
    queries, qrels = _read_questions(qp, index, cw)
    return finish(
        name,
        schema.frame(nodes, "nodes", ("node_id", "title", "text", "doc_id"), cw),
        schema.frame(queries, "queries", ("query_id", "text", "group"), qw),
        (qp, cp),
        limit_queries,
        qrels=schema.frame(qrels, "qrels", QREL_COLUMNS, qw),
    )
