"""OKS's own ``recall()`` with the search backend the instance's ``settings/recall.yaml`` selects
(``scripts/parity/parity_oks.py`` runs it for an instance whose backend is not fts5; the fts5 runs go
through ``../shared/oracles/oks_recall.py``).

    OKS_ROOT=<instance copy> HOME=<scratch> PYTHONPATH=<oks src>/cli PYTHONHASHSEED=0 \\
        <oks venv>/bin/python scripts/parity/oks_backend_oracle.py QUERIES.jsonl OUT.jsonl LIMIT GOAL

Runs under OKS's venv (standard library and OKS only). Per query it calls exactly what
``oks recall Q --knowledge-only --explain --format json -n LIMIT --goal GOAL`` calls
(``load_recall_params()`` then ``recall(..., search_backend=None)``: the backend comes from the
settings, OKS's code default ``native`` without them). One patch: OKS's memory curve
(``store.compute_score``) reads the wall clock; here the clock reads the newest ``created`` of the
pages (what ``recall run`` uses as the reference time), so both sides compute the same decay.

OUT line: ``{query_id, text, backend, hits: [{rank, slug, score, raw_score}], fts5_cut_tie}``; ``score`` is OKS's
printed relevance (3 places), ``raw_score`` the full float of the same hit: for ``native`` OKS's
own ``_compute_relevance_components(...)["final_score"]`` (the arguments ``recall`` passes), for
``fusion`` the score of ``FusionBackend.search`` (the ranking ``recall`` returns when the goal is
``none``); ``fts5_cut_tie`` (fusion): fts5's list of ``2·LIMIT`` pages it re-ranks ends inside an
exact bm25 tie (:func:`fts5_cut_tie`), so which pages it holds is FTS5's row order, arbitrary.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from pathlib import Path


def _created(meta: dict) -> _dt.datetime | None:
    """``store.compute_score``'s reading of ``created`` (None where it would use the clock)."""
    raw = meta.get("created", "")
    if isinstance(raw, _dt.datetime):
        t = raw
    elif isinstance(raw, _dt.date):
        t = _dt.datetime(raw.year, raw.month, raw.day)
    else:
        try:
            t = _dt.datetime.fromisoformat(str(raw))
        except (ValueError, TypeError):
            return None
    return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)


def freeze_clock() -> _dt.datetime:
    """Make ``store.datetime.now`` return the newest page ``created``; returns that time."""
    from knowledge_studio import store

    times = []
    for f in store.wiki_dir().rglob("*.md"):
        meta = store.parse_wiki_file(f) if f.name != "INDEX.md" else None
        if meta and (t := _created(meta)) is not None:
            times.append(t)
    fixed = max(times) if times else _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

    class Frozen(_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return fixed if tz else fixed.replace(tzinfo=None)

    store.datetime = Frozen
    return fixed


def native_raw(R, text: str, goal: str, slugs: list[str]) -> dict[str, float]:
    """Full-precision native relevance of ``slugs``, as ``_recall_knowledge_with_context``."""
    pages = R.list_wiki_pages()
    ctx = R._resolve_goal_context(goal)
    q = text.lower().strip()
    tokens = R._tokenize(q)
    idf = R.estimate_idf(list(tokens), [f"{p.get('title', '')} {p.get('body', '')}" for p in pages])
    out = {}
    for p in pages:
        if p["slug"] in slugs and p["slug"] not in out:
            out[p["slug"]] = R._compute_relevance_components(p, q, tokens, None, ctx, idf=idf)[
                "final_score"
            ]
    return out


def fts5_cut_tie(be, text: str, limit: int) -> bool:
    """Whether ``FTS5Backend.search(text, limit)`` cuts through an exact bm25 tie: at its window
    of ``4·limit`` node rows or at its ``limit``-th page (OKS orders equal scores by FTS5 row
    order, so which pages fusion sees there is arbitrary)."""
    expr = be._build_match_expr(text)
    if expr is None:
        return False
    w = be._weights
    sql = (
        f"SELECT f.slug, bm25(wiki_fts, 0, 0, {w['title']}, {w['body']}, {w['tags']}, "
        f"{w['code_blocks']}) AS rank FROM wiki_fts f WHERE wiki_fts MATCH ? ORDER BY rank"
    )
    rows = be._conn.execute(sql, (expr,)).fetchall()
    same = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-12)  # noqa: E731
    n = 4 * limit
    if len(rows) > n and same(rows[n - 1][1], rows[n][1]):
        return True
    best: dict[str, float] = {}
    for slug, rank in rows:
        best.setdefault(slug, rank)
    scores = list(best.values())
    return len(scores) > limit and same(scores[limit - 1], scores[limit])


def main() -> int:
    """Command line: see the module docstring."""
    queries, out_path, limit, goal = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    from knowledge_studio import recall as R
    from knowledge_studio.search import get_backend
    from knowledge_studio.store import repo_root

    fixed = freeze_clock()
    backend = R.load_recall_params().get("search_backend", "native")
    rows = [json.loads(x) for x in Path(queries).read_text("utf-8").splitlines() if x.strip()]
    with open(out_path, "w", encoding="utf-8") as out:
        for q in rows:
            text = str(q["text"])
            R.load_recall_params()
            res = R.recall(
                query=text, topic_id=None, limit=limit, scope=None, goal=goal, explain=True,
                user_id=None, project_slug=None, type_filter=None, knowledge_only=True,
                search_backend=None,
            )  # fmt: skip
            slugs = [h["slug"] for h in res["knowledge"]]
            tie = False
            if backend == "fusion":
                raw = {h.slug: h.score for h in get_backend("fusion", root=str(repo_root())).search(
                    text, limit=limit)}  # fmt: skip
                be = get_backend("fts5", root=str(repo_root()))
                tie = fts5_cut_tie(be, text, 2 * limit)
                be.close()
            else:
                raw = native_raw(R, text, goal, slugs)
            hits = [
                {"rank": h["rank"], "slug": h["slug"], "score": h["relevance"],
                 "raw_score": raw.get(h["slug"])}
                for h in res["knowledge"]
            ]  # fmt: skip
            rec = {"query_id": q["query_id"], "text": text, "backend": backend, "hits": hits,
                   "fts5_cut_tie": tie}  # fmt: skip
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print(json.dumps({"backend": backend, "clock": fixed.isoformat()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
